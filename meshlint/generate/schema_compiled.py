"""Write the conditions and values of each generated schema as Python functions, ahead of time.

    python -m meshlint.generate.schema_compiled           # rewrite meshlint/schema_compiled/*.py
    python -m meshlint.generate.schema_compiled --check   # exit 1 if one differs

The schema check (meshlint/frameworks/schema_data.py) evaluates the frameworks' ``__post_init__`` conditions
by translating each text into a small Python function over the section's values. Doing that in
every run (parse, translate, compile: about 0.1 ms a text) was a fifth of the check's cost on a
first config. Written here as one module per schema, the translation is done once, at
generation, and Python's own bytecode cache loads the functions. Each module is derived from
a committed schema file and from ``schema_data.translated_source`` only, so it is data, not a
second implementation: ``tests/test_schema_generated.py`` regenerates and compares them, and a
text missing from a module is simply translated at run time as before. ``SELF_NAMES`` holds the
``self.`` fields each check's texts read (found with fastre at run time otherwise: ~2 M instructions). Each module also holds the
schema's content itself (``DATA``, a literal): loading it from bytecode costs a first check ~2 M
instructions where parsing the JSON file cost ~5.5 M.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
from pathlib import Path

from meshlint.frameworks import schema_data

OUT_DIR = Path(schema_data.__file__).resolve().parent.parent / "schema_compiled"
_HOLE = re.compile(r"\{([^{}!:]+)(?:!([rsa]))?(?::[^{}]*)?\}")  # schema_data._fill's holes


def texts(schema: dict) -> list:
    """Every text schema_data may hand to ``_compiled`` for this schema, in a stable order."""
    out: dict = {}
    for cls in schema["classes"].values():
        members = {k["enum_check"]["source"] for k in cls.get("keys", {}).values() if "enum_check" in k}
        for step in cls.get("checks", []):
            conditions = list(step.get("when", []))
            if step["kind"] == "assign":
                out[step["value"]] = None
            else:
                conditions.append(step["condition"])
                if step["source"] in members:  # a membership test, run against the registered names
                    conditions.append(schema_data._seed(step, ["x"])[0])
                out.update((hole, None) for hole, _ in _HOLE.findall(step.get("message", "")))
            for text in conditions:
                loop = schema_data._parsed(text) if text.startswith("for ") else None
                if loop is not None:
                    out[schema_data._unparse(loop.iter)] = None
                elif not text.startswith("for "):
                    out[text] = None
    return list(out)


def self_names(schema: dict) -> dict:
    """text -> the ``self.name`` fields it reads (schema_data.self_fields), for each condition and ``when`` text of
    every check, in a stable order."""
    out: dict = {}
    for cls in schema["classes"].values():
        for step in cls.get("checks", []):
            if step["kind"] != "assign":
                for text in [step["condition"], *step.get("when", [])]:
                    if text not in out:
                        out[text] = tuple(schema_data._self_field().findall(text))
    return out


def _literal(value) -> bool:
    """The constant writes as Python source that reads back as itself (no inf, nan, ...)."""
    try:
        back = ast.literal_eval(repr(value))
    except (ValueError, SyntaxError):
        return False
    return type(back) is type(value) and back == value


def module_source(name: str, raw: str) -> str:
    schema = json.loads(raw)
    digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]
    names = ", ".join(f"{fn.__name__} as {alias}" for alias, fn in schema_data.HELPERS.items())
    lines = [
        f'"""{name}: its conditions and values as functions (generated from meshlint/data/schema/{name}.json,',
        f"sha256 {digest}, by python -m meshlint.generate.schema_compiled; do not edit).",
        '"""',
        "",
        f"from meshlint.frameworks.schema_data import {names}  # noqa: F401",
        "",
        "COMPILED = {",
    ]
    for text in texts(schema):
        translated = schema_data.translated_source(text)
        if translated is None:
            lines.append(f"    {text!r}: None,")
            continue
        source, consts = translated
        if not all(_literal(c) for c in consts):
            continue  # left to the run-time translation
        lines.append(f"    {text!r}: lambda V, L, K={consts!r}: {source},")
    lines += ["}", ""]
    names = self_names(schema)
    if names:  # the fields each check's texts read, found here rather than with fastre in every run
        lines += ["SELF_NAMES = {"] + [f"    {text!r}: {found!r}," for text, found in names.items()] + ["}", ""]
    if _literal(schema):  # the schema itself, as Python's bytecode cache loads it: a third of parsing the JSON
        lines += ["# The schema file's content (schema_data reads the JSON file where this is missing).",
                  f"DATA = {schema!r}", ""]
    return "\n".join(lines)


def outputs() -> dict:
    """path -> the source it should hold, for every generated schema."""
    out = {}
    for framework, version in schema_data.available():
        schema = schema_data.load(framework, version)
        raw = Path(schema.path).read_text(encoding="utf-8")
        module = schema_data.compiled_module(framework, version).rpartition(".")[2]
        out[OUT_DIR / f"{module}.py"] = module_source(Path(schema.path).stem, raw)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshlint.generate.schema_compiled",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing (exit 1 if one differs)")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(OUT_DIR.parent.parent)}")
    for path in stale:
        print(f"{path}: differs from its schema: run python -m meshlint.generate.schema_compiled")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
