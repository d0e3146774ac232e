"""From an Accelerate input (a YAML config file, or an ``accelerate launch`` line) to an analysed config:
dialect -> model facts -> topology -> resolution, like check.analyse does for a TOML config."""

from __future__ import annotations

from meshlint.engine.filereport import FileReport
from meshlint.errors import InputError
from meshlint.inputs.accelerate_input import launch_spec
from meshlint.mesh.topology import topology_for


def analyse_yaml(path: str, options, raw: bytes | None = None, name: str | None = None):
    """The FileReport (before rules) of a YAML file: an accelerate config, or skipped."""
    from meshlint.frameworks import accelerate
    from meshlint.inputs.yaml_source import read_yaml_source

    try:
        source = read_yaml_source(path, raw, name)
    except InputError as exc:
        if exc.code in ("ML002", "ML007", "ML009") and not _mentions_accelerate(path, raw):
            # any YAML reaches a pre-commit hook (k8s manifests of several documents, Helm templates): only a
            # file that names an accelerate key is ours to fail
            return FileReport(path, "skipped", note=f"not an accelerate config (and not one YAML document "
                                                    f"meshlint reads: {exc.message})")
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


def _mentions_accelerate(path: str, raw: bytes | None) -> bool:
    from meshlint.frameworks.accelerate import MARKERS
    from meshlint.inputs.source import read_bytes

    try:
        data = raw if raw is not None else read_bytes(path)
    except InputError:
        return False
    return any(marker.encode() in data for marker in MARKERS)


def analyse_spec(path: str, source, spec, options, launch_hints: tuple = ()):
    from meshlint.frameworks import accelerate
    from meshlint.inputs.hf_model import attach_model

    spec.framework["decided_by"] = "the release meshlint models for Accelerate (the newest on the package index)"
    attach_model(spec, source)
    topo = topology_for(source, spec, options.topology, options.file_hint, options.profile_hint, launch_hints)
    topo.gpu_memory_gib = options.gpu_memory_gib
    resolution = accelerate.resolve(spec, topo.world_size)
    tp = spec.degrees.get("tp")
    if isinstance(tp, int) and tp > 1 and not spec.values.get("model.known"):
        resolution.notes.append(f"attention heads against tp = {tp} not checked: "
                                f"{spec.values.get('accelerate.model_config')}")
    return FileReport(path, "checked", dialect=accelerate.NAME, source=source, spec=spec, topology=topo,
                      resolution=resolution)


def analyse_launch(launch, options):
    """The FileReport (before rules) of one ``accelerate launch``."""
    from meshlint.frameworks import accelerate

    def refused(exc):  # an error at a word of the script is shown as file:line:col, not file:line:line:col
        return FileReport(launch.file if launch.file and exc.line else launch.display, "error", error=exc)

    if launch.error is not None:
        return refused(launch.error)
    try:
        source, spec = launch_spec(launch, accelerate.version_module())
    except InputError as exc:
        return refused(exc)
    return analyse_spec(launch.display, source, spec, options, tuple(launch.hints))
