"""The interpreter: each syntax tree node turned, once, into a Python closure over an ``Env``."""

from __future__ import annotations

from meshlint.engine.expr.errors import EvalError, Missing
from meshlint.engine.expr.functions import FUNCTIONS
from meshlint.engine.expr.nodes import (Attr, BinOp, BoolOp, Call, Compare, Cond, Const, Index, ListComp, ListLit,
                                        Name, Node, Unary, _count, _path_of)
from meshlint.engine.expr.values import (_FAST_COMPARE, MAX_LIST, Env, _binop, _charge, _charge_mem,
                                         _charge_operands, _check_value, _compare, _need, _num, _truth, attr_value,
                                         call_value, index_value, loop_items)

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs a first run ~17 M instructions
    from typing import Any, Callable


# Evaluation: each AST node is turned, once, into a Python closure that
# computes its value from an Env. Only the node types above exist and only
# the closures below are ever built, so this is an interpreter with its
# dispatch done ahead of time, not code generation: nothing is eval'd.
#
# Budget: an evaluation is charged its node count up front (without loops a
# node runs at most once); every comprehension iteration is charged the
# comprehension's size again; functions and list operations are charged by
# the length of what they walk; strings and lists built are charged to the
# memory budget by their length.


def _compile(node: Node) -> Callable[["Env"], Any]:
    return _COMPILERS[node.__class__](node)


def _c_const(node: Const):
    value = node.value
    return lambda env: value


def _c_name(node: Name):
    name = node.name

    def name_(env):
        value = env.lookup(name)
        return Missing(name) if value is None else value

    return name_


def _c_attr(node: Attr):
    obj_fn, attr = _compile(node.obj), node.attr
    base = _path_of(node.obj)
    path = f"{base}.{attr}" if base else attr

    def attr_(env):
        return attr_value(obj_fn(env), attr, path)

    return attr_


def _c_index(node: Index):
    obj_fn, idx_fn = _compile(node.obj), _compile(node.index)
    base = _path_of(node.obj) or "?"

    def index_(env):
        obj = _need(obj_fn(env))
        return index_value(obj, _need(idx_fn(env)), base)

    return index_


def _c_call(node: Call):
    spec = FUNCTIONS[node.func]
    arg_fns = [_compile(a) for a in node.args]
    fn, cost, null_ok = spec.fn, spec.cost, spec.null_ok

    def call_(env):
        return call_value(env, fn, cost, null_ok, [a(env) for a in arg_fns])

    return call_


def _c_unary(node: Unary):
    operand = _compile(node.operand)
    op = node.op
    if op == "not":
        return lambda env: not _truth(operand(env))
    if op == "-":
        return lambda env: _check_value(-_num(operand(env), "-"))
    return lambda env: _check_value(+_num(operand(env), "+"))


def _c_boolop(node: BoolOp):
    left, right = _compile(node.left), _compile(node.right)
    if node.op == "and":
        return lambda env: _truth(right(env)) if _truth(left(env)) else False
    return lambda env: True if _truth(left(env)) else _truth(right(env))


def _c_binop(node: BinOp):
    left, right, op = _compile(node.left), _compile(node.right), node.op

    def binop_(env):
        return _binop(op, _need(left(env)), _need(right(env)), env)

    return binop_


def _c_compare(node: Compare):
    first = _compile(node.first)
    rest = [(op, _compile(n)) for op, n in node.rest]
    if len(rest) == 1:  # the usual ``a op b``: no loop, ints and strings compared directly
        op, right_fn = rest[0]
        fast = _FAST_COMPARE.get(op)

        def compare1(env):
            left, right = first(env), right_fn(env)
            cls = left.__class__
            if fast is not None and cls is right.__class__ and (cls is int or cls is str):
                return fast(left, right)
            rcls = right.__class__
            if rcls is list or rcls is dict or rcls is str:  # only these make a comparison walk something
                _charge_operands(env, left, right)
            return _compare(op, left, right)

        return compare1

    def compare_(env):
        left = first(env)
        for op, right_fn in rest:
            right = right_fn(env)
            _charge_operands(env, left, right)  # 'in' and '==' walk lists, tables and long strings
            if not _compare(op, left, right):
                return False
            left = right
        return True

    return compare_


def _c_cond(node: Cond):
    test, then, other = _compile(node.test), _compile(node.then), _compile(node.other)
    return lambda env: then(env) if _truth(test(env)) else other(env)


def _c_listlit(node: ListLit):
    if all(isinstance(i, Const) for i in node.items):
        value = [i.value for i in node.items]  # never mutated: no operation changes a list in place
        return lambda env: value
    items = [_compile(i) for i in node.items]
    return lambda env: [i(env) for i in items]


def _c_listcomp(node: ListComp):
    elt = _compile(node.elt)
    conds = [_compile(c) for c in node.conds]
    loops = [(var, _compile(it)) for var, it in node.loops]
    per_item = _count(node)
    last = len(loops) - 1

    def listcomp_(env):
        out: list = []

        def run(depth: int, scope: "Env") -> None:
            var, iterable_fn = loops[depth]
            iterable = loop_items(iterable_fn(scope))
            inner = Env({}, None, scope.budget, scope)  # one scope per level, rebound per item
            values = inner.values
            budget = scope.budget
            for value in iterable:
                _charge(env, per_item)
                values[var] = value
                inner.let_cache = None  # a let read here may depend on the loop variable
                if depth < last:
                    run(depth + 1, inner)
                elif all(_truth(c(inner)) for c in conds):
                    out.append(elt(inner))
                    budget.mem -= 1  # the list slot: memory budget, charged inline (the hot loop)
                    if budget.mem < 0:
                        _charge_mem(env, 0)
                    if len(out) > MAX_LIST:
                        raise EvalError(f"list longer than {MAX_LIST} items")

        run(0, env)
        return out

    return listcomp_


_COMPILERS = {Const: _c_const, Name: _c_name, Attr: _c_attr, Index: _c_index, Call: _c_call, Unary: _c_unary,
              BoolOp: _c_boolop, BinOp: _c_binop, Compare: _c_compare, Cond: _c_cond, ListLit: _c_listlit,
              ListComp: _c_listcomp}
