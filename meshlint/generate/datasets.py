"""Generate the dataset names each torchtitan version registers, read with ``ast`` from its source.

    python -m meshlint.generate.datasets --write 0.2.x=DIR 0.3.0=DIR main@b5bcd76c6=DIR

``DIR`` is a torchtitan checkout or unpacked wheel (the folder holding ``torchtitan/``). torchtitan's
dataloaders look a dataset name up in a module-level dict (``DATASETS``, ``MM_DATASETS``) and raise
``ValueError: Dataset X is not supported`` for any other name (``_validate_dataset``). For each version
this records, citing the source lines:

- ``registries``: one per module holding such a dict and the function refusing names outside it: the
  dict's literal keys, where they are, where the refusal is, and whether every caller lowercases the
  name first (``dataset_name = dataset_name.lower()``: "C4" is then "c4");
- ``loaders``: registry versions (0.3.0, main): the dataloader config classes (``C.Config``) whose
  ``C.__init__`` passes ``dataset_name=config.dataset`` on to that module's dataset, so the name is
  ``dataloader.dataset``; ``source_loaders``: those that pass ``dataset_name=source.dataset`` for each
  of ``config.sources``;
- ``models``: 0.2.x (TOML): the registered model names whose ``TrainSpec`` has a
  ``build_dataloader_fn`` reading ``job_config.training.dataset`` into that module's dataset.

Nothing is typed by hand: a version whose source has none of these records none, and rules reading
the table (``datasets`` fact) then have nothing to check. ``meshlint.engine.facts`` reads the file.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "datasets.toml")
# the versions meshlint ships facts for, and what their citations name after '@'
PINNED = {"0.2.x": "9810191bb^", "0.3.0": "0.3.0", "main@b5bcd76c6": "b5bcd76c6"}


def _py_files(root: str):
    base = os.path.join(root, "torchtitan")
    for d, dirs, files in os.walk(base):
        dirs[:] = sorted(x for x in dirs if x not in ("tests", "__pycache__"))
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(d, f)
                yield os.path.relpath(path, root).replace(os.sep, "/"), path


def _registry_dicts(tree: ast.Module) -> dict:
    """name -> (keys, line) of each module-level ``*DATASETS = {"literal": ..., ...}``."""
    out = {}
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        if target and target.endswith("DATASETS") and isinstance(value, ast.Dict) and value.keys \
                and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys):
            out[target] = ([k.value for k in value.keys], node.lineno)
    return out


def _refusal(tree: ast.Module, dict_name: str) -> tuple | None:
    """(function, line) of the module-level function that raises when a name is ``not in`` the dict."""
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.If) and isinstance(sub.test, ast.Compare) \
                    and len(sub.test.ops) == 1 and isinstance(sub.test.ops[0], ast.NotIn) \
                    and isinstance(sub.test.comparators[0], ast.Name) and sub.test.comparators[0].id == dict_name \
                    and any(isinstance(s, ast.Raise) for s in sub.body):
                raise_node = next(s for s in sub.body if isinstance(s, ast.Raise))
                return node.name, raise_node.lineno
    return None


def _lowercased(tree: ast.Module, refusal: str) -> bool:
    """Whether every function calling ``refusal`` first lowercases the name (``dataset_name.lower()``)."""
    callers = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
                isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == refusal for s in ast.walk(node)):
            callers.append(any(isinstance(s, ast.Assign) and ast.unparse(s) == "dataset_name = dataset_name.lower()"
                               for s in ast.walk(node)))
    return bool(callers) and all(callers)


def _passes_name(func: ast.AST, holder: str) -> bool:
    """Whether ``func`` passes ``dataset_name=<holder>.dataset`` (holder: config, source, job_config.training)."""
    for sub in ast.walk(func):
        if isinstance(sub, ast.keyword) and sub.arg == "dataset_name":
            v = sub.value
            if isinstance(v, ast.Attribute) and v.attr == "dataset" and ast.unparse(v.value) == holder:
                return True
        if holder == "job_config.training" and isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Attribute) \
                and ast.unparse(sub.value) == "job_config.training.dataset":
            return True
    return False


def _loaders(tree: ast.Module) -> tuple[list, list]:
    """The ``C.Config`` of each top-level class C whose ``__init__`` passes config.dataset / source.dataset."""
    plain, sources = [], []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        if not any(isinstance(s, ast.ClassDef) and s.name == "Config" for s in node.body):
            continue
        init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            continue
        if _passes_name(init, "config"):
            plain.append(f"{node.name}.Config")
        elif _passes_name(init, "source"):
            sources.append(f"{node.name}.Config")
    return plain, sources


def _builders(tree: ast.Module) -> list:
    """0.2.x: the module-level functions reading job_config.training.dataset into a dataset."""
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and _passes_name(n, "job_config.training")]


def _spec_models(root: str) -> dict:
    """0.2.x: registered model name -> (build_dataloader_fn name, rel path:line) from each TrainSpec(...)."""
    out = {}
    for base, prefix in (("models", ""), ("experiments", "")):
        top = os.path.join(root, "torchtitan", base)
        if not os.path.isdir(top):
            continue
        for d, dirs, files in os.walk(top):
            dirs[:] = sorted(x for x in dirs if x not in ("tests", "__pycache__"))
            if "__init__.py" not in files or d == top:
                continue
            path = os.path.join(d, "__init__.py")
            name = prefix + os.path.relpath(d, top).replace(os.sep, ".")
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for sub in ast.walk(tree):
                if isinstance(sub, ast.Call) and ast.unparse(sub.func).endswith("TrainSpec"):
                    for kw in sub.keywords:
                        if kw.arg == "build_dataloader_fn" and isinstance(kw.value, ast.Name):
                            rel = os.path.relpath(path, root).replace(os.sep, "/")
                            out[name] = (kw.value.id, f"{rel}:{kw.value.lineno}")
    return out


def read(root: str, commit: str) -> dict:
    registries: dict = {}
    loaders: dict = {}
    source_loaders: dict = {}
    builders: dict = {}
    for rel, path in _py_files(root):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if "DATASETS" not in text:
            continue
        tree = ast.parse(text, path)
        for dict_name, (keys, line) in _registry_dicts(tree).items():
            refusal = _refusal(tree, dict_name)
            if refusal is None:
                continue
            kind = rel[:-3].replace("/", ".")
            registries[kind] = {"names": keys, "source": f"{rel}:{line} @ {commit}",
                                "refused_by": f"{rel}:{refusal[1]} @ {commit} ({refusal[0]})",
                                "lowercased": _lowercased(tree, refusal[0])}
            plain, sources = _loaders(tree)
            for cls in plain:
                loaders[cls] = kind
            for cls in sources:
                source_loaders[cls] = kind
            for fn in _builders(tree):
                builders.setdefault(fn, []).append(kind)
    models = {}
    if builders:
        for name, (fn, where) in sorted(_spec_models(root).items()):
            kinds = builders.get(fn, [])
            if len(kinds) == 1:
                models[name] = {"registry": kinds[0], "source": f"{where} @ {commit}"}
    return {"registries": registries, "loaders": loaders, "source_loaders": source_loaders, "models": models}


def _toml(value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(type(value))


def render(results: dict, command: str) -> str:
    lines = ["# The dataset names each torchtitan version registers (its *DATASETS dicts), the dataloaders that",
             "# look them up, and (0.2.x) which registered model reads which dict.",
             "#",
             f"# GENERATED by `{command}`",
             "# from each version's source. Do not edit by hand: regenerate (one command, above).",
             "# Keys: see meshlint/generate/datasets.py.", ""]
    for version, res in results.items():
        lines.append(f'["{version}".loaders]')
        lines += [f"{_toml(c)} = {_toml(k)}" for c, k in sorted(res["loaders"].items())]
        lines.append("")
        lines.append(f'["{version}".source_loaders]')
        lines += [f"{_toml(c)} = {_toml(k)}" for c, k in sorted(res["source_loaders"].items())]
        lines.append("")
        lines.append(f'["{version}".models]')
        lines += [f"{_toml(m)} = {{ registry = {_toml(v['registry'])}, source = {_toml(v['source'])} }}"
                  for m, v in sorted(res["models"].items())]
        lines.append("")
        for kind, reg in sorted(res["registries"].items()):
            lines.append(f'["{version}".registries."{kind}"]')
            lines.append(f"names = {_toml(reg['names'])}")
            lines.append(f"source = {_toml(reg['source'])}")
            lines.append(f"refused_by = {_toml(reg['refused_by'])}")
            lines.append(f"lowercased = {'true' if reg['lowercased'] else 'false'}  # the name is lowercased first")
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


COMMAND = "python -m meshlint.generate.datasets --write 0.2.x=<torchtitan 9810191bb^> 0.3.0=<torchtitan 0.3.0> " \
          "main@b5bcd76c6=<torchtitan b5bcd76c6>"


def generate(sources: dict) -> str:
    return render({v: read(sources[v], PINNED[v]) for v in PINNED}, COMMAND)


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshlint.generate.datasets", description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="+", help="VERSION=DIR for each of " + ", ".join(PINNED))
    parser.add_argument("--write", action="store_true", help=f"write {os.path.relpath(DATA)} (else print)")
    args = parser.parse_args(argv)
    sources = dict(s.split("=", 1) for s in args.sources)
    missing = [v for v in PINNED if v not in sources]
    if missing:
        parser.error(f"missing sources for {', '.join(missing)}")
    text = generate(sources)
    if args.write:
        with open(DATA, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
