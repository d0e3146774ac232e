"""The interpreter's frames and the small pure helpers its parts share (source text of a node, jumps,
arithmetic guards)."""

from __future__ import annotations

import ast
import math
import re

from meshlint.inputs.pyregistry.values import (ClassRef, _LITERAL, MAX_INT, MAX_ITEMS, MAX_SEQ,
    MAX_VALUE_DEPTH, Sym, U)
from meshlint.inputs.pyregistry.checkout import Module


# -----------------------------------------------------------------------------
class Frame:
    __slots__ = ("mod", "locals", "parent")

    def __init__(self, mod: Module, local: dict, parent: Frame | None = None):
        self.mod, self.locals, self.parent = mod, local, parent


_IN_PROGRESS = object()
_SENTINEL = (0, 0)


def _text(node, limit: int = 60) -> str:
    """Short source text of a name / attribute chain / call, for reasons (iterative, never deep)."""
    parts = []
    for _ in range(12):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            break
        elif isinstance(node, ast.Call):
            parts.append("()")
            node = node.func
        elif isinstance(node, ast.Subscript):
            parts.append("[...]")
            node = node.value
        else:
            parts.append("<expr>")
            break
    out = ""
    for part in reversed(parts):
        out += part if part in ("()", "[...]") or not out else "." + part
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _is_class_name(name: str) -> bool:
    return name[:1].isupper() and not name.isupper()


def _is_constant_name(name: str) -> bool:
    return name.isupper() or (name[:1] == "_" and name[1:].isupper())


def _literal_ok(v, depth: int = 0) -> bool:
    if isinstance(v, _LITERAL):
        return True
    if depth > MAX_VALUE_DEPTH:
        return False
    if isinstance(v, (list, tuple)):
        return all(_literal_ok(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(_literal_ok(x, depth + 1) for x in v.values())
    return False


def _display(value) -> str | None:
    if isinstance(value, Sym):
        return value.orig
    if isinstance(value, ClassRef):
        return value.display
    return None


def _root(expr):
    """The name an attribute / subscript chain starts from (``a`` of ``a.b[0].c``), or None."""
    for _ in range(64):
        if isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
                expr.func.attr in ("items", "values", "keys", "get", "copy"):
            expr = expr.func.value
        else:
            break
    return expr.id if isinstance(expr, ast.Name) else None


_PURE_METHODS = {"get", "items", "keys", "values", "copy", "index", "count", "startswith", "endswith", "split",
                 "rsplit", "strip", "lower", "upper", "format", "join", "replace", "traverse", "__contains__"}
_PURE_FUNCS = {"replace", "cast", "len", "isinstance", "issubclass", "getattr", "hasattr", "fields", "asdict",
               "dict", "list", "tuple", "set", "frozenset", "sorted", "min", "max", "sum", "any", "all", "zip",
               "enumerate", "str", "int", "float", "bool", "repr", "print", "type", "id", "deepcopy", "range",
               "reversed", "format", "iter", "next", "hash", "callable"}


class _Uncertain(Exception):
    """Control flow (return, break) depends on something unknown: the function's result is unknown."""

    def __init__(self, unknown: U):
        self.unknown = unknown


def _jump(stmts, loop_jumps: bool) -> str | None:
    """"return" (or "break"/"continue" leaving ``stmts``) found in them, outside nested defs."""
    stack = [(s, False) for s in stmts]
    while stack:
        node, in_loop = stack.pop()
        if isinstance(node, ast.Return):
            return "return"
        if isinstance(node, (ast.Break, ast.Continue)) and loop_jumps and not in_loop:
            return "break" if isinstance(node, ast.Break) else "continue"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        inner = in_loop or isinstance(node, (ast.For, ast.While, ast.AsyncFor))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) or isinstance(child, (ast.excepthandler, ast.match_case)):
                stack.append((child, inner))
    return None


class _Stop(Exception):
    def __init__(self, unknown: U):
        self.unknown = unknown


class _Raised:
    __slots__ = ("unknown",)

    def __init__(self, unknown: U):
        self.unknown = unknown


def _as_load(target):
    """An assignment target read as an expression (for augmented assignment)."""
    if isinstance(target, ast.Name):
        return ast.copy_location(ast.Name(target.id, ast.Load()), target)
    if isinstance(target, ast.Attribute):
        return ast.copy_location(ast.Attribute(target.value, target.attr, ast.Load()), target)
    if isinstance(target, ast.Subscript):
        return ast.copy_location(ast.Subscript(target.value, target.slice, ast.Load()), target)
    return target


def _only_raises(stmts) -> bool:
    """A branch whose only effect is to raise (docstrings, pass, asserts aside)."""
    if not stmts:
        return False
    for stmt in stmts[:-1]:
        if not isinstance(stmt, (ast.Pass, ast.Assert)) and not (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            return False
    return isinstance(stmts[-1], ast.Raise)


def _required(fdef) -> int:
    a = fdef.args
    positional = len(a.posonlyargs) + len(a.args)
    return positional - len(a.defaults) + sum(1 for d in a.kw_defaults if d is None)


_YIELD = re.compile(r"\byield\b")


def _is_generator(fdef, mod=None) -> bool:
    """Whether a function body yields (read from its text; a word in a string errs on the safe side)."""
    if mod is not None and getattr(fdef, "end_lineno", None):
        text = mod.line_slice(fdef.lineno, fdef.end_lineno)
        if not _YIELD.search(text):
            return False
    stack = list(fdef.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _arith_guard(op, a, b) -> str | None:
    """Why ``a op b`` is refused (too large to be a config value, or too costly), or None."""
    if isinstance(op, ast.Pow):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            if isinstance(b, int) and b > 0 and abs(a) > 1:
                if isinstance(a, int) and b * math.log2(abs(a)) > 62:
                    return f"exponent too large ({a} ** {b} exceeds {MAX_INT:.0e})"
                if isinstance(a, float) and b * math.log2(abs(a)) > 1000:
                    return "float exponent overflows"
            return None
        return "** of values that are not numbers"
    if isinstance(op, ast.Mult):
        if isinstance(a, (str, list, tuple)) and isinstance(b, int) or isinstance(b, (str, list, tuple)) and \
                isinstance(a, int):
            seq, n = (a, b) if isinstance(a, (str, list, tuple)) else (b, a)
            if len(seq) * max(n, 0) > (MAX_SEQ if isinstance(seq, str) else MAX_ITEMS):
                return "sequence repetition too long"
        elif isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > 64:
            return f"integer arithmetic beyond {MAX_INT:.0e}"
    if isinstance(op, ast.LShift) and isinstance(b, int) and isinstance(a, int):
        if b > 62 or a.bit_length() + max(b, 0) > 62:
            return f"shift beyond {MAX_INT:.0e}"
    if isinstance(op, ast.Add) and isinstance(a, (str, list, tuple)) and isinstance(b, type(a)):
        if len(a) + len(b) > (MAX_SEQ if isinstance(a, str) else MAX_ITEMS):
            return "sequence too long"
    if isinstance(op, ast.Mod) and isinstance(a, str):
        return "%-formatting is not followed"
    return None


_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b, ast.BitAnd: lambda a, b: a & b,
}
_CMPOPS = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_MATH_CONSTANTS = {"math.inf": math.inf, "math.nan": math.nan, "math.pi": math.pi, "math.e": math.e,
                   "math.tau": math.tau}
_MATH = {"ceil": math.ceil, "floor": math.floor, "gcd": math.gcd, "lcm": math.lcm,
         "log2": math.log2, "sqrt": math.sqrt, "isqrt": math.isqrt, "log": math.log}
_STR_METHODS = {"strip", "lstrip", "rstrip", "lower", "upper", "split", "rsplit", "replace", "startswith",
                "endswith", "removeprefix", "removesuffix", "title", "capitalize", "count", "find", "rfind",
                "partition", "rpartition", "isdigit", "isalpha", "isalnum", "isupper", "islower", "splitlines",
                "ljust", "rjust", "center", "zfill", "casefold", "swapcase"}
