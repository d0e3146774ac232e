"""World size and node shape of a config, each with where it came from.

Sources, highest precedence first (the first that gives a value wins; the
others are kept so disagreements can be reported):

1. the command line: ``--world-size N``, or ``--nodes N --gpus-per-node G``;
2. a directive comment in the file: ``# meshlint: world_size=32 gpus_per_node=4``;
3. a value the dialect itself declares (the native dialect's ``[mesh] world_size``);
4. the ``_<N>gpu`` file-name convention (``70b_32gpu_tp4.toml``) -- world size only;
5. the launch line in a comment (``srun --nodes=8 --ntasks-per-node=4``,
   ``torchrun --nproc_per_node=4``), then a shape in a comment (``8 nodes × 4 H200``).

Nothing is ever defaulted: a value no source gives stays unknown.
"""

from __future__ import annotations

from meshlint import fastre
from meshlint.record import Record
from meshlint.limits import MAX_WORLD  # 16,777,216 ranks: larger than any cluster; bigger is a typo

# Compiled on first use: a run answered from the results cache never needs them (fastre: precompiled, no re)
_PATTERNS = {
    "directive": lambda: fastre.compile(r"^\s*meshlint\s*:\s*(.*)$"),
    # ASCII digits only ([0-9], not \d: int() of other Unicode digits may fail or surprise), and the
    # number is taken whole, then range-checked by _count(): never int() of thousands of digits
    "filename_gpus": lambda: fastre.compile(r"(?:^|[_\-.])([0-9]+)gpus?(?=[_\-.]|$)", fastre.IGNORECASE),
    "shape": lambda: fastre.compile(r"\b([0-9]+)\s*(?:nodes?|hosts?)\s*(?:[x×*]|by)\s*([0-9]+)\b", fastre.IGNORECASE),
    "flag": lambda: fastre.compile(r"--(nproc[_-]per[_-]node|nnodes|nodes|ntasks[_-]per[_-]node|gpus[_-]per[_-]node"
                                   r"|ntasks)[= ]([0-9]+)\b"),
    # "Single GPU:  python scripts/train.py"
    "plain_run": lambda: fastre.compile(r"^\W*(?:[\w ]+:)?\s*python3?\s+\S+\.py\b"),
    "launcher": lambda: fastre.compile(r"\b(torchrun|srun|sbatch|salloc|mpirun)\b"),
}
_COMPILED: dict = {}


def _re(name: str):
    pattern = _COMPILED.get(name)
    if pattern is None:
        pattern = _COMPILED[name] = _PATTERNS[name]()
    return pattern


# A config's comments are read by three passes, and most are prose: each pattern is tried only on a comment that
# holds the literal text it cannot match without (a tenth of the cost, the same matches).
def _directive(text: str):
    return _re("directive").match(text) if "meshlint" in text else None


def _flags(text: str) -> dict:
    return {k.replace("-", "_"): _count(v) for k, v in _re("flag").findall(text)} if "--" in text else {}


def _may_be_shape(text: str) -> bool:
    # the "shape" pattern cannot match without "node" or "host" in some case; of their letters only s has a
    # non-ASCII partner under IGNORECASE (U+017F, its own lower case)
    low = text.lower()
    return "node" in low or "host" in low or "ho\u017ft" in low


def _plain_run(text: str) -> bool:
    return "python" in text and _re("plain_run").match(text) is not None and not _re("launcher").search(text)


DIRECTIVE_KEYS = {"world_size", "gpus_per_node", "nodes"}


class Hint(Record):
    """One statement about the topology from one source."""

    source: str                 # human-readable, e.g. 'file name "70b_32gpu_tp4.toml"'
    world_size: int | None = None
    gpus_per_node: int | None = None
    nodes: int | None = None
    # srun starting the ranks itself with fewer tasks per node than the nodes' GPUs: (tasks per node, GPUs per
    # node of the allocation, by SLURM's one-task-per-node default?, srun's line, col)
    idle: tuple | None = None


class Topology:
    """The merged result: each value with the source it came from."""

    def __init__(self, placement: str = "block"):
        self.world_size: int | None = None
        self.world_source: str | None = None
        self.gpus_per_node: int | None = None
        self.gpus_per_node_source: str | None = None
        self.placement = placement
        self.conflicts: list = []            # (what, kept source, kept value, other source, other value)
        self.srun_idle: dict | None = None   # the kept world is srun's with GPUs left idle (Hint.idle): see resolve
        self.gpu_memory_gib: float | None = None  # per-GPU memory, for the memory estimate
        self.directive_problems: list = []   # (line, col, message)

    @property
    def nodes(self) -> int | None:
        if self.world_size is None or not self.gpus_per_node:
            return None
        return -(-self.world_size // self.gpus_per_node)


class CliTopology(Record):
    world_size: int | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    placement: str = "block"

    def hint(self) -> Hint | None:
        if self.world_size is None and self.nodes is None and self.gpus_per_node is None:
            return None
        world = self.world_size
        if world is None and self.nodes is not None and self.gpus_per_node is not None:
            world = self.nodes * self.gpus_per_node  # over MAX_WORLD: dropped by resolve_topology
        parts = []
        if self.world_size is not None:
            parts.append(f"--world-size {self.world_size}")
        if self.nodes is not None:
            parts.append(f"--nodes {self.nodes}")
        if self.gpus_per_node is not None:
            parts.append(f"--gpus-per-node {self.gpus_per_node}")
        return Hint(" ".join(parts), world, self.gpus_per_node, self.nodes)


def directive_hints(comments: list) -> tuple[list[Hint], list]:
    """``# meshlint: world_size=32 gpus_per_node=4`` comments -> hints and problems."""
    hints, problems = [], []
    for line, col, text in comments:
        match = _directive(text)
        if not match:
            continue
        values: dict[str, int] = {}
        for token in match.group(1).split():
            if token.startswith("ignore") or token.startswith("#"):
                break  # suppressions and trailing prose are not topology
            key, eq, value = token.partition("=")
            if not eq:
                problems.append((line, col, f"directive item {token!r} is not key=value"))
                continue
            if key not in DIRECTIVE_KEYS:
                close = _closest(key, DIRECTIVE_KEYS)
                hint = f" (did you mean {close}?)" if close else ""
                problems.append((line, col, f"unknown directive key {key!r}{hint}; known: {', '.join(sorted(DIRECTIVE_KEYS))}"))
                continue
            number = _count(value)
            if number is None:
                shown = value if len(value) <= 40 else value[:37] + "..."
                problems.append((line, col, f"directive {key}={shown!r}: expected a whole number "
                                            f"from 1 to {MAX_WORLD:,}"))
                continue
            values[key] = number
        if values:
            world = values.get("world_size")
            gpn = values.get("gpus_per_node")
            nodes = values.get("nodes")
            if world is None and nodes is not None and gpn is not None:
                world = nodes * gpn
                if world > MAX_WORLD:
                    problems.append((line, col, f"directive nodes={nodes} × gpus_per_node={gpn} = {world:,} ranks: "
                                                f"more than {MAX_WORLD:,}"))
                    world = None
            hints.append(Hint(f"directive on line {line}", world, gpn, nodes))
    return hints, problems


def filename_hint(name: str) -> Hint | None:
    stem = name.rsplit(".", 1)[0] if name.endswith(".toml") else name
    found = {_count(m.group(1)) for m in _re("filename_gpus").finditer(stem)}
    if len(found) != 1:
        return None  # absent, or ambiguous (two different counts in one name)
    world = found.pop()
    if world is None:
        return None
    return Hint(f'file name "{name}"', world_size=world)


_READ: list = [None, None, None]  # the comments list read last, its _readable() and its comment_worlds()


def _readable(comments: list) -> list:
    """``(line, text, flags)`` of each comment that is no directive and whose counts can all be trusted (a 0 or an
    absurd count is not a launch line meshlint can trust: the comment is ignored); read once per comments list,
    which comment_hints and comment_worlds (called twice) each walk."""
    if _READ[0] is comments:
        return _READ[1]
    out = []
    for line, _col, text in comments:
        # _directive's and _flags' literal tests made here first: most comments are prose, and two calls
        # fewer per comment save a first run on KempnerForge's configs ~0.4 M instructions
        if "meshlint" in text and _directive(text):
            continue
        if "--" not in text:
            out.append((line, text, {}))
            continue
        flags = _flags(text)
        if flags and any(v is None for v in flags.values()):
            continue
        out.append((line, text, flags))
    _READ[:] = [comments, out, None]
    return out


def comment_hints(comments: list) -> list[Hint]:
    """Launch lines and node shapes written in the file's own comments."""
    launch, shapes = [], []
    for line, text, flags in _readable(comments):
        if flags:
            gpn = flags.get("nproc_per_node") or flags.get("ntasks_per_node") or flags.get("gpus_per_node")
            idle = None
            tasks, gpus = flags.get("ntasks_per_node"), flags.get("gpus_per_node")
            if tasks and gpus and tasks < gpus and "srun" in text and "nproc_per_node" not in flags \
                    and "torchrun" not in text and ("python" in text or ".py " in text + " "):
                # srun starting the Python trainer itself: its tasks are the ranks, fewer than the node's GPUs
                idle = (tasks, gpus, False, line, _col_of(comments, line))
            nodes = flags.get("nnodes") or flags.get("nodes")
            world = flags.get("ntasks")
            if world is None and gpn is not None:
                is_torchrun = "nproc_per_node" in flags or "torchrun" in text
                if nodes is not None:
                    world = nodes * gpn if nodes * gpn <= MAX_WORLD else None
                elif is_torchrun:
                    world = gpn  # torchrun defaults to --nnodes 1
            if world or gpn:
                launch.append(Hint(f"launch command on line {line}", world, gpn, nodes, idle if world else None))
            continue
        if not ("node" in text or "host" in text or _may_be_shape(text)):  # (the common cases without a call)
            continue
        match = _re("shape").search(text)
        if match:
            nodes, gpn = _count(match.group(1)), _count(match.group(2))
            if nodes is not None and gpn is not None and nodes * gpn <= MAX_WORLD:
                shapes.append(Hint(f'comment on line {line} ("{match.group(0)}")', nodes * gpn, gpn, nodes))
    if comment_worlds(comments):
        # "works on any GPU count": launch lines for different worlds. None is chosen silently;
        # their worlds are dropped (a node size they state stays) and listed by ML105.
        return [Hint(h.source, None, h.gpus_per_node, h.nodes) for h in launch[:1]] + shapes[:1]
    return launch[:1] + shapes[:1]


def _col_of(comments: list, line: int) -> int:
    """The column of the last comment on ``line`` (1 if none); asked only for a rare launch line."""
    return {ln: col for ln, col, _text in comments}.get(line, 1)


def comment_worlds(comments: list) -> list:
    """The runs the file's comments describe, when they describe several different ones:
    [(source, world or None, words)] (empty when they agree, or name at most one)."""
    readable = _readable(comments)
    if _READ[2] is not None:
        return list(_READ[2])  # a copy: the caller keeps it
    found = []
    for line, text, flags in readable:
        if not flags:
            if "python" in text and _plain_run(text):
                found.append((f"launch command on line {line}", 1, "1 GPU (a plain python run)"))
            continue
        source = f"launch command on line {line}"
        gpn = flags.get("nproc_per_node") or flags.get("ntasks_per_node") or flags.get("gpus_per_node")
        nodes = flags.get("nnodes") or flags.get("nodes")
        world = flags.get("ntasks")
        if world is None and gpn is not None:
            if nodes is not None:
                world = nodes * gpn if nodes * gpn <= MAX_WORLD else None
            elif "nproc_per_node" in flags or "torchrun" in text:
                world = gpn
        if world:
            found.append((source, world, f"{world} GPUs"))
        elif nodes:
            found.append((source, None, f"{nodes} nodes of an unstated size"))
    _READ[2] = found if len({(w, words) for _, w, words in found}) > 1 else []
    return list(_READ[2])


def resolve_topology(hints: list[Hint | None], placement: str = "block") -> Topology:
    """Merge hints in precedence order; record where sources disagree.

    A value outside 1..MAX_WORLD is dropped here whatever its source (each source
    reports its own bad values): nothing downstream sees a world it cannot lay out.
    """
    topo = Topology(placement=placement)
    for field, source_field, what in (("world_size", "world_source", "world size"),
                                      ("gpus_per_node", "gpus_per_node_source", "GPUs per node")):
        for hint in hints:
            value = getattr(hint, field) if hint is not None else None
            if not _in_range(value):
                continue
            kept = getattr(topo, field)
            if kept is None:
                setattr(topo, field, value)
                setattr(topo, source_field, hint.source)
            elif value != kept:
                topo.conflicts.append((what, getattr(topo, source_field), kept, hint.source, value))
    _fold_idle(topo, hints)
    return topo


def _fold_idle(topo: Topology, hints: list) -> None:
    """Where the world is srun's and srun leaves GPUs of each node idle (one task per node by SLURM's default, or
    --ntasks-per-node below the GPUs), the other sources that count every GPU (a file name, a comment, the
    #SBATCH GPUs per node) disagree only because of it: one cause, said once (``srun_idle``, with those sources),
    not as a disagreement per source. A source that counts something else still disagrees."""
    hint = next((h for h in hints if h is not None and h.idle and h.source == topo.world_source), None)
    if hint is None or not hint.nodes:
        return
    tasks, gpus, default, line, col = hint.idle
    full = {"world size": hint.nodes * gpus, "GPUs per node": gpus}
    kept, restated = [], []
    for conflict in topo.conflicts:
        what, source, _kept_value, other, value = conflict
        (restated if source == hint.source and full.get(what) == value else kept).append(conflict)
    topo.conflicts = kept
    topo.srun_idle = {"tasks_per_node": tasks, "gpus_per_node": gpus, "nodes": hint.nodes, "default": default,
                      "world": hint.nodes * gpus, "source": hint.source, "line": line, "col": col,
                      "agree": list(dict.fromkeys(c[3] for c in restated if c[0] == "world size"))}


def _count(digits: str) -> int | None:
    """A count from ASCII digits: 1..MAX_WORLD, else None (a 0, or more digits than any count has)."""
    if not digits.isascii() or not digits.isdigit() or len(digits) > len(str(MAX_WORLD)):
        return None
    value = int(digits)
    return value if 1 <= value <= MAX_WORLD else None


def _in_range(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_WORLD


def _closest(word: str, choices) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def topology_for(source, spec, cli: CliTopology, file_hint: Hint | None = None,
                 profile_hint: Hint | None = None, launch_hints: tuple = ()) -> Topology:
    """Merge every source of world size and node shape of a config (its ``Source``'s comments and name, its
    ``Spec``'s hints), highest precedence first (a launch line's own --nnodes/--nproc_per_node rank with the
    file's directives)."""
    directives, problems = directive_hints(source.comments)
    hints = [cli.hint(), *launch_hints, *directives, file_hint, *spec.hints, filename_hint(source.name),
             *comment_hints(source.comments), profile_hint]
    topo = resolve_topology(hints, cli.placement)
    if profile_hint is not None:  # the cluster profile is a default: overriding it is not a disagreement
        topo.conflicts = [c for c in topo.conflicts if c[3] != profile_hint.source]
    topo.world_candidates = comment_worlds(source.comments) if topo.world_size is None else []
    topo.directive_problems = problems
    return topo
