"""A safe evaluator of the Python expressions Megatron's generated check tables hold (ML982, ML983).

It evaluates literals, names and attributes (through a callback), and/or/not with Python's short circuit,
comparisons (``in``, ``is``), arithmetic, conditional expressions, ``any``/``all`` over a generator, one-loop
list comprehensions, set and dict displays, subscripts by a str or int, and a few pure builtins (len, int, bool,
set, isinstance on builtin types, min, max, sum, abs).
A name ``S__<qualified name>`` is an identity token (Symbol): an enum member or a function of the release that
the generator resolved (``CudaGraphScope.moe``, ``F.gelu``, ``torch.bfloat16`` as S__torch__dtype__bfloat16); tokens are equal only to themselves, and
``isinstance(x, S__<enum class>)`` holds for the class's members.
Anything else, a value the callback cannot give, or an operation that fails raises Undecided: never a guess.
"""

from __future__ import annotations

import ast
import operator


class Undecided(Exception):
    """The expression cannot be decided from these values."""


SYMBOL = "S__"


class Symbol:
    """An object of the release that compares by identity (an enum member, a function), by its qualified name."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Symbol) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return self.name[len(SYMBOL):].replace("__", ".")

    def member_of(self, cls: str) -> bool:
        return self.name.rpartition("__")[0] == cls


_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_TYPES = {"list": list, "str": str, "int": int, "float": float, "bool": bool, "tuple": tuple, "dict": dict}
_CALLS = {"len": len, "int": int, "bool": bool, "min": min, "max": max, "sum": sum, "abs": abs, "set": frozenset}
BUILTINS = frozenset(_CALLS) | frozenset(_TYPES) | {"isinstance", "any", "all"}
_ALLOWED = " allowed"  # the scope's entry holding the builtins it may call (no Python name has a space)


def evaluate(node: ast.AST, read, scope: dict | None = None, allowed: frozenset = BUILTINS):
    """The value of ``node``; ``read(node)`` gives a Name's or an Attribute's value or raises Undecided
    (names bound by a generator expression are looked up in ``scope`` first); ``allowed``: the builtins
    it may call."""
    if scope is None or _ALLOWED not in scope:
        scope = dict(scope or {}, **{_ALLOWED: allowed})
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id.startswith(SYMBOL):
        return Symbol(node.id)
    if isinstance(node, ast.Name) and node.id in scope:
        return scope[node.id]
    if isinstance(node, (ast.Name, ast.Attribute)):
        return read(node)
    if isinstance(node, ast.BoolOp):  # Python's short circuit: an operand not reached is not read
        value = None
        for operand in node.values:
            value = evaluate(operand, read, scope)
            if (not value) if isinstance(node.op, ast.And) else value:
                return value
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        value = evaluate(node.operand, read, scope)
        return (not value) if isinstance(node.op, ast.Not) else _apply(operator.neg, value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _apply(_BIN[type(node.op)], evaluate(node.left, read, scope), evaluate(node.right, read, scope))
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, read, scope)
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in _CMP:
                raise Undecided(ast.unparse(node))
            right = evaluate(right_node, read, scope)
            if not _apply(_CMP[type(op)], left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return evaluate(node.body if evaluate(node.test, read, scope) else node.orelse, read, scope)
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [evaluate(e, read, scope) for e in node.elts]
        return values if isinstance(node, ast.List) else tuple(values)
    if isinstance(node, ast.ListComp):
        return [value for value in _generate(node, read, scope)]
    if isinstance(node, ast.Dict) and None not in node.keys:
        return _apply(dict, [(evaluate(k, read, scope), evaluate(v, read, scope)) for k, v in zip(node.keys, node.values)])
    if isinstance(node, ast.Set):
        return _apply(frozenset, [evaluate(e, read, scope) for e in node.elts])
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id.startswith(SYMBOL):
        member = evaluate(node.slice, read, scope)  # Cls[name]: the enum's member by name (the caller checks it is one)
        if not (isinstance(member, str) and member.isidentifier()):
            raise Undecided(ast.unparse(node))
        return Symbol(f"{node.value.id}__{member}")
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        key = evaluate(node.slice, read, scope)
        if not isinstance(key, (str, int, Symbol)) or isinstance(key, bool):
            raise Undecided(ast.unparse(node))
        return _apply(operator.getitem, evaluate(node.value, read, scope), key)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords \
            and node.func.id not in scope and node.func.id in scope[_ALLOWED]:
        return _call(node, read, scope)
    raise Undecided(ast.unparse(node))


def _generate(gen, read, scope: dict):
    """The values of a one-loop generator expression or list comprehension, lazily (an element not reached is
    never evaluated: over an empty list, none is)."""
    comp = gen.generators[0] if len(gen.generators) == 1 else None
    if comp is None or comp.ifs or comp.is_async or not isinstance(comp.target, ast.Name):
        raise Undecided(ast.unparse(gen))
    items = evaluate(comp.iter, read, scope)
    if not isinstance(items, (list, tuple)):
        raise Undecided(ast.unparse(gen))
    return (evaluate(gen.elt, read, {**scope, comp.target.id: item}) for item in items)


def _call(node: ast.Call, read, scope: dict):
    name, args = node.func.id, node.args
    if name in ("any", "all") and len(args) == 1 and isinstance(args[0], ast.GeneratorExp):
        values = _generate(args[0], read, scope)
        return any(values) if name == "any" else all(values)
    if name in ("any", "all") and len(args) == 1:
        return _apply(any if name == "any" else all, evaluate(args[0], read, scope))
    if name == "isinstance" and len(args) == 2:
        kinds = args[1].elts if isinstance(args[1], ast.Tuple) else [args[1]]
        if not all(isinstance(k, ast.Name) and (k.id in _TYPES or k.id.startswith(SYMBOL)) for k in kinds):
            raise Undecided(ast.unparse(node))
        value = evaluate(args[0], read, scope)
        if isinstance(value, Symbol):  # a token is an instance of its enum class only (no builtin type)
            return any(k.id.startswith(SYMBOL) and value.member_of(k.id) for k in kinds)
        return isinstance(value, tuple(_TYPES[k.id] for k in kinds if k.id in _TYPES))
    if name in _CALLS:
        return _apply(_CALLS[name], *(evaluate(a, read, scope) for a in args))
    raise Undecided(ast.unparse(node))


def _apply(fn, *values):
    try:
        return fn(*values)
    except Exception as e:  # a TypeError or ZeroDivisionError here is Megatron's crash, not this refusal
        raise Undecided(str(e)) from None
