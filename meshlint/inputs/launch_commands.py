"""Recognising a launch command in a list of words: torchrun, srun, ``python -m``, run_train.sh and the
wrappers around them, with their topology as hints; other frameworks' entry points are handed to their readers."""

from __future__ import annotations

import os
import re

from meshlint.errors import InputError
from meshlint.mesh.topology import MAX_WORLD, Hint
from meshlint.inputs.launch_words import (_err, _int_of, Launch, MAX_ARGS, _Origin, Override, _shown,
    _sub, _var_note, _where, Word)
from meshlint.inputs.tyro_overrides import parse_overrides


# ----------------------------------------------------------------------------- recognising a command

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_WRAPPERS = {"exec", "nohup", "time", "command", "builtin", "stdbuf", "nice", "numactl", "taskset", "setsid"}
_TORCHRUN_FLAGS = {"standalone", "module", "no-python", "run-path", "virtual-local-rank", "m"}
# torch/distributed/run.py (torch 2.13) options that take a value; anything else with a value uses '='
_TORCHRUN_VALUES = {"nnodes", "nproc-per-node", "rdzv-backend", "rdzv-endpoint", "rdzv-id", "rdzv-conf",
                    "max-restarts", "monitor-interval", "start-method", "event-log-handler", "role", "log-dir",
                    "redirects", "tee", "local-ranks-filter", "duplicate-stdout-filters",
                    "duplicate-stderr-filters", "node-rank", "master-addr", "master-port", "local-addr",
                    "logs-specs", "numa-binding", "signals-to-handle", "shutdown-timeout", "r", "t"}
_SRUN_VALUES = {"N": "nodes", "n": "ntasks", "c": "cpus-per-task", "G": "gpus", "w": "nodelist", "J": "job-name",
                "p": "partition", "t": "time", "o": "output", "e": "error", "A": "account", "q": "qos",
                "C": "constraint", "x": "exclude", "m": "distribution", "D": "chdir", "B": "extra-node-info"}
_SRUN_FLAGS = {"l", "u", "v", "Q", "X", "K", "k", "E", "H", "I", "O", "s", "Z", "h"}
_SRUN_LONG_FLAGS = {"exclusive", "overlap", "unbuffered", "label", "verbose", "quiet", "kill-on-bad-exit",
                    "no-kill", "overcommit", "oversubscribe", "pty", "wait-all-nodes", "disable-status",
                    "help", "usage", "test-only", "hold", "preserve-env", "spread-job", "whole",
                    "contiguous", "multi-prog", "no-allocate", "reboot"}
# Other frameworks' entry points, one module each, imported only for a command torchtitan's grammar does not
# match: ``recognises(script_word, as_module)`` and ``launch(script, args, origin, launcher, env, first, index0)``
# (a Launch with ``framework`` set). FRAMEWORK_MARKERS: bytes a script must hold to be read for them.
FRAMEWORK_LAUNCHES = ("meshlint.inputs.megatron_launch", "meshlint.inputs.bridge_launch")
FRAMEWORK_MARKERS = (b"pretrain_", b"run_recipe")
RUN_TRAIN_DEFAULTS = {"NGPU": "8", "MODULE": "llama3", "CONFIG": "llama3_debugmodel", "COMM_MODE": ""}  # run_train.sh:28-32


def launch_from_words(words: list, origin: _Origin, env: dict | None = None, sbatch: dict | None = None,
                      version: str | None = None) -> Launch | None:
    """The Launch a command's words make, or None when the command does not start torchtitan.train.

    ``env``: name -> Word of the variables the command inherits (a script's exported ones);
    ``sbatch``: the script's #SBATCH options (``read_launch_script``)."""
    env = dict(env or {})
    i, n = 0, len(words)
    prefix_env: dict = {}
    srun: dict | None = None
    srun_word = None
    unread: list = []  # words before the command that expand to words the script does not determine
    while i < n:
        w = words[i]
        if w.splat:
            if w.passes_args():
                return None  # the script's own arguments as the command: nothing to read
            # "${PROFILE_CMD[@]}" python ..., set in an if/else: a wrapper (nsys, numactl) or nothing; the command
            # after it is read, and the launch says so (None still, if what follows is no launch)
            unread.append(w)
            i += 1
            continue
        m = _ASSIGN.match(w.text)
        if m and not srun_word:
            prefix_env[m.group(1)] = _sub(w, m.start(2))
            i += 1
            continue
        base = os.path.basename(w.text)
        if base in _WRAPPERS:
            i += 1
            while i < n and words[i].text.startswith("-") and base != "exec":
                i += 1  # time -p, nice -n 5 ...: options of the wrapper (their values are skipped next)
                if base in ("nice", "numactl", "taskset", "stdbuf") and i < n and not words[i].text.startswith("-"):
                    i += 1
            continue
        if base in ("uv", "poetry", "pixi", "conda", "micromamba") and i + 1 < n and words[i + 1].text == "run":
            i += 2   # uv run / conda run -n ENV ...: the command after the runner's options
            while i < n and words[i].text.startswith("-"):
                takes = words[i].text in ("-n", "--name", "-p", "--prefix", "--python", "--with", "--project",
                                          "--env", "-e", "--directory", "--group", "--extra")
                i += 2 if takes else 1
            continue
        if base == "env":
            i += 1
            while i < n and words[i].text.startswith("-"):
                i += 2 if words[i].text in ("-u", "--unset", "-C", "--chdir") else 1
            while i < n and _ASSIGN.match(words[i].text):
                m2 = _ASSIGN.match(words[i].text)
                prefix_env[m2.group(1)] = _sub(words[i], m2.start(2))
                i += 1
            continue
        if base == "srun" and srun_word is None:
            srun_word = w
            srun, i = _srun_options(words, i + 1)
            continue
        break
    if i >= n:
        return None
    env.update(prefix_env)
    launch = _command(words, i, origin, env, srun, srun_word, sbatch, version)
    if launch is not None and unread:
        launch.notes.insert(0, "; ".join(
            f"{w.raw} (line {w.line}) before the command expands to words the script does not determine "
            f"({w.unknown or 'unknown'})" for w in unread) + ": read as a wrapper of the command (a profiler, "
            "numactl, or nothing), checked as run without it")
    return launch



def _command(words: list, i: int, origin: _Origin, env: dict, srun, srun_word, sbatch, version) -> Launch | None:
    """The launch the command at ``words[i]`` makes (after its prefixes: assignments, wrappers, srun), or None."""
    n = len(words)
    cmd = words[i]
    base = os.path.basename(cmd.text)
    if base == "torchrun":
        return _torchrun_launch(words, i, origin, env, srun, srun_word, sbatch, version)
    if _PYTHON.match(base):
        j, module, script = _python_options(words, i + 1)
        if module in ("torch.distributed.run", "torch.distributed.launch"):
            return _torchrun_launch(words, j - 1, origin, env, srun, srun_word, sbatch, version,
                                    launcher_word=cmd)
        if module == "torchtitan.train" or (script and _is_train_py(script)):
            launch = _trainer_launch(words[j:], origin, "python", env, version, first=cmd, index0=j)
            _direct_hints(launch, cmd, env, srun, srun_word, sbatch, origin)
            return launch
        from meshlint.inputs.kf_launch import direct_world_hint, is_kf_train, kf_launch

        if script is not None and is_kf_train(script, words[j:]):
            launch = kf_launch(words[j:], origin, "python", cmd, index0=j, script=script)
            _direct_hints(launch, cmd, env, srun, srun_word, sbatch, origin)
            if srun_word is None:   # no launcher: the process is the whole world
                launch.hints = [h for h in (direct_world_hint(env, origin, cmd, launch.notes),) if h is not None]
            return launch
        entry = Word(module, cmd.line, cmd.col) if module else script
        launch = (_framework_launch(entry, module is not None, words[j:], origin, "python", env, cmd, j)
                  if entry is not None else None)
        if launch is None:
            return None
        _direct_hints(launch, cmd, env, srun, srun_word, sbatch, origin)
        return launch
    if base == "run_train.sh" or (base in ("bash", "sh") and i + 1 < n
                                  and os.path.basename(words[i + 1].text) == "run_train.sh"):
        j = i + 1 if base == "run_train.sh" else i + 2
        return _run_train_launch(words, j, cmd, origin, env, srun, srun_word, sbatch, version)
    return None


def _is_train_py(word: Word) -> bool:
    return word.text.replace("\\", "/").endswith("torchtitan/train.py")


def _python_options(words: list, i: int) -> tuple:
    """(index after the module/script, -m module, script word) of a python command."""
    n = len(words)
    while i < n:
        t = words[i].text
        if t == "-m" and i + 1 < n:
            return i + 2, words[i + 1].text, None
        if t.startswith("-m") and len(t) > 2:
            return i + 1, t[2:], None
        if t in ("-W", "-X", "--check-hash-based-pycs"):
            i += 2
            continue
        if t == "-c":
            return n, None, None
        if t.startswith("-") and t != "-":
            i += 1
            continue
        return i + 1, None, words[i]
    return n, None, None


def _long(t: str) -> tuple:
    """``--nproc_per_node=8`` -> ("nproc-per-node", "8"); a short option -> ("t", None)."""
    name, eq, value = t.lstrip("-").partition("=")
    return name.replace("_", "-"), (value if eq else None)


def _torchrun_launch(words, i, origin, env, srun, srun_word, sbatch, version, launcher_word=None) -> Launch | None:
    """torchrun [options] (-m torchtitan.train | .../torchtitan/train.py) ARGS (torch/distributed/run.py)."""
    cmd = launcher_word or words[i]
    n = len(words)
    j = i + 1
    opts: dict = {}
    as_module = False
    while j < n:
        w = words[j]
        t = w.text
        if w.splat or not t.startswith("-") or t == "-" or t == "--":
            break
        name, value = _long(t)
        if t.startswith("-") and not t.startswith("--") and len(t) > 2 and t[1] in "rt":
            name, value = t[1], t[2:]           # argparse's attached short value: -t3
        if name in ("m", "module"):
            as_module = True
            j += 1
            continue
        if name in _TORCHRUN_FLAGS:
            opts[name] = Word("1", w.line, w.col, t)
            j += 1
            continue
        if value is not None:
            opts[name] = _sub(w, t.index("=") + 1) if "=" in t else Word(value, w.line, w.col, t)
            j += 1
            continue
        if name in _TORCHRUN_VALUES and j + 1 < n:
            opts[name] = words[j + 1]
            j += 2
            continue
        j += 1                                   # an option torchrun does not have: argparse would fail
    if j >= n:
        return None
    script = words[j]
    if "no-python" in opts and not as_module and _PYTHON.match(os.path.basename(script.text)):
        # torchrun --no-python python [-u] (-m MODULE | SCRIPT) ARGS: the program run as given is the
        # interpreter itself (torch/distributed/run.py), so the launch is what that python runs
        after, module, inner = _python_options(words, j + 1)
        if module is not None:
            w = words[after - 1]  # the module's word (-m NAME, or -mNAME)
            as_module, script, j = True, Word(module, w.line, w.col, w.raw), after - 1
        elif inner is not None:
            script, j = inner, after - 1
        else:
            return None
    if script.text == "torchtitan.train" if as_module else _is_train_py(script):
        launch = _trainer_launch(words[j + 1:], origin, "torchrun", env, version, first=cmd, index0=j + 1)
    else:
        launch = None
        if not as_module:
            from meshlint.inputs.kf_launch import is_kf_train, kf_launch

            if is_kf_train(script, words[j + 1:]):
                launch = kf_launch(words[j + 1:], origin, "torchrun", cmd, index0=j + 1, script=script)
        if launch is None:
            launch = _framework_launch(script, as_module, words[j + 1:], origin, "torchrun", env, cmd, j + 1)
        if launch is None:
            return None
    facts = launch.facts
    for k, w in opts.items():
        facts[f"torchrun --{k}"] = w.text if w.known() else None
    if srun_word is not None:
        launch.launcher = "srun torchrun"
    hint = _torchrun_hint(opts, env, cmd, origin, launch.notes)
    launch.hints = [h for h in (hint, *_slurm_hints(srun, srun_word, sbatch, origin, direct=False, notes=launch.notes,
                                                    facts=facts)) if h is not None]
    return launch


def _framework_launch(script: Word, as_module: bool, args: list, origin: _Origin, launcher: str, env: dict,
                      first: Word, index0: int) -> Launch | None:
    """The Launch of another framework's entry point (FRAMEWORK_LAUNCHES), or None."""
    if script.splat or not script.known():
        return None
    import importlib

    for name in FRAMEWORK_LAUNCHES:
        module = importlib.import_module(name)
        if module.recognises(script, as_module):
            return module.launch(script, args, origin, launcher, env, first, index0)
    return None


def _torchrun_hint(opts: dict, env: dict, cmd: Word, origin: _Origin, notes: list) -> Hint | None:
    nnodes_w = opts.get("nnodes") or env.get("PET_NNODES")
    nproc_w = opts.get("nproc-per-node") or env.get("PET_NPROC_PER_NODE")
    nodes = 1
    if nnodes_w is not None:
        if nnodes_w.known() and ":" in nnodes_w.text:
            lo, _, hi = nnodes_w.text.partition(":")
            if lo.strip() != hi.strip():
                notes.append(f"torchrun --nnodes {nnodes_w.text} is elastic (from {lo} to {hi} nodes): the world size "
                             "is not fixed by the launch line")
                nodes = None
            else:
                nodes = _int_of(Word(lo, nnodes_w.line, nnodes_w.col, nnodes_w.raw), "torchrun --nnodes", notes)
        else:
            nodes = _int_of(nnodes_w, "torchrun --nnodes", notes)
    if nproc_w is None:
        gpn = 1  # torch/distributed/run.py: --nproc-per-node defaults to "1"
    elif nproc_w.known() and nproc_w.text.strip() in ("gpu", "cuda", "auto", "cpu", "xpu"):
        notes.append(f"torchrun --nproc_per_node {nproc_w.text} counts the node's devices: the world size is "
                     "not fixed by the launch line")
        gpn = None
    else:
        gpn = _int_of(nproc_w, "torchrun --nproc_per_node", notes)
    parts = []
    if nnodes_w is not None:
        parts.append(_opt_shown("nnodes", nnodes_w, " "))
    if nproc_w is not None:
        parts.append(_opt_shown("nproc_per_node", nproc_w, " "))
    defaults = []
    if nnodes_w is None:
        defaults.append("--nnodes defaults to 1")
    if nproc_w is None:
        defaults.append("--nproc_per_node defaults to 1")
    what = "torchrun " + " ".join(parts) if parts else "torchrun"
    detail = _var_note([w for w in (nnodes_w, nproc_w) if w is not None])
    source = f"{what} ({_where(cmd, origin)}{'; ' + ', '.join(defaults) if defaults else ''}{detail})"
    world = nodes * gpn if nodes is not None and gpn is not None else None
    if world is not None and world > MAX_WORLD:
        notes.append(f"{what} makes {world:,} ranks, more than {MAX_WORLD:,}")
        world = None
    if world is None and gpn is None:
        return None
    return Hint(source, world, gpn, nodes)


def _srun_options(words: list, i: int) -> tuple:
    """srun's options (long names) and the index of the command it runs."""
    n = len(words)
    opts: dict = {}
    while i < n:
        w = words[i]
        t = w.text
        if w.splat or not t.startswith("-") or t == "-":
            break
        if t == "--":
            i += 1
            break
        if t.startswith("--"):
            name, eq, value = t[2:].partition("=")
            if eq:
                opts[name] = _sub(w, t.index("=") + 1)
                i += 1
            elif name in _SRUN_LONG_FLAGS or i + 1 >= n:
                opts[name] = Word("1", w.line, w.col, t)
                i += 1
            else:
                opts[name] = words[i + 1]
                i += 2
            continue
        letter = t[1]
        if letter in _SRUN_FLAGS:
            i += 1
            continue
        name = _SRUN_VALUES.get(letter, letter)
        if len(t) > 2:
            opts[name] = _sub(w, 3 if t[2] == "=" else 2)
            i += 1
        elif i + 1 < n:
            opts[name] = words[i + 1]
            i += 2
        else:
            i += 1
    return opts, i


def _gpu_count(text: str, gres: bool = False) -> int | None:
    """``8``, ``h100:8`` (--gpus-per-node); ``gpu:8``, ``gpu:a100:8``, ``gpu:8(S:0-1)``, ``gpu`` (--gres,
    where only the gpu items count) -> 8 (1 for a bare ``gpu``)."""
    for item in text.split(","):
        item = item.strip()
        if gres:
            if not item.startswith("gpu"):
                continue
            item = item[3:].lstrip(":")
            if not item:
                return 1
        count = item.split("(")[0].rsplit(":", 1)[-1].strip()
        if count.isdigit() and len(count) < 9:
            return int(count)
    return None


# srun/sbatch options that set or change the task count. Without any of them srun starts one task per node:
# "-n, --ntasks ... The default is one task per node, but note that the --cpus-per-task option will change
# this default" (https://slurm.schedmd.com/srun.html, sbatch.html)
_TASK_OPTIONS = ("ntasks", "ntasks-per-node", "ntasks-per-gpu", "ntasks-per-socket", "ntasks-per-core",
                 "ntasks-per-tres", "cpus-per-task", "gpus-per-task", "multi-prog")
# the environment variables srun reads for them (srun's INPUT ENVIRONMENT VARIABLES)
_SRUN_TASK_ENV = ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE", "SLURM_NTASKS_PER_GPU",
                  "SLURM_NTASKS_PER_SOCKET", "SLURM_NTASKS_PER_CORE", "SLURM_NTASKS_PER_TRES", "SLURM_CPUS_PER_TASK")


def _opt_shown(name: str, w: Word, sep: str = "=") -> str:
    """``--name=value`` as written; an unknown value written ``--name="$X"`` is shown as that one word (its raw
    text already holds the option), not ``--name=--name="$X"``."""
    if w.known():
        return f"--{name}{sep}{w.text}"
    shown = _shown(w)
    return shown if shown.startswith("-") else f"--{name}{sep}{shown}"


def _slurm_hints(srun: dict | None, srun_word: Word | None, sbatch: dict | None, origin: _Origin, direct: bool,
                 notes: list, facts: dict | None = None, task_env: list | None = None) -> list:
    """Hints from srun's options on the launch line and the script's #SBATCH lines.

    Under torchrun (``direct=False``) they give the node shape only: torchrun decides the world.
    When srun starts the trainer itself, its tasks are the ranks: srun's options over the
    allocation's (#SBATCH) give the task count; where neither they nor the variables srun reads
    (``task_env``: those the command inherits) name one, srun starts one task per node, SLURM's default."""
    out = []
    sb = (sbatch or {}).get("options") or {}
    if facts is not None:
        facts.update({f"srun --{k}": (w.text if w.known() else None) for k, w in (srun or {}).items()})
        facts.update({f"#SBATCH --{k}": (w.text if w.known() else None) for k, w in sb.items()})
    sources = []
    keys = ("nodes", "ntasks", "ntasks-per-node", "gpus-per-node", "gres", "gpus-per-task")
    if srun_word is not None and (direct or any(k in (srun or {}) for k in keys)):
        sources.append(({**sb, **(srun or {})}, f"srun ({_where(srun_word, origin)})", srun or {}))
    if sb:
        sources.append((sb, (sbatch or {}).get("where", "#SBATCH"), sb))
    for opts, where, shown_opts in sources:
        nodes = _range_int(opts.get("nodes"), "--nodes", notes)
        ntasks = _range_int(opts.get("ntasks"), "--ntasks", notes)
        per_node = _range_int(opts.get("ntasks-per-node"), "--ntasks-per-node", notes)
        gpn = None
        for key in ("gpus-per-node", "gres"):
            w = opts.get(key)
            if w is not None and w.known():
                gpn = _gpu_count(w.text, gres=key == "gres")
                if gpn is not None:
                    break
        if gpn is None and opts.get("gpus-per-task") is not None:
            per_task = _range_int(opts.get("gpus-per-task"), "--gpus-per-task", notes)
            tasks_per_node = per_node or (ntasks // nodes if ntasks and nodes and ntasks % nodes == 0 else None)
            if per_task and tasks_per_node:
                gpn = per_task * tasks_per_node
        world = None
        default = ""
        idle = None
        if direct and opts is not sb:
            world = ntasks or (nodes * per_node if nodes and per_node else None)
            if world is None and nodes and not task_env and not any(k in opts for k in _TASK_OPTIONS):
                per_node, world = 1, nodes
                default = "; no task count, so one task per node (SLURM's default)"
                gpus = f" on nodes with {gpn} GPUs each" if gpn else ""
                notes.append(f"{where} names no task count (no --ntasks or --ntasks-per-node on the line or in "
                             f"#SBATCH, no --cpus-per-task): SLURM starts one task per node by default, so {nodes} "
                             f"task{'s' if nodes > 1 else ''}, one rank per node{gpus} (srun's tasks are the ranks: "
                             f"SLURM_NTASKS={nodes}); add --ntasks-per-node="
                             f"{gpn if gpn else 'GPUs per node'} to run one rank per GPU")
            if per_node and gpn and per_node < gpn and srun_word is not None:
                idle = (per_node, gpn, bool(default), srun_word.line, srun_word.col)  # GPUs no task uses
            if per_node:
                gpn = per_node          # ranks per node: what placement needs
        if world is None and gpn is None and nodes is None:
            continue
        if world is not None and world > MAX_WORLD:
            notes.append(f"{where} starts {world:,} tasks, more than {MAX_WORLD:,}")
            world = None
        shown = " ".join(_opt_shown(k, w) for k, w in shown_opts.items() if k in keys)
        if opts is not sb and sb and any(k in sb for k in keys):
            shown += " in the allocation of " + " ".join(_opt_shown(k, w) for k, w in sb.items() if k in keys)
            shown += f" ({(sbatch or {}).get('where') or '#SBATCH'})"
        out.append(Hint((f"{where}: {shown.strip()}" if shown.strip() else where) + default, world, gpn, nodes, idle))
    notes[:] = list(dict.fromkeys(notes))
    return out


def _range_int(word: Word | None, what: str, notes: list) -> int | None:
    if word is None:
        return None
    if word.known() and "-" in word.text:          # --nodes=2-4: a range, not a count
        lo, _, hi = word.text.partition("-")
        if lo.strip() != hi.strip():
            notes.append(f"{what}={word.text} is a range: the node count is not fixed")
            return None
        word = Word(lo, word.line, word.col, word.raw)
    return _int_of(word, what, notes)


def _direct_hints(launch: Launch, cmd: Word, env: dict, srun, srun_word, sbatch, origin: _Origin) -> None:
    """``python -m torchtitan.train`` without torchrun: srun's tasks are the ranks; a fake backend
    (--comm.mode fake_backend|local_tensor) takes its world from NGPU (distributed/utils.py:475-486)."""
    notes = launch.notes
    hints = []
    mode = next((o for o in reversed(launch.overrides) if o.path == "comm.mode"), None)
    ngpu = env.get("NGPU")
    if mode is not None and mode.known and mode.value in ("fake_backend", "local_tensor") and ngpu is not None:
        world = _int_of(ngpu, "NGPU", notes)
        if world is not None:
            hints.append(Hint(f"NGPU={ngpu.text} with --comm.mode {mode.value} ({_where(ngpu, origin)}{_var_note([ngpu])})",
                              world_size=world))
    if srun_word is not None:
        launch.launcher = "srun python"
    hints += _slurm_hints(srun, srun_word, sbatch, origin, direct=srun_word is not None, notes=notes,
                          facts=launch.facts, task_env=[name for name in _SRUN_TASK_ENV if name in env])
    launch.hints = hints


def _run_train_launch(words, j, cmd, origin, env, srun, srun_word, sbatch, version) -> Launch:
    """``NGPU=8 MODULE=llama3 CONFIG=llama3_8b ./run_train.sh ARGS``: run_train.sh (b5bcd76c6) runs
    ``torchrun --nproc_per_node=$NGPU ... -m torchtitan.train --module $MODULE --config $CONFIG "$@"``
    (:44-47), or with COMM_MODE set ``python3 -m torchtitan.train ... "$@" --comm.mode=$COMM_MODE
    --training.steps 1`` on NGPU fake ranks (:37-39); NGPU, MODULE, CONFIG default to 8, llama3,
    llama3_debugmodel (:28-32)."""
    values = {}
    for name, default in RUN_TRAIN_DEFAULTS.items():
        w = env.get(name)
        if w is None or (w.known() and w.text == "" and name != "COMM_MODE"):
            w = Word(default, cmd.line, cmd.col, f"{name} unset: run_train.sh's default {default!r}")
        values[name] = w
    synth = [Word("--module", cmd.line, cmd.col), values["MODULE"], Word("--config", cmd.line, cmd.col), values["CONFIG"]]
    comm = values["COMM_MODE"]
    fake = not comm.known() or comm.text != ""
    tail = []
    if fake:
        cw = Word("--comm.mode=" + comm.text, comm.line, comm.col, comm.raw, comm.unknown, False, comm.vars)
        tail = [cw, Word("--training.steps", cmd.line, cmd.col), Word("1", cmd.line, cmd.col)]
    args = synth + list(words[j:]) + tail
    launch = _trainer_launch(args, origin, "run_train.sh", env, version, first=cmd, index0=j - len(synth))
    launch.facts.update({f"run_train.sh {k}": (w.text if w.known() else None) for k, w in values.items()})
    notes = launch.notes
    ngpu = values["NGPU"]
    hints = []
    world = _int_of(ngpu, "NGPU", notes)
    origin_txt = ngpu.raw if ngpu.raw.startswith("NGPU unset") else f"NGPU={ngpu.text}"
    if world is not None and not fake:
        hints.append(Hint(f"run_train.sh with {origin_txt} ({_where(cmd, origin)}{_var_note([ngpu])}): "
                          f"torchrun --nproc_per_node={world} on one node", world, world, 1))
    elif world is not None and comm.known() and comm.text in ("fake_backend", "local_tensor"):
        hints.append(Hint(f"run_train.sh with {origin_txt} and COMM_MODE={comm.text} ({_where(cmd, origin)}): "
                          f"{world} fake ranks", world_size=world))
    if srun_word is not None:
        launch.launcher = "srun run_train.sh"
    hints += _slurm_hints(srun, srun_word, sbatch, origin, direct=False, notes=notes, facts=launch.facts)
    launch.hints = hints
    return launch


# ----------------------------------------------------------------------------- torchtitan's own arguments

def _trainer_launch(args: list, origin: _Origin, launcher: str, env: dict, version: str | None,
                    first: Word | None, index0: int = 0) -> Launch:
    """``--module M --config F OVERRIDES`` as ConfigManager takes them (manager.py:54-80), then tyro."""
    from meshlint.inputs.tt_v02_launch import is_v02, v02_launch

    if is_v02(args):   # the TOML era: --job.config_file X.toml
        return v02_launch(args, origin, launcher, first if launcher != "cli" else None, index0)
    line = first.line if first is not None else 1
    text = " ".join(_shown(w) if not w.splat else w.raw for w in ([first] if first is not None and launcher != "cli"
                                                                   else []) + list(args))
    text = text if len(text) <= 200 else text[:197] + "..."
    launch = Launch(None, None, [], [], launcher, origin.file, line, text)
    if len(args) > MAX_ARGS:
        launch.error = InputError("ML007", f"the launch line has {len(args):,} arguments (limit {MAX_ARGS:,})", line, 1)
        return launch
    module = config = None
    rest: list = []
    k = 0
    try:
        while k < len(args):
            w = args[k]
            t = w.text
            if not w.splat and (t.startswith("--module=") or t.startswith("--config=")):
                name = t[2:8]
                value = _sub(w, 9)
                if name == "module":
                    module = value
                else:
                    config = value
            elif not w.splat and t in ("--module", "--config"):
                if k + 1 >= len(args):
                    raise _err(f"{t} requires a value (torchtitan/config/manager.py:66)", w, origin)
                if t == "--module":
                    module = args[k + 1]
                else:
                    config = args[k + 1]
                k += 1
            else:
                rest.append((index0 + k, w))
            k += 1
        if module is None or config is None:
            missing = "--module" if module is None else "--config"
            raise _err(f"{missing} is required: torchtitan names the config function with --module M --config F "
                       f"(torchtitan/config/manager.py:82-89)", first or (args[0] if args else Word("")), origin,
                       help="e.g. --module llama3 --config llama3_8b")
        for what, w in (("--module", module), ("--config", config)):
            if not w.known():
                raise _err(f"the launch line gives {what} as {_shown(w)}, which the script does not determine "
                           f"({w.unknown or 'expands to any number of words'})", w, origin,
                           help="set the variable in the script, or check the config with "
                                "meshlint check --module M --config F")
            if not w.text.strip() or any(c.isspace() for c in w.text):
                raise _err(f"{what} {w.text!r} is not a module or function name", w, origin)
        launch.module, launch.config = module.text, config.text
        launch.overrides = parse_overrides(rest, origin, version, launch.notes)
    except InputError as exc:
        launch.error = exc
        if module is not None and module.known():
            launch.module = module.text
        if config is not None and config.known():
            launch.config = config.text
        launch.overrides = [Override("", exc, 0, "", None, "error", True)]
    return launch
