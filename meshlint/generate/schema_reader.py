"""The schema generator's reader of dataclasses: fields, types, defaults, enums and ``__post_init__`` checks,
each cited at its line."""

from __future__ import annotations

import ast
import re

from meshlint.frameworks.schema_data import STR_METHODS
from meshlint.generate.schema_index import (ClassInfo, _DICTS, _ENUM_BASES, Index, _last, _LISTS, Module,
    _PRIMITIVES, _TUPLES)


# ----------------------------------------------------------------------------- reading dataclasses

class Reader:
    """Turns dataclasses into schema entries: fields, types, defaults, enums, checks."""

    def __init__(self, index: Index, registries: dict | None = None):
        self.index = index
        self.registries = registries or {}   # list method name -> {"category", "names": {name: where}}
        self.classes: dict[str, dict] = {}   # qn -> schema entry

    # -- what a class is

    def is_dataclass(self, cls: ClassInfo) -> bool:
        return any(_last(d.func if isinstance(d, ast.Call) else d) == "dataclass" for d in cls.node.decorator_list)

    def has_slots(self, cls: ClassInfo) -> bool:
        """``@dataclass(slots=True)``: the instance has no ``__dict__`` (its bases' slots are not checked)."""
        return any(isinstance(d, ast.Call) and _last(d.func) == "dataclass"
                   and any(k.arg == "slots" and isinstance(k.value, ast.Constant) and k.value.value is True
                           for k in d.keywords) for d in cls.node.decorator_list)

    def is_enum(self, cls: ClassInfo) -> bool:
        return bool(self.index.base_names(cls) & _ENUM_BASES)

    def enum_values(self, cls: ClassInfo) -> dict:
        out = {}
        for node in cls.node.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                ok, value = self.literal(cls.module, node.value, cls.outer)
                if ok and not node.targets[0].id.startswith("_"):
                    out[node.targets[0].id] = value
        return out

    # -- types

    def type_of(self, mod: Module, node: ast.expr, scope: ClassInfo | None, depth: int = 0) -> dict:
        if depth > 10:
            return {"kind": "other", "text": ast.unparse(node)}
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.type_of(mod, ast.parse(node.value, mode="eval").body, scope, depth + 1)
            except SyntaxError:
                return {"kind": "other", "text": node.value}
        if isinstance(node, ast.Constant) and node.value is None:
            return {"kind": "none"}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _union([self.type_of(mod, node.left, scope, depth + 1), self.type_of(mod, node.right, scope, depth + 1)])
        if isinstance(node, ast.Subscript):
            name = _last(node.value)
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if name == "Optional":
                return _union([self.type_of(mod, args[0], scope, depth + 1), {"kind": "none"}])
            if name == "Union":
                return _union([self.type_of(mod, a, scope, depth + 1) for a in args])
            if name == "Literal":
                values = []
                for a in args:
                    ok, v = self.literal(mod, a, scope)
                    values.append(v if ok else ast.unparse(a))
                return {"kind": "literal", "values": values}
            if name == "Annotated":
                inner = self.type_of(mod, args[0], scope, depth + 1)
                for m in args[1:]:
                    what = _last(m.func if isinstance(m, ast.Call) else m)
                    if what == "Suppress":
                        inner = {**inner, "cli": False}
                    elif what == "subcommand" and isinstance(m, ast.Call) and m.args \
                            and isinstance(m.args[0], ast.Constant):
                        inner = {**inner, "subcommand": m.args[0].value}
                return inner
            if name == "ClassVar":
                return {"kind": "classvar"}
            if name == "InitVar":
                return {"kind": "initvar", "of": self.type_of(mod, args[0], scope, depth + 1)}
            if name in _LISTS:
                return {"kind": "list", "of": self.type_of(mod, args[0], scope, depth + 1)}
            if name in _DICTS and len(args) == 2:
                return {"kind": "dict", "key": self.type_of(mod, args[0], scope, depth + 1),
                        "value": self.type_of(mod, args[1], scope, depth + 1)}
            if name in _TUPLES:
                if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis:
                    return {"kind": "tuple", "of": [self.type_of(mod, args[0], scope, depth + 1)], "variadic": True}
                return {"kind": "tuple", "of": [self.type_of(mod, a, scope, depth + 1) for a in args]}
            return {"kind": "other", "text": ast.unparse(node)}
        name = _last(node)
        if name in _PRIMITIVES and isinstance(node, ast.Name):
            return {"kind": _PRIMITIVES[name]}
        if name == "Any":
            return {"kind": "any"}
        if isinstance(node, ast.Name) and name in _LISTS | _DICTS | _TUPLES:
            kind = "list" if name in _LISTS else "dict" if name in _DICTS else "tuple"
            return {"kind": kind, "of": {"kind": "any"}} if kind == "list" else {"kind": kind}
        found = self.index.resolve(mod, node, scope) if name else None
        if found and found[0] == "class":
            cls = found[1]
            if self.is_enum(cls):
                return {"kind": "enum", "class": cls.qn, "values": list(self.enum_values(cls).values())}
            if self.is_dataclass(cls) or any(self.is_dataclass(b) for b in self.index.bases(cls)):
                return {"kind": "dataclass", "class": cls.qn}
            return {"kind": "other", "text": ast.unparse(node), "class": cls.qn}
        if found and found[0] == "const":  # a type alias: X = A | B
            cmod, value = found[1]
            return self.type_of(cmod, value, None, depth + 1)
        return {"kind": "other", "text": ast.unparse(node)}

    # -- literal values (defaults, enum members, membership sets)

    def literal(self, mod: Module, node: ast.expr, scope: ClassInfo | None = None, depth: int = 0):
        """(True, value) when ``node`` is a literal, possibly through module constants and enum members."""
        if depth > 8:
            return False, None
        if isinstance(node, ast.Constant):
            if isinstance(node.value, float) and node.value != node.value:
                return False, None
            return (True, node.value) if node.value is not Ellipsis else (False, None)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for elt in node.elts:
                ok, v = self.literal(mod, elt, scope, depth + 1)
                if not ok:
                    return False, None
                out.append(v)
            return True, (sorted(out, key=repr) if isinstance(node, ast.Set) else out)
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                if k is None:  # {**OTHER, ...}: a literal dict merged in
                    ok, merged = self.literal(mod, v, scope, depth + 1)
                    if not ok or not isinstance(merged, dict):
                        return False, None
                    out.update(merged)
                    continue
                ok1, kv = self.literal(mod, k, scope, depth + 1)
                ok2, vv = self.literal(mod, v, scope, depth + 1)
                if not (ok1 and ok2) or not isinstance(kv, (str, int, float, bool)):
                    return False, None
                out[str(kv)] = vv
            return True, out
        if isinstance(node, ast.DictComp):
            return self._copied_dict(mod, node, scope, depth)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            ok, v = self.literal(mod, node.operand, scope, depth + 1)
            if ok and isinstance(v, (int, float)) and not isinstance(v, bool):
                return True, -v if isinstance(node.op, ast.USub) else v
            return False, None
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.Pow, ast.FloorDiv)):
            ok1, a = self.literal(mod, node.left, scope, depth + 1)
            ok2, b = self.literal(mod, node.right, scope, depth + 1)
            if ok1 and ok2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
                try:
                    return True, {ast.Mult: a * b, ast.Add: a + b, ast.Sub: a - b}.get(type(node.op)) \
                        if not isinstance(node.op, (ast.Pow, ast.FloorDiv)) else (a ** b if isinstance(node.op, ast.Pow) else a // b)
                except (OverflowError, ZeroDivisionError):
                    return False, None
            return False, None
        if isinstance(node, (ast.Name, ast.Attribute)):
            found = self.index.resolve(mod, node, scope)
            if found and found[0] == "const":
                cmod, value = found[1]
                return self.literal(cmod, value, None, depth + 1)
            if found and found[0] == "member":  # an enum member: its value
                cls, member = found[1]
                if self.is_enum(cls):
                    values = self.enum_values(cls)
                    if member in values:
                        return True, values[member]
        return False, None

    def _copied_dict(self, mod: Module, node: ast.DictComp, scope: ClassInfo | None, depth: int):
        """``{k: v for k, v in D.items()}`` and ``{k: list(v) ...}`` (also tuple, dict) over a literal dict D:
        the copy idiom a default_factory uses so instances do not share the module constant."""
        if len(node.generators) != 1:
            return False, None
        gen = node.generators[0]
        target, it = gen.target, gen.iter
        if gen.ifs or gen.is_async or not (isinstance(target, ast.Tuple) and len(target.elts) == 2
                                           and all(isinstance(e, ast.Name) for e in target.elts)):
            return False, None
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items"
                and not it.args and not it.keywords):
            return False, None
        kname, vname = target.elts[0].id, target.elts[1].id
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                value.func.id in ("list", "tuple", "dict") and len(value.args) == 1 and not value.keywords:
            value = value.args[0]
        if not (isinstance(node.key, ast.Name) and node.key.id == kname and isinstance(value, ast.Name)
                and value.id == vname):
            return False, None
        ok, source = self.literal(mod, it.func.value, scope, depth + 1)
        if not ok or not isinstance(source, dict):
            return False, None
        return True, dict(source)

    # -- fields

    def fields(self, cls: ClassInfo, seen: frozenset = frozenset()) -> dict:
        """name -> (AnnAssign node, owner ClassInfo) in dataclass field order (bases first)."""
        out: dict = {}
        if cls.qn in seen:
            return out
        for base in reversed(self.index.bases(cls)):
            for name, value in self.fields(base, seen | {cls.qn}).items():
                out.pop(name, None)
                out[name] = value
        if self.is_dataclass(cls):
            for node in cls.node.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    # a redefined field keeps its place and takes the new type and default (dict order does that)
                    out[node.target.id] = (node, cls)
        return out

    def class_entry(self, cls: ClassInfo) -> dict:
        if cls.qn in self.classes:
            return self.classes[cls.qn]
        entry = {"name": cls.qual, "source": cls.where, "bases": [b.qn for b in self.index.bases(cls)], "keys": {}}
        if self.has_slots(cls):
            entry["slots"] = True  # assigning an attribute that is not a field raises AttributeError
        self.classes[cls.qn] = entry  # before recursing: classes may refer to themselves
        checks = self.post_init_checks(cls)
        if checks["where"]:
            entry["post_init"] = checks["where"]
        for name, (node, owner) in self.fields(cls).items():
            key = self.key_entry(node, owner, checks)
            if key is not None:
                entry["keys"][name] = key
        if checks["other"]:
            entry["checks"] = checks["other"]
        return entry

    def key_entry(self, node: ast.AnnAssign, owner: ClassInfo, checks: dict) -> dict | None:
        mod = owner.module
        typ = self.type_of(mod, node.annotation, owner)
        if typ["kind"] == "classvar":
            return None
        name = node.target.id
        out: dict = {"type": typ, "annotation": ast.unparse(node.annotation), "source": f"{mod.rel}:{node.lineno}"}
        if typ.pop("cli", True) is False:
            out["cli"] = False
        out.update(self.default_of(mod, node.value, owner))
        if typ["kind"] in ("literal", "enum"):
            out["enum"] = list(typ["values"])
            out["enum_from"] = "Literal[...]" if typ["kind"] == "literal" else f"enum {typ['class'].rsplit('.', 1)[-1]}"
        elif typ["kind"] == "optional" and typ["of"]["kind"] in ("literal", "enum"):
            out["enum"] = list(typ["of"]["values"])
            out["enum_from"] = "Literal[...]" if typ["of"]["kind"] == "literal" else "enum"
        member = checks["membership"].get(name)
        if member:
            out["enum_check"] = member
            if "enum" not in out:
                out["enum"] = member["values"]
                out["enum_from"] = member["source"]
        if checks["reads"].get(name):
            out["checked_at"] = sorted(set(checks["reads"][name]), key=_line_key)
        doc = _field_doc(owner, node)
        if doc:
            out["doc"] = doc
        if any(isinstance(k, ast.keyword) and k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in (node.value.keywords if isinstance(node.value, ast.Call) else [])):
            out["init"] = False
        return out

    def default_of(self, mod: Module, value: ast.expr | None, scope: ClassInfo) -> dict:
        if value is None:
            return {"required": True}
        if isinstance(value, ast.Call) and _last(value.func) == "field":
            kw = {k.arg: k.value for k in value.keywords if k.arg}
            if "default" in kw:
                return self.default_of(mod, kw["default"], scope)
            if "default_factory" in kw:
                return self.factory(mod, kw["default_factory"], scope)
            return {"required": True}
        ok, v = self.literal(mod, value, scope)
        if ok:
            return {"default": _jsonable(v)}
        return {"default_expr": ast.unparse(value)[:200], "default_note": "not a literal"}

    def factory(self, mod: Module, node: ast.expr, scope: ClassInfo) -> dict:
        name = _last(node)
        if isinstance(node, ast.Name) and name in ("list", "dict", "set", "tuple"):
            return {"default": {} if name == "dict" else [], "default_via": f"default_factory={name}"}
        if isinstance(node, ast.Lambda):
            ok, v = self.literal(mod, node.body, scope)
            if ok:
                return {"default": _jsonable(v), "default_via": "default_factory=lambda"}
            return {"default_expr": ast.unparse(node)[:200], "default_note": "default_factory builds it; not a literal"}
        found = self.index.resolve(mod, node, scope)
        if found and found[0] == "class" and (self.is_dataclass(found[1]) or self.fields(found[1])):
            return {"default_factory": found[1].qn}
        return {"default_expr": ast.unparse(node)[:200], "default_note": "default_factory; not a literal"}

    # -- __post_init__: membership tests (enums) and the other checks that read a field

    def post_init_checks(self, cls: ClassInfo) -> dict:
        out = {"where": None, "membership": {}, "reads": {}, "other": []}
        chain = [cls] + _mro_tail(self.index, cls)
        for owner in chain:
            fn = next((n for n in owner.node.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__"), None)
            if fn is None:
                continue
            out["where"] = out["where"] or f"{owner.module.rel}:{fn.lineno}"
            self._scan(owner, fn, fn.body, [], _locals(fn), out)
            if not any(_calls_super_post_init(s) for s in ast.walk(fn)):
                break  # a __post_init__ that does not call super() hides its bases'
        return out

    def _scan(self, owner: ClassInfo, fn, body: list, conds: list, local: dict, out: dict) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If):
                raises = _raise_in(stmt.body)
                if raises is not None:
                    self._membership(owner, stmt.test, conds, local, raises, out, negate=False)
                    self._record(owner, stmt.test, conds, raises, out, local=local)
                self._scan(owner, fn, stmt.body, conds + [ast.unparse(stmt.test)], local, out)
                if stmt.orelse:
                    self._scan(owner, fn, stmt.orelse, conds + [f"not ({ast.unparse(stmt.test)})"], local, out)
            elif isinstance(stmt, ast.Assert):
                self._membership(owner, stmt.test, conds, local, stmt, out, negate=True)
                self._record(owner, stmt.test, conds, stmt, out, assert_=True, local=local)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _is_self_attr(stmt.targets[0]):
                # a value __post_init__ fills in before its checks (n_kv_heads = n_heads when None)
                out["other"].append({"source": f"{owner.module.rel}:{stmt.lineno}", "kind": "assign",
                                     "target": stmt.targets[0].attr, "value": ast.unparse(stmt.value)[:200],
                                     **({"when": conds} if conds else {})})
            elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
                inner = stmt.body + getattr(stmt, "orelse", []) + [s for h in getattr(stmt, "handlers", []) for s in h.body]
                extra = [f"for {ast.unparse(stmt.target)} in {ast.unparse(stmt.iter)}"] if isinstance(stmt, ast.For) else []
                self._scan(owner, fn, inner, conds + extra, local, out)

    def _record(self, owner, test, conds, site, out, assert_=False, local=None) -> None:
        where = f"{owner.module.rel}:{site.lineno}"
        test = _inline(test, local or {})
        names = sorted({n.attr for n in ast.walk(test) if _is_self_attr(n)} |
                       {n.attr for c in conds for n in ast.walk(_parse_expr(c)) if _is_self_attr(n)})
        for name in names:
            out["reads"].setdefault(name, []).append(where)
        exc = "AssertionError" if assert_ else (_last(site.exc.func if isinstance(site.exc, ast.Call) else site.exc)
                                                if site.exc is not None else "Exception")
        message = _message(site)
        for name, value in (local or {}).items():
            if _self_chain(value):
                message = message.replace("{" + name + "}", "{" + ast.unparse(value) + "}")
        out["other"].append({"source": where, "kind": "assert" if assert_ else "raise", "exception": exc,
                             "condition": (f"not ({ast.unparse(test)})" if assert_ else ast.unparse(test)),
                             **({"when": conds} if conds else {}), "message": message[:300]})

    def _membership(self, owner, test, conds, local, site, out, negate: bool) -> None:
        """``if self.x not in VALUES: raise`` (or ``assert self.x in VALUES``): x's allowed values."""
        if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not _is_self_attr(test.left):
            return
        op = test.ops[0]
        if not (isinstance(op, ast.In) if negate else isinstance(op, ast.NotIn)):
            return
        values = self.value_set(owner, test.comparators[0], local)
        if values is None:
            return
        name = test.left.attr
        entry = {"values": values["values"], "source": f"{owner.module.rel}:{site.lineno}",
                 "message": _message(site)[:300]}
        if conds:
            entry["when"] = conds
        if "registry" in values:
            entry["registry"] = values["registry"]
        out["membership"].setdefault(name, entry)

    def value_set(self, owner: ClassInfo, node: ast.expr, local: dict, depth: int = 0) -> dict | None:
        if depth > 4:
            return None
        if isinstance(node, ast.Call) and _last(node.func) in ("tuple", "list", "sorted", "set", "frozenset") and node.args:
            return self.value_set(owner, node.args[0], local, depth + 1)
        if isinstance(node, ast.Name) and node.id in local:
            return self.value_set(owner, local[node.id], local, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in self.registries:
            reg = self.registries[node.func.attr]
            return {"values": sorted(reg["names"]), "registry": {"category": reg["category"], "registered": reg["names"]}}
        ok, value = self.literal(owner.module, node, owner.outer)
        if ok and isinstance(value, (list, dict)):
            return {"values": list(value)}
        return None


def _mro_tail(index: Index, cls: ClassInfo) -> list:
    out, seen, todo = [], {cls.qn}, list(index.bases(cls))
    while todo:
        base = todo.pop(0)
        if base.qn not in seen:
            seen.add(base.qn)
            out.append(base)
            todo.extend(index.bases(base))
    return out


def _calls_super_post_init(node) -> bool:
    """``super().__post_init__()``, or the base named outright: ``Base.Config.__post_init__(self)``
    (torchtitan's CheckpointManager.Config runs its base's checks that way)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__post_init__"):
        return False
    if isinstance(node.func.value, ast.Call):
        return _last(node.func.value.func) == "super"
    return bool(node.args) and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"


def _locals(fn) -> dict:
    out = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
    return out


def _inline(test: ast.expr, local: dict) -> ast.expr:
    """A condition with its simple locals (``n = self.parallelism.num_pp_microbatches``) replaced by what they
    stand for, so the check reads fields only."""
    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            value = local.get(node.id)
            if value is not None and _self_chain(value):
                return ast.copy_location(value, node)
            return node

    return Sub().visit(ast.parse(ast.unparse(test), mode="eval").body)


# str methods the runtime evaluates that take no argument: a local bound to one of them on a field
# (``async_lowered = self.async_mode.lower()``) is inlined like a plain field read
_INLINED_METHODS = STR_METHODS - {"startswith", "endswith"}


def _self_chain(node) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _INLINED_METHODS \
            and not node.args and not node.keywords:
        node = node.func.value
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _raise_in(body: list):
    for stmt in body:
        if isinstance(stmt, ast.Raise):
            return stmt
    return None


def _is_self_attr(node) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _parse_expr(text: str) -> ast.AST:
    try:
        return ast.parse(text.removeprefix("for "), mode="exec") if text.startswith("for ") else ast.parse(text, mode="eval")
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _message(site) -> str:
    """The message a raise/assert carries, as source text with f-string holes kept."""
    node = site.msg if isinstance(site, ast.Assert) else site.exc
    if node is None:
        return ""
    if isinstance(node, ast.Call) and node.args:
        node = node.args[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}" for v in node.values)
    return ast.unparse(node)


def _field_doc(owner: ClassInfo, node: ast.AnnAssign) -> str:
    """The attribute docstring after the field, or the comment on its line: first sentence, short."""
    body = owner.node.body
    i = body.index(node)
    text = ""
    if i + 1 < len(body) and isinstance(body[i + 1], ast.Expr) and isinstance(body[i + 1].value, ast.Constant) \
            and isinstance(body[i + 1].value.value, str):
        text = body[i + 1].value.value
    else:
        line = owner.module.lines[node.end_lineno - 1] if node.end_lineno <= len(owner.module.lines) else ""
        if "#" in line:
            text = line.split("#", 1)[1]
    text = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first[:160]


def _union(members: list) -> dict:
    flat = []
    for m in members:
        if m["kind"] == "optional":
            flat.extend((m["of"]["of"] if m["of"]["kind"] == "union" else [m["of"]]) + [{"kind": "none"}])
        elif m["kind"] == "union":
            flat.extend(m["of"])
        else:
            flat.append(m)
    has_none = any(x["kind"] == "none" for x in flat)
    rest = []
    for x in flat:
        if x["kind"] != "none" and x not in rest:
            rest.append(x)
    inner = rest[0] if len(rest) == 1 else {"kind": "union", "of": rest}
    if not rest:
        return {"kind": "none"}
    return {"kind": "optional", "of": inner} if has_none else inner


def _jsonable(v):
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return str(v)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return v


def _line_key(where: str):
    path, _, line = where.rpartition(":")
    return (path, int(line) if line.isdigit() else 0)
