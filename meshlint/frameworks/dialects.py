"""Config dialects: which framework reads a file, decided by its sections (``DIALECTS``: name -> dialect module)."""

from __future__ import annotations

import importlib

from meshlint.errors import InputError
from meshlint.frameworks.registry import FRAMEWORKS

DIALECTS = {f.name: importlib.import_module(f.module) for f in FRAMEWORKS if f.module}  # name -> dialect module
NAMES = tuple(DIALECTS)


def detect(data: dict) -> str | None:
    """The dialect whose identifying section the file has; None when it has none.

    A file with sections of two dialects is an error, not a guess.
    """
    found = [name for name, module in DIALECTS.items() if getattr(module, "TOML", True) and module.SECTION in data]
    if len(found) > 1:
        sections = " and ".join(f"[{DIALECTS[n].SECTION}] ({n})" for n in found)
        raise InputError("ML004", f"file has both {sections} sections; cannot tell which framework reads it",
                         help="split it into one file per framework, or pass --dialect to choose")
    return found[0] if found else None
