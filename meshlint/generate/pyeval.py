"""A small ast interpreter for a framework's config-building Python, tracking the source lines behind every value.

It evaluates the functions that build model configs (literal constructor
calls, arithmetic, loops, helpers, dataclass defaults, properties) the way they
are written, without importing the framework or torch. Every value carries the
set of source lines of the literals it was computed from, including the
conditions and loop bounds that decided it, so a generated number can cite
exactly where it comes from. What cannot be followed (a call into torch, a
condition on a runtime value) becomes an ``Unknown`` that says why; a branch
that depends on one raises ``EvalError``. Nothing is guessed.
"""

from __future__ import annotations

import ast
import copy
import math
import operator
import os

EMPTY: frozenset = frozenset()


class EvalError(Exception):
    """The code cannot be followed statically here (the message says why and where)."""

    def __init__(self, message: str, loc: tuple | None = None):
        where = f"{loc[0]}:{loc[1]}: " if loc else ""
        super().__init__(where + message)
        self.loc = loc
        self.reason = message


class V:
    """A value and the source lines (``(relpath, line)``) it was computed from."""

    __slots__ = ("v", "o")

    def __init__(self, v, o: frozenset = EMPTY):
        self.v = v
        self.o = o

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"V({self.v!r})"


class Unknown:
    """A value outside what can be read statically (a call into torch, a runtime input)."""

    __slots__ = ("reason", "loc")

    def __init__(self, reason: str, loc: tuple | None = None):
        self.reason = reason
        self.loc = loc

    def describe(self) -> str:
        return f"{self.reason} ({self.loc[0]}:{self.loc[1]})" if self.loc else self.reason

    def __repr__(self) -> str:  # pragma: no cover
        return f"Unknown({self.describe()})"


class Lst:
    """A list; ``len_o`` holds the lines its length depends on (loop bounds, literals)."""

    __slots__ = ("items", "len_o")

    def __init__(self, items: list, len_o: frozenset = EMPTY):
        self.items = items
        self.len_o = len_o


class Tup(Lst):
    """A tuple (same representation, immutable by convention)."""

    __slots__ = ()


class Dct:
    __slots__ = ("d", "len_o")

    def __init__(self, d: dict, len_o: frozenset = EMPTY):
        self.d = d
        self.len_o = len_o


class FieldSpec:
    """``dataclasses.field(default=..., default_factory=...)``."""

    __slots__ = ("default", "factory")

    def __init__(self, default, factory):
        self.default = default
        self.factory = factory


class Module:
    __slots__ = ("name", "path", "rel", "is_pkg", "globals", "state", "tree")

    def __init__(self, name: str, path: str, rel: str, is_pkg: bool):
        self.name, self.path, self.rel, self.is_pkg = name, path, rel, is_pkg
        self.globals: dict = {}
        self.state = "new"
        self.tree = None


class Lazy:
    """``from X import n``: resolved on first use (imports are lazy, so only used modules load)."""

    __slots__ = ("module", "attr", "loc")

    def __init__(self, module: str, attr: str | None, loc: tuple):
        self.module, self.attr, self.loc = module, attr, loc


class ModRef:
    __slots__ = ("mod",)

    def __init__(self, mod: Module):
        self.mod = mod


class Ext:
    """A name outside the source tree (torch, a third-party package, most of the standard library)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class ClassInfo:
    __slots__ = ("mod", "node", "qualname", "frame", "_ns", "_bases", "_mro")

    def __init__(self, mod: Module, node: ast.ClassDef, qualname: str, frame):
        self.mod, self.node, self.qualname, self.frame = mod, node, qualname, frame
        self._ns = None
        self._bases = None
        self._mro = None


class CRef:
    """A class as reached in code: ``owner`` is the class it was reached through (``Llama3Block.Config``)."""

    __slots__ = ("info", "owner")

    def __init__(self, info: ClassInfo, owner: ClassInfo | None):
        self.info, self.owner = info, owner


class Obj:
    """An instance of a class of the tree (a config dataclass, or in module mode a module): its fields as set.

    ``args``: in module mode, the arguments its ``__init__`` was called with (name -> V).
    """

    __slots__ = ("info", "owner", "fields", "loc", "args")

    def __init__(self, info: ClassInfo, owner: ClassInfo | None, fields: dict, loc: tuple | None):
        self.info, self.owner, self.fields, self.loc = info, owner, fields, loc
        self.args = None


class Leaf:
    """A module of a class outside the tree (``nn.Linear``...), as an ``ext_hook`` describes it:
    its parameter count (None: not known) and its named sizes."""

    __slots__ = ("kind", "numel", "dims")

    def __init__(self, kind: str, numel: int | None, dims: dict):
        self.kind, self.numel, self.dims = kind, numel, dims


class Func:
    __slots__ = ("mod", "node", "closure", "defaults", "kind", "qualname")

    def __init__(self, mod, node, closure, defaults, kind, qualname):
        self.mod, self.node, self.closure, self.defaults, self.kind, self.qualname = \
            mod, node, closure, defaults, kind, qualname


class Bound:
    __slots__ = ("func", "self_v")

    def __init__(self, func, self_v: V):
        self.func, self.self_v = func, self_v


class Partial:
    __slots__ = ("func", "args", "kwargs")

    def __init__(self, func: V, args: list, kwargs: dict):
        self.func, self.args, self.kwargs = func, args, kwargs


class Builtin:
    __slots__ = ("name", "fn", "pytype")

    def __init__(self, name: str, fn, pytype=None):
        self.name, self.fn, self.pytype = name, fn, pytype


class SuperRef:
    """``super()`` inside a module's ``__init__`` run in module mode: the next classes of the instance."""

    __slots__ = ("cls", "self_v")

    def __init__(self, cls: ClassInfo, self_v: V):
        self.cls, self.self_v = cls, self_v


class Frame:
    __slots__ = ("mod", "locals", "parent", "ctrl", "is_module")

    def __init__(self, mod: Module, locals_: dict, parent, is_module: bool = False):
        self.mod, self.locals, self.parent, self.is_module = mod, locals_, parent, is_module
        self.ctrl = EMPTY


class _Return(Exception):
    def __init__(self, value: V):
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge}
_PRIMS = (int, float, str, bool, type(None), complex, bytes)
_EXC_NAMES = {"Exception", "ValueError", "TypeError", "RuntimeError", "NotImplementedError", "AssertionError",
              "KeyError", "IndexError", "AttributeError", "ImportError", "ModuleNotFoundError"}


def union(*vals) -> frozenset:
    out = EMPTY
    for v in vals:
        if v.o:
            out = out | v.o
    return out


class Interp:
    """Evaluates code of one source tree (``root``); modules load lazily by dotted name."""

    def __init__(self, root: str, max_steps: int = 20_000_000):
        self.root = os.path.abspath(root)
        self.modules: dict[str, Module | None] = {}
        self.steps = 0
        self.max_steps = max_steps
        self.depth = 0
        self.builtins = self._make_builtins()
        # Optional hooks (None: off). effect_hook(loc, reason): a call made for its side effects only
        # (an expression statement) could not be followed; it is reported there and evaluation goes on.
        # ext_hook(name, args, kwargs, loc) -> V | None: a call outside the tree (None: the default).
        # build_hook(config): a config's ``build()`` is called (the module is not built).
        self.effect_hook = None
        self.ext_hook = None
        self.build_hook = None
        # Module mode (torchtitan v0.2's nn.Module models): calling a class of the tree that is not a
        # dataclass runs its __init__ on a new instance, statement by statement; a statement that cannot
        # be followed is skipped and listed in ``skipped`` as (loc, reason).
        self.module_mode = False
        self.skipped: list = []

    # ------------------------------------------------------------------ modules

    def find_module(self, name: str) -> tuple | None:
        parts = name.split(".")
        base = os.path.join(self.root, *parts)
        if os.path.isfile(os.path.join(base, "__init__.py")):
            return os.path.join(base, "__init__.py"), True
        if os.path.isfile(base + ".py"):
            return base + ".py", False
        if os.path.isdir(base) and parts[0] in self._roots():
            return None, True  # a namespace package
        return None

    def _roots(self) -> set:
        return {e for e in os.listdir(self.root) if os.path.isdir(os.path.join(self.root, e))}

    def in_tree(self, name: str) -> bool:
        return self.find_module(name) is not None

    def module(self, name: str) -> Module | None:
        if name in self.modules:
            return self.modules[name]
        found = self.find_module(name)
        if found is None:
            self.modules[name] = None
            return None
        path, is_pkg = found
        rel = os.path.relpath(path, self.root) if path else name.replace(".", "/")
        mod = Module(name, path, rel, is_pkg)
        self.modules[name] = mod
        if path is None:
            mod.state = "done"
            return mod
        mod.state = "loading"
        try:
            with open(path, encoding="utf-8") as f:
                mod.tree = ast.parse(f.read(), filename=path)
        except (OSError, SyntaxError, ValueError) as exc:
            mod.state = "done"
            mod.tree = ast.Module(body=[], type_ignores=[])
            raise EvalError(f"cannot read {rel}: {exc}") from None
        frame = Frame(mod, mod.globals, None, is_module=True)
        mod.globals["__name__"] = V(name)
        self._exec_module_body(mod.tree.body, frame)
        mod.state = "done"
        return mod

    def module_by_path(self, path: str) -> Module | None:
        rel = os.path.relpath(os.path.abspath(path), self.root)
        if rel.endswith("__init__.py"):
            rel = os.path.dirname(rel)
        elif rel.endswith(".py"):
            rel = rel[:-3]
        return self.module(rel.replace(os.sep, "."))

    def _exec_module_body(self, body: list, frame: Frame) -> None:
        for stmt in body:
            try:
                if isinstance(stmt, ast.If):
                    try:
                        cond = self.truth(self.eval(stmt.test, frame), stmt, frame)
                    except EvalError:
                        # undecidable at import time: keep imports and defs of both branches, but a
                        # value assigned in either one is unknown
                        self._exec_module_body(stmt.body, frame)
                        self._exec_module_body(stmt.orelse, frame)
                        for name in _assigned_names(stmt.body + stmt.orelse):
                            frame.locals[name] = V(Unknown("assigned under a condition decided at import time",
                                                           self.loc(frame, stmt)))
                        continue
                    self._exec_module_body(stmt.body if cond else stmt.orelse, frame)
                elif isinstance(stmt, ast.Try):
                    self._exec_module_body(stmt.body, frame)
                    self._exec_module_body(stmt.orelse, frame)
                    self._exec_module_body(stmt.finalbody, frame)
                else:
                    self.exec_stmt(stmt, frame)
            except (_Return, _Break, _Continue):
                continue
            except EvalError as exc:
                for name in _assigned_names([stmt]):
                    frame.locals[name] = V(Unknown(exc.reason, exc.loc))
            except RecursionError:
                for name in _assigned_names([stmt]):
                    frame.locals[name] = V(Unknown("too deep to follow", self.loc(frame, stmt)))

    def _import_value(self, modname: str, attr: str | None, loc: tuple) -> V:
        """The value ``from modname import attr`` binds (``attr`` None: the module itself)."""
        full = modname if attr is None else f"{modname}.{attr}"
        if not self.in_tree(modname.split(".")[0]) and not self.in_tree(modname):
            return V(Ext(full))
        mod = self.module(modname)
        if mod is None:
            return V(Ext(full))
        if attr is None:
            return V(ModRef(mod))
        if attr in mod.globals:
            return self._resolve_global(mod, attr)
        sub = self.module(full)
        if sub is not None:
            return V(ModRef(sub))
        if mod.state == "loading":
            raise EvalError(f"circular import: {attr} is not yet defined in {modname}", loc)
        raise EvalError(f"cannot import {attr} from {modname}", loc)

    def _resolve_global(self, mod: Module, name: str) -> V:
        val = mod.globals[name]
        if isinstance(val, Lazy):
            val = self._import_value(val.module, val.attr, val.loc)
            mod.globals[name] = val
        return val

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def loc(frame: Frame, node) -> tuple:
        return (frame.mod.rel, getattr(node, "lineno", 0))

    def tick(self, frame: Frame, node) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise EvalError("too much to evaluate (step limit)", self.loc(frame, node))

    def truth(self, val: V, node, frame: Frame) -> bool:
        v = val.v
        if isinstance(v, Unknown):
            raise EvalError(f"the condition depends on a value not known statically: {v.describe()}",
                            self.loc(frame, node))
        if isinstance(v, (Ext, Partial, Func, Bound, Builtin, CRef, ModRef, Leaf)):
            return True
        if isinstance(v, Obj):
            return True
        if isinstance(v, (Lst, Dct)):
            return bool(v.items if isinstance(v, Lst) else v.d)
        if isinstance(v, _PRIMS) or isinstance(v, (range,)):
            return bool(v)
        raise EvalError(f"cannot decide the truth of {type(v).__name__}", self.loc(frame, node))

    def lookup(self, name: str, frame: Frame, node) -> V:
        f = frame
        while f is not None:
            if name in f.locals:
                if f.is_module:
                    return self._resolve_global(f.mod, name)
                return f.locals[name]
            f = f.parent
        mod = frame.mod
        if name in mod.globals:
            return self._resolve_global(mod, name)
        if name in self.builtins:
            return V(self.builtins[name])
        raise EvalError(f"name '{name}' is not defined here", self.loc(frame, node))

    # ------------------------------------------------------------------ statements

    def exec_block(self, stmts: list, frame: Frame) -> None:
        for stmt in stmts:
            self.exec_stmt(stmt, frame)

    def assign(self, target, val: V, frame: Frame) -> None:
        if frame.ctrl:
            val = V(val.v, val.o | frame.ctrl)
        if isinstance(target, ast.Name):
            frame.locals[target.id] = val
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = self.iterate(val, target, frame)
            if len(items) != len(target.elts) or any(isinstance(e, ast.Starred) for e in target.elts):
                raise EvalError("cannot unpack this assignment", self.loc(frame, target))
            for t, item in zip(target.elts, items):
                self.assign(t, item, frame)
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, frame)
            if isinstance(obj.v, Obj):
                obj.v.fields[target.attr] = val
            elif isinstance(obj.v, (Unknown, Ext)):
                pass  # setting an attribute of something outside the tree changes nothing we read
            else:
                raise EvalError(f"cannot set .{target.attr} here", self.loc(frame, target))
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value, frame)
            key = self.eval(target.slice, frame)
            if isinstance(obj.v, Dct):
                obj.v.d[self.hashable(key, target, frame)] = val
                obj.v.len_o = obj.v.len_o | frame.ctrl
            elif isinstance(obj.v, Lst) and not isinstance(obj.v, Tup) and isinstance(key.v, int):
                obj.v.items[key.v] = val
            elif isinstance(obj.v, (Unknown, Ext)):
                pass
            else:
                raise EvalError("cannot assign to this item", self.loc(frame, target))
        else:
            raise EvalError(f"cannot assign to {type(target).__name__}", self.loc(frame, target))

    def exec_stmt(self, stmt, frame: Frame) -> None:
        self.tick(frame, stmt)
        t = type(stmt)
        if t is ast.Assign:
            val = self.eval(stmt.value, frame)
            for target in stmt.targets:
                self.assign(target, val, frame)
        elif t is ast.AnnAssign:
            if stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value, frame), frame)
        elif t is ast.AugAssign:
            cur = self.eval(_load(stmt.target), frame)
            val = self.binop(stmt.op, cur, self.eval(stmt.value, frame), stmt, frame)
            self.assign(stmt.target, val, frame)
        elif t is ast.Expr:
            if self.effect_hook is not None and isinstance(stmt.value, ast.Call) and not frame.is_module:
                try:
                    self.eval(stmt.value, frame)
                except EvalError as exc:
                    self.effect_hook(self.loc(frame, stmt), exc.reason)
            else:
                self.eval(stmt.value, frame)
        elif t is ast.Return:
            val = self.eval(stmt.value, frame) if stmt.value is not None else V(None)
            if frame.ctrl:
                val = V(val.v, val.o | frame.ctrl)
            raise _Return(val)
        elif t is ast.If:
            cond = self.eval(stmt.test, frame)
            branch = stmt.body if self.truth(cond, stmt, frame) else stmt.orelse
            saved = frame.ctrl
            frame.ctrl = saved | cond.o
            try:
                self.exec_block(branch, frame)
            finally:
                frame.ctrl = saved
        elif t is ast.For:
            it = self.eval(stmt.iter, frame)
            items = self.iterate(it, stmt, frame)
            saved = frame.ctrl
            frame.ctrl = saved | self.len_origin(it)
            try:
                broke = False
                for item in items:
                    self.assign(stmt.target, item, frame)
                    try:
                        self.exec_block(stmt.body, frame)
                    except _Continue:
                        continue
                    except _Break:
                        broke = True
                        break
                if not broke:
                    self.exec_block(stmt.orelse, frame)
            finally:
                frame.ctrl = saved
        elif t is ast.While:
            saved = frame.ctrl
            try:
                for _ in range(100_000):
                    cond = self.eval(stmt.test, frame)
                    frame.ctrl = frame.ctrl | cond.o
                    if not self.truth(cond, stmt, frame):
                        break
                    try:
                        self.exec_block(stmt.body, frame)
                    except _Continue:
                        continue
                    except _Break:
                        break
                else:
                    raise EvalError("loop does not end", self.loc(frame, stmt))
            finally:
                frame.ctrl = saved
        elif t is ast.Pass:
            pass
        elif t is ast.Break:
            raise _Break()
        elif t is ast.Continue:
            raise _Continue()
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            frame.locals[stmt.name] = V(self.make_function(stmt, frame))
        elif t is ast.ClassDef:
            qual = stmt.name if frame.is_module else f"<local>.{stmt.name}"
            frame.locals[stmt.name] = V(CRef(ClassInfo(frame.mod, stmt, qual, frame), None))
        elif t is ast.Import:
            for alias in stmt.names:
                if alias.asname:
                    frame.locals[alias.asname] = Lazy(alias.name, None, self.loc(frame, stmt)) \
                        if frame.is_module else self._import_value(alias.name, None, self.loc(frame, stmt))
                else:
                    top = alias.name.split(".")[0]
                    frame.locals[top] = Lazy(top, None, self.loc(frame, stmt)) \
                        if frame.is_module else self._import_value(top, None, self.loc(frame, stmt))
        elif t is ast.ImportFrom:
            base = self._import_base(stmt, frame)
            for alias in stmt.names:
                if alias.name == "*":
                    continue
                lazy = Lazy(base, alias.name, self.loc(frame, stmt))
                name = alias.asname or alias.name
                frame.locals[name] = lazy if frame.is_module else self._import_value(base, alias.name, lazy.loc)
        elif t is ast.Assert:
            test = self.eval(stmt.test, frame)
            if not isinstance(test.v, Unknown) and not self.truth(test, stmt, frame):
                raise EvalError("an assertion of the framework fails here", self.loc(frame, stmt))
        elif t is ast.Raise:
            raise EvalError("the framework raises here", self.loc(frame, stmt))
        elif t is ast.Try:
            self.exec_block(stmt.body, frame)
            self.exec_block(stmt.orelse, frame)
            self.exec_block(stmt.finalbody, frame)
        elif t is ast.With:
            self.exec_block(stmt.body, frame)
        elif t is ast.Match:
            subject = self.eval(stmt.subject, frame)
            for case in stmt.cases:
                if self.match(case.pattern, subject, frame) and \
                        (case.guard is None or self.truth(self.eval(case.guard, frame), case.guard, frame)):
                    saved = frame.ctrl
                    frame.ctrl = saved | subject.o
                    try:
                        self.exec_block(case.body, frame)
                    finally:
                        frame.ctrl = saved
                    break
        elif t is ast.Delete or t is ast.Global or t is ast.Nonlocal:
            pass
        else:
            raise EvalError(f"{t.__name__} statements are not followed", self.loc(frame, stmt))

    def match(self, pattern, subject: V, frame: Frame) -> bool:
        """``case`` patterns of literals, ``_``, captures and ``|`` (what config code uses)."""
        if isinstance(pattern, ast.MatchAs):
            if pattern.pattern is not None and not self.match(pattern.pattern, subject, frame):
                return False
            if pattern.name:
                frame.locals[pattern.name] = subject
            return True
        if isinstance(pattern, ast.MatchOr):
            return any(self.match(p, subject, frame) for p in pattern.patterns)
        if isinstance(subject.v, Unknown):
            raise EvalError(f"match on a value not known statically: {subject.v.describe()}",
                            self.loc(frame, pattern))
        if isinstance(pattern, ast.MatchValue):
            value = self.eval(pattern.value, frame)
            return isinstance(subject.v, _PRIMS) and isinstance(value.v, _PRIMS) and subject.v == value.v
        if isinstance(pattern, ast.MatchSingleton):
            return subject.v is pattern.value
        raise EvalError("this match pattern is not followed", self.loc(frame, pattern))

    def _import_base(self, stmt: ast.ImportFrom, frame: Frame) -> str:
        if not stmt.level:
            return stmt.module or ""
        mod = frame.mod
        package = mod.name if mod.is_pkg else mod.name.rpartition(".")[0]
        for _ in range(stmt.level - 1):
            package = package.rpartition(".")[0]
        return f"{package}.{stmt.module}" if stmt.module else package

    def make_function(self, node, frame: Frame, kind: str | None = None) -> Func:
        defaults = {}
        args = node.args
        positional = args.posonlyargs + args.args
        for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
            defaults[arg.arg] = self._safe_eval(default, frame)
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            if default is not None:
                defaults[arg.arg] = self._safe_eval(default, frame)
        if kind is None:
            kind = "function"
            for dec in getattr(node, "decorator_list", []):
                name = dec.id if isinstance(dec, ast.Name) else dec.attr if isinstance(dec, ast.Attribute) else None
                if name in ("property", "cached_property"):
                    kind = "property"
                elif name in ("staticmethod", "classmethod"):
                    kind = name
        qual = getattr(node, "name", "<lambda>")
        closure = None if frame.is_module else frame
        return Func(frame.mod, node, closure, defaults, kind, qual)

    def _safe_eval(self, node, frame: Frame) -> V:
        try:
            return self.eval(node, frame)
        except EvalError as exc:
            return V(Unknown(exc.reason, exc.loc))

    # ------------------------------------------------------------------ expressions

    def eval(self, node, frame: Frame) -> V:
        t = type(node)
        if t is ast.Constant:
            return V(node.value, frozenset(((frame.mod.rel, node.lineno),)))
        if t is ast.Name:
            return self.lookup(node.id, frame, node)
        if t is ast.Attribute:
            return self.getattr(self.eval(node.value, frame), node.attr, node, frame)
        if t is ast.Call:
            return self.eval_call(node, frame)
        if t is ast.BinOp:
            return self.binop(node.op, self.eval(node.left, frame), self.eval(node.right, frame), node, frame)
        if t is ast.UnaryOp:
            val = self.eval(node.operand, frame)
            if isinstance(val.v, Unknown):
                return val
            if isinstance(node.op, ast.Not):
                return V(not self.truth(val, node, frame), val.o)
            if not isinstance(val.v, (int, float)):
                raise EvalError("unary operator on a non-number", self.loc(frame, node))
            op = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)]
            return V(op(val.v), val.o)
        if t is ast.BoolOp:
            is_and = isinstance(node.op, ast.And)
            origins = EMPTY
            val = None
            for sub in node.values:
                val = self.eval(sub, frame)
                origins = origins | val.o
                if isinstance(val.v, Unknown):
                    return V(val.v, origins)
                truth = self.truth(val, sub, frame)
                if truth != is_and:
                    break
            return V(val.v, origins)
        if t is ast.Compare:
            left = self.eval(node.left, frame)
            origins = left.o
            result = True
            for op, comp in zip(node.ops, node.comparators):
                right = self.eval(comp, frame)
                origins = origins | right.o
                if isinstance(left.v, Unknown) or isinstance(right.v, Unknown):
                    return V(left.v if isinstance(left.v, Unknown) else right.v, origins)
                if not self.compare(op, left, right, node, frame):
                    result = False
                    break
                left = right
            return V(result, origins)
        if t is ast.IfExp:
            cond = self.eval(node.test, frame)
            val = self.eval(node.body if self.truth(cond, node, frame) else node.orelse, frame)
            return V(val.v, val.o | cond.o)
        if t is ast.List or t is ast.Tuple or t is ast.Set:
            items = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    items.extend(self.iterate(self.eval(elt.value, frame), elt, frame))
                else:
                    items.append(self.eval(elt, frame))
            o = frozenset(((frame.mod.rel, node.lineno),)) if node.elts else EMPTY
            return V((Tup if t is ast.Tuple else Lst)(items, o))
        if t is ast.Dict:
            d = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    other = self.eval(v, frame)
                    if not isinstance(other.v, Dct):
                        raise EvalError("** of a non-dict", self.loc(frame, node))
                    d.update(other.v.d)
                else:
                    d[self.hashable(self.eval(k, frame), k, frame)] = self.eval(v, frame)
            return V(Dct(d, frozenset(((frame.mod.rel, node.lineno),)) if node.keys else EMPTY))
        if t is ast.Subscript:
            return self.subscript(self.eval(node.value, frame), node.slice, node, frame)
        if t is ast.Slice:
            parts = [self.eval(p, frame) if p is not None else V(None) for p in (node.lower, node.upper, node.step)]
            for p in parts:
                if not isinstance(p.v, (int, type(None))):
                    raise EvalError("a slice bound is not known", self.loc(frame, node))
            return V(slice(*(p.v for p in parts)), union(*parts))
        if t is ast.JoinedStr:
            out = []
            for part in node.values:
                if isinstance(part, ast.Constant):
                    out.append(str(part.value))
                else:
                    val = self.eval(part.value, frame)
                    if not isinstance(val.v, _PRIMS):
                        return V(Unknown("an f-string of a non-literal", self.loc(frame, node)))
                    out.append(format(val.v, self.eval(part.format_spec, frame).v if part.format_spec else ""))
            return V("".join(out))
        if t is ast.FormattedValue:
            return self.eval(node.value, frame)
        if t in (ast.ListComp, ast.GeneratorExp, ast.SetComp):
            items, o = self.comprehension(node, frame, lambda f: [self.eval(node.elt, f)])
            return V(Lst(items, o))
        if t is ast.DictComp:
            pairs, o = self.comprehension(node, frame, lambda f: [(self.eval(node.key, f), self.eval(node.value, f))])
            return V(Dct({self.hashable(k, node, frame): v for k, v in pairs}, o))
        if t is ast.Lambda:
            return V(self.make_function(node, frame, kind="lambda"))
        if t is ast.NamedExpr:
            val = self.eval(node.value, frame)
            self.assign(node.target, val, frame)
            return val
        if t is ast.Starred:
            raise EvalError("a starred expression here is not followed", self.loc(frame, node))
        raise EvalError(f"{t.__name__} expressions are not followed", self.loc(frame, node))

    def comprehension(self, node, frame: Frame, body) -> tuple:
        scope = Frame(frame.mod, {}, frame)
        scope.ctrl = frame.ctrl
        out = []
        origins = EMPTY

        def walk(i: int) -> None:
            nonlocal origins
            if i == len(node.generators):
                out.extend(body(scope))
                return
            gen = node.generators[i]
            it = self.eval(gen.iter, scope)
            origins = origins | self.len_origin(it)
            for item in self.iterate(it, gen.iter, scope):
                self.assign(gen.target, item, scope)
                ok = True
                for cond in gen.ifs:
                    c = self.eval(cond, scope)
                    origins = origins | c.o
                    if not self.truth(c, cond, scope):
                        ok = False
                        break
                if ok:
                    walk(i + 1)

        walk(0)
        return out, origins

    def len_origin(self, val: V) -> frozenset:
        if isinstance(val.v, (Lst, Dct)):
            return val.o | val.v.len_o
        return val.o

    def hashable(self, val: V, node, frame: Frame):
        v = val.v
        if isinstance(v, _PRIMS):
            return v
        if isinstance(v, Tup):
            return tuple(self.hashable(i, node, frame) for i in v.items)
        raise EvalError("a key that is not a literal", self.loc(frame, node))

    def iterate(self, val: V, node, frame: Frame) -> list:
        v = val.v
        if isinstance(v, Lst):
            return list(v.items)
        if isinstance(v, Dct):
            return [V(k, v.len_o) for k in v.d]
        if isinstance(v, str):
            return [V(c, val.o) for c in v]
        if isinstance(v, Unknown):
            raise EvalError(f"iterates over a value not known statically: {v.describe()}", self.loc(frame, node))
        raise EvalError(f"cannot iterate over {type(v).__name__}", self.loc(frame, node))

    def compare(self, op, left: V, right: V, node, frame: Frame) -> bool:
        a, b = left.v, right.v
        if isinstance(op, (ast.Is, ast.IsNot)):
            if isinstance(a, _PRIMS) and isinstance(b, _PRIMS):
                same = type(a) is type(b) and a == b
            else:
                same = a is b
            return same if isinstance(op, ast.Is) else not same
        if isinstance(op, (ast.In, ast.NotIn)):
            if isinstance(b, Lst):
                found = any(isinstance(i.v, _PRIMS) and i.v == a for i in b.items)
            elif isinstance(b, Dct):
                found = a in b.d
            elif isinstance(b, str) and isinstance(a, str):
                found = a in b
            else:
                raise EvalError("'in' on a value not known statically", self.loc(frame, node))
            return found if isinstance(op, ast.In) else not found
        if isinstance(a, _PRIMS) and isinstance(b, _PRIMS):
            try:
                return bool(_CMPOPS[type(op)](a, b))
            except TypeError:
                raise EvalError("comparison of incompatible values", self.loc(frame, node)) from None
        if isinstance(op, (ast.Eq, ast.NotEq)):
            if isinstance(a, Lst) and isinstance(b, Lst):
                same = self.plain(left) == self.plain(right)
            else:
                same = a is b
            return same if isinstance(op, ast.Eq) else not same
        raise EvalError("comparison of values not known statically", self.loc(frame, node))

    def plain(self, val: V):
        """The Python value of a literal structure (for comparisons and output)."""
        v = val.v
        if isinstance(v, Tup):
            return tuple(self.plain(i) for i in v.items)
        if isinstance(v, Lst):
            return [self.plain(i) for i in v.items]
        if isinstance(v, Dct):
            return {k: self.plain(i) for k, i in v.d.items()}
        return v

    def binop(self, op, left: V, right: V, node, frame: Frame) -> V:
        a, b = left.v, right.v
        o = left.o | right.o
        if isinstance(a, Unknown):
            return V(a, o)
        if isinstance(b, Unknown):
            return V(b, o)
        fn = _BINOPS.get(type(op))
        if fn is None:
            raise EvalError("operator not followed", self.loc(frame, node))
        if isinstance(a, _PRIMS) and isinstance(b, _PRIMS):
            if isinstance(op, ast.Pow) and isinstance(b, (int, float)) and abs(b) > 4096:
                raise EvalError("exponent too large", self.loc(frame, node))
            try:
                return V(fn(a, b), o)
            except (TypeError, ZeroDivisionError, ValueError, OverflowError) as exc:
                raise EvalError(f"arithmetic fails: {exc}", self.loc(frame, node)) from None
        if isinstance(a, Lst) and isinstance(b, Lst) and isinstance(op, ast.Add):
            return V(type(a)(a.items + b.items, a.len_o | b.len_o), o)
        if isinstance(a, Lst) and isinstance(b, int) and isinstance(op, ast.Mult):
            return V(type(a)(a.items * b, a.len_o | right.o), o)
        if isinstance(a, Dct) and isinstance(b, Dct) and isinstance(op, ast.BitOr):
            return V(Dct({**a.d, **b.d}, a.len_o | b.len_o), o)
        if isinstance(a, (Ext, Partial, Func, CRef, Builtin)) or isinstance(b, (Ext, Partial, Func, CRef, Builtin)):
            # typing unions (int | None) and the like
            return V(Unknown("an operation on a type or a callable", self.loc(frame, node)), o)
        raise EvalError(f"cannot apply {type(op).__name__} to {type(a).__name__} and {type(b).__name__}",
                        self.loc(frame, node))

    def subscript(self, val: V, slice_node, node, frame: Frame) -> V:
        v = val.v
        if isinstance(v, (Unknown, Ext)):
            if isinstance(v, Ext):
                return V(Unknown(f"{v.name}[...] is outside the source tree", self.loc(frame, node)))
            return val
        if isinstance(v, CRef):
            return V(Unknown("a generic type", self.loc(frame, node)))
        key = self.eval(slice_node, frame)
        if isinstance(key.v, Unknown):
            return key
        if isinstance(v, Dct):
            k = self.hashable(key, node, frame)
            if k not in v.d:
                raise EvalError(f"key {k!r} is not in this dict", self.loc(frame, node))
            got = v.d[k]
            return V(got.v, got.o | key.o)
        if isinstance(v, Lst):
            if isinstance(key.v, slice):
                return V(type(v)(v.items[key.v], v.len_o | key.o))
            if not isinstance(key.v, int) or isinstance(key.v, bool):
                raise EvalError("index is not an int", self.loc(frame, node))
            try:
                got = v.items[key.v]
            except IndexError:
                raise EvalError("index out of range", self.loc(frame, node)) from None
            return V(got.v, got.o | key.o | (v.len_o if key.v < 0 else EMPTY))
        if isinstance(v, str):
            try:
                return V(v[key.v], val.o | key.o)
            except (TypeError, IndexError):
                raise EvalError("bad string index", self.loc(frame, node)) from None
        raise EvalError(f"cannot index {type(v).__name__}", self.loc(frame, node))

    # ------------------------------------------------------------------ attributes and classes

    def class_ns(self, info: ClassInfo) -> dict:
        if info._ns is not None:
            return info._ns
        ns: dict = {}
        info._ns = ns
        frame = Frame(info.mod, {}, info.frame if not info.frame.is_module else None)
        for stmt in info.node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                ns[stmt.name] = ("func", self.make_function(stmt, frame))
            elif isinstance(stmt, ast.ClassDef):
                ns[stmt.name] = ("class", ClassInfo(info.mod, stmt, f"{info.qualname}.{stmt.name}", info.frame))
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                ns[stmt.target.id] = ("field", stmt.value, stmt.lineno)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        ns[target.id] = ("attr", stmt.value, stmt.lineno)
        return ns

    def bases(self, info: ClassInfo) -> list:
        if info._bases is None:
            info._bases = []
            frame = info.frame
            for b in info.node.bases:
                try:
                    val = self.eval(b, frame)
                except EvalError:
                    continue
                if isinstance(val.v, CRef):
                    info._bases.append(val.v.info)
                elif isinstance(val.v, Ext):
                    info._bases.append(val.v)
        return info._bases

    def mro(self, info: ClassInfo) -> list:
        """Classes of the tree in lookup order (depth-first, duplicates dropped: enough for configs)."""
        if info._mro is None:
            out, seen = [], set()

            def walk(c: ClassInfo) -> None:
                if id(c) in seen:
                    return
                seen.add(id(c))
                out.append(c)
                for b in self.bases(c):
                    if isinstance(b, ClassInfo):
                        walk(b)

            walk(info)
            info._mro = out
        return info._mro

    def external_bases(self, info: ClassInfo) -> list:
        return [b.name for c in self.mro(info) for b in self.bases(c) if isinstance(b, Ext)]

    def class_member(self, info: ClassInfo, name: str):
        for c in self.mro(info):
            ns = self.class_ns(c)
            if name in ns:
                return c, ns[name]
        return None, None

    def field_names(self, info: ClassInfo) -> list:
        names = []
        for c in reversed(self.mro(info)):
            for key, entry in self.class_ns(c).items():
                if entry[0] == "field" and key not in names:
                    names.append(key)
        return names

    def getattr(self, base: V, name: str, node, frame: Frame) -> V:
        v = base.v
        if isinstance(v, Obj):
            if name in v.fields:
                return v.fields[name]
            cls, entry = self.class_member(v.info, name)
            if entry is None:
                if self.module_mode and self.external_bases(v.info):
                    return V(Bound(Builtin(name, None), base))  # torch.nn.Module's own: see call_method
                raise EvalError(f"{v.info.qualname} has no attribute {name}", self.loc(frame, node))
            kind = entry[0]
            if kind == "func":
                func = entry[1]
                if func.kind == "property":
                    return self.call_function(func, [base], {}, node, frame)
                if func.kind == "staticmethod":
                    return V(func)
                return V(Bound(func, base))
            if kind == "class":
                return V(CRef(entry[1], v.info))
            val = self.class_default(cls, entry, v.info)
            if kind == "field":
                v.fields[name] = val  # a default_factory value is the instance's own (mutations stick)
            return val
        if isinstance(v, CRef):
            cls, entry = self.class_member(v.info, name)
            if entry is None:
                return V(Unknown(f"{v.info.qualname}.{name} is not in the source", self.loc(frame, node)))
            if entry[0] == "class":
                return V(CRef(entry[1], v.info))
            if entry[0] == "func":
                return V(entry[1])
            return self.class_default(cls, entry, v.info)
        if isinstance(v, ModRef):
            mod = v.mod
            if mod.state == "new":
                self.module(mod.name)
            if name in mod.globals:
                return self._resolve_global(mod, name)
            sub = self.module(f"{mod.name}.{name}")
            if sub is not None:
                return V(ModRef(sub))
            raise EvalError(f"module {mod.name} has no {name}", self.loc(frame, node))
        if isinstance(v, Ext):
            if v.name == "math" and name in ("pi", "e", "tau", "inf"):
                return V(getattr(math, name), frozenset(((frame.mod.rel, getattr(node, "lineno", 0)),)))
            return V(Ext(f"{v.name}.{name}"))
        if isinstance(v, Unknown):
            return base
        if isinstance(v, SuperRef):
            return self.super_member(v, name, self.loc(frame, node))
        if isinstance(v, FieldRef) and name == "name":
            return V(v.name)
        if isinstance(v, Leaf):
            if name in v.dims:
                return v.dims[name]
            return V(Unknown(f".{name} of a {v.kind}", self.loc(frame, node)))
        if isinstance(v, (Lst, Dct, str)) or isinstance(v, _PRIMS):
            return V(Bound(Builtin(name, None), base))
        if isinstance(v, Partial):
            return V(Unknown("an attribute of a partial", self.loc(frame, node)))
        raise EvalError(f"cannot read .{name} of {type(v).__name__}", self.loc(frame, node))

    def class_default(self, cls: ClassInfo, entry: tuple, owner: ClassInfo) -> V:
        kind, expr, line = entry
        if expr is None:
            return V(Unknown(f"{cls.qualname} field without a default, not set",
                             (cls.mod.rel, line)))
        frame = Frame(cls.mod, {}, cls.frame if not cls.frame.is_module else None)
        try:
            val = self.eval(expr, frame)
        except EvalError as exc:
            return V(Unknown(exc.reason, exc.loc))
        if isinstance(val.v, FieldSpec):
            if val.v.factory is not None:
                return self.call(val.v.factory, [], {}, expr, frame)
            return val.v.default if val.v.default is not None else V(Unknown("field() without a default",
                                                                               (cls.mod.rel, line)))
        return val

    # ------------------------------------------------------------------ calls

    def eval_call(self, node: ast.Call, frame: Frame) -> V:
        func = self.eval(node.func, frame)
        args, kwargs = [], {}
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.iterate(self.eval(a.value, frame), a, frame))
            else:
                args.append(self.eval(a, frame))
        for kw in node.keywords:
            if kw.arg is None:
                extra = self.eval(kw.value, frame)
                if isinstance(extra.v, Unknown):
                    return V(Unknown(f"**{extra.v.describe()}", self.loc(frame, node)))
                if not isinstance(extra.v, Dct):
                    raise EvalError("** of a non-dict", self.loc(frame, node))
                for k, val in extra.v.d.items():
                    kwargs[k] = val
            else:
                kwargs[kw.arg] = self.eval(kw.value, frame)
        return self.call(func, args, kwargs, node, frame)

    def call(self, func: V, args: list, kwargs: dict, node, frame: Frame) -> V:
        f = func.v
        loc = self.loc(frame, node)
        if isinstance(f, Func):
            return self.call_function(f, args, kwargs, node, frame)
        if isinstance(f, Bound):
            if self.build_hook is not None and isinstance(f.func, Func) and f.func.qualname == "build":
                self.build_hook(f.self_v)
                return V(Unknown("a built module", loc))
            if isinstance(f.func, Builtin):
                return self.call_method(f.self_v, f.func.name, args, kwargs, node, frame)
            return self.call_function(f.func, [f.self_v] + args, kwargs, node, frame)
        if isinstance(f, Partial):
            return self.call(f.func, f.args + args, {**f.kwargs, **kwargs}, node, frame)
        if isinstance(f, CRef):
            return self.instantiate(f, args, kwargs, loc)
        if isinstance(f, Builtin):
            return f.fn(self, args, kwargs, node, frame)
        if isinstance(f, Ext):
            if self.ext_hook is not None:
                got = self.ext_hook(f.name, args, kwargs, loc)
                if got is not None:
                    return got
            special = _EXT_FUNCS.get(f.name)
            if special is not None:
                return special(self, args, kwargs, node, frame)
            return V(Unknown(f"{f.name}(...) is outside the source tree", loc))
        if isinstance(f, Unknown):
            return V(Unknown(f"calls {f.describe()}", loc))
        raise EvalError(f"cannot call {type(f).__name__}", loc)

    def is_dataclass(self, info: ClassInfo) -> bool:
        for c in self.mro(info):
            for dec in c.node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
                if name == "dataclass":
                    return True
        return False

    def instantiate(self, cref: CRef, args: list, kwargs: dict, loc) -> V:
        info = cref.info
        if info.node.name in _EXC_NAMES:
            return V(Unknown("an exception", loc))
        if self.module_mode and not self.is_dataclass(info):
            _, entry = self.class_member(info, "__init__")
            if entry is not None and entry[0] == "func":
                return self.construct(info, cref.owner, entry[1], args, kwargs, loc)
        fields = {}
        if args:
            names = self.field_names(info)
            if len(args) > len(names):
                return V(Unknown(f"{info.qualname}(...) with positional arguments", loc))
            fields.update(zip(names, args))
        fields.update(kwargs)
        return V(Obj(info, cref.owner, fields, loc))

    def construct(self, info: ClassInfo, owner, init: Func, args: list, kwargs: dict, loc) -> V:
        """Module mode: a new instance, its ``__init__`` run statement by statement (what fails is skipped)."""
        obj = Obj(info, owner, {}, loc)
        self_v = V(obj)
        defining, _ = self.class_member(info, "__init__")
        self.run_init(defining, init, self_v, args, kwargs, loc, record_args=True)
        return self_v

    def run_init(self, defining: ClassInfo, init: Func, self_v: V, args: list, kwargs: dict, loc,
                 record_args: bool = False) -> None:
        self.depth += 1
        try:
            if self.depth > 150:
                raise EvalError("calls nest too deeply", loc)
            locals_ = self.bind(init, [self_v] + args, kwargs, loc)
            if record_args:
                self_v.v.args = {k: v for k, v in locals_.items() if v is not self_v}
            locals_["__super__"] = V(SuperRef(defining, self_v))
            self.run_tolerant(init.node.body, Frame(init.mod, locals_, init.closure))
        finally:
            self.depth -= 1

    def run_tolerant(self, body: list, frame: Frame) -> None:
        """Each statement in turn; one that cannot be followed is skipped and listed in ``skipped``."""
        for stmt in body:
            try:
                self.exec_stmt(stmt, frame)
            except _Return:
                break
            except EvalError as exc:
                self.skipped.append((exc.loc or self.loc(frame, stmt), exc.reason))

    def super_member(self, ref: SuperRef, name: str, loc) -> V:
        instance = ref.self_v.v
        order = self.mro(instance.info)
        after = order[order.index(ref.cls) + 1:] if ref.cls in order else []
        for cls in after:
            entry = self.class_ns(cls).get(name)
            if entry is not None and entry[0] == "func":
                func = entry[1]
                if name == "__init__":
                    return V(Builtin("super().__init__", lambda it, a, k, n, f, c=cls, fn=func:
                                     (it.run_init(c, fn, ref.self_v, a, k, it.loc(f, n)), V(None))[1]))
                return V(Bound(func, ref.self_v))
        return V(Bound(Builtin(name, None), ref.self_v))  # torch.nn.Module's own: see call_method

    def call_function(self, func: Func, args: list, kwargs: dict, node, frame: Frame) -> V:
        loc = self.loc(frame, node)
        self.depth += 1
        try:
            if self.depth > 150:
                raise EvalError("calls nest too deeply", loc)
            locals_ = self.bind(func, args, kwargs, loc)
            new = Frame(func.mod, locals_, func.closure)
            if isinstance(func.node, ast.Lambda):
                return self.eval(func.node.body, new)
            try:
                self.exec_block(func.node.body, new)
            except _Return as ret:
                return ret.value
            return V(None)
        finally:
            self.depth -= 1

    def bind(self, func: Func, args: list, kwargs: dict, loc) -> dict:
        a = func.node.args
        positional = [p.arg for p in a.posonlyargs + a.args]
        out: dict = {}
        for name, val in zip(positional, args):
            out[name] = val
        extra = args[len(positional):]
        if extra:
            if a.vararg is None:
                raise EvalError(f"{func.qualname}() given too many positional arguments", loc)
            out[a.vararg.arg] = V(Tup(list(extra)))
        elif a.vararg is not None:
            out[a.vararg.arg] = V(Tup([]))
        known = set(positional) | {k.arg for k in a.kwonlyargs}
        rest = {}
        for key, val in kwargs.items():
            if key in known:
                if key in out:
                    raise EvalError(f"{func.qualname}() got {key} twice", loc)
                out[key] = val
            else:
                rest[key] = val
        if rest:
            if a.kwarg is None:
                raise EvalError(f"{func.qualname}() got unexpected {', '.join(rest)}", loc)
            out[a.kwarg.arg] = V(Dct(rest))
        elif a.kwarg is not None:
            out[a.kwarg.arg] = V(Dct({}))
        for name in list(positional) + [k.arg for k in a.kwonlyargs]:
            if name not in out:
                if name in func.defaults:
                    out[name] = func.defaults[name]
                else:
                    raise EvalError(f"{func.qualname}() is missing {name}", loc)
        return out

    def call_method(self, self_v: V, name: str, args: list, kwargs: dict, node, frame: Frame) -> V:
        v = self_v.v
        loc = self.loc(frame, node)
        if isinstance(v, Lst) and not isinstance(v, Tup):
            if name == "append":
                v.items.append(args[0])
                v.len_o = v.len_o | frame.ctrl
                return V(None)
            if name == "extend":
                v.items.extend(self.iterate(args[0], node, frame))
                v.len_o = v.len_o | frame.ctrl | self.len_origin(args[0])
                return V(None)
            if name == "insert":
                v.items.insert(args[0].v, args[1])
                v.len_o = v.len_o | frame.ctrl
                return V(None)
            if name == "copy":
                return V(Lst(list(v.items), v.len_o))
            if name == "pop" and v.items:
                return v.items.pop(args[0].v if args else -1)
        if isinstance(v, Lst) and name == "index":
            for i, item in enumerate(v.items):
                if isinstance(item.v, _PRIMS) and item.v == args[0].v:
                    return V(i, v.len_o)
            raise EvalError("index() of a missing item", loc)
        if isinstance(v, Dct):
            if name == "get":
                k = self.hashable(args[0], node, frame)
                return v.d.get(k, args[1] if len(args) > 1 else V(None))
            if name == "items":
                return V(Lst([V(Tup([V(k, v.len_o), val])) for k, val in v.d.items()], v.len_o))
            if name == "keys":
                return V(Lst([V(k, v.len_o) for k in v.d], v.len_o))
            if name == "values":
                return V(Lst(list(v.d.values()), v.len_o))
            if name == "copy":
                return V(Dct(dict(v.d), v.len_o))
            if name == "update":
                if args:
                    if not isinstance(args[0].v, Dct):
                        raise EvalError("update() with a non-dict", loc)
                    v.d.update(args[0].v.d)
                v.d.update(kwargs)
                return V(None)
            if name == "setdefault":
                k = self.hashable(args[0], node, frame)
                return v.d.setdefault(k, args[1] if len(args) > 1 else V(None))
            if name == "pop":
                k = self.hashable(args[0], node, frame)
                if k in v.d:
                    return v.d.pop(k)
                if len(args) > 1:
                    return args[1]
                raise EvalError(f"pop of a missing key {k!r}", loc)
        if isinstance(v, Obj):
            # torch.nn.Module's methods on a module built in module mode: .to()/.cuda()... give the module back
            if name in _MODULE_SELF_METHODS:
                return self_v
            return V(Unknown(f"torch.nn.Module.{name}() is not followed", loc))
        if isinstance(v, str):
            if all(isinstance(a.v, _PRIMS) for a in args) and all(isinstance(a.v, _PRIMS) for a in kwargs.values()):
                method = getattr(str, name, None)
                if method is not None and name in _STR_METHODS:
                    out = method(v, *[a.v for a in args], **{k: a.v for k, a in kwargs.items()})
                    o = union(self_v, *args, *kwargs.values())
                    if isinstance(out, list):
                        return V(Lst([V(i, o) for i in out], o))
                    return V(out, o)
            if name == "join":
                parts = self.iterate(args[0], node, frame)
                if all(isinstance(p.v, str) for p in parts):
                    return V(v.join(p.v for p in parts), union(self_v, *parts))
        raise EvalError(f"method {name}() of {type(v).__name__} is not followed", loc)

    # ------------------------------------------------------------------ builtins

    def _make_builtins(self) -> dict:
        b = {}

        def reg(name, fn, pytype=None):
            b[name] = Builtin(name, fn, pytype)

        def num_fn(py):
            def fn(it, args, kwargs, node, frame):
                if not args:
                    return V(py())
                a = args[0]
                if isinstance(a.v, Unknown):
                    return a
                if not isinstance(a.v, _PRIMS):
                    raise EvalError(f"{py.__name__}() of {type(a.v).__name__}", it.loc(frame, node))
                try:
                    return V(py(a.v, *[x.v for x in args[1:]]), union(*args))
                except (TypeError, ValueError) as exc:
                    raise EvalError(f"{py.__name__}() fails: {exc}", it.loc(frame, node)) from None
            return fn

        for py in (int, float, str, bool):
            reg(py.__name__, num_fn(py), py)

        def _len(it, args, kwargs, node, frame):
            a = args[0]
            if isinstance(a.v, Unknown):
                return a
            if isinstance(a.v, Lst):
                return V(len(a.v.items), it.len_origin(a))
            if isinstance(a.v, Dct):
                return V(len(a.v.d), it.len_origin(a))
            if isinstance(a.v, str):
                return V(len(a.v), a.o)
            raise EvalError("len() of a value not known statically", it.loc(frame, node))

        def _range(it, args, kwargs, node, frame):
            for a in args:
                if isinstance(a.v, Unknown):
                    raise EvalError(f"range() of a value not known statically: {a.v.describe()}",
                                    it.loc(frame, node))
                if not isinstance(a.v, int):
                    raise EvalError("range() of a non-int", it.loc(frame, node))
            o = union(*args)
            r = range(*[a.v for a in args])
            if len(r) > 1_000_000:
                raise EvalError("range too long", it.loc(frame, node))
            return V(Lst([V(i, o) for i in r], o))

        def _minmax(py):
            def fn(it, args, kwargs, node, frame):
                items = it.iterate(args[0], node, frame) if len(args) == 1 else args
                if "default" in kwargs and not items:
                    return kwargs["default"]
                for a in items:
                    if isinstance(a.v, Unknown):
                        return a
                    if not isinstance(a.v, (int, float)):
                        raise EvalError(f"{py.__name__}() of non-numbers", it.loc(frame, node))
                if not items:
                    raise EvalError(f"{py.__name__}() of nothing", it.loc(frame, node))
                return V(py(a.v for a in items), union(*items) | (it.len_origin(args[0]) if len(args) == 1 else EMPTY))
            return fn

        def _sum(it, args, kwargs, node, frame):
            items = it.iterate(args[0], node, frame)
            total = args[1] if len(args) > 1 else V(0)
            for a in items:
                total = it.binop(ast.Add(), total, a, node, frame)
            return V(total.v, total.o | it.len_origin(args[0]))

        def _abs(it, args, kwargs, node, frame):
            a = args[0]
            if isinstance(a.v, (int, float)):
                return V(abs(a.v), a.o)
            return V(Unknown("abs() of a non-number", it.loc(frame, node)))

        def _round(it, args, kwargs, node, frame):
            if all(isinstance(a.v, (int, float)) for a in args):
                return V(round(*[a.v for a in args]), union(*args))
            return V(Unknown("round() of a non-number", it.loc(frame, node)))

        def _list(it, args, kwargs, node, frame):
            if not args:
                return V(Lst([]))
            return V(Lst(it.iterate(args[0], node, frame), it.len_origin(args[0])))

        def _tuple(it, args, kwargs, node, frame):
            if not args:
                return V(Tup([]))
            return V(Tup(it.iterate(args[0], node, frame), it.len_origin(args[0])))

        def _dict(it, args, kwargs, node, frame):
            d = {}
            if args:
                if isinstance(args[0].v, Dct):
                    d.update(args[0].v.d)
                else:
                    for pair in it.iterate(args[0], node, frame):
                        k, v = it.iterate(pair, node, frame)
                        d[it.hashable(k, node, frame)] = v
            d.update(kwargs)
            return V(Dct(d))

        def _enumerate(it, args, kwargs, node, frame):
            items = it.iterate(args[0], node, frame)
            o = it.len_origin(args[0])
            return V(Lst([V(Tup([V(i, o), x])) for i, x in enumerate(items)], o))

        def _zip(it, args, kwargs, node, frame):
            seqs = [it.iterate(a, node, frame) for a in args]
            o = union(*[V(None, it.len_origin(a)) for a in args])
            return V(Lst([V(Tup(list(group))) for group in zip(*seqs)], o))

        def _isinstance(it, args, kwargs, node, frame):
            obj, kinds = args[0], args[1]
            targets = kinds.v.items if isinstance(kinds.v, Tup) else [kinds]
            if isinstance(obj.v, Unknown):
                return V(Unknown(f"isinstance of {obj.v.describe()}", it.loc(frame, node)))
            for t in targets:
                tv = t.v
                if isinstance(tv, Builtin) and tv.pytype is not None:
                    if isinstance(obj.v, tv.pytype) and not (tv.pytype is int and isinstance(obj.v, bool)):
                        return V(True, obj.o)
                elif isinstance(tv, Builtin) and tv.name in ("list", "tuple", "dict"):
                    want = {"list": Lst, "tuple": Tup, "dict": Dct}[tv.name]
                    if isinstance(obj.v, want) and not (tv.name == "list" and isinstance(obj.v, Tup)):
                        return V(True, obj.o)
                elif isinstance(tv, CRef):
                    if isinstance(obj.v, Obj) and any(c is tv.info for c in it.mro(obj.v.info)):
                        return V(True, obj.o)
                else:
                    if isinstance(obj.v, Obj):
                        return V(Unknown("isinstance against a class outside the tree", it.loc(frame, node)))
            return V(False, obj.o)

        def _getattr(it, args, kwargs, node, frame):
            name = args[1].v
            if not isinstance(name, str):
                raise EvalError("getattr() with a non-literal name", it.loc(frame, node))
            try:
                return it.getattr(args[0], name, node, frame)
            except EvalError:
                if len(args) > 2:
                    return args[2]
                raise

        def _hasattr(it, args, kwargs, node, frame):
            try:
                it.getattr(args[0], args[1].v, node, frame)
                return V(True)
            except EvalError:
                return V(False)

        def _next(it, args, kwargs, node, frame):
            items = it.iterate(args[0], node, frame)
            if items:
                return items[0]
            if len(args) > 1:
                return args[1]
            raise EvalError("next() of an empty sequence", it.loc(frame, node))

        def _sorted(it, args, kwargs, node, frame):
            items = it.iterate(args[0], node, frame)
            if kwargs or not all(isinstance(i.v, _PRIMS) for i in items):
                raise EvalError("sorted() of values not known statically", it.loc(frame, node))
            return V(Lst(sorted(items, key=lambda i: i.v), it.len_origin(args[0])))

        def _anyall(py):
            def fn(it, args, kwargs, node, frame):
                items = it.iterate(args[0], node, frame)
                return V(py(it.truth(i, node, frame) for i in items), union(*items))
            return fn

        def _divmod(it, args, kwargs, node, frame):
            q = it.binop(ast.FloorDiv(), args[0], args[1], node, frame)
            r = it.binop(ast.Mod(), args[0], args[1], node, frame)
            return V(Tup([q, r]))

        def _pow(it, args, kwargs, node, frame):
            return it.binop(ast.Pow(), args[0], args[1], node, frame)

        def _opaque(name):
            def fn(it, args, kwargs, node, frame):
                return V(Unknown(f"{name}() is not followed", it.loc(frame, node)))
            return fn

        def _marker(it, args, kwargs, node, frame):
            return args[0] if args else V(None)

        reg("len", _len)
        reg("range", _range)
        reg("min", _minmax(min))
        reg("max", _minmax(max))
        reg("sum", _sum)
        reg("abs", _abs)
        reg("round", _round)
        reg("list", _list)
        reg("tuple", _tuple)
        reg("dict", _dict)
        reg("enumerate", _enumerate)
        reg("zip", _zip)
        reg("isinstance", _isinstance)
        reg("getattr", _getattr)
        reg("hasattr", _hasattr)
        reg("next", _next)
        reg("sorted", _sorted)
        reg("any", _anyall(any))
        reg("all", _anyall(all))
        reg("divmod", _divmod)
        reg("pow", _pow)
        reg("reversed", lambda it, a, k, n, f: V(Lst(list(reversed(it.iterate(a[0], n, f))), it.len_origin(a[0]))))
        reg("iter", lambda it, a, k, n, f: a[0])
        reg("print", lambda it, a, k, n, f: V(None))
        def _super(it, args, kwargs, node, frame):
            f = frame
            while f is not None:
                if "__super__" in f.locals:
                    return f.locals["__super__"]
                f = f.parent
            return V(Unknown("super() is not followed here", it.loc(frame, node)))

        reg("super", _super)
        for name in ("type", "object", "set", "frozenset", "open", "id", "hash", "callable", "vars",
                     "setattr", "repr", "format"):
            reg(name, _opaque(name))
        for name in ("property", "staticmethod", "classmethod"):
            reg(name, _marker)
        for name in _EXC_NAMES:
            reg(name, lambda it, a, k, n, f: V(Unknown("an exception", it.loc(f, n))))
        return b


_MODULE_SELF_METHODS = {"to", "cuda", "cpu", "float", "bfloat16", "half", "double", "requires_grad_", "train",
                        "eval", "type", "to_empty"}
_STR_METHODS = {"lower", "upper", "startswith", "endswith", "replace", "split", "strip", "rstrip", "lstrip",
                "format", "count", "find", "removeprefix", "removesuffix", "rsplit", "partition", "rpartition"}


def _math(fn_name):
    fn = getattr(math, fn_name)

    def call(it, args, kwargs, node, frame):
        for a in args:
            if isinstance(a.v, Unknown):
                return a
            if not isinstance(a.v, (int, float)):
                raise EvalError(f"math.{fn_name}() of a non-number", it.loc(frame, node))
        return V(fn(*[a.v for a in args]), union(*args))
    return call


def _replace(it, args, kwargs, node, frame):
    obj = args[0]
    if isinstance(obj.v, Unknown):
        return obj
    if not isinstance(obj.v, Obj):
        raise EvalError("dataclasses.replace() of a value not known statically", it.loc(frame, node))
    return V(Obj(obj.v.info, obj.v.owner, {**obj.v.fields, **kwargs}, obj.v.loc), obj.o)


def _deepcopy(val: V, memo: dict) -> V:
    v = val.v
    if id(v) in memo:
        return V(memo[id(v)], val.o)
    if isinstance(v, Obj):
        new = Obj(v.info, v.owner, {}, v.loc)
        memo[id(v)] = new
        new.fields = {k: _deepcopy(x, memo) for k, x in v.fields.items()}
        return V(new, val.o)
    if isinstance(v, Lst):
        new = type(v)([], v.len_o)
        memo[id(v)] = new
        new.items = [_deepcopy(x, memo) for x in v.items]
        return V(new, val.o)
    if isinstance(v, Dct):
        new = Dct({}, v.len_o)
        memo[id(v)] = new
        new.d = {k: _deepcopy(x, memo) for k, x in v.d.items()}
        return V(new, val.o)
    return val


def _copy(it, args, kwargs, node, frame):
    v = args[0].v
    if isinstance(v, Obj):
        return V(Obj(v.info, v.owner, dict(v.fields), v.loc), args[0].o)
    if isinstance(v, Lst):
        return V(type(v)(list(v.items), v.len_o), args[0].o)
    if isinstance(v, Dct):
        return V(Dct(dict(v.d), v.len_o), args[0].o)
    return args[0]


class FieldRef:
    """One item of ``dataclasses.fields(obj)``: its ``name``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


def _fields(it, args, kwargs, node, frame):
    target = args[0].v
    info = target.info if isinstance(target, Obj) else target.info if isinstance(target, CRef) else None
    if info is None:
        return V(Unknown("dataclasses.fields() of a value not known statically", it.loc(frame, node)))
    return V(Tup([V(FieldRef(n)) for n in it.field_names(info)]))


def _field(it, args, kwargs, node, frame):
    return V(FieldSpec(kwargs.get("default"), kwargs.get("default_factory")))


def _partial(it, args, kwargs, node, frame):
    return V(Partial(args[0], list(args[1:]), dict(kwargs)))


def _identity_decorator(it, args, kwargs, node, frame):
    return args[0] if args else V(Unknown("a decorator factory", it.loc(frame, node)))


_EXT_FUNCS = {
    "dataclasses.replace": _replace,
    "dataclasses.field": _field,
    "dataclasses.fields": _fields,
    "dataclasses.dataclass": _identity_decorator,
    "copy.deepcopy": lambda it, args, kwargs, node, frame: _deepcopy(args[0], {}),
    "copy.copy": _copy,
    "functools.partial": _partial,
    **{f"math.{n}": _math(n) for n in ("ceil", "floor", "sqrt", "log", "log2", "log10", "exp", "gcd", "isqrt",
                                        "prod", "trunc", "pow")},
}


def _load(target):
    """An assignment target read as an expression (for ``x += 1``)."""
    node = copy.deepcopy(target)
    for n in ast.walk(node):
        if hasattr(n, "ctx"):
            n.ctx = ast.Load()
    return node


def _assigned_names(stmts: list) -> set:
    names = set()
    for stmt in stmts:
        targets = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        elif isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    names.add(n.id)
    return names
