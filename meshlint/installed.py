"""What pip recorded when it installed meshlint from a wheel: its RECORD, every file with its SHA-256.

``pip install meshlint`` and pre-commit's ``pip install .`` write ``meshlint-VERSION.dist-info/RECORD``
beside the package. Two checks rest on it there, each for one read instead of a pass over ~400 files: the
results cache's code key (meshlint/cli/results_cache.py: an upgrade or a reinstall of other code is a new
key) and the prebuilt rules' staleness check (meshlint/engine/prebuilt.py: the rule files' and builders'
content, as pip hashed it, against the content they were generated from). A hand edit of the installed
files is seen by neither, as pip does not see it: edit a checkout installed with ``pip install -e``, which
has no RECORD beside its package and is checked file by file. Kept free of imports beyond ``os``: both checks
run on the start-up path.
"""

from __future__ import annotations

import os

from meshlint import __version__
from meshlint.fileread import read_regular

PACKAGE = os.path.dirname(os.path.realpath(__file__))  # the meshlint package, as installed
MOST_BYTES = 1 << 20  # a RECORD of meshlint's ~450 files is ~60 KB
_MEMO: list = []  # [(RECORD's bytes or None, its lines or None)] once read in this process


def record(package: str | None = None) -> bytes | None:
    """The RECORD of this install, or None: a source checkout or an editable install (no ``_rules`` inside the
    package, where a wheel puts the built-in rules), no dist-info of this version beside it, or a RECORD that
    does not list this package's ``__init__.py``."""
    if package is not None and package != PACKAGE:
        return _read(package)
    if not _MEMO:
        _MEMO.append([_read(PACKAGE), None])
    return _MEMO[0][0]


def lines() -> frozenset:
    """RECORD's lines (``path,sha256=...,size``, bytes), to ask whether it holds a file with a given content;
    empty without a RECORD."""
    record()
    if _MEMO[0][1] is None:
        _MEMO[0][1] = frozenset((_MEMO[0][0] or b"").splitlines())
    return _MEMO[0][1]


def _read(package: str) -> bytes | None:
    if not os.path.isdir(os.path.join(package, "_rules")):
        return None
    data = read_regular(os.path.join(os.path.dirname(package), f"meshlint-{__version__}.dist-info", "RECORD"), MOST_BYTES)
    if data is None or b"\nmeshlint/__init__.py,sha256=" not in b"\n" + data:
        return None
    return data
