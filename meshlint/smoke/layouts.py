"""Which mesh each parallelism of the training step uses, per framework, by dim name. [torch]

KempnerForge (``distributed/parallel.py``, ``tensor_parallel.py``,
``expert_parallel.py``, ``utils.get_dp_info``): TP on "tp" for attention and
dense MLPs only (embedding and head replicated, experts and router
replicated over tp); EP on its own "ep" dim, experts split in contiguous
blocks; FSDP2 on ("dp_replicate", "dp_shard") for everything, experts
included, with attention and MoE as separate units in EP blocks; data split
over ("dp_replicate", "dp_shard") only, so ranks along ep see the same
batch. KempnerForge has every ep rank dispatch all its tokens; here the ep
peers (who hold the same tokens) dispatch a share each and gather the
outputs, the same forward, so that each expert's gradient counts every token
once and can be compared with the unsharded model.

torchtitan (``parallelize_*`` with ``ParallelDims.get_mesh``), every version: TP
on "tp", PP on "pp", CP on "cp", EP on sparse "ep" with experts sharded over
("ep", "etp") when etp = tp (v0.2.x; later versions have no etp), FSDP over
the data-parallel ranks of the dense mesh (dp_replicate replicating, fsdp =
dp_shard·cp sharding; under 0.3.0/main's spmd_types and full_dtensor, whose
dense mesh keeps dp_shard and cp apart, the same groups: ``resolve_fsdp_mesh``
shards over (dp_shard, cp) and replicates over dp_replicate) for dense weights
and ("dp_replicate", "efsdp") for experts, data by the "batch" dim, the loss
averaged over the "loss" mesh. A dim of size 1 gets no FSDP, as in the framework.
"""

from __future__ import annotations

from meshlint.smoke.parallelize import Layout


def _maybe(mesh, dim, size):
    return mesh[dim] if size > 1 else None


def torchtitan(plan: dict, meshes: dict) -> Layout:
    d = plan["degrees"]
    dl, sparse, loss = meshes["dataloading"], meshes["sparse"], meshes["loss"]
    ep, tp = d["ep"], d["tp"]
    etp = d.get("etp") or 1  # None from 0.3.0 on: no expert tensor parallelism
    expert_dp = None
    if ep > 1:
        expert_dp = sparse["dp_replicate", "efsdp"] if d["dp_replicate"] > 1 else sparse["efsdp"]
    return Layout(
        tp=_maybe(dl, "tp", tp), pp=_maybe(dl, "pp", d["pp"]), cp=_maybe(dl, "cp", d["cp"]),
        ep=sparse["ep"] if ep > 1 else None, dp=_torchtitan_fsdp(d, meshes), expert_dp=expert_dp,
        token_split=dl["tp"].get_group() if ep > 1 and etp == 1 and tp > 1 else None,
        etp_group=sparse["etp"].get_group() if ep > 1 and etp > 1 else None,
        dp_degree=d["dp_replicate"] * d["dp_shard"] * d["cp"],
        data_index=dl["batch"].get_local_rank(), data_shards=dl["batch"].size(),
        cp_index=dl["cp"].get_local_rank(), cp_size=d["cp"],
        loss_groups=(loss.get_group(),) if loss.size() > 1 else (),
        reshard_after_forward=d["pp"] == 1,  # torchtitan: not pp
        tp_ends=True, wrap_moe_parts=False,
    )


def _torchtitan_fsdp(d: dict, meshes: dict):
    """The dense FSDP mesh: (dp_replicate, fsdp), each only where larger than 1, or None."""
    dense = meshes["dense"]
    fsdp = d["dp_shard"] * d["cp"]
    dims = tuple(n for n, size in (("dp_replicate", d["dp_replicate"]), ("fsdp", fsdp)) if size > 1)
    if not dims:
        return None
    if "fsdp" in dense.mesh_dim_names:  # v0.2.x, partial_dtensor: the dense mesh has the fsdp dim
        return dense[dims]
    if d["cp"] == 1:  # spmd_types, full_dtensor: fsdp is dp_shard itself
        return dense[tuple("dp_shard" if n == "fsdp" else n for n in dims)]
    # (dp_shard, cp) sharded as one with dp_replicate beside it: the partial_dtensor layout of the same
    # ranks, unflattened for the step (the groups resolve_fsdp_mesh's DataParallelMeshDims name)
    step = meshes["world"]._unflatten(0, (d["pp"], d["dp_replicate"], fsdp, d["tp"]),
                                      ("pp", "dp_replicate", "fsdp", "tp"))
    return step[dims]


def kempnerforge(plan: dict, meshes: dict) -> Layout:
    """KempnerForge's layout; also the native dialect's, whose dims are found by their role."""
    mesh = meshes[plan["recipe"][0]["mesh"]]
    dims = mesh.mesh_dim_names
    by_role = {plan["axes"][n]["role"]: n for n in dims if n in plan["axes"]}

    def dim(role):
        name = by_role.get(role)
        return mesh[name] if name is not None else None

    dp_dims = tuple(by_role[r] for r in ("dp_replicate", "dp_shard") if r in by_role)
    dp = mesh[dp_dims] if dp_dims else None
    ep = dim("ep")
    shards, index = 1, 0
    if dp is not None:  # the rank's row-major index in the dp mesh: DistributedSampler's rank
        shards = dp.size()
        for i, size in zip(dp.get_coordinate(), dp.shape):
            index = index * size + i
    return Layout(
        tp=dim("tp"), pp=dim("pp"), cp=None, ep=ep, dp=dp, expert_dp=dp,
        token_split=ep.get_group() if ep is not None else None, etp_group=None,
        dp_degree=shards, data_index=index, data_shards=shards, cp_index=0, cp_size=1,
        loss_groups=tuple(mesh[n].get_group() for n in dp_dims),
        reshard_after_forward=True, tp_ends=False, wrap_moe_parts=True,
    )


def unsharded() -> Layout:
    """No mesh at all (a one-process world the framework trains without one): every parallelism off."""
    return Layout(tp=None, pp=None, cp=None, ep=None, dp=None, expert_dp=None, token_split=None, etp_group=None,
                  dp_degree=1, data_index=0, data_shards=1, cp_index=0, cp_size=1, loss_groups=(),
                  reshard_after_forward=True, tp_ends=False, wrap_moe_parts=False)


def for_plan(plan: dict, meshes: dict, backend: str = "gloo") -> Layout:
    if not plan["recipe"]:
        layout = unsharded()
    elif plan["dialect"] == "torchtitan":
        layout = torchtitan(plan, meshes)
    else:
        layout = kempnerforge(plan, meshes)
    return layout._replace(nccl=backend == "nccl")
