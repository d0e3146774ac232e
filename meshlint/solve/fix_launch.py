"""``meshlint fix`` on a Megatron-LM launch script: each changed flag's value rewritten where the script writes it.

The parser (frameworks/megatron/flags.py) records where each option's value is set: the word after the flag on
the launch line, inside a bash array (``GPT_ARGS=(... --micro-batch-size 4 ...)``), or the ``TP=4`` assignment a
``$TP`` expands from. Only that value's characters change; a flag the launch does not write is added after the
entry script (``pretrain_gpt.py --pipeline-model-parallel-size 2``). A value that is not a literal number there
(arithmetic, a value read from the environment) is refused, never guessed. The new text is read back through the
same reader and must give the planned degrees and options and nothing else; the write is atomic (fix.write_atomic).
"""

from __future__ import annotations

import os
import re

from meshlint.solve.edits import Edit, FixError, Plan, apply, line_starts, offset

_END = re.compile(r"""[\s);|&`"'\\]""")  # where an unquoted shell word ends


def plan(solver, values: dict, options, batch_changes: list | None = None) -> Plan:
    from meshlint.frameworks.megatron.flags import canonical_flag

    report = solver.report
    source = report.source
    launch = source.launch
    from meshlint.solve.suggest import changes

    todo = changes(solver, values) + list(batch_changes or ())
    if not source.file:
        shown = " ".join(f"{canonical_flag(c['key'])} {c['new']}" for c in todo)
        raise FixError(f"{report.path}: a launch given on meshlint's command line has no file to edit: run it with "
                       f"{shown or 'the same flags'}")
    _same_world(solver)
    try:
        with open(source.file, encoding="utf-8", newline="") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise FixError(f"cannot read {source.file}: {exc}") from None
    starts = line_starts(text)
    edits = []
    for change in todo:
        dest = change["key"]
        given = source.parsed.given.get(dest)
        if given is None:
            edits.append(_insert(text, starts, launch, canonical_flag(dest), change["new"]))
        else:
            edits.append(_replace(text, starts, given, change["new"], source.file))
    new = apply(text, edits)
    read_back(solver, values, options, source.file, new, {c["key"]: c["new"] for c in todo})
    return Plan(source.file, text, new, edits, [])


def _same_world(solver) -> None:
    """The script launches its own world (--nnodes · --nproc_per_node): fix writes degrees, never the launcher."""
    topo = solver.report.topology
    # a --world-size that overrides the launcher's is recorded as a conflict: (what, source, value, other, value)
    own = next((c[4] for c in getattr(topo, "conflicts", ()) if c[0] == "world size"), None)
    target = solver.target.world_size
    if own is None and getattr(topo, "world_size", None) and topo.world_size != target:
        own = topo.world_size
    if own and own != target:
        raise FixError(f"the script launches {own} GPUs and the layout is for {target}: change the launcher's "
                       "--nnodes / --nproc_per_node by hand (fix writes the parallel sizes only)")


def _replace(text: str, starts: list, given, new: int, file: str) -> Edit:
    at = offset(text, given.line, given.col, starts)
    quote = text[at] if at < len(text) and text[at] in "\"'" else ""
    begin = at + len(quote)
    if quote:
        end = text.find(quote, begin)
        end = len(text) if end < 0 else end
    else:
        m = _END.search(text, begin)
        end = m.start() if m else len(text)
    written = text[begin:end]
    if written != str(given.value):
        raise FixError(f"{os.path.basename(file)}:{given.line}:{given.col}: {given.flag}'s value is written as "
                       f"{written!r}, not the literal {given.value}: set it to {new} there by hand")
    return Edit(begin, end, str(new), f"{given.flag} {given.value} -> {new} (line {given.line})")


def _insert(text: str, starts: list, launch, flag: str, new: int) -> Edit:
    """``flag new`` right after the entry script on the launch line (its continuation lines included)."""
    begin = offset(text, launch.line, 1, starts)
    pattern = re.compile(r"(?<![\w.-])(?:[^\s'\"]*/)?" + re.escape(launch.entry) + r"""(?=["']?(\s|$))""")
    m = pattern.search(text, begin)
    if m is None:
        raise FixError(f"cannot find {launch.entry} on the launch at line {launch.line}: add {flag} {new} by hand")
    end = m.end()
    if end < len(text) and text[end] in "\"'":
        end += 1
    return Edit(end, end, f" {flag} {new}", f"{flag} (default) -> {new} (added after {launch.entry})")


def read_back(solver, values: dict, options, file: str, new: str, written: dict) -> None:
    """The edited script must read back to this launch with the planned degrees and options, nothing else changed."""
    from meshlint.engine.check import analyse_all

    report = solver.report
    try:
        again = [r for r in analyse_all(file, options, raw=new.encode("utf-8"), name=os.path.basename(file))
                 if r.path == report.path]
    except FixError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything the reader raises on the new text: nothing is written
        raise FixError(f"the edited script would not read back: {exc}") from None
    if len(again) != 1 or again[0].status != "checked":
        raise FixError("the edited script would not read back as the same launch")
    got = again[0].spec
    expected = solver.materialize(values)
    problems = []
    if got.degrees != expected.degrees:
        problems.append(f"degrees {got.degrees} instead of {expected.degrees}")
    from meshlint.frameworks.megatron.core_0_16 import derived_options

    # the options as written, with the planned values, and what validate_args derives from them again
    want = {k: v for k, v in (report.spec.extra.get("args") or {}).items()
            if k not in ("expert_tensor_parallel_size", "sequence_parallel")}
    given = report.source.parsed.given
    for dest in ("expert_tensor_parallel_size", "sequence_parallel"):
        want[dest] = given[dest].value if dest in given else None if dest == "expert_tensor_parallel_size" else False
    want.update(written)
    want.update(derived_options(want))
    have = got.extra.get("args") or {}
    differ = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
    if differ:
        problems.append(f"other options changed: {', '.join(differ[:5])}")
    if got.extra.get("refused_by_parser") != report.spec.extra.get("refused_by_parser"):
        problems.append("the parser would refuse it differently")
    if again[0].topology.world_size != solver.target.world_size:
        problems.append(f"its world size reads as {again[0].topology.world_size}, not {solver.target.world_size}")
    if problems:
        raise FixError("refusing to write: the edited script would read back differently (" + "; ".join(problems)
                       + ")")
