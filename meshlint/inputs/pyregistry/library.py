"""The interpreter's model of library code: ``dataclasses``/``functools``/``math`` functions, builtins, methods."""

from __future__ import annotations

import ast
import math
import re

from meshlint.inputs.pyregistry.values import (LayerCount, _LITERAL, MAX_INT, MAX_ITEMS, MAX_SEQ, Method,
    _MUTATING, Obj, _Raise, _REFLECTION, SpecPart, TAIL_FQNS, TailFqns, U)
from meshlint.inputs.pyregistry.frame import (_arith_guard, Frame, _is_class_name, _literal_ok, _MATH,
    _STR_METHODS, _text)


class Library:
    """Library functions, builtins and methods (a part of ``Interp``)."""

    # -- library functions ---------------------------------------------------------
    def special(self, dotted: str, orig: str, args, kwargs, kwpos, star, node, fr: Frame):
        mod = fr.mod
        if dotted.endswith(".__post_init__") and ".Config." in dotted and _is_class_name(dotted.split(".")[-3]):
            # a base config's __post_init__ (Trainer.Config.__post_init__(self)): at b5bcd76c6 these
            # only validate (torchtitan/trainer.py:118, config/configs.py:54,259,306)
            return None
        if dotted in _REFLECTION or dotted.rpartition(".")[2] in ("fields", "asdict") and \
                dotted.startswith("dataclasses."):
            return self.unknown(f"reflection: {orig}() is not followed", node, mod)
        if dotted in ("dataclasses.replace",):
            if star is not None:
                return star
            if not args:
                raise _Raise(self.unknown("replace() raises TypeError: missing the object", node, mod))
            base = self.force(args[0], node, fr)
            if isinstance(base, Obj):
                new = Obj(base.cls, base.ref, base.rest, base.kind, base.ref_mod)
                new.module = base.module
                new.fields = dict(base.fields)
                new.pos = dict(base.pos)
            elif isinstance(base, U):
                new = Obj(None, rest=base)
            else:
                return self.unknown(f"replace() of {_text(node.args[0]) if node.args else 'a value'}, "
                                    "not a known config", node, mod)
            for key, value in kwargs.items():
                new.fields[key] = value
                new.pos[key] = kwpos.get(key) or self.here(node, mod)
            return new
        if dotted == "copy.deepcopy" and args:
            return self.copy(args[0], None, None)
        if dotted == "copy.copy" and args:
            base = args[0]
            if isinstance(base, Obj):
                new = Obj(base.cls, base.ref, base.rest, base.kind, base.ref_mod)
                new.module = base.module
                new.fields, new.pos = dict(base.fields), dict(base.pos)
                return new
            if isinstance(base, (list, dict)):
                return type(base)(base)
            return base
        if dotted == "typing.cast" and len(args) == 2:
            return args[1]
        if dotted == TAIL_FQNS:
            return self.tail_fqns(orig, args, kwargs, star, node, fr)
        if dotted in ("os.getenv", "os.environ.get", "os.environ.__getitem__"):
            return self.unknown(f"{orig}() reads the environment at run time", node, mod)
        if dotted == "functools.partial":
            return self.unknown("functools.partial objects are not followed", node, mod)
        if dotted in ("os.path.join", "posixpath.join") or dotted.startswith("math."):
            values = [self.force(a, node, fr) for a in args]
            for value in values:
                if isinstance(value, U):
                    return value
            if star is not None or kwargs:
                return self.unknown(f"{orig}() with keyword arguments", node, mod)
            if dotted.endswith("path.join"):
                if all(isinstance(v, str) for v in values) and values:
                    import posixpath

                    return posixpath.join(*values)
                return self.unknown(f"{orig}() of values that are not strings", node, mod)
            func = _MATH.get(dotted[5:])
            if func is None or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                return self.unknown(f"{orig}() is not followed", node, mod)
            if any(abs(v) > MAX_INT for v in values):
                return self.unknown(f"{orig}() of numbers beyond {MAX_INT:.0e}", node, mod)
            try:
                result = func(*values)
            except (ArithmeticError, ValueError, TypeError) as exc:
                raise _Raise(self.unknown(f"{orig}() raises {type(exc).__name__}", node, mod)) from None
            if isinstance(result, int) and abs(result) > MAX_INT:
                return self.unknown(f"{orig}() beyond {MAX_INT:.0e}", node, mod)
            return result
        return NotImplemented

    def tail_fqns(self, orig: str, args, kwargs, star, node, fr: Frame):
        """torchtitan's ``nvfp4_bf16_tail_fqns(num_layers, bf16_tail_fraction)``, recorded, not run: its list
        or its ValueError is the rules' to decide (a TailFqns). Its arguments must be literal (the layer count
        may be ``len(<model spec>.model.layers)``); otherwise it is an ordinary unknown."""
        mod = fr.mod
        names = ("num_layers", "bf16_tail_fraction")
        if star is not None or len(args) > 2 or set(kwargs) - set(names[len(args):]) or \
                len(args) + len(kwargs) != 2:
            return self.unknown(f"{orig}() with these arguments is not followed", node, mod)
        values = dict(zip(names, args))
        values.update(kwargs)
        n = self.force(values["num_layers"], node, fr)
        f = self.force(values["bf16_tail_fraction"], node, fr)
        why = self.unknown(f"{_text(node)}: torchtitan computes this list (or refuses the fraction) from the "
                           "layer count; the NVFP4 rules decide it", node, mod)
        call = {"function": "nvfp4_bf16_tail_fqns", "num_layers": None, "layers_of": None,
                "bf16_tail_fraction": None, "line": why.line, "col": why.col, "file": why.file}
        if isinstance(n, LayerCount):
            call["layers_of"] = {"name": n.name, "flavor": n.flavor}
        elif isinstance(n, int) and not isinstance(n, bool):
            call["num_layers"] = n
        else:
            return n if isinstance(n, U) else self.unknown(f"{orig}() of a layer count that is not an integer",
                                                           node, mod)
        if isinstance(f, (int, float)) and not isinstance(f, bool) and math.isfinite(f):
            call["bf16_tail_fraction"] = f
        else:
            return f if isinstance(f, U) else self.unknown(f"{orig}() of a fraction that is not a finite number",
                                                           node, mod)
        return TailFqns(why.reason, why.line, why.col, why.file, call)

    def builtin(self, name: str, args, kwargs, star, node, fr: Frame):
        mod = fr.mod
        if name in _REFLECTION:
            why = self.unknown(f"reflection: {name}() is not followed", node, mod)
            if name in ("setattr", "delattr") and args:
                self.poison(args[0], why)
            return why
        if star is not None:
            return star
        if name in ("print",):
            return None
        if name in ("isinstance", "issubclass", "callable", "id", "hash", "iter", "next", "open", "input",
                    "map", "filter", "object", "property", "staticmethod", "classmethod", "format", "set",
                    "frozenset"):
            return self.unknown(f"{name}() is not followed", node, mod)
        if name in ("ValueError", "TypeError", "KeyError", "RuntimeError", "AssertionError",
                    "NotImplementedError", "Exception"):
            return self.unknown(f"{name}(...) is an exception object", node, mod)
        if name in ("list", "tuple", "sorted", "reversed", "sum", "any", "all", "enumerate"):
            if len(args) != 1 or (kwargs and name != "sorted"):
                if not args and name in ("list", "tuple"):
                    return [] if name == "list" else ()
                return self.unknown(f"{name}() with these arguments is not followed", node, mod)
            seq = self.iterate(args[0], node.args[0] if node.args else node, fr)
            if isinstance(seq, U):
                return seq
            if name == "list":
                return list(seq)
            if name == "tuple":
                return tuple(seq)
            if name == "enumerate":
                return list(enumerate(seq))
            if name == "reversed":
                return list(reversed(seq))
            items = [self.force(x, node, fr) for x in seq]
            for item in items:
                if isinstance(item, U):
                    return item
            if not all(_literal_ok(x) for x in items):
                return self.unknown(f"{name}() of values that are not literals", node, mod)
            try:
                if name == "sorted":
                    if kwargs:
                        return self.unknown("sorted() with a key is not followed", node, mod)
                    return sorted(items)
                if name == "sum":
                    if not all(isinstance(x, (int, float)) for x in items):
                        return self.unknown("sum() of non-numbers", node, mod)
                    total = sum(items)
                    return total if abs(total) <= MAX_INT else self.unknown("sum beyond bounds", node, mod)
                return any(items) if name == "any" else all(items)
            except TypeError as exc:
                raise _Raise(self.unknown(f"{name}() raises TypeError: {exc}", node, mod)) from None
        if name == "zip":
            seqs = []
            for i, a in enumerate(args):
                seq = self.iterate(a, node, fr)
                if isinstance(seq, U):
                    return seq
                seqs.append(seq)
            return list(zip(*seqs))
        if name == "dict":
            out: dict = {}
            if args:
                base = self.force(args[0], node, fr)
                if isinstance(base, dict):
                    out.update(base)
                elif isinstance(base, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2
                                                             for p in base):
                    for k, v in base:
                        if not isinstance(k, _LITERAL):
                            return self.unknown("dict() key is not a literal", node, mod)
                        out[k] = v
                else:
                    return base if isinstance(base, U) else self.unknown("dict() of an unknown value", node, mod)
            out.update(kwargs)
            return out
        values = [self.force(a, node, fr) for a in args]
        if name == "len" and len(values) == 1 and isinstance(values[0], SpecPart) and values[0].part == "layers" \
                and isinstance(values[0].name, str) and isinstance(values[0].flavor, str) and not kwargs:
            part = values[0]
            why = self.unknown(f"{_text(node)}: the layer count of {part.name} {part.flavor} (the model spec's "
                               "internals are not read statically)", node, mod)
            return LayerCount(why.reason, why.line, why.col, why.file, part.name, part.flavor)
        for value in values:
            if isinstance(value, U):
                return value
        if kwargs or not all(_literal_ok(v) for v in values):
            return self.unknown(f"{name}() of values that are not literals", node, mod)
        try:
            if name == "len":
                return len(values[0])
            if name in ("min", "max"):
                seq = values[0] if len(values) == 1 else values
                return min(seq) if name == "min" else max(seq)
            if name == "range":
                if not all(isinstance(v, int) for v in values) or len(range(*values)) > MAX_ITEMS:
                    return self.unknown("range() too long or of non-integers", node, mod)
                return list(range(*values))
            if name == "abs":
                return abs(values[0])
            if name == "round":
                return round(*values)
            if name == "divmod":
                return divmod(*values)
            if name == "pow":
                reason = _arith_guard(ast.Pow(), values[0], values[1]) if len(values) == 2 else None
                if reason or len(values) != 2:
                    return self.unknown(reason or "pow() with a modulus", node, mod)
                return values[0] ** values[1]
            if name in ("int", "float", "bool", "str", "repr"):
                if values and isinstance(values[0], str) and len(values[0]) > 100 and name != "str":
                    return self.unknown(f"{name}() of a long string", node, mod)
                if name == "int" and values and isinstance(values[0], float) and not math.isfinite(values[0]):
                    raise _Raise(self.unknown("int() of a non-finite float raises", node, mod))
                result = {"int": int, "float": float, "bool": bool, "str": str, "repr": repr}[name](*values)
                if isinstance(result, int) and not isinstance(result, bool) and abs(result) > MAX_INT:
                    return self.unknown(f"{name}() beyond {MAX_INT:.0e}", node, mod)
                if isinstance(result, str) and len(result) > MAX_SEQ:
                    return self.unknown(f"{name}() result too long", node, mod)
                return result
        except (TypeError, ValueError, ArithmeticError, IndexError) as exc:
            raise _Raise(self.unknown(f"{name}() raises {type(exc).__name__}: {exc}", node, mod)) from None
        return self.unknown(f"{name}() is not followed", node, mod)

    def method(self, m: Method, args, kwargs, star, node, fr: Frame):
        recv, name, mod = m.recv, m.name, fr.mod
        if star is not None:
            return star
        try:
            if isinstance(recv, list):
                if name == "append" and len(args) == 1:
                    if len(recv) >= MAX_ITEMS:
                        return self.unknown("list too long", node, mod)
                    recv.append(args[0])
                    return None
                if name == "extend" and len(args) == 1:
                    seq = self.iterate(args[0], node, fr)
                    if isinstance(seq, U):
                        self.havoc_target(m.recv_node, fr, seq)
                        return None
                    if len(recv) + len(seq) > MAX_ITEMS:
                        self.havoc_target(m.recv_node, fr, self.unknown("list too long", node, mod))
                        return None
                    recv.extend(seq)
                    return None
                if name == "insert" and len(args) == 2 and isinstance(args[0], int):
                    recv.insert(args[0], args[1])
                    return None
                if name == "copy" and not args:
                    return list(recv)
                if name == "clear" and not args:
                    recv.clear()
                    return None
                if name == "pop" and len(args) <= 1:
                    return recv.pop(*args)
                if name in ("index", "count", "remove") and len(args) == 1 and _literal_ok(args[0]) \
                        and all(_literal_ok(x) for x in recv):
                    return getattr(recv, name)(args[0])
                if name in ("sort", "reverse") and not args and not kwargs and all(_literal_ok(x) for x in recv):
                    getattr(recv, name)()
                    return None
            elif isinstance(recv, dict):
                if name == "get" and 1 <= len(args) <= 2:
                    key = self.force(args[0], node, fr)
                    if isinstance(key, U):
                        return key
                    return recv.get(key, args[1] if len(args) == 2 else None)
                if name in ("keys", "values", "items") and not args:
                    return list(getattr(recv, name)())
                if name == "copy" and not args:
                    return dict(recv)
                if name == "update" and len(args) <= 1:
                    if args:
                        other = self.force(args[0], node, fr)
                        if not isinstance(other, dict):
                            why = other if isinstance(other, U) else self.unknown("update() of an unknown value",
                                                                                   node, mod)
                            self.havoc_target(m.recv_node, fr, why)
                            return None
                        recv.update(other)
                    recv.update(kwargs)
                    return None
                if name == "setdefault" and 1 <= len(args) <= 2 and isinstance(args[0], _LITERAL):
                    return recv.setdefault(args[0], args[1] if len(args) == 2 else None)
                if name == "pop" and 1 <= len(args) <= 2 and isinstance(args[0], _LITERAL):
                    return recv.pop(*args)
            elif isinstance(recv, str):
                values = [self.force(a, node, fr) for a in args]
                for value in values:
                    if isinstance(value, U):
                        return value
                if name == "join" and len(values) == 1:
                    seq = self.iterate(values[0], node, fr)
                    if isinstance(seq, U):
                        return seq
                    seq = [self.force(x, node, fr) for x in seq]
                    if not all(isinstance(x, str) for x in seq):
                        return next((x for x in seq if isinstance(x, U)), None) or self.unknown(
                            "join() of values that are not strings", node, mod)
                    result = recv.join(seq)
                    return result if len(result) <= MAX_SEQ else self.unknown("string too long", node, mod)
                if name in _STR_METHODS and not kwargs and all(_literal_ok(v) for v in values):
                    if name == "replace" and len(values) >= 2 and isinstance(values[1], str) and \
                            len(recv) * max(1, len(values[1])) > MAX_SEQ:
                        return self.unknown("string too long", node, mod)
                    if name in ("ljust", "rjust", "center", "zfill") and values and \
                            isinstance(values[0], int) and values[0] > MAX_SEQ:
                        return self.unknown("string too long", node, mod)
                    return getattr(recv, name)(*values)
                if name == "format":
                    kw = {k: self.force(v, node, fr) for k, v in kwargs.items()}
                    if re.search(r"\{[^{}]*[:!]", recv) or not all(_literal_ok(v) for v in values) or \
                            not all(_literal_ok(v) for v in kw.values()):
                        return self.unknown("str.format() with specs or non-literals is not followed", node, mod)
                    result = recv.format(*values, **kw)
                    return result if len(result) <= MAX_SEQ else self.unknown("string too long", node, mod)
            elif isinstance(recv, tuple):
                if name in ("index", "count") and len(args) == 1 and _literal_ok(args[0]) and _literal_ok(recv):
                    return getattr(recv, name)(args[0])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise _Raise(self.unknown(f"{name}() raises {type(exc).__name__}", node, mod)) from None
        why = self.unknown(f"method {type(recv).__name__}.{name}() is not followed", node, mod)
        if name in _MUTATING:
            self.havoc_target(m.recv_node, fr, why)
        return why
