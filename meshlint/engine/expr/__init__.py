"""A small, safe expression language for rule files.

Rule checks, messages and help texts are written in a Python-like expression
syntax over the resolved facts of a config. Expressions are tokenized and
parsed into a whitelisted AST and interpreted by this package: nothing is
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


The package, one module per part (each imports only those above it):

    errors      ExprError, EvalError, NeedFact, Missing
    tokens      tokenize
    nodes       the syntax tree's node types, walks over a tree
    values      Env, Budget, the checked operations on values (shared by both ways of evaluating)
    functions   FUNCTIONS (the whitelisted library), render
    parser      tokens -> tree
    interp      tree -> closures (the interpreter)
    expression  Expr, parse, check_lets, field_reads
    template    Template, parse_template
    treecode    the tree as JSON data and back (the rule cache, the prebuilt rules)
    compiler    trees -> Python source, for the built-in rules compiled ahead of time
                (meshlint/engine/rules_compiled/, generated; see meshlint/engine/prebuilt.py)
"""

from __future__ import annotations

from meshlint.engine.expr.errors import EvalError, ExprError, Missing, NeedFact
from meshlint.engine.expr.expression import Expr, check_lets, field_reads, parse
from meshlint.engine.expr.functions import FUNCTIONS, FuncSpec, render
from meshlint.engine.expr.template import Template, parse_template
from meshlint.engine.expr.values import DEFAULT_BUDGET, MAX_INT, MAX_LIST, MAX_STR, Budget, Env, type_name

# The tree's node types and the tokenizer, imported on first use (PEP 562): a check of built-in rules runs their
# compiled functions and never builds a tree (see expression.py).
_LAZY = {**dict.fromkeys(("MAX_DEPTH", "Attr", "BinOp", "BoolOp", "Call", "Compare", "Cond", "Const", "Index",
                          "ListComp", "ListLit", "Name", "Node", "Unary", "depth"), "nodes"),
         **dict.fromkeys(("KEYWORDS", "MAX_SOURCE", "Token", "tokenize"), "tokens")}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from meshlint.modules import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

# the package's modules, by file: what the rule cache and the prebuilt rules are keyed on (a changed one
# means a stale cache); tests/test_expr_compiled.py checks it lists every module here
MODULES = ("errors.py", "tokens.py", "nodes.py", "values.py", "functions.py", "parser.py", "interp.py",
           "expression.py", "template.py", "treecode.py", "compiler.py")

__all__ = ["Attr", "BinOp", "BoolOp", "Budget", "Call", "Compare", "Cond", "Const", "DEFAULT_BUDGET", "Env",
           "EvalError",            "Expr", "ExprError", "FUNCTIONS", "FuncSpec", "Index", "KEYWORDS", "ListComp", "ListLit", "MAX_DEPTH", "MODULES",
           "MAX_INT", "MAX_LIST", "MAX_SOURCE", "MAX_STR", "Missing", "Name", "NeedFact", "Node", "Template", "Token",
           "Unary", "check_lets", "depth", "field_reads", "parse", "parse_template", "render", "tokenize", "type_name"]
