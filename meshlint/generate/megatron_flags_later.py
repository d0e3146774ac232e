"""Write which options Megatron-LM's parser gained after core_v0.16.1, and in which release (``flags_later.json``).

    python -m meshlint.generate.megatron_flags_later --write /path/to/Megatron-LM   # a git clone with its tags

meshlint reads every Megatron-LM launch as core_v0.16.1 reads it (``flags_core_0_16.json``). A launch written for a
later release may pass an option 0.16.1's parser does not have; 0.16.1 exits with argparse's ``error:`` there (ML968),
and the finding says which later release has the option, so a user of that release knows what the error means for
them. Read statically, without importing Megatron, at each release tag after core_v0.16.1 (and ``main`` at the
commit named), as ``add_megatron_arguments`` builds the parser: the option strings of every ``add_argument(...)``
call in megatron/training/arguments.py, and the options ``ArgumentGroupFactory(Config, exclude=[...])``
(megatron/training/argument_utils.py) makes of each dataclass field of the class it is given: ``--name-with-hyphens``,
or ``--no-name`` and ``--disable-name`` for a bool whose default is not False, none for an excluded field or one
with ``init=False``, the field's own ``argparse_meta`` names where it gives them. The same reading of core_v0.16.1
itself must give the generated table of that release (the parser's own, ``generate.py``): the generator refuses
to write otherwise, and tests/test_megatron_later.py holds it to that where a clone is at hand.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess

from meshlint.generate.megatron_symbols import imports as module_imports

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "frameworks", "megatron")
OUT = os.path.join(HERE, "flags_later.json")
BASE = os.path.join(HERE, "flags_core_0_16.json")
SOURCE = "megatron/training/arguments.py"
# every release after the one modelled (release candidates left out), then main at the commit read
RELEASES = ("core_v0.17.0", "core_v0.17.1", "core_v0.18.0", "core_v0.18.2", "core_v0.19.0")
MAIN = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"  # main on 2026-08-22 (megatron-core 0.20.0 in development)


def options_in(text: str) -> set:
    """The option strings (``--name``) of every ``*.add_argument(...)`` call in a module's source."""
    found: set = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            negated = _name(_keyword(node, "action")) == "BooleanOptionalAction"  # argparse adds --no-NAME
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    found.add(arg.value)
                    if negated:
                        found.add("--no-" + arg.value[2:])
    return found


class _Tree:
    """Megatron-LM's modules at one commit, read with ``git show``, parsed once each."""

    def __init__(self, root: str, commit: str):
        self.root, self.commit, self._parsed = root, commit, {}

    def module(self, name: str):
        """(the module's file path, its AST) for a dotted module name, or None."""
        if name not in self._parsed:
            self._parsed[name] = None
            base = name.replace(".", "/")
            for path in (base + ".py", base + "/__init__.py"):
                try:
                    text = _git(self.root, "show", f"{self.commit}:{path}")
                except subprocess.CalledProcessError:
                    continue
                self._parsed[name] = (path, ast.parse(text))
                break
        return self._parsed[name]

    def find_class(self, module: str, name: str, depth: int = 0):
        """(the module that defines class ``name``, its ClassDef), following re-exports; None if not found."""
        found = self.module(module)
        if found is None or depth > 8:
            return None
        path, tree = found
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return module, node
        source = _imported(tree, path, module).get(name)
        return self.find_class(*source, depth + 1) if source is not None and source[1] is not None else None

    def fields(self, module: str, cls: ast.ClassDef, depth: int = 0) -> list:
        """A dataclass's fields in order, its bases' first: (name, annotation, default node or None, field() call)."""
        out: list = []
        path, tree = self.module(module)
        imports = _imported(tree, path, module)
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else None
            if name is None or depth > 8:
                continue
            where = imports.get(name, (module, name))
            found = self.find_class(*where)
            if found is not None:
                out += self.fields(found[0], found[1], depth + 1)
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if "ClassVar" in ast.unparse(node.annotation):
                    continue
                call = node.value if isinstance(node.value, ast.Call) and _name(node.value.func) == "field" else None
                default = _keyword(call, "default") if call is not None else node.value
                out = [f for f in out if f[0] != node.target.id] + [(node.target.id, node.annotation, default, call)]
        return out


def _name(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _keyword(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _imported(tree: ast.AST, path: str, module: str) -> dict:
    """name -> (module, name) of a module's imports, at any depth (functions import too)."""
    return module_imports(tree, module, package=path.endswith("__init__.py"))


def factory_options(tree: _Tree) -> set:
    """The options every ``ArgumentGroupFactory(Config, exclude=...)`` in arguments.py makes (argument_utils.py)."""
    path, module = SOURCE, "megatron.training.arguments"
    found = tree.module(module)
    imports = _imported(found[1], path, module)
    out: set = set()
    for function in ast.walk(found[1]):
        if not isinstance(function, (ast.FunctionDef, ast.Module)):
            continue
        lists = {node.targets[0].id: node.value for node in ast.walk(function) if isinstance(node, ast.Assign)
                 and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                 and isinstance(node.value, (ast.List, ast.Tuple))}
        for call in ast.walk(function):
            if not (isinstance(call, ast.Call) and _name(call.func) == "ArgumentGroupFactory" and call.args
                    and isinstance(call.args[0], ast.Name)):
                continue
            exclude = _keyword(call, "exclude")
            if isinstance(exclude, ast.Name):
                exclude = lists.get(exclude.id)
            skip = {e.value for e in getattr(exclude, "elts", []) if isinstance(e, ast.Constant)}
            cls = tree.find_class(*imports.get(call.args[0].id, (module, call.args[0].id)))
            if cls is None:
                raise ValueError(f"{tree.commit[:10]}: class {call.args[0].id} not found")
            for name, annotation, default, field_call in tree.fields(*cls):
                if name in skip or (field_call is not None and isinstance(_keyword(field_call, "init"), ast.Constant)
                                    and _keyword(field_call, "init").value is False):
                    continue
                out.update(_option_names(name, annotation, default, field_call))
    return out


def _option_names(name: str, annotation, default, field_call) -> list:
    """argument_utils' names for one field: its ``argparse_meta`` arg_names, else from its name and type."""
    meta = _keyword(field_call, "metadata") if field_call is not None else None
    if isinstance(meta, ast.Dict):
        for key, value in zip(meta.keys, meta.values):
            if isinstance(key, ast.Constant) and key.value == "argparse_meta" and isinstance(value, ast.Dict):
                for k, v in zip(value.keys, value.values):
                    if isinstance(k, ast.Constant) and k.value == "arg_names" and isinstance(v, (ast.List, ast.Tuple)):
                        return [e.value for e in v.elts if isinstance(e, ast.Constant)]
    if _is_bool(annotation) and not (isinstance(default, ast.Constant) and default.value is False):
        return [f"--no-{name}".replace("_", "-"), f"--disable-{name}".replace("_", "-")]
    return [f"--{name}".replace("_", "-")]


def _is_bool(annotation) -> bool:
    """Whether argument_utils' ``_extract_type`` makes ``bool`` of an annotation: ``bool``, ``Optional[bool]``,
    ``Union[bool, None]`` or ``bool | None`` (the first of a Union, the second being None)."""
    if isinstance(annotation, ast.Name):
        return annotation.id == "bool"
    if isinstance(annotation, ast.Subscript):
        outer, inner = _name(annotation.value), annotation.slice
        if outer == "Optional":
            return _is_bool(inner)
        if outer == "Union" and isinstance(inner, ast.Tuple) and len(inner.elts) == 2 and _is_none(inner.elts[1]):
            return _is_bool(inner.elts[0])
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr) and _is_none(annotation.right):
        return _is_bool(annotation.left)
    return False


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def options_at(root: str, commit: str) -> set:
    """Every option Megatron-LM's parser has at ``commit``, read statically (see the module's docstring)."""
    tree = _Tree(root, commit)
    return options_in(_git(root, "show", f"{commit}:{SOURCE}")) | factory_options(tree)


def _git(root: str, *args: str) -> str:
    # -C: a working tree or a bare clone alike
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=True).stdout


# options of core_v0.16.1's source its generated table lacks, and why: the parser that wrote the table was built
# where they are not added
CONDITIONAL = {"--kitchen-config-file": "arguments.py:2878, only where nvidia-kitchen imports (HAVE_KITCHEN)",
               "--kitchen-recipe-number": "arguments.py:2878, only where nvidia-kitchen imports (HAVE_KITCHEN)"}


def check_reading(root: str, table: dict) -> None:
    """This reading of core_v0.16.1 against the parser's own table of it: raises ValueError where they differ."""
    core = {name for name, entry in table["flags"].items() if not entry.get("extra")}  # extra: entry scripts' own
    read = options_at(root, _git(root, "rev-parse", f"{table['tag']}^{{commit}}").strip())
    missing, extra = sorted(core - read), sorted(read - set(table["flags"]) - set(CONDITIONAL))
    if missing or extra:
        raise ValueError(f"the static reading of {table['tag']} differs from its parser's table: "
                         f"missing {missing[:10]} ({len(missing)}), extra {extra[:10]} ({len(extra)})")


def table(root: str) -> dict:
    with open(BASE, encoding="utf-8") as f:
        base = json.load(f)
    check_reading(root, base)
    known = set(base["flags"]) | set(CONDITIONAL)
    added: dict = {}
    read = []
    for name, ref in [(tag, tag) for tag in RELEASES] + [(f"main@{MAIN[:10]}", MAIN)]:
        commit = _git(root, "rev-parse", f"{ref}^{{commit}}").strip()
        for option in sorted(options_at(root, commit) - known):
            added.setdefault(option, name)  # the first release that has it
        read.append({"name": name, "commit": commit})
    return {"framework": "megatron-core", "after": "core_v0.16.1",
            "source": f"{SOURCE}: add_argument's option strings and ArgumentGroupFactory's dataclass fields",
            "read": read, "added": dict(sorted(added.items()))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", metavar="ROOT", required=True, help="a git clone of Megatron-LM, with its tags")
    args = ap.parse_args(argv)
    data = table(args.write)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=0)
        f.write("\n")
    print(f"{len(data['added'])} options added after core_v0.16.1 -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
