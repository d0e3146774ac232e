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
    spec.problems += problems
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
    return out, problems


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
