"""Applying a launch's overrides to a registry config, typed by the schema, the checkout's dataclasses or the
value the config holds, and where each value then comes from."""

from __future__ import annotations

import copy
import difflib
from typing import Any

from meshlint.errors import InputError
from meshlint.inputs.launch_words import (COMMAND_LINE, _err, MAX_INT_DIGITS, _Origin, Override,
    UnknownValue, Word)
from meshlint.inputs.tyro_schema import (AC_SECTION, schema_for, STRICT_SECTIONS, TOP_LEAVES,
    TRAINER_SECTIONS, _version_key)
from meshlint.inputs.tyro_overrides import _field_type, _typed, _unknown_option


# ----------------------------------------------------------------------------- applying overrides

def apply_overrides(source, overrides: list, version: str | None = None, checkout: str | None = None) -> None:
    """Set each override's value in ``source.data`` (a PySource or a saved config), in order, and make
    ``locate``/``file_of`` point at the override for what it set.

    Works on private copies of ``data``, ``positions``, ``unknown`` and ``types`` (a registry reader
    may share them between configs). Sets ``source.file_of`` (and wraps ``locate``) even when there
    are no overrides, so every finding of a launch names its file. An override with an unknown value makes its path unknown
    (never a guess). ``checkout``: the torchtitan package the registry belongs to, whose own section dataclasses
    may define a field the applied version lacks. Raises InputError(ML006) where torchtitan would refuse the launch."""
    from meshlint.inputs.pysource import Unknown

    source.data = copy.deepcopy(getattr(source, "data", {}) or {})
    source.positions = dict(getattr(source, "positions", {}) or {})
    source.unknown = dict(getattr(source, "unknown", {}) or {})
    source.types = dict(getattr(source, "types", {}) or {})
    set_by = dict(getattr(source, "overridden", {}) or {})   # dotted path -> Override
    nested = getattr(source, "nested_under", None)
    if nested and isinstance(getattr(source, "outer", None), dict):
        source.outer = copy.deepcopy(source.outer)
    config_class = source.types.get("")
    plain = config_class in ("Trainer.Config", None) and not nested
    schema = schema_for(version)
    vkey = _version_key(version)
    for ov in overrides:
        if ov.kind == "error":
            raise ov.value
        parts = ov.path.split(".") if ov.path else []
        if nested and parts and parts[0] == nested:
            parts = parts[1:]
        elif nested:
            # an RL controller's own option (the trainer config is nested under it): not the trainer's
            outer = getattr(source, "outer", None)
            if isinstance(outer, dict) and ov.known and len(parts) <= 2:
                outer.setdefault(parts[0], {}) if len(parts) == 2 else None
                if len(parts) == 2 and isinstance(outer[parts[0]], dict):
                    outer[parts[0]][parts[1]] = ov.value
                elif len(parts) == 1:
                    outer[parts[0]] = ov.value
            continue
        if not parts:
            # an option whose name is not known at all: everything may be changed
            _mark_unknown(source, (), ov, Unknown)
            set_by[""] = ov
            continue
        section = parts[0]
        word = Word(ov.text, *(ov.position[1:] if ov.position else (1, 1)))
        origin = _Origin(ov.position[0] if ov.position and ov.position[0] != COMMAND_LINE else None, True)
        if section not in TRAINER_SECTIONS and section not in TOP_LEAVES and section not in source.data and plain:
            close = difflib.get_close_matches(section, list(TRAINER_SECTIONS), n=1, cutoff=0.6)
            raise _err(f"unknown option --{ov.path}: {config_class or 'Trainer.Config'} has no section {section!r}, "
                       f"and torchtitan's parser (tyro) refuses it (\"Unrecognized options\")", word, origin,
                       help=f"did you mean --{close[0]}.{'.'.join(parts[1:])}?" if close else
                       f"sections: {', '.join(TRAINER_SECTIONS)}")
        own_kind = None  # the type of a field only the checkout's own dataclass has
        if vkey is None and ov.refusal is not None:
            own_kind = _checkout_kind(checkout, section, parts[1])
            if own_kind is None:
                raise ov.refusal
        elif vkey is not None and section in STRICT_SECTIONS and len(parts) == 2 and parts[1] not in schema[section] \
                and source.types.get(section) in (None, _DATACLASS.get(section)):
            own_kind = _checkout_kind(checkout, section, parts[1])
            if own_kind is None:
                raise _unknown_option(f"--{ov.path}", ov.path, _with_checkout_fields(schema, checkout, section),
                                      word, origin)
        if ov.kind == "subcommand":
            cls = ov.value
            if cls is None:
                _set(source, parts, None, ov)
                source.types.pop(section, None)
            else:
                keep = source.types.get(section) == cls and isinstance(source.data.get(section), dict)
                _set(source, parts, source.data[section] if keep else {}, ov, keep_below=keep)
                source.types[section] = cls
            set_by[section] = ov
            continue
        value = ov.value
        if not ov.known:
            _mark_unknown(source, tuple(parts), ov, Unknown)
            set_by[".".join(parts)] = ov
            continue
        if own_kind is not None and not ov.typed:
            value = _typed_as(own_kind, value, ov, word, origin)
        elif not ov.typed and _field_type(schema, parts) is not None and nested:
            # an RL config's "--trainer.parallelism..." is the trainer's field: type it as one
            kind = _field_type(schema, parts)
            if kind == "bool":
                value = value if isinstance(value, bool) else UnknownValue(f"{ov.text}: a flag takes no value")
            else:
                texts = value if isinstance(value, list) else [value]
                value = _typed(kind, [str(t) for t in texts], "--" + ov.path, word, origin)
        elif not ov.typed:
            value = _schema_typed(source, parts, value, ov, version, word, origin)
            if value is _UNTYPED:
                value = _type_by_existing(source, parts, ov.value, ov)
        if isinstance(value, UnknownValue):
            _mark_unknown(source, tuple(parts), ov._replace(value=value), Unknown)
            set_by[".".join(parts)] = ov
            continue
        _set(source, parts, value, ov)
        set_by[".".join(parts)] = ov
    source.overridden = set_by
    if hasattr(source, "_kinds"):
        source._kinds = None    # PySource caches which paths are set
    file_of = _FileOf(source)
    if not isinstance(getattr(source, "locate", None), _Locate):
        source.locate = _Locate(source.locate, file_of)
    source.file_of = file_of


_UNTYPED = object()


def _checkout_kind(checkout: str | None, section: str, field: str) -> str | None:
    """The annotation kind of ``section.field`` in the checkout's own dataclass (None: it has no such field)."""
    if not checkout:
        return None
    from meshlint.frameworks.torchtitan import ttcode

    return ttcode.field_kind(checkout, section, field)


def _with_checkout_fields(schema: dict, checkout: str | None, section: str) -> dict:
    """``schema`` with the checkout's own fields of ``section`` added (the did-you-mean's candidates)."""
    if not checkout:
        return schema
    from meshlint.frameworks.torchtitan import ttcode

    own = ttcode.section_fields(checkout).get(section) or {}
    return {**schema, section: {**{f: "" for f in own}, **schema.get(section, {})}}


def _typed_as(kind: str, value, ov: Override, word: Word, origin: _Origin):
    """An untyped override of a field the checkout defines, typed as tyro types its annotation ("" leaves
    the raw text: a type meshlint does not model)."""
    flag = "--" + ov.path
    if kind == "bool":
        if value is True or value is False:
            return value
        raise _err(f"{flag} is a flag and takes no value: tyro reads {value!r} as a stray argument and refuses the "
                   f"line (\"Unrecognized options: {value}\")", word, origin)
    if value is True or value is False:
        if not kind:
            return value
        raise _err(f"{flag} requires a value (tyro: \"expected 1 argument\")", word, origin)
    if not kind:
        return value
    texts = value if isinstance(value, list) else [value]
    if len(texts) != 1:
        raise _err(f"{flag} takes one value, and the line gives {len(texts)}: tyro refuses the extra words "
                   f"(\"Unrecognized options\")", word, origin)
    return _typed(kind, [str(texts[0])], flag, word, origin)


def _schema_typed(source, parts: list, value, ov: Override, version: str | None, word: Word, origin: _Origin):
    """A component section's option checked against the generated schema of the class the config holds
    there (tyro's options are that class's fields): an unknown field, a flag given a value, a value tyro
    cannot parse or outside a Literal is refused (ML006) as tyro refuses it; _UNTYPED when the schema
    cannot tell (then the value is typed like the one the config holds)."""
    if len(parts) != 2 or parts[0] in STRICT_SECTIONS:
        return _UNTYPED
    from meshlint.frameworks import schema_check

    verdict = schema_check.override_field(_version_key(version), parts[0], parts[1], source.types.get(parts[0]))
    if verdict is None:
        return _UNTYPED
    what, info, cls = verdict
    flag = "--" + ov.path
    if what == "unknown":
        close = difflib.get_close_matches(parts[1], info, n=1, cutoff=0.6)
        raise _err(f"unknown option {flag}: {cls} has no field {parts[1]!r}, and torchtitan's parser (tyro) refuses "
                   f"it (\"Unrecognized options: {flag}\")", word, origin,
                   help=f"did you mean --{parts[0]}.{close[0]}?" if close else f"{cls} fields: {', '.join(info)}")
    if what == "suppressed":
        raise _err(f"unknown option {flag}: {cls}.{parts[1]} is tyro.conf.Suppress ({info}), so torchtitan's parser "
                   f"has no such option and refuses it (\"Unrecognized options: {flag}\")", word, origin,
                   help="set it in the config function instead")
    if info is None:
        return _UNTYPED
    if info == "bool":
        if value is True or value is False:
            return value
        raise _err(f"{flag} is a flag and takes no value: tyro reads {value!r} as a stray argument and refuses the "
                   f"line (\"Unrecognized options\")", word, origin,
                   help=f"write {flag} or --{parts[0]}.no-{parts[1]}")
    if value is True or value is False:
        raise _err(f"{flag} needs a value: tyro refuses the line (\"Missing value for argument "
                   f"'{flag.replace('_', '-')}'\")", word, origin)
    texts = value if isinstance(value, list) else [value]
    if len(texts) != 1:
        raise _err(f"{flag} takes one value, and tyro refuses the others (\"Unrecognized options\")", word, origin)
    return _typed(info, [str(texts[0])], flag, word, origin)


_DATACLASS = {"training": "TrainingConfig", "parallelism": "ParallelismConfig", "compile": "CompileConfig",
              "comm": "CommConfig", "debug": "DebugConfig", "override": "OverrideConfig"}


def _pydotted(parts) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int) or (isinstance(p, str) and p.isdigit()):
            out += f"[{int(p)}]"
        else:
            out = f"{out}.{p}" if out else str(p)
    return out


def _drop_below(mapping: dict, dotted: str) -> None:
    for key in [k for k in mapping if k == dotted or k.startswith(dotted + ".") or k.startswith(dotted + "[")]:
        del mapping[key]


def _container(source, parts: list, ov: Override, create: bool = True):
    """The dict (or list) holding the last part, created on the way when ``create``."""
    node = source.data
    for depth, p in enumerate(parts[:-1]):
        if isinstance(node, list):
            if not p.isdigit() or int(p) >= len(node):
                raise _override_error(ov, f"{'.'.join(parts[:depth + 1])} has no item {p}")
            node = node[int(p)]
            continue
        if not isinstance(node, dict):
            raise _override_error(ov, f"{'.'.join(parts[:depth])} is not a section")
        child = node.get(p)
        if child is None or not isinstance(child, (dict, list)):
            if not create:
                return None
            if child is not None and not isinstance(child, dict):
                raise _override_error(ov, f"{'.'.join(parts[:depth + 1])} holds a value, not a section")
            if p in node:
                what = ("activation checkpointing is off (activation-checkpoint:none)" if p == AC_SECTION
                        else f"{'.'.join(parts[:depth + 1])} is None, not a section")
                raise _override_error(ov, what)
            child = node[p] = {}
        node = child
    return node


def _override_error(ov: Override, what: str) -> InputError:
    file, line, col = ov.position if ov.position else (COMMAND_LINE, 1, 1)
    return InputError("ML006", f"cannot apply {ov.text}: {what}", line, col)


def _set(source, parts: list, value, ov: Override, keep_below: bool = False) -> None:
    node = _container(source, parts, ov)
    last = parts[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise _override_error(ov, f"{'.'.join(parts[:-1])} has no item {last}")
        node[int(last)] = value
    else:
        node[last] = value
    dotted = _pydotted(parts)
    if not keep_below:
        _drop_below(source.positions, dotted)
        for key in [k for k in source.types if k.startswith(dotted + ".")]:
            del source.types[key]
    _drop_below(source.unknown, dotted)
    if ov.position:
        source.positions[dotted] = (ov.position[1], ov.position[2])


def _mark_unknown(source, parts: tuple, ov: Override, unknown_cls) -> None:
    dotted = _pydotted(parts)
    if parts:
        node = _container(source, list(parts), ov, create=False)
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    else:
        source.data.clear()
    _drop_below(source.positions, dotted)
    _drop_below(source.unknown, dotted)
    file, line, col = ov.position if ov.position else (COMMAND_LINE, 1, 1)
    source.unknown[dotted] = unknown_cls(f"{ov.text}: {ov.value.reason}", line, col, file)
    if ov.position:
        source.positions[dotted] = (line, col)


def _existing(source, parts: list):
    node: Any = source.data
    for p in parts:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return _MISSING
    return node


_MISSING = object()


def _type_by_existing(source, parts: list, raw, ov: Override):
    """A component field's value typed like the value the config holds there (its default is not
    known here; the raw text is kept then)."""
    old = _existing(source, parts)
    if old is _MISSING or old is None:
        return raw
    try:
        if isinstance(old, bool):
            if raw is True or raw is False:
                return raw
            return UnknownValue(f"{ov.path} holds a bool, which tyro sets with a flag, not with {raw!r}")
        if raw is True or raw is False:
            return UnknownValue(f"{ov.path} holds {type(old).__name__} {old!r}, and {ov.text} gives it no value")
        if isinstance(old, int):
            if isinstance(raw, str) and sum(c.isdigit() for c in raw) <= MAX_INT_DIGITS:
                return int(raw)
        elif isinstance(old, float):
            if isinstance(raw, str):
                return float(raw)
        elif isinstance(old, str):
            return raw if isinstance(raw, str) else " ".join(raw)
        elif isinstance(old, list):
            items = raw.split(",") if isinstance(raw, str) and all(isinstance(x, str) for x in old) else (
                raw if isinstance(raw, list) else [raw])
            if old and all(isinstance(x, float) for x in old):
                return [float(x) for x in items]
            if old and all(isinstance(x, int) and not isinstance(x, bool) for x in old):
                return [int(x) for x in items]
            return items
        else:
            return raw
    except ValueError:
        pass
    return UnknownValue(f"{raw!r} cannot be read as the {type(old).__name__} {ov.path} holds ({old!r})")


class _Locate:
    """The source's own ``locate``, remembering which file each answer is in: a finding's key keeps
    only its first alternative (engine.py), so ``file_of(key, line, col)`` looks the answer up."""

    def __init__(self, locate, file_of):
        self.inner = locate
        self.file_of = file_of

    def __call__(self, key):
        line, col = self.inner(key)
        if key:
            first = key.split("|", 1)[0].strip() if isinstance(key, str) else key
            self.file_of.seen[(first if isinstance(first, str) else tuple(first), line, col)] = self.file_of(key)
        return line, col


class _FileOf:
    """``source.file_of(key[, line, col])``: the file a finding about ``key`` points into (the launch
    script, or COMMAND_LINE, for what an override set; the registry file otherwise). Given the
    finding's line and column it answers what ``locate`` answered for it (alternatives included)."""

    def __init__(self, source):
        self.source = source
        self.seen: dict = {}

    def __call__(self, key, line: int | None = None, col: int | None = None) -> str | None:
        if line is not None and key is not None:
            hit = self.seen.get((key if isinstance(key, str) else tuple(key), line, col))
            if hit is not None:
                return hit
        src = self.source
        base = getattr(src, "file", None) or getattr(src, "path", None)
        if not key:
            return base
        if isinstance(key, str) and key.startswith("#L"):
            return base
        if isinstance(key, str) and "|" in key:
            options = [k.strip() for k in key.split("|") if k.strip()]
            key = next((k for k in options if src.has_key(k)), options[0] if options else "")
            if not key:
                return base
        from meshlint.inputs.source import split_key

        parts = split_key(key) if isinstance(key, str) else tuple(key)
        overridden = getattr(src, "overridden", {})
        for cut in range(len(parts), 0, -1):
            dotted = _pydotted(parts[:cut])
            if dotted in src.positions:
                ov = overridden.get(_tyro_dotted(parts[:cut])) or overridden.get(dotted)
                if ov is not None:
                    return ov.position[0] if ov.position else COMMAND_LINE
                return base
        unknown = src.unknown_of(_pydotted(parts)) if hasattr(src, "unknown_of") else None
        if unknown is not None and getattr(unknown, "file", None):
            return unknown.file
        return base


def _tyro_dotted(parts) -> str:
    return ".".join(str(p) for p in parts)
