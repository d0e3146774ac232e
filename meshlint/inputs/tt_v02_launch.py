"""torchtitan v0.2 launch lines: ``-m torchtitan.train --job.config_file X.toml OVERRIDES``, read the
way torchtitan's ConfigManager of the TOML era read them (torchtitan/config/manager.py at 9810191bb^).

  manager.py:64-84   ``--job.config_file F`` / ``--job.config-file=F`` (the first one) names the TOML;
  manager.py:50-60   ``tyro.cli(JobConfig, args=argv, default=<the TOML's config>)``: every option is
      ``--section.field`` (nested sections dotted), hyphens or underscores, booleans as flags
      (``--training.compile`` / ``--training.no-compile``), ``list[str]`` comma separated (:228-238);
  manager.py:95-105  ``--job.custom_config_module`` (CLI, then TOML) extends JobConfig with fields
      meshlint cannot see: then an option it does not know is kept, not refused.
The fields and their types come from meshlint's generated schema of torchtitan 0.2.x.
"""

from __future__ import annotations

import difflib

from meshlint.inputs.launch_words import (
    Launch,
    Override,
    UnknownValue,
    Word,
    _blocks,
    _err,
    _norm,
    _option_text,
    _pos,
    _shown,
    _sub,
    _where,
    not_an_option,
)

from meshlint.inputs.tyro_overrides import skip_splats, take_values, typed_value

FRAMEWORK = "torchtitan-0.2"
VERSION = "0.2.x"
CONFIG_OPTIONS = ("--job.config_file", "--job.config-file")
CUSTOM_OPTIONS = ("--job.custom_config_module", "--job.custom-config-module")


def is_v02(args: list) -> bool:
    """Whether torchtitan's arguments name a TOML with --job.config_file (and no --module/--config)."""
    texts = [w.text for w in args if not w.splat]
    if any(t in ("--module", "--config") or t.startswith(("--module=", "--config=")) for t in texts):
        return False
    return any(t in CONFIG_OPTIONS or t.startswith(tuple(o + "=" for o in CONFIG_OPTIONS)) for t in texts)


def v02_launch(args: list, origin, launcher: str, first: Word | None, index0: int = 0) -> Launch:
    """The Launch of torchtitan v0.2's arguments (``args``: the words after -m torchtitan.train)."""
    from meshlint.errors import InputError

    line = first.line if first is not None else 1
    text = " ".join(_shown(w) if not w.splat else w.raw for w in ([first] if first is not None else []) + list(args))
    launch = Launch(None, None, [], [], launcher, origin.file, line, text if len(text) <= 200 else text[:197] + "...")
    launch.framework = FRAMEWORK
    launch.config_word = None
    rest, config = [], None
    k = 0
    while k < len(args):
        w = args[k]
        t = w.text
        if config is None and not w.splat and t in CONFIG_OPTIONS and k + 1 < len(args):
            config = args[k + 1]
            k += 2
            continue
        if config is None and not w.splat and t.partition("=")[0] in CONFIG_OPTIONS and "=" in t:
            config = _sub(w, t.index("=") + 1)
            k += 1
            continue
        rest.append((index0 + k, w))
        k += 1
    if config is None or config.splat or not config.known():
        what = _shown(config) if config is not None else "missing"
        launch.unresolved = (f"the config file is {what} ({_where(config or first or Word(''), origin)}), which the "
                             f"script does not determine ({getattr(config, 'unknown', None) or 'unknown words'})")
        return launch
    launch.config_word = config
    launch.config = config.text
    custom = any(w.text.partition("=")[0] in CUSTOM_OPTIONS for _, w in rest)
    try:
        launch.overrides = parse_v02_overrides(rest, origin, launch.notes, custom)
    except InputError as exc:
        launch.error = exc
    return launch


def _kind(typ: dict | None) -> str | None:
    """The schema's type as launch._typed's words."""
    if not typ:
        return None
    kind = typ.get("kind")
    if kind in ("int", "float", "bool", "str"):
        return kind
    if kind in ("literal", "enum"):
        return "lit:" + ",".join(str(v) for v in typ.get("values", ()))
    if kind == "optional":
        inner = _kind(typ.get("of"))
        if inner in ("int", "float", "str"):
            return inner + "?"
        if inner in ("list[list[str]]?", "list[list[str]]"):
            return "list[list[str]]?"
        return inner
    if kind == "list":
        of = typ.get("of") or {}
        if of.get("kind") == "str":
            return "list[str]"
        if of.get("kind") == "list" and (of.get("of") or {}).get("kind") == "str":
            return "list[list[str]]"
    return None


def parse_v02_overrides(items: list, origin, notes: list, custom: bool = False) -> list:
    """tyro's reading of v0.2's options: [Override] typed from the 0.2.x schema; raises InputError(ML006)
    where tyro refuses the line."""
    from meshlint.frameworks import schema_data

    schema = schema_data.load("torchtitan", VERSION)
    sections = schema.sections()
    out: list = []
    k, n = 0, len(items)
    while (k := skip_splats(items, k, notes, origin)) < n:
        index, w = items[k]
        t = w.text
        if not (t.startswith("--") and len(t) > 2):
            raise not_an_option(w, origin)
        name, eq, _ = t[2:].partition("=")
        path = _norm(name)
        parts = path.split(".")
        entry = schema.key(path) if len(parts) > 1 else None
        kind = _kind(entry["type"]) if entry else None
        inverse = False
        if entry is None and parts[-1].startswith("no_"):
            positive = schema.key(".".join(parts[:-1] + [parts[-1][3:]]))
            if positive and _kind(positive["type"]) == "bool":
                entry, kind, inverse = positive, "bool", True
                path = ".".join(parts[:-1] + [parts[-1][3:]])
        k += 1
        if entry is None:
            if not custom:
                raise _unknown(t.partition("=")[0], path, schema, sections, w, origin)
            values = [_sub(w, 2 + len(name) + 1)] if eq else []
            while not eq and k < n and not _blocks(items[k][1]):
                values.append(items[k][1])
                k += 1
            value = (UnknownValue(f"{_shown(w)}: a field of the custom config module") if not values or
                     any(not v.known() for v in values) else values[0].text)
            out.append(Override(path, value, index, _shown(w), _pos(w, origin), "value", False))
            continue
        if kind == "bool":
            if eq:
                raise _err(f"--{name} is a flag and takes no value: tyro refuses the line (\"Unrecognized options\")",
                           w, origin, help=f"write --{path} or --{path.rpartition('.')[0]}.no-{parts[-1]}")
            out.append(Override(path, not inverse, index, _shown(w), _pos(w, origin), "flag", True))
            continue
        values = [_sub(w, 2 + len(name) + 1)] if eq else []
        many = kind in ("list[list[str]]?", "list[list[str]]")
        k = take_values(items, k, values, w, name, eq, many, origin)
        if kind is None:
            bad = next((v for v in values if not v.known()), None)
            value = (UnknownValue(bad.unknown or f"{_shown(bad)} expands to any number of words") if bad is not None
                     else values[0].text if len(values) == 1 else [v.text for v in values])
        else:
            value = typed_value(values, "list[list[str]]?" if many else kind, name, w, origin)
        out.append(Override(path, value, index, _option_text(w, values, eq), _pos(w, origin), "value",
                            kind is not None))
    return out


def _unknown(flag: str, path: str, schema, sections: list, w: Word, origin):
    section, _, field = path.rpartition(".")
    if section and schema.keys(section):
        fields = list(schema.keys(section))
        close = difflib.get_close_matches(field, fields, n=1, cutoff=0.6)
        help = f"did you mean --{section}.{close[0]}?" if close else f"--{section} options: {', '.join(sorted(fields))}"
        what = f"{section} has no field {field!r}"
    else:
        close = difflib.get_close_matches(path.partition(".")[0], sections, n=1, cutoff=0.6)
        help = f"did you mean --{close[0]}.{path.partition('.')[2]}?" if close else f"sections: {', '.join(sections)}"
        what = f"JobConfig has no section {path.partition('.')[0]!r}"
    return _err(f"unknown option {flag}: {what} in torchtitan v0.2, and its parser (tyro) refuses it "
                f"(\"Unrecognized options: {flag}\")", w, origin, help=help)
