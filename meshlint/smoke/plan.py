"""What the smoke builds and what every rank must observe, from the static resolution. No torch.

The plan is plain JSON so it crosses process boundaries unchanged: the
supervisor and every rank read the very meshes the static check printed.
"""

from __future__ import annotations

from meshlint.check import FileReport
from meshlint.facts import ROLE_OF
from meshlint.mesh import Axis, Mesh

VERSION = 1
# Placement: a group of these roles spread over nodes is an error (tp) or a warning (ep, cp)
PLACEMENT_SEVERITY = {"tp": "error", "etp": "error", "ep": "warning", "cp": "warning"}


class PlanError(Exception):
    """The config gives the smoke nothing to build (the framework refuses it first)."""


def build(report: FileReport, world_size: int) -> dict:
    """The smoke plan for a checked config resolved at ``world_size``."""
    res, spec = report.resolution, report.spec
    if res.framework_error and res.error_stage != "mesh":
        raise PlanError(f"the framework refuses this config before building a mesh: {res.framework_error}")
    if report.dialect == "kempnerforge":
        recipe = _kempnerforge(res)
    elif report.dialect == "torchtitan":
        recipe = _torchtitan(res.degrees, world_size)
    else:
        recipe = _native(res)
    no_mesh = None
    if not recipe:
        if world_size != 1:
            raise PlanError("this config builds no DeviceMesh: there is nothing to smoke")
        # KempnerForge (and a native config of one rank) trains a one-process world without any mesh
        no_mesh = ("a one-process world: the framework builds no DeviceMesh, so none was built; the training step "
                   "ran unsharded in one process")
    roles = _roles(report)
    axes = {name: {"mesh": a.mesh, "size": a.size, "stride": a.stride, "span": a.span, "role": roles.get(name)}
            for name, a in res.axes.items()}
    return {
        "version": VERSION,
        "config": report.path,
        "dialect": report.dialect,
        "world_size": world_size,
        "degrees": dict(res.degrees),
        "recipe": recipe,
        "meshes": {name: ({"dims": list(m.dims), "sizes": list(m.sizes)} if m else None)
                   for name, m in res.meshes.items()},
        "axes": axes,
        "outside": list(res.outside) if res.outside else None,
        "expected_error": res.framework_error,
        "model": _model_facts(spec),
        "no_mesh": no_mesh,
    }


def _kempnerforge(res) -> list:
    mesh = res.meshes.get("device")
    if mesh is None:
        return []
    return [{"op": "init", "mesh": "device", "dims": list(mesh.dims), "sizes": list(mesh.sizes)}]


def _native(res) -> list:
    mesh = res.meshes.get(res.primary) if res.primary else None
    if mesh is None:
        return []
    return [{"op": "init", "mesh": mesh.name, "dims": list(mesh.dims), "sizes": list(mesh.sizes)}]


def _torchtitan(d: dict, world: int) -> list:
    """torchtitan's ParallelDims.build_mesh: one world mesh unflattened three ways, then the loss mesh.

    The sparse sizes are computed even when they are not whole, so the smoke
    shows torch's own error where the static check predicted one.
    """
    batch = d["dp_replicate"] * d["dp_shard"]
    fsdp = d["dp_shard"] * d["cp"]
    efsdp = fsdp * d["tp"] // (d["etp"] * d["ep"])
    return [
        {"op": "world", "size": world},
        {"op": "unflatten", "mesh": "dataloading", "dims": ["pp", "batch", "cp", "tp"],
         "sizes": [d["pp"], batch, d["cp"], d["tp"]]},
        {"op": "flatten", "mesh": "loss", "of": "dataloading", "dims": ["batch", "cp"]},
        {"op": "unflatten", "mesh": "dense", "dims": ["pp", "dp_replicate", "fsdp", "tp"],
         "sizes": [d["pp"], d["dp_replicate"], fsdp, d["tp"]]},
        {"op": "unflatten", "mesh": "sparse", "dims": ["pp", "dp_replicate", "efsdp", "ep", "etp"],
         "sizes": [d["pp"], d["dp_replicate"], efsdp, d["ep"], d["etp"]]},
    ]


def _roles(report: FileReport) -> dict:
    if report.dialect == "native":
        return {d["name"]: d["role"] for d in report.spec.extra.get("dims", [])}
    return {name: ROLE_OF.get(name) for name in report.resolution.axes}


def _model_facts(spec) -> dict:
    """The model facts issue 5's training step shapes its tiny model by (never its sizes)."""
    v = spec.values
    keys = ("n_heads", "n_kv_heads", "n_layers", "num_experts", "is_moe", "tie_embeddings")
    out = {k: v.get(f"model.{k}") for k in keys}
    out["pp_schedule"] = v.get("pp_schedule") or v.get("distributed.pp_schedule")
    return out


# ----------------------------------------------------------------------------- predictions

def mesh_of(plan: dict, name: str) -> Mesh | None:
    m = plan["meshes"].get(name)
    return Mesh(name, tuple(m["dims"]), tuple(m["sizes"])) if m else None


def axis_of(plan: dict, name: str) -> Axis:
    a = plan["axes"][name]
    return Axis(name, a["size"], a["stride"], a["mesh"], a["span"])


def expected_coords(plan: dict, rank: int) -> dict:
    """``{mesh: [coordinate] | None}``: None where the mesh does not cover the rank."""
    out = {}
    for name in plan["meshes"]:
        mesh = mesh_of(plan, name)
        out[name] = list(mesh.coords(rank)) if mesh is not None and rank < mesh.size else None
    return out


def expected_group(plan: dict, axis: str, rank: int) -> list | None:
    a = axis_of(plan, axis)
    return a.group(rank) if rank < a.span else None
