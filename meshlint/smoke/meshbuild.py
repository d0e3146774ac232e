"""Build the plan's meshes with torch, exactly as the framework does. [torch]

The plan's recipe (``meshlint.smoke.plan``) says how, mesh by mesh, so this
module knows no framework: ``init`` (KempnerForge, native: one
``init_device_mesh``), ``world`` (torchtitan's 1-D world mesh), ``unflatten``
(of the world mesh, with torch's ``fake`` backend on the dims listed in
``fake``: those the framework's ``_mesh_exist`` rejects), ``flatten`` (a slice
flattened, ``as`` the framework names it: ``loss_mesh``) and ``slice`` (a
view of some dims of a mesh already built, like torchtitan's per-stage spmd meshes).
"""

from __future__ import annotations

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh


def register_fake_backend() -> bool:
    """The ``fake`` dims need the ``fake`` c10d backend registered (a private torch module)."""
    try:
        import torch.testing._internal.distributed.fake_pg  # noqa: F401  registers "fake"
    except Exception:  # pragma: no cover - a torch build without it: the real backend is used instead
        return False
    return True


def build(plan: dict, device_type: str, steps=None, built: list | None = None) -> dict[str, DeviceMesh]:
    """``{mesh name: DeviceMesh}`` for the plan's recipe.

    ``steps(what)`` is told before each step (they are collective); ``built``
    collects the names of the meshes made so far, for a report after a failure.
    """
    meshes: dict[str, DeviceMesh] = {}
    built = [] if built is None else built
    fake_ok = any(op.get("fake") for op in plan["recipe"]) and register_fake_backend()
    for op in plan["recipe"]:
        kind = op["op"]
        if steps:
            steps(f"{kind} {op.get('mesh', 'world')}")
        if kind == "init":
            meshes[op["mesh"]] = init_device_mesh(device_type, tuple(op["sizes"]), mesh_dim_names=tuple(op["dims"]))
        elif kind == "world":
            meshes["world"] = init_device_mesh(device_type, (op["size"],), mesh_dim_names=("world",))
        elif kind == "unflatten":
            override = {d: "fake" for d in op.get("fake") or ()} if fake_ok else {}
            meshes[op["mesh"]] = meshes["world"]._unflatten(0, tuple(op["sizes"]), tuple(op["dims"]),
                                                            backend_override=override)
        elif kind == "flatten":
            meshes[op["mesh"]] = meshes[op["of"]][tuple(op["dims"])]._flatten(op.get("as") or op["mesh"])
        elif kind == "slice":
            meshes[op["mesh"]] = meshes[op["of"]][tuple(op["dims"])]
        else:  # pragma: no cover - plans are made by meshlint.smoke.plan
            raise ValueError(f"unknown mesh op {kind!r}")
        built.append(op.get("mesh", "world"))
    return meshes


def axis_mesh(plan: dict, meshes: dict, axis: str) -> DeviceMesh:
    """The 1-D DeviceMesh the framework asks for by name (a flattened one, like ``loss``, is its own mesh)."""
    if any(op["op"] == "flatten" and op["mesh"] == axis for op in plan["recipe"]):
        return meshes[axis]
    return meshes[plan["axes"][axis]["mesh"]][axis]


def group_backend(group) -> str:
    try:
        return str(dist.get_backend(group))
    except Exception:  # pragma: no cover
        return "unknown"
