"""Parallelize the tiny decoder over the built meshes, by mesh dim name, the way the frameworks do. [torch]

TP: ``parallelize_module`` with colwise q/k/v and w1/w3, rowwise wo and w2, a
rowwise embedding and a colwise head gathered to full logits (no sequence
parallelism: the same numbers, fewer moving parts). EP: each ep rank keeps a
contiguous block of the experts (and each etp rank a slice of their hidden
dim) as plain parameters, as KempnerForge does; torchtitan's Shard(0)
DTensors hold the same numbers, but DTensor's sharding propagation on a 4-D
expert mesh cost ~40 s of CPU per step here, for nothing the check needs. Tokens go to
their experts with all_to_all over the ep group; when ep borrows the tp
ranks (torchtitan's etp = 1) the tp ranks split the tokens between them
first. CP: K and V are gathered over the cp group, the causal mask offset by
the rank's place in the sequence. FSDP2: ``fully_shard`` per block and root
over the data-parallel mesh (2-D HSDP when dp_replicate > 1), experts over
their own mesh with the gradient divided by the whole data-parallel degree.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import torch
from torch.distributed.device_mesh import DeviceMesh

from meshlint.smoke import collectives as cc
from meshlint.smoke.model import Decoder, MoE


class Layout(NamedTuple):
    """The meshes each parallelism uses, chosen per framework by name (see layouts.py)."""

    tp: DeviceMesh | None
    pp: DeviceMesh | None
    cp: DeviceMesh | None
    ep: DeviceMesh | None
    dp: DeviceMesh | None              # FSDP2 mesh for everything but the experts
    expert_dp: DeviceMesh | None       # FSDP2 mesh for the experts
    token_split: Any                   # process group of ep ranks holding the same tokens, or None
    etp_group: Any                     # process group the expert hidden dim is sharded over, or None
    dp_degree: int                     # data shards in all: the experts' gradient divide factor
    data_index: int                    # which rows of the global batch this rank reads
    data_shards: int
    cp_index: int
    cp_size: int
    loss_groups: tuple                 # groups whose losses, averaged in turn, give the global loss
    reshard_after_forward: bool
    tp_ends: bool                      # TP on the embedding and the output head too (torchtitan) or not
    wrap_moe_parts: bool               # FSDP units per attention and MoE, not per block (KempnerForge with EP)
    nccl: bool = False                 # the backend has PREMUL_SUM (FSDP's custom gradient divide factor)


def stage_ids(pp_rank: int, pp: int, per_rank: int, style: str) -> list[int]:
    """The pipeline stages a rank holds: looped (r, r + pp, ...) or V (r, 2·pp − 1 − r)."""
    if per_rank == 1:
        return [pp_rank]
    if style == "v":
        return [pp_rank, 2 * pp - 1 - pp_rank]
    return [pp_rank + k * pp for k in range(per_rank)]


def split_stage(model: Decoder, stage: int, stages: int) -> Decoder:
    """torchtitan's pipeline_module_split: one layer range per stage, embeddings first, head last."""
    part = copy.deepcopy(model)
    n = len(model.layers)
    per, extra = divmod(n, stages)
    start = stage * per + min(stage, extra)
    keep = {str(i) for i in range(start, start + per + (1 if stage < extra else 0))}
    for name in list(part.layers):
        if name not in keep:
            del part.layers[name]
    if stage != 0:
        part.tok_embeddings = None
    if stage != stages - 1:
        part.norm = None
        part.output = None
    return part


def apply_tp(part: Decoder, mesh: DeviceMesh, ends: bool = True) -> None:
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {}
    if not ends:
        pass
    elif part.tok_embeddings is not None:
        plan["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
    if ends and part.output is not None:
        plan["output"] = ColwiseParallel(output_layouts=Replicate())
    if plan:
        parallelize_module(part, mesh, plan)
    for block in part.layers.values():
        layer_plan = {"attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
                      "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel()}
        if not isinstance(block.feed_forward, MoE):
            layer_plan.update({"feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),
                               "feed_forward.w2": RowwiseParallel()})
        parallelize_module(block, mesh, layer_plan)


def apply_cp(part: Decoder, mesh: DeviceMesh) -> None:
    import torch.distributed._functional_collectives as funcol

    group = mesh.get_group()
    index, size = mesh.get_local_rank(), mesh.size()

    def gather(t):  # along the sequence (dim 2 of [b, heads, seq, head_dim]); backward reduce-scatters
        return torch.cat(funcol.all_gather_tensor_autograd(t.contiguous(), 0, group).chunk(size), dim=2)

    for block in part.layers.values():
        block.attention.context = (gather, index, size)


def apply_ep(part: Decoder, layout: Layout) -> None:
    """Each ep rank keeps its contiguous block of experts (KempnerForge's layout, torchtitan's Shard(0)),
    and each etp rank its slice of their hidden dim; ``experts.slices`` says which part of the full
    weights that is, for the comparison with the unsharded model."""
    import torch.distributed as dist

    ep, ep_rank = layout.ep.size(), layout.ep.get_local_rank()
    etp = dist.get_world_size(layout.etp_group) if layout.etp_group is not None else 1
    etp_rank = dist.get_rank(layout.etp_group) if layout.etp_group is not None else 0
    for block in part.layers.values():
        moe = block.feed_forward
        if not isinstance(moe, MoE):
            continue
        experts = moe.experts
        n = experts.w1.shape[0]
        first, count = ep_rank * (n // ep), n // ep
        experts.slices = {}
        for name in ("w1", "w2", "w3"):
            full = getattr(experts, name).detach()
            hidden_dim = 1 if name == "w2" else 2
            width = full.shape[hidden_dim] // etp
            mine = full.narrow(0, first, count).narrow(hidden_dim, etp_rank * width, width)
            setattr(experts, name, torch.nn.Parameter(mine.clone().contiguous()))
            experts.slices[name] = ((0, first, count), (hidden_dim, etp_rank * width, width))
        moe.dispatch = _dispatcher(experts, moe.router.out_features, layout)


def _dispatcher(experts, n_experts: int, layout: Layout):
    ep_group = layout.ep.get_group()
    ep = layout.ep.size()
    local = n_experts // ep

    def exchange(routed, expert_ids):
        counts = torch.bincount(expert_ids, minlength=n_experts)
        send = counts.view(ep, local).sum(1).tolist()
        incoming = cc.exchange_counts(counts, ep_group).view(ep, local)  # [source, my expert]
        recv = incoming.sum(1).tolist()
        if layout.etp_group is not None:
            routed = cc.copy(routed, layout.etp_group)
        got = cc.all_to_all(routed, recv, send, ep_group)
        # source-major -> expert-major, run, and back
        starts = torch.cumsum(incoming.reshape(-1), 0) - incoming.reshape(-1)
        order = [torch.arange(int(starts[s * local + e]), int(starts[s * local + e] + incoming[s, e]))
                 for e in range(local) for s in range(ep)]
        perm = torch.cat(order) if order else torch.zeros(0, dtype=torch.long)
        out = experts(got[perm], incoming.sum(0).tolist())
        back = torch.empty_like(out).index_copy(0, perm, out) if len(perm) else out
        result = cc.all_to_all(back, send, recv, ep_group)
        if layout.etp_group is not None:
            result = cc.reduce(result, layout.etp_group)
        return result

    if layout.token_split is None:
        return exchange

    group = layout.token_split
    import torch.distributed as dist

    size, rank = dist.get_world_size(group), dist.get_rank(group)

    def split_exchange(routed, expert_ids):
        mine = cc.split(routed, group)
        return cc.gather(exchange(mine, expert_ids.chunk(size)[rank]), group)

    return split_exchange


def _divide_expert_gradients(experts, layout: Layout) -> None:
    """Expert gradients divided by the whole data-parallel degree, not just their shard group's size.

    torchtitan sets this as FSDP's gradient divide factor, which reduces with
    ReduceOp.PREMUL_SUM: NCCL has it, gloo does not. So on gloo the gradients
    are rescaled after FSDP's (mean) reduce-scatter instead: the same numbers.
    """
    if layout.nccl:
        experts.set_gradient_divide_factor(float(layout.dp_degree))
        return
    scale = layout.expert_dp.size() / layout.dp_degree
    experts.rescale_gradients = scale  # applied by the step after backward (see step._rescale)


def apply_fsdp(part: Decoder, layout: Layout) -> None:
    from torch.distributed.fsdp import fully_shard

    for block in part.layers.values():
        moe = block.feed_forward
        if isinstance(moe, MoE) and layout.expert_dp is not None and layout.ep is not None:
            fully_shard(moe.experts, mesh=layout.expert_dp, reshard_after_forward=layout.reshard_after_forward)
            if layout.expert_dp.size() != layout.dp_degree:
                _divide_expert_gradients(moe.experts, layout)
        if layout.dp is None:
            continue
        if layout.wrap_moe_parts and isinstance(moe, MoE) and layout.ep is not None:
            fully_shard(block.attention, mesh=layout.dp, reshard_after_forward=layout.reshard_after_forward)
            fully_shard(moe, mesh=layout.dp, reshard_after_forward=layout.reshard_after_forward)
        else:
            fully_shard(block, mesh=layout.dp, reshard_after_forward=layout.reshard_after_forward)
    if layout.dp is not None:
        fully_shard(part, mesh=layout.dp, reshard_after_forward=False)
