"""The syntax tree's node types (the only ones the parser builds) and walks over a tree."""

from __future__ import annotations

from meshlint.limits import MAX_EXPR_DEPTH

MAX_DEPTH = MAX_EXPR_DEPTH


# --------------------------------------------------------------------------- AST

class Node:
    __slots__ = ("col",)


class Const(Node):
    __slots__ = ("value",)

    def __init__(self, value, col):
        self.value, self.col = value, col


class Name(Node):
    __slots__ = ("name",)

    def __init__(self, name, col):
        self.name, self.col = name, col


class Attr(Node):
    __slots__ = ("obj", "attr")

    def __init__(self, obj, attr, col):
        self.obj, self.attr, self.col = obj, attr, col


class Index(Node):
    __slots__ = ("obj", "index")

    def __init__(self, obj, index, col):
        self.obj, self.index, self.col = obj, index, col


class Call(Node):
    __slots__ = ("func", "args")

    def __init__(self, func, args, col):
        self.func, self.args, self.col = func, args, col


class Unary(Node):
    __slots__ = ("op", "operand")

    def __init__(self, op, operand, col):
        self.op, self.operand, self.col = op, operand, col


class BinOp(Node):
    __slots__ = ("op", "left", "right")

    def __init__(self, op, left, right, col):
        self.op, self.left, self.right, self.col = op, left, right, col


class BoolOp(Node):
    __slots__ = ("op", "left", "right")

    def __init__(self, op, left, right, col):
        self.op, self.left, self.right, self.col = op, left, right, col


class Compare(Node):
    __slots__ = ("first", "rest")

    def __init__(self, first, rest, col):
        self.first, self.rest, self.col = first, rest, col


class Cond(Node):
    __slots__ = ("test", "then", "other")

    def __init__(self, test, then, other, col):
        self.test, self.then, self.other, self.col = test, then, other, col


class ListLit(Node):
    __slots__ = ("items",)

    def __init__(self, items, col):
        self.items, self.col = items, col


class ListComp(Node):
    __slots__ = ("elt", "loops", "conds")

    def __init__(self, elt, loops, conds, col):
        self.elt, self.loops, self.conds, self.col = elt, loops, conds, col


def depth(root: Node) -> int:
    """Levels of an expression tree, counted without recursion."""
    best, stack = 0, [(root, 1)]
    while stack:
        node, level = stack.pop()
        if level > best:
            best = level
            if best > MAX_DEPTH:
                return best
        kids = [node.elt, *node.conds, *(it for _, it in node.loops)] if isinstance(node, ListComp) else _children(node)
        stack.extend((kid, level + 1) for kid in kids)
    return best


def _free(node: Node, bound: frozenset, out: set) -> None:
    if isinstance(node, Name):
        if node.name not in bound:
            out.add(node.name)
    elif isinstance(node, ListComp):
        inner = bound
        for var, it in node.loops:
            _free(it, inner, out)
            inner = inner | {var}
        _free(node.elt, inner, out)
        for c in node.conds:
            _free(c, inner, out)
    else:
        for child in _children(node):
            _free(child, bound, out)


def _children(node: Node) -> list[Node]:
    if isinstance(node, Attr):
        return [node.obj]
    if isinstance(node, Index):
        return [node.obj, node.index]
    if isinstance(node, Call):
        return list(node.args)
    if isinstance(node, Unary):
        return [node.operand]
    if isinstance(node, (BinOp, BoolOp)):
        return [node.left, node.right]
    if isinstance(node, Compare):
        return [node.first] + [n for _, n in node.rest]
    if isinstance(node, Cond):
        return [node.test, node.then, node.other]
    if isinstance(node, ListLit):
        return list(node.items)
    return []


def _count(node: Node) -> int:
    if isinstance(node, ListComp):
        return 1 + _count(node.elt) + sum(_count(c) for c in node.conds) + sum(_count(it) for _, it in node.loops)
    return 1 + sum(_count(c) for c in _children(node))


def _path_of(node: Node) -> str:
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Attr):
        base = _path_of(node.obj)
        return f"{base}.{node.attr}" if base else node.attr
    return ""
