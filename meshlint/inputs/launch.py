"""torchtitan launch lines the way its launcher reads them: tyro overrides, torchrun/srun/run_train.sh
facts as topology hints, overrides applied to a registry config, and saved ``--debug.save_config_file`` JSON.

What torchtitan does, read off its code (main b5bcd76c6 and 0.3.0 are the same here):
  torchtitan/config/manager.py:54-80  ``--module``/``--config`` (and ``=`` forms) are taken out of argv
      first, anywhere in it, the last one winning; ``--module`` with nothing after it is a ValueError.
  manager.py:40  the rest goes to ``tyro.cli(type(config), args=rest, default=config)``: options are
      ``--section.field``; tyro's own backend (tyro 1.0.17, tyro/_backends/_tyro_backend.py) is
      emulated below, each rule with the experiment that confirmed it (tests/test_launch.py repeats
      them against tyro itself).
  trainer.py:77  ``model_spec`` is ``tyro.conf.Suppress``: no ``--model...`` option exists.
  distributed/activation_checkpoint.py:332-337  ``activation_checkpoint`` is a tyro subcommand union:
      ``activation-checkpoint:{selective,full,memory-budget,none}``.
  trainer.py:212-231, 238-246  ``--debug.save_config_file F`` writes ``json.dump(config.to_dict(),
      indent=2)`` to ``dump_folder/F``; ``model_spec`` becomes ``{"name", "flavor", "model"}``.

Nothing here imports tyro, torch or torchtitan.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import shlex
from typing import Any, NamedTuple

from meshlint.errors import InputError
from meshlint.mesh.topology import MAX_WORLD, Hint

COMMAND_LINE = "<command line>"   # the "file" of an override given on meshlint's own command line
UNKNOWN_CHAR = "\x00"             # marks the unknown part of a word (a variable the script does not set)

MAX_ARGS = 10_000                 # words in one launch command
MAX_WORD_CHARS = 65_536           # characters of one word
MAX_INT_DIGITS = 1_000            # digits of one integer value (Python itself refuses str->int past 4,300)
MAX_SAVED_BYTES = 8 << 20         # a saved config: 0.46 MB for deepseek_v3_671b (all 61 layers written out)
MAX_JSON_DEPTH = 64


# ----------------------------------------------------------------------------- torchtitan's CLI surface

# Trainer.Config's fields (trainer.py:77-116 at b5bcd76c6; the same in 0.3.0). model_spec is suppressed.
TRAINER_SECTIONS = ("profiler", "metrics", "tokenizer", "dataloader", "optimizer", "lr_scheduler", "training",
                    "parallelism", "checkpoint", "activation_checkpoint", "compile", "comm", "validator",
                    "debug", "override", "loss")
TOP_LEAVES = {"hf_assets_path": "str", "dump_folder": "str"}

# The fixed dataclasses of torchtitan/config/configs.py: their fields ARE the command line (the
# "frozen" CLI, torchtitan/config/README.md), so an unknown field there is refused as tyro refuses it.
# Other sections hold component configs whose class (and so whose fields) a config function picks:
# their options are accepted and typed from the value the config holds.
# Types: int, float, float|int, bool, str, int?, str? (None allowed), lit:a,b (Literal), list[str]
# (torchtitan's comma rule, manager.py:239-250), list[list[str]]? (one comma list per word), imports.
_COMMON = {
    "training": {
        "max_norm": "float|int", "steps": "int", "enable_cpu_offload": "bool", "disable_cuda_graphs": "bool",
        "dtype": "lit:bfloat16,float32", "mixed_precision_param": "lit:bfloat16,float32",
        "mixed_precision_reduce": "lit:float32", "gc_freq": "int", "gc_debug": "bool",
    },
    "parallelism": {
        "data_parallel_replicate_degree": "int", "data_parallel_shard_degree": "int",
        "fsdp_reshard_after_forward": "lit:default,always,never", "enable_fsdp_symm_mem": "bool",
        "tensor_parallel_degree": "int", "enable_sequence_parallel": "bool", "pipeline_parallel_degree": "int",
        "module_fqns_per_model_part": "list[list[str]]?", "pipeline_parallel_first_stage_less_layers": "int",
        "pipeline_parallel_last_stage_less_layers": "int", "pipeline_parallel_layers_per_stage": "int?",
        "pipeline_parallel_schedule": "str", "pipeline_parallel_schedule_csv": "str?",
        "context_parallel_degree": "int", "context_parallel_load_balancer": "str?",
        "context_parallel_ptrr_mask_key": "str?", "expert_parallel_degree": "int",
    },
    "compile": {"enable": "bool", "enable_async_tensor_parallel": "bool", "components": "list[str]",
                "backend": "str"},
    "comm": {"init_timeout_seconds": "int", "train_timeout_seconds": "int", "trace_buf_size": "int",
             "save_traces_folder": "str", "save_traces_file_prefix": "str",
             "mode": "lit:default,fake_backend,local_tensor,torchcomms"},
    "debug": {"seed": "int?", "spmd_typechecking": "bool", "deterministic": "bool", "deterministic_warn_only": "bool",
              "moe_force_load_balance": "bool", "detect_anomaly": "bool", "batch_invariant": "bool",
              "print_config": "bool", "save_config_file": "str?", "enable_structured_logging": "bool"},
    "override": {"imports": "imports"},
}


def _schema(training: dict, parallelism: dict) -> dict:
    out = {section: dict(fields) for section, fields in _COMMON.items()}
    out["training"].update(training)
    out["parallelism"].update(parallelism)
    return out


SCHEMAS = {
    # configs.py at b5bcd76c6: TrainingConfig :36-58, ParallelismConfig :112-280
    "main@b5bcd76c6": _schema(
        {"num_tokens_per_microbatch_per_dp_rank": "int", "num_tokens_per_train_step": "int",
         "max_context_length": "int"},
        {"spmd_backend": "lit:partial_dtensor,spmd_types", "num_pp_microbatches": "int"}),
    # configs.py of the torchtitan 0.3.0 wheel: the old batch keys, a full_dtensor backend
    "0.3.0": _schema(
        {"local_batch_size": "int", "global_batch_size": "int", "seq_len": "int"},
        {"spmd_backend": "lit:partial_dtensor,full_dtensor,spmd_types", "pipeline_parallel_microbatch_size": "int"}),
}
STRICT_SECTIONS = tuple(_COMMON)

# Fields of the component configs main's registries use (read off ``--help`` of llama3, deepseek_v3,
# qwen3 and flux debug configs at b5bcd76c6): they type an override and tell a flag from an option,
# but a section's other fields are not refused, since a config function may pick another class.
COMPONENT_FIELDS = {
    "checkpoint": {
        "async_mode": "lit:disabled,async,async_with_pinned_mem", "create_seed_checkpoint": "bool", "enable": "bool",
        "enable_first_step_checkpoint": "bool", "exclude_from_loading": "list[str]",
        "export_dtype": "lit:float16,bfloat16,float32", "folder": "str", "initial_load_in_hf": "bool",
        "initial_load_in_hf_quantized": "bool", "initial_load_model_only": "bool", "initial_load_path": "str?",
        "interval": "int", "keep_latest_k": "int", "last_save_in_hf": "bool", "last_save_model_only": "bool",
        "load_only": "bool", "load_step": "int"},
    "lr_scheduler": {"decay_ratio": "float?", "decay_type": "lit:linear,sqrt,cosine", "min_lr_factor": "float",
                     "total_steps": "int?", "warmup_steps": "int"},
    "metrics": {"disable_color_printing": "bool", "enable_tensorboard": "bool", "enable_wandb": "bool",
                "log_freq": "int", "save_for_all_ranks": "bool", "save_tb_folder": "str"},
    "profiler": {"enable_memory_snapshot": "bool", "enable_profiling": "bool", "memory_snapshot_freq": "int?",
                 "memory_snapshot_max_entries": "int", "profile_freq": "int", "profiler_active": "int",
                 "profiler_repeat": "int?", "profiler_skip_first": "int?", "profiler_skip_first_wait": "int?",
                 "profiler_warmup": "int", "save_memory_snapshot_folder": "str", "save_traces_folder": "str"},
    "validator": {"enable": "bool", "freq": "int", "steps": "int"},
    "dataloader": {"seed": "int"},
    "loss": {"num_chunks": "int"},
    "optimizer": {"implementation": "lit:for-loop,foreach,fused,fused_opt_states_bf16"},
}
# What main renamed since 0.3.0 (DIALECTS.md, "Renamed keys"), for a helpful refusal.
RENAMED = {"training.local_batch_size": "training.num_tokens_per_microbatch_per_dp_rank",
           "training.global_batch_size": "training.num_tokens_per_train_step",
           "training.seq_len": "training.max_context_length",
           "parallelism.pipeline_parallel_microbatch_size": "parallelism.num_pp_microbatches"}
RENAMED_BACK = {v: k for k, v in RENAMED.items()}

# activation_checkpoint.py:332-337: subcommand name -> the class it selects (None: no AC)
AC_SECTION = "activation_checkpoint"
AC_SUBCOMMANDS = {"selective": "SelectiveAC.Config", "full": "FullAC.Config",
                  "memory-budget": "MemoryBudgetAC.Config", "none": None}


def schema_for(version: str | None) -> dict:
    """section -> field -> type for a version id ("main@b5bcd76c6", "0.3.0"), or the union of both
    (where a field's types differ, the first version's wins; choices are merged)."""
    key = _version_key(version)
    if key is not None:
        return SCHEMAS[key]
    merged: dict = {}
    for schema in SCHEMAS.values():
        for section, fields in schema.items():
            into = merged.setdefault(section, {})
            for name, kind in fields.items():
                old = into.get(name)
                if old and old.startswith("lit:") and kind.startswith("lit:") and old != kind:
                    choices = list(dict.fromkeys(old[4:].split(",") + kind[4:].split(",")))
                    into[name] = "lit:" + ",".join(choices)
                elif old is None:
                    into[name] = kind
    return merged


def _version_key(version: str | None) -> str | None:
    if not version:
        return None
    if "0.3.0" in version:
        return "0.3.0"
    if "main" in version or "b5bcd76c6" in version:
        return "main@b5bcd76c6"
    return None


# ----------------------------------------------------------------------------- the data types

class UnknownValue(NamedTuple):
    """An override whose value the script does not determine (an unset variable, $(...))."""

    reason: str


class Override(NamedTuple):
    """One ``--section.field value`` as torchtitan's launcher applies it."""

    path: str                      # dotted config path, underscores: "parallelism.tensor_parallel_degree"
    value: Any                     # typed value; raw str (list of str) when not typed; UnknownValue
    token_index: int               # index of the option's word in the command's arguments
    text: str                      # the words as written: "--parallelism.tensor_parallel_degree 8"
    position: tuple | None = None  # (file, line, col) of the option's word; file is COMMAND_LINE for argv
    kind: str = "value"            # value | flag | subcommand | error
    typed: bool = True             # False: the field's type is not known here (value is the raw text)
    refusal: Any = None            # InputError tyro gives unless the checkout's own dataclass has the field

    @property
    def known(self) -> bool:
        return not isinstance(self.value, UnknownValue)

    def where(self) -> str:
        if not self.position:
            return f"argument {self.token_index + 1}"
        file, line, col = self.position
        return f"the command line, column {col}" if file == COMMAND_LINE else f"{os.path.basename(file)}:{line}:{col}"


class Launch:
    """One torchtitan run: which config, its overrides, and what the launcher says about the world."""

    def __init__(self, module: str | None, config: str | None, overrides: list, hints: list | None = None,
                 launcher: str = "cli", file: str | None = None, line: int = 1, text: str = "",
                 facts: dict | None = None, notes: list | None = None, error: InputError | None = None):
        self.module = module          # --module as torchtitan gets it (a shorthand or a dotted module)
        self.config = config          # --config: the function name
        self.overrides = overrides    # [Override], in order (a later one wins, as in tyro)
        self.hints = hints or []      # [topology.Hint], most specific first: torchrun/NGPU, srun, #SBATCH
        self.launcher = launcher      # cli | torchrun | python | run_train.sh (+ "srun " prefix)
        self.file = file              # the launch script, None for a command line
        self.line = line              # line of the launcher word (torchrun, python, run_train.sh)
        self.text = text              # the command, shortened, for messages
        self.facts = facts or {}      # torchrun/srun/#SBATCH/env values as written (strings)
        self.notes = notes or []      # things a user should know (passes "$@" through, elastic nnodes)
        self.error = error            # why this launch cannot be checked (an ML006 InputError)

    @property
    def display(self) -> str:
        """``run.sh:12::llama3_70b`` for a script's launch line, ``--module M --config F`` otherwise."""
        if self.file:
            return f"{self.file}:{self.line}::{self.config or '?'}"
        return f"--module {self.module} --config {self.config}"

    def __repr__(self) -> str:
        return (f"Launch({self.module!r}, {self.config!r}, {len(self.overrides)} overrides, "
                f"line={self.line}, hints={[h.source for h in self.hints]!r})")


class Word:
    """One shell word after expansion. Unknown parts of ``text`` are UNKNOWN_CHAR; ``unknown`` says why."""

    __slots__ = ("text", "unknown", "line", "col", "raw", "splat", "vars")

    def __init__(self, text: str, line: int = 1, col: int = 1, raw: str | None = None,
                 unknown: str | None = None, splat: bool = False, vars: tuple = ()):
        self.text = text
        self.unknown = unknown   # None: fully known
        self.line = line
        self.col = col
        self.raw = text if raw is None else raw
        self.splat = splat       # expands to an unknown number of words ("$@", an unquoted unset $X)
        self.vars = vars         # ((name, value, line set or None[, note]), ...) that went into it

    def known(self) -> bool:
        return self.unknown is None and not self.splat

    def __repr__(self) -> str:
        return f"Word({self.text!r}{', unknown' if self.unknown else ''}{', splat' if self.splat else ''})"


class _Origin(NamedTuple):
    file: str | None               # script path, or None (argv)
    line_of_cli: bool = False      # argv: positions are columns of the joined command line


# ----------------------------------------------------------------------------- parsing argv

def parse_launch_args(argv: list, version: str | None = None) -> Launch:
    """A launch given as argv: meshlint's own ``--module M --config F [--] OVERRIDES``, or a whole
    command (``torchrun ... -m torchtitan.train ...``, ``python -m torchtitan.train ...``,
    ``NGPU=8 MODULE=llama3 CONFIG=llama3_8b ./run_train.sh ...``). Raises InputError(ML006/ML007)."""
    if not isinstance(argv, (list, tuple)) or not all(isinstance(a, str) for a in argv):
        raise InputError("ML006", "a launch line is a list of words")
    if len(argv) > MAX_ARGS:
        raise InputError("ML007", f"the launch line has {len(argv):,} words (limit {MAX_ARGS:,})")
    words, col = [], 1
    for arg in argv:
        if len(arg) > MAX_WORD_CHARS:
            raise InputError("ML007", f"a launch argument is {len(arg):,} characters long (limit {MAX_WORD_CHARS:,})")
        if UNKNOWN_CHAR in arg:
            raise InputError("ML006", "a launch argument contains a NUL character")
        words.append(Word(arg, 1, col))
        col += len(shlex.quote(arg)) + 1
    origin = _Origin(None, True)
    launch = launch_from_words(words, origin, version=version)
    if launch is None and words and not words[0].text.startswith("-"):
        raise InputError("ML006", f"{argv[0]!r} ... does not start torchtitan.train or KempnerForge's "
                                  "scripts/train.py: a launch is torchrun/python -m torchtitan.train (--module M "
                                  "--config F, or v0.2's --job.config_file X.toml), run_train.sh, torchtitan's own "
                                  "--module M --config F ..., or [torchrun|srun|uv run] python scripts/train.py "
                                  "CONFIG.toml --section.key=value ...",
                         1, 1, help="e.g. torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config "
                                    "llama3_8b, or torchrun --nproc_per_node=2 scripts/train.py configs/train/debug.toml")
    if launch is None:
        # meshlint's own form: torchtitan's arguments directly
        launch = _trainer_launch(words, origin, "cli", env={}, version=version, first=words[0] if words else None)
    if launch.error is not None:
        raise launch.error
    return launch


def parse_launch_line(text: str, version: str | None = None) -> Launch | None:
    """A launch written as one shell command line (variables are unknown unless assigned on it)."""
    from meshlint.inputs.scripts import launches_in_text

    launches = launches_in_text(text, file=None, version=version)
    if not launches:
        return None
    if launches[0].error is not None:
        raise launches[0].error
    return launches[0]


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
FRAMEWORK_LAUNCHES = ("meshlint.frameworks.megatron.launch", "meshlint.inputs.bridge_launch")
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
    while i < n:
        w = words[i]
        if w.splat:
            return None
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


def _sub(word: Word, start: int) -> Word:
    """The part of a word after ``start`` (the value of NAME=value, of --opt=value)."""
    text = word.text[start:]
    unknown = word.unknown if UNKNOWN_CHAR in text else None
    return Word(text, word.line, word.col + start, word.raw, unknown, False, word.vars)


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


def _int_of(word: Word | None, what: str, notes: list, lo: int = 1) -> int | None:
    if word is None:
        return None
    if not word.known():
        notes.append(f"{what} is {_shown(word)}, which the script does not determine ({word.unknown or 'unknown'})")
        return None
    t = word.text.strip()
    if not t.isdigit() or len(t) > 9 or not lo <= int(t) <= MAX_WORLD:
        notes.append(f"{what} {t!r} is not a whole number from {lo} to {MAX_WORLD:,}")
        return None
    return int(t)


def _shown(word: Word) -> str:
    return word.raw if word.raw else word.text.replace(UNKNOWN_CHAR, "?")


def _where(word: Word, origin: _Origin) -> str:
    if origin.file:
        return f"line {word.line}"
    return "on the command line"


def _var_note(words: list) -> str:
    seen, parts = set(), []
    for w in words:
        for item in w.vars:
            name, value, line = item[:3]
            note = item[3] if len(item) > 3 else None
            if name in seen:
                continue
            seen.add(name)
            where = f" on line {line}" if line else ""
            parts.append(f"{name}={value}{where}" + (f" ({note})" if note else ""))
    return f"; {', '.join(parts)}" if parts else ""


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
        parts.append(f"--nnodes {nnodes_w.text if nnodes_w.known() else _shown(nnodes_w)}")
    if nproc_w is not None:
        parts.append(f"--nproc_per_node {nproc_w.text if nproc_w.known() else _shown(nproc_w)}")
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


def _slurm_hints(srun: dict | None, srun_word: Word | None, sbatch: dict | None, origin: _Origin, direct: bool,
                 notes: list, facts: dict | None = None) -> list:
    """Hints from srun's options on the launch line and the script's #SBATCH lines.

    Under torchrun (``direct=False``) they give the node shape only: torchrun decides the world.
    When srun starts the trainer itself, its tasks are the ranks: srun's options over the
    allocation's (#SBATCH) give the task count."""
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
        if direct and opts is not sb:
            world = ntasks or (nodes * per_node if nodes and per_node else None)
            if per_node:
                gpn = per_node          # ranks per node: what placement needs
        if world is None and gpn is None and nodes is None:
            continue
        if world is not None and world > MAX_WORLD:
            notes.append(f"{where} starts {world:,} tasks, more than {MAX_WORLD:,}")
            world = None
        shown = " ".join(f"--{k}={w.text if w.known() else _shown(w)}" for k, w in shown_opts.items() if k in keys)
        if opts is not sb and sb and any(k in sb for k in keys):
            shown += " in the allocation of " + " ".join(
                f"--{k}={w.text if w.known() else _shown(w)}" for k, w in sb.items() if k in keys)
            shown += f" ({(sbatch or {}).get('where') or '#SBATCH'})"
        out.append(Hint(f"{where}: {shown.strip()}" if shown.strip() else where, world, gpn, nodes))
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
                          facts=launch.facts)
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


def _err(message: str, word: Word, origin: _Origin, help: str | None = None, code: str = "ML006") -> InputError:
    if origin.file:
        return InputError(code, message, word.line, word.col, help=help)
    return InputError(code, message, 1, word.col, help=help)


def _norm(name: str) -> str:
    """tyro's delimiter swap (tyro/_strings.py swap_delimiters_in_field_name), towards underscores:
    each dotted part has its inner hyphens swapped, its leading and trailing ones kept."""
    out = []
    for part in name.split("."):
        core = part.strip("-")
        lead = part[: len(part) - len(part.lstrip("-"))]
        trail = part[len(lead) + len(core):] if core else ""
        out.append(lead + core.replace("-", "_") + trail if core else part)
    return ".".join(out)


def _looks_negative(t: str) -> bool:
    # tyro/_backends/_tyro_backend.py _looks_like_negative_number
    if not (t.startswith("-") and len(t) > 1 and t[1] != "-"):
        return False
    rest = t[1:]
    return rest[0].isdigit() or rest[0] == "." or rest.lower() in ("inf", "infinity", "nan")


def _blocks(word: Word) -> bool:
    """Whether tyro refuses to take this word as an option's value (_blocks_value_consumption):
    ``--``, or a dash followed by a letter (``-foo``, ``--x``), but not a negative number."""
    if word.splat:
        return False
    t = word.text
    if t == "--":
        return True
    key = t.partition("=")[0]
    if _looks_negative(key):
        return False
    return key.startswith("-") and len(key) > 1 and key.lstrip("-")[:1].isalpha()


def _subcommand(word: Word) -> tuple | None:
    """``activation-checkpoint:full`` (hyphens or underscores, 'None' for 'none') -> (section, choice)."""
    t = word.text
    if word.splat or ":" not in t or t.startswith("-"):
        return None
    section, _, choice = t.partition(":")
    if _norm(section) != AC_SECTION:
        return None
    if choice.endswith("None"):
        choice = choice[:-4] + "none"
    choice = choice.replace("_", "-")
    return (AC_SECTION, choice) if choice in AC_SUBCOMMANDS else None


def parse_overrides(args: list, origin: _Origin | None = None, version: str | None = None,
                    notes: list | None = None) -> list:
    """tyro's reading of torchtitan's options (``--module``/``--config`` already taken out).

    ``args``: [(index, Word)] or [Word] or [str]. Returns [Override]; raises InputError(ML006) where
    tyro would refuse the command line, ML007 past a documented limit."""
    origin = origin or _Origin(None, True)
    notes = notes if notes is not None else []
    items = []
    for k, a in enumerate(args):
        if isinstance(a, tuple):
            items.append(a)
        elif isinstance(a, Word):
            items.append((k, a))
        else:
            items.append((k, Word(str(a), 1, 1)))
    schema = schema_for(version)
    out: list = []
    k = 0
    n = len(items)
    subcommand: str | None = None   # the activation_checkpoint subcommand, once given
    double_dash = False
    while (k := skip_splats(items, k, notes, origin)) < n:
        index, w = items[k]
        t = w.text
        if t == "--" and not double_dash:
            double_dash = True
            k += 1
            continue
        if double_dash:
            raise _err(f"{t!r} comes after '--', where torchtitan's parser (tyro) takes no options: it refuses the "
                       f"line (\"Unrecognized options: {t}\")", w, origin,
                       help="remove the '--': torchtitan reads its overrides directly after --config")
        if t in ("-h", "--help"):
            raise _err(f"{t} makes torchtitan print its help and exit: the line runs no training", w, origin)
        sub = _subcommand(w)
        if sub is not None:
            if subcommand is not None:
                raise _err(f"a second activation-checkpoint subcommand {t!r}: tyro takes one (\"Unrecognized "
                           f"options: {t}\")", w, origin)
            subcommand = sub[1]
            out.append(Override(AC_SECTION, AC_SUBCOMMANDS[sub[1]], index, _shown(w), _pos(w, origin), "subcommand",
                                True))
            k += 1
            continue
        if not (t.startswith("--") and len(t) > 2) or UNKNOWN_CHAR in t.partition("=")[0]:
            if UNKNOWN_CHAR in t.partition("=")[0] and t.startswith("--"):
                path = _known_prefix(_norm(t[2:].partition("=")[0]))
                out.append(Override(path, UnknownValue(f"the option {_shown(w)} is built from "
                                                       f"{w.unknown or 'an unknown value'}"),
                                    index, _shown(w), _pos(w, origin), "value", False))
                k += 1
                while k < n and not _blocks(items[k][1]) and _subcommand(items[k][1]) is None:
                    k += 1
                continue
            raise not_an_option(w, origin)
        name, eq, eqval = t[2:].partition("=")
        path = _norm(name)
        parts = path.split(".")
        section = parts[0]
        if subcommand is not None and section != AC_SECTION:
            raise _err(f"{t.partition('=')[0]} comes after the subcommand activation-checkpoint:{subcommand}, "
                       f"where tyro reads only --activation-checkpoint.* options (\"Unrecognized options\")",
                       w, origin, help="put the activation-checkpoint subcommand (and its options) last")
        if section == AC_SECTION and subcommand is None:
            raise _err(f"{t.partition('=')[0]}: tyro reads activation_checkpoint options only after a subcommand "
                       f"(\"Unrecognized options\")", w, origin,
                       help="write e.g. activation-checkpoint:full --activation-checkpoint.debug (distributed/"
                            "activation_checkpoint.py:332-337)")
        if section in ("model_spec", "model"):
            raise _err(f"{t.partition('=')[0]}: the model is not on torchtitan's command line (Trainer.Config."
                       f"model_spec is tyro.conf.Suppress, trainer.py:77): tyro refuses it", w, origin,
                       help="the model comes from model_spec=model_registry(...) in the config function")
        kind = _field_type(schema, parts)
        inverse = False
        if kind is None and len(parts) >= 1 and parts[-1].startswith("no_"):
            positive = parts[:-1] + [parts[-1][3:]]
            if _field_type(schema, positive) == "bool":
                kind, parts, inverse = "bool", positive, True
                path = ".".join(parts)
        refusal = None
        if kind is None and section in STRICT_SECTIONS and len(parts) >= 2:
            refusal = _unknown_option(t.partition("=")[0], path, schema, w, origin)
            if version is not None or len(parts) > 2:
                raise refusal
            # with no version yet (the checkout is read later), a field neither modelled version has is judged
            # by apply_overrides against the applied version and the checkout's own dataclass (an ETP-era
            # checkout has --parallelism.expert_tensor_parallel_degree); without a checkout, refused as here
        if kind is None and len(parts) == 1 and section not in TOP_LEAVES and section in TRAINER_SECTIONS:
            raise _err(f"--{name} names a whole section: tyro takes its fields (--{name}.FIELD)", w, origin)
        if kind == "bool":
            if eq:
                raise _err(f"--{name} is a flag and takes no value: tyro reads {eqval!r} as a stray argument and "
                           f"refuses the line (\"Unrecognized options: {eqval}\")", w, origin,
                           help=f"write --{'.'.join(parts[:-1] + [parts[-1]]).replace('_', '-')} or "
                                f"--{'.'.join(parts[:-1] + ['no-' + parts[-1]]).replace('_', '-')}")
            out.append(Override(path, not inverse, index, _shown(w), _pos(w, origin), "flag", True))
            k += 1
            continue
        # options with values
        values: list = []
        k += 1
        if eq:
            values.append(_sub(w, 2 + len(name) + 1))
        if kind is None:
            # a component's field (or a subclass's section): its type, and so how many words it takes,
            # come from the config; take the words tyro would not refuse
            if not eq:
                while k < n and not _blocks(items[k][1]) and _subcommand(items[k][1]) is None:
                    values.append(items[k][1])
                    k += 1
            text = " ".join([_shown(w)] + [_shown(v) for v in values[1 if eq else 0:]])
            if any(not v.known() for v in values):
                bad = next(v for v in values if not v.known())
                value: Any = UnknownValue(bad.unknown or f"{_shown(bad)} expands to any number of words")
            elif not values:
                value = True if not parts[-1].startswith("no_") else False
                if parts[-1].startswith("no_"):
                    path = ".".join(parts[:-1] + [parts[-1][3:]])
                out.append(Override(path, value, index, text, _pos(w, origin), "flag", False, refusal))
                continue
            else:
                value = values[0].text if len(values) == 1 else [v.text for v in values]
            out.append(Override(path, value, index, text, _pos(w, origin), "value", False, refusal))
            continue
        k = take_values(items, k, values, w, name, eq, kind in ("list[list[str]]?", "imports"), origin)
        out.append(Override(path, typed_value(values, kind, name, w, origin), index, _option_text(w, values, eq),
                            _pos(w, origin), "value", True))
    return out


def take_values(items: list, k: int, values: list, w: Word, name: str, eq: bool, many: bool, origin) -> int:
    """Append to ``values`` the words tyro gives option ``--name`` (at ``items[k]``, after it): a
    multi-word type every word up to one tyro refuses to consume (or a subcommand), after an ``=`` value
    too; otherwise the next word unless ``=`` gave one, refused when missing. Returns the index after."""
    n = len(items)
    if many:
        while k < n and not _blocks(items[k][1]) and _subcommand(items[k][1]) is None:
            values.append(items[k][1])
            k += 1
    elif not eq:
        if k >= n or _blocks(items[k][1]):
            raise _err(f"--{name} needs a value: tyro refuses the line (\"Missing value for argument "
                       f"'--{name.replace('_', '-')}'. Expected 1 values.\")", w, origin)
        values.append(items[k][1])
        k += 1
    return k


def typed_value(values: list, kind: str, name: str, w: Word, origin):
    """The option's value as tyro builds it for ``kind``; an UnknownValue when a word is unknown."""
    unknown = next((v for v in values if not v.known()), None)
    if unknown is not None:
        return UnknownValue(unknown.unknown or f"{_shown(unknown)} expands to any number of words")
    return _typed(kind, [v.text for v in values], "--" + name, w, origin)


def _option_text(w: Word, values: list, eq: bool) -> str:
    return " ".join([_shown(w)] + [_shown(v) for v in values[1 if eq else 0:]])


def splat_note(w: Word, origin: _Origin) -> str:
    """The note for "$@" (or an unquoted unknown variable) among a launch's arguments."""
    return (f"{_shown(w)} ({_where(w, origin)}) passes on arguments meshlint cannot see: the config is checked as "
            "run without them")


def not_an_option(w: Word, origin: _Origin) -> InputError:
    """A word where torchtitan's parser (tyro) wants ``--section.option``."""
    return _err(f"{_shown(w)!r} is not a --section.option override: torchtitan's parser (tyro) refuses it "
                f"(\"Unrecognized options: {w.text}\")", w, origin,
                help="overrides look like --parallelism.tensor_parallel_degree 8")


def skip_splats(items: list, k: int, notes: list, origin: _Origin) -> int:
    """The index of the next (index, Word) item from ``k`` that is not a splat, noting each one skipped."""
    while k < len(items) and items[k][1].splat:
        notes.append(splat_note(items[k][1], origin))
        k += 1
    return k


def _pos(word: Word, origin: _Origin) -> tuple:
    return (origin.file or COMMAND_LINE, word.line, word.col)


def _known_prefix(path: str) -> str:
    parts = path.split(".")
    keep = []
    for p in parts:
        if UNKNOWN_CHAR in p:
            break
        keep.append(p)
    return ".".join(keep)


def _field_type(schema: dict, parts: list) -> str | None:
    if len(parts) == 1:
        return TOP_LEAVES.get(parts[0])
    if len(parts) == 2:
        return schema.get(parts[0], {}).get(parts[1]) or COMPONENT_FIELDS.get(parts[0], {}).get(parts[1])
    return None


def _unknown_option(flag: str, path: str, schema: dict, word: Word, origin: _Origin) -> InputError:
    section, _, field = path.partition(".")
    fields = schema.get(section, {})
    close = difflib.get_close_matches(field, list(fields), n=1, cutoff=0.6)
    old = path if path in RENAMED else RENAMED_BACK.get(path)
    if old is not None and RENAMED[old].partition(".")[2] in fields:
        help = f"torchtitan main renamed --{old} to --{RENAMED[old]}: use that"
    elif old is not None and old.partition(".")[2] in fields:
        help = f"--{path} is torchtitan main's name; 0.3.0 calls it --{old}"
    elif close:
        help = f"did you mean --{section}.{close[0]}?"
    else:
        help = f"--{section} options: " + ", ".join(sorted(fields))
    return _err(f"unknown option {flag}: {section} has no field {field!r}, and torchtitan's parser (tyro) refuses "
                f"it (\"Unrecognized options: {flag}\")", word, origin, help=help)


def _typed(kind: str, texts: list, flag: str, word: Word, origin: _Origin):
    """A value as tyro builds it for the field's type (each rule confirmed against tyro 1.0.17)."""
    if kind in ("list[list[str]]?", "imports"):
        if kind == "list[list[str]]?" and texts == ["None"]:
            return None
        return [t.split(",") for t in texts] if kind == "list[list[str]]?" else list(texts)
    text = texts[0]
    if kind.endswith("?"):
        if text == "None":
            return None
        kind = kind[:-1]
    if kind == "int":
        return _int_value(text, flag, word, origin)
    if kind in ("float", "float|int"):
        try:
            return float(text)
        except ValueError:
            raise _err(f"{flag} {text!r}: not a number, and tyro refuses it (\"could not convert string to float: "
                       f"{text!r}\")", word, origin) from None
    if kind.startswith("lit:"):
        choices = kind[4:].split(",")
        if text not in choices:
            close = difflib.get_close_matches(text, choices, n=1, cutoff=0.5)
            raise _err(f"{flag} {text!r}: tyro refuses it (\"invalid choice {text!r} for argument "
                       f"'{flag.replace('_', '-')}'. Expected one of {tuple(choices)!r}.\")", word, origin,
                       help=f"did you mean {close[0]!r}?" if close else None)
        return text
    if kind == "list[str]":
        return text.split(",")
    return text


def _int_value(text: str, flag: str, word: Word, origin: _Origin) -> int:
    digits = sum(c.isdigit() for c in text)
    if digits > MAX_INT_DIGITS or len(text) > MAX_INT_DIGITS * 2:
        raise _err(f"{flag} has a {digits:,}-digit value (limit {MAX_INT_DIGITS:,} digits)", word, origin,
                   code="ML007")
    try:
        return int(text)  # tyro calls int(): " 8", "+8", "1_000" are 8, 8, 1000; "8.0", "0x10" are refused
    except ValueError:
        raise _err(f"{flag} {text!r}: not a whole number, and tyro refuses it (\"invalid literal for int() with "
                   f"base 10: {text!r}\")", word, origin) from None


# ----------------------------------------------------------------------------- applying overrides

def apply_overrides(source, overrides: list, version: str | None = None, checkout: str | None = None) -> None:
    """Set each override's value in ``source.data`` (a PySource or a saved config), in order, and make
    ``locate``/``file_of`` point at the override for what it set.

    Works on private copies of ``data``, ``positions``, ``unknown`` and ``types`` (a registry reader
    may share them between configs). Sets ``source.file_of`` (and wraps ``locate``) even when there
    are no overrides, so every finding of a launch names its file. An override with an unknown value makes its path unknown
    (never a guess). ``checkout``: the torchtitan package the registry belongs to, whose own section dataclasses
    may define a field the applied version lacks. Raises InputError(ML006) where torchtitan would refuse the launch."""
    from meshlint.inputs.pysource import Unknown

    source.data = copy.deepcopy(getattr(source, "data", {}) or {})
    source.positions = dict(getattr(source, "positions", {}) or {})
    source.unknown = dict(getattr(source, "unknown", {}) or {})
    source.types = dict(getattr(source, "types", {}) or {})
    set_by = dict(getattr(source, "overridden", {}) or {})   # dotted path -> Override
    nested = getattr(source, "nested_under", None)
    if nested and isinstance(getattr(source, "outer", None), dict):
        source.outer = copy.deepcopy(source.outer)
    config_class = source.types.get("")
    plain = config_class in ("Trainer.Config", None) and not nested
    schema = schema_for(version)
    vkey = _version_key(version)
    for ov in overrides:
        if ov.kind == "error":
            raise ov.value
        parts = ov.path.split(".") if ov.path else []
        if nested and parts and parts[0] == nested:
            parts = parts[1:]
        elif nested:
            # an RL controller's own option (the trainer config is nested under it): not the trainer's
            outer = getattr(source, "outer", None)
            if isinstance(outer, dict) and ov.known and len(parts) <= 2:
                outer.setdefault(parts[0], {}) if len(parts) == 2 else None
                if len(parts) == 2 and isinstance(outer[parts[0]], dict):
                    outer[parts[0]][parts[1]] = ov.value
                elif len(parts) == 1:
                    outer[parts[0]] = ov.value
            continue
        if not parts:
            # an option whose name is not known at all: everything may be changed
            _mark_unknown(source, (), ov, Unknown)
            set_by[""] = ov
            continue
        section = parts[0]
        word = Word(ov.text, *(ov.position[1:] if ov.position else (1, 1)))
        origin = _Origin(ov.position[0] if ov.position and ov.position[0] != COMMAND_LINE else None, True)
        if section not in TRAINER_SECTIONS and section not in TOP_LEAVES and section not in source.data and plain:
            close = difflib.get_close_matches(section, list(TRAINER_SECTIONS), n=1, cutoff=0.6)
            raise _err(f"unknown option --{ov.path}: {config_class or 'Trainer.Config'} has no section {section!r}, "
                       f"and torchtitan's parser (tyro) refuses it (\"Unrecognized options\")", word, origin,
                       help=f"did you mean --{close[0]}.{'.'.join(parts[1:])}?" if close else
                       f"sections: {', '.join(TRAINER_SECTIONS)}")
        own_kind = None  # the type of a field only the checkout's own dataclass has
        if vkey is None and ov.refusal is not None:
            own_kind = _checkout_kind(checkout, section, parts[1])
            if own_kind is None:
                raise ov.refusal
        elif vkey is not None and section in STRICT_SECTIONS and len(parts) == 2 and parts[1] not in schema[section] \
                and source.types.get(section) in (None, _DATACLASS.get(section)):
            own_kind = _checkout_kind(checkout, section, parts[1])
            if own_kind is None:
                raise _unknown_option(f"--{ov.path}", ov.path, _with_checkout_fields(schema, checkout, section),
                                      word, origin)
        if ov.kind == "subcommand":
            cls = ov.value
            if cls is None:
                _set(source, parts, None, ov)
                source.types.pop(section, None)
            else:
                keep = source.types.get(section) == cls and isinstance(source.data.get(section), dict)
                _set(source, parts, source.data[section] if keep else {}, ov, keep_below=keep)
                source.types[section] = cls
            set_by[section] = ov
            continue
        value = ov.value
        if not ov.known:
            _mark_unknown(source, tuple(parts), ov, Unknown)
            set_by[".".join(parts)] = ov
            continue
        if own_kind is not None and not ov.typed:
            value = _typed_as(own_kind, value, ov, word, origin)
        elif not ov.typed and _field_type(schema, parts) is not None and nested:
            # an RL config's "--trainer.parallelism..." is the trainer's field: type it as one
            kind = _field_type(schema, parts)
            if kind == "bool":
                value = value if isinstance(value, bool) else UnknownValue(f"{ov.text}: a flag takes no value")
            else:
                texts = value if isinstance(value, list) else [value]
                value = _typed(kind, [str(t) for t in texts], "--" + ov.path, word, origin)
        elif not ov.typed:
            value = _schema_typed(source, parts, value, ov, version, word, origin)
            if value is _UNTYPED:
                value = _type_by_existing(source, parts, ov.value, ov)
        if isinstance(value, UnknownValue):
            _mark_unknown(source, tuple(parts), ov._replace(value=value), Unknown)
            set_by[".".join(parts)] = ov
            continue
        _set(source, parts, value, ov)
        set_by[".".join(parts)] = ov
    source.overridden = set_by
    if hasattr(source, "_kinds"):
        source._kinds = None    # PySource caches which paths are set
    file_of = _FileOf(source)
    if not isinstance(getattr(source, "locate", None), _Locate):
        source.locate = _Locate(source.locate, file_of)
    source.file_of = file_of


_UNTYPED = object()


def _checkout_kind(checkout: str | None, section: str, field: str) -> str | None:
    """The annotation kind of ``section.field`` in the checkout's own dataclass (None: it has no such field)."""
    if not checkout:
        return None
    from meshlint.frameworks.torchtitan import ttcode

    return ttcode.field_kind(checkout, section, field)


def _with_checkout_fields(schema: dict, checkout: str | None, section: str) -> dict:
    """``schema`` with the checkout's own fields of ``section`` added (the did-you-mean's candidates)."""
    if not checkout:
        return schema
    from meshlint.frameworks.torchtitan import ttcode

    own = ttcode.section_fields(checkout).get(section) or {}
    return {**schema, section: {**{f: "" for f in own}, **schema.get(section, {})}}


def _typed_as(kind: str, value, ov: Override, word: Word, origin: _Origin):
    """An untyped override of a field the checkout defines, typed as tyro types its annotation ("" leaves
    the raw text: a type meshlint does not model)."""
    flag = "--" + ov.path
    if kind == "bool":
        if value is True or value is False:
            return value
        raise _err(f"{flag} is a flag and takes no value: tyro reads {value!r} as a stray argument and refuses the "
                   f"line (\"Unrecognized options: {value}\")", word, origin)
    if value is True or value is False:
        if not kind:
            return value
        raise _err(f"{flag} requires a value (tyro: \"expected 1 argument\")", word, origin)
    if not kind:
        return value
    texts = value if isinstance(value, list) else [value]
    if len(texts) != 1:
        raise _err(f"{flag} takes one value, and the line gives {len(texts)}: tyro refuses the extra words "
                   f"(\"Unrecognized options\")", word, origin)
    return _typed(kind, [str(texts[0])], flag, word, origin)


def _schema_typed(source, parts: list, value, ov: Override, version: str | None, word: Word, origin: _Origin):
    """A component section's option checked against the generated schema of the class the config holds
    there (tyro's options are that class's fields): an unknown field, a flag given a value, a value tyro
    cannot parse or outside a Literal is refused (ML006) as tyro refuses it; _UNTYPED when the schema
    cannot tell (then the value is typed like the one the config holds)."""
    if len(parts) != 2 or parts[0] in STRICT_SECTIONS:
        return _UNTYPED
    from meshlint.frameworks import schema_check

    verdict = schema_check.override_field(_version_key(version), parts[0], parts[1], source.types.get(parts[0]))
    if verdict is None:
        return _UNTYPED
    what, info, cls = verdict
    flag = "--" + ov.path
    if what == "unknown":
        close = difflib.get_close_matches(parts[1], info, n=1, cutoff=0.6)
        raise _err(f"unknown option {flag}: {cls} has no field {parts[1]!r}, and torchtitan's parser (tyro) refuses "
                   f"it (\"Unrecognized options: {flag}\")", word, origin,
                   help=f"did you mean --{parts[0]}.{close[0]}?" if close else f"{cls} fields: {', '.join(info)}")
    if what == "suppressed":
        raise _err(f"unknown option {flag}: {cls}.{parts[1]} is tyro.conf.Suppress ({info}), so torchtitan's parser "
                   f"has no such option and refuses it (\"Unrecognized options: {flag}\")", word, origin,
                   help="set it in the config function instead")
    if info is None:
        return _UNTYPED
    if info == "bool":
        if value is True or value is False:
            return value
        raise _err(f"{flag} is a flag and takes no value: tyro reads {value!r} as a stray argument and refuses the "
                   f"line (\"Unrecognized options\")", word, origin,
                   help=f"write {flag} or --{parts[0]}.no-{parts[1]}")
    if value is True or value is False:
        raise _err(f"{flag} needs a value: tyro refuses the line (\"Missing value for argument "
                   f"'{flag.replace('_', '-')}'\")", word, origin)
    texts = value if isinstance(value, list) else [value]
    if len(texts) != 1:
        raise _err(f"{flag} takes one value, and tyro refuses the others (\"Unrecognized options\")", word, origin)
    return _typed(info, [str(texts[0])], flag, word, origin)


_DATACLASS = {"training": "TrainingConfig", "parallelism": "ParallelismConfig", "compile": "CompileConfig",
              "comm": "CommConfig", "debug": "DebugConfig", "override": "OverrideConfig"}


def _pydotted(parts) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int) or (isinstance(p, str) and p.isdigit()):
            out += f"[{int(p)}]"
        else:
            out = f"{out}.{p}" if out else str(p)
    return out


def _drop_below(mapping: dict, dotted: str) -> None:
    for key in [k for k in mapping if k == dotted or k.startswith(dotted + ".") or k.startswith(dotted + "[")]:
        del mapping[key]


def _container(source, parts: list, ov: Override, create: bool = True):
    """The dict (or list) holding the last part, created on the way when ``create``."""
    node = source.data
    for depth, p in enumerate(parts[:-1]):
        if isinstance(node, list):
            if not p.isdigit() or int(p) >= len(node):
                raise _override_error(ov, f"{'.'.join(parts[:depth + 1])} has no item {p}")
            node = node[int(p)]
            continue
        if not isinstance(node, dict):
            raise _override_error(ov, f"{'.'.join(parts[:depth])} is not a section")
        child = node.get(p)
        if child is None or not isinstance(child, (dict, list)):
            if not create:
                return None
            if child is not None and not isinstance(child, dict):
                raise _override_error(ov, f"{'.'.join(parts[:depth + 1])} holds a value, not a section")
            if p in node:
                what = ("activation checkpointing is off (activation-checkpoint:none)" if p == AC_SECTION
                        else f"{'.'.join(parts[:depth + 1])} is None, not a section")
                raise _override_error(ov, what)
            child = node[p] = {}
        node = child
    return node


def _override_error(ov: Override, what: str) -> InputError:
    file, line, col = ov.position if ov.position else (COMMAND_LINE, 1, 1)
    return InputError("ML006", f"cannot apply {ov.text}: {what}", line, col)


def _set(source, parts: list, value, ov: Override, keep_below: bool = False) -> None:
    node = _container(source, parts, ov)
    last = parts[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise _override_error(ov, f"{'.'.join(parts[:-1])} has no item {last}")
        node[int(last)] = value
    else:
        node[last] = value
    dotted = _pydotted(parts)
    if not keep_below:
        _drop_below(source.positions, dotted)
        for key in [k for k in source.types if k.startswith(dotted + ".")]:
            del source.types[key]
    _drop_below(source.unknown, dotted)
    if ov.position:
        source.positions[dotted] = (ov.position[1], ov.position[2])


def _mark_unknown(source, parts: tuple, ov: Override, unknown_cls) -> None:
    dotted = _pydotted(parts)
    if parts:
        node = _container(source, list(parts), ov, create=False)
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    else:
        source.data.clear()
    _drop_below(source.positions, dotted)
    _drop_below(source.unknown, dotted)
    file, line, col = ov.position if ov.position else (COMMAND_LINE, 1, 1)
    source.unknown[dotted] = unknown_cls(f"{ov.text}: {ov.value.reason}", line, col, file)
    if ov.position:
        source.positions[dotted] = (line, col)


def _existing(source, parts: list):
    node: Any = source.data
    for p in parts:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return _MISSING
    return node


_MISSING = object()


def _type_by_existing(source, parts: list, raw, ov: Override):
    """A component field's value typed like the value the config holds there (its default is not
    known here; the raw text is kept then)."""
    old = _existing(source, parts)
    if old is _MISSING or old is None:
        return raw
    try:
        if isinstance(old, bool):
            if raw is True or raw is False:
                return raw
            return UnknownValue(f"{ov.path} holds a bool, which tyro sets with a flag, not with {raw!r}")
        if raw is True or raw is False:
            return UnknownValue(f"{ov.path} holds {type(old).__name__} {old!r}, and {ov.text} gives it no value")
        if isinstance(old, int):
            if isinstance(raw, str) and sum(c.isdigit() for c in raw) <= MAX_INT_DIGITS:
                return int(raw)
        elif isinstance(old, float):
            if isinstance(raw, str):
                return float(raw)
        elif isinstance(old, str):
            return raw if isinstance(raw, str) else " ".join(raw)
        elif isinstance(old, list):
            items = raw.split(",") if isinstance(raw, str) and all(isinstance(x, str) for x in old) else (
                raw if isinstance(raw, list) else [raw])
            if old and all(isinstance(x, float) for x in old):
                return [float(x) for x in items]
            if old and all(isinstance(x, int) and not isinstance(x, bool) for x in old):
                return [int(x) for x in items]
            return items
        else:
            return raw
    except ValueError:
        pass
    return UnknownValue(f"{raw!r} cannot be read as the {type(old).__name__} {ov.path} holds ({old!r})")


class _Locate:
    """The source's own ``locate``, remembering which file each answer is in: a finding's key keeps
    only its first alternative (engine.py), so ``file_of(key, line, col)`` looks the answer up."""

    def __init__(self, locate, file_of):
        self.inner = locate
        self.file_of = file_of

    def __call__(self, key):
        line, col = self.inner(key)
        if key:
            first = key.split("|", 1)[0].strip() if isinstance(key, str) else key
            self.file_of.seen[(first if isinstance(first, str) else tuple(first), line, col)] = self.file_of(key)
        return line, col


class _FileOf:
    """``source.file_of(key[, line, col])``: the file a finding about ``key`` points into (the launch
    script, or COMMAND_LINE, for what an override set; the registry file otherwise). Given the
    finding's line and column it answers what ``locate`` answered for it (alternatives included)."""

    def __init__(self, source):
        self.source = source
        self.seen: dict = {}

    def __call__(self, key, line: int | None = None, col: int | None = None) -> str | None:
        if line is not None and key is not None:
            hit = self.seen.get((key if isinstance(key, str) else tuple(key), line, col))
            if hit is not None:
                return hit
        src = self.source
        base = getattr(src, "file", None) or getattr(src, "path", None)
        if not key:
            return base
        if isinstance(key, str) and key.startswith("#L"):
            return base
        if isinstance(key, str) and "|" in key:
            options = [k.strip() for k in key.split("|") if k.strip()]
            key = next((k for k in options if src.has_key(k)), options[0] if options else "")
            if not key:
                return base
        from meshlint.inputs.source import split_key

        parts = split_key(key) if isinstance(key, str) else tuple(key)
        overridden = getattr(src, "overridden", {})
        for cut in range(len(parts), 0, -1):
            dotted = _pydotted(parts[:cut])
            if dotted in src.positions:
                ov = overridden.get(_tyro_dotted(parts[:cut])) or overridden.get(dotted)
                if ov is not None:
                    return ov.position[0] if ov.position else COMMAND_LINE
                return base
        unknown = src.unknown_of(_pydotted(parts)) if hasattr(src, "unknown_of") else None
        if unknown is not None and getattr(unknown, "file", None):
            return unknown.file
        return base


def _tyro_dotted(parts) -> str:
    return ".".join(str(p) for p in parts)


# ----------------------------------------------------------------------------- saved configs

def read_saved_config(path: str, text: str | None = None):
    """The JSON ``--debug.save_config_file`` writes (trainer.py:238-246: ``json.dump(config.to_dict())``)
    as a PySource: sections as in Trainer.Config, ``model_spec`` {name, flavor, model} read as
    ``data["model"] = {"name", "flavor"}``, positions of every key in the JSON, nothing unknown."""
    import json

    from meshlint.inputs.pysource import PySource

    if text is None:
        from meshlint.inputs.source import read_bytes

        raw = read_bytes(path, MAX_SAVED_BYTES)
        if len(raw) > MAX_SAVED_BYTES:
            raise InputError("ML007", f"file is over {MAX_SAVED_BYTES:,} bytes: larger than any saved torchtitan config "
                                      f"(limit {MAX_SAVED_BYTES:,})")
        if b"\x00" in raw:
            raise InputError("ML002", "binary file (NUL byte at offset %d)" % raw.find(b"\x00"))
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError("ML002", f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    elif len(text) > MAX_SAVED_BYTES:
        raise InputError("ML007", f"the saved config is over {MAX_SAVED_BYTES:,} characters")
    positions = _json_positions(text)   # also bounds the nesting before json.loads recurses
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError("ML006", f"not a saved torchtitan config: invalid JSON ({exc.msg})", exc.lineno,
                         exc.colno) from None
    except (RecursionError, ValueError) as exc:
        raise InputError("ML006", f"not a saved torchtitan config: invalid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("parallelism"), dict):
        raise InputError("ML006", "not a saved torchtitan config: a JSON object with a \"parallelism\" section, as "
                                  "--debug.save_config_file writes, was expected",
                         help="torchtitan writes it to <dump_folder>/<save_config_file> (trainer.py:238-246)")
    model_spec = data.pop("model_spec", None)
    model_config = None
    if isinstance(model_spec, dict):
        model = {k: model_spec[k] for k in ("name", "flavor") if isinstance(model_spec.get(k), str)}
        model_config = model_spec.get("model")
        if model:
            data["model"] = model
        for k in ("name", "flavor"):
            if f"model_spec.{k}" in positions:
                positions[f"model.{k}"] = positions[f"model_spec.{k}"]
        if "model_spec" in positions:
            positions["model"] = positions["model_spec"]
    positions = {k: v for k, v in positions.items() if not k.startswith("model_spec")}
    source = PySource(file=path, function="", text=text, data=data, unknown={}, positions=positions, comments=[],
                      def_line=1, def_col=1)
    source.path = path
    source.saved = True
    source.model_config = model_config   # the model's own config tree as saved (dims, layers)
    return source


_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+|\S')


def _json_positions(text: str) -> dict:
    """dotted key path (``a.b[0].c``) -> (line, col) of the key (or list item) in a JSON text.
    Linear, iterative; deeper nesting than MAX_JSON_DEPTH is refused (ML007)."""
    import bisect
    import json

    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    out: dict = {}
    stack: list = []          # frames: [kind, path, index or pending key]
    pending_key = None
    expect_key = False
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group(0)
        if tok in "{[":
            if len(stack) >= MAX_JSON_DEPTH:
                line = bisect.bisect_right(starts, m.start())
                raise InputError("ML007", f"JSON nested deeper than {MAX_JSON_DEPTH} levels", line, 1)
            path = _json_child(stack, pending_key)
            if path is not None and stack and stack[-1][0] == "[":
                _json_record(out, path, m.start(), starts)
            stack.append([tok, path, 0])
            pending_key = None
            expect_key = tok == "{"
        elif tok in "}]":
            if stack:
                stack.pop()
            expect_key = False
        elif tok == ",":
            if stack and stack[-1][0] == "[":
                stack[-1][2] += 1
            expect_key = bool(stack) and stack[-1][0] == "{"
        elif tok == ":":
            expect_key = False
        elif tok.startswith('"') and expect_key and stack and stack[-1][0] == "{":
            try:
                pending_key = json.loads(tok)
            except ValueError:
                pending_key = tok.strip('"')
            path = _json_child(stack, pending_key)
            if path is not None:
                _json_record(out, path, m.start(), starts)
            expect_key = False
        else:
            if stack and stack[-1][0] == "[":
                path = _json_child(stack, None)
                if path is not None:
                    _json_record(out, path, m.start(), starts)
            pending_key = None
    return out


def _json_child(stack: list, key) -> str | None:
    if not stack:
        return None
    kind, path, index = stack[-1]
    if path is None and len(stack) > 1:
        return None
    if kind == "{":
        if key is None:
            return None
        return f"{path}.{key}" if path else str(key)
    return f"{path}[{index}]" if path else None


def _json_record(out: dict, path: str, offset: int, starts: list) -> None:
    import bisect

    if path in out:
        return
    line = bisect.bisect_right(starts, offset)
    out[path] = (line, offset - starts[line - 1] + 1)
