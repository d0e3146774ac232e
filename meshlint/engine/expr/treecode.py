"""The syntax tree as JSON data and back, for the rule cache and the prebuilt rules.

Decoding accepts exactly what the parser builds (node types, operators, functions and their arity,
depth), so a cached or prebuilt tree can hold data only, never anything the parser could not make;
anything else raises ``BadTree`` and the expression is parsed from its source instead.
"""

from __future__ import annotations

import math

from meshlint.engine.expr.functions import FUNCTIONS
from meshlint.engine.expr.nodes import (MAX_DEPTH, Attr, BinOp, BoolOp, Call, Compare, Cond, Const, Index, ListComp,
                                        ListLit, Name, Unary)
from meshlint.engine.expr.tokens import KEYWORDS


class BadTree(ValueError):
    """Not a tree the parser builds."""


# Expression trees: [tag, col, ...children]. Decoding accepts exactly what the parser builds.

_BINARY_OPS = {"+", "-", "*", "/", "//", "%", "**"}
_COMPARE_OPS = {"==", "!=", "<", "<=", ">", ">=", "in", "not in"}


def encode_tree(node) -> list:
    """The tree as plain JSON data: [tag, col, ...children]."""
    c = node.col
    if isinstance(node, Const):
        return ["c", c, _constant(node.value)]
    if isinstance(node, Name):
        return ["n", c, node.name]
    if isinstance(node, Attr):
        return ["a", c, encode_tree(node.obj), node.attr]
    if isinstance(node, Index):
        return ["i", c, encode_tree(node.obj), encode_tree(node.index)]
    if isinstance(node, Call):
        return ["f", c, node.func, [encode_tree(a) for a in node.args]]
    if isinstance(node, Unary):
        return ["u", c, node.op, encode_tree(node.operand)]
    if isinstance(node, BinOp):
        return ["b", c, node.op, encode_tree(node.left), encode_tree(node.right)]
    if isinstance(node, BoolOp):
        return ["o", c, node.op, encode_tree(node.left), encode_tree(node.right)]
    if isinstance(node, Compare):
        return ["m", c, encode_tree(node.first), [[op, encode_tree(n)] for op, n in node.rest]]
    if isinstance(node, Cond):
        return ["?", c, encode_tree(node.test), encode_tree(node.then), encode_tree(node.other)]
    if isinstance(node, ListLit):
        return ["l", c, [encode_tree(i) for i in node.items]]
    if isinstance(node, ListComp):
        return ["lc", c, encode_tree(node.elt), [[var, encode_tree(it)] for var, it in node.loops],
                [encode_tree(x) for x in node.conds]]
    raise BadTree(f"node {type(node).__name__}")


def decode_tree(tree) -> tuple:
    """(root node, node count) of a cached expression tree (its JSON text); raises when it is not
    one the parser builds (``Expr._build`` then parses the expression's source instead)."""
    from meshlint import jsonfast

    if tree.__class__ is not str:
        raise BadTree("tree")
    return _decode_node(jsonfast.loads(tree), 1)


def _decode_node(data, level: int) -> tuple:
    """(node, nodes in it): the tree, rebuilt only from what the parser itself builds."""
    if level > MAX_DEPTH or data.__class__ is not list or len(data) < 3:
        raise BadTree("node")
    tag, col = data[0], data[1]
    if col.__class__ is not int:
        raise BadTree("column")
    down = level + 1
    n = len(data)
    if tag == "c" and n == 3 and _is_scalar(data[2]):
        return Const(data[2], col), 1
    if tag == "n" and n == 3 and data[2].__class__ is str:
        return Name(data[2], col), 1
    if tag == "a" and n == 4 and data[3].__class__ is str:
        obj, size = _decode_node(data[2], down)
        return Attr(obj, data[3], col), size + 1
    if tag == "b" and n == 5 and data[2] in _BINARY_OPS:
        (left, a), (right, b) = _decode_node(data[3], down), _decode_node(data[4], down)
        return BinOp(data[2], left, right, col), a + b + 1
    if tag == "m" and n == 4 and data[3].__class__ is list and data[3]:
        first, size = _decode_node(data[2], down)
        rest = []
        for item in data[3]:
            op, node = _pair(item)
            if op not in _COMPARE_OPS:
                raise BadTree("comparison")
            node, k = _decode_node(node, down)
            rest.append((op, node))
            size += k
        return Compare(first, rest, col), size + 1
    if tag == "f" and n == 4 and data[2] in FUNCTIONS and data[3].__class__ is list:
        spec = FUNCTIONS[data[2]]
        if not spec.min_args <= len(data[3]) <= spec.max_args:
            raise BadTree("arguments")
        args, size = _decode_list(data[3], down)
        return Call(data[2], args, col), size + 1
    if tag == "i" and n == 4:
        (obj, a), (index, b) = _decode_node(data[2], down), _decode_node(data[3], down)
        return Index(obj, index, col), a + b + 1
    if tag == "u" and n == 4 and data[2] in ("-", "+", "not"):
        operand, size = _decode_node(data[3], down)
        return Unary(data[2], operand, col), size + 1
    if tag == "o" and n == 5 and data[2] in ("and", "or"):
        (left, a), (right, b) = _decode_node(data[3], down), _decode_node(data[4], down)
        return BoolOp(data[2], left, right, col), a + b + 1
    if tag == "?" and n == 5:
        (test, a), (then, b), (other, c) = (_decode_node(data[2], down), _decode_node(data[3], down),
                                            _decode_node(data[4], down))
        return Cond(test, then, other, col), a + b + c + 1
    if tag == "l" and n == 3 and data[2].__class__ is list:
        items, size = _decode_list(data[2], down)
        return ListLit(items, col), size + 1
    if tag == "lc" and n == 5 and data[3].__class__ is list and data[3] and data[4].__class__ is list:
        elt, size = _decode_node(data[2], down)
        loops = []
        for item in data[3]:
            var, it = _pair(item)
            if var.__class__ is not str or var in KEYWORDS:
                raise BadTree("loop variable")
            it, k = _decode_node(it, down)
            loops.append((var, it))
            size += k
        conds, k = _decode_list(data[4], down)
        return ListComp(elt, loops, conds, col), size + k + 1
    raise BadTree("node")


def _decode_list(items: list, level: int) -> tuple:
    out, size = [], 0
    for item in items:
        node, k = _decode_node(item, level)
        out.append(node)
        size += k
    return out, size


def _constant(value):
    if value.__class__ is float and not math.isfinite(value):
        raise BadTree("non-finite float")
    if not _is_scalar(value):
        raise BadTree(f"cannot store a {type(value).__name__}")
    return value


def _is_scalar(v) -> bool:  # a constant of an expression
    return v is None or isinstance(v, (str, bool, int, float))


def _pair(value) -> list:
    if not isinstance(value, list) or len(value) != 2:
        raise BadTree("shape")
    return value
