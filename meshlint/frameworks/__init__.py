"""Config dialects: which framework reads a file, decided by its sections."""

from __future__ import annotations

from meshlint.frameworks import accelerate
from meshlint.frameworks.kempnerforge import v5666d0d as kempnerforge
from meshlint.frameworks.native import dialect as native
from meshlint.frameworks.torchtitan import v0_2 as torchtitan
from meshlint.errors import InputError

DIALECTS = {m.NAME: m for m in (kempnerforge, torchtitan, native, accelerate)}
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
