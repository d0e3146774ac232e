#!/usr/bin/env python3
"""Typo'd keyword arguments and attribute names in torchtitan's own registry configs: does meshlint refuse
each one where Python would, at the line that writes it? And are the unedited functions clean?

    python bench/registry_typos.py [--version main|0.3.0|both] [--limit N] [-v]

For every config function of every registry file (torchtitan/**/config_registry.py and
torchtitan_recipes), each keyword of a config-class constructor call (``XConfig(...)``,
``X.Config(...)``) and each ``config.a.b = v`` assignment inside the function is renamed to a typo (a
letter dropped), one edit at a time; the edited file is read statically and checked as the version's
dialect reads it. Counted: caught (ML108 at the edited line, did-you-mean the original name), caught at
another line, missed (with the reason: the class is not in the generated schema, or its value is built
by code meshlint does not follow), and false alarms on the unedited functions.
A script, not a test (it reads thousands of edits); tests/test_schema_registry.py keeps a handful.
"""

from __future__ import annotations

import argparse
import ast
import collections
import glob
import importlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = {"main": (os.path.join(ROOT, "..", "shared", "frameworks", "torchtitan-b5bcd76c6"),
                    "meshlint.frameworks.torchtitan.main_b5bcd76c6"),
           "0.3.0": (os.path.join(ROOT, ".frameworks", "torchtitan-0.3.0"), "meshlint.frameworks.torchtitan.v0_3_0")}


def _typo(name: str) -> str:
    return name[:len(name) // 2] + name[len(name) // 2 + 1:] if len(name) > 3 else name + "s"


def _edits(tree: ast.Module, fname: str):
    """(line, col, old name, new name, kind) of each edit inside function ``fname``."""
    fdef = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == fname), None)
    if fdef is None:
        return
    for node in ast.walk(fdef):
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            if func.endswith("Config") and func.rsplit(".", 1)[-1][:1].isupper():
                for kw in node.keywords:
                    if kw.arg:
                        yield kw.lineno, kw.col_offset, kw.arg, _typo(kw.arg), "keyword"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute):
            t = node.targets[0]
            chain = ast.unparse(t)
            if chain.count(".") >= 2 and chain.split(".")[0] == "config" and "model_spec" not in chain:
                yield t.end_lineno, t.end_col_offset - len(t.attr), t.attr, _typo(t.attr), "attribute"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="both", choices=["main", "0.3.0", "both"])
    parser.add_argument("--limit", type=int, default=0, help="at most N edits per version (0: all)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    from meshlint.inputs import pyregistry

    total = 0
    for version in (["main", "0.3.0"] if args.version == "both" else [args.version]):
        root, module = SOURCES[version]
        root = os.path.abspath(root)
        if not os.path.isdir(os.path.join(root, "torchtitan")):
            print(f"{version}: no source at {root} (run .ci/frameworks.sh)")
            continue
        dialect = importlib.import_module(module)
        files = sorted(glob.glob(f"{root}/torchtitan/**/config_registry.py", recursive=True)) + \
            sorted(glob.glob(f"{root}/torchtitan_recipes/**/*.py", recursive=True))
        counts: collections.Counter = collections.Counter()
        functions = 0
        for path in files:
            text = open(path, encoding="utf-8").read()
            reg = pyregistry.read_registry(path, root=root)
            tree = ast.parse(text)
            for fname, clean in reg.functions.items():
                functions += 1
                spec = dialect.read(clean)
                counts["false alarms"] += len(spec.unknown_keys)
                for key in spec.unknown_keys:
                    print(f"FALSE ALARM {version} {os.path.relpath(path, root)}::{fname}: {key['key']}")
                for line, col, old, new, kind in _edits(tree, fname):
                    if args.limit and counts["edits"] >= args.limit:
                        break
                    lines = text.splitlines(keepends=True)
                    src = lines[line - 1]
                    if src[col:col + len(old)] != old:
                        continue
                    lines[line - 1] = src[:col] + new + src[col + len(old):]
                    edited = pyregistry.read_registry(path, text="".join(lines), root=root)
                    source = edited.functions.get(fname)
                    if source is None:
                        continue
                    counts["edits"] += 1
                    counts[f"edits ({kind})"] += 1
                    spec = dialect.read(source)
                    hits = [u for u in spec.unknown_keys if u["name"] == new]
                    where = [source.locate(u["key"])[0] for u in hits]
                    if hits and line in where and hits[0]["suggestion"] == old:
                        counts["caught at the line, did-you-mean right"] += 1
                    elif hits and line in where:
                        counts["caught at the line, other suggestion"] += 1
                    elif hits:
                        counts["caught at another line"] += 1
                    else:
                        why = _why_missed(source, new)
                        counts[f"missed: {why}"] += 1
                        if args.verbose:
                            print(f"missed {version} {os.path.relpath(path, root)}:{line} {fname} {old}->{new}: {why}")
        total += counts["false alarms"]
        print(f"torchtitan {version}: {functions} functions, " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if total else 0


def _why_missed(source, name: str) -> str:
    for path, u in source.unknown.items():
        if path.endswith("." + name) or path == name:
            return "its value is not followed (the name is checked only where the class is known)"
    paths = [p for p in _paths(source.data) if p.endswith("." + name) or p == name]
    if not paths:
        return "the name does not reach the config (not followed, or outside Trainer.Config)"
    parent = paths[0].rpartition(".")[0]
    cls = source.types.get(parent)
    return f"{cls or 'its class'} is not in the generated schema at {parent or 'the top level'}"


def _paths(data, prefix=""):
    if isinstance(data, dict):
        for k, v in data.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            yield p
            yield from _paths(v, p)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _paths(v, f"{prefix}[{i}]")


if __name__ == "__main__":
    sys.exit(main())
