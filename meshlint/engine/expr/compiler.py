"""Expressions compiled to Python source ahead of time: one plain function per expression.

``module_source`` writes, for each expression source it is given, a function ``f(env)`` that computes
exactly what the interpreter's closures (``interp``) compute: the same order of evaluation and
short-circuits, the same checks and charges to the budget, the same errors, because every operation
past the common fast paths is the same call into ``values`` / ``functions``. It runs at build time
only (``python -m meshlint.generate.rules_prebuilt`` writes meshlint/engine/rules_compiled/ for the
built-in rules); nothing here runs on a check, and no rule text ever reaches ``eval`` or ``exec``:
the generated modules are source in the package, like the compiled schemas. Names, fields, strings and
numbers of a rule enter the source only through ``repr``; functions only by their name in
``FUNCTIONS``. An expression the generator cannot write within Python's own limits (nesting, blocks)
is left out, and the interpreter evaluates it.

tests/test_expr_compiled.py evaluates every built-in rule both ways over the facts of every fixture,
and random expressions both ways, comparing values, errors and what is left of the budget.
"""

from __future__ import annotations

import math

from meshlint.engine.expr.functions import FUNCTIONS, FuncSpec, _cost_len, _f_len, _f_type
from meshlint.engine.expr.nodes import (Attr, BinOp, BoolOp, Call, Compare, Cond, Const, Index, ListComp, ListLit,
                                        Name, Node, Unary, _count, _path_of)
from meshlint.engine.expr.values import _FAST_COMPARE

# what a generated module imports; the same names the interpreter calls
PRELUDE = """from meshlint.engine.expr.errors import EvalError, Missing, NeedFact
from meshlint.engine.expr.functions import FUNCTIONS
from meshlint.engine.expr.values import (MAX_INT, MAX_LIST, Env, _binop, _charge, _charge_mem, _charge_operands,
                                         _check_value, _compare, _need, _num, _truth, attr_value, call_value,
                                         index_value, loop_items, type_name)
"""
_ARITH_FAST = ("+", "-", "*")  # on two ints these never raise (% and // only for a divisor not 0: binop)


class _Writer:
    """The statements of one function; ``expr`` returns a Python expression (a local or a literal) for a node.

    ``compact``: without the inline fast paths that only stand in for a call into ``values`` / ``functions`` (a
    field of a table, an item of a list, arithmetic on two ints, ``len``, ``type``, a value's truth), each that very
    call, so the same result, charges and errors in less bytecode: for the expressions only a finding evaluates
    (its message, key and help), which a run loads but seldom runs."""

    def __init__(self, consts: list, compact: bool = False):
        self.compact = compact
        self.lines: list[str] = []
        self.level = 1
        self.temps = 0
        self.consts = consts  # module-level constants (literal lists), shared by every function
        # (scope, name) -> (the local holding what ``scope.lookup(name)`` gave, the block level it was set at): a
        # name read twice in one evaluation is looked up once (no evaluation changes a scope's names, and a let's
        # second read is its cached value, charged nothing), wherever the first read runs before the second;
        # (local, ".field") the same for a field read off a value (pure: nothing charged, nothing changed)
        self.names: dict = {}
        # temps known to hold a bool (a comparison's, ``not``'s, ``and``/``or``'s result): their truth is themselves;
        # temps known never null (those, arithmetic's results): no null check before an operator reads them
        self.bools: set = set()
        self.nonnull: set = set()
        # the scopes (locals holding an Env) some emitted code looks a name up in, or hangs a needed scope under
        self.scopes_used: set = set()
        # temp -> the reads (as in ``names``) made on every way to that temp being true: ``a and b`` is true only
        # where b's block ran, so ``(a and b) and c`` reads in c's block what b's read, without reading it again
        self.when_true: dict = {}

    def enter(self) -> None:
        self.level += 1

    def enter_when(self, test: str) -> None:
        """Into the block of ``if test:``: what was read on every way to ``test`` being true is known there too."""
        self.enter()
        for key, (local, _level) in self.when_true.get(test, {}).items():
            self.names.setdefault(key, (local, self.level))

    def here(self) -> dict:
        """What was read in this block itself (not in one inside it): known wherever the block ran to its end."""
        return {key: entry for key, entry in self.names.items() if entry[1] == self.level}

    def leave(self, level: int | None = None) -> None:
        """Back out of blocks to ``level`` (one block: None): what was read inside them is not read on every way here."""
        self.level = self.level - 1 if level is None else level
        self.names = {k: v for k, v in self.names.items() if v[1] <= self.level}

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def temp(self) -> str:
        self.temps += 1
        return f"t{self.temps}"

    @staticmethod
    def known(value: str) -> bool:
        """Whether ``value`` is a literal other than null (never None, never Missing: no check of it needed)."""
        return value.startswith("(") and value != "(None)"

    def need(self, value: str) -> None:
        if not self.known(value) and value not in self.nonnull:
            self.emit(f"if {value} is None or {value}.__class__ is Missing: _need({value})")  # raises

    def truth(self, value: str) -> str:
        # _truth(v): bool(v), NeedFact for an unknown; a bool is its own truth
        if value in self.bools or value == "(True)" or value == "(False)":
            return value
        return f"_truth({value})" if self.compact else f"({value} if {value}.__class__ is bool else _truth({value}))"

    def expr(self, node: Node, env: str, bound: dict) -> str:
        """Statements computing ``node`` in scope ``env``; ``bound``: loop variable -> the local holding it."""
        kind = node.__class__
        if kind is Const:  # the literal itself, bracketed: an operand like any local
            return _literal(node.value)
        if kind is Name:
            # the innermost loop's scope holds a loop variable (what env.lookup would find first), else a lookup
            where = (bound[node.name], "") if node.name in bound else (env, node.name)
            seen = self.names.get(where)
            if seen is not None:
                return seen[0]
            t = self.temp()
            if node.name in bound:
                self.emit(f"{t} = {bound[node.name]}")
            else:
                self.emit(f"{t} = {env}.lookup({node.name!r})")
                self.scopes_used.add(env)
            self.names[where] = (t, self.level)
            self.emit(f"if {t} is None: {t} = Missing({node.name!r})")
            return t
        if kind is Attr:
            obj = self.expr(node.obj, env, bound)
            base = _path_of(node.obj)
            path = f"{base}.{node.attr}" if base else node.attr
            seen = self.names.get((obj, "." + node.attr))  # a field of a value read before: reading it is pure
            if seen is not None and not self.known(obj):
                return seen[0]
            t = self.temp()
            if self.compact:
                self.emit(f"{t} = attr_value({obj}, {node.attr!r}, {path!r})")
            else:
                self.emit(f"if {obj}.__class__ is dict and {node.attr!r} in {obj}:")
                self.emit(f"    {t} = {obj}[{node.attr!r}]")
                self.emit(f"    if {t} is None: {t} = Missing({path!r})")
                self.emit("else:")
                self.emit(f"    {t} = attr_value({obj}, {node.attr!r}, {path!r})")
            if not self.known(obj):
                self.names[(obj, "." + node.attr)] = (t, self.level)
            return t
        if kind is Index:
            obj = self.expr(node.obj, env, bound)
            self.need(obj)
            idx = self.expr(node.index, env, bound)
            t = self.temp()
            self.need(idx)
            base = _path_of(node.obj) or "?"
            if not self.compact and node.index.__class__ is Const and node.index.value.__class__ is int \
                    and node.index.value >= 0:
                # index_value's usual case inline: a list long enough, a known item
                self.emit(f"if {obj}.__class__ is list and len({obj}) > {node.index.value}:")
                self.emit(f"    {t} = {obj}[{node.index.value}]")
                self.emit(f"    if {t} is None: {t} = Missing({f'{base}[{node.index.value!r}]'!r})")
                self.emit("else:")
                self.emit(f"    {t} = index_value({obj}, {idx}, {base!r})")
            else:
                self.emit(f"{t} = index_value({obj}, {idx}, {base!r})")
            return t
        if kind is Call:
            args = [self.expr(a, env, bound) for a in node.args]
            spec = FUNCTIONS[node.func]
            t = self.temp()
            call = f"call_value(env, F_{node.func}.fn, F_{node.func}.cost, {spec.null_ok!r}, [{', '.join(args)}])"
            if self.compact:
                self.emit(f"{t} = {call}")
            elif node.func == "len" and len(args) == 1 and spec.fn is _f_len and spec.cost is _cost_len:
                # call_value's work for a list, string or table, inline: charged its length (at least 1)
                a = args[0]
                self.emit(f"if {a}.__class__ is list or {a}.__class__ is str or {a}.__class__ is dict:")
                self.emit(f"    {t} = len({a})")
                self.emit(f"    env.budget.left -= {t} if {t} > 1 else 1")
                self.emit("    if env.budget.left < 0: _charge(env, 0)")
                self.emit("else:")
                self.emit(f"    {t} = {call}")
                self.nonnull.add(t)  # a length, or call_value's error
            elif node.func == "type" and len(args) == 1 and spec.fn is _f_type \
                    and spec.cost is FuncSpec._field_defaults["cost"]:
                # call_value's work inline: one step, then the name's characters to the memory budget
                self.emit("env.budget.left -= 1")
                self.emit("if env.budget.left < 0: _charge(env, 0)")
                self.emit(f"{t} = type_name({args[0]})")
                self.emit(f"env.budget.mem -= len({t})")
                self.emit("if env.budget.mem < 0: _charge_mem(env, 0)")
                self.nonnull.add(t)
            else:
                self.emit(f"{t} = {call}")
            return t
        if kind is Unary:
            operand = self.expr(node.operand, env, bound)
            t = self.temp()
            if node.op == "not":
                self.emit(f"{t} = not {self.truth(operand)}")
                self.bools.add(t)
            else:
                self.emit(f"{t} = _check_value({node.op}_num({operand}, {node.op!r}))")
            self.nonnull.add(t)
            return t
        if kind is BoolOp:
            left = self.expr(node.left, env, bound)
            t = self.temp()
            if node.op == "and":
                self.emit(f"if {self.truth(left)}:")
                self.enter_when(left)
            else:
                self.emit(f"if not {self.truth(left)}:")
                self.enter()
            right = self.expr(node.right, env, bound)
            self.emit(f"{t} = {self.truth(right)}")
            if node.op == "and":  # ``t`` true: this block ran to its end, and ``right`` was true
                self.when_true[t] = {**self.here(), **self.when_true.get(right, {})}
            self.leave()
            self.emit("else:")
            self.emit(f"    {t} = {node.op == 'or'!r}")
            self.bools.add(t)
            self.nonnull.add(t)
            return t
        if kind is BinOp:
            left = self.expr(node.left, env, bound)
            self.need(left)
            right = self.expr(node.right, env, bound)
            self.need(right)
            t = self.temp()
            self.binop(node.op, left, right, t)
            self.nonnull.add(t)  # _binop gives a value or raises
            return t
        if kind is Compare:
            return self.compare(node, env, bound)
        if kind is Cond:
            test = self.expr(node.test, env, bound)
            t = self.temp()
            self.emit(f"if {self.truth(test)}:")
            self.enter_when(test)
            then = self.expr(node.then, env, bound)
            self.emit(f"{t} = {then}")
            self.leave()
            self.emit("else:")
            self.enter()
            other = self.expr(node.other, env, bound)
            self.emit(f"{t} = {other}")
            self.leave()
            if (then in self.bools or then in ("(True)", "(False)")) and \
                    (other in self.bools or other in ("(True)", "(False)")):
                self.bools.add(t)
                self.nonnull.add(t)
            return t
        if kind is ListLit:
            if all(i.__class__ is Const for i in node.items):  # one list, never mutated (as the interpreter's)
                self.consts.append("[" + "".join(_literal(i.value) + ", " for i in node.items) + "]")
                t = self.temp()
                self.emit(f"{t} = K{len(self.consts) - 1}")
                return t
            items = [self.expr(i, env, bound) for i in node.items]
            t = self.temp()
            self.emit(f"{t} = [{', '.join(items)}]")
            return t
        if kind is ListComp:
            return self.listcomp(node, env, bound)
        raise TypeError(f"no such node: {kind.__name__}")

    def binop(self, op: str, left: str, right: str, t: str) -> None:
        """``t = left op right``: _binop's usual cases inline (not in compact functions), each with its checks."""
        fallback = f"{t} = _binop({op!r}, {left}, {right}, env)"
        ints = [f"{v}.__class__ is int" for v in (left, right) if not _is_int_literal(v)]  # a literal int: known
        if self.compact or op not in _ARITH_FAST + ("%", "//") \
                or any(self.known(v) and not _is_int_literal(v) for v in (left, right)):
            self.emit(fallback)  # no fast path, or a literal string, float or bool: _binop's own work
            return
        if op == "%" or op == "//":  # a divisor not 0 (else _binop's "division by zero")
            if right == "(0)":
                self.emit(fallback)
                return
            if not _is_int_literal(right):
                ints.append(right)
        test = " and ".join(ints) or "True"
        self.emit(f"if {test}:")  # two ints: never an error but an int out of bounds
        self.emit(f"    {t} = {left} {op} {right}")
        self.emit(f"    if not -MAX_INT <= {t} <= MAX_INT: _check_value({t})")
        if op == "+" and not self.known(left) and not self.known(right):
            # two lists joined (foreach tables built of parts): _binop's length check, then its charges, in order
            self.emit(f"elif {left}.__class__ is list and {right}.__class__ is list "
                      f"and len({left}) + len({right}) <= MAX_LIST:")
            self.emit(f"    {t} = {left} + {right}")
            self.emit(f"    env.budget.left -= len({t})")
            self.emit("    if env.budget.left < 0: _charge(env, 0)")
            self.emit(f"    env.budget.mem -= len({t})")
            self.emit("    if env.budget.mem < 0: _charge_mem(env, 0)")
        self.emit("else:")
        self.emit("    " + fallback)

    def compare(self, node: Compare, env: str, bound: dict) -> str:
        t = self.compare_into(node, env, bound)
        self.bools.add(t)  # every comparison gives True or False (_compare's too)
        self.nonnull.add(t)
        return t

    def compare_into(self, node: Compare, env: str, bound: dict) -> str:
        first = self.expr(node.first, env, bound)
        t = self.temp()
        if len(node.rest) == 1:  # interp's compare1: equal ints or strings directly, else charged and checked
            op, right_node = node.rest[0]
            if op in ("==", "!=") and right_node.__class__ is Const and right_node.value is None:
                # ``x == null``: what _compare gives (nothing charged: null is no container): whether x is unknown
                self.emit(f"{t} = {'' if op == '==' else 'not '}({first} is None or {first}.__class__ is Missing)")
                return t
            constant = right_node.value.__class__ if right_node.__class__ is Const else None
            right = self.expr(right_node, env, bound)
            fast = op in _FAST_COMPARE  # not only faster: two ints or strings compare uncharged (interp's compare1)
            if fast and constant in (int, str):  # ``x >= 1``, ``x == 'tp'``: the constant's type known
                self.emit(f"if {first}.__class__ is {constant.__name__}:")
                self.emit(f"    {t} = {first} {op} {right}")
                self.emit("else:")
                self.enter()
            elif fast:
                self.emit(f"if {first}.__class__ is {right}.__class__ and ({first}.__class__ is int "
                          f"or {first}.__class__ is str):")
                self.emit(f"    {t} = {first} {op} {right}")
                self.emit("else:")
                self.enter()
            elif op in ("in", "not in") and not self.compact and right_node.__class__ is ListLit \
                    and all(i.__class__ is Const for i in right_node.items):
                # ``x in ['tp', 'etp']``: a string or int looked up in a literal list is charged one step per item
                # (_charge_operands), then compared item by item as _compare does (``a in b``)
                fast = True
                self.emit(f"if {first}.__class__ is str or {first}.__class__ is int:")
                self.emit(f"    env.budget.left -= {len(right_node.items)}")
                self.emit("    if env.budget.left < 0: _charge(env, 0)")
                self.emit(f"    {t} = {first} {op} {right}")
                self.emit("else:")
                self.enter()
            if constant is None:
                self.emit(f"if {right}.__class__ is list or {right}.__class__ is dict or {right}.__class__ is str: "
                          f"_charge_operands(env, {first}, {right})")
            elif constant is str and len(right_node.value) > 64:  # what _charge_operands charges for it
                self.emit(f"_charge_operands(env, {first}, {right})")
            self.emit(f"{t} = _compare({op!r}, {first}, {right})")
            if fast:
                self.leave()
            return t
        # a chain: each link charged and compared; the first false one ends it, later operands unevaluated
        left, depth = first, 0
        for op, right_node in node.rest:
            right = self.expr(right_node, env, bound)
            self.emit(f"_charge_operands(env, {left}, {right})")
            self.emit(f"if not _compare({op!r}, {left}, {right}):")
            self.emit(f"    {t} = False")
            self.emit("else:")
            self.enter()
            depth += 1
            left = right
        self.emit(f"{t} = True")
        self.leave(self.level - depth)
        return t

    def listcomp(self, node: ListComp, env: str, bound: dict) -> str:
        out, budget = self.temp(), self.temp()
        per_item = _count(node)
        self.emit(f"{out} = []")
        self.emit(f"{budget} = env.budget")  # every scope of an evaluation shares its one Budget
        outer_level, scope, inner_bound = self.level, env, dict(bound)
        levels = []  # (the level's scope, its parent, the lines that make and rebind it)
        for var, iterable in node.loops:
            items = self.temp()
            self.emit(f"{items} = {self.expr(iterable, scope, inner_bound)}")
            self.emit(f"if {items}.__class__ is not list: {items} = loop_items({items})")  # a known list as it is
            inner, names, value = self.temp(), self.temp(), self.temp()
            made = [len(self.lines)]
            self.emit(f"{inner} = Env({{}}, None, {budget}, {scope})")  # one scope per level, rebound per item
            made.append(len(self.lines))
            self.emit(f"{names} = {inner}.values")
            self.emit(f"for {value} in {items}:")
            self.enter()
            self.emit(f"{budget}.left -= {per_item}")  # _charge, inline
            self.emit(f"if {budget}.left < 0: _charge(env, 0)")
            made.append(len(self.lines))
            self.emit(f"{names}[{var!r}] = {value}")
            made.append(len(self.lines))
            self.emit(f"{inner}.let_cache = None")  # a let read here may depend on the loop variable
            levels.append((inner, scope, made))
            scope = inner
            inner_bound[var] = value
        for cond in node.conds:  # all(...) of the conditions, stopping at the first false one
            c = self.expr(cond, scope, inner_bound)
            self.emit(f"if {self.truth(c)}:")
            self.enter_when(c)
        elt = self.expr(node.elt, scope, inner_bound)
        self.emit(f"{out}.append({elt})")
        self.emit(f"{budget}.mem -= 1")
        self.emit(f"if {budget}.mem < 0: _charge_mem(env, 0)")
        self.emit(f"if len({out}) > MAX_LIST: raise EvalError(f'list longer than {{MAX_LIST}} items')")
        self.leave(outer_level)
        # A level's scope is made only where a name is looked up in it (or in a scope below it): loop variables
        # are locals, and every charge goes to the one Budget through ``env``; a body that reads nothing else
        # (``[f.value for f in world_factors]``) makes no Env at all.
        for inner, parent, made in reversed(levels):
            if inner in self.scopes_used:
                self.scopes_used.add(parent)
            else:
                for i in made:
                    self.lines[i] = None
        return out


def _is_int_literal(value: str) -> bool:
    """Whether ``value`` (a local or a bracketed literal) is a literal int (bool is not int here)."""
    return value.startswith("(") and value[1:-1].lstrip("-").isdigit()


def _literal(value) -> str:
    """Python source for a constant the parser builds (int, float, str, bool, None)."""
    if value.__class__ is float and not math.isfinite(value):
        raise ValueError("a non-finite float literal")
    if value.__class__ not in (int, float, str, bool, type(None)):
        raise TypeError(f"not a literal: {value!r}")
    return f"({value!r})"  # bracketed: (1).__class__ is Python, 1.__class__ is not


def function_source(name: str, root: Node, consts: list, compact: bool = False) -> str | None:
    """``def name(env): ...`` computing ``root``, or None where Python could not compile it (``compact``: see
    _Writer)."""
    writer = _Writer(consts, compact)
    before = len(consts)
    try:
        result = writer.expr(root, "env", {})
    except RecursionError:
        del consts[before:]
        return None
    text = "\n".join([f"def {name}(env):", *(line for line in writer.lines if line is not None),
                      f"    return {result}", ""])
    try:
        compile(text, "<compiled rule expression>", "exec")  # nesting past Python's limits: left to the interpreter
    except (SyntaxError, RecursionError, MemoryError):
        del consts[before:]
        return None
    return text


def module_body(expressions: list) -> tuple[list[str], dict]:
    """The functions of ``expressions`` ([(source, root, size, compact)]): (source lines, source -> (function name,
    size))."""
    consts: list[str] = []
    functions: list[str] = []
    table: dict = {}
    for source, root, size, compact in expressions:
        if source in table:
            continue
        name = f"e{len(table)}"
        text = function_source(name, root, consts, compact)
        if text is not None:
            functions.append(text)
            table[source] = (name, size)
    lines = [f"F_{f} = FUNCTIONS[{f!r}]" for f in sorted(FUNCTIONS)]
    lines += [f"K{i} = {c}" for i, c in enumerate(consts)]
    lines += ["", ""] + functions
    return lines, table
