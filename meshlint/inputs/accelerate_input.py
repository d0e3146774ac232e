"""What an ``accelerate launch`` line says, as Accelerate's launcher merges it with the config file it names: the
source its values come from (``LaunchSource``), its Spec (``launch_spec``) and what the launcher refuses.

The analysis of an Accelerate input (a YAML file, a launch line) up to the rules: engine/accelerate_units.py."""

from __future__ import annotations

import os

from meshlint.errors import InputError


# ----------------------------------------------------------------------------- launch lines

DIST_FLAGS = {"use_fsdp": "FSDP", "multi_gpu": "MULTI_GPU", "use_deepspeed": "DEEPSPEED", "cpu": "NO", "tpu": "XLA",
              "use_megatron_lm": "MEGATRON_LM"}


class LaunchSource:
    """Where the values of an ``accelerate launch`` come from: the command's flags and variables (in the script
    or on the command line) and the config file it names; findings point into whichever set the value."""

    def __init__(self, launch, config=None):
        self.path = launch.display
        self.name = os.path.basename(launch.file or "launch")
        self.text = ""
        self.data: dict = {}
        self.comments: list = []
        self.launch = launch
        self.config = config          # YamlSource of --config_file, or None
        self.positions: dict = {}     # key -> (line, col) in the script / command line

    def locate(self, key):
        if isinstance(key, str) and "|" in key:
            key = next((k for k in key.split("|") if k in self.positions or self._in_config(k)), key.split("|")[0])
        if key in self.positions:
            return self.positions[key]
        if self._in_config(key):
            return self.config.locate(key)
        return (self.launch.line, self.launch.col)

    def _in_config(self, key) -> bool:
        return self.config is not None and isinstance(key, str) and self.config.has_key(key)

    def file_of(self, key, line, col):
        if isinstance(key, str) and "|" in key:
            key = next((k for k in key.split("|") if k in self.positions or self._in_config(k)), key)
        if key not in self.positions and self._in_config(key):
            return self.config.path
        return self.launch.file or "accelerate launch"


def launch_spec(launch, release):
    """(source, Spec) of a launch: the config file's values, overridden by the flags, as the launcher merges them."""
    from meshlint.frameworks.accelerate.config_file import add_world_hint, launcher_problems, launcher_settings
    from meshlint.inputs.hf_model import model_ref

    config, config_data = _config_file(launch)
    source = LaunchSource(launch, config)
    flags = launch.flags
    for name, word in flags.items():
        source.positions[f"--{name}"] = (word.line, max(1, word.col))
    for name, word in launch.env.items():
        source.positions[name] = (word.line, max(1, word.col))
    launcher, problems = launcher_settings(config_data, release.facts()) if config is not None else (
        {"distributed_type": None, "fsdp_version": "1", "num_processes": None, "num_machines": 1}, [])
    given = [DIST_FLAGS[f] for f in DIST_FLAGS if f in flags]
    spec = release.new_spec()
    spec.problems += problems
    if given:
        launcher["distributed_type"] = given[0]
        launcher["distributed_type_key"] = f"--{next(f for f in DIST_FLAGS if f in flags)}"
    for name in ("num_processes", "num_machines"):
        if name in flags:  # a value the script does not determine ($N from the environment) stays unknown
            value, _ = release.as_rank_reads(flags[name].text, "int") if flags[name].known() else (None, None)
            launcher[name], launcher[f"{name}_key"] = value, f"--{name}"
    if "fsdp_version" in flags:
        launcher["fsdp_version"], launcher["fsdp_version_key"] = flags["fsdp_version"].text, "--fsdp_version"
    for name in ("gpu_ids", "mixed_precision", "deepspeed_multinode_launcher", "deepspeed_hostfile", "machine_rank",
                 "main_process_port"):
        word = flags.get(name)
        if word is None:
            continue
        if not word.known():  # a value the script does not determine: unknown, never guessed
            launcher[name], launcher[f"{name}_key"] = _UNKNOWN, f"--{name}"
            continue
        value = word.text
        if name in ("machine_rank", "main_process_port"):
            value, _ = release.as_rank_reads(word.text, "int")
        launcher[name], launcher[f"{name}_key"] = value, f"--{name}"
    # --machine_rank $SLURM_PROCID expanded once by the shell that runs srun, and the rendezvous it goes to
    # (torchrun reads the node rank only under the static one: torch/distributed/run.py config_from_args)
    launcher["machine_rank_once"] = getattr(launch, "rank_once", None)
    launcher["config_file_given"] = config is not None  # a config file always gives machine_rank (0 by default)
    rdzv = flags.get("rdzv_backend")
    launcher["rdzv_backend"] = (rdzv.text if rdzv.known() else _UNKNOWN) if rdzv is not None else \
        config_data.get("rdzv_backend", "static")
    spec.problems += launcher_problems(launcher, release.PASSES_CONFIG)
    section = config_data.get("parallelism_config") if isinstance(config_data.get("parallelism_config"), dict) else {}
    switch = "use_parallelism_config" in flags
    refusals = launch_refusals(flags, given, config, launcher)
    if refusals:
        spec.extra["refusals"] = refusals
        spec.load_error = refusals[0]["message"]
    uses = switch or (config is not None and not given and bool(section))
    values, where = {}, {}
    flagged = {f[len(release.PREFIX):]: w for f, w in flags.items() if f.startswith(release.PREFIX)}
    if uses:
        for key, value in section.items():
            if isinstance(key, str) and key.startswith(release.PREFIX):
                values[key[len(release.PREFIX):]] = value
                where[key[len(release.PREFIX):]] = f"parallelism_config.{key}"
        for leaf, word in flagged.items():
            values[leaf], where[leaf] = word.text, f"--{release.PREFIX}{leaf}"
    else:
        for name, word in launch.env.items():
            if name.startswith(ENV_PREFIX):
                leaf = name[len(ENV_PREFIX):].lower()
                values[leaf], where[leaf] = word.text, name
        spec.values["accelerate.ignored_flags"] = sorted(f"--{release.PREFIX}{leaf}" for leaf in flagged)
        spec.values["accelerate.keys_ignored"] = next(iter(sorted(f"--{release.PREFIX}{leaf}" for leaf in flagged)),
                                                      None)
    in_env = launch.env.get(ENV_SWITCH)
    spec.values["accelerate.section_present"] = uses or (in_env is not None and in_env.text.lower() == "true")
    release.apply_values(spec, values, where, launcher)
    ref = model_ref(launch.script_args)
    spec.extra["script_args"] = list(launch.script_args)  # the batch, sequence and checkpointing flags (memory)
    if ref:
        spec.extra["model_ref"] = ref
    add_world_hint(spec, launcher.get("num_machines"),
                   f"accelerate launch --num_processes/--num_machines (line {launch.line})")
    return source, spec


_UNKNOWN = object()   # a launcher setting whose flag the script does not determine
ENV_PREFIX = "PARALLELISM_CONFIG_"
ENV_SWITCH = "ACCELERATE_USE_PARALLELISM_CONFIG"


def launch_refusals(flags: dict, given: list, config, launcher: dict) -> list:
    """What ``_validate_launch_command`` (accelerate/commands/launch.py) refuses of the flags and config file."""
    out = []

    def refuse(key: str, message: str, why: str) -> None:
        out.append({"key": key, "keys": key, "message": f"ValueError: {message}", "source":
                    "accelerate/commands/launch.py:_validate_launch_command",
                    "framework": f"accelerate launch refuses it (ValueError: {message}){why}"})

    switches = [f for f in ("multi_gpu", "cpu", "tpu", "use_deepspeed", "use_fsdp") if f in flags]
    if len(switches) > 1:
        refuse(f"--{switches[1]}", "You can only use one of `--cpu`, `--multi_gpu`, `--tpu`, `--use_deepspeed`, "
                                   "`--use_fsdp` at a time.", "")
    processes = flags.get("num_processes")
    if "multi_gpu" in flags and processes is not None and processes.text.strip().isdigit() and int(processes.text) < 2:
        refuse("--num_processes", "You need to use at least 2 processes to use `--multi_gpu`.", "")
    if "use_parallelism_config" in flags and "use_fsdp" not in flags:
        # checked on the flags alone, before the config file is read; its `args.fsdp_version == 1` compares the
        # string flag with an int, never true, so only --use_fsdp counts
        refuse("--use_parallelism_config", "You cannot use `--use_parallelism_config` without `--use_fsdp` and "
                                           "`--fsdp_version=2`.", ", whatever the config file says")
    if config is not None and processes is None and launcher.get("num_processes") == -1:
        refuse("--config_file", "You need to manually pass in `--num_processes` using this config yaml.",
               ": the config file has no num_processes")
    return out


def _config_file(launch) -> tuple:
    """(YamlSource or None, its data) of ``--config_file``: relative paths from the script's directory, then the
    working directory (the launcher resolves them from where it runs). The default config in the user's cache is
    never read: it belongs to the machine that runs the job."""
    from meshlint.inputs.yaml_source import read_yaml_source

    word = launch.flags.get("config_file")
    if word is None:
        launch.notes.append("no --config_file: accelerate launch reads ~/.cache/huggingface/accelerate/"
                            "default_config.yaml on the machine that runs it, which meshlint does not read")
        return None, {}
    candidates = [word.text] if os.path.isabs(word.text) else [
        os.path.join(os.path.dirname(os.path.abspath(launch.file)), word.text) if launch.file else None,
        os.path.abspath(word.text)]
    defaulted = bool(launch.file) and os.path.isabs(word.text) and not os.path.isfile(word.text)
    if defaulted:
        # ${ACCELERATE_DIR:-/accelerate}/examples/slurm/fsdp_config.yaml: an absolute path of the machine that runs
        # the job (often a directory the environment sets); its tail is looked for beside the script and above it
        parts = [p for p in word.text.split("/") if p]
        here = os.path.dirname(os.path.abspath(launch.file))
        for _ in range(8):
            candidates += [os.path.join(here, *parts[k:]) for k in range(len(parts))]
            if os.path.dirname(here) == here:
                break
            here = os.path.dirname(here)
    for path in [c for c in candidates if c]:
        if os.path.isfile(path):
            if path != candidates[0] and defaulted:
                launch.notes.append(f"--config_file {word.text} is not on this machine: read {path}, the end of "
                                    "that path as found from the script's directory")
            source = read_yaml_source(path)
            return source, source.data if isinstance(source.data, dict) else {}
    raise InputError("ML006", f"--config_file {word.text}: no such file (looked beside the script, in the "
                              "working directory and, for an absolute path, for its end from the script's directory up); accelerate launch raises FileNotFoundError", word.line, word.col)
