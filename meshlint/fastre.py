"""Compiled regular expressions without importing ``re``: the patterns the check path needs, precompiled.

Importing ``re`` (with the ``enum``, ``functools`` and ``collections`` it imports) and compiling the dozen
patterns a KempnerForge or torchtitan config is scanned with costs a first run ~33 M instructions, more
than checking four configs. ``re`` compiles a pattern in Python (``re._parser``, ``re._compiler``) into a
list of integers that the C module ``_sre`` runs; that list depends only on the pattern, its flags and the
interpreter's version. ``python -m meshlint.generate.fastre_compiled`` finds every ``fastre.compile`` call
with a literal pattern in meshlint's source and stores each one's compiled form, per interpreter version
(meshlint/fastre_compiled/), and ``compile`` here hands that to ``_sre.compile``, which checks the code
before it runs it. The result is the very object ``re.compile`` returns. Anything else (a pattern that is not
stored, an interpreter whose ``_sre`` is not the one the table was made with, a table that fails ``_sre``'s
check) is compiled by ``re`` itself. tests/test_fastre.py checks the tables against ``re`` and that they are
current.
"""

from __future__ import annotations

import sys

import _sre

from meshlint.modules import import_module

# re's flag values (re._constants: SRE_FLAG_*), for calls written without importing re
IGNORECASE = I = 2
MULTILINE = M = 8
DOTALL = S = 16
VERBOSE = X = 64
ASCII = A = 256

TABLE_PACKAGE = "meshlint.fastre_compiled"
_COMPILED: dict = {}
_TABLE: list = []  # [the table of this interpreter, or {}], loaded on first use


def compile(pattern: str, flags: int = 0):  # noqa: A001 - the name re users expect
    """``re.compile(pattern, flags)``: from the precompiled table when it holds the pattern, else by ``re``."""
    key = (pattern, flags)
    hit = _COMPILED.get(key)
    if hit is None:
        hit = _COMPILED[key] = _precompiled(pattern, flags) or _by_re(pattern, flags)
    return hit


def table_module() -> str:
    """The module holding this interpreter's table (``cpython-311`` -> ``meshlint.fastre_compiled.cpython_311``)."""
    return f"{TABLE_PACKAGE}.{sys.implementation.cache_tag or 'none'}".replace("-", "_")


def _precompiled(pattern: str, flags: int):
    entry = _table().get((pattern, flags))
    if entry is None:
        return None
    final_flags, code, groups, groupindex, indexgroup = entry
    try:
        return _sre.compile(pattern, final_flags, list(code), groups, dict(groupindex), indexgroup)
    except Exception:  # noqa: BLE001 - code _sre refuses (a damaged table): re compiles it
        return None


def _table() -> dict:
    if not _TABLE:
        table = {}
        name = table_module()
        try:
            module = import_module(name)
            if getattr(module, "MAGIC", None) == _sre.MAGIC and getattr(module, "CODESIZE", None) == _sre.CODESIZE:
                table = module.PATTERNS
        except Exception:  # noqa: BLE001 - no table for this interpreter (or an unreadable one): re compiles
            table = {}
        _TABLE.append(table)
    return _TABLE[0]


def _by_re(pattern: str, flags: int):
    import re

    return re.compile(pattern, flags)
