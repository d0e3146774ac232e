"""The whole config against the framework's generated schema: unknown keys in every section,
wrong types and values outside an enum, with what the framework itself does with each.

The dialect modules read the keys meshlint reasons about; this adds every other key the
framework defines (meshlint/data/schema/, generated from the framework's dataclasses by
``python -m meshlint.generate.schema``). Unknown keys replace the dialect's own list (the schema
knows every section), and the near-miss guesses of ML110 are no longer needed: both frameworks
refuse an unknown key anywhere.
"""

from __future__ import annotations

# (dialect, version) -> the generated schema that describes it; TOML dialects only: a registry
# function's keywords are checked by its version module against the config dataclasses' fields.
SCHEMAS = {("kempnerforge", "5666d0d"): ("kempnerforge", "5666d0d"), ("torchtitan", "0.2.x"): ("torchtitan", "0.2.x")}


def apply(spec, data: dict, custom_module: str | None = None) -> None:
    """Merge the schema's verdict on ``data`` into ``spec`` (unknown_keys, problems, near_misses)."""
    fw = getattr(spec, "framework", None) or {}
    target = SCHEMAS.get((spec.dialect, fw.get("version")))
    if target is None:
        return
    from meshlint import schema_data

    try:
        schema = schema_data.load(*target)
    except schema_data.SchemaError:
        return  # a build without the generated data: the dialect's own checks stand
    if custom_module is None and isinstance(data.get("job"), dict):  # torchtitan: [job] custom_config_module
        module = data["job"].get("custom_config_module")
        custom_module = module if isinstance(module, str) and module else None
    found = schema.check(data, origin="file", custom_module=custom_module)
    seen = {p["key"] for p in spec.problems}
    from meshlint.dialects import DIALECTS

    # the keys meshlint reasons about have rules of their own (degree ranges, schedules, ...): a
    # section's __post_init__ refusal of one of them is already reported, with more to say
    modelled = {k.path for k in DIALECTS[spec.dialect].KEYS if k.fact}
    unknown = []
    for p in found:
        if p["kind"] == "unknown-key":
            if not p["refused"]:  # a custom JobConfig (job.custom_config_module) may define it: meshlint cannot see
                continue
            unknown.append({"key": p["key"], "section": p["section"] or "top level", "name": p["name"],
                            "suggestion": p.get("suggestion"), "elsewhere": p.get("elsewhere") or [],
                            "other_versions": p.get("other_versions") or [], "framework": p["framework"]})
        elif p["kind"] == "refused-value":
            if p["key"] not in modelled:
                spec.extra.setdefault("refusals", []).append(
                    {"key": p["key"], "message": p["message"], "framework": p["framework"], "source": p["source"]})
        elif p["level"] != "info" and p["key"] not in seen:
            seen.add(p["key"])
            spec.problems.append({"key": p["key"], "expected": p.get("expected") or "a value the framework accepts",
                                  "actual": _actual(data, p), "value": p.get("value", ""),
                                  "note": p["framework"]})
    spec.unknown_keys = unknown
    spec.near_misses = []


def _actual(data: dict, problem: dict) -> str:
    """TOML's word for the type of the value as written (``string``, ``float``, ...)."""
    from meshlint.dialects.base import type_of
    from meshlint.source import split_key

    node = data
    for part in split_key(problem["key"]):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            node = node[part]
        else:
            return "a value it does not take"
    return type_of(node)
