"""A parsed expression (``Expr``, ``parse``) and what the loader asks of one: let chains, names and fields read."""

from __future__ import annotations

from meshlint.engine.expr.errors import NET, EvalError, ExprError, evaluation_error
from meshlint.engine.expr.values import _charge
from meshlint.limits import MAX_EXPR_DEPTH as MAX_DEPTH
from meshlint.limits import MAX_LET_DEPTH

# The tree's modules (nodes, parser, interp, treecode) are imported where a tree is needed: a check of built-in rules
# runs their compiled functions (COMPILED) and reads their free names from the same table, so it never builds one.

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs a first run ~17 M instructions
    from typing import Any

    from meshlint.engine.expr.nodes import Node
    from meshlint.engine.expr.values import Env


# source -> (function, node count, the root names it reads): the built-in rules' expressions compiled to Python by
# ``compiler``
# (meshlint/engine/rules_compiled/), installed by meshlint/engine/prebuilt.py only while that package
# matches the rule files and this package; any other expression is interpreted
COMPILED: dict = {}
# [installer]: while some of those functions are not installed yet, ``installer(dialect)`` installs the ones of the
# rules that run on ``dialect`` (None: all of them) and says whether all are in now (prebuilt.py)
_PENDING: list = []


def install_compiled(table: dict, pending=None) -> None:
    COMPILED.clear()
    COMPILED.update(table)
    _PENDING[:] = [] if pending is None else [pending]


def compiled_for(dialect: str | None) -> None:
    """Install the compiled expressions of the rules that run on ``dialect`` (None: every one), if not yet in.

    The engine asks before it runs a dialect's rules; an expression met before its part is in (a layout search
    run before any check) installs them all first, so whatever is compiled is always evaluated compiled."""
    if _PENDING and _PENDING[0](dialect):
        _PENDING.clear()


def _compiled(source: str):
    hit = COMPILED.get(source)
    if hit is None and _PENDING:
        compiled_for(None)
        hit = COMPILED.get(source)
    return hit


def compiled_expr(source: str) -> "Expr | None":
    """An expression compiled ahead of time (a built-in rule's), without parsing it; None if it is not one.
    Its tree is built only if something asks for it."""
    hit = _compiled(source)
    if hit is None:
        return None
    expr = Expr(source, None, hit[1])
    expr._fn = hit[0]
    return expr


class Expr:
    """A parsed expression, ready to evaluate many times.

    An expression read back from the rule cache holds its syntax tree as the
    cache's JSON text until it is first used: most runs evaluate only the rules
    of one dialect, so most trees are never parsed or rebuilt. The tree is rebuilt from
    the parser's own node types only (``treecode.decode_tree``); should it be
    damaged, the expression is parsed again from its source.
    """

    __slots__ = ("source", "_root", "size", "_tree", "_fn")

    def __init__(self, source: str, root: "Node | None", size: int = 0, tree=None):
        self.source = source
        self._root = root
        self.size = size    # nodes, charged to the step budget per evaluation (counted once, when built)
        self._tree = tree   # the cached JSON text (or a function giving it), while root is not built yet
        self._fn = None     # the compiled closure, built on first evaluation

    def __repr__(self) -> str:
        return f"Expr({self.source!r})"

    @property
    def root(self) -> "Node":
        if self._root is None:
            self._build()
        return self._root

    def _build(self) -> None:
        from meshlint.engine.expr.treecode import decode_tree

        tree = self._tree
        if tree is not None and tree.__class__ is not str:  # where to find it (the built-in rules': prebuilt.tree_of)
            tree = tree(self.source)
        try:
            if tree is None:
                raise ValueError("no stored tree")
            self._root, self.size = decode_tree(tree)
        except Exception:  # noqa: BLE001 - a damaged cache entry: the source is the truth
            fresh = parse(self.source)
            self._root, self.size = fresh.root, fresh.size
        self._tree = None

    def free_names(self) -> set[str]:
        """Root names the expression reads (loop variables excluded)."""
        if self._root is None:
            hit = COMPILED.get(self.source)  # not _compiled(): a miss must not install every dialect's functions
            if hit is not None:
                return set(hit[2])
        from meshlint.engine.expr.nodes import _free

        out: set[str] = set()
        _free(self.root, frozenset(), out)
        return out

    def evaluate(self, env: "Env") -> Any:
        fn = self._fn
        if fn is None:
            hit = _compiled(self.source)
            if hit is not None:  # compiled to Python ahead of time (the built-in rules)
                fn, self.size = hit[0], hit[1]
                self._fn = fn
        if fn is None:
            from meshlint.engine.expr.interp import _compile

            try:
                fn = self._fn = _compile(self.root)
            except ExprError as exc:  # a cached expression neither the tree nor the source rebuilds
                raise EvalError(f"cannot rebuild the expression {self.source[:80]!r}: {exc}") from None
        budget = env.budget
        budget.left -= self.size
        if budget.left < 0:
            _charge(env, 0)  # raises the budget's error
        try:
            return fn(env)
        except NET as exc:
            raise evaluation_error(exc) from None


def parse(src: str) -> Expr:
    from meshlint.engine.expr.nodes import _count, depth
    from meshlint.engine.expr.parser import _Parser

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


def field_reads(expression) -> set[tuple[str, str]]:  # an Expr or a Template
    """``(root, field)`` for every ``root.field`` read directly off a root name."""
    from meshlint.engine.expr.nodes import Attr, ListComp, Name, _children

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
