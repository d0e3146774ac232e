"""Build the plan's meshes with torch, exactly as the framework does. [torch]

KempnerForge and native meshes: one ``init_device_mesh(device, sizes,
mesh_dim_names=dims)``. torchtitan (``ParallelDims.build_mesh``): a 1-D world
mesh named ``world``, unflattened into dataloading / dense / sparse, with the
``fake`` backend on the dims torchtitan never communicates over (size 1, and
efsdp without EP), and ``dataloading["batch", "cp"]._flatten("loss_mesh")``.
"""

from __future__ import annotations

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

FLATTENED_NAME = {"loss": "loss_mesh"}  # torchtitan's name for the flattened mesh


def register_fake_backend() -> bool:
    """torchtitan's fake-backend dims need the ``fake`` c10d backend registered (a private torch module)."""
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
    fake_ok = register_fake_backend()
    ep = plan["degrees"].get("ep") or 1
    for op in plan["recipe"]:
        kind = op["op"]
        if steps:
            steps(f"{kind} {op.get('mesh', 'world')}")
        if kind == "init":
            meshes[op["mesh"]] = init_device_mesh(device_type, tuple(op["sizes"]), mesh_dim_names=tuple(op["dims"]))
        elif kind == "world":
            meshes["world"] = init_device_mesh(device_type, (op["size"],), mesh_dim_names=("world",))
        elif kind == "unflatten":
            override = {}
            if fake_ok:
                override = {d: "fake" for d, s in zip(op["dims"], op["sizes"]) if not _torchtitan_real(d, s, ep)}
            meshes[op["mesh"]] = meshes["world"]._unflatten(0, tuple(op["sizes"]), tuple(op["dims"]),
                                                            backend_override=override)
        elif kind == "flatten":
            source = meshes[op["of"]]
            meshes[op["mesh"]] = source[tuple(op["dims"])]._flatten(FLATTENED_NAME.get(op["mesh"], op["mesh"]))
        else:  # pragma: no cover - plans are made by meshlint.smoke.plan
            raise ValueError(f"unknown mesh op {kind!r}")
        built.append(op.get("mesh", "world"))
    return meshes


def _torchtitan_real(dim: str, size: int, ep: int) -> bool:
    """``ParallelDims._mesh_exist``: which dims get a real process group."""
    if dim == "fsdp":
        return True
    if dim == "efsdp":
        return ep > 1
    return size > 1


def axis_mesh(plan: dict, meshes: dict, axis: str) -> DeviceMesh:
    """The 1-D DeviceMesh the framework asks for by name (``loss`` is the flattened mesh)."""
    if axis in meshes and meshes[axis].ndim == 1 and axis in FLATTENED_NAME:
        return meshes[axis]
    return meshes[plan["axes"][axis]["mesh"]][axis]


def group_backend(group) -> str:
    try:
        return str(dist.get_backend(group))
    except Exception:  # pragma: no cover
        return "unknown"
