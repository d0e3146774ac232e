"""The names a Megatron-LM source file reads that stand for one fixed object of the release, for the generators.

A member of a ``str`` enum the release defines is its string (equal to it, hashed alike). A member of a plain
``enum.Enum`` (``CudaGraphScope.moe``, ``AttnBackend.flash``) and a module-level function (``quick_gelu``,
``squared_relu``, torch's ``F.gelu``) and a torch dtype (``torch.float``, the same object as ``torch.float32``:
the installed torch names it) compare by identity: each becomes a token, ``S__<qualified name>``, that
pyexpr.py evaluates to a Symbol equal only to itself (``isinstance(x, S__<enum class>)`` holds for its members).
Names are resolved through the file's imports (relative ones included) to the module that defines them, in the
checkout; torch's functions from torch/nn/functional.py's source (found, not imported), its dtypes from the installed
torch (imported by this build-time tool only).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from meshlint.frameworks.megatron.pyexpr import SYMBOL

_ENUM_BASES = ("enum.Enum", "Enum")
_TORCH_FUNCTIONS = ("torch.nn.functional",)  # modules whose top-level names are functions, read from torch's source


def token(qualified: str) -> str:
    """The token naming ``qualified`` (a.b.C.m -> S__a__b__C__m)."""
    return SYMBOL + qualified.replace(".", "__")


def _module_file(root: Path, module: str) -> Path | None:
    if module.startswith("megatron."):
        for path in (root / (module.replace(".", "/") + ".py"), root / module.replace(".", "/") / "__init__.py"):
            if path.is_file():
                return path
        return None
    if module in _TORCH_FUNCTIONS:
        spec = importlib.util.find_spec(module.split(".")[0])  # the top-level package: found, not imported
        if spec and spec.submodule_search_locations:
            path = Path(list(spec.submodule_search_locations)[0]).joinpath(*module.split(".")[1:]).with_suffix(".py")
            return path if path.is_file() else None
    return None


def imports(tree: ast.Module, module: str, package: bool = False) -> dict:
    """local name -> (module, name or None for the module itself) of the file's imports (``package``: the file
    is the package's __init__.py, which relative imports start from)."""
    out: dict = {}
    package = module if package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                out[a.asname or a.name] = (base, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname or "." not in a.name:
                    out[a.asname or a.name] = (a.name, None)
    return out


def definition(root: Path, module: str, name: str, depth: int = 0):
    """(qualified module, the top-level node defining ``name``) following re-exports, or None."""
    path = _module_file(root, module)
    if path is None or depth > 4:
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return module, node
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                and module in _TORCH_FUNCTIONS:
            return module, node  # torch's functions are builtins given a docstring (gelu = _add_docstr(...))
    target = imports(tree, module, path.name == "__init__.py").get(name)
    if target and target[1]:
        return definition(root, target[0], target[1], depth + 1)
    return None


def _torch_dtype(name: str) -> str | None:
    """The canonical name of ``torch.<name>`` where it is a dtype (torch.float -> float32: aliases are one
    object), from the installed torch (imported here, at build time only), else None."""
    try:
        import torch
    except ImportError:
        return None
    value = getattr(torch, name, None)
    return str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else None


def _enum(cls: ast.ClassDef) -> tuple[str, list] | None:
    """("str" | "plain", [(member, value node)]) of an enum class whose body is only members, else None."""
    bases = [ast.unparse(b) for b in cls.bases]
    kind = "str" if bases[:1] == ["str"] and bases[1:] and bases[1] in _ENUM_BASES and len(bases) == 2 else \
        "plain" if len(bases) == 1 and bases[0] in _ENUM_BASES else None
    body = [b for b in cls.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    if kind is None or not all(isinstance(b, ast.Assign) and len(b.targets) == 1 and isinstance(b.targets[0], ast.Name)
                               and isinstance(b.value, ast.Constant) for b in body):
        return None
    if kind == "str" and not all(isinstance(b.value.value, str) for b in body):
        return None
    return kind, [(b.targets[0].id, b.value) for b in body]


def table(root: Path, rel: str) -> dict:
    """source text -> replacement source, for the names file ``rel`` (of the checkout ``root``) reads."""
    root = Path(root)
    tree = ast.parse((root / rel).read_text(encoding="utf-8"))
    module = rel[:-3].replace("/", ".")
    imported = imports(tree, module)
    out: dict = {}
    for local, (mod, name) in imported.items():
        if name is None:  # ``import torch.nn.functional as F``: F.x for each x the file reads
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == local:
                    if mod == "torch" and node.attr == "dtype" and _torch_dtype("float32"):
                        out[f"{local}.dtype"] = token("torch.dtype")  # the class: isinstance(x, torch.dtype)
                        continue
                    dtype = _torch_dtype(node.attr) if mod == "torch" else None
                    if dtype:
                        out[f"{local}.{node.attr}"] = token(f"torch.dtype.{dtype}")
                        continue
                    found = definition(root, mod, node.attr)
                    if found and isinstance(found[1], (ast.FunctionDef, ast.Assign)):
                        out[f"{local}.{node.attr}"] = token(f"{mod}.{node.attr}")
            continue
        found = definition(root, mod, name)
        if found is None:
            continue
        where, node = found
        if isinstance(node, ast.FunctionDef):
            out[local] = token(f"{where}.{name}")
        elif isinstance(node, ast.ClassDef) and _enum(node):
            kind, members = _enum(node)
            if kind == "plain":
                out[local] = token(f"{where}.{node.name}")
            for member, value in members:
                out[f"{local}.{member}"] = repr(value.value) if kind == "str" else token(f"{where}.{node.name}.{member}")
    return out


def merged(root: Path, rels: tuple) -> dict:
    """The tables of several files, less any text two files read differently."""
    out: dict = {}
    clash: set = set()
    for rel in rels:
        for text, value in table(root, rel).items():
            if out.get(text, value) != value:
                clash.add(text)
            out[text] = value
    return {k: v for k, v in out.items() if k not in clash}
