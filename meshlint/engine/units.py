"""From an input that is not a TOML file to analysed configs: torchtitan registries, launch
scripts, launch lines and saved configs, each config with the framework version it is read as.

A registry file holds one config per function (``file.py::function``), a launch script one per
launch line (``run.sh:12``); each becomes its own FileReport, so every later stage (rules,
reports, explain, diff, smoke) sees one config at a time.
"""

from __future__ import annotations

import os

from meshlint.engine.filereport import FileReport
from meshlint.engine.resolve import analyse_parsed
from meshlint.errors import InputError
from meshlint.mesh.topology import topology_for

# Which torchtitan semantics a registry is read with when nothing says (README, "Framework versions").
DEFAULT_TORCHTITAN_VERSION = "main@b5bcd76c6"


def analyse_input(path: str, kind: str, options, raw: bytes | None = None, name: str | None = None) -> list:
    """FileReports (before rules) for every config in ``path`` (kind: registry | script | saved)."""

    try:
        if kind == "registry" and _bridge_recipe(path, raw):   # Megatron-Bridge recipes (inputs/bridge_recipe.py)
            from meshlint.inputs.bridge_recipe import recipe_sources

            file, function, text = _registry_text(path, raw)
            sources, launch_for = recipe_sources(file, function or None, text=text), {}
            if not sources:
                return [FileReport(path, "skipped", note="no Megatron-Bridge recipe function (a public function "
                                                         "returning ConfigContainer)")]
        elif kind == "registry":
            sources = _registry_sources(path, options, raw)
            launch_for = {}
        elif kind == "script":
            sources, launch_for = _script_sources(path, options, raw)  # FileReport when skipped
        else:
            sources, launch_for = [_saved_source(path, raw)], {}
    except InputError as exc:
        return [FileReport(path, "error", error=exc)]
    if isinstance(sources, FileReport):
        return [sources]
    return [src if isinstance(src, FileReport) else analyse_launch(src, options) if _is_accelerate(src)
            else analyse_source(src, options, launch_for.get(id(src))) for src in sources]


def _bridge_recipe(path: str, raw: bytes | None) -> bool:
    from meshlint.inputs.bridge_recipe import is_recipe_text
    from meshlint.inputs.source import read_bytes

    if raw is None:
        try:
            raw = read_bytes(path.partition("::")[0], 16 * 1024 * 1024)
        except (InputError, OSError):
            return False
    return is_recipe_text(raw)


def _is_accelerate(src) -> bool:
    from meshlint.inputs.accelerate_launch import AccelerateLaunch

    return isinstance(src, AccelerateLaunch)


def analyse_launch(launch, options) -> object:
    """The FileReport (before rules) of a launch given on the command line
    (``meshlint check --module llama3 --config llama3_70b -- --parallelism...``)."""
    from meshlint.inputs.accelerate_launch import AccelerateLaunch

    if isinstance(launch, AccelerateLaunch):
        from meshlint.engine.accelerate_units import analyse_launch as analyse_accelerate

        return analyse_accelerate(launch, options)
    if _toml_launch(launch):   # a TOML config: KempnerForge, torchtitan v0.2

        try:
            return launch_report(launch, options, None)
        except InputError as exc:
            return FileReport(launch.text, "error", error=exc)
    try:
        source = _launch_source(launch, options, os.getcwd())
    except InputError as exc:
        return FileReport(launch.display, "error", error=exc)
    return analyse_source(source, options, launch)


def several(path: str, reports: list):
    """A path that names several configs where one is needed (explain --svg, diff, smoke)."""

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
    from meshlint.inputs.pyregistry import read_registry

    file, function, text = _registry_text(path, raw)
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
        if _imports_bridge(file, text):
            return FileReport(path, "skipped", note="imports megatron.bridge but builds no ConfigContainer: meshlint "
                              "reads Megatron-Bridge recipe functions (def ...() -> ConfigContainer) and run_recipe.py "
                              "launches, not a script that configures a model provider imperatively")
        return FileReport(path, "skipped", note="no top-level function returns a torchtitan trainer config"
                          + (f" ({why})" if why else ""))
    return list(functions.values())


def _imports_bridge(file: str, text: str | None) -> bool:
    from meshlint.inputs.bridge_recipe import _RECIPE_MARK
    from meshlint.inputs.source import read_bytes

    try:
        raw = text.encode("utf-8") if text is not None else read_bytes(file, 16 * 1024 * 1024)
    except (InputError, OSError, UnicodeError):
        return False
    return bool(_RECIPE_MARK.search(raw))


def _registry_text(path: str, raw: bytes | None) -> tuple:
    """(file, function or "", its text or None to read it) of ``file.py[::function]``."""
    file, _, function = path.partition("::")
    if raw is None:
        return file, function, None
    try:
        return file, function, raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("ML002", "not UTF-8 text") from None


def _no_function(file: str, function: str, available: list) -> str:
    import difflib

    close = difflib.get_close_matches(function, available, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listed = ", ".join(available[:10]) + (" ..." if len(available) > 10 else "")
    return (f"{file} has no config function {function!r}{hint} "
            + (f"(it has: {listed})" if available else "(it has none)"))


def _script_sources(path: str, options, raw: bytes | None = None):
    from meshlint.inputs.script_call import read_with_submitted
    from meshlint.inputs.scripts import launches_in_text

    call = options.script_call
    call = call if call is not None and _same_file(call.path, path) else None
    # ``raw``: the script's new text (fix reads an edit back before writing it)
    launches = (read_with_submitted(path, call=call) if raw is None
                else launches_in_text(raw.decode("utf-8-sig"), file=path, call=call))
    unread = getattr(launches, "unread", None)
    if not launches and unread:
        line, why = unread[0]
        return FileReport(path, "skipped", note=f"no launch line read: the command on line {line} expands a word the "
                                                f"script does not determine ({why}) where it may stand for the command "
                                                "or its options, so meshlint cannot see what the launch starts (a value "
                                                "such as an address or a rank alone does not stop it); check it as "
                                                "`meshlint check -- <the launch, values written out>`"), {}
    if not launches:  # any shell script may be handed over (pre-commit): not one of ours, like a TOML without
        return FileReport(path, "skipped", note="no torchtitan, KempnerForge, Accelerate or Megatron-LM launch line "
                                                "(torchrun/python -m torchtitan.train --module M --config F, "
                                                "MODULE=... CONFIG=... run_train.sh, scripts/train.py CONFIG.toml, "
                                                "accelerate launch, or torchrun/python .../pretrain_*.py)"), {}
    sources, launch_for = [], {}
    for launch in launches:  # each launch line is its own config: one bad line does not hide the others
        if _is_accelerate(launch):  # analysed whole by analyse_input (meshlint/inputs/accelerate_input.py)
            sources.append(launch)
            continue
        script = getattr(launch, "file", None) or path  # a script the checked one submits has its own lines
        try:
            if _toml_launch(launch):
                sources.append(launch_report(launch, options, script))
                continue
            source = _launch_source(launch, options, os.path.dirname(os.path.abspath(script)))
        except InputError as exc:
            if exc.line == 1 and getattr(launch, "line", None):
                exc.line = launch.line
            sources.append(FileReport(getattr(launch, "display", None) or path, "error", error=exc))
            continue
        sources.append(source)
        launch_for[id(source)] = launch
    return sources, launch_for


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _toml_launch(launch) -> bool:
    """A launch of a TOML config (KempnerForge, torchtitan v0.2), read by inputs/toml_launch.py; Megatron's
    launches carry a framework too, but are their own source."""
    from meshlint.inputs.toml_launch import NAMES

    return getattr(launch, "framework", None) in NAMES


def _launch_source(launch, options, start_dir: str):
    """The registry function a launch names, read, with the launch's overrides applied
    (checked against the keys of the version the registry is read as)."""
    from meshlint.inputs.override_apply import apply_overrides
    from meshlint.inputs.pyregistry import find_config_module, read_function
    from meshlint.inputs.ttroot import find_root

    if getattr(launch, "error", None) is not None:
        raise launch.error
    if getattr(launch, "input_form", None) == "bridge":   # run_recipe.py (inputs/bridge_launch.py)
        from meshlint.inputs.bridge_launch import make_source as bridge_source

        return bridge_source(launch, start_dir)
    if getattr(launch, "framework", None) == "megatron":
        from meshlint.inputs.megatron_launch import make_source

        return make_source(launch)
    root, how = find_root(start_dir, options.torchtitan_root)
    refused = next((ov.refusal for ov in launch.overrides if getattr(ov, "refusal", None) is not None), None)
    if root is None and refused is not None:
        raise refused  # an option no modelled version has, and no checkout that might define it
    if root is None:
        raise InputError("ML006", f"cannot find the torchtitan checkout that --module {launch.module} refers to ({how})",
                         getattr(launch, "line", 1) or 1, 1,
                         help="pass --torchtitan-root DIR (the directory holding torchtitan/), or run meshlint "
                              "from inside the checkout")
    file, function = find_config_module(root, launch.module, launch.config)
    source = read_function(file, function, root=root)
    version, _ = choose_version(source, options)
    apply_overrides(source, launch.overrides, version=version, checkout=_registry_package(root))
    if getattr(launch, "file", None):
        source.path = launch.display  # run.sh:12::llama3_70b
    source.launch = launch
    return source


def _registry_package(root: str) -> str | None:
    """The torchtitan package of a registry-era checkout (None otherwise): its own dataclasses may define
    a launch-line field the applied version lacks."""
    from meshlint.frameworks import versions

    pkg = versions.package_dir(root)
    return pkg if pkg is not None and versions._registry_era(pkg) else None


def _saved_source(path: str, raw: bytes | None):
    from meshlint.inputs.saved_config import read_saved_config

    return read_saved_config(path) if raw is None else read_saved_config(path, text=raw.decode("utf-8", "replace"))


# ----------------------------------------------------------------------------- analysis

def analyse_source(source, options, launch=None):
    """One registry-era config through dialect -> topology -> resolution."""
    if getattr(source, "framework", None) == "megatron":
        return _analyse_megatron(source, options, launch)
    from meshlint.frameworks import models
    from meshlint.frameworks import versions

    version, decided_by = choose_version(source, options)
    module = versions.module("torchtitan", version)
    spec = module.read(source)
    spec.framework["decided_by"] = decided_by
    _against_checkout(spec, source, options, version)
    table = models.builtin_for(version)
    if options.models is not None:  # the v0.2.x table plus the user's entries: lay only the user's over this version's
        v02 = models.builtin()
        table = {**table, **{k: e for k, e in options.models.items() if v02.get(k) is not e}}
    module.attach_model(spec, table)
    return _resolved(source, spec, module, options, launch, "torchtitan")


def _analyse_megatron(source, options, launch):
    """A Megatron-LM launch through its version module (the one release modelled)."""
    from meshlint.frameworks import versions

    module = versions.module("megatron", "0.16.1")
    spec = module.read(source)
    if getattr(source, "input_form", None) == "bridge":
        from meshlint.inputs.bridge_recipe import adjust

        adjust(spec, source)
    return _resolved(source, spec, module, options, launch, "megatron")


def _resolved(source, spec, module, options, launch, dialect: str):
    """Topology (the launch's own hints among the others) and resolution: the report before the rules."""

    hints = tuple(getattr(launch, "hints", ()) or ()) if launch is not None else ()
    topo = topology_for(source, spec, options.topology, options.file_hint, options.profile_hint, hints)
    topo.gpu_memory_gib = options.gpu_memory_gib
    resolution = module.resolve(spec, topo.world_size)
    return FileReport(source.path, "checked", dialect=dialect, source=source, spec=spec, topology=topo,
                      resolution=resolution)


def _against_checkout(spec, source, options, version: str) -> None:
    """What the checkout's code has beyond the applied version (ttdiff): recorded in ``spec.framework``;
    an unknown key that the checkout's own dataclass defines is no error (it becomes an ML115 item), a key
    the applied version has and the checkout's dataclass lacks is one; the legacy mesh layout is applied."""
    from meshlint.frameworks.torchtitan import ttcode, ttdiff
    from meshlint.frameworks import versions

    root = _checkout(source, options)[0]
    items = ttdiff.differences(root, version) if root else []
    spec.framework["unmodelled"] = [{k: i[k] for k in ("kind", "name", "where", "detail")} for i in items]
    pkg = versions.package_dir(root) if root else None
    if pkg is None or not versions._registry_era(pkg):
        return
    touched = ttdiff.touched(items, spec, source)
    kept = []
    classes = spec.extra.get("unknown_classes") or {}
    quiet: list = []  # fields of sections no check reads (optimizer.lr): stated, not a finding
    extra = {i["key"] for i in items if i["kind"] == "key"}  # the checkout's section fields the version lacks
    for unknown in list(spec.unknown_keys or []):
        if unknown.get("key") in extra:
            spec.unknown_keys.remove(unknown)
            continue
        cls = classes.get(unknown.get("key"))
        fields = ttcode.class_fields(pkg, cls) if isinstance(cls, str) and cls else None
        if fields and unknown.get("name") in fields:
            spec.unknown_keys.remove(unknown)
            where = fields[unknown["name"]]
            item = {"kind": "key", "name": unknown["key"], "key": unknown["key"], "where": where, "at": unknown["key"],
                    "detail": f"{cls}.{unknown['name']} ({where}) is a field of this checkout that torchtitan "
                              f"{version} does not have: its value is read as written and not checked"}
            (kept if unknown["key"].split(".", 1)[0] in _MATTERS else quiet).append(item)
    for item in ttdiff.absent_set(items, source):
        section, _, name = item["key"].partition(".")
        cls = ttcode.SECTION_CLASSES[section]
        spec.unknown_keys.append({"key": item["key"], "section": section, "name": name, "suggestion": None,
                                  "elsewhere": [], "other_versions": [version],
                                  "framework": f"torchtitan at this checkout refuses it: its {cls} has no field "
                                               f"{name!r} (torchtitan {version}'s has)"})
    spec.extra["unmodelled"] = [{k: i[k] for k in ("kind", "name", "where", "detail", "at")} for i in touched + kept]
    listed = {i["name"] for i in items}
    spec.framework["unmodelled"] += [{k: i[k] for k in ("kind", "name", "where", "detail")} for i in kept + quiet
                                     if i["name"] not in listed]
    for item in items:
        if item["kind"] == "absent-key" and item["key"] in ttdiff.ABSENT_MEANS:
            spec.values[item["key"]] = ttdiff.ABSENT_MEANS[item["key"]]
    if any(i["kind"] == "backend" for i in items) and spec.values.get("parallelism.spmd_backend") == "spmd_types":
        spec.values["parallelism.spmd_backend"] = "partial_dtensor"  # the layout before spmd_backend existed


# the sections meshlint's checks read: a field of the checkout they do not model there may change a verdict
_MATTERS = ("parallelism", "training", "compile", "model")


def _checkout(source, options) -> tuple:
    """(root, how, identified) of the torchtitan checkout the registry of ``source`` belongs to (ttroot.checkout_of,
    cached per folder, as for a TOML config)."""
    from meshlint.inputs.ttroot import checkout_of

    return checkout_of(getattr(source, "file", None) or source.path, options.torchtitan_root)


def choose_version(source, options) -> tuple:
    """(version id, how it was decided): the user's word, else the code of the checkout the
    registry lives in (or the installed package), else the keys the config itself uses, else
    the documented default."""
    from meshlint.frameworks import versions

    named = versions.canonical("torchtitan", options.torchtitan_version, strict=False) if options.torchtitan_version \
        else None
    if named is not None and named not in versions.TOML_ERA["torchtitan"]:  # a TOML-era one names no registry's
        return named, "--torchtitan-version / project setting"

    root, how, found = _checkout(source, options)
    if found and found[0] in versions._SIGNATURES:
        version, evidence = found
        return version, f"identified from the code of the torchtitan at {root}: {evidence}"
    if found and found[0]:  # a TOML-era checkout: a registry config is none of its semantics
        by_keys = versions.from_keys("torchtitan", source.data)
        version = by_keys[0] if by_keys else DEFAULT_TORCHTITAN_VERSION
        return version, (f"the torchtitan at {root} is torchtitan {found[0]} ({found[1]}), which has no registry "
                         f"configs; read as {version}" + (f", from {by_keys[1]}" if by_keys else ", the default"))
    by_keys = versions.from_keys("torchtitan", source.data)
    if found:  # a checkout whose code matches no modelled version: say so, then what decided
        how = by_keys[1] if by_keys else "the default"
        return (by_keys[0] if by_keys else DEFAULT_TORCHTITAN_VERSION), (
            f"the torchtitan at {root} matches no modelled version ({found[1]}); read by {how}")
    if by_keys:
        return by_keys
    return DEFAULT_TORCHTITAN_VERSION, "default (no torchtitan checkout or package found, no --torchtitan-version)"


def launch_report(launch, options, script: str | None):
    """The FileReport (before rules) of one launch of a TOML config; ``script``: the script it is in
    (None: meshlint's command line). Raises InputError where the launch cannot be checked."""
    from meshlint.inputs.source import read_source
    from meshlint.inputs.toml_launch import (DIALECT, NAMES, LaunchedSource, _unreadable, apply_kf, apply_typed,
                                             resolve_config, set_at_file)

    if launch.error is not None:
        raise launch.error
    display = launch.display if launch.file else f"{launch.text}"
    if getattr(launch, "unresolved", None):
        return FileReport(display, "skipped", note=f"a {NAMES[launch.framework]} launch, but {launch.unresolved}: "
                                                   "give the config to check as meshlint check CONFIG.toml, or set "
                                                   "it in the script")
    word = launch.config_word
    found, tried = resolve_config(launch.config, script)
    if found is None:
        shown = "; ".join(tried[:6]) + (f" ... ({len(tried)} in all)" if len(tried) > 6 else "")
        raise InputError("ML001", f"the {NAMES[launch.framework]} config {launch.config!r} that the launch names was "
                                  f"not found (tried {shown})", word.line if launch.file else 1, word.col,
                         help="run meshlint from the directory the launch runs in, or write the config's path "
                              "relative to the script's repository")
    try:
        toml = read_source(found)
    except InputError as exc:   # the config itself is unreadable: say which file, at the launch's word
        raise InputError(exc.code, f"{found}" + (f":{exc.line}:{exc.col}" if exc.line else "") + f": {exc.message}",
                         word.line if launch.file else 1, word.col, help=exc.help) from None
    dialect = DIALECT[launch.framework]
    if not getattr(launch, "entry_explicit", True):
        from meshlint.frameworks.dialects import detect

        if detect(toml.data) != dialect:   # some other project's train.py with a TOML of its own
            return FileReport(display, "skipped", note=f"{launch.config} is not a KempnerForge config (no "
                                                       "[distributed] section): the train.py line is not checked")
    if dialect == "kempnerforge":
        data, set_at, unread, space = apply_kf(launch, toml.data, script)
    else:
        data, set_at, unread, space = apply_typed(launch, toml.data, script)
    marks = {(item["line"], item["col"]): set_at_file(launch, script) for item in space}
    dashless = []
    if dialect == "kempnerforge":
        from meshlint.frameworks.kempnerforge.v5666d0d import dashless_item

        for d in getattr(launch, "dashless", None) or ():
            file, line, col = d["position"]
            dashless.append(dashless_item(d["key"], d["value"], d["word"], line, col, data))
            marks[(line, col)] = file
    for hint in getattr(launch, "hints", None) or ():
        if getattr(hint, "idle", None):   # srun's word, where ML209 points (#L<line>:<col>)
            marks[hint.idle[3], hint.idle[4]] = set_at_file(launch, script)
    source = LaunchedSource(display, toml, data, set_at, marks)
    source.launch = launch

    def prepare(spec):
        if dialect == "kempnerforge":
            spec.values["launch.space_overrides"] = space
            spec.values["launch.dashless_overrides"] = dashless
            spec.values["launch.overrides"] = [{"line": p[1], "key": k, "value": "?"} for k, p in set_at.items()]
        if unread:
            _unreadable(spec, unread, dialect)

    return analyse_parsed(display, source, dialect, options, prepare=prepare, hints=tuple(launch.hints))
