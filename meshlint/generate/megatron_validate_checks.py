"""Build-time generator of validate_checks_0_16.json: validate_args' refusals (Megatron-LM core_v0.16.1) that read
only the parsed options and what validate_args derived from them earlier, with the statements they depend on.

    python -m meshlint.generate.megatron_validate_checks /path/to/Megatron-LM   # at tag core_v0.16.1

validate_args mutates ``args`` as it goes (defaults, derived sizes, options switched off), so a check may only
be evaluated on the values at its own line. The generator walks validate_args in order (helpers it passes
``args`` to are walked inline) and records every ``if`` test (a guard, evaluated at its line) and every write
to ``args.X`` or a local (a step: its guards and the value's source, or ``null`` where meshlint cannot follow
the value: a loop, a try, a call, ``del``, a method call on ``args.X``). Each assert/raise of validate_args the
inventory (megatron_refusals.py) classifies ``open`` becomes a check: its guards and test, and the slice of
earlier guards and steps its reads depend on. A site inside a loop or try, whose own condition needs more than
the evaluator (pyexpr.py) takes, or that reads a value no step can give, is listed as skipped with why; a loop
that only searches (``for x in xs: if test: raise``) is the site ``any(test for x in xs)``. Names of the release
that compare by identity (enum members, functions, torch dtypes: megatron_symbols.py, which asks the installed
torch which names are dtypes) are tokens; a call to a local lambda is its body on the call's arguments;
``args.X.append(v)`` is ``args.X + [v]``. The parser's converters of options it holds as release objects (an
enum by member name, a ``type=lambda``) are in the table's ``converters``.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from meshlint.frameworks.megatron import flags, pyexpr
from meshlint.generate import megatron_refusals as refusals

OUT = Path(__file__).resolve().parent.parent / "frameworks" / "megatron" / "validate_checks_0_16.json"
ARGS = "megatron/training/arguments.py"
INIT = "megatron/training/initialize.py"
FUNCTION = "validate_args"
# values validate_args reads that the parser does not set: parse_args sets them from the environment
RUNTIME = {"world_size": "WORLD_SIZE (the launch's world)", "rank": "RANK (differs per process)"}
EXITS = ("exit", "quit")
LOCAL = "L__"
ENTRY_DEFAULTS = "ENTRY_DEFAULTS"  # the launch's entry script's args_defaults keys, given at run time


def local(function: str, name: str) -> str:
    """A local variable's name in the table: unique across validate_args and the helpers walked inline."""
    return f"{LOCAL}{function}__{name}"


class _Walk:
    """validate_args in source order: guards, steps and the sites' conditions."""

    def __init__(self, root: Path, tree: ast.Module, function: str = FUNCTION, supers: dict | None = None,
                 owners: dict | None = None, symbols: dict | None = None):
        self.root, self.tree = root, tree
        # a combined walk (megatron_pipeline.py): FunctionDef -> the prefix of its sites' keys ("file:line")
        self.owners = owners
        # source text -> the expression it stands for: a str enum member's string, an identity token (S__...)
        self.symbols = symbols or {}
        self.lambdas: dict = {}  # local -> (its Lambda, the walk's context there): calls to it are inlined
        # a combined walk: "args.X" -> the source of the config field X's class default, what ``del args.X``
        # leaves it at (no reader of args.X follows in validate_args: it would fail there)
        self.deleted: dict = {}
        self.function = function  # whose asserts/raises are sites (megatron_config_checks walks __post_init__)
        self.supers = supers or {}  # method -> the base class's FunctionDef ``super().method()`` runs (inlined)
        self.guards: list = []   # {id, line, test (source)}
        self.steps: list = []    # {line, target, guards: [[id, polarity]], value (source) | None, why}
        self.sites: dict = {}    # line -> {guards, test, end_line} or {why}
        self.exits: set = set()  # guards an earlier exit()/return adds: not what a site itself asks
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.seq = 0             # walk order: what runs before what (an inlined helper's lines are elsewhere)
        self.imported = {a.asname or a.name: n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                         for a in n.names}

    # -- variables: "args.X" or "L__<function>__<name>" (a local of validate_args or of an inlined helper)
    def var(self, node, ctx: dict):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == ctx["args"]:
            return "args." + node.attr
        if isinstance(node, ast.Name) and node.id != ctx["args"]:
            return local(ctx["fn"], node.id)
        return None

    def rename(self, expr: ast.AST, ctx: dict) -> ast.AST:
        """The expression with the helper's parameter called ``args`` and its locals prefixed."""
        if expr is None:
            return None
        fn, param = ctx["fn"], ctx["args"]
        keys = self.default_keys() if ctx.get("defaults") else ()
        bound = {n.id for g in ast.walk(expr) if isinstance(g, ast.comprehension) for n in ast.walk(g.target)
                 if isinstance(n, ast.Name)}

        symbols, lambdas, walk = self.symbols, self.lambdas, self

        class R(ast.NodeTransformer):
            def visit_Attribute(self, n):
                text = ast.unparse(n)
                return ast.copy_location(_expr(symbols[text]), n) if text in symbols else self.generic_visit(n)

            def visit_Call(self, n):
                f = n.func
                if isinstance(f, ast.Name) and f.id in ctx["locals"] and lambdas.get(local(fn, f.id)) and not n.keywords:
                    lam, at = lambdas[local(fn, f.id)]  # a local lambda: its body on the call's arguments
                    params = [a.arg for a in lam.args.args]
                    if len(params) == len(n.args) and not (lam.args.vararg or lam.args.kwarg or lam.args.kwonlyargs):
                        body = walk.rename(lam.body, {**at, "locals": at["locals"] - set(params)})
                        values = {p: self.visit(a) for p, a in zip(params, n.args)}

                        class Bind(ast.NodeTransformer):
                            def visit_Name(self, m):
                                return values[m.id] if m.id in values else m
                        return Bind().visit(body)
                # ``defaults.get(K, D)`` of the entry's args_defaults: D where no entry script passes K
                if isinstance(f, ast.Attribute) and f.attr == "get" and isinstance(f.value, ast.Name) \
                        and f.value.id == ctx.get("defaults") and n.args and isinstance(n.args[0], ast.Constant) \
                        and n.args[0].value not in keys:
                    return n.args[1] if len(n.args) > 1 else ast.Constant(None)
                return self.generic_visit(n)

            def visit_Name(self, n):
                if n.id in symbols and n.id not in ctx["locals"]:
                    return ast.copy_location(_expr(symbols[n.id]), n)
                if n.id == param:
                    return ast.copy_location(ast.Name("args", ast.Load()), n)
                if n.id in bound or n.id in pyexpr.BUILTINS or n.id not in ctx["locals"]:
                    return n
                return ast.copy_location(ast.Name(local(fn, n.id), ast.Load()), n)
        return R().visit(ast.parse(ast.unparse(expr), mode="eval").body)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def walk_function(self, func: ast.FunctionDef, param: str, guards: list, opaque: str | None, depth: int,
                      at: int | None = None, name: str | None = None, record: str | None = None):
        local_names = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        local_names |= {a.asname or a.name.split(".")[0] for n in ast.walk(func) if isinstance(n, (ast.Import, ast.ImportFrom))
                        for a in n.names}
        own = (func.name == self.function and depth == 0) if self.owners is None else self.owners.get(func, False)
        ctx = {"fn": name or func.name, "args": param, "locals": local_names, "depth": depth, "at": at, "own": own,
               "record": record}
        self.body(func.body, guards, opaque, ctx)

    def body(self, stmts: list, guards: list, opaque: str | None, ctx: dict) -> None:
        for i, node in enumerate(stmts):
            self.mutations(node, guards, opaque, ctx)
            if isinstance(node, ast.If):
                gid = len(self.guards)
                self.guards.append({"id": gid, "seq": self.next_seq(), "line": ctx["at"] or node.lineno,
                                    "test": ast.unparse(self.rename(node.test, ctx))})
                self.body(node.body, guards + [[gid, True]], opaque, ctx)
                self.body(node.orelse, guards + [[gid, False]], opaque, ctx)
                if _terminates(node.body) and not node.orelse:
                    guards = guards + [[gid, False]]  # what follows runs only where the test was false
                    self.exits.add(gid)
            elif isinstance(node, (ast.Assert, ast.Raise)) and ctx["own"]:
                key = node.lineno if ctx["own"] is True else f"{ctx['own']}:{node.lineno}"
                if opaque:
                    self.sites[key] = {"why": opaque}
                else:
                    test = ast.unparse(self.rename(node.test, ctx)) if isinstance(node, ast.Assert) else None
                    self.sites[key] = {"guards": guards, "test": test, "end_line": node.end_lineno,
                                               "seq": self.next_seq()}
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                if isinstance(node, ast.AugAssign):
                    value = ast.BinOp(node.target, node.op, node.value)
                for t in targets:
                    if self.record(node, t, value, guards, opaque, ctx):
                        continue
                    var = self.var(t, ctx)
                    if var is None:
                        for sub in ast.walk(t):  # args.X[...] = ..., a, b = ...: what it writes is not followed
                            v = self.var(sub, ctx) if isinstance(sub, (ast.Attribute, ast.Name)) else None
                            if v:
                                self.step(node.lineno, v, guards, None, "written in part", ctx)
                        continue
                    why = opaque or (None if len(targets) == 1 and value is not None else "assigned in a chain")
                    if var in self.lambdas or isinstance(value, ast.Lambda):
                        # a local assigned a lambda once and nothing else: its calls after this line are inlined
                        # (rename); a second assignment leaves every later call not followed
                        once = var not in self.lambdas and not why and var.startswith(LOCAL)
                        self.lambdas[var] = (value, ctx) if once else None
                    self.step(node.lineno, var, guards, None if why else self.rename(value, ctx), why, ctx)
            elif isinstance(node, ast.Delete):
                for t in node.targets:
                    var = self.var(t, ctx)
                    if var:  # a combined walk: a deleted option leaves its config field at the class default
                        default = self.deleted.get(var)
                        self.step(node.lineno, var, guards, None if default is None or opaque else _expr(default),
                                  opaque or (None if default is not None else "deleted"), ctx)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    self.step(node.lineno, local(ctx["fn"], a.asname or a.name.split(".")[0]), guards, None,
                              "an import", ctx)
            elif ctx["own"] and not opaque and _search(node):
                # ``for x in xs: if test: raise``: a pure search, the site's condition is any(test for x in xs)
                check = node.body[0]
                found = ast.Call(ast.Name("any", ast.Load()), [ast.GeneratorExp(check.test, [ast.comprehension(
                    node.target, node.iter, [], 0)])], [])
                raised = check.body[0]
                key = raised.lineno if ctx["own"] is True else f"{ctx['own']}:{raised.lineno}"
                self.sites[key] = {"guards": guards, "end_line": raised.end_lineno, "seq": self.next_seq(),
                                   "test": ast.unparse(self.rename(ast.UnaryOp(ast.Not(), found), ctx))}
            elif isinstance(node, (ast.For, ast.While, ast.AsyncFor, ast.Try, ast.With, ast.AsyncWith, ast.Match)):
                why = opaque or f"inside a {type(node).__name__.lower()} (line {node.lineno})"
                if isinstance(node, (ast.For, ast.AsyncFor)):
                    for sub in ast.walk(node.target):
                        v = self.var(sub, ctx) if isinstance(sub, ast.Name) else None
                        if v:
                            self.step(node.lineno, v, guards, None, why, ctx)
                ctx = {**ctx, "loop_guards": guards}
                for field in ("body", "orelse", "finalbody"):
                    self.body(getattr(node, field, []) or [], guards, why, ctx)
                for h in getattr(node, "handlers", []) or []:
                    self.body(h.body, guards, why, ctx)
                for case in getattr(node, "cases", []) or []:
                    self.body(case.body, guards, why, ctx)
                ctx = {k: v for k, v in ctx.items() if k != "loop_guards"}
            elif isinstance(node, (ast.Return, ast.Continue, ast.Break)) and i < len(stmts) - 1:
                opaque = opaque or f"after an early {type(node).__name__.lower()} (line {node.lineno})"
            elif isinstance(node, ast.FunctionDef):
                self.step(node.lineno, local(ctx["fn"], node.name), guards, None, "a nested function", ctx)

    def record(self, node, target, value, guards, opaque, ctx) -> bool:
        """A write into the dict ``ctx["record"]`` names (core_transformer_config_from_args' ``kw_args``: the
        config's fields, which a combined walk keeps as ``args.X``): ``d['x'] = v`` writes args.x; the copy
        ``d[f.name] = getattr(args, f.name)`` changes nothing; any other key may write any field."""
        if not (isinstance(target, ast.Subscript) and _is_name(target.value, ctx.get("record") or "")):
            return False
        key = target.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(node, ast.Assign):
            self.step(node.lineno, "args." + key.value, guards, None if opaque else self.rename(value, ctx), opaque, ctx)
        elif not (isinstance(value, ast.Call) and _is_name(value.func, "getattr") and len(value.args) == 2
                  and _is_name(value.args[0], ctx["args"]) and ast.unparse(value.args[1]) == ast.unparse(key)):
            self.step(node.lineno, "args.*", guards, None, f"{ast.unparse(target)} = ... is not followed", ctx)
        return True

    def step(self, line, var, guards, value, why, ctx):
        if value is not None and _supported(ast.unparse(value)):
            value, why = None, _supported(ast.unparse(value))
        self.steps.append({"seq": self.next_seq(), "line": ctx["at"] or line, "target": var, "guards": guards,
                           "value": None if value is None else ast.unparse(value), "why": why})

    def mutations(self, node: ast.AST, guards: list, opaque, ctx: dict) -> None:
        """Writes to ``args`` hidden in calls: a method call on ``args.X`` (append, extend, ...), setattr, and
        the helpers validate_args passes ``args`` to (walked inline, or: any option may change)."""
        scan = [node.test] if isinstance(node, ast.If) else [] if isinstance(
            node, (ast.For, ast.While, ast.Try, ast.With, ast.FunctionDef)) else [node]
        for part in scan:
            for call in (n for n in ast.walk(part) if isinstance(n, ast.Call)):
                f = call.func
                if isinstance(f, ast.Attribute) and (_is_name(f.value, ctx["args"]) or (
                        isinstance(f.value, ast.Call) and _is_name(f.value.func, "super"))):
                    # a method of the object itself: the base class's, walked inline where known, else not followed
                    inline = self.supers.get(f.attr) if isinstance(f.value, ast.Call) else None
                    if inline is None or ctx["depth"] > 3:
                        self.step(call.lineno, "args.*", guards, None, f"{ast.unparse(f)}() is not followed", ctx)
                    else:
                        self.walk_function(inline, inline.args.args[0].arg, guards, opaque, ctx["depth"] + 1,
                                           ctx["at"] or call.lineno, name="super")
                    continue
                if isinstance(f, ast.Attribute) and ctx.get("record") and _is_name(f.value, ctx["record"]):
                    key = call.args[0] if call.args else None
                    if f.attr == "pop" and isinstance(key, ast.Constant):  # the field keeps its class default
                        self.step(call.lineno, "args." + key.value, guards, None, f"{ctx['record']}.pop", ctx)
                    elif f.attr not in ("get", "keys", "items", "values"):
                        self.step(call.lineno, "args.*", guards, None, f"{ast.unparse(f)}() is not followed", ctx)
                    continue
                if isinstance(f, ast.Attribute):
                    base = f.value
                    while isinstance(base, (ast.Attribute, ast.Subscript)):
                        var = self.var(base, ctx) if isinstance(base, ast.Attribute) else None
                        if var and var.startswith("args.") and base is f.value and f.attr == "append" \
                                and len(call.args) == 1 and not call.keywords:  # the list with one more item
                            grown = ast.BinOp(base, ast.Add(), ast.List([call.args[0]], ast.Load()))
                            self.step(call.lineno, var, guards, None if opaque else self.rename(grown, ctx), opaque, ctx)
                            break
                        if var and var.startswith("args."):
                            self.step(call.lineno, var, guards, None, f"{ast.unparse(f)}() may change it", ctx)
                            break
                        base = base.value
                passes = [a for a in call.args if isinstance(a, ast.Name) and a.id == ctx["args"]]
                if not passes:
                    continue
                name = f.id if isinstance(f, ast.Name) else None
                if name == "setattr":
                    key = call.args[1] if len(call.args) > 1 else None
                    if isinstance(key, ast.Constant):
                        self.step(call.lineno, "args." + key.value, guards, None, "setattr", ctx)
                    elif "loop_guards" in ctx and ctx["fn"] == FUNCTION and ctx["depth"] == 0:
                        self.defaults_loop(call, ctx)
                    else:
                        self.step(call.lineno, "args.*", guards, None, f"setattr(args, {ast.unparse(key)}, ...)", ctx)
                    continue
                if name in ("getattr", "hasattr", "vars", "print", "isinstance"):
                    continue
                helper = self.helper(name) if ctx.get("inline", True) else None
                if helper is None or ctx["depth"] > 3:
                    self.step(call.lineno, "args.*", guards, None, f"{ast.unparse(f)}(args) is not followed", ctx)
                    continue
                param = helper.args.args[call.args.index(passes[0])].arg
                self.walk_function(helper, param, guards, opaque, ctx["depth"] + 1, ctx["at"] or call.lineno)

    def defaults_loop(self, call: ast.Call, ctx: dict) -> None:
        """validate_args' ``for key in defaults: ... setattr(args, key, defaults[key])`` (arguments.py:457-466):
        the entry script's ``args_defaults`` fill the options still None. Which keys: every ``args_defaults``
        dict a script of the checkout passes; each is set where that option is None and the launch's entry script
        passes it (``ENTRY_DEFAULTS``: the entry's keys, from ``entry_defaults``; unknown for another entry)."""
        for key in self.default_keys():
            gid = len(self.guards)
            self.guards.append({"id": gid, "seq": self.next_seq(), "line": call.lineno,
                                "test": f"args.{key} is None and {key!r} in {ENTRY_DEFAULTS}"})
            self.step(call.lineno, "args." + key, ctx["loop_guards"] + [[gid, True]], None,
                      "the entry script's args_defaults", ctx)

    def default_keys(self) -> list:
        if getattr(self, "_default_keys", None) is not None:
            return self._default_keys
        keys: set = set()
        for path in sorted(self.root.rglob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            if "args_defaults" not in text:
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.keyword) and node.arg == "args_defaults" and isinstance(node.value, ast.Dict):
                    keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
        self._default_keys = sorted(keys)
        return self._default_keys

    def helper(self, name):
        if name in self.functions:
            return self.functions[name]
        module = self.imported.get(name)
        if not module or not module.startswith("megatron."):
            return None
        path = self.root / (module.replace(".", "/") + ".py")
        if not path.is_file():
            return None
        tree = ast.parse(path.read_text(encoding="utf-8"))
        return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _search(node) -> bool:
    """Whether ``node`` is ``for x in xs: if test: raise ...`` (nothing else: no write, no else)."""
    return isinstance(node, ast.For) and not node.orelse and isinstance(node.target, ast.Name) \
        and len(node.body) == 1 and isinstance(node.body[0], ast.If) and not node.body[0].orelse \
        and len(node.body[0].body) == 1 and isinstance(node.body[0].body[0], ast.Raise)


def _expr(source: str) -> ast.AST:
    return ast.parse(source, mode="eval").body


def _is_name(node, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _terminates(body: list) -> bool:
    last = body[-1] if body else None
    return isinstance(last, ast.Return) or (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                                            and isinstance(last.value.func, ast.Name) and last.value.func.id in EXITS)


def _reads(source: str | None) -> set:
    """The variables an expression reads: args.X and prefixed locals (names a generator binds excluded)."""
    if source is None:
        return set()
    expr = ast.parse(source, mode="eval")
    bound = {n.id for g in ast.walk(expr) if isinstance(g, ast.comprehension) for n in ast.walk(g.target)
             if isinstance(n, ast.Name)}
    out = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "args":
            out.add("args." + n.attr)
        elif isinstance(n, ast.Name) and n.id.startswith(LOCAL) and n.id not in bound:
            out.add(n.id)
    return out


def _plain(text: str) -> str:
    """Text naming the table's locals as the source does."""
    return re.sub(LOCAL + r"\w+?__(\w+)", r"\1", text)


def _ordered_reads(source: str | None) -> list:
    """The args.X an expression reads, in source order."""
    if source is None:
        return []
    nodes = [n for n in ast.walk(ast.parse(source, mode="eval")) if isinstance(n, ast.Attribute)
             and isinstance(n.value, ast.Name) and n.value.id == "args"]
    return ["args." + n.attr for n in sorted(nodes, key=lambda n: n.col_offset)]


def _supported(source: str) -> str | None:
    """Why the evaluator cannot take this expression (a call, a module's attribute, an f-string), or None."""
    expr = ast.parse(source, mode="eval").body

    for node in ast.walk(expr):  # structure only: every construct must be one pyexpr takes
        if isinstance(node, (ast.Attribute, ast.Name)) and not isinstance(node.ctx, ast.Load) and not (
                isinstance(node, ast.Name) and _bound(expr, node.id)):
            return f"writes {ast.unparse(node)}"
        if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id == "args"):
            return f"reads {ast.unparse(node)}"
        if isinstance(node, ast.Name) and not node.id.startswith((LOCAL, pyexpr.SYMBOL)) and node.id not in pyexpr.BUILTINS and node.id not in (
                "args", "True", "False", "None") and not _bound(expr, node.id):
            return f"reads {node.id}"
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in pyexpr.BUILTINS):
            return f"calls {ast.unparse(node.func)}"
        if isinstance(node, (ast.JoinedStr, ast.Lambda, ast.DictComp, ast.SetComp,
                             ast.Starred, ast.NamedExpr, ast.Await, ast.Slice)):
            return f"holds {type(node).__name__}"
    return None


def _bound(expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for g in ast.walk(expr) if isinstance(g, ast.comprehension)
               for n in ast.walk(g.target))


def _entry(walk: _Walk, root: Path) -> None:
    """initialize_megatron's statements before its validate_args call (initialize.py:64-87), walked first: what
    they write to args (--use-checkpoint-args loads options from a checkpoint: any may change) is a step too."""
    tree = ast.parse((root / INIT).read_text(encoding="utf-8"))
    for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for i, node in enumerate(func.body):
            if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == FUNCTION
                   for c in ast.walk(node)):
                names = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                params = [a.arg for a in func.args.args]
                ctx = {"fn": func.name, "args": "args", "locals": names - {"args"}, "depth": 0, "at": None,
                       "own": False, "inline": False,
                       "defaults": next((p for p in params if p == "args_defaults"), None)}
                walk.body(func.body[:i], [], None, ctx)
                return


def _entry_defaults(root: Path) -> dict:
    """entry script (a top-level script of the checkout that calls pretrain or initialize_megatron) -> the keys of
    the args_defaults dict it passes ([] where it passes none); a script passing something else is left out."""
    out: dict = {}
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id in ("pretrain", "initialize_megatron")]
        if not calls:
            continue
        given = [k.value for c in calls for k in c.keywords if k.arg == "args_defaults"]
        if all(isinstance(v, ast.Dict) and all(isinstance(k, ast.Constant) for k in v.keys) for v in given):
            out[path.name] = sorted({k.value for v in given for k in v.keys})
    return out


def _entry_guard(root: Path) -> list:
    """The tests under which initialize_megatron calls validate_args (not validate_yaml): [[test, polarity]]."""
    tree = ast.parse((root / INIT).read_text(encoding="utf-8"))
    out: list = []

    def find(stmts, conds) -> bool:
        for node in stmts:
            if isinstance(node, ast.If):
                if find(node.body, conds + [[ast.unparse(node.test), True]]) or \
                        find(node.orelse, conds + [[ast.unparse(node.test), False]]):
                    return True
            elif isinstance(node, (ast.FunctionDef, ast.With, ast.Try, ast.For)):
                if find([*node.body, *getattr(node, "orelse", [])], conds):
                    return True
            elif any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == FUNCTION
                     for c in ast.walk(node)):
                out.extend(conds)
                return True
        return False
    find(tree.body, [])
    return out


def _slice(walk: _Walk, guards: list, reads: set, seq: int) -> tuple[list, list]:
    """The guard ids and step indices a condition (its guards, its reads at walk position ``seq``) depends on."""
    need_guards: set = set()
    need_steps: set = set()
    todo = [(v, seq) for v in reads] + [("#g", gid) for gid, _ in guards]
    seen = set()
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        if item[0] == "#g":
            g = walk.guards[item[1]]
            need_guards.add(g["id"])
            todo += [(v, g["seq"]) for v in _reads(g["test"])]
            continue
        var, before = item
        for i, s in enumerate(walk.steps):
            if s["seq"] >= before:
                continue
            if s["target"] == var or (s["target"] == "args.*" and var.startswith("args.")):
                need_steps.add(i)
                todo += [(v, s["seq"]) for v in _reads(s["value"])] + [("#g", gid) for gid, _ in s["guards"]]
    return sorted(need_guards), sorted(need_steps)


def _check(walk: _Walk, site, dests: set, key=None) -> tuple[dict, str | None]:
    """A site's check (its condition, guards, the slice it depends on, the options it names), or why not;
    ``key``: the site's key in a combined walk (default: its line)."""
    found = walk.sites.get(site.line if key is None else key)
    if found is None or found.get("why"):
        return {}, "not found by the walk" if found is None else found["why"]
    own = [walk.guards[g]["test"] for g, _ in found["guards"]] + ([found["test"]] if found["test"] else [])
    why = next((w for w in map(_supported, own) if w), None)
    if why:
        return {}, why
    reads = _reads(found["test"])
    gids, sids = _slice(walk, found["guards"], reads, found["seq"])
    read_all = reads | {v for g in gids for v in _reads(walk.guards[g]["test"])} | {
        v for i in sids for v in _reads(walk.steps[i]["value"])}
    written = {walk.steps[i]["target"] for i in sids}
    for v in sorted(read_all - written):
        name = v[5:] if v.startswith("args.") else None
        if name is None:
            return {}, f"reads {v.split('__', 2)[2]}, which nothing before it sets"
        if name not in dests and name not in RUNTIME:
            return {}, f"reads args.{name}, which the parser does not set"
    # a value not followed that is always written where the site's own guards hold: never decidable
    held = {tuple(g) for g in found["guards"]}
    always = [walk.steps[i] for i in sids if walk.steps[i]["value"] is None
              and {tuple(g) for g in walk.steps[i]["guards"]} <= held]
    if always:
        s = always[0]
        return {}, f"validate_args sets {s['target']} at line {s['line']} in a way not followed ({s['why']})"
    named = [v for g, _ in found["guards"] if g not in walk.exits for v in _ordered_reads(walk.guards[g]["test"])]
    named += _ordered_reads(found["test"])
    return {"condition": f"not ({found['test']})" if found["test"] else "True", "end_line": found["end_line"],
            "guards": found["guards"], "needs_guards": gids, "needs_steps": sids,
            "options": list(dict.fromkeys(v[5:] for v in named if v.startswith("args.") and v[5:] in dests))}, None


def _converters(root: Path, tree: ast.Module, symbols: dict) -> dict:
    """What the parser makes of a word for the options whose type converts it to an object of the release:
    {"lambdas": {dest: {param, body}}: a ``type=lambda x: ...`` of arguments.py pyexpr evaluates (symbols as
    tokens), "enums": {dest: enum token}: an option argument_utils.py builds from an Enum field
    (``enum_type_handler``: ``config_type[cli_arg]``), "defaults": {dest: token}: an enum member default,
    "members": {enum token: [member names]}, "patterns": {dest: converter}: a converter that hands a word holding
    ``[`` to ``_eval_pattern`` (a list expression of ints) and any other word to ``int``}."""
    table = flags.table()["flags"]
    out: dict = {"lambdas": {}, "enums": {}, "defaults": {}, "members": {}, "patterns": {}}
    pattern_types = _pattern_converters(tree)
    for entry in table.values():
        if entry["type"] in pattern_types:
            out["patterns"][entry["dest"]] = entry["type"]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in table):
            continue
        kind = next((k.value for k in node.keywords if k.arg == "type"), None)
        if isinstance(kind, ast.Lambda) and len(kind.args.args) == 1:
            param = kind.args.args[0].arg
            body = ast.unparse(_Walk(root, tree, symbols=symbols).rename(kind.body, {
                "fn": "lambda", "args": "args", "locals": set()}))
            names = {n.id for n in ast.walk(_expr(body)) if isinstance(n, ast.Name)}
            if all(n == param or n.startswith(pyexpr.SYMBOL) for n in names) and not _supported(
                    body.replace(param, "args.x")):
                out["lambdas"][table[node.args[0].value]["dest"]] = {"param": param, "body": body}
    handler = (root / "megatron/training/argument_utils.py").read_text(encoding="utf-8")
    enum_handler = re.search(r"def enum_type_handler\(cli_arg\):\s*return config_type\[cli_arg\]", handler)
    for entry in table.values():
        default = entry["default"]
        member = re.fullmatch(r"<(\w+)\.(\w+): .*>", default.get("repr", "")) if isinstance(default, dict) else None
        if member and symbols.get(member.group(1), "").startswith(pyexpr.SYMBOL) \
                and f"{member.group(1)}.{member.group(2)}" in symbols:
            out["defaults"][entry["dest"]] = symbols[f"{member.group(1)}.{member.group(2)}"]
            if entry["type"] == "enum_type_handler" and enum_handler:
                out["enums"][entry["dest"]] = symbols[member.group(1)]
    for text, value in symbols.items():  # the members of each enum a converter or a default names
        cls = value.rpartition("__")[0]
        if "." in text and value.startswith(pyexpr.SYMBOL) and (
                cls in out["enums"].values() or any(cls in c["body"] for c in out["lambdas"].values())):
            out["members"].setdefault(cls, []).append(text.split(".", 1)[1])
    return out


def _pattern_converters(tree: ast.Module) -> set:
    """The converter functions of arguments.py of the one shape meshlint models: an int passes, a str holding
    ``[`` returns ``_eval_pattern(x)`` (its characters checked, then evaluated), any other str returns ``int(x)``."""
    out = set()
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or len(fn.args.args) != 1:
            continue
        x = fn.args.args[0].arg
        returns = [ast.unparse(n.value) for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
        if sorted(returns) == sorted([x, f"_eval_pattern({x})", f"int({x})"]) and \
                f"'[' in {x}" in ast.unparse(fn):
            out.add(fn.name)
    return out


def build(root: Path) -> dict:
    root = Path(root)
    tree = ast.parse((root / ARGS).read_text(encoding="utf-8"))
    from meshlint.generate import megatron_symbols  # (it imports nothing of this module)

    symbols = megatron_symbols.table(root, ARGS)
    walk = _Walk(root, tree, symbols=symbols)
    _entry(walk, root)
    walk.walk_function(walk.functions[FUNCTION], "args", [], None, 0)
    dests = set(flags.defaults())
    checks, skipped = [], []
    for site in refusals.enumerate_sites(root):
        if site.function != FUNCTION or site.file != ARGS or refusals.classify(site, generated=False)[0] != "open":
            continue
        row = {"site": site.where, "line": site.line, "message": site.message, "shown": site.condition}
        check, why = _check(walk, site, dests)
        if why:
            skipped.append({**row, "why": _plain(why)})
        else:
            checks.append({**row, **check})
    used_g = sorted({g for c in checks for g in c["needs_guards"]})
    used_s = sorted({s for c in checks for s in c["needs_steps"]})
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"framework": "megatron", "version": "0.16.1", "tag": "core_v0.16.1", "commit": commit or None,
            "generated_by": "python -m meshlint.generate.megatron_validate_checks",
            "entry_guard": _entry_guard(root), "entry_defaults": _entry_defaults(root), "runtime": sorted(RUNTIME),
            "converters": _converters(root, tree, symbols),
            "guards": {str(g): walk.guards[g] for g in used_g},
            "steps": {str(s): walk.steps[s] for s in used_s},
            "checks": checks, "skipped": skipped}


def main(argv: list | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__.splitlines()[3].strip(), file=sys.stderr)
        return 2
    table = build(Path(argv[0]))
    OUT.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(table['checks'])} checks, {len(table['skipped'])} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
