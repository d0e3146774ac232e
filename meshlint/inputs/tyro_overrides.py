"""torchtitan's own arguments as tyro reads them: ``--module``/``--config`` taken out first, then each
``--section.field`` override typed as tyro types it (tyro 1.0.17's backend, each rule with its experiment)."""

from __future__ import annotations

import difflib
from typing import Any

from meshlint.errors import InputError
from meshlint.inputs.launch_words import (_blocks, _err, MAX_INT_DIGITS, _norm, not_an_option,
    _option_text, _Origin, Override, _pos, _shown, splat_note, _sub, UNKNOWN_CHAR, UnknownValue, Word)
from meshlint.inputs.tyro_schema import (AC_SECTION, AC_SUBCOMMANDS, COMPONENT_FIELDS, RENAMED,
    RENAMED_BACK, schema_for, STRICT_SECTIONS, TOP_LEAVES, TRAINER_SECTIONS)


def _subcommand(word: Word) -> tuple | None:
    """``activation-checkpoint:full`` (hyphens or underscores, 'None' for 'none') -> (section, choice)."""
    t = word.text
    if word.splat or ":" not in t or t.startswith("-"):
        return None
    section, _, choice = t.partition(":")
    if _norm(section) != AC_SECTION:
        return None
    if choice.endswith("None"):
        choice = choice[:-4] + "none"
    choice = choice.replace("_", "-")
    return (AC_SECTION, choice) if choice in AC_SUBCOMMANDS else None


def parse_overrides(args: list, origin: _Origin | None = None, version: str | None = None,
                    notes: list | None = None) -> list:
    """tyro's reading of torchtitan's options (``--module``/``--config`` already taken out).

    ``args``: [(index, Word)] or [Word] or [str]. Returns [Override]; raises InputError(ML006) where
    tyro would refuse the command line, ML007 past a documented limit."""
    origin = origin or _Origin(None, True)
    notes = notes if notes is not None else []
    items = []
    for k, a in enumerate(args):
        if isinstance(a, tuple):
            items.append(a)
        elif isinstance(a, Word):
            items.append((k, a))
        else:
            items.append((k, Word(str(a), 1, 1)))
    schema = schema_for(version)
    out: list = []
    k = 0
    n = len(items)
    subcommand: str | None = None   # the activation_checkpoint subcommand, once given
    double_dash = False
    while (k := skip_splats(items, k, notes, origin)) < n:
        index, w = items[k]
        t = w.text
        if t == "--" and not double_dash:
            double_dash = True
            k += 1
            continue
        if double_dash:
            raise _err(f"{t!r} comes after '--', where torchtitan's parser (tyro) takes no options: it refuses the "
                       f"line (\"Unrecognized options: {t}\")", w, origin,
                       help="remove the '--': torchtitan reads its overrides directly after --config")
        if t in ("-h", "--help"):
            raise _err(f"{t} makes torchtitan print its help and exit: the line runs no training", w, origin)
        sub = _subcommand(w)
        if sub is not None:
            if subcommand is not None:
                raise _err(f"a second activation-checkpoint subcommand {t!r}: tyro takes one (\"Unrecognized "
                           f"options: {t}\")", w, origin)
            subcommand = sub[1]
            out.append(Override(AC_SECTION, AC_SUBCOMMANDS[sub[1]], index, _shown(w), _pos(w, origin), "subcommand",
                                True))
            k += 1
            continue
        if not (t.startswith("--") and len(t) > 2) or UNKNOWN_CHAR in t.partition("=")[0]:
            if UNKNOWN_CHAR in t.partition("=")[0] and t.startswith("--"):
                path = _known_prefix(_norm(t[2:].partition("=")[0]))
                out.append(Override(path, UnknownValue(f"the option {_shown(w)} is built from "
                                                       f"{w.unknown or 'an unknown value'}"),
                                    index, _shown(w), _pos(w, origin), "value", False))
                k += 1
                while k < n and not _blocks(items[k][1]) and _subcommand(items[k][1]) is None:
                    k += 1
                continue
            raise not_an_option(w, origin)
        name, eq, eqval = t[2:].partition("=")
        path = _norm(name)
        parts = path.split(".")
        section = parts[0]
        if subcommand is not None and section != AC_SECTION:
            raise _err(f"{t.partition('=')[0]} comes after the subcommand activation-checkpoint:{subcommand}, "
                       f"where tyro reads only --activation-checkpoint.* options (\"Unrecognized options\")",
                       w, origin, help="put the activation-checkpoint subcommand (and its options) last")
        if section == AC_SECTION and subcommand is None:
            raise _err(f"{t.partition('=')[0]}: tyro reads activation_checkpoint options only after a subcommand "
                       f"(\"Unrecognized options\")", w, origin,
                       help="write e.g. activation-checkpoint:full --activation-checkpoint.debug (distributed/"
                            "activation_checkpoint.py:332-337)")
        if section in ("model_spec", "model"):
            raise _err(f"{t.partition('=')[0]}: the model is not on torchtitan's command line (Trainer.Config."
                       f"model_spec is tyro.conf.Suppress, trainer.py:77): tyro refuses it", w, origin,
                       help="the model comes from model_spec=model_registry(...) in the config function")
        kind = _field_type(schema, parts)
        inverse = False
        if kind is None and len(parts) >= 1 and parts[-1].startswith("no_"):
            positive = parts[:-1] + [parts[-1][3:]]
            if _field_type(schema, positive) == "bool":
                kind, parts, inverse = "bool", positive, True
                path = ".".join(parts)
        refusal = None
        if kind is None and section in STRICT_SECTIONS and len(parts) >= 2:
            refusal = _unknown_option(t.partition("=")[0], path, schema, w, origin)
            if version is not None or len(parts) > 2:
                raise refusal
            # with no version yet (the checkout is read later), a field neither modelled version has is judged
            # by apply_overrides against the applied version and the checkout's own dataclass (an ETP-era
            # checkout has --parallelism.expert_tensor_parallel_degree); without a checkout, refused as here
        if kind is None and len(parts) == 1 and section not in TOP_LEAVES and section in TRAINER_SECTIONS:
            raise _err(f"--{name} names a whole section: tyro takes its fields (--{name}.FIELD)", w, origin)
        if kind == "bool":
            if eq:
                raise _err(f"--{name} is a flag and takes no value: tyro reads {eqval!r} as a stray argument and "
                           f"refuses the line (\"Unrecognized options: {eqval}\")", w, origin,
                           help=f"write --{'.'.join(parts[:-1] + [parts[-1]]).replace('_', '-')} or "
                                f"--{'.'.join(parts[:-1] + ['no-' + parts[-1]]).replace('_', '-')}")
            out.append(Override(path, not inverse, index, _shown(w), _pos(w, origin), "flag", True))
            k += 1
            continue
        # options with values
        values: list = []
        k += 1
        if eq:
            values.append(_sub(w, 2 + len(name) + 1))
        if kind is None:
            # a component's field (or a subclass's section): its type, and so how many words it takes,
            # come from the config; take the words tyro would not refuse
            if not eq:
                while k < n and not _blocks(items[k][1]) and _subcommand(items[k][1]) is None:
                    values.append(items[k][1])
                    k += 1
            text = " ".join([_shown(w)] + [_shown(v) for v in values[1 if eq else 0:]])
            if any(not v.known() for v in values):
                bad = next(v for v in values if not v.known())
                value: Any = UnknownValue(bad.unknown or f"{_shown(bad)} expands to any number of words")
            elif not values:
                value = True if not parts[-1].startswith("no_") else False
                if parts[-1].startswith("no_"):
                    path = ".".join(parts[:-1] + [parts[-1][3:]])
                out.append(Override(path, value, index, text, _pos(w, origin), "flag", False, refusal))
                continue
            else:
                value = values[0].text if len(values) == 1 else [v.text for v in values]
            out.append(Override(path, value, index, text, _pos(w, origin), "value", False, refusal))
            continue
        k = take_values(items, k, values, w, name, eq, kind in ("list[list[str]]?", "imports"), origin)
        out.append(Override(path, typed_value(values, kind, name, w, origin), index, _option_text(w, values, eq),
                            _pos(w, origin), "value", True))
    return out


def take_values(items: list, k: int, values: list, w: Word, name: str, eq: bool, many: bool, origin) -> int:
    """Append to ``values`` the words tyro gives option ``--name`` (at ``items[k]``, after it): a
    multi-word type every word up to one tyro refuses to consume (or a subcommand), after an ``=`` value
    too; otherwise the next word unless ``=`` gave one, refused when missing. Returns the index after."""
    n = len(items)
    if many:
        while k < n and not _blocks(items[k][1]) and _subcommand(items[k][1]) is None:
            values.append(items[k][1])
            k += 1
    elif not eq:
        if k >= n or _blocks(items[k][1]):
            raise _err(f"--{name} needs a value: tyro refuses the line (\"Missing value for argument "
                       f"'--{name.replace('_', '-')}'. Expected 1 values.\")", w, origin)
        values.append(items[k][1])
        k += 1
    return k


def typed_value(values: list, kind: str, name: str, w: Word, origin):
    """The option's value as tyro builds it for ``kind``; an UnknownValue when a word is unknown."""
    unknown = next((v for v in values if not v.known()), None)
    if unknown is not None:
        return UnknownValue(unknown.unknown or f"{_shown(unknown)} expands to any number of words")
    return _typed(kind, [v.text for v in values], "--" + name, w, origin)


def skip_splats(items: list, k: int, notes: list, origin: _Origin) -> int:
    """The index of the next (index, Word) item from ``k`` that is not a splat, noting each one skipped."""
    while k < len(items) and items[k][1].splat:
        notes.append(splat_note(items[k][1], origin))
        k += 1
    return k


def _known_prefix(path: str) -> str:
    parts = path.split(".")
    keep = []
    for p in parts:
        if UNKNOWN_CHAR in p:
            break
        keep.append(p)
    return ".".join(keep)


def _field_type(schema: dict, parts: list) -> str | None:
    if len(parts) == 1:
        return TOP_LEAVES.get(parts[0])
    if len(parts) == 2:
        return schema.get(parts[0], {}).get(parts[1]) or COMPONENT_FIELDS.get(parts[0], {}).get(parts[1])
    return None


def _unknown_option(flag: str, path: str, schema: dict, word: Word, origin: _Origin) -> InputError:
    section, _, field = path.partition(".")
    fields = schema.get(section, {})
    close = difflib.get_close_matches(field, list(fields), n=1, cutoff=0.6)
    old = path if path in RENAMED else RENAMED_BACK.get(path)
    if old is not None and RENAMED[old].partition(".")[2] in fields:
        help = f"torchtitan main renamed --{old} to --{RENAMED[old]}: use that"
    elif old is not None and old.partition(".")[2] in fields:
        help = f"--{path} is torchtitan main's name; 0.3.0 calls it --{old}"
    elif close:
        help = f"did you mean --{section}.{close[0]}?"
    else:
        help = f"--{section} options: " + ", ".join(sorted(fields))
    return _err(f"unknown option {flag}: {section} has no field {field!r}, and torchtitan's parser (tyro) refuses "
                f"it (\"Unrecognized options: {flag}\")", word, origin, help=help)


def _typed(kind: str, texts: list, flag: str, word: Word, origin: _Origin):
    """A value as tyro builds it for the field's type (each rule confirmed against tyro 1.0.17)."""
    if kind in ("list[list[str]]?", "imports"):
        if kind == "list[list[str]]?" and texts == ["None"]:
            return None
        return [t.split(",") for t in texts] if kind == "list[list[str]]?" else list(texts)
    text = texts[0]
    if kind.endswith("?"):
        if text == "None":
            return None
        kind = kind[:-1]
    if kind == "int":
        return _int_value(text, flag, word, origin)
    if kind in ("float", "float|int"):
        try:
            return float(text)
        except ValueError:
            raise _err(f"{flag} {text!r}: not a number, and tyro refuses it (\"could not convert string to float: "
                       f"{text!r}\")", word, origin) from None
    if kind.startswith("lit:"):
        choices = kind[4:].split(",")
        if text not in choices:
            close = difflib.get_close_matches(text, choices, n=1, cutoff=0.5)
            raise _err(f"{flag} {text!r}: tyro refuses it (\"invalid choice {text!r} for argument "
                       f"'{flag.replace('_', '-')}'. Expected one of {tuple(choices)!r}.\")", word, origin,
                       help=f"did you mean {close[0]!r}?" if close else None)
        return text
    if kind == "list[str]":
        return text.split(",")
    return text


def _int_value(text: str, flag: str, word: Word, origin: _Origin) -> int:
    digits = sum(c.isdigit() for c in text)
    if digits > MAX_INT_DIGITS or len(text) > MAX_INT_DIGITS * 2:
        raise _err(f"{flag} has a {digits:,}-digit value (limit {MAX_INT_DIGITS:,} digits)", word, origin,
                   code="ML007")
    try:
        return int(text)  # tyro calls int(): " 8", "+8", "1_000" are 8, 8, 1000; "8.0", "0x10" are refused
    except ValueError:
        raise _err(f"{flag} {text!r}: not a whole number, and tyro refuses it (\"invalid literal for int() with "
                   f"base 10: {text!r}\")", word, origin) from None
