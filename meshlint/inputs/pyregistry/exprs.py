"""The interpreter's expressions: names, globals, attributes, subscripts, operators, comprehensions."""

from __future__ import annotations

import ast

from meshlint.inputs.pyregistry.values import (Builtin, _BUILTINS, ClassRef, FuncRef, _LITERAL, MAX_INT,
    MAX_ITEMS, MAX_SEQ, MAX_UNROLL, Method, ModuleVal, Obj, _Raise, SpecPart, Sym, U)
from meshlint.inputs.pyregistry.checkout import _abs_import, Module
from meshlint.inputs.pyregistry.frame import (_arith_guard, _BINOPS, _CMPOPS, Frame, _IN_PROGRESS,
    _is_class_name, _is_constant_name, _literal_ok, _MATH_CONSTANTS, _Stop, _text)


class Expressions:
    """Expressions (a part of ``Interp``)."""

    # -- expressions -------------------------------------------------------------
    def eval(self, node, fr: Frame):
        self.tick()
        self.nest += 1
        try:
            if self.nest > self.max_nest:
                return self.unknown("expression nested too deeply to follow", node, fr.mod)
            return self._eval(node, fr)
        finally:
            self.nest -= 1

    def _eval(self, node, fr: Frame):
        t = type(node)
        mod = fr.mod
        if t is ast.Constant:
            v = node.value
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_INT:
                return self.unknown(f"integer literal larger than {MAX_INT:.0e}", node, mod)
            if v is Ellipsis:
                return self.unknown("...", node, mod)
            return v
        if t is ast.Name:
            return self.lookup(node.id, node, fr)
        if t is ast.Attribute:
            return self.get_attr(self.eval(node.value, fr), node.attr, node, fr)
        if t is ast.Call:
            return self.call(node, fr)
        if t is ast.BinOp:
            return self.binop(node.op, self.eval(node.left, fr), self.eval(node.right, fr), node, fr)
        if t is ast.UnaryOp:
            return self.unaryop(node, self.force(self.eval(node.operand, fr), node.operand, fr), fr)
        if t is ast.BoolOp:
            result = None
            for value_node in node.values:
                value = self.eval(value_node, fr)
                truth = self.truth(value, value_node, fr)
                if isinstance(truth, U):
                    return truth
                result = self.force(value, value_node, fr)
                if isinstance(node.op, ast.And) and not truth:
                    return result
                if isinstance(node.op, ast.Or) and truth:
                    return result
            return result
        if t is ast.Compare:
            return self.compare(node, fr)
        if t is ast.IfExp:
            cond = self.truth(self.eval(node.test, fr), node.test, fr)
            if isinstance(cond, U):
                return cond
            return self.eval(node.body if cond else node.orelse, fr)
        if t in (ast.Tuple, ast.List, ast.Set):
            items = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    seq = self.iterate(self.eval(elt.value, fr), elt.value, fr)
                    if isinstance(seq, U):
                        return seq
                    items.extend(seq)
                else:
                    items.append(self.eval(elt, fr))
            if len(items) > MAX_ITEMS:
                return self.unknown("sequence too long", node, mod)
            if t is ast.Tuple:
                return tuple(items)
            if t is ast.Set:
                return self.unknown("a set is not a config value", node, mod)
            return items
        if t is ast.Dict:
            out = {}
            for key_node, value_node in zip(node.keys, node.values):
                if key_node is None:
                    mapping = self.force(self.eval(value_node, fr), value_node, fr)
                    if isinstance(mapping, dict):
                        out.update(mapping)
                    else:
                        return mapping if isinstance(mapping, U) else self.unknown(
                            f"**{_text(value_node)} is not a known mapping", value_node, mod)
                    continue
                key = self.force(self.eval(key_node, fr), key_node, fr)
                if isinstance(key, U):
                    return key
                if not isinstance(key, _LITERAL) and not (isinstance(key, tuple) and _literal_ok(key)):
                    return self.unknown("dictionary key is not a literal", key_node, mod)
                out[key] = self.eval(value_node, fr)
            return out
        if t is ast.JoinedStr:
            out = ""
            for part in node.values:
                if isinstance(part, ast.Constant):
                    out += str(part.value)
                    continue
                value = self.force(self.eval(part.value, fr), part.value, fr)
                if isinstance(value, U):
                    return value
                if not isinstance(value, _LITERAL):
                    return self.unknown("f-string of a non-literal value", part, mod)
                spec = ""
                if part.format_spec is not None:
                    spec = self.eval(part.format_spec, fr)
                    if not isinstance(spec, str):
                        return spec if isinstance(spec, U) else self.unknown("format spec", part, mod)
                try:
                    if part.conversion == ord("r"):
                        value = repr(value)
                    elif part.conversion == ord("s"):
                        value = str(value)
                    elif part.conversion == ord("a"):
                        value = ascii(value)
                    out += format(value, spec)
                except (ValueError, TypeError, OverflowError) as exc:
                    return self.unknown(f"f-string raises {type(exc).__name__}", part, mod)
                if len(out) > MAX_SEQ:
                    return self.unknown("string too long", node, mod)
            return out
        if t is ast.Subscript:
            return self.subscript(node, fr)
        if t is ast.Slice:
            parts = []
            for part in (node.lower, node.upper, node.step):
                v = self.force(self.eval(part, fr), part, fr) if part is not None else None
                if isinstance(v, U):
                    return v
                if v is not None and not isinstance(v, int):
                    return self.unknown("slice bound is not an integer", node, mod)
                parts.append(v)
            return slice(*parts)
        if t is ast.NamedExpr:
            value = self.eval(node.value, fr)
            self.assign(node.target, value, fr)
            return value
        if t in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            return self.comprehension(node, fr)
        if t is ast.Lambda:
            return self.unknown("a lambda is not a config value", node, mod)
        if t is ast.Starred:
            return self.unknown("starred expression", node, mod)
        return self.unknown(f"{t.__name__} expression not followed", node, mod)

    def lookup(self, name: str, node, fr: Frame):
        f = fr
        while f is not None:
            if name in f.locals:
                return f.locals[name]
            f = f.parent
        return self.global_value(fr.mod, name, node, fr)

    def global_value(self, mod: Module, name: str, node, fr: Frame):
        binding = mod.binding(name)
        if binding is None:
            if name in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[name]
            if name in _BUILTINS:
                return Builtin(name)
            return self.unknown(f"name {name} is not defined at module level", node, fr.mod)
        kind = binding[0]
        if kind == "def":
            stmt = binding[1]
            if isinstance(stmt, ast.ClassDef):
                return ClassRef(mod, stmt, name)
            return FuncRef(mod, stmt)
        if kind == "import":
            parts, modlen = binding[1], binding[2]
            return Sym(parts, modlen, name)
        if kind == "from":
            stmt, orig = binding[1], binding[2]
            base = _abs_import(mod, stmt.module, stmt.level)
            if base is None:
                return self.unknown("relative import outside a package", node, fr.mod)
            parts = tuple(base.split("."))
            return Sym(parts + (orig,), len(parts), name)
        if kind == "unknown":
            return self.unknown(f"{name} is {binding[1]}", node, fr.mod)
        # a module-level assignment: evaluated once per run, shared like the real module object
        stmt, index = binding[1], binding[2]
        key = (mod.path, name)
        cached = self.gcache.get(key)
        if cached is _IN_PROGRESS:
            return self.unknown(f"{name} is defined in terms of itself", node, fr.mod)
        if cached is not None or key in self.gcache:
            return cached
        self.gcache[key] = _IN_PROGRESS
        saved = (self.depth, self.site)
        if mod is not self.top and self.depth == 0:
            self.depth, self.site = 1, self.here(node, fr.mod)
        try:
            value = self.eval(stmt.value, Frame(mod, {}))
        finally:
            self.depth, self.site = saved
        if index is not None:
            value = self.force(value, stmt, Frame(mod, {}))
            if isinstance(value, (list, tuple)) and index < len(value):
                value = value[index]
            elif not isinstance(value, U):
                value = self.unknown(f"{name} is unpacked from a value not known statically", stmt, mod)
        self.gcache[key] = value
        return value

    def resolve(self, sym: Sym, hops: int = 0):
        """The value a lazily imported name stands for, or None when it is outside the checkout."""
        cache = self.reader.resolved
        if sym.parts in cache:
            return cache[sym.parts]
        if hops > 8:
            return None
        cache[sym.parts] = None   # cycle guard
        value = None
        mod = self.checkout.module(".".join(sym.parts[: sym.modlen]))
        if mod is not None:
            value = ModuleVal(mod)
            for attr in sym.parts[sym.modlen:]:
                value = self.static_attr(value, attr, hops)
                if value is None or isinstance(value, U):
                    break
        cache[sym.parts] = value
        return value

    def static_attr(self, value, attr: str, hops: int):
        if isinstance(value, ModuleVal):
            mod = value.mod
            binding = mod.binding(attr)
            if binding is None:
                sub = self.checkout.module(f"{mod.dotted}.{attr}") if mod.is_pkg else None
                return ModuleVal(sub) if sub is not None else None
            dummy = Frame(mod, {})
            got = self.global_value(mod, attr, mod.tree, dummy)
            if isinstance(got, Sym):
                return self.resolve(got, hops + 1)
            return got
        if isinstance(value, ClassRef):
            for stmt in value.node.body:
                if isinstance(stmt, ast.ClassDef) and stmt.name == attr:
                    return ClassRef(value.mod, stmt, f"{value.display}.{attr}")
            return None
        return None

    def force(self, value, node, fr: Frame):
        """A lazily imported name used as a value: its value when it is a constant of the checkout."""
        if not isinstance(value, Sym):
            return value
        name = value.parts[-1]
        if value.dotted in _MATH_CONSTANTS:  # math.inf is a weight's value as much as float("inf")
            return _MATH_CONSTANTS[value.dotted]
        if value.dotted.startswith("os.environ") or value.dotted.startswith("os.getenv"):
            return self.unknown(f"{value.orig} reads the environment at run time", node, fr.mod)
        if not _is_constant_name(name):
            kind = "class" if _is_class_name(name) else "function or module"
            return self.unknown(f"{value.orig} is a {kind} imported from {'.'.join(value.parts[:-1])}, "
                                "not a literal", node, fr.mod)
        resolved = self.resolve(value)
        if resolved is None:
            return self.unknown(f"{value.orig} is imported from {'.'.join(value.parts[:value.modlen])}, "
                                "which is not in the checkout being read", node, fr.mod)
        if isinstance(resolved, U):
            return self.unknown(f"{value.orig}: {resolved.reason}", node, fr.mod)
        return resolved

    def get_attr(self, base, attr: str, node, fr: Frame):
        if isinstance(base, SpecPart) and base.part == "model" and attr == "layers":
            return SpecPart(base.reason, base.line, base.col, base.file, base.name, base.flavor, "layers")
        if isinstance(base, U):
            return base
        if isinstance(base, Obj):
            if attr in base.fields:
                return base.fields[attr]
            if base.kind == "model":
                why = self.unknown(f"reads {_text(node)}: the model spec's internals are not read statically",
                                   node, fr.mod)
                if attr == "model":
                    return SpecPart(why.reason, why.line, why.col, why.file, base.fields.get("name"),
                                    base.fields.get("flavor"), "model")
                return why
            if base.rest is not None:
                return base.rest
            return self.unknown(f"reads {_text(node)}, which is defaulted (defaults are not read statically)",
                                node, fr.mod)
        if isinstance(base, Sym):
            return base.attr(attr)
        if isinstance(base, ModuleVal):
            got = self.static_attr(base, attr, 0)
            return got if got is not None else self.unknown(f"{_text(node)} is not found", node, fr.mod)
        if isinstance(base, ClassRef):
            got = self.static_attr(base, attr, 0)
            return got if got is not None else self.unknown(f"class attribute {_text(node)} is not followed",
                                                            node, fr.mod)
        if isinstance(base, (str, list, dict, tuple, int, float)) and not isinstance(base, bool):
            return Method(base, attr, node.value)
        return self.unknown(f"attribute {_text(node)} is not followed", node, fr.mod)

    def subscript(self, node, fr: Frame):
        base = self.force(self.eval(node.value, fr), node.value, fr)
        key = self.force(self.eval(node.slice, fr), node.slice, fr)
        if isinstance(base, U):
            return base
        if isinstance(key, U):
            return key
        if isinstance(base, (ClassRef, Sym, Builtin)):
            return self.unknown(f"{_text(node.value)}[...] (a type) is not a value", node, fr.mod)
        try:
            if isinstance(base, (list, tuple, str, dict)):
                return base[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise _Raise(self.unknown(f"{_text(node.value)}[...] raises {type(exc).__name__}", node, fr.mod))
        return self.unknown(f"subscript of {_text(node.value)}, not a known container", node, fr.mod)

    def truth(self, value, node, fr: Frame):
        value = self.force(value, node, fr)
        if isinstance(value, U):
            return value
        if isinstance(value, (Obj, FuncRef, ClassRef, ModuleVal, Builtin)):
            return True
        if isinstance(value, (_LITERAL, list, tuple, dict)):
            return bool(value)
        return self.unknown(f"truth of {_text(node)} is not known", node, fr.mod)

    def binop(self, op, a, b, node, fr: Frame):
        a = self.force(a, node, fr)
        b = self.force(b, node, fr)
        if isinstance(a, U):
            return a
        if isinstance(b, U):
            return b
        if not _literal_ok(a) or not _literal_ok(b):
            return self.unknown(f"{type(op).__name__} of values that are not literals", node, fr.mod)
        reason = _arith_guard(op, a, b)
        if reason:
            return self.unknown(reason, node, fr.mod)
        func = _BINOPS.get(type(op))
        if func is None:
            return self.unknown(f"operator {type(op).__name__} not followed", node, fr.mod)
        try:
            result = func(a, b)
        except (ArithmeticError, TypeError, ValueError, KeyError, IndexError) as exc:
            raise _Raise(self.unknown(f"raises {type(exc).__name__}: {exc}", node, fr.mod)) from None
        if isinstance(result, int) and not isinstance(result, bool) and abs(result) > MAX_INT:
            return self.unknown(f"integer arithmetic beyond {MAX_INT:.0e}", node, fr.mod)
        return result

    def unaryop(self, node, v, fr: Frame):
        if isinstance(v, U):
            return v
        if isinstance(node.op, ast.Not):
            truth = self.truth(v, node.operand, fr)
            return truth if isinstance(truth, U) else not truth
        if not isinstance(v, (int, float, complex)):
            return self.unknown(f"{type(node.op).__name__} of a non-number", node, fr.mod)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return +v
        if isinstance(node.op, ast.Invert) and isinstance(v, int):
            return ~v
        return self.unknown("unary operator not followed", node, fr.mod)

    def compare(self, node, fr: Frame):
        left = self.force(self.eval(node.left, fr), node.left, fr)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.force(self.eval(right_node, fr), right_node, fr)
            if isinstance(left, U):
                return left
            if isinstance(right, U):
                return right
            if isinstance(op, (ast.Is, ast.IsNot)):
                if left is None or right is None or isinstance(left, bool) or isinstance(right, bool):
                    ok = (left is right) if isinstance(op, ast.Is) else (left is not right)
                elif isinstance(left, Obj) or isinstance(right, Obj):
                    return self.unknown("identity of objects is not followed", node, fr.mod)
                else:
                    ok = (left == right) if isinstance(op, ast.Is) else (left != right)
            else:
                if not (_literal_ok(left) or isinstance(op, (ast.In, ast.NotIn))) or not (
                        _literal_ok(right) or isinstance(op, (ast.Eq, ast.NotEq))):
                    if isinstance(op, (ast.Eq, ast.NotEq)) and (
                            isinstance(left, Obj) or isinstance(right, Obj)) and (
                            left is None or right is None):
                        ok = isinstance(op, ast.NotEq)
                    else:
                        return self.unknown("comparison of values that are not literals", node, fr.mod)
                else:
                    try:
                        ok = _CMPOPS[type(op)](left, right)
                    except TypeError as exc:
                        raise _Raise(self.unknown(f"comparison raises TypeError: {exc}", node, fr.mod))
            if not ok:
                return False
            left = right
        return True

    def comprehension(self, node, fr: Frame):
        scope = Frame(fr.mod, {}, fr)
        results: list = []
        count = [0]

        def loop(i: int):
            if i == len(node.generators):
                if isinstance(node, ast.DictComp):
                    key = self.force(self.eval(node.key, scope), node.key, scope)
                    if isinstance(key, U) or not isinstance(key, _LITERAL):
                        raise _Stop(key if isinstance(key, U) else self.unknown("key", node, fr.mod))
                    results.append((key, self.eval(node.value, scope)))
                else:
                    results.append(self.eval(node.elt, scope))
                count[0] += 1
                if count[0] > MAX_UNROLL * 4:
                    raise _Stop(self.unknown("comprehension too long to follow", node, fr.mod))
                self.tick()
                return
            gen = node.generators[i]
            seq = self.iterate(self.eval(gen.iter, scope if i else fr), gen.iter, fr)
            if isinstance(seq, U):
                raise _Stop(seq)
            for item in seq:
                self.assign(gen.target, item, scope)
                ok = True
                for cond in gen.ifs:
                    truth = self.truth(self.eval(cond, scope), cond, scope)
                    if isinstance(truth, U):
                        raise _Stop(truth)
                    if not truth:
                        ok = False
                        break
                if ok:
                    loop(i + 1)

        try:
            loop(0)
        except _Stop as stop:
            return stop.unknown
        if isinstance(node, ast.DictComp):
            return dict(results)
        if isinstance(node, ast.SetComp):
            return self.unknown("a set is not a config value", node, fr.mod)
        if isinstance(node, ast.GeneratorExp):
            return tuple(results)   # consumed at once by list()/tuple()/sum() in practice
        return results
