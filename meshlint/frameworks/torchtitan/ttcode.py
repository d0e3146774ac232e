"""What a torchtitan checkout's own code defines, read statically (``ast`` and regexes, nothing imported):
the fields of its config dataclasses, its model folders, its ParallelDims checks.

versions.py uses it to tell which modelled semantics a checkout is nearest to and what in it those
semantics do not model (a field, a model, a check); units.py uses ``class_fields`` so that a key the
checkout's own dataclass defines is never reported as unknown only because the applied version lacks it.
"""

from __future__ import annotations

import ast
import os
import re

MAX_FILE = 2_000_000       # bytes read of one source file, at most
MAX_FILES = 5_000          # .py files of the package searched for a class, at most
MAX_BASES = 6              # depth of base classes followed for inherited fields

# the registry-era config sections and the dataclass each is built from
SECTION_CLASSES = {"parallelism": "ParallelismConfig", "training": "TrainingConfig", "compile": "CompileConfig"}

_CACHE: dict = {}


def _read(path: str) -> str | None:
    key = ("text", path)
    if key not in _CACHE:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                _CACHE[key] = f.read(MAX_FILE)
        except OSError:
            _CACHE[key] = None
    return _CACHE[key]


def _tree(path: str):
    key = ("ast", path)
    if key not in _CACHE:
        text = _read(path)
        try:
            _CACHE[key] = ast.parse(text) if text is not None else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            _CACHE[key] = None
    return _CACHE[key]


def _find_class(body: list, dotted: list):
    """The ClassDef named by ``dotted`` (``["Trainer", "Config"]``) among ``body``'s statements."""
    for node in body:
        if isinstance(node, ast.ClassDef) and node.name == dotted[0]:
            return node if len(dotted) == 1 else _find_class(node.body, dotted[1:])
    return None


def _own_fields(cls: ast.ClassDef) -> dict:
    """name -> line of the annotated class-body fields (ClassVar ones excluded)."""
    out = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "ClassVar" in ast.dump(node.annotation):
                continue
            out[node.target.id] = node.lineno
    return out


def _dotted_name(node) -> list | None:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        inner = _dotted_name(node.value)
        return inner + [node.attr] if inner else None
    if isinstance(node, ast.Subscript):  # Generic[T]
        return _dotted_name(node.value)
    return None


def _package_files(pkg: str) -> list:
    key = ("files", pkg)
    if key not in _CACHE:
        found = []
        for dirpath, dirnames, filenames in os.walk(pkg):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
            found.extend(os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".py"))
            if len(found) >= MAX_FILES:
                break
        _CACHE[key] = found[:MAX_FILES]
    return _CACHE[key]


def locate_class(pkg: str, dotted: list, hint: str | None = None) -> tuple | None:
    """(file, ClassDef) of the class ``dotted`` names (``["OptimizersContainer", "Config"]``): in ``hint``
    (a path relative to the package's parent, from the generated schema) first, else the first file of
    the package that defines its outermost class."""
    parent = os.path.dirname(pkg)
    candidates = [os.path.join(parent, hint)] if hint else []
    outer = re.compile(rf"^\s*class\s+{re.escape(dotted[0])}\b", re.MULTILINE)
    for path in candidates + _package_files(pkg):
        text = _read(path)
        if not text or not outer.search(text):
            continue
        tree = _tree(path)
        cls = _find_class(tree.body, dotted) if tree is not None else None
        if cls is not None:
            return path, cls
    return None


def class_fields(pkg: str, class_name: str, hint: str | None = None) -> dict | None:
    """name -> "file:line" of every field the checkout's class ``class_name`` (``Trainer.Config``,
    ``ParallelismConfig``) declares, its bases' included; None when the checkout has no such class."""
    key = ("fields", pkg, class_name, hint)
    if key not in _CACHE:
        _CACHE[key] = _fields(pkg, class_name.split("."), hint, MAX_BASES)
    return _CACHE[key]


def _fields(pkg: str, dotted: list, hint: str | None, depth: int) -> dict | None:
    found = locate_class(pkg, dotted, hint)
    if found is None:
        return None
    path, cls = found
    rel = os.path.relpath(path, os.path.dirname(pkg))
    out: dict = {}
    if depth > 0:
        for base in cls.bases:
            name = _dotted_name(base)
            if not name or name[-1] in ("object", "Generic", "ABC", "Protocol"):
                continue
            # a nested base (Configurable.Config) keeps its owner; a plain name is looked up by itself
            inherited = _fields(pkg, name[-2:] if len(name) > 1 and name[-1] == "Config" else name[-1:], None,
                                depth - 1)
            out.update(inherited or {})
    out.update({name: f"{rel}:{line}" for name, line in _own_fields(cls).items()})
    return out


def field_kind(pkg: str, section: str, field: str) -> str | None:
    """How tyro types ``--section.field`` of the checkout's own section dataclass, read off the field's
    annotation in launch.py's terms ("int", "bool", "float", "str", "int?", "lit:a,b"); None when the
    checkout's class has no such field, "" when the annotation is one meshlint does not type."""
    found = locate_class(pkg, [SECTION_CLASSES.get(section, "")], os.path.join("torchtitan", "config", "configs.py")) \
        if section in SECTION_CLASSES else None
    if found is None:
        return None
    for node in found[1].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == field:
            return _kind(node.annotation)
    return None


def _kind(ann) -> str:
    text = ast.unparse(ann).replace(" ", "")
    optional = False
    for none in ("|None", "None|"):
        if none in text:
            text, optional = text.replace(none, ""), True
    if text.startswith(("Optional[", "typing.Optional[")) and text.endswith("]"):
        text, optional = text[text.index("[") + 1:-1], True
    if text in ("int", "bool", "float", "str"):
        return text + ("?" if optional else "")
    if text.startswith(("Literal[", "typing.Literal[")):
        try:
            choices = ast.literal_eval(text[text.index("["):].replace("[", "(", 1)[:-1] + ",)")
        except (ValueError, SyntaxError):
            return ""
        if all(isinstance(c, str) for c in choices):
            return "lit:" + ",".join(choices) + ("?" if optional else "")
    return ""


def section_fields(pkg: str) -> dict:
    """section -> {field: "file:line"} of the checkout's ParallelismConfig, TrainingConfig and CompileConfig
    (empty for a class it does not have)."""
    hint = os.path.join("torchtitan", "config", "configs.py")
    return {section: class_fields(pkg, cls, hint) or {} for section, cls in SECTION_CLASSES.items()}


def model_folders(pkg: str) -> list:
    """The model folders of the checkout (``torchtitan/models/<name>/`` holding a config_registry.py)."""
    base = os.path.join(pkg, "models")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    return [n for n in names if os.path.isfile(os.path.join(base, n, "config_registry.py"))]


def clear() -> None:
    """Forget what was read (tests rewrite trees in place)."""
    _CACHE.clear()
