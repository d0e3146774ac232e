"""The whole config against the framework's generated schema: unknown keys in every section,
wrong types and values outside an enum, with what the framework itself does with each.

The dialect modules read the keys meshlint reasons about; this adds every other key the
framework defines (meshlint/data/schema/, generated from the framework's dataclasses by
``python -m meshlint.generate.schema``). Unknown keys replace the dialect's own list (the schema
knows every section), and the near-miss guesses of ML110 are no longer needed: both frameworks
refuse an unknown key anywhere.
"""

from __future__ import annotations


from meshlint.frameworks import config_values

# (dialect, version) -> the generated schema that describes it. TOML dialects go through apply();
# registry versions through apply_registry() (called by the version module's read()).
SCHEMAS = {("kempnerforge", "5666d0d"): ("kempnerforge", "5666d0d"), ("torchtitan", "0.2.x"): ("torchtitan", "0.2.x"),
           ("torchtitan", "0.1.0"): ("torchtitan", "0.1.0")}
REGISTRY_SCHEMAS = {"0.3.0": ("torchtitan", "0.3.0"), "main@b5bcd76c6": ("torchtitan", "main@b5bcd76c6")}


def _schema(target: tuple | None):
    """The generated schema ``target`` names, or None (no schema for that version, or a build without the
    generated data: the dialect's own checks stand)."""
    if target is None:
        return None
    from meshlint.frameworks import schema_data

    try:
        return schema_data.load(*target)
    except schema_data.SchemaError:
        return None


def apply(spec, data: dict, custom_module: str | None = None) -> None:
    """Merge the schema's verdict on ``data`` into ``spec`` (unknown_keys, problems, near_misses)."""
    fw = getattr(spec, "framework", None) or {}
    schema = _schema(SCHEMAS.get((spec.dialect, fw.get("version"))))
    if schema is None:
        return
    config_values.build(spec, data, schema)  # the `config` fact
    extension = ("experimental", "custom_args_module") if schema.loader["unknown_keys"].get("refused") is False \
        else ("job", "custom_config_module")  # torchtitan 0.1.0's, 0.2.x's
    if custom_module is None and isinstance(data.get(extension[0]), dict):
        module = data[extension[0]].get(extension[1])
        custom_module = module if isinstance(module, str) and module else None
    seen = {p["key"]: p for p in spec.problems}
    # every check is evaluated, those of the keys other rules model too (degree ranges, schedules): their
    # refusals go to ML112 as well, a fallback rule that yields to any other rule's error on the same key
    # (so a check no rule models, like KempnerForge's dim % n_heads, is never lost)
    found = schema.check(data, origin="file", custom_module=custom_module)
    unknown, kept, ignored = [], [], []
    for p in found:
        if p["kind"] == "unknown-key":
            if p.get("ignored"):  # torchtitan 0.1.0 drops it without a word: ML116, a warning
                ignored.append({"key": p["key"], "section": p["section"] or "top level", "name": p["name"],
                                "suggestion": p.get("suggestion"), "elsewhere": p.get("elsewhere") or [],
                                "other_versions": p.get("other_versions") or [], "framework": p["framework"]})
                continue
            if not p["refused"]:  # a custom JobConfig (job.custom_config_module) may define it: meshlint cannot see
                continue
            unknown.append({"key": p["key"], "section": p["section"] or "top level", "name": p["name"],
                            "suggestion": p.get("suggestion"), "elsewhere": p.get("elsewhere") or [],
                            "other_versions": p.get("other_versions") or [], "framework": p["framework"]})
        elif p["kind"] == "refused-value":
            spec.extra.setdefault("refusals", []).append(_refusal(p))
        elif p["level"] == "warning" and not p["refused"] and p["key"] not in seen:
            kept.append(_kept(p))  # converted or kept as written, and the run goes on: ML114, not an error
        elif p["level"] != "info" and p["key"] not in seen:
            seen[p["key"]] = p
            spec.problems.append({"key": p["key"], "expected": p.get("expected") or "a value the framework accepts",
                                  "actual": _actual(data, p), "value": p.get("value", ""),
                                  "note": p["framework"]})
        elif p["refused"] and isinstance(seen.get(p["key"]), dict) and "note" in seen[p["key"]]:
            seen[p["key"]]["note"] = p["framework"]  # the dialect's finding, in the framework's own words
    spec.unknown_keys = unknown
    spec.near_misses = []
    written_for = _written_for(spec.dialect, unknown)
    if written_for:
        spec.extra["written_for"] = written_for
    if kept:
        spec.extra["kept_values"] = kept
    if ignored:
        spec.extra["ignored_keys"] = ignored
    _withhold_mistyped(spec, found)


def _written_for(dialect: str, unknown: list) -> dict | None:
    """The other TOML-era version of which every key unknown here is a key (a v0.1.0 config read as 0.2.x):
    {version, keys}, or None. The later version wins a tie: its keys are the ones written today."""
    if not unknown:  # most configs: nothing to weigh, no table to import
        return None
    from meshlint.frameworks.registry import TOML_ERA

    era = TOML_ERA.get(dialect, ())
    if not era:
        return None
    common = set(era)
    for item in unknown:
        common &= set(item.get("other_versions") or ())
    if not common:
        return None
    version = max(common, key=era.index)
    return {"version": version, "keys": [item["key"] for item in unknown]}


def _kept(p: dict) -> dict:
    """An item of the ``kept_values`` fact (ML114)."""
    return {"key": p["key"], "message": p["message"], "framework": p["framework"], "expected": p.get("expected", ""),
            "value": p.get("value", ""), "source": p["source"]}


def _refusal(p: dict) -> dict:
    """An item of the ``refusals`` fact: ``keys`` holds every field the failing check reads (``|``-joined, the
    key first), so ML112 yields to another rule's error on any of them."""
    return {"key": p["key"], "keys": "|".join(p.get("reads") or [p["key"]]), "message": p["message"],
            "framework": p["framework"], "source": p["source"]}


def _withhold_mistyped(spec, found: list) -> None:
    """Values of the wrong type are null in the ``config`` fact (the schema's findings report them; a rule
    comparing them would fail to evaluate). A string outside its Literal stays: rules name such values."""
    keys = [p["key"] for p in found if p["kind"] == "wrong-type"]
    if keys:
        config_values.withhold(spec, keys)


def apply_registry(spec, source, version: str, keys: list, aliases: dict | None = None) -> bool:
    """The schema's verdict on a registry config (a PySource, launch overrides applied): False when there
    is no generated schema for ``version`` (the caller's own check of its strict sections stands).

    What torchtitan refuses, and so what becomes an error:
    * a keyword argument the config class does not define: ``TypeError: X.__init__() got an unexpected
      keyword argument`` when the function builds it (``dataclasses.replace`` too); an attribute assigned that
      it does not define: ``AttributeError`` (every config class is ``slots=True``,
      torchtitan/config/configurable.py:168); each at the line that writes it, with a did-you-mean;
    * a ``__post_init__`` check that fails, or raises on a value of the wrong type (ML112 / ML101);
    * hf_assets_path that is not a string (the config manager uses it at load).
    What it keeps: a value of the wrong type, or outside a Literal, anywhere else. Python does not check
    dataclass fields, and tyro.cli (which receives the config as its default) only warns; the value fails or
    is misread where the code uses it. Those go to ``spec.extra["kept_values"]``, not to errors.
    Each table is checked against the class the function built (``source.types``); a class the schema does
    not know leaves its table unchecked, and a value that could not be read is never guessed (its name is
    still checked).
    """
    schema = _schema(REGISTRY_SCHEMAS.get(version))
    if schema is None:
        return False
    data = source.data if isinstance(getattr(source, "data", None), dict) else {}
    types = getattr(source, "types", None)
    types = types if isinstance(types, dict) else {}
    config_values.build(spec, data, schema, types=types, unknown=getattr(source, "unknown", None))  # the `config` fact
    unknown_names: dict = {}
    for path in getattr(source, "unknown", None) or {}:
        parent, _, leaf = path.rpartition(".") if "." in path else ("", "", path)
        if leaf.isidentifier():
            unknown_names.setdefault(parent, set()).add(leaf)
    found = schema.check(data, origin="file", types=types, unknown_names=unknown_names)  # every check: see apply()
    seen = {p["key"]: p for p in spec.problems}
    unknown, kept = [], []
    for p in found:
        if p["kind"] == "unknown-key":
            framework = _registry_refusal(source, p)
            suggestion = p.get("suggestion") or (aliases or {}).get(p["name"])
            unknown.append({"key": p["key"], "section": p["section"] or "top level", "name": p["name"],
                            "suggestion": suggestion, "elsewhere": p.get("elsewhere") or [],
                            "other_versions": p.get("other_versions") or [], "framework": framework})
            if p.get("class_name"):  # which class refused it: the checkout's own may define it (units.py)
                spec.extra.setdefault("unknown_classes", {})[p["key"]] = p["class_name"]
        elif p["kind"] == "refused-value":
            spec.extra.setdefault("refusals", []).append(_refusal(p))
        elif p["refused"]:
            if p["key"] not in seen:
                seen[p["key"]] = p
                spec.problems.append({"key": p["key"], "expected": p.get("expected") or "a value the framework "
                                      "accepts", "actual": _actual(data, p), "value": p.get("value", ""),
                                      "note": p["framework"]})
        elif p["level"] != "info" and p["key"] not in seen:
            kept.append(_kept(p))
    spec.unknown_keys = unknown
    spec.near_misses = []
    if kept:
        spec.extra["kept_values"] = kept
    _withhold_mistyped(spec, found)
    return True


def _registry_refusal(source, problem: dict) -> str:
    """What Python says for this unknown name, from how the line that sets it writes it."""
    name = problem["name"]
    cls = problem.get("class_name") or "the config class"
    how = _how_set(source, problem["key"], name)
    if how == "keyword":
        return (f"torchtitan refuses the config when the function runs: TypeError: {cls}.__init__() got an "
                f"unexpected keyword argument {name!r}")
    if how == "attribute":
        return (f"torchtitan refuses the config when the function runs: AttributeError: "
                f"{cls.rsplit('.', 1)[-1]!r} object has no attribute {name!r} (config classes are slots=True)")
    return problem["framework"]


def _how_set(source, key: str, name: str) -> str | None:
    """"keyword" (``name=`` in a call), "attribute" (``x.name =``), or None, read at the line that sets it."""
    positions = getattr(source, "positions", None)
    text = getattr(source, "text", None)
    pos = positions.get(key) if isinstance(positions, dict) else None
    if not pos or not isinstance(text, str):
        return None
    lines = text.splitlines()
    line, col = pos
    if not 1 <= line <= len(lines):
        return None
    rest = lines[line - 1][max(col - 1, 0):]
    import re  # a rare path: not at import (re costs a first run ~25 M instructions)

    if re.match(rf"{re.escape(name)}\s*=(?!=)", rest):
        before = lines[line - 1][:max(col - 1, 0)]
        return "attribute" if before.rstrip().endswith(".") else "keyword"
    if re.match(rf"[\w.\[\]]*\.{re.escape(name)}\s*=(?!=)", rest):
        return "attribute"
    return None


def _actual(data: dict, problem: dict) -> str:
    """TOML's word for the type of the value as written (``string``, ``float``, ...)."""
    from meshlint.frameworks.base import type_of
    from meshlint.keys import split_key

    node = data
    for part in split_key(problem["key"]):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            node = node[part]
        else:
            return "a value it does not take"
    return type_of(node)


# ----------------------------------------------------------------------------- launch overrides (tyro)

def override_field(version: str | None, section: str, field: str, written_class: str | None):
    """What tyro makes of ``--section.field`` on a registry config of ``version``, from the generated schema.

    tyro builds its options from the classes of the config it receives as default (checked with tyro
    1.0.17: a section built from a subclass offers the subclass's fields, an unknown one exits 2), so
    the class is the one the function built (``written_class``, PySource.types) or the enclosing class's
    default. Returns None when meshlint cannot tell (no schema, a class it does not know); else
    ("unknown", the fields there are, the class's name), ("suppressed", where the field is declared
    ``tyro.conf.Suppress``, the class's name) or ("field", the tyro kind for launch._typed:
    "int", "float", "bool", "str", "lit:a,b", with "?" when None is allowed; None for other types).
    """
    schema = _schema(REGISTRY_SCHEMAS.get(version or ""))
    if schema is None:
        return None
    tables = schema.data["tables"]
    entry = tables.get(section)
    if entry is None or "same_as" in entry or entry.get("dispatch"):
        return None
    if written_class is not None:
        cls = schema._resolve(section, written_class)
    else:
        root = schema.keys("", tables[""].get("default_class")).get(section) or {}
        cls = root.get("default_factory")
    if cls is None or cls not in schema.data["classes"] or cls not in entry["classes"]:
        return None
    keys = schema.keys(section, cls)
    key = keys.get(field)
    if key is None:
        return ("unknown", sorted(keys), schema.data["classes"][cls]["name"])
    if key.get("cli") is False:  # Annotated[..., tyro.conf.Suppress]: no option at all
        return ("suppressed", key["source"], schema.data["classes"][cls]["name"])
    if "table" in key:
        return None
    return ("field", _tyro_kind(key["type"]), schema.data["classes"][cls]["name"])


def _tyro_kind(typ: dict) -> str | None:
    kind = typ["kind"]
    if kind == "optional":
        inner = _tyro_kind(typ["of"])
        return inner + "?" if inner in ("int", "float", "str") else None
    if kind in ("int", "float", "bool", "str"):
        return kind
    if kind == "literal" and typ["values"] and all(isinstance(v, str) and "," not in v for v in typ["values"]):
        return "lit:" + ",".join(typ["values"])
    return None
