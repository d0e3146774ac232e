"""The source index of the schema generator: every module of a framework's packages parsed with ``ast``, its
classes and imports, names resolved the way Python imports would."""

from __future__ import annotations

import ast
from pathlib import Path


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
