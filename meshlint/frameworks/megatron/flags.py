"""Megatron-LM's command-line grammar: an entry script's words read as its argparse parser reads them.

The parser (megatron/training/arguments.py:87-93, ``allow_abbrev=False``) is described by the generated
table ``flags_core_0_16.json`` (meshlint/frameworks/megatron/generate.py): every option string, its dest,
action, type, nargs, choices and default. Reading follows argparse: ``--flag value`` and
``--flag=value``; store_true/store_false/BooleanOptionalAction flags take no value; nargs ``+``/``*``
take the following non-option words; a later occurrence wins; an option the parser does not have,
a missing value, a value its type or choices refuse, and a positional word are argparse's
``error:`` exit (code 2) before anything starts. Words the script does not determine stay unknown.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, NamedTuple

_TABLE: dict = {}
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse._negative_number_matcher


def table() -> dict:
    """The generated flag table (read once per process)."""
    if not _TABLE:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flags_core_0_16.json")
        with open(path, encoding="utf-8") as f:
            _TABLE.update(json.load(f))
    return _TABLE


def defaults() -> dict:
    """dest -> default, for the options of the core parser (no extra provider)."""
    out: dict = {}
    for entry in table()["flags"].values():
        if "extra" not in entry and entry["dest"] not in out:
            default = entry["default"]
            out[entry["dest"]] = None if isinstance(default, dict) else default
    return out


def canonical_flag(dest: str) -> str:
    """The option string a dest is usually written with (``--tensor-model-parallel-size``)."""
    best = None
    for flag, entry in table()["flags"].items():
        if entry["dest"] == dest and entry["kind"] not in ("store_false",) and flag.startswith("--"):
            if best is None or (flag.startswith("--no-") < best.startswith("--no-")):
                best = flag
    return best or "--" + dest.replace("_", "-")


class Unknown(NamedTuple):
    """A value the script does not determine."""

    reason: str


class Given(NamedTuple):
    """One option as the parser takes it."""

    dest: str
    value: Any           # typed value, a list for nargs, or Unknown
    flag: str            # the option string as written
    line: int            # where the value is set (its word; the flag's for store_true)
    col: int
    flag_line: int
    flag_col: int


class Refusal(NamedTuple):
    """argparse's ``error:`` exit: what it says and where (``later``: for an option 0.16.1 does not have, the first
    later release whose parser has it, from ``flags_later.json``; None otherwise)."""

    message: str
    line: int
    col: int
    later: str | None = None


_LATER: dict = {}
LATER_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flags_later.json")


def later_release(option: str) -> str | None:
    """The first Megatron-LM release after core_v0.16.1 whose parser has ``option`` (``flags_later.json``, written by
    meshlint/generate/megatron_flags_later.py from the releases' source), or None. Read on first need: only a
    launch with an option 0.16.1 lacks asks."""
    if not _LATER:
        try:
            with open(LATER_TABLE, encoding="utf-8") as f:
                data = json.load(f)
            added = data["added"]
            releases = [r["name"] for r in data["read"] if r["name"].startswith("core_v")]
        except (OSError, ValueError, KeyError, TypeError):
            added, releases = {}, []  # a build without the table: the finding says only what 0.16.1 does
        _LATER["added"] = added if isinstance(added, dict) else {}
        _LATER["last"] = releases[-1] if releases else "the last release read"
    found = _LATER["added"].get(option)
    return found if isinstance(found, str) else None


def _has(later: str, option: str) -> str:
    """Who has an option ``later_release`` named: releases from one on, or only main at the commit read."""
    if later.startswith("core_v"):
        return f"{later} and later releases have {option}"
    return f"Megatron-LM's main at {later.partition('@')[2]} has {option}, no release up to {_LATER['last']} does"


class Parsed:
    def __init__(self):
        self.given: dict = {}      # dest -> Given (the last occurrence)
        self.refusals: list = []   # [Refusal]
        self.notes: list = []      # what could not be read ("$@" passed through, ...)
        self.extras: set = set()   # extra providers whose options were used (modelopt, vlm)
        self.incomplete = False    # words the script does not determine may hold any option
        self.unknown_words: list = []  # {key, reason, line, col} of those words (spec.unreadable)

    @property
    def values(self) -> dict:
        return {dest: g.value for dest, g in self.given.items()}


def parse(words: list, entry: str, allowed_extras: tuple = ()) -> Parsed:
    """Read ``words`` (meshlint.inputs.launch.Word, after the entry script) as ``entry``'s parser would."""
    flags = table()["flags"]
    out = Parsed()
    i, n = 0, len(words)
    while i < n:
        w = words[i]
        if w.splat:
            if w.passes_args():  # the script's own arguments: run without them
                out.notes.append(f"{w.raw} (line {w.line}) passes the script's arguments through: checked as run "
                                 "without any")
            elif w.raw.endswith("+=(...)"):  # scripts.py: items an if/loop block may append to an array
                out.notes.append(f"{w.unknown}: checked as run without them")
            else:  # the script's own options, in a value meshlint cannot follow: any option may be in it
                out.incomplete = True
                out.unknown_words.append({"key": "", "reason": f"{w.raw} may hold any option ({w.unknown or 'unknown'})",
                                          "line": w.line, "col": w.col})
                out.notes.append(f"{w.raw} (line {w.line}) expands to options the script does not determine "
                                 f"({w.unknown or 'unknown'}): options not written elsewhere are unknown, not "
                                 "defaulted")
            i += 1
            continue
        t = w.text
        if not w.known():  # "$FLAG" in an option's place: it may be any option, or none
            out.notes.append(f"{w.raw} (line {w.line}) is a word the script does not determine "
                             f"({w.unknown}): checked as if it were absent")
            i += 1
            continue
        if t == "--":
            rest = " ".join(x.text for x in words[i + 1:])
            if rest:
                out.refusals.append(Refusal(f"unrecognized arguments: {rest}", w.line, w.col))
            break
        name, eq, attached = t.partition("=") if t.startswith("--") else (t, "", "")
        entry_of = flags.get(name)
        if entry_of is None or (entry_of.get("extra") and entry_of["extra"] not in allowed_extras):
            if t.startswith("-") and not _NEGATIVE.match(t):
                extra = entry_of.get("extra") if entry_of else None
                later = later_release(name) if extra is None else None
                if later is not None:  # an option of a newer Megatron-LM: a guess at a near name would mislead
                    hint = f" ({_has(later, name)}; core_v0.16.1, the release meshlint models, does not)"
                else:
                    from difflib import get_close_matches

                    close = get_close_matches(name, [f for f, e in flags.items() if not e.get("extra")], n=1,
                                              cutoff=0.8)
                    hint = f" (did you mean {close[0]}?)" if close else ""
                why = f" (only when {entry}'s extra_args_provider adds the {extra} options)" if extra else ""
                # argparse leaves the words after an unknown option unconsumed: they are unrecognized too
                tail, j = [], i + 1
                while not eq and j < n and words[j].known() and not _is_option(words[j]):
                    tail.append(words[j].text)
                    j += 1
                shown = " ".join([t] + tail)
                out.refusals.append(Refusal(f"unrecognized arguments: {shown}{hint}{why}", w.line, w.col, later))
                i = j
                continue
            else:
                out.refusals.append(Refusal(f"unrecognized arguments: {t} (the parser takes no positional "
                                            "arguments)", w.line, w.col))
            i += 1
            continue
        if entry_of.get("extra"):
            out.extras.add(entry_of["extra"])
        kind, dest = entry_of["kind"], entry_of["dest"]
        if kind in ("store_true", "store_false", "store_const", "bool_optional"):
            if eq:
                out.refusals.append(Refusal(f"argument {name}: ignored explicit argument {attached!r}", w.line, w.col))
                i += 1
                continue
            value = {"store_true": True, "store_false": False}.get(kind)
            if kind == "store_const":
                value = entry_of.get("const")
            elif kind == "bool_optional":
                value = not name.startswith("--no-")
            out.given[dest] = Given(dest, value, name, w.line, w.col, w.line, w.col)
            i += 1
            continue
        nargs = entry_of["nargs"]
        if eq:
            values, i = [_Attached(attached, w, len(name) + 1)], i + 1
        else:
            values, i = _take(words, i + 1, nargs)
        problem = _count_problem(name, nargs, len(values))
        if problem:
            out.refusals.append(Refusal(problem, w.line, w.col))
            continue
        typed = [_convert(entry_of, v, name) for v in values]
        bad = next((x for x in typed if isinstance(x, Refusal)), None)
        if bad is not None:
            out.refusals.append(bad)
            continue
        value = typed if nargs in ("+", "*") or isinstance(nargs, int) else (typed[0] if typed else None)
        where = values[0] if values else w
        out.given[dest] = Given(dest, value, name, where.line, where.col, w.line, w.col)
    return out


class _Attached:
    """The ``value`` of ``--flag=value``, positioned after the ``=``."""

    def __init__(self, text: str, word, offset: int):
        self.text = text
        self.line = word.line
        self.col = word.col + offset
        self.raw = word.raw
        self.unknown = word.unknown
        self.splat = False

    def known(self) -> bool:
        return self.unknown is None


def _is_option(word) -> bool:
    """argparse's 'O' for a word: starts with '-', is not a negative number, has no space."""
    t = word.text
    return word.known() and t.startswith("-") and len(t) > 1 and not _NEGATIVE.match(t) and " " not in t


def _take(words: list, i: int, nargs) -> tuple:
    """The value words after an option at ``i`` (argparse consumes 'A' words only)."""
    n = len(words)
    if nargs in (None, "?") or isinstance(nargs, int):
        want = 1 if nargs in (None, "?") else nargs
        out = []
        while i < n and len(out) < want and not _is_option(words[i]):
            out.append(words[i])  # a word the script does not determine is taken as the value, unknown
            i += 1
        if nargs == "?" and not out:
            return [], i
        return out, i
    out = []
    while i < n and not _is_option(words[i]):
        out.append(words[i])
        i += 1
    return out, i


def _count_problem(name: str, nargs, got: int) -> str | None:
    if nargs is None and got != 1:
        return f"argument {name}: expected one argument"
    if nargs == "+" and got < 1:
        return f"argument {name}: expected at least one argument"
    if isinstance(nargs, int) and got != nargs:
        return f"argument {name}: expected {nargs} arguments"
    return None


def _convert(entry: dict, word, name: str):
    """The value argparse stores for one word: its type applied, its choices checked."""
    if not word.known():
        return Unknown(word.unknown or "a word the script does not determine")
    text = word.text
    kind = entry["type"]
    try:
        if kind == "int":
            value: Any = int(text)
        elif kind == "float":
            value = float(text)
        elif kind == "bool":
            value = bool(text)  # argparse calls bool("False"): True for any non-empty word
        else:
            value = text        # str, or a converter meshlint does not evaluate (kept as written)
    except ValueError:
        return Refusal(f"argument {name}: invalid {kind} value: {text!r}", word.line, word.col)
    choices = entry.get("choices")
    if choices is not None and kind in (None, "str", "int", "float") and value not in choices:
        shown = ", ".join(repr(c) for c in choices)
        return Refusal(f"argument {name}: invalid choice: {value!r} (choose from {shown})", word.line, word.col)
    return value
