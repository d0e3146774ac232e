"""One parsed config through its framework up to the rules: the spec its dialect reads (with the schema check
and the model table), the topology, the resolution, as a FileReport.

check.analyse sends a TOML file here; engine/units.py sends a launch of a TOML config.
"""

from __future__ import annotations

from meshlint.engine.filereport import FileReport
from meshlint.mesh.topology import topology_for

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from meshlint.inputs.source import Source

# The framework version a TOML config is read as (registries choose theirs: engine/units.py).
TOML_VERSIONS = {
    "torchtitan": ("0.2.x", "a TOML config: torchtitan read TOML configs up to v0.2.x (they became Python "
                            "registries at 9810191bb, 2026-02-23)"),
    "kempnerforge": ("5666d0d", "KempnerForge TOML, as of the snapshot meshlint models (5666d0d, 2026-06-30)"),
}


def toml_version(dialect: str, source, options) -> tuple:
    """(version, how decided) a TOML config of ``dialect`` is read as: for torchtitan, a TOML-era version named
    by --torchtitan-version or the project setting, else the one whose code the torchtitan checkout (or
    installed package) has (--torchtitan-root, else found from the file upward), else 0.2.x."""
    default = TOML_VERSIONS[dialect]
    if dialect != "torchtitan":
        return default
    from meshlint.frameworks import versions
    from meshlint.frameworks.registry import TOML_ERA

    era = TOML_ERA[dialect]
    named = versions.canonical(dialect, options.torchtitan_version, strict=False) if options.torchtitan_version else None
    if named in era:
        return named, f"--torchtitan-version {options.torchtitan_version} / project setting"
    found = _identified(source, getattr(options, "torchtitan_root", None))
    if found is not None and found[0] in era and found[0] != default[0]:
        version, evidence, root = found
        return version, f"identified from the code of the torchtitan at {root}: {evidence}"
    return default


def _identified(source, explicit: str | None) -> tuple | None:
    """(version, evidence, root) of the torchtitan checkout a TOML config belongs to, or None."""
    from meshlint.inputs.ttroot import checkout_of

    root, _how, found = checkout_of(getattr(source, "file", None) or getattr(source, "path", None), explicit)
    return (found[0], found[1], root) if found and found[0] else None


def analyse_parsed(path: str, source: Source, dialect: str, options, prepare=None,
                   hints: tuple = ()) -> FileReport:
    """A parsed TOML config (or one a launch's overrides were laid over) up to the rules; ``prepare``
    adjusts the spec before resolution, ``hints`` are the launcher's topology statements (``options``: check.Options)."""
    from meshlint.frameworks.dialects import DIALECTS

    module = DIALECTS[dialect]
    version, why = toml_version(dialect, source, options) if dialect in TOML_VERSIONS else (None, None)
    if dialect == "torchtitan" and version != TOML_VERSIONS[dialect][0]:
        from meshlint.frameworks import versions

        module = versions.module(dialect, version)
    spec = module.read(source)
    if dialect in TOML_VERSIONS:
        from meshlint.frameworks import schema_check

        spec.framework = {"name": dialect, "version": version, "decided_by": why}
        schema_check.apply(spec, source.data)
    if prepare is not None:
        prepare(spec)
    if dialect == "torchtitan":
        from meshlint.frameworks import models

        module.attach_model(spec, options.models if options.models is not None else models.builtin())
    topo = topology_for(source, spec, options.topology, options.file_hint, options.profile_hint, hints)
    topo.gpu_memory_gib = options.gpu_memory_gib
    resolution = module.resolve(spec, topo.world_size)
    return FileReport(path, "checked", dialect=dialect, source=source, spec=spec, topology=topo,
                      resolution=resolution)
