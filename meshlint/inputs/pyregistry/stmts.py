"""The interpreter's statements: blocks, loops, assignment, and havoc for what it cannot follow."""

from __future__ import annotations

import ast

from meshlint.inputs.pyregistry.values import (_Break, _Continue, FuncRef, _Limit, _LITERAL, MAX_UNROLL,
    _MUTATING, Obj, _Raise, _Return, Sym, U)
from meshlint.inputs.pyregistry.checkout import _abs_import
from meshlint.inputs.pyregistry.frame import _as_load, Frame, _jump, _only_raises, _text, _Uncertain


class Statements:
    """Statements and assignment (a part of ``Interp``)."""

    # -- statements ------------------------------------------------------------
    def exec_block(self, stmts, fr: Frame) -> None:
        for stmt in stmts:
            self.exec_stmt(stmt, fr)

    def exec_stmt(self, s, fr: Frame) -> None:
        self.tick()
        self.nest += 1
        try:
            if self.nest > self.max_nest:
                raise _Limit("statements nested too deeply to follow")
            self._exec(s, fr)
        finally:
            self.nest -= 1

    def _exec(self, s, fr: Frame) -> None:
        t = type(s)
        mod = fr.mod
        if t is ast.Assign:
            value = self.eval(s.value, fr)
            for target in s.targets:
                self.assign(target, value, fr)
        elif t is ast.Expr:
            self.eval(s.value, fr)
        elif t is ast.Return:
            raise _Return(self.eval(s.value, fr) if s.value is not None else None)
        elif t is ast.AnnAssign:
            if s.value is not None:
                self.assign(s.target, self.eval(s.value, fr), fr)
        elif t is ast.AugAssign:
            current = self.eval(_as_load(s.target), fr)
            value = self.binop(s.op, current, self.eval(s.value, fr), s, fr)
            self.assign(s.target, value, fr)
        elif t is ast.If:
            cond = self.truth(self.eval(s.test, fr), s.test, fr)
            if cond is True:
                self.exec_block(s.body, fr)
            elif cond is False:
                self.exec_block(s.orelse, fr)
            else:
                # a branch that can only raise is not taken by a config that loads at all
                body_raises, else_raises = _only_raises(s.body), _only_raises(s.orelse) and bool(s.orelse)
                if body_raises and not else_raises:
                    self.exec_block(s.orelse, fr)
                elif else_raises and not body_raises:
                    self.exec_block(s.body, fr)
                else:
                    why = self.unknown(f"set under a condition that is not known statically ({cond.reason})",
                                       s, mod)
                    self.havoc(s.body + s.orelse, fr, why, loop_jumps=True)
        elif t is ast.For:
            self.exec_for(s, fr)
        elif t is ast.Assert:
            # torchtitan runs without -O: a failing assert means the config never loads
            if self.truth(self.eval(s.test, fr), s.test, fr) is False:
                raise _Raise(self.unknown("an assert fails here", s, mod))
        elif t in (ast.Pass, ast.Global, ast.Nonlocal):
            pass
        elif t is ast.Break:
            raise _Break()
        elif t is ast.Continue:
            raise _Continue()
        elif t is ast.Raise:
            what = _text(s.exc.func if isinstance(s.exc, ast.Call) else s.exc) if s.exc is not None else "re-raise"
            raise _Raise(self.unknown(f"raises {what} here", s, mod))
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef):
            if s.decorator_list:
                fr.locals[s.name] = self.unknown(f"local function {s.name} is decorated", s, mod)
            else:
                fr.locals[s.name] = FuncRef(mod, s, closure=fr)
        elif t is ast.ClassDef:
            fr.locals[s.name] = self.unknown(f"local class {s.name} is not followed", s, mod)
        elif t is ast.Import:
            for alias in s.names:
                parts = tuple(alias.name.split("."))
                if alias.asname:
                    fr.locals[alias.asname] = Sym(parts, len(parts), alias.asname)
                else:
                    fr.locals[parts[0]] = Sym(parts[:1], 1, parts[0])
        elif t is ast.ImportFrom:
            base = _abs_import(mod, s.module, s.level)
            for alias in s.names:
                if alias.name == "*":
                    continue
                name = alias.asname or alias.name
                if base is None:
                    fr.locals[name] = self.unknown("relative import outside a package", s, mod)
                else:
                    parts = tuple(base.split("."))
                    fr.locals[name] = Sym(parts + (alias.name,), len(parts), name)
        elif t is ast.With:
            for item in s.items:
                self.eval(item.context_expr, fr)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, self.unknown("bound by a with statement", item.optional_vars,
                                                                 mod), fr)
            self.exec_block(s.body, fr)
        elif t is ast.Try or t.__name__ == "TryStar":
            try:
                self.exec_block(s.body, fr)
            except _Raise as exc:
                # an exception handled here: which handler ran, and from where, is not followed
                self.havoc(s.body + [h for h in s.handlers], fr, exc.unknown)
            else:
                self.exec_block(s.orelse, fr)
            if s.handlers:
                why = self.unknown("set by an exception handler", s, mod)
                self.havoc(list(s.handlers), fr, why)
            self.exec_block(s.finalbody, fr)
        elif t is ast.Delete:
            why = self.unknown("deleted", s, mod)
            for target in s.targets:
                self.havoc_target(target, fr, why)
        else:   # while, match, async statements, ...
            why = self.unknown(f"set inside a {t.__name__.lower()} statement, which is not followed", s, mod)
            self.havoc([s], fr, why)

    def exec_for(self, s: ast.For, fr: Frame) -> None:
        seq = self.iterate(self.eval(s.iter, fr), s.iter, fr)
        if isinstance(seq, U):
            why = self.unknown(f"set in a loop over values not known statically ({seq.reason})", s, fr.mod)
            self.havoc([s], fr, why)
            return
        for item in seq:
            self.assign(s.target, item, fr)
            try:
                self.exec_block(s.body, fr)
            except _Break:
                return
            except _Continue:
                continue
        self.exec_block(s.orelse, fr)

    def iterate(self, value, node, fr: Frame):
        value = self.force(value, node, fr)
        if isinstance(value, U):
            return value
        if isinstance(value, dict):
            value = list(value)
        if isinstance(value, (list, tuple, str)):
            if len(value) > MAX_UNROLL:
                return self.unknown(f"a loop of {len(value)} iterations (more than {MAX_UNROLL})", node, fr.mod)
            return list(value)
        return self.unknown(f"iterates over {_text(node)}, not a known sequence", node, fr.mod)

    # -- assignment --------------------------------------------------------------
    def assign(self, target, value, fr: Frame) -> None:
        t = type(target)
        if t is ast.Name:
            fr.locals[target.id] = value
        elif t is ast.Attribute:
            obj = self.target_object(target.value, fr)
            self.set_field(obj, target.attr, value, self.here(target, fr.mod), target, fr)
        elif t in (ast.Tuple, ast.List):
            value = self.force(value, target, fr)
            if isinstance(value, dict):
                value = list(value)
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            if isinstance(value, (list, tuple)) and not starred and len(value) == len(target.elts):
                for elt, item in zip(target.elts, value):
                    self.assign(elt, item, fr)
            else:
                why = value if isinstance(value, U) else self.unknown("unpacking not followed", target, fr.mod)
                for elt in target.elts:
                    self.assign(elt.value if isinstance(elt, ast.Starred) else elt, why, fr)
        elif t is ast.Subscript:
            container = self.force(self.eval(target.value, fr), target.value, fr)
            key = self.force(self.eval(target.slice, fr), target.slice, fr)
            if isinstance(container, list) and isinstance(key, int) and -len(container) <= key < len(container):
                container[key] = value
            elif isinstance(container, dict) and isinstance(key, _LITERAL):
                container[key] = value
            elif isinstance(container, U):
                pass   # writing into something already unknown
            else:
                why = key if isinstance(key, U) else self.unknown(f"item assignment on {_text(target.value)}",
                                                                   target, fr.mod)
                self.havoc_target(target.value, fr, why)
        elif t is ast.Starred:
            self.assign(target.value, self.unknown("starred assignment", target, fr.mod), fr)

    def target_object(self, node, fr: Frame):
        """The object an attribute assignment writes into; a defaulted sub-config is created."""
        if isinstance(node, ast.Attribute):
            base = self.target_object(node.value, fr)
            if isinstance(base, Obj):
                current = base.fields.get(node.attr, None) if node.attr in base.fields else None
                if isinstance(current, Obj):
                    return current
                if node.attr in base.fields and not isinstance(current, U):
                    return self.unknown(f"{_text(node)} is not a sub-config", node, fr.mod)
                # a defaulted sub-config (rest None) or one written into while unknown
                child = Obj(None, rest=current if isinstance(current, U) else base.rest)
                base.fields[node.attr] = child
                return child
            return base if isinstance(base, U) else self.unknown(f"writes into {_text(node)}", node, fr.mod)
        return self.force(self.eval(node, fr), node, fr)

    def set_field(self, obj, attr: str, value, pos, node, fr: Frame) -> None:
        if isinstance(obj, Obj):
            obj.fields[attr] = value
            obj.pos[attr] = pos
        # writing into an unknown object: the object is already unknown as a whole

    def havoc(self, stmts, fr: Frame, why: U, loop_jumps: bool = False) -> None:
        """Make everything these statements may set unknown (branches, loops not followed).

        A ``return`` among them (or a ``break``/``continue`` leaving them, for a branch)
        means what runs next is not known either: the function's result becomes unknown.
        """
        jump = _jump(stmts, loop_jumps)
        if jump is not None:
            raise _Uncertain(self.unknown(f"a {jump} under a condition that is not known statically "
                                          f"({why.reason})", stmts[0], fr.mod))
        for stmt in stmts:
            for node in ast.walk(stmt):
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        self.havoc_target(target, fr, why)
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    self.havoc_target(node.optional_vars, fr, why)
                elif isinstance(node, ast.NamedExpr):
                    self.havoc_target(node.target, fr, why)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    fr.locals[node.name] = why
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        fr.locals[alias.asname or alias.name.split(".")[0]] = why
                elif isinstance(node, ast.Call):
                    # a call may mutate what it is given or the object whose method it is
                    if isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATING:
                        self.havoc_target(node.func.value, fr, why)
                    for arg in list(node.args) + [k.value for k in node.keywords]:
                        if isinstance(arg, (ast.Name, ast.Attribute)):
                            self.poison(self.peek(arg, fr), why)

    def peek(self, node, fr: Frame):
        """Evaluate a name or attribute chain without side effects (for havoc)."""
        try:
            if isinstance(node, ast.Name):
                return self.lookup(node.id, node, fr)
            if isinstance(node, ast.Attribute):
                base = self.peek(node.value, fr)
                if isinstance(base, Obj):
                    return base.fields.get(node.attr)
        except (_Limit, _Raise, _Return):
            pass
        return None

    def havoc_target(self, target, fr: Frame, why: U) -> None:
        # what is already unknown keeps its first reason: the root cause, not the last symptom
        if isinstance(target, ast.Name):
            if not isinstance(fr.locals.get(target.id), U):
                fr.locals[target.id] = why
        elif isinstance(target, ast.Attribute):
            obj = self.peek(target.value, fr)
            if isinstance(obj, Obj):
                if isinstance(obj.fields.get(target.attr), U):
                    return
                obj.fields[target.attr] = why
                obj.pos[target.attr] = self.here(target, fr.mod)
            elif isinstance(target.value, (ast.Name, ast.Attribute)) and obj is None:
                # writes into a sub-config not set yet: create it, the field unknown
                try:
                    holder = self.target_object(target.value, fr)
                except (_Limit, _Raise, _Return):
                    holder = None
                if isinstance(holder, Obj):
                    holder.fields[target.attr] = why
                    holder.pos[target.attr] = self.here(target, fr.mod)
        elif isinstance(target, ast.Subscript):
            self.havoc_target(target.value, fr, why)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.havoc_target(elt, fr, why)
        elif isinstance(target, ast.Starred):
            self.havoc_target(target.value, fr, why)

    def poison(self, value, why: U) -> None:
        """An object handed to code that is not followed may have been changed: all of it unknown."""
        if isinstance(value, Obj) and value.kind != "model":
            value.fields.clear()
            value.pos.clear()
            value.rest = why
