"""From an Accelerate input (a YAML config file, or an ``accelerate launch`` line) to an analysed config:
dialect -> model facts -> topology -> resolution, like check.analyse does for a TOML config."""

from __future__ import annotations

from meshlint.errors import InputError


def analyse_yaml(path: str, options, raw: bytes | None = None, name: str | None = None):
    """The FileReport (before rules) of a YAML file: an accelerate config, or skipped."""
    from meshlint.check import FileReport
    from meshlint.dialects import accelerate
    from meshlint.inputs.yaml_source import read_yaml_source

    try:
        source = read_yaml_source(path, raw, name)
    except InputError as exc:
        return FileReport(path, "error", error=exc)
    if not accelerate.is_config(source.data) and options.dialect != accelerate.NAME:
        return FileReport(path, "skipped", source=source,
                          note="no compute_environment, distributed_type or parallelism_config key: not an "
                               "accelerate config")
    environment = source.data.get("compute_environment", "LOCAL_MACHINE") if isinstance(source.data, dict) else None
    if environment != "LOCAL_MACHINE":
        return FileReport(path, "skipped", source=source,
                          note=f"compute_environment {environment!r}: a SageMaker config (Accelerate reads it as a "
                               "SageMakerConfig, with no parallelism_config), which meshlint does not model")
    return analyse_spec(path, source, accelerate.read(source), options)


def analyse_spec(path: str, source, spec, options, launch_hints: tuple = ()):
    from meshlint.check import FileReport, topology_for
    from meshlint.dialects import accelerate
    from meshlint.inputs.hf_model import attach_model

    spec.framework["decided_by"] = "the release meshlint models for Accelerate (the newest on the package index)"
    attach_model(spec, source)
    topo = topology_for(source, spec, options.topology, options.file_hint, options.profile_hint, launch_hints)
    topo.gpu_memory_gib = options.gpu_memory_gib
    resolution = accelerate.resolve(spec, topo.world_size)
    return FileReport(path, "checked", dialect=accelerate.NAME, source=source, spec=spec, topology=topo,
                      resolution=resolution)
