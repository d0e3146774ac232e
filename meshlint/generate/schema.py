"""Generate a framework's full config schema (every section, key, type, default, enum) from its source, with ``ast`` only.

Regenerating for a new version is one command (nothing is imported or executed)::

    python -m meshlint.generate.schema --framework kempnerforge \\
        --source ../shared/frameworks/KempnerForge-5666d0d --version 5666d0d --commit 5666d0d
    python -m meshlint.generate.schema --framework torchtitan \\
        --source ../shared/frameworks/torchtitan-v0.2-9810191bb-parent --version 0.2.x --commit 9810191bb^
    pip download --no-deps torchtitan==0.3.0 -d /tmp/tt && unzip -q /tmp/tt/*.whl -d /tmp/tt/src
    python -m meshlint.generate.schema --framework torchtitan --source /tmp/tt/src --version 0.3.0 --commit 0.3.0
    python -m meshlint.generate.schema --framework torchtitan \\
        --source ../shared/frameworks/torchtitan-b5bcd76c6 --version main@b5bcd76c6 --commit b5bcd76c6

writes ``meshlint/data/schema/<framework>-<version>.json`` (``--out`` to write elsewhere,
``--check`` to compare with the committed file instead). What the file holds:

* ``classes``: every config dataclass reachable from the root config, its fields in
  dataclass order (inherited ones included) with type, default (a literal, the class a
  ``default_factory`` builds, or ``default_expr`` with the source text when it is not a
  literal), allowed values (``Literal[...]``, an ``Enum``, or a plain membership test in
  ``__post_init__``, cited, with the conditions it sits under), the ``__post_init__``
  checks that read the field, and ``path:line`` of everything;
* ``tables``: the dotted path of every table (section, nested table, ``[[array]]``
  element) and the classes that can stand there (the declared class; in torchtitan's
  registry era also its subclasses; KempnerForge's ``[vlm]`` by its ``arch``);
* ``loader``: how the framework reads the file, each fact cited at the line where the
  generator found it (it fails loudly when a loader changed shape, so a new version is
  never described with an old version's facts).

``meshlint/frameworks/schema_data.py`` reads these files; ``tests/test_schema_generated.py``
regenerates them from the reference trees and compares.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from pathlib import Path

from meshlint.frameworks.schema_data import STR_METHODS

FORMAT = 1
OUT_DIR = Path(__file__).resolve().parent.parent / "data" / "schema"
_PRIMITIVES = {"int": "int", "float": "float", "bool": "bool", "str": "str", "bytes": "bytes"}
_LISTS = {"list", "List", "Sequence", "MutableSequence", "Iterable", "set", "Set", "frozenset", "FrozenSet"}
_DICTS = {"dict", "Dict", "Mapping", "MutableMapping", "OrderedDict", "defaultdict"}
_TUPLES = {"tuple", "Tuple"}
_ENUM_BASES = {"Enum", "StrEnum", "IntEnum", "Flag", "IntFlag"}
_MAX_DEPTH = 8


class GenerateError(Exception):
    """The source does not look like what the generator knows how to read (say what and where)."""


# ----------------------------------------------------------------------------- the source index

class Module:
    def __init__(self, name: str, rel: str, tree: ast.Module, lines: list[str]):
        self.name, self.rel, self.tree, self.lines = name, rel, tree, lines
        self.imports: dict[str, str] = {}     # local name -> "module.attr" it stands for
        self.classes: dict[str, ClassInfo] = {}
        self.consts: dict[str, ast.expr] = {}  # module-level NAME = <expr> (last one wins)
        self.functions: dict[str, ast.FunctionDef] = {}


class ClassInfo:
    def __init__(self, module: Module, node: ast.ClassDef, outer: "ClassInfo | None"):
        self.module, self.node, self.outer = module, node, outer
        self.qual = f"{outer.qual}.{node.name}" if outer else node.name
        self.qn = f"{module.name}.{self.qual}"
        self.nested: dict[str, ClassInfo] = {}

    @property
    def where(self) -> str:
        return f"{self.module.rel}:{self.node.lineno}"


class Index:
    """Every module of the given packages, parsed; names resolved the way Python imports would."""

    def __init__(self, root: Path, packages: list[str]):
        self.root = root
        self.modules: dict[str, Module] = {}
        self.classes: dict[str, ClassInfo] = {}
        for package in packages:
            base = root / package
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*.py")):
                rel = path.relative_to(root).as_posix()
                parts = rel[:-3].split("/")
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                try:
                    text = path.read_text(encoding="utf-8")
                    tree = ast.parse(text, filename=rel)
                except (SyntaxError, UnicodeDecodeError, ValueError):
                    continue  # a broken file in an experiment folder must not stop the schema
                self._add(Module(".".join(parts), rel, tree, text.splitlines()), path.name == "__init__.py")
        self._subclasses: dict[str, list[ClassInfo]] | None = None

    def _add(self, mod: Module, is_package: bool) -> None:
        self.modules[mod.name] = mod
        package = mod.name if is_package else mod.name.rpartition(".")[0]
        for node in mod.tree.body:
            self._top_level(mod, node, package)

    def _top_level(self, mod: Module, node: ast.stmt, package: str) -> None:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                if alias.name != "*":
                    mod.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    mod.imports[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    mod.imports[head] = head
        elif isinstance(node, ast.ClassDef):
            mod.classes[node.name] = self._class(mod, node, None)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    mod.consts[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            mod.consts[node.target.id] = node.value
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mod.functions[node.name] = node
        elif isinstance(node, ast.If):  # try/if TYPE_CHECKING imports
            for sub in node.body + node.orelse:
                self._top_level(mod, sub, package)
        elif isinstance(node, ast.Try):
            for sub in node.body + [s for h in node.handlers for s in h.body]:
                self._top_level(mod, sub, package)

    def _class(self, mod: Module, node: ast.ClassDef, outer: ClassInfo | None) -> ClassInfo:
        info = ClassInfo(mod, node, outer)
        self.classes[info.qn] = info
        for sub in node.body:
            if isinstance(sub, ast.ClassDef):
                info.nested[sub.name] = self._class(mod, sub, info)
        return info

    # -- resolution: ("class", ClassInfo) | ("module", Module) | ("const", (Module, expr)) | ("external", "a.b")

    def resolve(self, mod: Module, node: ast.expr, scope: ClassInfo | None = None, _depth: int = 0):
        parts = _dotted(node)
        if parts is None or _depth > 12:
            return None
        head, rest = parts[0], parts[1:]
        target = None
        cls = scope
        while cls is not None and target is None:
            if head in cls.nested:
                target = ("class", cls.nested[head])
            cls = cls.outer
        if target is None:
            target = self._in_module(mod, head, _depth)
        if target is None:
            target = ("external", head)
        for part in rest:
            target = self._step(target, part, _depth)
            if target is None:
                return None
        return target

    def _in_module(self, mod: Module, name: str, depth: int):
        if name in mod.classes:
            return ("class", mod.classes[name])
        if name in mod.imports:
            return self.qualified(mod.imports[name], depth + 1)
        if name in mod.consts:
            return ("const", (mod, mod.consts[name]))
        sub = f"{mod.name}.{name}"
        if sub in self.modules:
            return ("module", self.modules[sub])
        return None

    def qualified(self, dotted: str, depth: int = 0):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            name = ".".join(parts[:cut])
            if name in self.modules:
                target = ("module", self.modules[name])
                for part in parts[cut:]:
                    target = self._step(target, part, depth)
                    if target is None:
                        return ("external", dotted)
                return target
        return ("external", dotted)

    def _step(self, target, part: str, depth: int):
        kind, value = target
        if depth > 12:
            return None
        if kind == "module":
            found = self._in_module(value, part, depth)
            return found if found is not None else ("external", f"{value.name}.{part}")
        if kind == "class":
            if part in value.nested:
                return ("class", value.nested[part])
            for base in self.bases(value):  # Nested classes are inherited too (Sub.Config via Base)
                if part in base.nested:
                    return ("class", base.nested[part])
            return ("member", (value, part))
        if kind == "external":
            return ("external", f"{value}.{part}")
        return None

    def bases(self, cls: ClassInfo) -> list[ClassInfo]:
        out = []
        for base in cls.node.bases:
            found = self.resolve(cls.module, base, cls.outer)
            if found and found[0] == "class":
                out.append(found[1])
        return out

    def base_names(self, cls: ClassInfo, seen=None) -> set[str]:
        """Last components of every base, transitively, external ones included (Enum, StrEnum, ...)."""
        seen = seen if seen is not None else set()
        names = set()
        for base in cls.node.bases:
            parts = _dotted(base)
            if parts:
                names.add(parts[-1])
            found = self.resolve(cls.module, base, cls.outer)
            if found and found[0] == "class" and found[1].qn not in seen:
                seen.add(found[1].qn)
                names |= self.base_names(found[1], seen)
        return names

    def subclasses(self, cls: ClassInfo) -> list[ClassInfo]:
        """Every class in the index that derives from ``cls`` (transitively), in index order."""
        if self._subclasses is None:
            self._subclasses = {}
            for info in self.classes.values():
                for base in self.bases(info):
                    self._subclasses.setdefault(base.qn, []).append(info)
        out, todo, seen = [], [cls.qn], {cls.qn}
        while todo:
            for sub in self._subclasses.get(todo.pop(0), []):
                if sub.qn not in seen:
                    seen.add(sub.qn)
                    out.append(sub)
                    todo.append(sub.qn)
        return out


def _dotted(node: ast.expr) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


def _last(node: ast.expr) -> str | None:
    parts = _dotted(node)
    return parts[-1] if parts else None


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


# ----------------------------------------------------------------------------- tables

def dataclasses_in(typ: dict) -> tuple[list[str], bool]:
    """The dataclass classes a type holds a table of, and whether it is an array of tables."""
    kind = typ["kind"]
    if kind == "dataclass":
        return [typ["class"]], False
    if kind == "optional":
        return dataclasses_in(typ["of"])
    if kind == "union":
        found = [c for t in typ["of"] for c in dataclasses_in(t)[0] if t["kind"] in ("dataclass", "optional")]
        return found, False
    if kind == "list" or (kind == "tuple" and typ.get("variadic")):
        inner = typ["of"] if kind == "list" else typ["of"][0]
        classes, _ = dataclasses_in(inner)
        return classes, bool(classes)
    return [], False


def build_tables(reader: Reader, root: ClassInfo, variants: str, dispatch: dict) -> dict:
    """dotted table path -> the classes that can stand there ("" is the root).

    ``variants``: "declared" (the loader builds exactly the annotated class: TOML
    loaders), or "subclasses" (Python code may pass any subclass: registry era).
    ``dispatch``: {declared qn: {"key", "default", "map": {value: qn}, "source"}}
    for a loader that picks the subclass from a key (KempnerForge's [vlm] arch).
    """
    index = reader.index
    tables: dict[str, dict] = {}

    def candidates(declared: list[str]) -> list[str]:
        out = []
        for qn in declared:
            if qn in dispatch:
                out.extend(dispatch[qn]["map"].values())
                continue
            out.append(qn)
            if variants == "subclasses":
                out.extend(c.qn for c in index.subclasses(index.classes[qn]) if reader.fields(c))
        return list(dict.fromkeys(out))

    def visit(path: str, declared: list[str], default: str | None, optional: bool, array: bool, ancestry: tuple,
              depth: int = 0):
        classes = candidates(declared)
        table = {"classes": classes}
        if default:
            table["default_class"] = default
        if optional:
            table["optional"] = True
        if array:
            table["array"] = True
        for qn in declared:
            if qn in dispatch:
                table["dispatch"] = {k: v for k, v in dispatch[qn].items()}
        if path in tables:  # reached twice (shouldn't): merge
            tables[path]["classes"] = list(dict.fromkeys(tables[path]["classes"] + classes))
            return
        tables[path] = table
        if depth > _MAX_DEPTH:
            table["truncated"] = "nesting deeper than the generator follows"
            return
        children: dict[str, dict] = {}
        for qn in classes:
            entry = reader.class_entry(index.classes[qn])
            for name, key in entry["keys"].items():
                if key.get("cli") is False and variants == "subclasses":
                    continue  # model_spec & co.: set by code, not by configs
                inner, is_array = dataclasses_in(key["type"])
                if not inner:
                    continue
                child = children.setdefault(name, {"declared": [], "default": None, "optional": False, "array": is_array})
                child["declared"] = list(dict.fromkeys(child["declared"] + inner))
                child["default"] = child["default"] or key.get("default_factory")
                child["optional"] |= key["type"]["kind"] == "optional" or key.get("default") is None and "default" in key
                # a class met at several paths keeps the first: a checker derives the child's path from its own
                key.setdefault("table", f"{path}.{name}".lstrip(".") + ("[]" if is_array else ""))
        for name, child in children.items():
            sub = f"{path}.{name}".lstrip(".") + ("[]" if child["array"] else "")
            same = next((p for p, held in reversed(ancestry) if set(child["declared"]) & set(held)), None)
            if same is not None:
                # a config nesting its own kind (a loss wrapping a loss): read as the table it repeats
                tables[sub] = {"classes": child["declared"], "recursive": True, "same_as": same}
                continue
            visit(sub, child["declared"], child["default"], child["optional"], child["array"],
                  ancestry + ((path, tuple(classes)),), depth + 1)

    reader.class_entry(root)
    visit("", [root.qn], root.qn, False, False, ())
    return tables


# ----------------------------------------------------------------------------- per framework

def _find(mod: Module, pattern: str, what: str) -> str:
    """``rel:line`` of the first line matching ``pattern`` (regex) in ``mod``; fails loudly."""
    rx = re.compile(pattern)
    for i, line in enumerate(mod.lines, 1):
        if rx.search(line):
            return f"{mod.rel}:{i}"
    raise GenerateError(f"{mod.rel}: cannot find {what} (pattern {pattern!r}); the loader changed shape: "
                        f"read it again and update meshlint/generate/schema.py")


def _module(index: Index, name: str) -> Module:
    if name not in index.modules:
        raise GenerateError(f"module {name} not found under {index.root}")
    return index.modules[name]


def _registries(index: Index, module: str, cls_name: str) -> dict:
    """KempnerForge's component registry: list_<x>() method -> category and the names registered for it."""
    mod = index.modules.get(module)
    if mod is None or cls_name not in mod.classes:
        return {}
    methods = {n.name: n for n in mod.classes[cls_name].node.body if isinstance(n, ast.FunctionDef)}

    def category(fn, call: str) -> str | None:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == call \
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                return node.args[0].value
        return None

    lists = {name: category(fn, "list") for name, fn in methods.items() if name.startswith("list_")}
    registers = {name: category(fn, "register") for name, fn in methods.items() if name.startswith("register_")}
    names: dict[str, dict] = {}
    for m in index.modules.values():
        for node in ast.walk(m.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in registers \
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names.setdefault(registers[node.func.attr], {})[node.args[0].value] = f"{m.rel}:{node.lineno}"
    return {name: {"category": cat, "names": dict(sorted(names.get(cat, {}).items()))}
            for name, cat in lists.items() if cat}


def kempnerforge(index: Index) -> dict:
    registries = _registries(index, "kempnerforge.config.registry", "Registry")
    reader = Reader(index, registries)
    root = index.classes.get("kempnerforge.config.job.JobConfig")
    if root is None:
        raise GenerateError("kempnerforge/config/job.py: class JobConfig not found")
    loader = _module(index, "kempnerforge.config.loader")
    vlm = index.classes["kempnerforge.config.vlm.VLMConfig"]
    arch_map = {}
    reg = next((r for r in registries.values() if r["category"] == "vlm_config"), None)
    for sub in index.subclasses(vlm):
        for deco in sub.node.decorator_list:
            if isinstance(deco, ast.Call) and _last(deco.func) == "register_vlm_config" and deco.args:
                ok, name = reader.literal(sub.module, deco.args[0])
                if ok:
                    arch_map[name] = sub.qn
    if not arch_map or reg is None:
        raise GenerateError("kempnerforge: no registered VLMConfig subclasses found")
    dispatch = {vlm.qn: {"key": "arch", "default": reader.class_entry(vlm)["keys"]["arch"]["default"],
                         "map": dict(sorted(arch_map.items())),
                         "source": _find(loader, r"if dc_type is VLMConfig", "the [vlm] arch dispatch"),
                         "unknown": "ValueError: Unknown vlm.arch: {arch!r}. Registered: [...]",
                         "unknown_source": _find(loader, r"f\"Unknown vlm\.arch", "the unknown-arch error")}}
    tables = build_tables(reader, root, "declared", dispatch)
    facts = {
        "unknown_keys": {
            "refused": "every table: each section, nested tables, [[array]] elements, [vlm] by its arch",
            "message": "ValueError: Unknown config keys in {class}: {sorted unknown}. Valid keys: {sorted fields}",
            "source": [_find(loader, r"unknown = set\(data\.keys\(\)\) - field_names", "the unknown-key check"),
                       _find(loader, r"Reject unknown keys", "the unknown-key check of sections")],
            "stage": "load_config (before anything else runs)",
        },
        "types": {
            "model": "kempnerforge",
            "rules": "int field: a str or float goes through int() (a float is truncated, a non-numeric str raises "
                     "ValueError); float field: a str or int goes through float(); bool field: a str is true when it is "
                     "'true', '1' or 'yes' (any case), anything else through bool(); Literal[...]: a value outside "
                     "raises ValueError; Enum: Enum(value) raises ValueError for an unknown value; list field: a "
                     "scalar becomes a one-element list; tuple field: a list becomes a tuple (length unchecked); a "
                     "union of several types, a str field, a dict field: kept as given (no conversion, no check)",
            "source": _find(loader, r"def _coerce_value", "_coerce_value"),
            "not_a_table": "a scalar where a section or nested table belongs is kept as is and fails later",
        },
        "cli": {
            "form": "--section.key=value (value parsed with ast.literal_eval, else kept as a str, then converted as "
                    "above); --section.key alone means true; tokens that do not start with -- are ignored, so "
                    "'--distributed.tp 4' sets tp to int('true') and fails, and '--train.compile_model false' "
                    "leaves compile_model true",
            "source": _find(loader, r"def _parse_cli_overrides", "_parse_cli_overrides"),
        },
        "post_init": "each section's __post_init__ runs when the loader builds it, so its checks refuse the config at load",
        "section_defaults": "instance",
        "section_defaults_note": "a section the file writes is rebuilt from the default JobConfig()'s section, whose "
                                 "__post_init__ already ran: what it filled in stays (a [model] without n_kv_heads "
                                 "keeps the default instance's 32, not its own n_heads)",
        "section_defaults_source": _find(loader, r"kwargs\[f\.name\] = current_val", "unset fields from the instance"),
        "post_init_source": _find(_module(index, "kempnerforge.config.loader"), r"return dc_type\(\*\*kwargs\)",
                                  "construction of each section"),
    }
    return {"root": root.qn, "classes": reader.classes, "tables": tables, "loader": facts}


def torchtitan(index: Index) -> dict:
    if "torchtitan.config.job_config" in index.modules:
        return _torchtitan_toml(index)
    return _torchtitan_registry(index)


def _torchtitan_toml(index: Index) -> dict:
    reader = Reader(index)
    root = index.classes.get("torchtitan.config.job_config.JobConfig")
    manager = _module(index, "torchtitan.config.manager")
    tables = build_tables(reader, root, "declared", {})
    facts = {
        "era": "toml",
        "unknown_keys": {
            "refused": "every table: each section and nested table ([training.dataloader], [quantize.linear.float8], ...)",
            "message": "ValueError: Invalid field names in {class} data: {set of unknown}.\\nPlease modify your .toml "
                       "config file or override these fields from the command line.",
            "source": [_find(manager, r"if invalid_fields := set\(data\) - valid_fields", "the unknown-key check")],
            "stage": "ConfigManager.parse_args, before tyro",
            "extension": "job.custom_config_module (or --job.custom_config_module) merges a user dataclass into "
                         "JobConfig first: its fields are then valid too",
            "extension_source": _find(manager, r"def _maybe_add_custom_config", "_maybe_add_custom_config"),
        },
        "types": {
            "model": "keep",
            "rules": "_dict_to_dataclass converts nothing: every value is kept as the file gives it; tyro.cli then "
                     "receives the result as its default and only warns (UserWarning '... is annotated with type X, "
                     "but the default value V has type Y', tyro 1.0.17) when the type does not match, an int for a "
                     "float field included silently; the wrong value fails, or is misread, where the code uses it",
            "source": [_find(manager, r"result\[f\.name\] = value$", "the value copied as is"),
                       _find(manager, r"self\.config = tyro\.cli\(", "tyro.cli with the file as default")],
            "not_a_table": "a scalar where a nested table belongs is kept as is and fails later",
        },
        "cli": {
            "form": "tyro: --section.key value or --section.key=value (hyphens or underscores); booleans are flags "
                    "(--compile.enable, --compile.no-enable); an unknown flag exits 2 ('Unrecognized options', with "
                    "'Perhaps you meant'); a value tyro cannot parse for the type, or outside a Literal, exits 2",
            "source": _find(manager, r"self\.config = tyro\.cli\(", "tyro.cli"),
        },
        "post_init": "a section's __post_init__ runs when _dict_to_dataclass builds it (at load)",
        "read_at_load": {
            "job.custom_config_module": {"source": _find(manager, r'module_path = job\.get\("custom_config_module"\)',
                                                         "the custom module read from the file"),
                                         "refuses": "a truthy non-string (importlib.import_module fails on it)",
                                         "ints_pass": False, "falsy_pass": True},
            "model.hf_assets_path": {"source": _find(manager, r"if not os\.path\.exists\(self\.config\.model\.hf_assets_path",
                                                     "the hf_assets_path check"),
                                     "refuses": "a non-string other than an int (os.path.exists, then .endswith)",
                                     "ints_pass": True, "falsy_pass": False},
            "model.tokenizer_path": {"source": _find(manager, r"if self\.config\.model\.tokenizer_path:",
                                                     "the deprecated tokenizer_path"),
                                     "refuses": "a truthy non-string other than an int (copied to hf_assets_path)",
                                     "ints_pass": True, "falsy_pass": True},
        },
        "post_init_source": _find(manager, r"return cls\(\*\*result\)", "construction of each section"),
    }
    return {"root": root.qn, "classes": reader.classes, "tables": tables, "loader": facts}


def _torchtitan_registry(index: Index) -> dict:
    reader = Reader(index)
    root = index.classes.get("torchtitan.trainer.Trainer.Config")
    if root is None:
        raise GenerateError("torchtitan/trainer.py: class Trainer.Config not found (neither TOML nor registry era?)")
    manager = _module(index, "torchtitan.config.manager")
    configurable = _module(index, "torchtitan.config.configurable")
    tables = build_tables(reader, root, "subclasses", {})
    facts = {
        "era": "registry",
        "unknown_keys": {
            "refused": "every config class: they are @dataclass(kw_only=True, slots=True), so an unknown keyword "
                       "argument raises TypeError and assigning an unknown attribute raises AttributeError",
            "message": "TypeError: {class}.__init__() got an unexpected keyword argument '{key}' / AttributeError: "
                       "'{class}' object has no attribute '{key}'",
            "source": [_find(configurable, r'if "__slots__" not in config_cls\.__dict__', "the slots enforcement")],
            "stage": "when the config function runs (ConfigManager._load_config calls it)",
            "variants": "a field may hold any subclass of its declared config class: a key is known when one of them has it",
        },
        "types": {
            "model": "keep",
            "rules": "Python does not check field types: values are kept as the code gives them; tyro.cli receives "
                     "the config as its default and only warns on a type mismatch; the wrong value fails, or is "
                     "misread, where the code uses it",
            "source": [_find(manager, r"self\.config = tyro\.cli\(", "tyro.cli with the config as default")],
        },
        "cli": {
            "form": "tyro: --section.key value or --section.key=value; booleans are flags; an unknown flag exits 2 "
                    "('Unrecognized options'); a value tyro cannot parse, or outside a Literal, exits 2",
            "source": _find(manager, r"self\.config = tyro\.cli\(", "tyro.cli"),
        },
        "post_init": "a config's __post_init__ runs when the config function builds it",
        "read_at_load": {
            "hf_assets_path": {"source": _find(manager, r"self\.config\.hf_assets_path  # pyrefly", "the hf_assets_path check"),
                               "refuses": "a non-string other than an int (os.path.exists, then .endswith)",
                               "ints_pass": True, "falsy_pass": False},
        },
        "pseudo_sections": {"model": "model_spec=model_registry(flavor): meshlint records it as {name, flavor}"},
    }
    return {"root": root.qn, "classes": reader.classes, "tables": tables, "loader": facts}


FRAMEWORKS = {
    "kempnerforge": (["kempnerforge"], kempnerforge),
    "torchtitan": (["torchtitan", "torchtitan_recipes"], torchtitan),
}


def generate(framework: str, source: str | Path, version: str, commit: str) -> dict:
    """The schema of ``framework`` as the source tree at ``source`` defines it (plain data, JSON-ready)."""
    if framework not in FRAMEWORKS:
        raise GenerateError(f"unknown framework {framework!r}: one of {', '.join(FRAMEWORKS)}")
    packages, build = FRAMEWORKS[framework]
    root = Path(source)
    if not (root / packages[0]).is_dir():
        raise GenerateError(f"{root}: no {packages[0]}/ package here")
    index = Index(root, packages)
    body = build(index)
    reachable = _reachable(body)
    classes = {qn: body["classes"][qn] for qn in sorted(reachable)}
    keys = sum(len(c["keys"]) for c in classes.values())
    return {
        "format": FORMAT,
        "framework": framework,
        "version": version,
        "commit": commit,
        "generated_by": f"python -m meshlint.generate.schema --framework {framework} --source DIR "
                        f"--version {version} --commit {commit}",
        "root": body["root"],
        "counts": {"tables": len(body["tables"]), "classes": len(classes), "keys": keys,
                   "root_table_keys": sum(len(classes[qn]["keys"]) for qn in body["tables"][""]["classes"])},
        "loader": body["loader"],
        "tables": dict(sorted(body["tables"].items())),
        "classes": classes,
    }


def _reachable(body: dict) -> set:
    out = set()
    for table in body["tables"].values():
        out.update(table["classes"])
    return {qn for qn in out if qn in body["classes"]}


def out_path(framework: str, version: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.@-]", "_", version)
    return OUT_DIR / f"{framework}-{safe}.json"


def dumps(schema: dict) -> str:
    return json.dumps(schema, indent=1, sort_keys=False, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshlint.generate.schema", description=__doc__.split("\n")[0])
    parser.add_argument("--framework", required=True, choices=sorted(FRAMEWORKS))
    parser.add_argument("--source", required=True, help="the framework's source tree (holds its package folder)")
    parser.add_argument("--version", required=True, help="version id in the file name (5666d0d, 0.2.x, 0.3.0, main@b5bcd76c6)")
    parser.add_argument("--commit", required=True, help="the commit or release the source is at (cited in the file)")
    parser.add_argument("--out", help="write here instead of meshlint/data/schema/<framework>-<version>.json")
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it (exit 1 if it differs)")
    args = parser.parse_args(argv)
    try:
        schema = generate(args.framework, args.source, args.version, args.commit)
    except GenerateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = Path(args.out) if args.out else out_path(args.framework, args.version)
    text = dumps(schema)
    if args.check:
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        print(f"{path}: {'up to date' if same else 'differs from the source: regenerate it'}")
        return 0 if same else 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    c = schema["counts"]
    print(f"wrote {os.path.relpath(path)}: {c['tables']} tables, {c['classes']} classes, {c['keys']} keys")
    if not args.out:  # and its conditions, compiled ahead of time (meshlint/generate/schema_compiled.py)
        from meshlint.generate import schema_compiled

        return schema_compiled.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
