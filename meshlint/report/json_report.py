"""The versioned JSON report (``--format json``): a public contract, documented in the README.

Version 1. Fields may be added in later releases of version 1; none is removed
or changes meaning without a new version number.
"""

from __future__ import annotations

import json

from meshlint.engine.filereport import FileReport, input_error_finding

VERSION = 1


def file_json(report: FileReport) -> dict:
    if report.cached_json is not None:  # from the results cache: the entry as computed, findings from the report
        out = dict(report.cached_json)
        out["findings"] = ([input_error_finding(report.error).to_json()] if report.error is not None
                           else [f.to_json() for f in report.findings])
        out["suppressed"] = [f.to_json() for f in report.suppressed]
        return out
    out: dict = {
        "path": report.path,
        "status": report.status,
        "dialect": report.dialect,
        "skipped": report.note,
        "world_size": None,
        "world_size_source": None,
        "gpus_per_node": None,
        "gpus_per_node_source": None,
        "nodes": None,
        "degrees": None,
        "declared": None,
        "mesh": None,
        "meshes": {},
        "axes": {},
        "framework": None,
        "valid_worlds": None,
        "model": None,
        "pipeline": None,
        "notes": [],
        "findings": [],
        "suppressed": [],
        "skipped_rules": [],
        "diff": None,
        "memory": None,
    }
    if report.error is not None:
        out["findings"] = [input_error_finding(report.error).to_json()]
        return out
    if report.status != "checked":
        return out
    from meshlint.frameworks.base import DEGREES
    from meshlint.report.workload import model_json, pipeline_json

    topo, res, spec = report.topology, report.resolution, report.spec
    mesh = res.mesh
    out.update(
        world_size=topo.world_size,
        world_size_source=topo.world_source,
        gpus_per_node=topo.gpus_per_node,
        gpus_per_node_source=topo.gpus_per_node_source,
        nodes=topo.nodes,
        degrees={n: res.degrees.get(n) for n in DEGREES},
        declared={n: spec.degrees.get(n) for n in DEGREES},
        mesh=mesh.to_json() if mesh else None,
        meshes={name: (m.to_json() if m else None) for name, m in res.meshes.items()},
        axes={name: axis.size for name, axis in res.axes.items()},
        framework={"builds": res.framework_error is None and res.primary is not None,
                   "error": res.framework_error, "stage": res.error_stage,
                   "world_used": res.world_used, "world_implied": res.world_implied,
                   **framework_version(spec)},
        valid_worlds=_valid_worlds(res.valid_worlds),
        model=model_json(report),
        pipeline=pipeline_json(report),
        notes=list(res.notes),
        findings=[f.to_json() for f in report.findings],
        suppressed=[f.to_json() for f in report.suppressed],
        skipped_rules=[{"rule": s.code, "name": s.name, "needs": s.needs} for s in report.skips],
        memory=_memory_json(report.memory),
    )
    if report.diff is not None:
        out["diff"] = {"base": report.diff.base, **report.diff.body(), "old": file_json(report.diff.old)}
    elif report.diff_note:
        out["diff"] = {"base": report.diff_base, "note": report.diff_note}
    return out


def _memory_json(memory: dict | None) -> dict | None:
    """``files[].memory``: the whole per-GPU peak of the config's layout (added in 1.x; docs/report-v1.schema.json)."""
    if memory is None:
        return None
    keep = ("peak_gib", "peak_stage", "peak_phase", "stages", "terms", "capacity_gib", "capacity_source", "fits", "margin",
            "activation_checkpointing")
    out = {k: memory.get(k) for k in keep}
    out.update({k: memory[k] for k in ("lower_bound", "notes") if k in memory})  # Megatron's estimate only
    return out


def framework_version(spec) -> dict:
    """``name``, ``version`` and ``decided_by``: which framework semantics were applied, and why; for a
    registry config also ``unmodelled``: [{kind, name, where, detail}] (meshlint/frameworks/torchtitan/ttdiff.py)."""
    fw = getattr(spec, "framework", None) or {}
    out = {"name": fw.get("name"), "version": fw.get("version"), "decided_by": fw.get("decided_by")}
    if "unmodelled" in fw:  # registry configs: what the checkout's code has that the applied version lacks
        out["unmodelled"] = fw["unmodelled"]
    return out


def _valid_worlds(valid) -> dict | None:
    if not valid:
        return None
    kind, n = valid
    return {"kind": kind, "n": n if kind != "none" else None, "reason": n if kind == "none" else None}


def summary(reports: list[FileReport], exit_code: int, fail_on: str) -> dict:
    counts = {"error": 0, "warning": 0, "info": 0}
    for r in reports:
        for f in r.findings:
            counts[f.severity] += 1
    return {
        "files": len(reports),
        "checked": sum(r.status == "checked" for r in reports),
        "skipped": sum(r.status == "skipped" for r in reports),
        "unreadable": sum(r.status == "error" for r in reports),
        "findings": counts,
        "suppressed": sum(len(r.suppressed) for r in reports),
        "fail_on": fail_on,
        "exit_code": exit_code,
    }


def render(reports: list[FileReport], exit_code: int, fail_on: str, files: list | None = None) -> str:
    """The whole report; ``files``: each report's :func:`file_json`, when the caller has them already."""
    doc = {"version": VERSION, "tool": {"name": "meshlint", "version": _version()},
           "files": files if files is not None else [file_json(r) for r in reports],
           "summary": summary(reports, exit_code, fail_on)}
    return dumps(doc)


def dumps(doc) -> str:
    """``json.dumps(doc, indent=2)`` that always gives valid JSON.

    Numbers Python cannot print (integers past 4,300 digits) or JSON cannot hold
    (NaN, infinities) become strings or null instead of a ValueError or an
    invalid ``NaN``; the walk that does so runs only when the plain dump fails.
    """
    try:
        return json.dumps(doc, indent=2, allow_nan=False)
    except ValueError:
        return json.dumps(_jsonable(doc), indent=2, allow_nan=False)


def dumps_entry(entry: dict) -> str:
    """:func:`dumps` of one entry of the document's ``files`` array (as nested there: two levels down)."""
    try:
        return json.dumps(entry, indent=2, allow_nan=False)
    except ValueError:
        return json.dumps(_jsonable(entry, 2), indent=2, allow_nan=False)


def _jsonable(value, depth: int = 0):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= 14_000 else f"<integer of {value.bit_length():,} bits>"
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if depth > 100:
        return "<nested too deep>"
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    return str(value)


def _version() -> str:
    from meshlint import __version__

    return __version__
