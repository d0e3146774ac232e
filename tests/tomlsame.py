"""Shared by the fast TOML reader's tests and bench: its verdict on one text against tomllib's."""

from __future__ import annotations

import math
import tomllib

from meshlint import tomlfast


def same(a, b) -> bool:
    """Equal values of equal types, dict keys in the same order; floats by their bits (-0.0, NaN's sign)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is float:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b) and math.copysign(1, a) == math.copysign(1, b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def verdict(text: str) -> str:
    """'accepted' (the fast reader's table is tomllib's), 'declined', or what went wrong."""
    try:
        want = tomllib.loads(text)
    except ValueError:  # TOMLDecodeError, and an integer over Python's digit limit
        want = None
    got = tomlfast.loads(text)
    if got is None:
        return "declined"
    if want is None:
        return "WRONG: accepted what tomllib refuses"
    return "accepted" if same(got, want) else "WRONG: a different table"
