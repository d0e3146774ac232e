"""An ``accelerate config`` file (ClusterConfig) as ``accelerate launch`` loads it and hands it to the ranks:
the keys it refuses, the distributed type, the world, and the ``parallelism_config:`` values."""

from __future__ import annotations

from meshlint.frameworks.base import Spec, _close_matches
from meshlint.mesh.topology import Hint


def read_config(source, release) -> Spec:
    """``release`` is the version module (v1_15): its generated facts say which keys and types exist."""
    data = source.data if isinstance(source.data, dict) else {}
    facts = release.facts()
    spec = release.new_spec()
    if not isinstance(source.data, dict):
        spec.load_error = "AttributeError: the file is not a mapping (yaml.safe_load(f).get fails)"
    _unknown(data, facts["config_keys"], spec)
    launcher, problems = launcher_settings(data, facts)
    spec.problems += problems + launcher_problems(launcher, release.PASSES_CONFIG)
    section = data.get("parallelism_config")
    values, where = {}, {}
    if isinstance(section, dict):
        known = [k.leaf for k in release.KEYS]
        for key, value in section.items():
            if key in known:
                values[key[len(release.PREFIX):]] = value
                where[key[len(release.PREFIX):]] = f"parallelism_config.{key}"
            else:
                close = ([release.PREFIX + str(key)] if release.PREFIX + str(key) in known  # tp_size
                         else _close_matches(str(key), known, n=1, cutoff=0.6))
                spec.unknown_keys.append({
                    "key": f"parallelism_config.{key}", "section": "parallelism_config", "name": str(key),
                    "suggestion": close[0] if close else None,
                    "framework": "accelerate launch copies it onto its arguments and never reads it: the "
                                 "setting is silently lost"})
    elif section is not None:
        spec.problems.append({"key": "parallelism_config", "expected": "a mapping", "actual": type(section).__name__,
                              "value": repr(section)[:60], "note": "accelerate launch fails reading it"})
    if "distributed_type" not in data and isinstance(source.data, dict):
        spec.problems.append({"key": "distributed_type", "expected": "one of " + ", ".join(facts["distributed_types"]),
                              "actual": "nothing", "value": "", "note": "accelerate launch raises ValueError: A "
                              "`distributed_type` must be specified in the config file"})
        spec.load_error = spec.load_error or "ValueError: A `distributed_type` must be specified in the config file."
    spec.values["accelerate.section_present"] = isinstance(section, dict) and bool(section)
    release.apply_values(spec, values, where, launcher)
    add_world_hint(spec, launcher.get("num_machines"), f"num_processes/num_machines in {source.name}")
    return spec


def add_world_hint(spec: Spec, machines, source: str) -> None:
    """The launched world as a topology hint: num_processes // num_machines processes on each machine."""
    world = spec.values.get("accelerate.world")
    if world is not None:
        nodes = machines if isinstance(machines, int) and not isinstance(machines, bool) and machines >= 1 else 1
        spec.hints.append(Hint(source, world_size=world, gpus_per_node=world // nodes if world % nodes == 0 else None,
                               nodes=nodes))


def launcher_settings(data: dict, facts: dict) -> tuple:
    """({distributed_type, fsdp_version, num_processes, num_machines}, problems) as ClusterConfig reads them."""
    problems = []
    out = {}
    dtype = data.get("distributed_type")
    if dtype is False:  # an unquoted NO is YAML 1.1's false: ClusterConfig keeps it, and it launches as NO
        dtype = "NO"
    if dtype is not None and dtype not in facts["distributed_types"]:
        problems.append({"key": "distributed_type", "expected": "one of " + ", ".join(facts["distributed_types"]),
                         "actual": type(dtype).__name__, "value": repr(dtype)[:60],
                         "note": "ClusterConfig raises ValueError: it is not a DistributedType"})
        dtype = None
    out["distributed_type"] = dtype
    fsdp = data.get("fsdp_config")
    out["fsdp_version"] = fsdp.get("fsdp_version", "1") if isinstance(fsdp, dict) else "1"
    if dtype == "NO" and "num_processes" not in data:
        out["num_processes"] = 1  # BaseConfig.process_config
    for key, default in (("num_processes", -1), ("num_machines", 1)):
        if key in out:
            continue
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append({"key": key, "expected": "an integer", "actual": type(value).__name__,
                             "value": repr(value)[:60], "note": "accelerate launch needs an integer"})
            value = None
        out[key] = value
    # what prepare_multi_gpu_env / prepare_deepspeed_cmd_env / setup_fp8_env read besides the world (utils/launch.py)
    for key in ("gpu_ids", "machine_rank", "main_process_port", "mixed_precision"):
        if key in data:
            out[key], out[f"{key}_key"] = data[key], key
    deepspeed = data.get("deepspeed_config")
    for key in ("deepspeed_multinode_launcher", "deepspeed_hostfile"):
        if isinstance(deepspeed, dict) and deepspeed.get(key) is not None:
            out[key], out[f"{key}_key"] = deepspeed[key], f"deepspeed_config.{key}"
    fp8 = data.get("fp8_config")
    if isinstance(fp8, dict):
        for name in ("override_linear_precision", "fp8_override_linear_precision"):
            if name in fp8:  # commands/launch.py:1272-1277 copies fp8_config.x to args.fp8_x
                out["fp8_override_linear_precision"] = fp8[name]
                out["fp8_override_linear_precision_key"] = f"fp8_config.{name}"
    if "fp16" in data and "mixed_precision" not in data:  # commands/config/config_args.py:113-114, the old key
        out["mixed_precision"] = "fp16" if data["fp16"] else None
    return out, problems


PORT_MAX = 65535


def launcher_problems(launcher: dict, torchrun_like: tuple) -> list:
    """Values ``accelerate launch`` dies on before any rank starts, as invalid values (ML101): a
    main_process_port outside 0-65535 (``is_port_in_use`` -> ``socket.connect_ex`` raises OverflowError,
    utils/launch.py:232-233 and 504-505 -> utils/other.py:531) and an fp8_config.override_linear_precision that is
    not three booleans (``setup_fp8_env`` indexes it, utils/launch.py:91-94)."""
    out = []
    port, dtype = launcher.get("main_process_port"), launcher.get("distributed_type")
    if isinstance(port, int) and not isinstance(port, bool) and not 0 <= port <= PORT_MAX:
        machines, rank = launcher.get("num_machines"), launcher.get("machine_rank", 0)
        checked = dtype in torchrun_like and (not isinstance(machines, int) or machines <= 1 or rank in (0, "0", None))
        note = ("accelerate launch checks the port (is_port_in_use, utils/launch.py:233 -> utils/other.py:531) and "
                "raises OverflowError: connect_ex(): port must be 0-65535" if checked else
                "no process can listen on it: the rendezvous endpoint main_process_ip:port can never be reached "
                "(machine_rank 0 refuses it with OverflowError, utils/launch.py:233 -> utils/other.py:531)")
        out.append({"key": launcher.get("main_process_port_key") or "main_process_port",
                    "expected": f"a TCP port (0-{PORT_MAX})", "actual": "integer", "value": str(port), "note": note})
    override = launcher.get("fp8_override_linear_precision")
    precision = launcher.get("mixed_precision")
    # a string is indexed by character without an error here (Accelerate's own tests/test_configs/0_34_0_fp8.yaml
    # writes "(false, false, false)"): not reported
    if override is not None and isinstance(precision, str) and precision.lower() == "fp8" and not (
            isinstance(override, (list, tuple)) and len(override) >= 3) and not isinstance(override, str):
        if isinstance(override, (list, tuple)):
            error = "IndexError: list index out of range"
        elif isinstance(override, dict):
            error = "KeyError: 0"
        else:
            error = f"TypeError: '{type(override).__name__}' object is not subscriptable"
        actual = {bool: "bool", int: "integer", float: "float", str: "string", dict: "mapping"}.get(
            type(override), type(override).__name__)
        out.append({"key": launcher.get("fp8_override_linear_precision_key") or "fp8_config.override_linear_precision",
                    "expected": "three booleans [fprop, dgrad, wgrad]", "actual": actual,
                    "value": repr(override)[:60].replace("True", "true").replace("False", "false"),
                    "note": "with mixed_precision fp8 accelerate launch passes it on as value[0], value[1], value[2] "
                            f"(setup_fp8_env, utils/launch.py:91-94) and fails: {error}; write "
                            "[false, false, false] (or true where a GEMM should run in higher precision)"})
    return out


def _unknown(data: dict, known: list, spec: Spec) -> None:
    """ClusterConfig.from_yaml_file refuses the whole file on a top-level key it does not define."""
    legacy = ("fp16", "dynamo_backend")  # process_config converts these before the check
    for key in data:
        if key in known or key in legacy:
            continue
        close = _close_matches(str(key), known, n=1, cutoff=0.6)
        spec.unknown_keys.append({"key": str(key), "section": "top level", "name": str(key),
                                  "suggestion": close[0] if close else None,
                                  "framework": "accelerate launch refuses the whole file (ClusterConfig: the config "
                                               "file had unknown keys)"})
