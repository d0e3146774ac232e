"""One FSDP2 + TP + PP + EP (+ CP) training step on the built meshes, checked against the unsharded model. [torch]

Every rank builds the same tiny model from one seed, runs it unsharded on the
whole global batch (the reference: one process's forward, backward and AdamW
step), then parallelizes a copy over the meshes and runs the same step on its
share of the batch. The loss, the gradient norm and every parameter's
gradient (gathered to full tensors) must equal the reference's within the
tolerance; a parameter that does not names the parallelisms that shard it.
"""

from __future__ import annotations

import copy
import math
import time

import torch
import torch.distributed as dist

from meshlint.smoke import model as tiny
from meshlint.smoke import parallelize as par

SABOTAGE_VARIABLE = "MESHLINT_SMOKE_SABOTAGE"
TOLERANCE = 1e-5        # relative, fp32: the loss, the gradient norm, each gradient (norm-wise)
LR = 1e-3
SCHEDULES = {"1f1b": "Schedule1F1B", "gpipe": "ScheduleGPipe", "interleaved1f1b": "ScheduleInterleaved1F1B",
             "interleaved_1f1b": "ScheduleInterleaved1F1B", "loopedbfs": "ScheduleLoopedBFS",
             "interleavedzerobubble": "ScheduleInterleavedZeroBubble", "zbvzerobubble": "ScheduleZBVZeroBubble",
             "dualpipev": "ScheduleDualPipeV"}
STYLE = {"ScheduleInterleaved1F1B": "loop", "ScheduleLoopedBFS": "loop", "ScheduleInterleavedZeroBubble": "loop",
         "ScheduleZBVZeroBubble": "v", "ScheduleDualPipeV": "v"}


def run(plan: dict, layout: par.Layout, rank: int, device: str, sabotage: str | None = None) -> dict:
    """The step on this rank; returns the numbers and per-parameter errors (rank 0 of each stage reports)."""
    deg = plan["degrees"]
    pp = deg.get("pp") or 1
    schedule = _schedule_name(plan)
    per_rank = 1 if pp == 1 else (2 if STYLE.get(schedule) else 1)
    stages = pp * per_rank
    moe = bool(plan["model"].get("is_moe")) or (deg.get("ep") or 1) > 1
    c = tiny.shape(deg, stages, moe)
    microbatches = max(stages, 2) if pp > 1 else 1
    rows = layout.data_shards * microbatches
    tokens, labels = tiny.batch(c, rows)
    times = {}

    start = time.perf_counter()
    full = tiny.build(c)
    reference = copy.deepcopy(full)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=LR)
    ref_loss = tiny.loss_fn(reference(tokens), labels)
    ref_loss.backward()
    ref_grads = {n: p.grad.detach().clone() for n, p in reference.named_parameters()}
    ref_opt.step()
    ref_params = {n: p.detach().clone() for n, p in reference.named_parameters()}
    times["reference"] = time.perf_counter() - start

    start = time.perf_counter()
    pp_rank = layout.pp.get_local_rank() if layout.pp is not None else 0
    ids = par.stage_ids(pp_rank, pp, per_rank, STYLE.get(schedule, "loop")) if pp > 1 else [0]
    parts = [par.split_stage(full, s, stages) if pp > 1 else full for s in ids]
    for part in parts:
        part.to(device)  # before sharding, as torchtitan materializes each part on its device
        if layout.tp is not None:
            par.apply_tp(part, layout.tp, ends=layout.tp_ends)
        if layout.cp is not None:
            par.apply_cp(part, layout.cp)
        if layout.ep is not None:
            par.apply_ep(part, layout)
        par.apply_fsdp(part, layout)
    if sabotage:
        _sabotage(parts, sabotage, layout)
    opt, bind = _local_adamw(parts)
    times["build"] = time.perf_counter() - start

    start = time.perf_counter()
    index = 0 if sabotage == "data" else layout.data_index
    mine = slice(index * microbatches, (index + 1) * microbatches)
    seq = c.seq_len // layout.cp_size
    chunk = slice(layout.cp_index * seq, (layout.cp_index + 1) * seq)
    x, y = tokens[mine, chunk].to(device), labels[mine, chunk].to(device)
    if pp > 1:
        loss = _pipeline_step(parts, ids, stages, layout, schedule, microbatches, x, y, device)
    else:
        loss = tiny.loss_fn(parts[0](x), y)
        loss.backward()
        loss = loss.detach()
    _rescale(parts, sabotage)
    grads = _full(parts, grads=True)
    bind()
    opt.step()
    params = _full(parts, grads=False)
    times["step"] = time.perf_counter() - start

    loss = _global_loss(loss, layout, device)
    return _compare(loss, float(ref_loss.detach()), grads, ref_grads, params, ref_params, layout, device, c, schedule,
                    microbatches, times, parts)


def _schedule_name(plan: dict) -> str:
    name = (plan["model"].get("pp_schedule") or "1F1B").lower().replace("-", "")
    return SCHEDULES.get(name, "Schedule1F1B")


def _pipeline_step(parts, ids, stages, layout, schedule, microbatches, x, y, device):
    from torch.distributed.pipelining import PipelineStage, schedules

    group = layout.pp.get_group()
    pipe = [PipelineStage(part, sid, stages, torch.device(device), group=group) for part, sid in zip(parts, ids)]
    cls = getattr(schedules, schedule)
    sched = cls(pipe[0] if len(pipe) == 1 else pipe, n_microbatches=microbatches, loss_fn=tiny.loss_fn)
    first, last = 0 in ids, stages - 1 in ids
    losses: list = []
    kwargs = {"target": y, "losses": losses} if last else {}
    if first:
        sched.step(x, **kwargs)
    else:
        sched.step(**kwargs)
    if last:
        return torch.stack([t.detach() for t in losses]).mean()
    return None


def _global_loss(loss, layout, device):
    """The mean over every data shard (the loss mesh), known on the last stage's ranks."""
    if loss is None:
        return None
    value = loss.detach().reshape(1).to(device).clone()
    for group in layout.loss_groups:
        dist.all_reduce(value, group=group)
        value /= dist.get_world_size(group)
    return float(value.item())


def _full(parts, grads: bool) -> dict:
    """Each parameter (or its gradient) as a full tensor: DTensors are gathered (a collective, in order)."""
    out = {}
    for part in parts:
        for name, p in part.named_parameters():
            t = p.grad if grads else p
            if t is None:
                continue
            t = t.full_tensor() if hasattr(t, "full_tensor") else t
            out[name] = t.detach().cpu()
    return out


def _rescale(parts, sabotage: str | None) -> None:
    """Apply the expert gradient divide factor where the backend could not (gloo, see parallelize)."""
    if sabotage == "expert-grad":
        return  # the test-only bug: experts keep FSDP's default division by their shard group
    for part in parts:
        for block in part.layers.values():
            experts = getattr(block.feed_forward, "experts", None)
            scale = getattr(experts, "rescale_gradients", None)
            if scale is None:
                continue
            for p in experts.parameters():
                if p.grad is not None:
                    p.grad.mul_(scale)


def _local_adamw(parts):
    """AdamW over each rank's local shards: elementwise, so the same update as AdamW over the DTensors,
    without DTensor's per-op sharding propagation (seconds per parameter on CPU for multi-dim meshes)."""
    params = [p for part in parts for p in part.parameters()]
    local = [p._local_tensor if hasattr(p, "_local_tensor") else p for p in params]
    opt = torch.optim.AdamW(local, lr=LR)

    def bind():
        for p, t in zip(params, local):
            if t is not p and p.grad is not None:
                g = p.grad
                if hasattr(g, "placements") and tuple(g.placements) != tuple(p.placements):
                    g = g.redistribute(p.device_mesh, p.placements)  # TP without FSDP: a Partial/Replicate grad
                t.grad = g._local_tensor if hasattr(g, "_local_tensor") else g

    return opt, bind


def _reference_part(name: str, full: torch.Tensor, parts) -> torch.Tensor:
    """The part of the unsharded tensor this rank's copy of ``name`` holds (experts: its block and slice)."""
    module_name, _, leaf = name.rpartition(".")
    for part in parts:
        try:
            module = part.get_submodule(module_name)
        except AttributeError:
            continue
        slices = getattr(module, "slices", {}).get(leaf)
        if slices:
            for dim, start, length in slices:
                full = full.narrow(dim, start, length)
        return full
    return full


def _suspects(name: str, layout: par.Layout) -> list:
    """The parallelisms that shard or route a parameter (what a mismatch points at)."""
    out = []
    if ".experts." in name:
        if layout.ep is not None:
            out.append("ep")
        if layout.etp_group is not None:
            out.append("etp")
        out.append("fsdp")
    else:
        if layout.tp is not None and any(k in name for k in ("wq", "wk", "wv", "wo", "w1", "w2", "w3",
                                                              "tok_embeddings", "output")):
            out.append("tp")
        out.append("fsdp")
    if layout.pp is not None:
        out.append("pp")
    if layout.cp is not None and "attention" in name:
        out.append("cp")
    return out


def _culprits(bad: dict, suspects: dict) -> list:
    """The parallelisms every mismatched parameter goes through, less those every matching one does too."""
    if not bad:
        return []
    common = [s for s in suspects[next(iter(bad))] if all(s in suspects[n] for n in bad)]
    clean = [n for n in suspects if n not in bad]
    narrowed = [s for s in common if not clean or not all(s in suspects[n] for n in clean)]
    return narrowed or common


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    denom = float(b.norm())
    return float((a - b).norm()) / denom if denom > 0 else float((a - b).norm())


def _compare(loss, ref_loss, grads, ref_grads, params, ref_params, layout, device, c, schedule, microbatches,
             times, parts) -> dict:
    errors = {n: _rel(g, _reference_part(n, ref_grads[n], parts)) for n, g in grads.items()}
    updates = {n: _rel(p, _reference_part(n, ref_params[n], parts)) for n, p in params.items()}
    # the global norm: every rank adds its tensors, each divided by how many ranks hold the same one
    holders = dist.get_world_size() // (layout.pp.size() if layout.pp is not None else 1)
    expert_copies = holders // ((layout.ep.size() if layout.ep is not None else 1) *
                                (dist.get_world_size(layout.etp_group) if layout.etp_group is not None else 1))
    mine_sq = sum(float(g.double().pow(2).sum()) / (expert_copies if ".experts." in n else holders)
                  for n, g in grads.items())
    total = torch.tensor([mine_sq], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    norm = math.sqrt(float(total.item()))
    ref_norm = math.sqrt(sum(float(g.pow(2).sum()) for g in ref_grads.values()))
    bad = {n: e for n, e in errors.items() if e > TOLERANCE}
    suspects = {n: _suspects(n, layout) for n in errors}
    return {
        "loss": loss, "reference_loss": ref_loss,
        "loss_rel_error": None if loss is None else abs(loss - ref_loss) / abs(ref_loss),
        "grad_norm": norm, "reference_grad_norm": ref_norm, "grad_norm_rel_error": abs(norm - ref_norm) / ref_norm,
        "max_grad_rel_error": max(errors.values(), default=0.0),
        "max_param_rel_error": max(updates.values(), default=0.0),
        "mismatched": {n: {"rel_error": e, "suspects": suspects[n]} for n, e in sorted(bad.items())},
        "culprits": _culprits(bad, suspects),
        "params_checked": sorted(errors), "tolerance": TOLERANCE, "schedule": schedule, "microbatches": microbatches,
        "model": c._asdict(), "seconds": {k: round(v, 4) for k, v in times.items()},
        "peak_memory_mb": _peak_mb(device),
    }


def _peak_mb(device: str) -> float:
    if device == "cuda":
        return round(torch.cuda.max_memory_allocated() / 2**20, 2)
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def _sabotage(parts, what: str, layout: par.Layout) -> None:
    """Test-only breakage of the parallelization (MESHLINT_SMOKE_SABOTAGE), to prove the check fails when it must.

    ``expert-grad``: experts keep FSDP's default gradient division (by their own
    shard group) instead of the whole data-parallel degree, a real EP bug.
    ``data`` (handled where the batch is split): every rank reads the first shard.
    """
    if what == "expert-grad" and layout.nccl:
        for part in parts:
            for block in part.layers.values():
                experts = getattr(block.feed_forward, "experts", None)
                if experts is not None and hasattr(experts, "set_gradient_divide_factor"):
                    experts.set_gradient_divide_factor(float(layout.expert_dp.size()))
