"""Dotted config keys (``mesh.dims[1].size``): the one spelling every layer uses for a path into a config."""

from __future__ import annotations


def split_key(key: str) -> tuple:
    """``mesh.dims[1].size`` -> ``("mesh", "dims", 1, "size")``."""
    out: list = []
    for part in key.split("."):
        while "[" in part and part.endswith("]"):
            head, _, rest = part.partition("[")
            if head:
                out.append(head)
            index, _, part = rest.partition("]")
            out.append(int(index) if small_int(index.removeprefix("-")) else index)
            part = part
            if not part:
                break
        if part:
            out.append(part)
    return tuple(out)


def small_int(text: str) -> bool:
    """ASCII digits of a line number or an index (str.isdigit() also accepts '²', which int() refuses)."""
    return 0 < len(text) <= 18 and text.isascii() and text.isdigit()
