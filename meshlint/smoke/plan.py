"""What the smoke builds and what every rank must observe, from the static resolution. No torch.

The plan is plain JSON so it crosses process boundaries unchanged: the
supervisor and every rank read the very meshes the static check printed.
"""

from __future__ import annotations

from meshlint.engine.check import FileReport
from meshlint.engine.facts import ROLE_OF
from meshlint.frameworks.megatron.ranks import DEFAULT_ORDER
from meshlint.mesh.devmesh import Axis, Mesh

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
        recipe = _torchtitan(res, spec, world_size)
    elif report.dialect == "accelerate":
        recipe = _accelerate(res)
    elif report.dialect == "megatron":  # no DeviceMesh: Megatron-Core's initialize_model_parallel (smoke.megatron)
        recipe = _megatron(res, spec, world_size)
    else:
        recipe = _native(res)
    no_mesh = None
    if not recipe:
        if world_size != 1:
            raise PlanError("this config builds no DeviceMesh: there is nothing to smoke")
        # KempnerForge (and a native config of one rank) trains a one-process world without any mesh
        no_mesh = "a one-process world: the framework builds no DeviceMesh, so none was built"
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
        "framework": dict(getattr(spec, "framework", None) or {}) or None,
    }


def _kempnerforge(res) -> list:
    mesh = res.meshes.get("device")
    if mesh is None:
        return []
    return [{"op": "init", "mesh": "device", "dims": list(mesh.dims), "sizes": list(mesh.sizes)}]


def _megatron(res, spec, world: int) -> list:
    """The plan's one op: what initialize_model_parallel is called with (Megatron-LM's initialize.py:378)."""
    d = res.degrees
    return [{"op": "megatron", "world": world, "tp": d["tp"], "pp": d["pp"], "cp": d["cp"], "ep": d["ep"],
             "etp": d["etp"], "order": spec.extra.get("order") or DEFAULT_ORDER,
             "distributed_optimizer_instances": int(spec.extra["args"].get("num_distributed_optimizer_instances")
                                                    or 1)}]


def _accelerate(res) -> list:
    """``ParallelismConfig.build_device_mesh``: init_device_mesh of the dims above 1, then each flattened mesh
    (dp, dp_shard_cp, dp_cp) as ``device_mesh[parts]._flatten(name)``."""
    from meshlint.frameworks.accelerate.v1_15 import flattened_dims

    mesh = res.meshes.get("device_mesh")
    if mesh is None:
        return []
    recipe = [{"op": "init", "mesh": "device_mesh", "dims": list(mesh.dims), "sizes": list(mesh.sizes)}]
    for name, parts in flattened_dims(mesh.dims):
        recipe.append({"op": "flatten", "mesh": name, "of": "device_mesh", "dims": list(parts), "as": name})
    return recipe


def _native(res) -> list:
    mesh = res.meshes.get(res.primary) if res.primary else None
    if mesh is None:
        return []
    return [{"op": "init", "mesh": mesh.name, "dims": list(mesh.dims), "sizes": list(mesh.sizes)}]


# How torchtitan's ParallelDims.build_mesh makes each of its global meshes from the 1-D world mesh,
# every version alike (parallel_dims.py:284-343@b5bcd76c6; v0.2: 138-196@9810191bb^). A mesh the
# Resolution names that is not here is unflattened from the world mesh; a new version needs an
# entry only for a new *kind* of mesh.
TORCHTITAN_METHODS = {
    "loss": ("flatten", "dataloading", ("batch", "cp"), "loss_mesh"),   # dataloading["batch", "cp"]._flatten
    "spmd_dense_for_fwdbwd": ("stage_view", ("pp",)),  # world unflattened to (pp, dp, cp, tp), sliced [dp, cp, tp]
    "spmd_sparse_for_fwdbwd": ("slice", "sparse"),     # full_sparse_mesh["dp_replicate", "efsdp", "ep"]
}
# The dims of a mesh the static check predicts cannot be built (efsdp not whole): the smoke still
# attempts it, sized by the resolved degrees, so that torch's own error shows.
TORCHTITAN_ATTEMPT = {"0.2.x": {"sparse": ("pp", "dp_replicate", "efsdp", "ep", "etp")},
                      None: {"sparse": ("pp", "dp_replicate", "efsdp", "ep")}}


def _torchtitan(res, spec, world: int) -> list:
    """``ParallelDims.build_mesh`` of the config's torchtitan version: every mesh the Resolution names.

    One 1-D ``world`` mesh; each global mesh made from it by the framework's method
    (``TORCHTITAN_METHODS``); the dims ``_mesh_exist`` rejects on torch's ``fake``
    backend (``fake`` in each unflatten), as the framework does.
    """
    version = (getattr(spec, "framework", None) or {}).get("version") or "0.2.x"
    real = _torchtitan_mesh_exist(version, spec, res.degrees)
    d = res.degrees
    named = dict(res.global_meshes) if getattr(res, "global_meshes", None) else {}
    if not named:  # v0.2.x, or a build that fails part-way: the meshes it gets to, in its order
        attempt = TORCHTITAN_ATTEMPT.get(version, TORCHTITAN_ATTEMPT[None])
        for name, mesh in res.meshes.items():
            if mesh is not None:
                named[name] = (mesh.dims, mesh.sizes)
            elif name in attempt:
                dims = attempt[name]
                named[name] = (dims, tuple(d.get(x) or 1 for x in dims))
            if name == "dataloading":
                named["loss"] = (("loss_mesh",), ())
    recipe: list = [{"op": "world", "size": world}]
    for name, (dims, sizes) in named.items():
        method = TORCHTITAN_METHODS.get(name, ("unflatten",))
        if method[0] == "flatten":
            _, of, over, as_name = method
            recipe.append({"op": "flatten", "mesh": name, "of": of, "dims": list(over), "as": as_name})
        elif method[0] == "slice":
            recipe.append({"op": "slice", "mesh": name, "of": method[1], "dims": list(dims)})
        elif method[0] == "stage_view":
            lead = method[1]
            full_dims = list(lead) + list(dims)
            full_sizes = [d.get(x) or 1 for x in lead] + list(sizes)
            full = f"{name}:full"
            recipe.append({"op": "unflatten", "mesh": full, "dims": full_dims, "sizes": full_sizes,
                           "fake": [x for x, n in zip(full_dims, full_sizes) if not real(x, n)]})
            recipe.append({"op": "slice", "mesh": name, "of": full, "dims": list(dims)})
        else:
            recipe.append({"op": "unflatten", "mesh": name, "dims": list(dims), "sizes": list(sizes),
                           "fake": [x for x, n in zip(dims, sizes) if not real(x, n)]})
    return recipe


def _torchtitan_mesh_exist(version: str, spec, d: dict):
    """``ParallelDims._mesh_exist`` of that version: which dims get a real process group."""
    ep = d.get("ep") or 1
    if version == "0.2.x":  # parallel_dims.py:61-66@9810191bb^: efsdp iff ep > 1, every other dim iff > 1
        return lambda name, size: ep > 1 if name == "efsdp" else size > 1
    from meshlint.frameworks.torchtitan import registry as reg
    from meshlint.frameworks.dialects import module_of

    backend = spec.values.get(reg.P + "spmd_backend")
    semantics = getattr(module_of(spec), "SEMANTICS", None)
    # a backend this version does not know has no layout (as in its resolve), not another version's
    layout = reg.LAYOUTS.get(backend) if semantics is None or backend in semantics.backends else None
    return lambda name, size: reg._exists(layout, name, size, ep)


def _roles(report: FileReport) -> dict:
    if report.dialect == "native":
        return {d["name"]: d["role"] for d in report.spec.extra.get("dims", [])}
    return {name: ROLE_OF.get(name) for name in report.resolution.axes}


def _model_facts(spec) -> dict:
    """The model facts issue 5's training step shapes its tiny model by (never its sizes)."""
    v = spec.values
    keys = ("n_heads", "n_kv_heads", "n_layers", "num_experts", "is_moe", "tie_embeddings")
    out = {k: v.get(f"model.{k}") for k in keys}
    # v0.2.x and KempnerForge name the fact; the registry-era versions keep the field's own path
    out["pp_schedule"] = (v.get("pp_schedule") or v.get("distributed.pp_schedule")
                          or v.get("parallelism.pipeline_parallel_schedule"))
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
