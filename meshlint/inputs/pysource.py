"""A torchtitan config function read statically, shaped like ``meshlint.inputs.source.Source``.

``PySource`` duck-types ``Source`` so the TOML pipeline (dialect -> Spec -> rules ->
reports) runs unchanged on a ``config_registry.py::function``: ``data`` holds the
literal values the function sets, ``locate`` points into the Python file, and
``unknown`` lists what could not be followed (never guessed).
"""

from __future__ import annotations

import os
from typing import NamedTuple


_MISSING = object()


class Unknown(NamedTuple):
    """A value (or a whole subtree) the static reader could not follow, and where."""

    reason: str
    line: int
    col: int
    file: str


_SPLIT: dict = {}


def _split(key: str) -> tuple:
    # ``a.b[1].c`` -> ("a", "b", 1, "c"); the same spelling Source uses. The keys asked are the dialect's
    # few dozen, asked for every config: split once (bounded, for a long-lived process)
    hit = _SPLIT.get(key)
    if hit is None:
        from meshlint.inputs.source import split_key

        if len(_SPLIT) > 4096:
            _SPLIT.clear()
        hit = _SPLIT[key] = split_key(key)
    return hit


def _dotted(path: tuple) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


class PySource:
    """One config function of a registry file, read without running it."""

    def __init__(self, *, file: str, function: str, text: str, data: dict, unknown: dict,
                 positions: dict, comments: list, def_line: int, def_col: int,
                 nested_under: str | None = None, types: dict | None = None,
                 model_module: str | None = None, outer: dict | None = None,
                 derived_from: list | None = None, calls: dict | None = None):
        self.file = file                  # the .py path as given
        self.function = function
        self.path = f"{file}::{function}"  # display name
        self.name = os.path.basename(file)
        self.text = text
        self.data = data                  # nested plain dicts of literals, dataclass field names
        self.unknown = unknown            # dotted path ("" = everything) -> Unknown
        self.positions = positions        # dotted path -> (line, col) where it is set
        self.comments = comments          # (line, col, text after '#')
        self.def_line = def_line
        self.def_col = def_col
        self.nested_under = nested_under  # "trainer" for RL configs (Controller.Config.trainer)
        self.types = types or {}          # dotted path -> class as written ("FullAC.Config")
        self.model_module = model_module  # dotted package model_registry came from
        self.outer = outer                # RL: the controller-level values around the trainer
        self.derived_from = derived_from or []  # ("file::function", line) of derivations, in order
        self.calls = calls or {}          # dotted path -> a framework call recorded for the rules, not run
        #                                   (model.converters[0].fqns = nvfp4_bf16_tail_fqns(...): {function,
        #                                   num_layers | layers_of {name, flavor}, bf16_tail_fraction, line, col})

    def __repr__(self) -> str:
        return f"PySource({self.path!r}, unknown={sorted(self.unknown)!r})"

    # -- lookups (walk ``data`` each time: launch overrides replace it after reading) --------
    def _lookup(self, parts: tuple):
        node = self.data
        for part in parts:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
                node = node[part]
            else:
                return _MISSING
        return node

    def has_key(self, key: str) -> bool:
        """Set explicitly, by this function or by what it derives from."""
        if not key:
            return bool(self.data)
        return self._lookup(_split(key)) is not _MISSING

    def unknown_of(self, key: str) -> Unknown | None:
        """The Unknown covering dotted path ``key``, or None when it is known or defaulted.

        Walking up from ``key``: an Unknown recorded there covers it; a value set there
        (a leaf, or a sub-config built in full, whose unset fields are defaulted) means known.
        """
        if not self.unknown:
            return None  # the common case: everything the function wrote was read
        parts = _split(key) if key else ()
        for cut in range(len(parts), -1, -1):
            path = _dotted(parts[:cut])
            if path in self.unknown:
                return self.unknown[path]
            if cut and self._lookup(parts[:cut]) is not _MISSING:
                return None
        return None

    def locate(self, key) -> tuple[int, int]:
        """Line and column where ``key`` is set; same contract as ``Source.locate``.

        A value set in another function (derivation, helper) points at the call in
        this function; a defaulted key at the nearest enclosing sub-config that is
        set, else at the covering Unknown, else at the function's ``def``.
        """
        if not key:
            return (self.def_line, self.def_col)
        if isinstance(key, str) and key.startswith("#L") and key[2:].isdigit():
            return (int(key[2:]), 1)
        if isinstance(key, str) and "|" in key:
            options = [k.strip() for k in key.split("|") if k.strip()]
            key = next((k for k in options if self.has_key(k)), options[0] if options else "")
            if not key:
                return (self.def_line, self.def_col)
        parts = _split(key) if isinstance(key, str) else tuple(key)
        for cut in range(len(parts), 0, -1):
            pos = self.positions.get(_dotted(parts[:cut]))
            if pos:
                return pos
        unknown = self.unknown_of(_dotted(parts))
        if unknown is not None and unknown.file == self.file and unknown.line > 0:
            return (unknown.line, unknown.col)
        return (self.def_line, self.def_col)
