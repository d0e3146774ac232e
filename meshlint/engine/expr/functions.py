"""The functions an expression may call (``FUNCTIONS``: each with its arity, cost and doc) and ``render``,
the text form of a value in messages."""

from __future__ import annotations

import math

from meshlint.record import Record
from meshlint.engine.expr.errors import EvalError, Missing, NeedFact
from meshlint.engine.expr.values import (MAX_LIST, MAX_STR, _check_value, _deep_size, _int, _is_null, _need, _num,
                                         _truth, type_name)
from meshlint.limits import MAX_ROUND_DIGITS, MAX_VALUE_DEPTH

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs a first run ~17 M instructions
    from typing import Any, Callable
from meshlint.mesh.devmesh import compact_ranks  # `ranks()` in messages


# --------------------------------------------------------------------------- functions

class FuncSpec(Record):
    fn: Callable[..., Any]
    min_args: int
    max_args: int
    doc: str
    null_ok: bool = False
    cost: Callable[[list], int] = lambda args: 1


def _list_arg(v: Any, fname: str) -> list:
    if not isinstance(v, list):
        raise EvalError(f"{fname}() needs a list, got {type_name(v)}")
    for item in v:
        if item is None or item.__class__ is Missing:
            _need(item)  # raises
    return v


def _f_len(v):
    if isinstance(v, (list, str, dict)):
        return len(v)
    raise EvalError(f"len() needs a list, string or table, got {type_name(v)}")


def _f_prod(v):
    out = 1
    for x in _list_arg(v, "prod"):
        out = _check_value(out * _num(x, "prod"))
    return out


def _f_sum(v):
    out = 0
    for x in _list_arg(v, "sum"):
        out = _check_value(out + _num(x, "sum"))
    return out


def _f_minmax(fn):
    def inner(*args):
        values = _list_arg(args[0], fn.__name__) if len(args) == 1 else list(args)
        if not values:
            raise EvalError(f"{fn.__name__}() of an empty list")
        for v in values:
            _num(v, fn.__name__)
        return fn(values)

    return inner


def _f_divisors(n):
    n = _int(n, "divisors")
    if n < 1:
        raise EvalError("divisors() needs a positive integer")
    if n > 2**64:
        raise EvalError("divisors() argument too large")
    return divisors(n)


def divisors(n: int) -> list[int]:
    """Sorted divisors of a positive ``n`` (trial division to sqrt(n): 4,096 steps for the largest world); the
    rule language's ``divisors()`` and the layout search (engine/search/space.py) share it."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def _f_range(a, b=None):
    lo, hi = (0, _int(a, "range")) if b is None else (_int(a, "range"), _int(b, "range"))
    if hi - lo > MAX_LIST:
        raise EvalError(f"range() longer than {MAX_LIST} items")
    return list(range(lo, hi))


def _f_join(items, sep=", "):
    if not isinstance(sep, str):
        raise EvalError("join() separator must be a string")
    parts = [render(x) for x in _list_arg(items, "join")]
    if sum(map(len, parts)) + len(sep) * max(0, len(parts) - 1) > MAX_STR:  # before the join copies them
        raise EvalError(f"string longer than {MAX_STR} characters")
    return sep.join(parts)


def _f_gcd(a, b):
    return math.gcd(_int(a, "gcd"), _int(b, "gcd"))


def _f_lcm(a, b):
    a, b = _int(a, "lcm"), _int(b, "lcm")
    return abs(a * b) // math.gcd(a, b) if a and b else 0


def _f_coalesce(*args):
    for a in args:
        if not _is_null(a):
            return a
    raise NeedFact(next((a.path for a in args if isinstance(a, Missing)), "null"))


def _f_type(v):
    return type_name(v)


def _str_arg(v: Any, fname: str) -> str:
    if not isinstance(v, str):
        raise EvalError(f"{fname}() needs a string, got {type_name(v)}")
    return v


def _f_strip(v):
    return _str_arg(v, "strip").strip()


def _f_lower(v):
    return _str_arg(v, "lower").lower()


def _f_isdigit(v):
    return _str_arg(v, "isdigit").isdigit()


def _f_startswith(v, prefix):
    return _str_arg(v, "startswith").startswith(_str_arg(prefix, "startswith"))


def _f_str(v):
    return render(v)


def _f_int(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and not math.isfinite(v):
        raise EvalError(f"int() cannot convert {v!r}")
    if isinstance(v, (int, float)):
        return int(v)
    if isinstance(v, str):
        text = v.strip()
        if len(text) > 80:  # int() of a long digit string is slow, and past 4,300 digits refused
            raise EvalError("int() of a string longer than 80 characters")
        try:
            return int(text)
        except ValueError:
            raise EvalError(f"int() cannot convert {v!r}") from None
    raise EvalError(f"int() cannot convert a {type_name(v)}")


def _f_sorted(v):
    items = _list_arg(v, "sorted")
    # numbers or strings only: sorting lists compares them item by item, which no budget sees
    if not (all(isinstance(x, (int, float)) for x in items) or all(isinstance(x, str) for x in items)):
        raise EvalError("sorted() needs a list of numbers or of strings")
    return sorted(items)


def _f_round(x, nd=0):
    digits = _int(nd, "round")
    if abs(digits) > MAX_ROUND_DIGITS:  # round(1, -10**9) computes 10**(10**9)
        raise EvalError(f"round() digits must be within ±{MAX_ROUND_DIGITS}")
    return round(_num(x, "round"), digits)


def _f_percent(x, nd=1):
    digits = _int(nd, "percent")
    if not 0 <= digits <= MAX_ROUND_DIGITS:  # percent(0.5, 10**9) would print a billion digits
        raise EvalError(f"percent() digits must be from 0 to {MAX_ROUND_DIGITS}")
    return f"{_num(x, 'percent') * 100:.{digits}f}%"


def _f_plural(n, word, plural=None):
    n = _int(n, "plural")
    if not isinstance(word, str):
        raise EvalError("plural() needs a word")
    form = word if n == 1 else (plural if isinstance(plural, str) else word + "s")
    return f"{n} {form}"


def _f_ranks(v):
    """Compact rendering of a rank list: [0,1,2,3,8] -> '{0-3, 8}'."""
    items = [_int(x, "ranks") for x in _list_arg(v, "ranks")]
    return "{" + compact_ranks(items) + "}"


def _f_keys(v):
    if not isinstance(v, dict):
        raise EvalError(f"keys() needs a table, got {type_name(v)}")
    return list(v)


def _f_any(v):
    if not v:
        return False
    for x in _list_arg(v, "any"):  # every item known (checked first), then the first true one ends it
        if x is True or (x.__class__ is not bool and _truth(x)):
            return True
    return False


def _f_all(v):
    for x in _list_arg(v, "all"):
        if x is False or (x.__class__ is not bool and not _truth(x)):
            return False
    return True


def _cost_n(args) -> int:
    n = args[0] if args and isinstance(args[0], int) and not isinstance(args[0], bool) else 1
    return max(1, math.isqrt(max(n, 0)))


def _cost_len(args) -> int:
    n = 0
    for a in args:  # a loop, not sum() over a generator: this runs for most calls of a check
        cls = a.__class__
        if cls is list or cls is str or cls is dict or isinstance(a, (list, str, dict)):
            n += len(a)
    return n if n > 1 else 1


def _cost_deep(args) -> int:
    """Rendering walks nested values: their whole size (capped where rendering stops anyway)."""
    return max(1, sum(_deep_size(a, MAX_STR + 1) for a in args if a.__class__ is list or a.__class__ is dict))


FUNCTIONS: dict[str, FuncSpec] = {
    "len": FuncSpec(_f_len, 1, 1, "number of items of a list, string or table", cost=_cost_len),
    "prod": FuncSpec(_f_prod, 1, 1, "product of a list of numbers (1 for an empty list)", cost=_cost_len),
    "sum": FuncSpec(_f_sum, 1, 1, "sum of a list of numbers", cost=_cost_len),
    "min": FuncSpec(_f_minmax(min), 1, 8, "smallest of a list, or of several arguments", cost=_cost_len),
    "max": FuncSpec(_f_minmax(max), 1, 8, "largest of a list, or of several arguments", cost=_cost_len),
    "abs": FuncSpec(lambda x: abs(_num(x, "abs")), 1, 1, "absolute value"),
    "divisors": FuncSpec(_f_divisors, 1, 1, "ascending divisors of a positive integer", cost=_cost_n),
    "range": FuncSpec(_f_range, 1, 2, "integers lo..hi-1, like Python's range",
                      cost=lambda a: max(1, (a[-1] if isinstance(a[-1], int) else 1) - (a[0] if len(a) == 2 and isinstance(a[0], int) else 0))),
    "gcd": FuncSpec(_f_gcd, 2, 2, "greatest common divisor"),
    "lcm": FuncSpec(_f_lcm, 2, 2, "least common multiple"),
    "join": FuncSpec(_f_join, 1, 2, "join list items as text with a separator (default ', ')", cost=_cost_deep),
    "str": FuncSpec(_f_str, 1, 1, "text form of a value", null_ok=True, cost=_cost_deep),
    "int": FuncSpec(_f_int, 1, 1, "integer from a number, bool or numeric string"),
    "sorted": FuncSpec(_f_sorted, 1, 1, "sorted copy of a list", cost=_cost_len),
    "round": FuncSpec(_f_round, 1, 2, "round a number to n digits"),
    "percent": FuncSpec(_f_percent, 1, 2, "format a fraction as a percentage, e.g. 0.25 -> '25.0%'"),
    "plural": FuncSpec(_f_plural, 2, 3, "'1 node' / '3 nodes'"),
    "ranks": FuncSpec(_f_ranks, 1, 1, "compact rank set, e.g. [0,1,2,3,8] -> '{0-3, 8}'", cost=_cost_len),
    "keys": FuncSpec(_f_keys, 1, 1, "the keys of a table, in order", cost=_cost_len),
    "any": FuncSpec(_f_any, 1, 1, "true if any item is true", cost=_cost_len),
    "all": FuncSpec(_f_all, 1, 1, "true if every item is true", cost=_cost_len),
    "coalesce": FuncSpec(_f_coalesce, 1, 8, "the first argument that is not null", null_ok=True),
    "type": FuncSpec(_f_type, 1, 1, "type name: int, float, bool, string, list, table or null", null_ok=True),
    "strip": FuncSpec(_f_strip, 1, 1, "a string without its leading and trailing whitespace", cost=_cost_len),
    "lower": FuncSpec(_f_lower, 1, 1, "a string in lower case", cost=_cost_len),
    "isdigit": FuncSpec(_f_isdigit, 1, 1, "true if a string is non-empty and all digits (Python's str.isdigit)",
                        cost=_cost_len),
    "startswith": FuncSpec(_f_startswith, 2, 2, "true if a string starts with the given prefix", cost=_cost_len),
}


# --------------------------------------------------------------------------- rendering and templates

def render(v: Any) -> str:
    """Text form of a value inside messages (at most MAX_STR characters, MAX_VALUE_DEPTH levels)."""
    if v is None or isinstance(v, Missing):
        return "unknown"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, dict)):
        out: list[str] = []
        _render_into(v, out, [MAX_STR], 0)
        return "".join(out)
    if isinstance(v, int) and v.bit_length() > 14_000:  # ~4,200 digits: Python refuses to print more
        raise EvalError("integer too large to print")
    return str(v)


def _render_into(v: Any, out: list, room: list, level: int) -> None:
    """Append the text of a list or table to ``out``, stopping as soon as ``room`` runs out."""
    if level > MAX_VALUE_DEPTH:
        raise EvalError(f"value nested deeper than {MAX_VALUE_DEPTH} levels")
    is_list = isinstance(v, list)
    _put(out, room, "(" if is_list else "{")
    for i, (k, x) in enumerate(enumerate(v) if is_list else v.items()):
        if i:
            _put(out, room, ", ")
        if not is_list:
            _put(out, room, f"{k} = ")
        if isinstance(x, str):
            _put(out, room, f'"{x}"')
        elif isinstance(x, (list, dict)):
            _render_into(x, out, room, level + 1)
        else:
            _put(out, room, render(x))
    _put(out, room, ("," if len(v) == 1 else "") + ")" if is_list else "}")


def _put(out: list, room: list, text: str) -> None:
    room[0] -= len(text)
    if room[0] < 0:
        raise EvalError(f"string longer than {MAX_STR} characters")
    out.append(text)
