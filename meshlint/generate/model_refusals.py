"""What a torchtitan model refuses (tp/pp/cp it cannot take) and which state-dict converters it has, read with ``ast``."""

from __future__ import annotations

import ast
import os

def refusals(root: str, modname: str, commit: str) -> dict:
    """Refusals in the model's ``config_registry.py``: a Trainer.Config subclass its functions return
    that raises on ``tensor_parallel_degree > 1`` (kimi) or on context parallelism, in a method."""
    out: dict = {}
    path = os.path.join(root, *modname.split("."), "config_registry.py")
    if not os.path.isfile(path):
        return out
    rel = os.path.relpath(path, root)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for method in cls.body:
            if not isinstance(method, ast.FunctionDef):
                continue
            for kind, line in _refusals_in(method):
                if kind not in out:
                    users = _returners(tree, cls.name)
                    out[kind] = f"{rel}:{line} @ {commit} ({cls.name}.{method.name}" + \
                                (f", returned by {users})" if users else ")")
    return out


def _refusals_in(func: ast.FunctionDef) -> list:
    """``(kind, line)`` of each ``if <tp or cp enabled>: raise`` directly in the function's body."""
    found = []
    for stmt in func.body:
        if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[0], ast.Raise):
            for kind in _refusal_kinds(stmt.test):
                found.append((kind, stmt.lineno))
    return found


_DEGREE_KINDS = {"tensor_parallel_degree": "tp1_only", "pipeline_parallel_degree": "pp1_only",
                 "context_parallel_degree": "refuses_cp"}
_ENABLED_KINDS = {"tp_enabled": "tp1_only", "pp_enabled": "pp1_only", "cp_enabled": "refuses_cp"}


def _refusal_kinds(test) -> list:
    """What an ``if`` that raises refuses: ``x.tensor_parallel_degree > 1`` (or ``!= 1``), ``tp_enabled``,
    and the same for pp and cp, alone or joined by ``or``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        out = []
        for value in test.values:
            kinds = _refusal_kinds(value)
            if not kinds:
                return []  # another condition decides too: not a plain refusal of the degree
            out.extend(kinds)
        return out
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Attribute):
        kind, op, right = _DEGREE_KINDS.get(test.left.attr), test.ops[0], test.comparators[0]
        if kind and isinstance(right, ast.Constant) and right.value == 1 and isinstance(op, (ast.Gt, ast.NotEq)):
            return [kind]
    if isinstance(test, ast.Attribute) and test.attr in _ENABLED_KINDS:
        return [_ENABLED_KINDS[test.attr]]
    return []


def _returners(tree, cls: str) -> str:
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    users = [f.name for f in funcs
             if any(isinstance(r, ast.Return) and isinstance(r.value, ast.Call) and isinstance(r.value.func, ast.Name)
                    and r.value.func.id == cls for r in ast.walk(f))]
    if not users:
        return ""
    return f"{len(users)} of the {len(funcs)} public functions of the file: {', '.join(users)}"


def converters(root: str, commit: str) -> list:
    """The model config converters a registry's ``model_registry(..., converters=[...])`` can apply: every
    class of the checkout (components/, experiments/) that derives from ``ModelConfigConverter``, with its
    kind (``quantization``: a ``QuantizationConverter``, which ``validate_converter_order`` requires before
    LoRA; ``lora``: ``LoRAConverter``; else ``other``) and whether its ``convert`` calls
    ``swap_token_dispatcher`` (MoE quantization: the routed experts' token dispatcher must pad).
    Classes are matched by name: one entry per name, the first found (sorted paths) wins."""
    bases: dict = {}
    where: dict = {}
    swaps: set = set()
    for sub in ("components", "experiments", "protocols"):
        top = os.path.join(root, "torchtitan", sub)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d not in ("tests", "test", "__pycache__"))
            for fname in sorted(filenames):
                if not fname.endswith(".py") or fname.startswith("test_"):
                    continue
                path = os.path.join(dirpath, fname)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                if "Converter" not in text:
                    continue
                try:
                    tree = ast.parse(text)
                except SyntaxError:
                    continue
                rel = os.path.relpath(path, root)
                for node in tree.body:
                    if not isinstance(node, ast.ClassDef) or node.name in bases:
                        continue
                    names = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
                             for b in node.bases]
                    bases[node.name] = [n for n in names if n]
                    where[node.name] = f"{rel}:{node.lineno}"
                    for sub_node in ast.walk(node):
                        if isinstance(sub_node, ast.Call) and isinstance(sub_node.func, ast.Name) \
                                and sub_node.func.id == "swap_token_dispatcher":
                            swaps.add(node.name)

    def ancestors(name: str, seen: frozenset = frozenset()) -> set:
        out = set()
        for b in bases.get(name, ()):
            if b not in seen:
                out |= {b} | ancestors(b, seen | {name})
        return out

    found = []
    for name in sorted(bases):
        up = ancestors(name)
        if "ModelConfigConverter" not in up:
            continue
        kind = ("quantization" if name == "QuantizationConverter" or "QuantizationConverter" in up
                else "lora" if name == "LoRAConverter" or "LoRAConverter" in up else "other")
        found.append({"name": name, "kind": kind, "pads_dispatcher": name in swaps,
                      "source": f"{where[name]} @ {commit}"})
    return found


# ---------------------------------------------------------------------- output
