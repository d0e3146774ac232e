"""From an input that is not a TOML file to analysed configs: torchtitan registries, launch
scripts, launch lines and saved configs, each config with the framework version it is read as.

A registry file holds one config per function (``file.py::function``), a launch script one per
launch line (``run.sh:12``); each becomes its own FileReport, so every later stage (rules,
reports, explain, diff, smoke) sees one config at a time.
"""

from __future__ import annotations

import os

from meshlint.errors import InputError

# Which torchtitan semantics a registry is read with when nothing says (README, "Framework versions").
DEFAULT_TORCHTITAN_VERSION = "main@b5bcd76c6"


def analyse_input(path: str, kind: str, options, raw: bytes | None = None, name: str | None = None) -> list:
    """FileReports (before rules) for every config in ``path`` (kind: registry | script | saved)."""
    from meshlint.check import FileReport

    try:
        if kind == "registry":
            sources = _registry_sources(path, options, raw)
            launch_for = {}
        elif kind == "script":
            sources, launch_for = _script_sources(path, options)  # FileReport when skipped
        else:
            sources, launch_for = [_saved_source(path, raw)], {}
    except InputError as exc:
        return [FileReport(path, "error", error=exc)]
    if isinstance(sources, FileReport):
        return [sources]
    return [src if isinstance(src, FileReport) else analyse_source(src, options, launch_for.get(id(src)))
            for src in sources]


def analyse_launch(launch, options) -> object:
    """The FileReport (before rules) of a launch given on the command line
    (``meshlint check --module llama3 --config llama3_70b -- --parallelism...``)."""
    from meshlint.check import FileReport

    try:
        source = _launch_source(launch, options, os.getcwd())
    except InputError as exc:
        return FileReport(launch.display, "error", error=exc)
    return analyse_source(source, options, launch)


def several(path: str, reports: list):
    """A path that names several configs where one is needed (explain --svg, diff, smoke)."""
    from meshlint.check import FileReport

    if any(r.status == "error" for r in reports) and len(reports) == 1:
        return reports[0]
    names = [r.path.rsplit("::", 1)[-1] for r in reports]
    shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
    return FileReport(path, "error", error=InputError(
        "ML006", f"{path} holds {len(reports)} configs ({shown}); name one as {path}::FUNCTION"
        if reports else f"{path} holds no config function",
        help=f"e.g. meshlint explain {path}::{names[0]}" if names else None))


# ----------------------------------------------------------------------------- reading inputs

def _registry_sources(path: str, options, raw: bytes | None):
    from meshlint.check import FileReport
    from meshlint.inputs.pyregistry import read_registry

    file, _, function = path.partition("::")
    text = None
    if raw is not None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("ML002", "not UTF-8 text") from None
    registry = read_registry(file, text=text, root=options.torchtitan_root)
    if registry.error is not None:
        raise registry.error
    functions = registry.functions
    if function:
        if function not in functions:
            raise InputError("ML006", _no_function(file, function, list(functions)))
        return [functions[function]]
    if not functions:
        why = "; ".join(f"{n}: {w}" for n, w in registry.skipped[:3])
        return FileReport(path, "skipped", note="no top-level function returns a torchtitan trainer config"
                          + (f" ({why})" if why else ""))
    return list(functions.values())


def _no_function(file: str, function: str, available: list) -> str:
    import difflib

    close = difflib.get_close_matches(function, available, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listed = ", ".join(available[:10]) + (" ..." if len(available) > 10 else "")
    return (f"{file} has no config function {function!r}{hint} "
            + (f"(it has: {listed})" if available else "(it has none)"))


def _script_sources(path: str, options):
    from meshlint.inputs.scripts import read_launch_script

    from meshlint.check import FileReport

    launches = read_launch_script(path)
    if not launches:  # any shell script may be handed over (pre-commit): not one of ours, like a TOML without
        return FileReport(path, "skipped", note="no torchtitan launch line (torchrun/python -m torchtitan.train "
                                                "--module M --config F, or MODULE=... CONFIG=... run_train.sh) "
                                                "and no Megatron-LM one (torchrun/python .../pretrain_*.py)"), {}
    start = os.path.dirname(os.path.abspath(path))
    sources, launch_for = [], {}
    for launch in launches:  # each launch line is its own config: one bad line does not hide the others
        try:
            source = _launch_source(launch, options, start)
        except InputError as exc:
            if exc.line == 1 and getattr(launch, "line", None):
                exc.line = launch.line
            sources.append(FileReport(getattr(launch, "display", None) or path, "error", error=exc))
            continue
        sources.append(source)
        launch_for[id(source)] = launch
    return sources, launch_for


def _launch_source(launch, options, start_dir: str):
    """The registry function a launch names, read, with the launch's overrides applied
    (checked against the keys of the version the registry is read as)."""
    from meshlint.inputs.launch import apply_overrides
    from meshlint.inputs.pyregistry import find_config_module, read_function
    from meshlint.inputs.ttroot import find_root

    if getattr(launch, "error", None) is not None:
        raise launch.error
    if getattr(launch, "framework", None) == "megatron":
        from meshlint.dialects.megatron.launch import make_source

        return make_source(launch)
    root, how = find_root(start_dir, options.torchtitan_root)
    if root is None:
        raise InputError("ML006", f"cannot find the torchtitan checkout that --module {launch.module} refers to ({how})",
                         getattr(launch, "line", 1) or 1, 1,
                         help="pass --torchtitan-root DIR (the directory holding torchtitan/), or run meshlint "
                              "from inside the checkout")
    file, function = find_config_module(root, launch.module, launch.config)
    source = read_function(file, function, root=root)
    version, _ = choose_version(source, options)
    apply_overrides(source, launch.overrides, version=version)
    if getattr(launch, "file", None):
        source.path = launch.display  # run.sh:12::llama3_70b
    source.launch = launch
    return source


def _saved_source(path: str, raw: bytes | None):
    from meshlint.inputs.launch import read_saved_config

    return read_saved_config(path) if raw is None else read_saved_config(path, text=raw.decode("utf-8", "replace"))


# ----------------------------------------------------------------------------- analysis

def analyse_source(source, options, launch=None):
    """One registry-era config through dialect -> topology -> resolution."""
    if getattr(source, "framework", None) == "megatron":
        return _analyse_megatron(source, options, launch)
    from meshlint import models
    from meshlint.dialects import versions

    version, decided_by = choose_version(source, options)
    module = versions.module("torchtitan", version)
    spec = module.read(source)
    spec.framework["decided_by"] = decided_by
    table = models.builtin_for(version)
    if options.models is not None:  # the v0.2.x table plus the user's entries: lay only the user's over this version's
        v02 = models.builtin()
        table = {**table, **{k: e for k, e in options.models.items() if v02.get(k) is not e}}
    module.attach_model(spec, table)
    return _resolved(source, spec, module, options, launch, "torchtitan")


def _analyse_megatron(source, options, launch):
    """A Megatron-LM launch through its version module (the one release modelled)."""
    from meshlint.dialects import versions

    module = versions.module("megatron", "0.16.1")
    return _resolved(source, module.read(source), module, options, launch, "megatron")


def _resolved(source, spec, module, options, launch, dialect: str):
    """Topology (the launch's own hints among the others) and resolution: the report before the rules."""
    from meshlint.check import FileReport, topology_for

    hints = tuple(getattr(launch, "hints", ()) or ()) if launch is not None else ()
    topo = topology_for(source, spec, options.topology, options.file_hint, options.profile_hint, hints)
    topo.gpu_memory_gib = options.gpu_memory_gib
    resolution = module.resolve(spec, topo.world_size)
    return FileReport(source.path, "checked", dialect=dialect, source=source, spec=spec, topology=topo,
                      resolution=resolution)


_IDENTIFIED: dict = {}


def choose_version(source, options) -> tuple:
    """(version id, how it was decided): the user's word, else the code of the checkout the
    registry lives in (or the installed package), else the keys the config itself uses, else
    the documented default."""
    from meshlint.dialects import versions

    if options.torchtitan_version:
        return versions.canonical("torchtitan", options.torchtitan_version, strict=False), "--torchtitan-version / project setting"
    from meshlint.inputs.ttroot import find_root

    start = os.path.dirname(os.path.abspath(getattr(source, "file", None) or source.path))
    key = (start, options.torchtitan_root)
    if key not in _IDENTIFIED:
        root, how = find_root(start, options.torchtitan_root)
        _IDENTIFIED[key] = (versions.identify(root), root, how) if root else (None, None, None)
    found, root, how = _IDENTIFIED[key]
    if found and found[0]:
        version, evidence = found
        return version, f"identified from the code of the torchtitan at {root}: {evidence}"
    by_keys = versions.from_keys("torchtitan", source.data)
    if by_keys:
        return by_keys
    return DEFAULT_TORCHTITAN_VERSION, "default (no torchtitan checkout or package found, no --torchtitan-version)"
