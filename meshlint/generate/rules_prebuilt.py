"""Write the built-in rules, parsed, into meshlint/engine/rules_prebuilt.py (their docs and expression trees, which
no check reads, into rules_prebuilt_extra.py beside it), and their expressions compiled to Python into
meshlint/engine/rules_compiled/ (see meshlint/engine/prebuilt.py).

    python -m meshlint.generate.rules_prebuilt           # rewrite the modules
    python -m meshlint.generate.rules_prebuilt --check   # exit 1 if one differs

The parsed rules are derived from rules/*.toml by the ordinary loader (``rules.load_rule_file``) and written
as prebuilt.entry stores them, so they are data, not a second implementation of the loader; the compiled
expressions are written by meshlint/engine/expr/compiler.py from the same parsed rules.
tests/test_rules_prebuilt.py regenerates and compares both.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from meshlint import __version__
from meshlint.engine import expr, prebuilt, rules
from meshlint.engine.expr import compiler

OUT = Path(prebuilt.__file__).resolve().parent / "rules_prebuilt.py"
OUT_EXTRA = OUT.parent / "rules_prebuilt_extra.py"
OUT_RECORD = OUT.parent / "rules_prebuilt_record.py"
OUT_COMPILED = OUT.parent / "rules_compiled"  # a package: the index, then one module per part (compiled_sources)


def _parsed(directory: str) -> list:
    return [rules.load_rule_file(os.path.join(directory, name), "builtin", validate=False)
            for name in prebuilt.rule_files(directory)]


def module_source(directory: str | None = None) -> str:
    directory = directory or rules.builtin_rules_dir()
    # stored with the file's name as its path: the loader joins it to where the rule files are at run time
    entries = [prebuilt.entry(r._replace(path=os.path.basename(r.path))) for r in _parsed(directory)]
    lines = [
        '"""The built-in rules, parsed (generated from rules/*.toml by python -m meshlint.generate.rules_prebuilt;',
        'do not edit). Used by meshlint/engine/prebuilt.py only while FINGERPRINT matches the files. RULES is',
        'literal data: one pair per rule, its dialects and its entry marshalled (prebuilt.stored): a tuple of its',
        'fields in the order of prebuilt.FIELDS (prebuilt.entry; marshal.loads shows one)."""',
        "",
        f"FORMAT = {prebuilt.FORMAT!r}",
        f"FINGERPRINT = {prebuilt.fingerprint(directory, __version__)!r}",
        "RULES = (",
    ]
    lines += [f"    {prebuilt.stored(e)!r}," for e in entries]
    lines += [")", ""]
    return "\n".join(lines)


def record_source(directory: str | None = None) -> str:
    """rules_prebuilt_record.py: what an installed wheel's RECORD says of the files the rules were made from
    (``prebuilt.current_by_record``), imported only where meshlint is installed from a wheel."""
    directory = directory or rules.builtin_rules_dir()
    record, names = prebuilt.record_lines(directory)
    return "\n".join([
        '"""The built-in rule files\' and builders\' lines in the RECORD of a wheel install, and the rule files\'',
        "names (generated from rules/*.toml by python -m meshlint.generate.rules_prebuilt; do not edit): where pip",
        "installed meshlint, the prebuilt rules are current when its RECORD holds every one of these lines and",
        '_rules holds these files (meshlint/engine/prebuilt.py, current_by_record)."""',
        "",
        f"FINGERPRINT = {prebuilt.fingerprint(directory, __version__)!r}",
        "RECORD_LINES = (",
        *(f"    {line!r}," for line in record),
        ")",
        f"RULE_FILES = {names!r}",
        "",
    ])


def extra_source(directory: str | None = None) -> str:
    """rules_prebuilt_extra.py: what a check never reads (``prebuilt.extra``), beside the rules it completes."""
    directory = directory or rules.builtin_rules_dir()
    trees, docs = prebuilt.extra(_parsed(directory))
    lines = [
        '"""The built-in rules\' docs and expression trees (generated from rules/*.toml by',
        "python -m meshlint.generate.rules_prebuilt; do not edit): read only by a run that shows a doc or interprets",
        "an expression, and only while FINGERPRINT and FORMAT are those of rules_prebuilt.py. Literal data: TREES maps",
        'an expression\'s source to its tree as JSON text, DOCS a rule\'s code to its doc."""',
        "",
        f"FORMAT = {prebuilt.FORMAT!r}",
        f"FINGERPRINT = {prebuilt.fingerprint(directory, __version__)!r}",
        "TREES = {",
        *(f"    {source!r}: {tree!r}," for source, tree in trees.items()),
        "}",
        "DOCS = {",
        *(f"    {code!r}: {doc!r}," for code, doc in docs.items()),
        "}",
        "",
    ]
    return "\n".join(lines)


def rule_expressions(rule) -> list:
    """Every expression of a rule: check, when, foreach, lets, help conditions and every template's holes."""
    found = prebuilt.deciding(rule) + [cond for cond, _ in rule.help if cond is not None]
    for template in (rule.message, rule.key, *(t for _, t in rule.help)):
        if template is not None:
            found += [part for part in template.parts if isinstance(part, expr.Expr)]
    return found


def part_of(rule) -> str:
    """The part of meshlint/engine/rules_compiled/ a rule's expressions go to: its dialect's, when it runs on
    one dialect only, else "common" (what every run loads)."""
    return rule.dialects[0] if rule.dialects is not None and len(rule.dialects) == 1 else "common"


def compiled_sources(directory: str | None = None) -> dict:
    """meshlint/engine/rules_compiled/: each expression of the built-in rules as a Python function, in modules by
    dialect (file name -> text), so a run imports only the functions of the dialects it meets."""
    directory = directory or rules.builtin_rules_dir()
    parsed = _parsed(directory)
    parts_of: dict = {}  # source -> the parts of the rules that hold it
    decides: set = set()  # sources some rule evaluates on every config (check, when, foreach, lets); the others
    # (messages, keys, help) only for a finding: compiled compact (compiler._Writer)
    for rule in parsed:
        for e in rule_expressions(rule):
            parts_of.setdefault(e.source, []).append(part_of(rule))
        decides.update(e.source for e in prebuilt.deciding(rule))
    by_part: dict = {}
    for source, parts in parts_of.items():  # one module per source: "common" when rules of several parts share it
        part = parts[0] if all(p == parts[0] for p in parts) else "common"
        by_part.setdefault(part, []).append(expr.parse(source))
    fingerprint = prebuilt.fingerprint(directory, __version__)
    dialects = sorted(p for p in by_part if p != "common")
    out = {"__init__.py": "\n".join([
        '"""The built-in rules\' expressions compiled to Python (generated from rules/*.toml by',
        "python -m meshlint.generate.rules_prebuilt with meshlint/engine/expr/compiler.py; do not edit).",
        "Installed by meshlint/engine/prebuilt.py only while FINGERPRINT matches the files: a run on a dialect",
        'imports ``common`` and that dialect\'s module (each carries the FINGERPRINT too)."""',
        "",
        f"FINGERPRINT = {fingerprint!r}",
        f"DIALECTS = {tuple(dialects)!r}  # the parts besides common, one per dialect",
        "",
    ])}
    for part in ["common", *dialects]:
        fresh = by_part.get(part, [])
        body, table = compiler.module_body([(e.source, e.root, e.size, e.source not in decides) for e in fresh])
        names = {e.source: tuple(sorted(e.free_names())) for e in fresh}  # what Expr.free_names() answers from
        out[f"{part}.py"] = "\n".join([
            f'"""The compiled expressions of the built-in rules {_part_words(part)} (generated by',
            'python -m meshlint.generate.rules_prebuilt; do not edit)."""',
            "",
            "# flake8: noqa",
            compiler.PRELUDE,
            f"FINGERPRINT = {fingerprint!r}",
            *body,
            "COMPILED = {",
            *(f"    {source!r}: ({name}, {size!r}, {names[source]!r})," for source, (name, size) in table.items()),
            "}",
            "",
        ])
    return out


def _part_words(part: str) -> str:
    return "that run on several dialects or all" if part == "common" else f"that run on {part} configs only"


def _written(out: Path) -> dict:
    """The generated files now in ``out`` (a file, or the compiled package's directory)."""
    if out.is_dir():
        return {p.name: p.read_text(encoding="utf-8") for p in sorted(out.glob("*.py"))}
    return {out.name: out.read_text(encoding="utf-8")} if out.is_file() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshlint.generate.rules_prebuilt",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing (exit 1 if it differs)")
    args = parser.parse_args(argv)
    status = 0
    compiled = compiled_sources()
    for out, texts in ((OUT, {OUT.name: module_source()}), (OUT_EXTRA, {OUT_EXTRA.name: extra_source()}),
                       (OUT_RECORD, {OUT_RECORD.name: record_source()}),
                       (OUT_COMPILED, compiled)):
        if args.check:
            if _written(out) != texts:
                print(f"{out}: differs from rules/: run python -m meshlint.generate.rules_prebuilt")
                status = 1
            continue
        if texts is compiled:
            out.mkdir(exist_ok=True)
            for stale in set(_written(out)) - set(texts):  # a dialect no rule runs on any more
                (out / stale).unlink()
        for name, text in texts.items():
            (out / name if texts is compiled else out).write_text(text, encoding="utf-8")
        print(f"wrote {out.relative_to(out.parent.parent)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
