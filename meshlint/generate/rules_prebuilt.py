"""Write the built-in rules, parsed, into meshlint/engine/rules_prebuilt.py, and their expressions compiled
to Python into meshlint/engine/rules_compiled.py (see meshlint/engine/prebuilt.py).

    python -m meshlint.generate.rules_prebuilt           # rewrite both modules
    python -m meshlint.generate.rules_prebuilt --check   # exit 1 if either differs

The parsed rules are derived from rules/*.toml by the ordinary loader (``rules.load_rule_file``) and the
rule cache's encoding only, so they are data, not a second implementation of either; the compiled
expressions are written by meshlint/engine/expr/compiler.py from the same parsed rules.
tests/test_rules_prebuilt.py regenerates and compares both.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from meshlint import __version__
from meshlint.engine import expr, prebuilt, rule_cache, rules
from meshlint.engine.expr import compiler

OUT = Path(prebuilt.__file__).resolve().parent / "rules_prebuilt.py"
OUT_COMPILED = OUT.parent / "rules_compiled.py"


def _parsed(directory: str) -> list:
    return [rules.load_rule_file(os.path.join(directory, name), "builtin", validate=False)
            for name in prebuilt.rule_files(directory)]


def module_source(directory: str | None = None) -> str:
    directory = directory or rules.builtin_rules_dir()
    parsed = _parsed(directory)
    kind, encoded = rule_cache._encode_value([r._replace(path=os.path.basename(r.path)) for r in parsed])
    assert kind == "rules"
    lines = [
        '"""The built-in rules, parsed (generated from rules/*.toml by python -m meshlint.generate.rules_prebuilt;',
        'do not edit). Used by meshlint/engine/prebuilt.py only while FINGERPRINT matches the files."""',
        "",
        f"FORMAT = {rule_cache.FORMAT!r}",
        f"FINGERPRINT = {prebuilt.fingerprint(directory, __version__)!r}",
        "RULES = [",
    ]
    lines += [f"    {rule!r}," for rule in encoded]
    lines += ["]", ""]
    return "\n".join(lines)


def rule_expressions(rule) -> list:
    """Every expression of a rule: check, when, foreach, lets, help conditions and every template's holes."""
    found = [rule.check, rule.when, rule.foreach, *rule.lets.values(), *(cond for cond, _ in rule.help)]
    for template in (rule.message, rule.key, *(t for _, t in rule.help)):
        if template is not None:
            found += [part for part in template.parts if isinstance(part, expr.Expr)]
    return [e for e in found if e is not None]


def compiled_source(directory: str | None = None) -> str:
    """meshlint/engine/rules_compiled.py: each expression of the built-in rules as a Python function."""
    directory = directory or rules.builtin_rules_dir()
    fresh = [expr.parse(e.source) for rule in _parsed(directory) for e in rule_expressions(rule)]
    body, table = compiler.module_body([(e.source, e.root, e.size) for e in fresh])
    lines = [
        '"""The built-in rules\' expressions compiled to Python (generated from rules/*.toml by',
        "python -m meshlint.generate.rules_prebuilt with meshlint/engine/expr/compiler.py; do not edit).",
        'Installed by meshlint/engine/prebuilt.py only while FINGERPRINT matches the files."""',
        "",
        "# flake8: noqa",
        compiler.PRELUDE,
        f"FINGERPRINT = {prebuilt.fingerprint(directory, __version__)!r}",
        *body,
        "COMPILED = {",
        *(f"    {source!r}: ({name}, {size!r})," for source, (name, size) in table.items()),
        "}",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshlint.generate.rules_prebuilt",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing (exit 1 if it differs)")
    args = parser.parse_args(argv)
    status = 0
    for out, text in ((OUT, module_source()), (OUT_COMPILED, compiled_source())):
        if args.check:
            if not out.is_file() or out.read_text(encoding="utf-8") != text:
                print(f"{out}: differs from rules/: run python -m meshlint.generate.rules_prebuilt")
                status = 1
            continue
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out.relative_to(out.parent.parent)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
