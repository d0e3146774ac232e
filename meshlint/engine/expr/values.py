"""What an evaluation works on: scopes (``Env``), its budget, and the checked operations on values.

The interpreter's closures (``interp``) and the rules compiled to Python ahead of time (``compiler``)
both call these, so the two agree on every type check, bound, charge and error message.
"""

from __future__ import annotations

import math

from meshlint.engine.expr.errors import EvalError, Missing, NeedFact
from meshlint.limits import (MAX_EXPR_INT_BITS, MAX_EXPR_LIST, MAX_EXPR_STR, MAX_LET_DEPTH, MAX_RULE_MEMORY,
                             MAX_RULE_STEPS, MAX_VALUE_DEPTH)

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs a first run ~17 M instructions
    from typing import Any

MAX_INT = 2**MAX_EXPR_INT_BITS
MAX_STR = MAX_EXPR_STR
MAX_LIST = MAX_EXPR_LIST
DEFAULT_BUDGET = MAX_RULE_STEPS


# --------------------------------------------------------------------------- evaluation

class Budget:
    """What one evaluation may still spend; shared by every scope of it.

    ``left``: steps (AST nodes run, plus items walked by functions, comparisons
    and loops); ``mem``: characters of strings plus items of lists built;
    ``lets``: how many ``let`` evaluations are under way inside each other.
    """

    __slots__ = ("left", "mem", "lets")

    def __init__(self, steps: int, memory: int = MAX_RULE_MEMORY):
        self.left = steps
        self.mem = memory
        self.lets = 0


class Env:
    """Name lookup for evaluation: facts, lazily evaluated ``let`` bindings, loop variables.

    Loop scopes chain to their parent instead of copying it, and every scope
    shares one Budget, so a rule's ``let`` bindings and comprehensions count
    against the same step limit as its check.
    """

    __slots__ = ("values", "lets", "budget", "parent", "let_cache", "let_active", "let_replay", "loop")

    def __init__(self, values: dict[str, Any], lets: dict | None = None,
                 budget: Budget | int = DEFAULT_BUDGET, parent: "Env | None" = None):
        self.values = values
        self.lets = lets or _NO_LETS
        self.budget = budget if budget.__class__ is Budget else Budget(budget)
        self.parent = parent
        self.let_cache: dict[str, Any] | None = None
        self.let_active: set[str] | None = None
        # in the scope that holds the lets: name -> what evaluating that let from an empty cache did in a loop's scope
        # (made empty, rebound per item, its let cache emptied each time), for each later scope asking with an empty
        # cache where no scope on the way binds a name the let reads (see _let)
        self.let_replay: dict | None = None
        self.loop = not values

    def child(self, extra: dict[str, Any]) -> "Env":
        return Env(extra, None, self.budget, self)

    def lookup(self, name: str) -> Any:
        values = self.values  # this scope first, outside the loop: most names are found here or one scope up
        if name in values:
            return values[name]
        if name in self.lets:
            return self._let(name, self)
        env: Env | None = self.parent
        while env is not None:
            values = env.values
            if name in values:
                return values[name]
            if name in env.lets:
                return self._let(name, env)
            env = env.parent
        raise EvalError(f"unknown name {name!r}")

    def _let(self, name: str, owner: "Env") -> Any:  # owner: the scope whose lets hold ``name``
        # Evaluated in the asking scope (a let may read a loop's ``item``), cached there.
        definition = owner.lets[name]
        fresh = self.let_cache is None
        if fresh:
            replay = owner.let_replay
            if replay is not None:
                done = replay.get(name)
                if done is not None and _reads_none_below(self, owner, done[5]) and _replayed(self, done):
                    return done[0]
            self.let_cache, self.let_active = {}, set()
        elif name in self.let_cache:
            return self.let_cache[name]
        if name in self.let_active:
            raise EvalError(f"'let' binding {name!r} refers to itself")
        budget = self.budget
        if budget.lets >= MAX_LET_DEPTH:
            raise EvalError(f"'let' bindings chained more than {MAX_LET_DEPTH} deep (at {name!r})")
        budget.lets += 1
        self.let_active.add(name)
        left, mem = budget.left, budget.mem
        try:
            value = definition.evaluate(self)
        finally:
            self.let_active.discard(name)
            budget.lets -= 1
        self.let_cache[name] = value
        if fresh and self.loop:
            reads = _reads(name, owner.lets)
            if reads is not None and _reads_none_below(self, owner, reads):
                if owner.let_replay is None:
                    owner.let_replay = {}
                owner.let_replay[name] = (value, left - budget.left, mem - budget.mem, budget.lets,
                                          dict(self.let_cache), reads)
        return value


_NO_LETS: dict = {}


def _reads_none_below(env: Env, owner: Env, reads: frozenset) -> bool:
    """Whether no scope from ``env`` up to (not including) ``owner`` binds a name of ``reads``: then every name the
    let reads is found where it would be from ``owner`` itself (only the scope of a rule holds lets)."""
    while env is not owner:
        if not reads.isdisjoint(env.values):
            return False
        env = env.parent
    return True


def _replayed(env: Env, done: tuple) -> bool:
    """Give a scope, its let cache empty, what evaluating a let that reads no name bound below its rule's scope did
    before in a loop's scope, also from an empty cache: the same value, the same lets cached on the way, the same
    steps and memory charged. The evaluation would run exactly as then (the same names found, the same empty cache,
    the same let depth); the budget only ever shrinks, so where it covers the whole charge no step of it could
    have run out. Otherwise it is evaluated."""
    value, steps, mem, depth, cached, _reads = done
    budget = env.budget
    if budget.lets != depth or budget.left < steps or budget.mem < mem:
        return False
    budget.left -= steps
    budget.mem -= mem
    env.let_cache, env.let_active = dict(cached), set()
    return True


_READS: dict = {}  # (id of a lets table, name) -> (the table, every name its evaluation may read)


def _reads(name: str, lets: dict) -> frozenset | None:
    """The names evaluating let ``name`` of ``lets`` may read: its own, and those of the lets it reads, all the way
    (None: not known)."""
    hit = _READS.get((id(lets), name))
    if hit is not None and hit[0] is lets:
        return hit[1]
    out: set = set()
    seen, stack = set(), [name]
    try:
        while stack:
            n = stack.pop()
            if n in seen or n not in lets:
                continue
            seen.add(n)
            names = lets[n].free_names()
            out |= names
            stack.extend(names)
    except Exception:  # noqa: BLE001 - a tree that cannot be rebuilt: not known (never replayed)
        out = None
    if len(_READS) >= 4096:  # a long-lived process loads many rule lists: keep the cache bounded
        _READS.clear()
    found = None if out is None else frozenset(out)
    _READS[(id(lets), name)] = (lets, found)
    return found


def _need(v: Any) -> Any:
    if v is None:
        raise NeedFact("null")
    if isinstance(v, Missing):
        raise NeedFact(v.path)
    return v


def _check_value(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        if -MAX_INT <= v <= MAX_INT:
            return v
        raise EvalError("integer out of bounds (|x| > 2**256)")
    if isinstance(v, float):
        if math.isfinite(v):
            return v
        raise EvalError("arithmetic produced a non-finite number")
    if isinstance(v, str):
        if len(v) > MAX_STR:
            raise EvalError(f"string longer than {MAX_STR} characters")
    elif isinstance(v, list) and len(v) > MAX_LIST:
        raise EvalError(f"list longer than {MAX_LIST} items")
    return v


def _num(v: Any, op: str) -> Any:
    v = _need(v)
    if isinstance(v, (int, float)):
        return v
    raise EvalError(f"operator {op!r} needs numbers, got {type_name(v)}")


def _int(v: Any, what: str) -> int:
    v = _need(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise EvalError(f"{what} needs an integer, got {type_name(v)}")
    return v


def type_name(v: Any) -> str:
    if v is None or isinstance(v, Missing):
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "table"
    return "unknown"


def _charge(env: "Env", n: int) -> None:
    budget = env.budget
    budget.left -= n
    if budget.left < 0:
        raise EvalError(f"step budget exceeded ({MAX_RULE_STEPS:,} steps per rule and config)")


def _charge_mem(env: "Env", n: int) -> None:
    budget = env.budget
    budget.mem -= n
    if budget.mem < 0:
        raise EvalError(f"memory budget exceeded ({MAX_RULE_MEMORY:,} characters and list items per rule and config)")


def _charge_operands(env: "Env", a: Any, b: Any) -> None:
    """Comparing or searching containers walks them: charge what will be walked.

    A scalar looked up in a list costs one comparison per item; two containers
    compared (or a container looked up in one) walk everything nested in them,
    which Python does in C where no budget sees it, so it is charged first.
    """
    ca, cb = a.__class__, b.__class__
    if cb is list or cb is dict:
        if ca is list or ca is dict:
            cap = env.budget.left + 1
            _charge(env, _deep_size(a, cap) + _deep_size(b, cap))
        else:
            _charge(env, len(b))
    elif cb is str and len(b) > 64:
        _charge(env, len(b) >> 6)


def _deep_size(v: Any, cap: int) -> int:
    """Items in ``v`` and everything inside it (each shared reference counted again), up to ``cap``.

    Also refuses values nested deeper than MAX_VALUE_DEPTH, before Python's own
    recursive comparison or printing would hit its recursion limit.
    """
    total, stack = 0, [(v, 0)]
    while stack:
        node, level = stack.pop()
        if level > MAX_VALUE_DEPTH:
            raise EvalError(f"value nested deeper than {MAX_VALUE_DEPTH} levels")
        items = node.values() if node.__class__ is dict else node
        total += len(node)
        if total > cap:
            return total
        stack.extend((x, level + 1) for x in items if x.__class__ is list or x.__class__ is dict)
    return total


def _binop(op: str, a: Any, b: Any, env: "Env") -> Any:
    if op == "+":
        if isinstance(a, str) and isinstance(b, str):
            size = len(a) + len(b)
            if size > MAX_STR:  # checked before the copy is made
                raise EvalError(f"string longer than {MAX_STR} characters")
            _charge_mem(env, size)
            return a + b
        if isinstance(a, list) and isinstance(b, list):
            size = len(a) + len(b)
            if size > MAX_LIST:
                raise EvalError(f"list longer than {MAX_LIST} items")
            _charge(env, size)
            _charge_mem(env, size)
            return a + b
    a, b = _num(a, op), _num(b, op)
    try:
        return _arith(op, a, b)
    except (ArithmeticError, ValueError):  # float overflow, an int too large for a float, 0.0 ** -1
        raise EvalError(f"arithmetic overflow or undefined result in {op!r}") from None


def _arith(op: str, a: Any, b: Any) -> Any:
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif op in ("/", "//", "%"):
        if b == 0:
            raise EvalError("division by zero")
        r = a / b if op == "/" else (a // b if op == "//" else a % b)
    else:  # "**"
        if isinstance(b, int) and isinstance(a, int) and not isinstance(b, bool):
            if b < 0:
                raise EvalError("negative integer exponent")
            if a not in (0, 1, -1) and b * max(abs(a).bit_length(), 1) > 256:
                raise EvalError("integer out of bounds (|x| > 2**256)")
        elif abs(b) > 1024:
            raise EvalError("exponent too large")
        r = a**b
        if isinstance(r, complex):
            raise EvalError("a negative number to a fractional power")
    return _check_value(r)


def _truth(v: Any) -> bool:
    if isinstance(v, Missing):
        raise NeedFact(v.path)
    return bool(v)


def _is_null(v: Any) -> bool:
    return v is None or isinstance(v, Missing)


_FAST_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
                 "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _compare(op: str, a: Any, b: Any) -> bool:
    ta, tb = a.__class__, b.__class__
    if (ta is tb and (ta is int or ta is str)) and op in _FAST_COMPARE:
        return _FAST_COMPARE[op](a, b)  # the common case: two ints or two strings
    if op == "==" or op == "!=":
        # An unknown fact compared with a value is itself unknown: only the
        # literal ``null`` tests for "is unknown" (``world_size == null``).
        # (Missing and bool have no subclasses: their class tells what isinstance would.)
        if ta is Missing:
            if b is not None:
                raise NeedFact(a.path)
        elif tb is Missing and a is not None:
            raise NeedFact(b.path)
        a_null, b_null = a is None or ta is Missing, b is None or tb is Missing
        if a_null or b_null:
            same = a_null and b_null
        elif (ta is bool) != (tb is bool):
            same = False
        else:
            same = a == b
        return same if op == "==" else not same
    if a is None or ta is Missing or b is None or tb is Missing:
        a, b = _need(a), _need(b)
    if tb is list and (op == "in" or op == "not in"):  # the usual 'in': a value in a list
        return (a in b) if op == "in" else (a not in b)
    if op in ("in", "not in"):
        if isinstance(b, dict) and isinstance(a, (list, dict)):
            raise EvalError("a list or table is never a key of a table")
        if isinstance(b, (list, dict)):
            found = a in b
        elif isinstance(b, str) and isinstance(a, str):
            found = a in b
        else:
            raise EvalError(f"'in' needs a list, table or string on the right, got {type_name(b)}")
        return found if op == "in" else not found
    numeric = (int, float)
    if not ((isinstance(a, numeric) and isinstance(b, numeric)) or (isinstance(a, str) and isinstance(b, str))):
        raise EvalError(f"cannot order {type_name(a)} and {type_name(b)} with {op!r}")
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


# The operations below are each node's work once its operands are known: the interpreter's closures
# and the compiled rules (``compiler``) both end in them.

def attr_value(obj: Any, attr: str, path: str) -> Any:
    """``obj.attr``; ``path`` names the fact for an unknown (null) value."""
    if isinstance(obj, dict):
        if attr not in obj:
            raise EvalError(f"no field {attr!r} (fields: {', '.join(sorted(obj))})")
        value = dict.__getitem__(obj, attr)  # a table that fills itself on first read has done so for ``in``
        return Missing(path) if value is None else value
    if isinstance(obj, Missing):
        raise NeedFact(obj.path)
    raise EvalError(f"cannot read field {attr!r} of a {type_name(obj)}")


def index_value(obj: Any, idx: Any, base: str) -> Any:
    """``obj[idx]`` of two known values; ``base`` names ``obj`` for an unknown (null) item."""
    if obj.__class__ is list and idx.__class__ is int and -len(obj) <= idx < len(obj):  # the usual case
        value = obj[idx]
        return Missing(f"{base}[{idx!r}]") if value is None else value
    if isinstance(obj, list):
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise EvalError("list index must be an integer")
        if not -len(obj) <= idx < len(obj):
            raise EvalError(f"list index {idx} out of range (length {len(obj)})")
        value = obj[idx]
    elif isinstance(obj, dict):
        if not isinstance(idx, str):
            raise EvalError("table key must be a string")
        if idx not in obj:
            raise EvalError(f"no key {idx!r}")
        value = obj[idx]
    else:
        raise EvalError(f"cannot index a {type_name(obj)}")
    return Missing(f"{base}[{idx!r}]") if value is None else value


def call_value(env: "Env", fn, cost, null_ok: bool, args: list) -> Any:
    """A whitelisted function called on its evaluated arguments, charged by its cost and what it built."""
    if not null_ok:
        for a in args:
            if a is None or a.__class__ is Missing:
                _need(a)
    budget = env.budget
    budget.left -= cost(args)
    if budget.left < 0:
        _charge(env, 0)  # raises
    result = fn(*args)
    cls = result.__class__
    if cls is str or cls is list:  # what a function built counts against the memory budget (_check_value first)
        n = len(result)
        if n > (MAX_STR if cls is str else MAX_LIST):
            _check_value(result)  # raises
        budget.mem -= n
        if budget.mem < 0:
            _charge_mem(env, 0)  # raises
    elif cls is not bool and cls is not int:
        result = _check_value(result)
    elif cls is int and not -MAX_INT <= result <= MAX_INT:
        _check_value(result)  # raises
    return result


def loop_items(iterable: Any) -> list:
    """What a comprehension loops over: a known list."""
    iterable = _need(iterable)
    if not isinstance(iterable, list):
        raise EvalError(f"cannot loop over a {type_name(iterable)}")
    return iterable
