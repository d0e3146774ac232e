"""The ``config`` fact: every value of a config by section, as the framework will use it.

A key's value is the one the file (or a launch override) sets, else the schema's literal default
(meshlint/data/schema/, generated from the framework's dataclasses), else null. Null also stands for
a value meshlint could not read (a registry function's ``Unknown``), for a default that is not a
literal, and for every key of a class the schema does not know (a user's subclass): a rule reading a
null value is skipped, never run on a guessed default (meshlint/engine/expr/: NeedFact).

    config.checkpoint.enable                  # torchtitan: False unless the config enables it
    config.optimizer.param_groups[0].optimizer_name
    config.activation_checkpoint["class"]     # the config class built there: "MemoryBudgetAC.Config"

A table holds every key any class standing there defines (null for those its own class lacks) and
``class``: the short name of the config class standing there ("FullAC.Config", "MoMaConfig"; null
when unknown; no dataclass field can be called ``class``). An optional section the
config leaves out (KempnerForge ``[vlm]``) is null itself. Sections are built on first read (a dict
that fills itself), so a rule set that reads two sections pays for two; the per-class defaults are
worked out once per process.
"""

from __future__ import annotations

from meshlint import fastre
from meshlint.lazydict import LazyDict

_TEMPLATES: dict = {}  # (schema path, class qn) -> (defaults of the plain keys, {name: key} of table keys)
_PART = fastre.compile(r"([^.\[\]]+)|\[(\d+)\]")


def build(spec, data: dict, schema, unknown_of=None, types: dict | None = None, unknown=None) -> dict:
    """The ``config`` fact of ``data`` under ``schema`` (also stored as ``spec.extra["config"]``).

    ``types``: a registry config's classes as written (PySource.types: dotted path -> "FullAC.Config").
    ``unknown``: the dotted paths whose values could not be read (PySource.unknown; each covers what lies
    below it); ``unknown_of(path)``: the same as a lookup, used when no mapping is given.
    """
    if not isinstance(data, dict):
        data = {}
    try:
        tables = schema.data["tables"]
    except Exception:  # noqa: BLE001 - a build without generated schemas: no config fact
        return {}
    paths = list(unknown) if isinstance(unknown, dict) else None
    if paths is None and unknown_of is not None:
        getter = getattr(unknown_of, "__self__", None)
        known = getattr(getter, "unknown", None)
        paths = list(known) if isinstance(known, dict) else None
    ctx = _Ctx(schema, tables, types if isinstance(types, dict) else None, paths or [], unknown_of)
    root = _root(ctx, data)
    if spec is not None:
        spec.extra["config"] = root
        spec.extra["config_withheld"] = ctx.unknown  # withhold() adds to it: sections not yet built see it
    return root


def withhold(spec, keys) -> None:
    """Make these dotted keys null in the ``config`` fact: values of the wrong type (or outside their
    Literal), which the schema check reports itself. A rule comparing them would fail to evaluate
    ("cannot order string and int"); null skips it instead. Sections are built on first read, after
    the schema check, so they see this; top-level plain values were built already and keep theirs."""
    withheld = spec.extra.get("config_withheld") if spec is not None else None
    if isinstance(withheld, list):
        withheld.extend(k for k in keys if isinstance(k, str) and k)


class _Ctx:
    __slots__ = ("schema", "tables", "types", "unknown", "unknown_of", "_typed_above")

    def __init__(self, schema, tables, types, unknown, unknown_of):
        self.schema, self.tables, self.types, self.unknown, self.unknown_of = schema, tables, types, unknown, unknown_of
        self._typed_above = None

    def typed_below(self, path: str) -> bool:
        """True when a config class was built at ``path`` or below it (registry configs only)."""
        if not self.types:
            return False
        if self._typed_above is None:
            above = set()
            for p in self.types:
                for cut in range(len(p), 0, -1):
                    if cut == len(p) or p[cut] in ".[":
                        above.add(p[:cut])
            self._typed_above = above
        return path in self._typed_above

    def unknown_below(self, path: str) -> list:
        """The unknown paths at or below ``path`` ("" = all), as lists of parts."""
        out = []
        for p in self.unknown:
            if not path or p == path or p.startswith(path + ".") or p.startswith(path + "["):
                out.append(p)
        return out

    def covered(self, path: str) -> bool:
        """True when ``path`` or one of its parents could not be read."""
        for p in self.unknown:
            if path == p or path.startswith(p + ".") or path.startswith(p + "["):
                return True
        return False


def _root(ctx: _Ctx, data: dict) -> dict:
    entry = ctx.tables.get("")
    if entry is None:
        return {}
    qn = _class_of(ctx, "", entry, "", data)
    keys, tables, short = _template(ctx, "", qn)
    if ctx.unknown and ctx.covered(""):  # the whole config could not be read: every section null
        return {**dict.fromkeys(keys), **dict.fromkeys(tables), "class": None}
    out: dict = {}
    for name, default in keys.items():  # top-level plain values (hf_assets_path, dump_folder, ...)
        out[name] = _plain(ctx, name, data, name, default)
    for name, key in tables.items():  # sections: built when a rule first reads them
        raw = data.get(name, _ABSENT)
        if raw.__class__ is dict and not ctx.unknown and not key["table"].endswith("[]"):
            # a section written as a table, the usual case: what _section gives it, without the call
            out[name] = LazyDict(lambda p=key["table"], raw=raw, name=name: _table(ctx, p, raw, name, None))
        else:
            out[name] = _section(ctx, key, name, raw)
    out["class"] = short
    return out


_ABSENT = object()


def _plain(ctx: _Ctx, name: str, written: dict, path: str, default):
    if ctx.unknown and ctx.covered(path):
        return None
    return _classed(ctx, written.get(name, default) if isinstance(written, dict) else default, path)


def _classed(ctx: _Ctx, value, path: str):
    """A value the schema does not describe (the dataset tree under a Protocol-typed field): each table a
    config class built holds ``class`` as written ("DatasetMixConfig"), as the schema's tables do; a plain
    dict is left as it is."""
    if not isinstance(value, (dict, list)) or not ctx.typed_below(path):
        return value
    if isinstance(value, list):
        return [_classed(ctx, item, f"{path}[{i}]") for i, item in enumerate(value)]
    out = {k: _classed(ctx, v, f"{path}.{k}") for k, v in value.items()}
    cls = ctx.types.get(path)
    if isinstance(cls, str) and "class" not in out:
        out["class"] = cls
    return out


def _section(ctx: _Ctx, key: dict, path: str, raw):
    """The value of a key that holds a nested config (a table, or an array of tables)."""
    if ctx.unknown and ctx.covered(path):
        return None
    pattern = key["table"]
    if raw is _ABSENT:
        if "default_factory" not in key:
            default = key.get("default")  # None for an optional section left out; [] for an array of tables
            return list(default) if isinstance(default, list) else default
        raw = {}
        forced = key["default_factory"]
    else:
        forced = None
    if pattern.endswith("[]"):
        if not isinstance(raw, list):
            return raw  # a wrong type: the schema check reports it; the value is what was written
        return [None if ctx.unknown and ctx.covered(f"{path}[{i}]")
                else _table(ctx, pattern, item, f"{path}[{i}]", None) if isinstance(item, dict) else item
                for i, item in enumerate(raw)]
    if not isinstance(raw, dict):
        return raw
    return LazyDict(lambda: _table(ctx, pattern, raw, path, forced))


def _table(ctx: _Ctx, pattern: str, written: dict, path: str, forced: str | None) -> dict:
    entry = ctx.tables.get(pattern)
    if entry is not None and "same_as" in entry:
        pattern = entry["same_as"]
        entry = ctx.tables.get(pattern)
    if entry is None:
        return dict(written)
    qn = _class_of(ctx, pattern, entry, path, written, forced)
    if qn is None:  # a class the schema does not know: what is written, nothing defaulted
        keys, tables, _ = _template(ctx, pattern, None)
        out = dict.fromkeys(keys)
        out.update(dict.fromkeys(tables))
        out.update(written)
        out["class"] = None
        return _blank_unknown(ctx, out, path)
    keys, tables, short = _template(ctx, pattern, qn)
    out = dict(keys)
    if ctx.types:
        for name, value in written.items():
            if name in keys:
                out[name] = _classed(ctx, value, f"{path}.{name}" if path else name)
    elif keys.keys() >= written.keys():  # the usual table, plain values only: copied in one step
        out.update(written)
    else:  # no class was built below here (not a registry config): _classed keeps every value as it is
        for name, value in written.items():
            if name in keys:
                out[name] = value
    for name, key in tables.items():
        out[name] = _section(ctx, key, f"{path}.{name}", written.get(name, _ABSENT))
    out["class"] = short
    return _blank_unknown(ctx, out, path) if ctx.unknown else out


def _blank_unknown(ctx: _Ctx, out: dict, path: str) -> dict:
    """Null every plain value of this table that could not be read (nested tables do their own)."""
    if ctx.unknown:
        for p in ctx.unknown_below(path):
            parts = _PART.findall(p[len(path):].lstrip("."))
            if parts and parts[0][0] in out and not isinstance(out[parts[0][0]], (dict, list)):
                out[parts[0][0]] = None
    return out


def _class_of(ctx: _Ctx, pattern: str, entry: dict, path: str, written, forced: str | None = None) -> str | None:
    """The class standing in this table: as written (registry), by its dispatch key (KempnerForge [vlm]),
    the field's default_factory, else the table's default class."""
    classes = entry.get("classes") or []
    if ctx.types is not None:
        name = ctx.types.get(path)
        if isinstance(name, str):
            return _resolve(ctx, pattern, classes, name)
    dispatch = entry.get("dispatch")
    if dispatch and isinstance(written, dict):
        arch = written.get(dispatch["key"], dispatch["default"])
        return dispatch["map"].get(arch) if isinstance(arch, str) else None
    if forced:
        return forced
    return entry.get("default_class") or (classes[0] if len(classes) == 1 else None)


def _resolve(ctx: _Ctx, pattern: str, classes: list, written: str) -> str | None:
    cache = (ctx.schema.path, "resolve", pattern, written)
    hit = _TEMPLATES.get(cache, _ABSENT)
    if hit is _ABSENT:
        tail = "." + written
        found = [qn for qn in classes if qn.endswith(tail) or qn == written]
        if not found:
            found = [qn for qn in ctx.schema.data["classes"] if qn.endswith(tail) or qn == written]
        hit = _TEMPLATES[cache] = found[0] if len(found) == 1 else None
    return hit


def _short(ctx: _Ctx, qn: str | None) -> str | None:
    if qn is None:
        return None
    cls = ctx.schema.data["classes"].get(qn) or {}
    name = cls.get("name") or qn.rsplit(".", 1)[-1]
    # nested Config classes read as their owner's: "FullAC.Config", as registry files write them
    parts = qn.split(".")
    return f"{parts[-2]}.{name}" if name == "Config" and len(parts) > 1 else name


def _template(ctx: _Ctx, pattern: str, qn: str | None) -> tuple:
    """(plain key -> literal default or None, table key name -> key entry, the class's short name) of one class,
    once per process."""
    cache = (ctx.schema.path, pattern, qn)
    hit = _TEMPLATES.get(cache)
    if hit is None:
        if len(_TEMPLATES) > 512:
            _TEMPLATES.clear()
        keys = ctx.schema.keys(pattern, qn)
        plain, tables = {}, {}
        if qn is not None:  # keys only another class of this table defines: null (a rule reading one skips)
            plain.update(dict.fromkeys(k for k, e in ctx.schema.keys(pattern).items() if "table" not in e))
        for name, key in keys.items():
            if "table" in key:
                tables[name] = key
            else:
                plain[name] = key.get("default") if qn is not None else None
        hit = _TEMPLATES[cache] = (plain, tables, _short(ctx, qn))
    return hit
