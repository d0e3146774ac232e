"""What a registry-era torchtitan checkout has that the modelled version meshlint applies to it does not model
(a config field, a model, a ParallelDims check), and which of those a given config touches.

``differences(root, version)`` lists them once per checkout; ``touched(items, spec, source)`` picks the ones
a config depends on (it sets the field, builds the model, has ep > 1), which become ML115 findings; the rest
are stated with the applied version in the report's ``framework`` object and its text summary.
"""

from __future__ import annotations

import os

from meshlint.frameworks.torchtitan import ttcode
from meshlint.frameworks.torchtitan.registry import _lookup  # (present, value) of a dotted path

_DIFFS: dict = {}


def differences(root: str | None, version: str) -> list:
    """Items {kind, name, key, where, detail, modelled_as} for the checkout at ``root`` read as ``version``.

    kind: "key" (a field the checkout's dataclass has and the version does not), "absent-key" (the reverse:
    the checkout refuses it), "model" (a model folder the version's model tables lack), "check" (a
    ParallelDims check one has and the other lacks), "etp" (ParallelDims still has expert tensor
    parallelism), "backend" (no spmd_backend: the legacy mesh layout), "backend-value" (a backend the
    version accepts and the checkout does not)."""
    from meshlint.frameworks import versions

    if not root or version not in versions._SIGNATURES:
        return []
    key = (root, version)
    if key not in _DIFFS:
        pkg = versions.package_dir(root)
        _DIFFS[key] = _differences(pkg, version) if pkg and versions._registry_era(pkg) else []
    return _DIFFS[key]


def _differences(pkg: str, version: str) -> list:
    from meshlint.frameworks import versions

    mod = versions.module("torchtitan", version)
    sem = mod.SEMANTICS
    label = f"torchtitan {version}"
    items: list = []
    modelled = _version_fields(version, mod)
    for section, fields in ttcode.section_fields(pkg).items():
        if not fields:
            continue
        cls = ttcode.SECTION_CLASSES[section]
        for name, where in fields.items():
            if name not in modelled.get(section, ()):
                items.append({"kind": "key", "name": f"{section}.{name}", "key": f"{section}.{name}", "where": where,
                              "modelled_as": None,
                              "detail": f"{cls}.{name} ({where}) is a field of this checkout that {label} does not "
                                        "have: its value is read as written and not checked"})
        for name in sorted(set(modelled.get(section, ())) - set(fields)):
            items.append({"kind": "absent-key", "name": f"{section}.{name}", "key": f"{section}.{name}", "where": None,
                          "modelled_as": None,
                          "detail": f"{label} has {section}.{name}; this checkout's {cls} does not, so torchtitan "
                                    "here refuses it"})
    known = set(sem.models) | {a for a in _aliases() if _aliases()[a] in sem.models}
    from meshlint.frameworks import models as model_tables

    tables = model_tables.builtin_for(version)
    table_names = {k[0] for k in tables if isinstance(k, tuple) and k} if isinstance(tables, dict) else set()
    for folder in ttcode.model_folders(pkg):
        if folder not in known:
            where = os.path.join("torchtitan", "models", folder, "config_registry.py")
            tabled = " (its sizes are in the model tables)" if folder in table_names else ""
            items.append({"kind": "model", "name": folder, "key": None, "where": where, "modelled_as": None,
                          "detail": f"model {folder} ({where}) is not one {label} models{tabled}: its "
                                    "model_registry defaults (attention backend, pipelining) are not known, so "
                                    "the checks that need them are skipped"})
    found = versions._scan(pkg)
    ep = found.get("ep_check")
    if bool(ep) != sem.ep_must_divide:
        where = f"torchtitan/{ep[0]}:{ep[1]}" if ep else None
        items.append({"kind": "check", "name": "ep divides dp_shard*cp*tp", "key": None, "where": where,
                      "modelled_as": None,
                      "detail": (f"ParallelDims checks that ep divides dp_shard*cp*tp ({where}); {label} does not, "
                                 "so meshlint reports such an ep as the late DeviceMesh failure, not as this check's "
                                 "ValueError") if ep else
                                (f"ParallelDims here has no check that ep divides dp_shard*cp*tp, which {label} "
                                 "has: meshlint reports that check's ValueError, the job here fails later, in "
                                 "DeviceMesh._unflatten of the sparse mesh")})
    if found.get("spmd_backend") and "full_dtensor" in sem.backends and not found.get("full_dtensor"):
        items.append({"kind": "backend-value", "name": "spmd_backend = 'full_dtensor'", "key": None, "where": None,
                      "modelled_as": None,
                      "detail": f"{label} accepts spmd_backend = 'full_dtensor'; this checkout's ParallelDims has no "
                                "full_dtensor (removed in 601cf4d23), so torchtitan here does not lay out that mesh"})
    if found.get("etp"):
        rel, line = found["etp"]
        items.append({"kind": "etp", "name": "expert tensor parallelism (etp)", "key": None,
                      "where": f"torchtitan/{rel}:{line}", "modelled_as": None,
                      "detail": f"ParallelDims has etp (torchtitan/{rel}:{line}; removed in c4b409af2): expert "
                                f"tensor parallelism is not modelled for registry configs ({label} has none), so "
                                "the sparse mesh is laid out without its etp axis and ETP's checks do not run"})
    if not found.get("spmd_backend") and "spmd_backend" not in ttcode.section_fields(pkg).get("parallelism", {}):
        items.append({"kind": "backend", "name": "spmd_backend", "key": None, "where": None,
                      "modelled_as": "partial_dtensor",
                      "detail": "ParallelDims has no spmd_backend (added in 641b5f6b8): the mesh is laid out as "
                                "partial_dtensor's (pp, dp_replicate, fsdp, tp), the layout of its legacy path"})
    return items


def _aliases() -> dict:
    from meshlint.frameworks.torchtitan.registry import MODEL_ALIASES

    return MODEL_ALIASES


def _version_fields(version: str, mod) -> dict:
    """section -> field names the version defines for the section's own dataclass (the generated schema's,
    else the version module's keys)."""
    from meshlint.frameworks import schema_check

    out: dict = {}
    schema = schema_check._schema(schema_check.REGISTRY_SCHEMAS.get(version))
    for section, cls in ttcode.SECTION_CLASSES.items():
        names = None
        if schema is not None:
            entry = schema.data["tables"].get(section) or {}
            for qn in entry.get("classes", []):
                if schema.data["classes"][qn]["name"] == cls:
                    names = set(schema.keys(section, qn))
        if names is None:
            names = {k.path.split(".", 1)[1] for k in mod.KEYS if k.path.startswith(section + ".")}
        out[section] = names
    return out


def touched(items: list, spec, source) -> list:
    """The items this config depends on: a field it sets, the model it builds, an ep that does not divide
    dp_shard*cp*tp where the checks differ, an etp other than 1. Each gets ``at``: the key (``|``
    alternatives) its finding points at."""
    data = source.data if isinstance(getattr(source, "data", None), dict) else {}
    has_key = getattr(source, "has_key", None)
    model = spec.values.get("model.name")
    etp = _lookup(data, ETP_KEY)[1]
    etp_set = any(i["kind"] == "etp" for i in items) and etp not in (None, 1)
    out = []
    for item in items:
        if item["kind"] in ("key", "absent-key"):
            hit = bool(has_key(item["key"])) if has_key else _lookup(data, item["key"])[0]
            if not hit or item["kind"] == "absent-key":  # absent keys the config sets are unknown keys (ML108)
                continue
            if item["key"] == ETP_KEY and etp_set:  # said once, by the etp item
                continue
        elif item["kind"] == "model":
            if not isinstance(model, str) or model != item["name"]:
                continue
        elif item["kind"] == "check":
            if not _ep_indivisible(spec.degrees):
                continue
        elif item["kind"] == "etp":
            if not etp_set:  # etp = 1 (the default) lays out the mesh meshlint models
                continue
        elif item["kind"] == "backend-value":
            if spec.values.get("parallelism.spmd_backend") != "full_dtensor":
                continue
        else:
            continue
        at = item["key"] or {"model": "model", "backend-value": "parallelism.spmd_backend|parallelism"}.get(
            item["kind"], ETP_KEY if item["kind"] == "etp" else "parallelism.expert_parallel_degree|parallelism")
        out.append({**item, "at": at})
    return out


# what a field the checkout lacks amounts to there: the feature does not exist (no CUDA graphs to disable)
ABSENT_MEANS = {"training.disable_cuda_graphs": True}


ETP_KEY = "parallelism.expert_tensor_parallel_degree"


def _ep_indivisible(degrees: dict) -> bool:
    """ep > 1 does not divide dp_shard*cp*tp as written: only then does it matter which of the checkout and
    the version checks it (an inferred dp_shard is left to ML701, which reports the failure either way)."""
    ep, dp_shard, cp, tp = (degrees.get(n) for n in ("ep", "dp_shard", "cp", "tp"))
    if not isinstance(ep, int) or isinstance(ep, bool) or ep <= 1:
        return False
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (dp_shard, cp, tp)):
        return False
    return dp_shard >= 1 and (dp_shard * cp * tp) % ep != 0


def absent_set(items: list, source) -> list:
    """The "absent-key" items the config sets: keys the checkout's own dataclass does not define."""
    data = source.data if isinstance(getattr(source, "data", None), dict) else {}
    has_key = getattr(source, "has_key", None)
    return [i for i in items if i["kind"] == "absent-key"
            and (bool(has_key(i["key"])) if has_key else _lookup(data, i["key"])[0])]


def summary(version: str, decided_by: str | None, items: list) -> str:
    """One line: the semantics applied, how decided, and what the checkout has beyond them."""
    text = f"torchtitan {version} semantics applied ({decided_by or 'default'})"
    if items:
        shown = [i["name"] for i in items if i["kind"] != "absent-key"]
        text += (f"; not modelled in this checkout: {', '.join(shown[:8])}"
                 + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")) if shown else ""
    return text


def clear() -> None:
    """Forget what was read (tests rewrite trees in place)."""
    from meshlint.frameworks import versions

    _DIFFS.clear()
    versions._ERA.clear()
    ttcode.clear()
