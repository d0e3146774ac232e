"""Precompile the regular expressions of meshlint's check path for each Python version (meshlint/fastre.py).

    python -m meshlint.generate.fastre_compiled           # rewrite meshlint/fastre_compiled/*.py
    python -m meshlint.generate.fastre_compiled --check   # exit 1 if a table differs from what it would write
    ... --python /path/to/python3.12 ...                   # the interpreters to compile for (default below)

Every ``fastre.compile("literal", flags)`` call in meshlint's source is found by reading the source (the
pattern written there or in a module-level constant; one built at run time is not: ``re`` compiles those). Each interpreter compiles the patterns with its own
``re`` internals, in a child process, so a table holds exactly what that version's ``re.compile`` would
build. By default: this interpreter and every ``python3.N`` on PATH for the versions meshlint supports. A
version not found here keeps its table as it is (its entries are keyed by the pattern text, so one that
is missing or no longer used is only slower or unused, never wrong).
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

from meshlint import fastre

PACKAGE_DIR = Path(fastre.__file__).resolve().parent
OUT_DIR = PACKAGE_DIR / "fastre_compiled"
VERSIONS = ("3.10", "3.11", "3.12", "3.13")  # pyproject's requires-python and the releases since
_FLAGS = {name: getattr(fastre, name) for name in ("I", "IGNORECASE", "M", "MULTILINE", "S", "DOTALL",
                                                     "X", "VERBOSE", "A", "ASCII")}

# Run by each interpreter: its own re internals compile the patterns read from stdin (stdlib only)
_CHILD = r"""
import json, sys, _sre
try:
    from re import _compiler as C, _parser as P
except ImportError:  # Python 3.10
    import sre_compile as C, sre_parse as P
out = []
for pattern, flags in json.load(sys.stdin):
    p = P.parse(pattern, flags)
    code = [int(x) for x in C._code(p, flags)]
    groupindex = dict(p.state.groupdict)
    indexgroup = [None] * p.state.groups
    for k, i in groupindex.items():
        indexgroup[i] = k
    out.append([pattern, flags, flags | p.state.flags, code, p.state.groups - 1, groupindex, indexgroup])
json.dump({"tag": sys.implementation.cache_tag, "magic": _sre.MAGIC, "codesize": _sre.CODESIZE,
           "version": "%d.%d" % sys.version_info[:2], "patterns": out}, sys.stdout)
"""


class NotLiteral(Exception):
    pass


def _flags(node) -> int:
    if node is None:
        return 0
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "fastre" \
            and node.attr in _FLAGS:
        return _FLAGS[node.attr]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    raise NotLiteral(ast.dump(node))


def patterns(root: Path = PACKAGE_DIR) -> list:
    """``(pattern, flags)`` of every ``fastre.compile`` call with a literal pattern under ``root``, sorted."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        if "fastre_compiled" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        named = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "fastre" and node.args):
                continue
            first = node.args[0]
            if isinstance(first, ast.Name) and first.id in named:  # a module-level constant holding the pattern
                text = named[first.id]
            elif isinstance(first, ast.Constant) and isinstance(first.value, str):
                text = first.value
            else:
                continue
            flag_node = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "flags"), None)
            try:
                found.add((text, _flags(flag_node)))
            except NotLiteral:
                continue
    return sorted(found)


def interpreters() -> list:
    """This interpreter, then each other supported ``python3.N`` found on PATH."""
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    out = [sys.executable]
    for version in VERSIONS:
        if version != mine:
            found = shutil.which(f"python{version}")
            if found:
                out.append(found)
    return out


def compile_with(python: str, pats: list) -> dict:
    proc = subprocess.run([python, "-I", "-c", _CHILD], input=json.dumps(pats), capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout)


def render(result: dict) -> str:
    lines = [f'"""The check path\'s regular expressions, compiled by CPython {result["version"]}\'s re (generated by',
             'python -m meshlint.generate.fastre_compiled; do not edit). Used by meshlint/fastre.py only while',
             'MAGIC and CODESIZE are those of the running interpreter\'s _sre."""', "",
             f"MAGIC = {result['magic']!r}", f"CODESIZE = {result['codesize']!r}", "PATTERNS = {"]
    for pattern, flags, final, code, groups, groupindex, indexgroup in result["patterns"]:
        lines.append(f"    ({pattern!r}, {flags!r}): ({final!r}, {tuple(code)!r}, {groups!r}, "
                     f"{groupindex!r}, {tuple(indexgroup)!r}),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def module_name(tag: str) -> str:
    return tag.replace("-", "_")


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a table differs")
    parser.add_argument("--python", action="append", help="an interpreter to compile for (repeatable)")
    args = parser.parse_args(argv)
    pats = patterns()
    stale = []
    for python in args.python or interpreters():
        try:
            result = compile_with(python, pats)
        except (OSError, subprocess.CalledProcessError, ValueError) as exc:  # a shim without its version, ...
            if python == sys.executable:
                raise
            print(f"skipped {python}: {str(exc)[:200]}", file=sys.stderr)
            continue
        path = OUT_DIR / f"{module_name(result['tag'])}.py"
        text = render(result)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        if args.check:
            stale.append(str(path))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path} ({len(pats)} patterns, Python {result['version']})")
    if stale:
        print("stale: " + ", ".join(stale) + " (run python -m meshlint.generate.fastre_compiled)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
