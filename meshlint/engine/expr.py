"""A small, safe expression language for rule files.

Rule checks, messages and help texts are written in a Python-like expression
syntax over the resolved facts of a config. Expressions are tokenized and
parsed here into a whitelisted AST and interpreted by this module: nothing is
ever handed to ``eval``/``exec``, names resolve only to facts, and functions
only to the table in ``FUNCTIONS``. Every evaluation runs under a step budget
and every value is bounded (integers, strings, lists), so a hostile rule file
can neither hang nor escape the tool.

Grammar (lowest precedence first)::

    expr     := or ['if' or 'else' expr]
    or       := and ('or' and)*
    and      := not ('and' not)*
    not      := 'not' not | compare
    compare  := sum (('=='|'!='|'<'|'<='|'>'|'>='|'in'|'not' 'in') sum)*
    sum      := term (('+'|'-') term)*
    term     := unary (('*'|'/'|'//'|'%') unary)*
    unary    := ('-'|'+') unary | power
    power    := postfix ['**' unary]
    postfix  := atom ('.' NAME | '[' expr ']')*
    atom     := INT | FLOAT | STRING | 'true' | 'false' | 'null' | NAME
              | NAME '(' [expr (',' expr)*] ')'          (whitelisted functions)
              | '(' expr ')' | '[' [expr (',' expr)*] ']'
              | '[' expr ('for' NAME 'in' or)+ ('if' or)* ']'

A fact that is unknown (``null``) may be compared with the literal ``null``
(``world_size == null``) or passed to ``coalesce``/``type``/``str``; any other
use -- arithmetic, ordering, ``world_size == 32``, truth -- raises
``NeedFact``, which the engine turns into "rule skipped: needs <fact>".
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

from meshlint.limits import (
    MAX_EXPR_CHARS,
    MAX_EXPR_DEPTH,
    MAX_EXPR_INT_BITS,
    MAX_EXPR_LIST,
    MAX_EXPR_STR,
    MAX_LET_DEPTH,
    MAX_ROUND_DIGITS,
    MAX_RULE_MEMORY,
    MAX_RULE_STEPS,
    MAX_TEMPLATE_CHARS,
    MAX_VALUE_DEPTH,
)
from meshlint.mesh.devmesh import compact_ranks  # `ranks()` in messages

MAX_INT = 2**MAX_EXPR_INT_BITS
MAX_STR = MAX_EXPR_STR
MAX_LIST = MAX_EXPR_LIST
MAX_SOURCE = MAX_EXPR_CHARS
MAX_DEPTH = MAX_EXPR_DEPTH
DEFAULT_BUDGET = MAX_RULE_STEPS

KEYWORDS = {"and", "or", "not", "in", "if", "else", "for", "true", "false", "null"}


class ExprError(Exception):
    """A syntax error in an expression; ``col`` is 1-based within the source."""

    def __init__(self, message: str, col: int | None = None):
        super().__init__(message)
        self.message = message
        self.col = col

    def __str__(self) -> str:
        return f"{self.message} (column {self.col})" if self.col else self.message


class EvalError(Exception):
    """A runtime error: bad operand types, a bound or the step budget exceeded."""


class NeedFact(Exception):
    """Evaluation touched an unknown fact; ``path`` names it (e.g. ``world_size``)."""

    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


class Missing(NamedTuple):
    """The value of an unknown fact, remembering which fact it was."""

    path: str


# --------------------------------------------------------------------------- tokens

_TWO_CHAR = {"==", "!=", "<=", ">=", "//", "**"}
_ONE_CHAR = set("+-*/%<>()[],.")


class Token(NamedTuple):
    kind: str  # INT FLOAT STR NAME OP EOF
    value: Any
    col: int


def tokenize(src: str) -> list[Token]:
    if len(src) > MAX_SOURCE:
        raise ExprError(f"expression longer than {MAX_SOURCE} characters")
    tokens: list[Token] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        col = i + 1
        if c in " \t\r\n":
            i += 1
        elif "0" <= c <= "9":  # ASCII only: str.isdigit() accepts '²', which int() refuses
            j = i
            while j < n and ("0" <= src[j] <= "9" or src[j] == "_"):
                j += 1
            is_float = j < n and src[j] == "." and j + 1 < n and "0" <= src[j + 1] <= "9"
            if is_float:
                j += 1
                while j < n and "0" <= src[j] <= "9":
                    j += 1
            text = src[i:j]
            if len(text) > 80:
                raise ExprError(f"{'number' if is_float else 'integer'} literal too long", col)
            try:
                tokens.append(Token("FLOAT", float(text), col) if is_float else Token("INT", int(text), col))
            except ValueError:  # misplaced underscores: 1__0, 1_
                raise ExprError(f"invalid number {text!r}", col) from None
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            tokens.append(Token("NAME", src[i:j], col))
            i = j
        elif c in "\"'":
            j = i + 1
            out = []
            while j < n and src[j] != c:
                if src[j] == "\\" and j + 1 < n:
                    esc = src[j + 1]
                    out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}.get(esc, "\\" + esc))
                    j += 2
                else:
                    out.append(src[j])
                    j += 1
            if j >= n:
                raise ExprError("unterminated string", col)
            tokens.append(Token("STR", "".join(out), col))
            i = j + 1
        elif src[i : i + 2] in _TWO_CHAR:
            tokens.append(Token("OP", src[i : i + 2], col))
            i += 2
        elif c in _ONE_CHAR:
            tokens.append(Token("OP", c, col))
            i += 1
        else:
            raise ExprError(f"unexpected character {c!r}", col)
    tokens.append(Token("EOF", None, n + 1))
    return tokens


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


# --------------------------------------------------------------------------- parser

class _Parser:
    def __init__(self, src: str):
        self.toks = tokenize(src)
        self.pos = 0
        self.depth = 0

    def peek(self) -> Token:
        return self.toks[self.pos]

    def next(self) -> Token:
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def at(self, kind: str, value=None) -> bool:
        tok = self.toks[self.pos]
        return tok.kind == kind and (value is None or tok.value == value)

    def at_op(self, *ops: str) -> bool:
        tok = self.toks[self.pos]
        return tok.kind == "OP" and tok.value in ops

    def at_kw(self, kw: str) -> bool:
        tok = self.toks[self.pos]
        return tok.kind == "NAME" and tok.value == kw

    def expect_op(self, op: str) -> Token:
        tok = self.next()
        if tok.kind != "OP" or tok.value != op:
            raise ExprError(f"expected {op!r}, found {_describe(tok)}", tok.col)
        return tok

    def expect_kw(self, kw: str) -> Token:
        tok = self.next()
        if tok.kind != "NAME" or tok.value != kw:
            raise ExprError(f"expected {kw!r}, found {_describe(tok)}", tok.col)
        return tok

    def deeper(self, col: int):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"expression nested deeper than {MAX_DEPTH} levels", col)

    def parse(self) -> Node:
        node = self.expr()
        tok = self.peek()
        if tok.kind != "EOF":
            raise ExprError(f"unexpected {_describe(tok)}", tok.col)
        return node

    def expr(self) -> Node:
        self.deeper(self.peek().col)
        node = self.or_()
        if self.at_kw("if"):
            col = self.next().col
            test = self.or_()
            self.expect_kw("else")
            other = self.expr()
            node = Cond(test, node, other, col)
        self.depth -= 1
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.at_kw("or"):
            col = self.next().col
            node = BoolOp("or", node, self.and_(), col)
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.at_kw("and"):
            col = self.next().col
            node = BoolOp("and", node, self.not_(), col)
        return node

    def not_(self) -> Node:
        if self.at_kw("not"):
            col = self.next().col
            self.deeper(col)
            node = Unary("not", self.not_(), col)
            self.depth -= 1
            return node
        return self.compare()

    def compare(self) -> Node:
        first = self.sum()
        rest = []
        col = self.peek().col
        while True:
            if self.at_op("==", "!=", "<", "<=", ">", ">="):
                op = self.next().value
            elif self.at_kw("in"):
                self.next()
                op = "in"
            elif self.at_kw("not") and self.toks[self.pos + 1].kind == "NAME" and self.toks[self.pos + 1].value == "in":
                self.pos += 2
                op = "not in"
            else:
                break
            rest.append((op, self.sum()))
        return Compare(first, rest, col) if rest else first

    def sum(self) -> Node:
        node = self.term()
        while self.at_op("+", "-"):
            tok = self.next()
            node = BinOp(tok.value, node, self.term(), tok.col)
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.at_op("*", "/", "//", "%"):
            tok = self.next()
            node = BinOp(tok.value, node, self.unary(), tok.col)
        return node

    def unary(self) -> Node:
        if self.at_op("-", "+"):
            tok = self.next()
            self.deeper(tok.col)
            node = Unary(tok.value, self.unary(), tok.col)
            self.depth -= 1
            return node
        return self.power()

    def power(self) -> Node:
        node = self.postfix()
        if self.at_op("**"):
            tok = self.next()
            self.deeper(tok.col)
            node = BinOp("**", node, self.unary(), tok.col)
            self.depth -= 1
        return node

    def postfix(self) -> Node:
        node = self.atom()
        while True:
            if self.at_op("."):
                col = self.next().col
                tok = self.next()
                if tok.kind != "NAME":
                    raise ExprError(f"expected a field name after '.', found {_describe(tok)}", tok.col)
                node = Attr(node, tok.value, col)
            elif self.at_op("["):
                col = self.next().col
                index = self.expr()
                self.expect_op("]")
                node = Index(node, index, col)
            else:
                return node

    def atom(self) -> Node:
        tok = self.next()
        if tok.kind in ("INT", "FLOAT", "STR"):
            return Const(tok.value, tok.col)
        if tok.kind == "NAME":
            if tok.value == "true":
                return Const(True, tok.col)
            if tok.value == "false":
                return Const(False, tok.col)
            if tok.value == "null":
                return Const(None, tok.col)
            if tok.value in KEYWORDS:
                raise ExprError(f"unexpected keyword {tok.value!r}", tok.col)
            if self.at_op("("):
                return self.call(tok)
            return Name(tok.value, tok.col)
        if tok.kind == "OP" and tok.value == "(":
            node = self.expr()
            self.expect_op(")")
            return node
        if tok.kind == "OP" and tok.value == "[":
            return self.list_(tok.col)
        raise ExprError(f"unexpected {_describe(tok)}", tok.col)

    def call(self, name_tok: Token) -> Node:
        if name_tok.value not in FUNCTIONS:
            raise ExprError(f"unknown function {name_tok.value!r}", name_tok.col)
        self.expect_op("(")
        args = []
        if not self.at_op(")"):
            args.append(self.expr())
            while self.at_op(","):
                self.next()
                args.append(self.expr())
        self.expect_op(")")
        spec = FUNCTIONS[name_tok.value]
        if not spec.min_args <= len(args) <= spec.max_args:
            want = str(spec.min_args) if spec.min_args == spec.max_args else f"{spec.min_args} to {spec.max_args}"
            raise ExprError(f"{name_tok.value}() takes {want} arguments, got {len(args)}", name_tok.col)
        return Call(name_tok.value, args, name_tok.col)

    def list_(self, col: int) -> Node:
        if self.at_op("]"):
            self.next()
            return ListLit([], col)
        first = self.expr()
        if self.at_kw("for"):
            loops, conds = [], []
            while self.at_kw("for"):
                self.next()
                var = self.next()
                if var.kind != "NAME" or var.value in KEYWORDS:
                    raise ExprError(f"expected a loop variable, found {_describe(var)}", var.col)
                self.expect_kw("in")
                loops.append((var.value, self.or_()))
            while self.at_kw("if"):
                self.next()
                conds.append(self.or_())
            self.expect_op("]")
            return ListComp(first, loops, conds, col)
        items = [first]
        while self.at_op(","):
            self.next()
            if self.at_op("]"):
                break
            items.append(self.expr())
        self.expect_op("]")
        return ListLit(items, col)


def _describe(tok: Token) -> str:
    if tok.kind == "EOF":
        return "end of expression"
    if tok.kind == "STR":
        return "string"
    return repr(tok.value)


class Expr:
    """A parsed expression, ready to evaluate many times.

    An expression read back from the rule cache holds its syntax tree as the
    cache's JSON text until it is first used: most runs evaluate only the rules
    of one dialect, so most trees are never parsed or rebuilt. The tree is rebuilt from
    the parser's own node types only (``rule_cache.decode_tree``); should it be
    damaged, the expression is parsed again from its source.
    """

    __slots__ = ("source", "_root", "size", "_tree", "_fn")

    def __init__(self, source: str, root: "Node | None", size: int = 0, tree=None):
        self.source = source
        self._root = root
        self.size = size    # nodes, charged to the step budget per evaluation (counted once, when built)
        self._tree = tree   # the cached JSON text, while root is not built yet
        self._fn = None     # the compiled closure, built on first evaluation

    def __repr__(self) -> str:
        return f"Expr({self.source!r})"

    @property
    def root(self) -> "Node":
        if self._root is None:
            self._build()
        return self._root

    def _build(self) -> None:
        from meshlint.engine import rule_cache

        try:
            self._root, self.size = rule_cache.decode_tree(self._tree)
        except Exception:  # noqa: BLE001 - a damaged cache entry: the source is the truth
            fresh = parse(self.source)
            self._root, self.size = fresh.root, fresh.size
        self._tree = None

    def free_names(self) -> set[str]:
        """Root names the expression reads (loop variables excluded)."""
        out: set[str] = set()
        _free(self.root, frozenset(), out)
        return out

    def evaluate(self, env: "Env") -> Any:
        fn = self._fn
        if fn is None:
            try:
                fn = self._fn = _compile(self.root)
            except ExprError as exc:  # a cached expression neither the tree nor the source rebuilds
                raise EvalError(f"cannot rebuild the expression {self.source[:80]!r}: {exc}") from None
        budget = env.budget
        budget.left -= self.size
        if budget.left < 0:
            raise EvalError(f"step budget exceeded ({MAX_RULE_STEPS:,} steps per rule and config)")
        try:
            return fn(env)
        except RecursionError:
            raise EvalError("evaluation nested too deeply (let bindings or values)") from None
        except MemoryError:
            raise EvalError("out of memory") from None
        except (TypeError, ValueError, ArithmeticError) as exc:  # the net under the checks of each operation
            raise EvalError(f"{type(exc).__name__}: {str(exc)[:200]}") from None


def parse(src: str) -> Expr:
    if not isinstance(src, str):
        raise ExprError("an expression must be a string")
    try:
        root = _Parser(src).parse()
    except RecursionError:  # the parser counts its own levels; this is the net under that count
        raise ExprError(f"expression nested deeper than {MAX_DEPTH} levels") from None
    levels = depth(root)
    if levels > MAX_DEPTH:
        # chains (a + b + c ...), index and field chains nest the tree without brackets;
        # every walk over the tree (compiling, counting, evaluating) recurses once per level
        raise ExprError(f"expression nested {levels} levels deep; the limit is {MAX_DEPTH} (each operator of a "
                        "chain, each index or field access is a level)")
    return Expr(src, root, _count(root))


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


def check_lets(lets: dict) -> None:
    """Load-time check of a rule's ``let`` bindings: no cycles, chains at most MAX_LET_DEPTH long.

    Raises ExprError naming the binding; decidable here, so a rule file that
    would fail at every evaluation is refused when it is loaded.
    """
    uses = {name: e.free_names() & set(lets) for name, e in lets.items()}
    longest: dict[str, int] = {}  # name -> length of the longest chain it starts

    def too_deep(names: tuple) -> ExprError:
        shown = names if len(names) <= 6 else names[:3] + ("...",) + names[-2:]
        return ExprError(f"'let' bindings chained more than {MAX_LET_DEPTH} deep ({' -> '.join(shown)})")

    def chain(name: str, path: tuple) -> int:
        if name in path:
            cycle = " -> ".join(path[path.index(name):] + (name,))
            raise ExprError(f"'let' binding {name!r} refers to itself ({cycle})")
        if name not in longest:
            if len(path) >= MAX_LET_DEPTH:  # also bounds this function's own recursion
                raise too_deep(path + (name,))
            longest[name] = 1 + max((chain(n, path + (name,)) for n in sorted(uses[name])), default=0)
        if len(path) + longest[name] > MAX_LET_DEPTH:
            raise too_deep(path + (name, "..."))
        return longest[name]

    for name in lets:
        chain(name, ())


def field_reads(expression: "Expr | Template") -> set[tuple[str, str]]:
    """``(root, field)`` for every ``root.field`` read directly off a root name."""
    roots = [expression.root] if isinstance(expression, Expr) else [p.root for p in expression.parts
                                                                    if isinstance(p, Expr)]  # a Template
    out: set[tuple[str, str]] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if isinstance(node, Attr) and isinstance(node.obj, Name):
            out.add((node.obj.name, node.attr))
        if isinstance(node, ListComp):
            stack.extend([node.elt, *node.conds, *(it for _, it in node.loops)])
        else:
            stack.extend(_children(node))
    return out


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

    __slots__ = ("values", "lets", "budget", "parent", "let_cache", "let_active")

    def __init__(self, values: dict[str, Any], lets: dict[str, Expr] | None = None,
                 budget: Budget | int = DEFAULT_BUDGET, parent: "Env | None" = None):
        self.values = values
        self.lets = lets or _NO_LETS
        self.budget = budget if isinstance(budget, Budget) else Budget(budget)
        self.parent = parent
        self.let_cache: dict[str, Any] | None = None
        self.let_active: set[str] | None = None

    def child(self, extra: dict[str, Any]) -> "Env":
        return Env(extra, None, self.budget, self)

    def lookup(self, name: str) -> Any:
        env: Env | None = self
        while env is not None:
            values = env.values
            if name in values:
                return values[name]
            if name in env.lets:
                return self._let(name, env.lets[name])
            env = env.parent
        raise EvalError(f"unknown name {name!r}")

    def _let(self, name: str, definition: Expr) -> Any:
        # Evaluated in the asking scope (a let may read a loop's ``item``), cached there.
        if self.let_cache is None:
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
        try:
            value = definition.evaluate(self)
        finally:
            self.let_active.discard(name)
            budget.lets -= 1
        self.let_cache[name] = value
        return value


_NO_LETS: dict = {}


def _null_path(v: Any) -> str | None:
    if isinstance(v, Missing):
        return v.path
    return None


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


def _count(node: Node) -> int:
    if isinstance(node, ListComp):
        return 1 + _count(node.elt) + sum(_count(c) for c in node.conds) + sum(_count(it) for _, it in node.loops)
    return 1 + sum(_count(c) for c in _children(node))


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
        obj = obj_fn(env)
        if isinstance(obj, dict):
            if attr not in obj:
                raise EvalError(f"no field {attr!r} (fields: {', '.join(sorted(obj))})")
            value = obj[attr]
            return Missing(path) if value is None else value
        if isinstance(obj, Missing):
            raise NeedFact(obj.path)
        raise EvalError(f"cannot read field {attr!r} of a {type_name(obj)}")

    return attr_


def _c_index(node: Index):
    obj_fn, idx_fn = _compile(node.obj), _compile(node.index)
    base = _path_of(node.obj) or "?"

    def index_(env):
        obj = _need(obj_fn(env))
        idx = _need(idx_fn(env))
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

    return index_


def _c_call(node: Call):
    spec = FUNCTIONS[node.func]
    arg_fns = [_compile(a) for a in node.args]
    fn, cost, null_ok = spec.fn, spec.cost, spec.null_ok

    def call_(env):
        args = [a(env) for a in arg_fns]
        if not null_ok:
            for a in args:
                if a is None or isinstance(a, Missing):
                    _need(a)
        _charge(env, cost(args))
        result = _check_value(fn(*args))
        cls = result.__class__
        if cls is str or cls is list:  # what a function built counts against the memory budget
            _charge_mem(env, len(result))
        return result

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
            iterable = _need(iterable_fn(scope))
            if not isinstance(iterable, list):
                raise EvalError(f"cannot loop over a {type_name(iterable)}")
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


def _path_of(node: Node) -> str:
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Attr):
        base = _path_of(node.obj)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


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
    if op in ("==", "!="):
        # An unknown fact compared with a value is itself unknown: only the
        # literal ``null`` tests for "is unknown" (``world_size == null``).
        if isinstance(a, Missing) and b is not None:
            raise NeedFact(a.path)
        if isinstance(b, Missing) and a is not None:
            raise NeedFact(b.path)
        if _is_null(a) or _is_null(b):
            same = _is_null(a) and _is_null(b)
        elif isinstance(a, bool) != isinstance(b, bool):
            same = False
        else:
            same = a == b
        return same if op == "==" else not same
    a, b = _need(a), _need(b)
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


# --------------------------------------------------------------------------- functions

class FuncSpec(NamedTuple):
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
        _need(item)
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
    return any(_truth(x) for x in _list_arg(v, "any")) if v else False


def _f_all(v):
    return all(_truth(x) for x in _list_arg(v, "all"))


def _cost_n(args) -> int:
    n = args[0] if args and isinstance(args[0], int) and not isinstance(args[0], bool) else 1
    return max(1, math.isqrt(max(n, 0)))


def _cost_len(args) -> int:
    return max(1, sum(len(a) for a in args if isinstance(a, (list, str, dict))))


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


class Template:
    """Text with ``{expression}`` holes; ``{{`` and ``}}`` are literal braces.

    The holes are parsed on first use and not pickled: a rule's message is
    needed only when it fails, so the rule cache stores the text alone.
    """

    __slots__ = ("source", "_parts")

    def __init__(self, source: str, parts: tuple | None = None):
        self.source = source
        self._parts = parts

    def __reduce__(self):
        return (Template, (self.source,))

    def __eq__(self, other) -> bool:
        return isinstance(other, Template) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)

    def __repr__(self) -> str:
        return f"Template({self.source!r})"

    @property
    def parts(self) -> tuple:  # str | Expr
        if self._parts is None:
            self._parts = _template_parts(self.source)
        return self._parts

    def render(self, env: Env) -> str:
        out, room = [], MAX_STR
        for part in self.parts:
            if isinstance(part, str):
                text = part
            else:
                try:
                    text = render(part.evaluate(env))
                    _charge_mem(env, len(text))
                except NeedFact:
                    text = "unknown"
                except EvalError as exc:
                    text = f"<error: {exc}>"
            room -= len(text)
            if room < 0:  # a message is at most MAX_STR characters, however many holes it has
                out.append(text[: len(text) + room] + "…")
                break
            out.append(text)
        return "".join(out)

    def free_names(self) -> set[str]:
        names: set[str] = set()
        for part in self.parts:
            if isinstance(part, Expr):
                names |= part.free_names()
        return names


def parse_template(src: str) -> Template:
    """Parse (and so validate) a template now; raises ExprError with a column."""
    if not isinstance(src, str):
        raise ExprError("a template must be a string")
    if len(src) > MAX_TEMPLATE_CHARS:
        raise ExprError(f"template longer than {MAX_TEMPLATE_CHARS:,} characters")
    return Template(src, _template_parts(src))


def _template_parts(src: str) -> tuple:
    parts: list[Any] = []
    buf: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "{" and src[i + 1 : i + 2] == "{":
            buf.append("{")
            i += 2
        elif c == "}" and src[i + 1 : i + 2] == "}":
            buf.append("}")
            i += 2
        elif c == "{":
            end = _closing_brace(src, i)
            inner = src[i + 1 : end]
            try:
                expr = parse(inner)
            except ExprError as exc:
                col = (exc.col or 1) + i + 1
                raise ExprError(f"in {{{inner}}}: {exc.message}", col) from None
            if buf:
                parts.append("".join(buf))
                buf = []
            parts.append(expr)
            i = end + 1
        elif c == "}":
            raise ExprError("single '}' in template (write '}}' for a literal brace)", i + 1)
        else:
            buf.append(c)
            i += 1
    if buf:
        parts.append("".join(buf))
    return tuple(parts)


def _closing_brace(src: str, start: int) -> int:
    depth, i, quote = 0, start, None
    while i < len(src):
        c = src[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                if c != "}":
                    raise ExprError("unbalanced brackets in template hole", i + 1)
                return i
        i += 1
    raise ExprError("unterminated '{' in template", start + 1)
