"""Write the built-in rules, parsed, into meshlint/engine/rules_prebuilt.py (see meshlint/engine/prebuilt.py).

    python -m meshlint.generate.rules_prebuilt           # rewrite meshlint/engine/rules_prebuilt.py
    python -m meshlint.generate.rules_prebuilt --check   # exit 1 if it differs

The module is derived from rules/*.toml by the ordinary loader (``rules.load_rule_file``) and the
rule cache's encoding only, so it is data, not a second implementation of either;
tests/test_rules_prebuilt.py regenerates and compares it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from meshlint import __version__
from meshlint.engine import prebuilt, rule_cache, rules

OUT = Path(prebuilt.__file__).resolve().parent / "rules_prebuilt.py"


def module_source(directory: str | None = None) -> str:
    directory = directory or rules.builtin_rules_dir()
    parsed = [rules.load_rule_file(os.path.join(directory, name), "builtin", validate=False)
              for name in prebuilt.rule_files(directory)]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshlint.generate.rules_prebuilt",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing (exit 1 if it differs)")
    args = parser.parse_args(argv)
    text = module_source()
    if args.check:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT}: differs from rules/: run python -m meshlint.generate.rules_prebuilt")
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(OUT.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
