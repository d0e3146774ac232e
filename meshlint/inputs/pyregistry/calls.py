"""The interpreter's calls: arguments, constructors, ``model_registry``, helpers and derivations, copies."""

from __future__ import annotations

import ast
import os

from meshlint.inputs.pyregistry.values import (Builtin, ClassRef, FuncRef, LayerCount, _Limit,
    _LITERAL_TYPES, MAX_CALL_DEPTH, MAX_VALUE_DEPTH, Method, _MUTATING, Obj, _Raise, _Return, _Snap,
    SpecPart, Sym, TailFqns, _TRANSPARENT_DECORATORS, U)
from meshlint.inputs.pyregistry.frame import (Frame, _is_class_name, _is_generator, _PURE_FUNCS,
    _PURE_METHODS, _Raised, _required, _root, _SENTINEL, _text, _Uncertain)


class Calls:
    """Calls into the registry's own code (a part of ``Interp``)."""

    # -- calls -------------------------------------------------------------------
    def eval_args(self, node: ast.Call, fr: Frame):
        args: list = []
        kwargs: dict = {}
        kwpos: dict = {}
        star = None
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                seq = self.iterate(self.eval(arg.value, fr), arg.value, fr)
                if isinstance(seq, U):
                    star = seq
                else:
                    args.extend(seq)
            else:
                args.append(self.eval(arg, fr))
        for kw in node.keywords:
            if kw.arg is None:
                mapping = self.force(self.eval(kw.value, fr), kw.value, fr)
                if isinstance(mapping, dict) and all(isinstance(k, str) for k in mapping):
                    where = self.here(kw, fr.mod)
                    for key, value in mapping.items():
                        kwargs[key] = value
                        kwpos[key] = where
                else:
                    star = mapping if isinstance(mapping, U) else self.unknown(
                        f"**{_text(kw.value)} is not a known mapping", kw, fr.mod)
            else:
                kwargs[kw.arg] = self.eval(kw.value, fr)
                kwpos[kw.arg] = self.here(kw, fr.mod)
        return args, kwargs, kwpos, star

    def call(self, node: ast.Call, fr: Frame):
        func = node.func
        callee = self.eval(func, fr)
        args, kwargs, kwpos, star = self.eval_args(node, fr)
        if isinstance(func, ast.Attribute) and func.attr in _MUTATING and not isinstance(callee, Method):
            because = f" ({callee.reason})" if isinstance(callee, U) else ""
            why = self.unknown(f"{_text(func)}() changes a value not known statically{because}", node, fr.mod)
            self.havoc_target(func.value, fr, why)
            for value in args + list(kwargs.values()):
                self.poison(value, why)
            return why
        if isinstance(func, ast.Attribute) and isinstance(callee, U):
            receiver = self.peek(func.value, fr)
            if isinstance(receiver, Obj) and receiver.kind != "model" and func.attr not in receiver.fields:
                # a method of a config object, not followed: it may change the object
                self.poison(receiver, self.unknown(f"{_text(func)}() is a method not followed; it may change "
                                                   f"{_text(func.value)}", node, fr.mod))
        return self.apply(callee, args, kwargs, kwpos, star, node, fr)

    def apply(self, callee, args, kwargs, kwpos, star, node, fr: Frame):
        mod = fr.mod
        if isinstance(callee, U):
            why = self.unknown(f"call of {_text(node.func)}, not followed ({callee.reason})", node, mod)
            for value in args + list(kwargs.values()):
                self.poison(value, why)
            return why
        if isinstance(callee, Builtin):
            return self.builtin(callee.name, args, kwargs, star, node, fr)
        if isinstance(callee, Method):
            return self.method(callee, args, kwargs, star, node, fr)
        if isinstance(callee, Sym):
            name = callee.parts[-1]
            if name == "model_registry":
                return self.model_registry(".".join(callee.parts[:-1]), args, kwargs, kwpos, star, node, fr)
            special = self.special(callee.dotted, callee.orig, args, kwargs, kwpos, star, node, fr)
            if special is not NotImplemented:
                return special
            if _is_class_name(name):
                return self.construct(callee.orig, callee, args, kwargs, kwpos, star, node, fr)
            resolved = self.resolve(callee)
            if isinstance(resolved, (FuncRef, ClassRef)):
                if isinstance(resolved, ClassRef):
                    return self.construct(callee.orig, resolved, args, kwargs, kwpos, star, node, fr)
                return self.apply(resolved, args, kwargs, kwpos, star, node, fr)
            if resolved is None:
                why = self.unknown(f"call to {callee.orig}() is not followed: it is defined outside the checkout "
                                   "being read", node, mod)
            elif isinstance(resolved, U):
                why = self.unknown(f"call to {callee.orig}() is not followed ({resolved.reason})", node, mod)
            else:
                why = self.unknown(f"{callee.orig} is not a function that can be followed", node, mod)
            for value in args + list(kwargs.values()):
                self.poison(value, why)
            return why
        if isinstance(callee, FuncRef):
            if callee.node.name == "model_registry" and callee.closure is None:
                pkg = callee.mod.dotted if callee.mod.is_pkg else callee.mod.package
                return self.model_registry(pkg, args, kwargs, kwpos, star, node, fr)
            return self.invoke(callee, args, kwargs, star, node, fr)
        if isinstance(callee, ClassRef):
            return self.construct(callee.display, callee, args, kwargs, kwpos, star, node, fr)
        return self.unknown(f"calls {_text(node.func)}, which is not a function", node, mod)

    def construct(self, display, ref, args, kwargs, kwpos, star, node, fr: Frame):
        obj = Obj(display, ref=ref, ref_mod=fr.mod)
        if args:
            obj.rest = self.unknown(f"{display}(...) has positional arguments, not mapped to fields", node, fr.mod)
        if star is not None:
            obj.rest = star
        for key, value in kwargs.items():
            obj.fields[key] = value
            obj.pos[key] = kwpos.get(key) or self.here(node, fr.mod)
        if isinstance(ref, ClassRef):
            for stmt in ref.node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                    obj.fields.clear()
                    obj.pos.clear()
                    obj.rest = self.unknown(f"{display} has its own __init__, not followed", node, fr.mod)
                elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__post_init__":
                    for sub in ast.walk(stmt):
                        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                            for target in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                                        and target.value.id == "self":
                                    obj.fields[target.attr] = self.unknown(
                                        f"{target.attr} is set by {display}.__post_init__, not followed", node, fr.mod)
                                    obj.pos[target.attr] = self.here(node, fr.mod)
        return obj

    def model_registry(self, pkg: str, args, kwargs, kwpos, star, node, fr: Frame):
        obj = Obj("ModelSpec", kind="model")
        obj.module = pkg
        obj.fields["name"] = self.model_name(pkg)
        obj.pos["name"] = self.here(node, fr.mod)
        if args:
            obj.fields["flavor"] = self.force(args[0], node, fr)
            obj.pos["flavor"] = self.here(node.args[0] if node.args else node, fr.mod)
        elif "flavor" in kwargs:
            obj.fields["flavor"] = self.force(kwargs["flavor"], node, fr)
            obj.pos["flavor"] = kwpos.get("flavor") or self.here(node, fr.mod)
        else:
            obj.fields["flavor"] = self.unknown("model_registry() is called without a flavor", node, fr.mod)
            obj.pos["flavor"] = self.here(node, fr.mod)
        for key, value in kwargs.items():
            if key != "flavor":
                obj.fields[key] = value
                obj.pos[key] = kwpos.get(key) or self.here(node, fr.mod)
        if star is not None:
            obj.rest = star
        return obj

    def model_name(self, pkg: str) -> str:
        """The model package: the directory under torchtitan/models/ (or experiments/...)."""
        parts = pkg.split(".") if pkg else []
        if len(parts) >= 3 and parts[0] == "torchtitan" and parts[1] == "models":
            return parts[2]
        if len(parts) >= 3 and parts[0] == "torchtitan" and parts[1] == "experiments":
            rest = parts[2:]
            path = self.checkout.file_of(pkg)
            if path and not path.endswith("__init__.py") and len(rest) > 1:
                rest = rest[:-1]
            return "/".join(rest)
        return parts[-1] if parts else os.path.basename(os.path.dirname(self.top.path))

    def invoke(self, fref: FuncRef, args, kwargs, star, node, fr: Frame):
        fdef = fref.node
        mod = fref.mod
        if isinstance(fdef, ast.AsyncFunctionDef):
            return self.unknown(f"{fdef.name}() is async", node, fr.mod)
        if star is not None:
            why = self.unknown(f"call of {fdef.name}() with arguments not known statically ({star.reason})",
                               node, fr.mod)
            for value in args + list(kwargs.values()):
                self.poison(value, why)
            return why
        for dec in fdef.decorator_list:
            name = _text(dec.func if isinstance(dec, ast.Call) else dec)
            if name not in _TRANSPARENT_DECORATORS:
                why = self.unknown(f"{fdef.name}() is decorated by @{name}, not followed", node, fr.mod)
                for value in args + list(kwargs.values()):
                    self.poison(value, why)
                return why
        if _is_generator(fdef, mod):
            return self.unknown(f"{fdef.name}() is a generator", node, fr.mod)
        key = (mod.path, fdef.name, fdef.lineno)
        if not args and not kwargs and fref.closure is None and _required(fdef) == 0:
            return self.derive(fref, key, node, fr)
        if key in self.stack:
            return self.unknown(f"recursive call to {fdef.name}() is not followed", node, fr.mod)
        if self.depth >= MAX_CALL_DEPTH:
            return self.unknown(f"calls nested more than {MAX_CALL_DEPTH} deep are not followed", node, fr.mod)
        local = self.bind(fref, args, kwargs, node, fr)
        saved = (self.depth, self.site)
        if self.depth == 0:
            self.site = self.here(node, fr.mod)
        self.depth += 1
        self.stack.add(key)
        try:
            self.exec_block(fdef.body, Frame(mod, local, fref.closure))
            value = None
        except _Return as ret:
            value = ret.value
        except _Uncertain as unc:
            value = unc.unknown
            # what it did to its arguments after that point is not known either (only where it may write)
            mutated = self.mutated_params(fref)
            positional = [p.arg for p in list(fdef.args.posonlyargs) + list(fdef.args.args)]
            for i, arg in enumerate(args):
                name = positional[i] if i < len(positional) else (fdef.args.vararg.arg if fdef.args.vararg else "")
                if name in mutated:
                    self.poison_param(fref, name, arg, unc.unknown)
            for name, arg in kwargs.items():
                if name in mutated or (fdef.args.kwarg is not None and fdef.args.kwarg.arg in mutated):
                    self.poison_param(fref, name, arg, unc.unknown)
        finally:
            self.depth, self.site = saved
            self.stack.discard(key)
        return value

    def poison_param(self, fref: FuncRef, param: str, value, why: U) -> None:
        """``value``, handed to ``fref`` as ``param``, after the function stopped where it is not known: all of it
        unknown (a reader that knows which fields the function may write narrows this)."""
        self.poison(value, why)

    def mutated_params(self, fref: FuncRef, depth: int = 0) -> set:
        """Parameters a function may write into (syntactically; calls it cannot see count as writes)."""
        fdef = fref.node
        cache = self.reader.mutates
        hit = cache.get(id(fdef))
        if hit is not None and hit[0] is fdef:
            return hit[1]
        a = fdef.args
        params = [p.arg for p in list(a.posonlyargs) + list(a.args) + list(a.kwonlyargs)]
        params += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        alias = {p: p for p in params}
        nodes = []
        stack = list(fdef.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            nodes.append(node)
            stack.extend(ast.iter_child_nodes(node))
        for _ in range(3):   # local names that refer into a parameter (x = param.sub, for x in param...)
            for node in nodes:
                if isinstance(node, ast.Assign):
                    src = _root(node.value)
                    if src is None and isinstance(node.value, ast.Call) and node.value.args and \
                            _text(node.value.func).split(".")[-1] in ("replace", "copy", "cast"):
                        src = _root(node.value.args[-1] if _text(node.value.func).endswith("cast")
                                    else node.value.args[0])
                    if src in alias:
                        for target in node.targets:
                            for name in ast.walk(target):
                                if isinstance(name, ast.Name):
                                    alias.setdefault(name.id, alias[src])
                elif isinstance(node, (ast.For, ast.comprehension)) and _root(node.iter) in alias:
                    for name in ast.walk(node.target):
                        if isinstance(name, ast.Name):
                            alias.setdefault(name.id, alias[_root(node.iter)])
        out: set = set()
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    if isinstance(target, (ast.Attribute, ast.Subscript)) and _root(target) in alias:
                        out.add(alias[_root(target)])
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and _root(func.value) in alias and \
                        func.attr not in _PURE_METHODS:
                    out.add(alias[_root(func.value)])
                passed = [(i, arg) for i, arg in enumerate(node.args)] + [(kw.arg, kw.value) for kw in node.keywords]
                for where, arg in passed:
                    src = _root(arg)
                    if src not in alias or isinstance(arg, ast.Starred):
                        if isinstance(arg, ast.Starred) and _root(arg.value) in alias:
                            out.add(alias[_root(arg.value)])
                        continue
                    name = _text(func)
                    if name.split(".")[-1] in _PURE_FUNCS:
                        continue
                    callee = None
                    if isinstance(func, ast.Name) and depth < 3:
                        binding = fref.mod.binding(func.id)
                        if binding is not None and binding[0] == "def" and isinstance(binding[1], ast.FunctionDef):
                            callee = FuncRef(fref.mod, binding[1])
                    if callee is None:
                        out.add(alias[src])
                        continue
                    sub = self.mutated_params(callee, depth + 1)
                    cparams = [p.arg for p in list(callee.node.args.posonlyargs) + list(callee.node.args.args)]
                    target = cparams[where] if isinstance(where, int) and where < len(cparams) else where
                    if target is None or target in sub or (isinstance(where, int) and where >= len(cparams)):
                        out.add(alias[src])
        cache[id(fdef)] = (fdef, out)
        return out

    def derive(self, fref: FuncRef, key, node, fr: Frame):
        """A zero-argument function (another config function): evaluated once per read, then copied."""
        reader = self.reader
        fdef = fref.node
        snap = reader.derived.get(key)
        if snap is None:
            if key in reader.active:
                return self.unknown(f"derivation cycle: {fdef.name}() depends on itself", node, fr.mod)
            if self.depth >= MAX_CALL_DEPTH:
                return self.unknown(f"derivations nested more than {MAX_CALL_DEPTH} deep are not followed",
                                    node, fr.mod)
            reader.active.add(key)
            saved = (self.depth, self.site, self.stack)
            self.depth, self.site, self.stack = self.depth + 1, _SENTINEL, set()
            try:
                try:
                    local = self.bind(fref, [], {}, node, fr)
                    self.exec_block(fdef.body, Frame(fref.mod, local))
                    value = None
                except _Return as ret:
                    value = ret.value
                except _Uncertain as unc:
                    value = unc.unknown
                except _Raise as exc:
                    value = _Raised(exc.unknown)
            finally:
                self.depth, self.site, self.stack = saved
                reader.active.discard(key)
            snap = value if isinstance(value, _Raised) else self.copy(value, _SENTINEL, None)
            reader.derived[key] = snap
        site = self.here(node, fr.mod)
        if isinstance(snap, _Raised):
            raise _Raise(self.copy(snap.unknown, site, self.top.path))
        if self.depth == 0 and fr.mod is self.top:
            self.derived.append((f"{fref.mod.rel}::{fdef.name}", site[0]))
        if isinstance(snap, _Snap):
            return self.copy(snap.value, site, self.top.path, note=(snap.rel, snap.path))
        return self.copy(snap, site, self.top.path)

    def bind(self, fref: FuncRef, args, kwargs, node, fr: Frame) -> dict:
        fdef = fref.node
        a = fdef.args
        positional = list(a.posonlyargs) + list(a.args)
        names = {p.arg for p in a.args} | {p.arg for p in a.kwonlyargs}
        local: dict = {}

        def type_error(msg: str):
            return _Raise(self.unknown(f"{fdef.name}() raises TypeError: {msg}", node, fr.mod))

        for i, p in enumerate(positional):
            if i < len(args):
                local[p.arg] = args[i]
        extra = args[len(positional):]
        if a.vararg is not None:
            local[a.vararg.arg] = tuple(extra)
        elif extra:
            raise type_error(f"takes {len(positional)} positional arguments but {len(args)} were given")
        spill: dict = {}
        for key, value in kwargs.items():
            if key in names:
                if key in local:
                    raise type_error(f"got multiple values for argument '{key}'")
                local[key] = value
            elif a.kwarg is not None:
                spill[key] = value
            else:
                raise type_error(f"got an unexpected keyword argument '{key}'")
        if a.kwarg is not None:
            local[a.kwarg.arg] = spill
        dframe = fref.closure or Frame(fref.mod, {})
        first_default = len(positional) - len(a.defaults)
        for i, p in enumerate(positional):
            if p.arg not in local:
                if i >= first_default:
                    local[p.arg] = self.eval(a.defaults[i - first_default], dframe)
                else:
                    raise type_error(f"missing required argument '{p.arg}'")
        for p, default in zip(a.kwonlyargs, a.kw_defaults):
            if p.arg not in local:
                if default is None:
                    raise type_error(f"missing required keyword argument '{p.arg}'")
                local[p.arg] = self.eval(default, dframe)
        return local

    def copy(self, value, site, file, memo=None, depth: int = 0, note=None):
        """Deep copy of a derived value; every position becomes ``site`` (the call in this function).

        ``note`` (module rel, path): unknowns of that snapshot's own function get "(at rel:line)".
        """
        tv = type(value)
        if tv in _LITERAL_TYPES:
            return value
        if memo is None:
            memo = {}
        if tv is U:
            if site is None:
                return value
            reason = value.reason
            if note is not None and not value.noted and value.line > 0 and value.file == note[1]:
                reason = f"{reason} (at {note[0]}:{value.line})"
            return U(reason, site[0], site[1], file or value.file, True)
        if isinstance(value, U):  # SpecPart, LayerCount, TailFqns: the same, placed at the call here
            if site is None:
                return value
            where = (site[0], site[1], file or value.file)
            if tv is TailFqns:
                return TailFqns(value.reason, *where, {**value.call, "line": site[0], "col": site[1],
                                                       "file": file or value.file})
            if tv is LayerCount:
                return LayerCount(value.reason, *where, value.name, value.flavor)
            if tv is SpecPart:
                return SpecPart(value.reason, *where, value.name, value.flavor, value.part)
            return U(value.reason, *where, True)
        if depth > MAX_VALUE_DEPTH:
            return U("value nested too deeply to copy", *(site or _SENTINEL), file or self.top.path)
        if tv is Obj:
            if id(value) in memo:
                return memo[id(value)]
            new = Obj(value.cls, value.ref, None, value.kind, value.ref_mod)
            new.module = value.module
            memo[id(value)] = new
            new.rest = self.copy(value.rest, site, file, memo, depth + 1, note) if value.rest is not None else None
            for key, item in value.fields.items():
                new.fields[key] = self.copy(item, site, file, memo, depth + 1, note)
            new.pos = dict(value.pos) if site is None else dict.fromkeys(value.pos, site)
            return new
        if tv in (list, tuple, dict):
            self.reader.spent += len(value)     # copies count against the file's budget
            if self.reader.spent > self.reader.budget:
                raise _Limit("the evaluation budget for this file is spent (it grows with the file's size)")
        if tv is list:
            if id(value) in memo:
                return memo[id(value)]
            out: list = []
            memo[id(value)] = out
            out.extend(self.copy(item, site, file, memo, depth + 1, note) for item in value)
            return out
        if tv is tuple:
            return tuple(self.copy(item, site, file, memo, depth + 1, note) for item in value)
        if tv is dict:
            if id(value) in memo:
                return memo[id(value)]
            out_d: dict = {}
            memo[id(value)] = out_d
            for key, item in value.items():
                out_d[key] = self.copy(item, site, file, memo, depth + 1, note)
            return out_d
        return value
