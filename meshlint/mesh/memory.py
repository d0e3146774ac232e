"""The whole peak memory of one GPU, per pipeline stage, for one layout of a training config (pure arithmetic).

Every term and its source is in docs/cost-model.md ("Memory"); the short form: model states in the dtypes the
framework stores them (KempnerForge: everything in ``mixed_precision``'s dtype; torchtitan: fp32 master weights,
gradients and AdamW moments), the gradients FSDP2 keeps unsharded in fp32 while gradient sync is off (KempnerForge's
grad accumulation, every pipeline schedule), the FSDP units unsharded in flight and their reduce-scatter buffers,
activations per layer for the activation-checkpointing mode times the microbatches the schedule holds, the logits
and the loss, MoE dispatch buffers, the optimizer step's temporaries, and the caching allocator's reserve.
Nothing here imports torch.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

GIB = 2 ** 30
# Caching allocator: reserved over allocated at the peak with torchtitan's expandable segments, and the CUDA
# context + NCCL's own buffers outside the allocator (docs/cost-model.md, "Memory": calibration).
RESERVE_FRACTION = 0.05
CONTEXT_GIB = 1.0
# A layer recomputed for its backward holds its saved set plus the gradients flowing through it: the block's
# output gradient and input gradient (2 × 2d) and two of the MLP hidden's gradients (2 × 2F), per token.
TERMS = ("params", "grads", "optimizer", "unsharded_grads", "fsdp_unsharded", "reduce_buffers", "activations",
         "recompute", "logits_loss", "moe_dispatch", "optimizer_step", "allocator_reserve", "cuda_context")


class Shape(NamedTuple):
    """The model and the recipe, as the memory arithmetic needs them (None: unknown)."""

    framework: str               # "kempnerforge" | "torchtitan"
    params: int | None
    n_layers: int | None
    dim: int | None
    ffn_hidden: int | None       # dense SwiGLU hidden
    n_heads: int | None
    n_kv_heads: int | None
    head_dim: int | None
    vocab: int | None
    tied: bool
    num_experts: int = 0
    moe_layers: int = 0
    moe_hidden: int = 0
    top_k: int = 0
    shared_experts: int = 0
    expert_params: int = 0       # routed experts' parameters, all layers
    ac: str = "none"             # none | full | selective | memory_budget
    ac_option: str = "op"        # selective: "op" or every-Nth-layer "N"
    memory_budget: float = 0.5
    state_bytes: int = 2         # bytes per stored parameter, gradient and AdamW moment
    compute_bytes: int = 2       # activations and the unsharded (all-gathered) parameters
    foreach_optimizer: bool = False  # False: fused AdamW (no full-size temporaries)
    accumulate_unsharded: bool = False  # FSDP2 keeps unsharded fp32 gradients across microbatches (no-sync)


class Stage(NamedTuple):
    index: int
    layers: int
    microbatches_held: int
    terms: dict                  # name -> bytes
    allocated: float             # bytes the allocator hands out at the peak
    total: float                 # bytes of the GPU used: allocated + reserve + context


class Peak(NamedTuple):
    stages: tuple                # Stage per pipeline stage (one without pp)
    peak: Stage                  # the largest

    @property
    def peak_gib(self) -> float:
        return self.peak.total / GIB

    def to_json(self, capacity_gib: float | None = None, capacity_source: str | None = None) -> dict:
        r = lambda b: round(b / GIB, 3)  # noqa: E731
        out = {"peak_gib": r(self.peak.total), "peak_stage": self.peak.index,
               "terms": {k: r(v) for k, v in self.peak.terms.items()},
               "stages": [{"stage": s.index, "layers": s.layers, "microbatches_held": s.microbatches_held,
                           "peak_gib": r(s.total), "allocated_gib": r(s.allocated)} for s in self.stages]}
        if capacity_gib is not None:
            out["capacity_gib"] = round(capacity_gib, 3)
            out["capacity_source"] = capacity_source
            out["fits"] = self.peak.total / GIB <= capacity_gib
        return out


def layer_bytes_per_token(s: Shape, ac: str, tp: int, moe: bool) -> float:
    """Bytes one layer keeps for its backward, per token of the microbatch (before the cp split)."""
    d, F = s.dim or 0, s.ffn_hidden or 0
    hq = (s.n_heads or 0) * (s.head_dim or 0) or d             # query (and attention output) width
    kv = (s.n_kv_heads or s.n_heads or 0) * (s.head_dim or 0) or d
    a = s.compute_bytes
    sp = tp                      # sequence parallel with tp (both frameworks): norm inputs are sequence-sharded
    # KempnerForge repeats K and V to every query head before SDPA (model/attention.py:174-175); torchtitan passes
    # enable_gqa (models/llama3/model/model.py:201)
    kv_saved = hq if s.framework == "kempnerforge" else kv
    # attention: norm input, the gathered norm output (QKV input), q, k, v, the SDPA output (o-proj input)
    attn = a * (d / sp + d + (hq + 2 * kv_saved + hq) / tp)
    if moe and s.moe_hidden:
        # routed: each token's top_k copies (permuted input, hidden of SwiGLU ×4, output), shared experts, router
        Fm = s.moe_hidden
        mlp_hidden = a * (s.top_k * (2 * d + 4 * Fm) + s.shared_experts * 4 * Fm) / tp + 4 * (s.num_experts or 0) / tp
    else:
        mlp_hidden = a * 4 * F / tp            # w1 out, w3 out, silu out, the product (w2 input)
    mlp = a * (d / sp + d) + mlp_hidden
    none = attn + mlp
    if ac == "none":
        return none
    full = a * d / sp                          # the block input
    if ac == "full":
        return full
    if ac == "memory_budget":
        return full + max(0.0, min(1.0, s.memory_budget)) * (none - full)
    # selective
    if s.framework == "kempnerforge":          # checkpoints Attention only (distributed/parallel.py:113-119)
        return a * (d / sp + d) + mlp
    if s.ac_option.isdigit():                  # every Nth layer fully checkpointed
        n = max(1, int(s.ac_option))
        return full / n + none * (1 - 1 / n)
    # op-level SAC: the block input, every other mm output (wq, wv, w1, w2), SDPA's output, reduce-scatter outputs
    hidden = s.top_k * s.moe_hidden if moe and s.moe_hidden else F
    mm = a * (hq / tp + kv / tp + hidden / tp + d)
    return full + mm + a * hq / tp + (a * 2 * d / tp if tp > 1 else 0.0)


def estimate(s: Shape, degrees: dict, microbatch_tokens: int | None, microbatches: int, schedule: str | None,
             ends_only: bool = False) -> Peak | None:
    """The peak per GPU of every pipeline stage for one layout, or None without the model's size. ``ends_only``:
    the first and last stages only, where the peak always is (the first holds the most microbatches and the extra
    layer of an uneven split, the last the logits): what the ranking needs, in constant time."""
    if not s.params or not s.n_layers or not s.dim:
        return None
    pp, ds, cp, tp, ep = (degrees.get(n, 1) or 1 for n in ("pp", "dp_shard", "cp", "tp", "ep"))
    dr = degrees.get("dp_replicate", 1) or 1
    etp = degrees.get("etp", 1) or 1
    kf = s.framework == "kempnerforge"
    fsdp = ds if kf else ds * cp                   # KempnerForge shards over dp_shard; torchtitan over dp_shard·cp
    efsdp = max(1, ds if kf else ds * cp * tp // max(1, ep * etp))
    sharded = fsdp > 1 or dr > 1                    # FSDP2 applied (KempnerForge: any dp dim; torchtitan: HSDP/FSDP)
    V, d, L = s.vocab or 0, s.dim, s.n_layers
    embed = V * d
    out_w = 0 if s.tied else V * d
    experts = s.expert_params if s.num_experts else 0
    dense_layer = max(0, s.params - embed - out_w - experts) / L
    expert_layer = experts / s.moe_layers if s.moe_layers else 0.0
    moe_every = L / s.moe_layers if s.moe_layers else 0
    tokens = (microbatch_tokens or 0) / (1 if kf else cp)   # KempnerForge does not split sequences over cp
    a = s.compute_bytes
    stages = []
    per = [L // pp + (1 if i < L % pp else 0) for i in range(pp)]
    per_token = _per_token(s, tp)
    for i in (sorted({0, pp - 1}) if ends_only else range(pp)):
        layers = per[i]
        moe_n = round(layers / moe_every) if moe_every else 0
        first, last = i == 0, i == pp - 1
        p_dense = dense_layer * layers + (embed if first else 0) + (out_w if last else 0) + (
            embed if last and s.tied and pp > 1 else 0)
        p_exp = expert_layer * moe_n
        local = p_dense / (tp * fsdp) + p_exp / (ep * etp * efsdp)      # sharded parameters on this GPU
        unsharded = p_dense / tp + p_exp / (ep * etp)                   # this stage's parameters, gathered
        t = dict.fromkeys(TERMS, 0.0)
        t["params"] = local * s.state_bytes
        t["grads"] = local * s.state_bytes
        t["optimizer"] = 2 * local * s.state_bytes
        # FSDP2 upcasts unsharded gradients to reduce_dtype (fp32) and keeps them while gradient sync is off
        # (torch fsdp/_fully_shard/_fsdp_param.py to_accumulated_grad_if_needed): KempnerForge's maybe_no_sync
        # (training/grad.py:15-40) with grad_accum_steps > 1, and torch.pipelining's stage with FSDP
        # (pipelining/stage.py: set_requires_gradient_sync(False) before the last backward)
        no_sync = sharded and (pp > 1 or s.accumulate_unsharded) and microbatches > 1
        if no_sync:
            t["unsharded_grads"] = unsharded * 4
            t["grads"] = 0.0                       # the sharded gradients exist only after the last reduce-scatter
        unit = dense_layer / tp + expert_layer / (ep * etp) if moe_n else dense_layer / tp
        if sharded and not (pp > 1 and not kf):
            # two units gathered (the one computing and the one prefetched) and the root's parameters, which FSDP2
            # never reshards after forward: KempnerForge's root holds embedding, norm and output
            # (distributed/parallel.py:281-289); torchtitan keeps norm+output gathered (reshard_after_forward False,
            # models/llama3/infra/parallelize.py:347-355)
            root = ((embed if first else 0) + (out_w if last else 0)) / tp if kf else (out_w if last else 0) / tp
            t["fsdp_unsharded"] = (2 * unit + root) * a
        elif sharded:
            # torchtitan with pp keeps the whole stage gathered between forward and backward (parallelize.py:327)
            t["fsdp_unsharded"] = unsharded * a
        if no_sync:
            # only the last microbatch reduces: one unit's accumulated fp32 gradient copied into the flat
            # reduce-scatter input
            t["reduce_buffers"] = unit * 4
        elif sharded:
            # reduce-scatter of one unit: its unsharded gradient in the compute dtype and its fp32 copy, two in flight
            t["reduce_buffers"] = 2 * unit * (a + 4)
        if tokens:
            held = _held(pp, microbatches, schedule, i)
            # the MoE layers hold routed activations instead of the dense MLP's
            per_layer = per_token[s.ac, False] * (layers - moe_n) + per_token[s.ac, True] * moe_n
            t["activations"] = per_layer * tokens * held
            if s.ac in ("full", "selective", "memory_budget"):
                # one checkpointed layer recomputed with its gradients in flight
                work = per_token["none", moe_n > 0] + a * (2 * d + 2 * (s.ffn_hidden or 0)) / tp
                t["recompute"] = work * tokens
            if last and V:
                # KempnerForge: bf16 cross-entropy on logits gathered to the full vocabulary (output ColwiseParallel
                # with Replicate output, tensor_parallel.py:168-172): logits, log-softmax, and their gradients;
                # torchtitan: loss parallel over tp, fp32 (components/loss.py:20-24): log-softmax, its gradient
                # and the input's gradient in fp32
                t["logits_loss"] = tokens * V * 8 if kf else tokens * V / tp * 12
            if moe_n and ep > 1:
                # all-to-all send and receive buffers of one MoE layer's routed tokens
                t["moe_dispatch"] = 2 * tokens / tp * s.top_k * d * a
        train = sum(t.values())
        # the optimizer step runs after activations are freed: its temporaries count only above the backward peak
        states = t["params"] + t["optimizer"] + local * s.state_bytes
        step = states + (2 * local * s.state_bytes if s.foreach_optimizer else 0.0)
        t["optimizer_step"] = max(0.0, step - train)
        allocated = sum(t.values())
        t["allocator_reserve"] = allocated * RESERVE_FRACTION
        t["cuda_context"] = CONTEXT_GIB * GIB
        stages.append(Stage(i, layers, _held(pp, microbatches, schedule, i) if tokens else 0, t, allocated,
                            sum(t.values())))
    return Peak(tuple(stages), max(stages, key=lambda st: st.total))


@lru_cache(maxsize=256)
def _per_token(s: Shape, tp: int) -> dict:
    """Bytes per token per layer for the shape's AC mode and with none (the recomputed layer), dense and MoE."""
    return {(ac, moe): layer_bytes_per_token(s, ac, tp, moe)
            for ac, moe in ((s.ac, False), (s.ac, True), ("none", False), ("none", True))}


LOOPED = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble")
V_SHAPED = ("ZBVZeroBubble", "DualPipeV")


def _held(pp: int, m: int, schedule: str | None, stage: int) -> float:
    """Microbatches whose activations a pipeline stage holds at its peak, in units of the stage's layers.

    GPipe holds all of them; 1F1B and the zero-bubble schedules hold pp − stage (Narayanan et al. 2021, §2.2;
    the first stage the most); the interleaved schedules, with v = 2 chunks of L/(2·pp) layers per rank, warm up
    (pp − stage − 1)·2 + (v − 1)·pp chunks (Megatron-LM's interleaved schedule), so hold that plus one, halved."""
    m = max(1, m)
    if pp <= 1:
        return 1
    name = schedule or "1F1B"
    if name == "GPipe":
        return m
    if name in V_SHAPED:  # rank r holds stages r and 2·pp−1−r: every rank holds about pp half-stage chunks twice
        return min(m, pp)
    if name in LOOPED:
        return min(m * 2, (pp - stage - 1) * 2 + pp + 1) / 2
    return min(m, pp - stage)
