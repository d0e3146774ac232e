"""The import graph of meshlint runs one way: no cycles, and no module imports from a layer above its own.

Read statically (``ast``, nothing imported): every ``import``/``from ... import`` anywhere in a module
(function-level lazy imports included), and ``importlib.import_module("meshlint...")`` /
``__import__("meshlint...")`` with a literal name, and every module named in meshlint/frameworks/registry.py
for a module that imports the registry and calls ``import_module`` on what it reads there. The layers,
lowest first, are ``LAYERS``; a module may import its own layer or any lower one. ``KNOWN_CYCLES`` and ``KNOWN_BACK_EDGES`` are the debts
the restructure of issue 20 has not paid yet: the test fails on any cycle or back-edge not listed
there, and on a listed one that is gone (delete it from the list, so the list only shrinks).
"""

from __future__ import annotations

import ast
import os

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "meshlint")

# lowest first; a module belongs to the layer of its longest listed prefix
LAYERS = (
    ("core", ("meshlint", "meshlint.errors", "meshlint.limits", "meshlint.fileread", "meshlint.cachestore",
              "meshlint.keys")),
    ("mesh", ("meshlint.mesh",)),  # pure arithmetic
    ("frameworks", ("meshlint.frameworks", "meshlint.schema_compiled")),  # one package per framework
    ("inputs", ("meshlint.inputs",)),  # what the user has -> a parsed source (launch lines know the frameworks)
    ("estimate", ("meshlint.estimate",)),  # the price of a layout: whole-peak memory, communication cost
    ("engine", ("meshlint.engine",)),  # the rule language, facts, rules, caches, the layout search, one config
    ("solve", ("meshlint.solve",)),  # suggest and fix: layouts ranked, proposed, written back
    ("report", ("meshlint.report",)),  # text, json, sarif, github, svg, explain, diff
    ("generate", ("meshlint.generate",)),  # build-time generators of the frameworks' facts
    ("smoke", ("meshlint.smoke",)),  # the only path that imports torch
    ("cli", ("meshlint.cli", "meshlint.__main__")),  # the commands
)

# (importer, imported): imports that still run upward; each one is a debt, never a precedent
KNOWN_BACK_EDGES: set = set()
# strongly connected components (sorted module lists) the graph still has
KNOWN_CYCLES = [
]


def modules(root: str = ROOT) -> dict:
    """Every module of the package: dotted name -> path."""
    out = {}
    base = os.path.dirname(root)
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                dotted = os.path.relpath(os.path.join(dirpath, name), base)[:-3].replace(os.sep, ".")
                out[dotted[: -len(".__init__")] if dotted.endswith(".__init__") else dotted] = os.path.join(dirpath, name)
    return out


def _owner(name: str, mods: dict) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def edges(mods: dict) -> dict:
    """module -> the meshlint modules it imports (the package root itself, which imports nothing, left out)."""
    graph, dynamic = {}, {}
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        found = set()
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [f"{base}.{a.name}" for a in node.names] + [base]
            elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)
                  and (getattr(node.func, "id", None) == "__import__"
                       or getattr(node.func, "attr", None) == "import_module")):
                names = [node.args[0].value]
            for name in names:
                if name == "meshlint" or name.startswith("meshlint."):
                    owner = _owner(name, mods)
                    if owner and owner not in (mod, "meshlint"):
                        found.add(owner)
        graph[mod] = found
        dynamic[mod] = any(isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "import_module"
                           and n.args and not isinstance(n.args[0], ast.Constant) for n in ast.walk(tree))
    # a module that imports the framework registry and calls import_module on what it reads there imports
    # every module the registry names (the dialects at start-up, a version on first use)
    named = _registry_modules(mods)
    for mod, targets in graph.items():
        if dynamic[mod] and REGISTRY in targets:
            targets.update(m for m in named if m != mod)
    return graph


REGISTRY = "meshlint.frameworks.registry"


def _registry_modules(mods: dict) -> set:
    if REGISTRY not in mods:
        return set()
    with open(mods[REGISTRY], encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in mods}


def layer_of(mod: str) -> int:
    best, rank = -1, None
    for i, (_name, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    return rank


def back_edges(graph: dict) -> set:
    return {(a, b) for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a)}


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def test_every_module_has_a_layer():
    assert [m for m in modules() if layer_of(m) is None] == []


def test_no_new_back_edges():
    found = back_edges(edges(modules()))
    new = sorted(found - KNOWN_BACK_EDGES)
    assert new == [], ("imports from a lower layer up to a higher one (pass the value down, move the function "
                       f"to the layer it belongs to, or fill a registry from above): {new}")
    gone = sorted(KNOWN_BACK_EDGES - found)
    assert gone == [], f"these back-edges are gone: delete them from KNOWN_BACK_EDGES: {gone}"


def test_no_new_cycles():
    found = cycles(edges(modules()))
    known = [set(c) for c in KNOWN_CYCLES]
    new = [c for c in found if not any(set(c) <= k for k in known)]
    assert new == [], f"import cycles: {new}"
    gone = [c for c in KNOWN_CYCLES if sorted(c) not in found]
    assert gone == [], f"these cycles are gone or smaller: update KNOWN_CYCLES to {found}"
