"""Loading rule files: TOML -> validated, parsed ``Rule`` objects.

Built-in rules live in the top-level ``rules/`` folder (shipped inside the
wheel as ``meshlint/_rules``). User rule packs (``--rules DIR``) are checked
against the JSON Schema in ``meshlint/schema/rule-v1.schema.json`` with
jsonschema when loaded. The built-in rules skip that step at run time -- the
test suite validates them against the same schema -- so a normal run never
pays jsonschema's import cost. Every rule, built-in or not, has its
expressions parsed and its names checked against the documented facts here,
so a typo fails at load time, naming the file and the field.
"""

from __future__ import annotations

import os

from meshlint.record import Record
from meshlint.engine import expr
from meshlint.errors import RuleFileError
from meshlint.engine.facts import BOUND_NAMES, FACT_DOCS, GROUP_FIELDS

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schema", "rule-v1.schema.json")


class Rule(Record):
    """One loaded rule; immutable (and picklable, for the rule cache)."""

    code: str
    name: str
    severity: str
    summary: str
    check: expr.Expr
    message: expr.Template
    path: str
    origin: str = "builtin"                 # builtin | user
    dialects: tuple | None = None
    params: dict = {}                       # never mutated: build_rule always passes its own
    lets: dict = {}
    foreach: expr.Expr | None = None
    when: expr.Expr | None = None
    key: expr.Template | None = None
    help: list = []                         # [(Expr | None, Template)]
    doc: dict = {}
    frameworks: tuple | None = None         # ("torchtitan@0.2.x", ...): framework versions it is limited to
    fallback: bool = False                  # reported only where no other rule reports an error on the key
    skip_note: bool = False                 # says what was not checked: folded into one summary line in text

    def applies_to(self, dialect: str, framework: str | None = None) -> bool:
        """Whether the rule runs on a config of ``dialect`` (and, given, framework id ``name@version``).

        The engine filters by dialect only; a rule's ``frameworks`` is also folded
        into its ``when`` at load time, so it holds whichever way it is asked.
        """
        if self.dialects is not None and dialect not in self.dialects:
            return False
        return framework is None or self.frameworks is None or framework in self.frameworks


def builtin_rules_dir() -> str:
    """``meshlint/_rules`` in a wheel; the top-level ``rules/`` in a source checkout."""
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the meshlint package
    for candidate in (os.path.join(here, "_rules"), os.path.join(os.path.dirname(here), "rules")):
        if os.path.isdir(candidate):
            return candidate
    raise RuleFileError(os.path.join(here, "_rules"), None, "built-in rules not found (broken installation)")


def _load_dir(directory: str, origin: str, validate: bool) -> list[Rule]:
    # a rule pack may carry a model table (models.toml) next to its rules
    names = os.listdir(directory)
    files = sorted(os.path.join(directory, f) for f in names if f.endswith(".toml") and f != "models.toml")
    if origin == "user" and not files and "models.toml" not in names:  # a pack of models alone is a pack
        raise RuleFileError(str(directory), None, "no rule files (*.toml) in this directory")
    return [load_rule_file(f, origin, validate) for f in files]


def _dialect_names() -> tuple:
    """The dialects a rule may name: the registered frameworks (meshlint/frameworks/registry.py)."""
    from meshlint.frameworks.registry import FRAMEWORKS

    return tuple(f.name for f in FRAMEWORKS)


def load_rule_file(path, origin: str = "user", validate: bool = True) -> Rule:
    from meshlint.errors import InputError
    from meshlint.inputs.source import load_toml_file

    shown = os.fspath(path)
    try:  # a FIFO, a device, a huge or deeply nested file, a 5,000-digit number: refused, with the line
        data = load_toml_file(shown)
    except InputError as exc:
        where = f" (line {exc.line}, column {exc.col})" if exc.line > 1 or exc.col > 1 else ""
        raise RuleFileError(shown, None, exc.message + where) from None
    if validate:
        validate_rule_data(data, shown)
    return build_rule(data, shown, origin)


def validate_rule_data(data: dict, shown: str) -> None:
    """Check ``data`` against the rule JSON Schema; the first error names the field."""
    import json

    import jsonschema  # deferred: ~150 ms to import, paid only for user rule packs

    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = json.load(f)
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    err = errors[0]
    path = ".".join(str(p) for p in err.absolute_path) or None
    if err.validator == "additionalProperties":
        allowed = list(err.schema.get("properties", {}))
        extra = [k for k in err.instance if k not in allowed]
        name = extra[0]
        close = _close_matches(name, allowed, n=1, cutoff=0.6)
        where = f"{path}.{name}" if path else name
        hint = f" (did you mean '{close[0]}'?)" if close else f"; allowed: {', '.join(allowed)}"
        raise RuleFileError(shown, where, f"unknown field{hint}")
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        raise RuleFileError(shown, missing[0] if missing else path, "required field is missing")
    if err.validator == "enum":
        choices = ", ".join(map(repr, err.validator_value))
        raise RuleFileError(shown, path, f"{err.instance!r} is not one of {choices}")
    raise RuleFileError(shown, path, err.message)


def build_rule(data: dict, shown: str, origin: str) -> Rule:
    """Parse the expressions of a (schema-valid) rule and check the names they read."""

    def text(field_name: str, required: bool = True) -> str | None:
        value = data.get(field_name)
        if value is None:
            if required:
                raise RuleFileError(shown, field_name, "required field is missing")
            return None
        if not isinstance(value, str):
            raise RuleFileError(shown, field_name, "must be a string")
        return value

    severity = text("severity")
    if severity not in ("error", "warning", "info"):
        raise RuleFileError(shown, "severity", f"{severity!r} is not one of 'error', 'warning', 'info'")
    dialects = data.get("dialects")
    if dialects is not None:
        known = _dialect_names()
        bad = [d for d in dialects if d not in known]
        if bad:
            raise RuleFileError(shown, "dialects", f"unknown dialect {bad[0]!r}; known: {', '.join(known)}")
        dialects = tuple(dialects)
    frameworks = _frameworks(shown, data.get("frameworks"))
    if frameworks is not None:
        names = tuple(dict.fromkeys(f.split("@", 1)[0] for f in frameworks))
        if dialects is not None and set(names) - set(dialects):
            raise RuleFileError(shown, "frameworks", f"{sorted(set(names) - set(dialects))[0]} is not one of the "
                                                     f"rule's dialects ({', '.join(dialects)})")
        dialects = dialects or names

    lets = {}
    for name, source in (data.get("let") or {}).items():
        lets[name] = _parse(shown, f"let.{name}", source)
    try:
        expr.check_lets(lets)  # cycles and chains past the limit fail every evaluation: refuse them now
    except expr.ExprError as exc:
        raise RuleFileError(shown, "let", str(exc)) from None
    foreach = _parse(shown, "foreach", data["foreach"]) if "foreach" in data else None
    allowed = set(FACT_DOCS) | set(lets) | {"params"} | ({"item"} if foreach else set())

    rule = Rule(
        code=text("code"),
        name=text("name"),
        severity=severity,
        summary=text("summary"),
        check=_parse(shown, "check", text("check")),
        message=_template(shown, "message", text("message")),
        path=shown,
        origin=origin,
        dialects=dialects,
        params=data.get("params") or {},
        lets=lets,
        foreach=foreach,
        when=_when(shown, data.get("when"), frameworks),
        key=_template(shown, "key", data["key"]) if "key" in data else None,
        help=_help(shown, data.get("help")),
        doc=data.get("doc") or {},
        frameworks=frameworks,
        fallback=data.get("fallback") is True,
        skip_note=data.get("skip_note") is True,
    )
    checked = [("check", rule.check), ("message", rule.message)]
    checked += [(f"let.{k}", v) for k, v in lets.items()]
    checked += [(n, v) for n, v in (("foreach", rule.foreach), ("when", rule.when), ("key", rule.key)) if v]
    for i, (cond, tmpl) in enumerate(rule.help):
        checked.append((f"help[{i}]", tmpl))
        if cond:
            checked.append((f"help[{i}].when", cond))
    for field_name, parsed in checked:
        names = parsed.free_names() - allowed
        if field_name == "foreach":
            names.discard("item")
            names -= BOUND_NAMES - {"item"}
        if names:
            name = sorted(names)[0]
            close = _close_matches(name, sorted(allowed), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            extra = " ('item' exists only in rules with 'foreach')" if name == "item" else ""
            raise RuleFileError(shown, field_name, f"unknown name '{name}'{hint}{extra}")
        for root, attr in sorted(expr.field_reads(parsed)):
            fields = GROUP_FIELDS.get(root)
            if fields is not None and root not in lets and attr not in fields:
                close = _close_matches(attr, fields, n=1, cutoff=0.6)
                hint = f" (did you mean '{root}.{close[0]}'?)" if close else f"; fields: {', '.join(fields)}"
                raise RuleFileError(shown, field_name, f"unknown fact '{root}.{attr}'{hint}")
    return rule


def _frameworks(shown: str, raw) -> tuple | None:
    """``["torchtitan@0.2.x", "torchtitan@b5bcd76c6"]`` -> canonical ``name@version`` ids (checked)."""
    if raw is None:
        return None
    from meshlint.frameworks import versions

    if not isinstance(raw, list) or not raw:
        raise RuleFileError(shown, "frameworks", "must be a non-empty list of \"framework@version\" strings")
    out = []
    for item in raw:
        name, _, version = item.partition("@") if isinstance(item, str) else ("", "", "")
        if name not in _dialect_names() or not version:
            raise RuleFileError(shown, "frameworks", f"{item!r} is not framework@version (framework one of "
                                                     f"{', '.join(_dialect_names())})")
        canon = versions.canonical(name, version, strict=False)
        if canon is None:
            raise RuleFileError(shown, "frameworks", f"{name} {version!r} is not a version meshlint models "
                                                     f"({', '.join(versions.ids(name)) or 'none'})")
        out.append(f"{name}@{canon}")
    return tuple(dict.fromkeys(out))


def _when(shown: str, source, frameworks: tuple | None):
    """The rule's ``when``, with its ``frameworks`` limit in front (``framework.id in [...] and (...)``)."""
    when = _parse(shown, "when", source) if source is not None else None
    if frameworks is None:
        return when
    limit = "framework.id in [" + ", ".join(repr(f) for f in frameworks) + "]"
    return expr.parse(limit if when is None else f"{limit} and ({when.source})")


def _parse(shown: str, field_name: str, source, what: str = "expression"):
    """An expression (or, with what="template", a template), or an error naming file and field."""
    if not isinstance(source, str):
        raise RuleFileError(shown, field_name, f"must be a string holding a{'n' if what[0] == 'e' else ''} {what}")
    try:
        return expr.parse(source) if what == "expression" else expr.parse_template(source)
    except expr.ExprError as exc:
        raise RuleFileError(shown, field_name, f"invalid {what}: {exc}") from None


def _template(shown: str, field_name: str, source) -> expr.Template:
    return _parse(shown, field_name, source, "template")


def _help(shown: str, raw) -> list:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [(None, _template(shown, "help", raw))]
    if not isinstance(raw, list):
        raise RuleFileError(shown, "help", "must be a string or a list of {when, text} tables")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or "text" not in item:
            raise RuleFileError(shown, f"help[{i}]", "must be a table with 'text' (and optionally 'when')")
        cond = _parse(shown, f"help[{i}].when", item["when"]) if "when" in item else None
        out.append((cond, _template(shown, f"help[{i}].text", item["text"])))
    return out


def _close_matches(word, choices, n=1, cutoff=0.6):
    import difflib  # only needed when something is misspelt

    return difflib.get_close_matches(word, choices, n=n, cutoff=cutoff)
