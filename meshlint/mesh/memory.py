"""The whole peak memory of one GPU, per pipeline stage, for one layout of a training config (pure arithmetic).

Every term and its source is in docs/cost-model.md ("Memory"); the short form: model states in the dtypes the
framework stores them (KempnerForge: everything in ``mixed_precision``'s dtype; torchtitan: fp32 master weights,
gradients and AdamW moments), the gradients FSDP2 keeps unsharded in fp32 while gradient sync is off (KempnerForge's
grad accumulation, every pipeline schedule), the FSDP units unsharded in flight and their reduce-scatter buffers,
activations per layer for the activation-checkpointing mode times the microbatches the schedule holds, the logits
and the loss, MoE dispatch buffers, the optimizer step's temporaries, and the caching allocator's reserve. The peak
is the largest of the moments of a step where it can fall (``_parts``: the forward's end, the loss's backward, a
layer's backward, the optimizer step), each the sum of the terms alive then, as a fake-tensor run of torchtitan's
own step measures them (bench/memory_vs_fake_tt.py). Nothing here imports torch.
"""

from __future__ import annotations

from meshlint.limits import MAX_PIPELINE_STAGES
from meshlint.record import Record

GIB = 2 ** 30
# Caching allocator: reserved over allocated at the peak (torchtitan's published max reserved against the allocated
# bytes a fake-tensor run confirms: 1.18-1.25 on its non-pp runs; calibrated on Table 1, docs/cost-model.md,
# "Memory"), and the CUDA context + NCCL's and cuBLAS's own buffers outside the allocator (an order of magnitude)
RESERVE_FRACTION = 0.20
CONTEXT_GIB = 1.0
TERMS = ("params", "grads", "optimizer", "unsharded_grads", "fsdp_unsharded", "reduce_buffers", "activations",
         "recompute", "logits_loss", "moe_dispatch", "optimizer_step", "allocator_reserve", "cuda_context")


class Shape(Record):
    """The model and the recipe, as the memory arithmetic needs them (None: unknown)."""

    framework: str               # "kempnerforge" | "torchtitan" | "accelerate" (torchtitan's FSDP2 arithmetic)
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
    loss_parallel: bool = True   # torchtitan: the loss on vocabulary-sharded logits with tp (disable_loss_parallel)
    ddp_replicate: bool = False  # torchtitan 0.2.x: dp_replicate alone is DDP, not FSDP2 (parallelize.py apply_ddp)
    reduce_bytes: int = 4        # FSDP's reduce_dtype (Accelerate's MixedPrecisionPolicy: the compute dtype)
    reshard_after_forward: bool = True  # False: every FSDP unit stays gathered from its forward to its backward
    sequence_parallel: bool = True  # False (Accelerate's TP: Transformers' tp_plan): norms whole on every tp rank
    norm_bytes: int = 8          # bytes per element an RMSNorm keeps besides its output (fp32 input and normalised)
    qk_norm: bool = False        # a norm over each head's q and k (the model table's qk_norm: qwen3)
    compiled_loss: bool = False  # torchtitan: the loss under torch.compile with inductor (compile.components)
    loss_chunks: int = 0         # torchtitan's registries: ChunkedLossWrapper's num_chunks (0: the loss is not chunked)
    sac_saves_all_to_all: bool = False  # torchtitan: op-level SAC's save list holds _c10d_functional.all_to_all_single


class Stage(Record):
    index: int
    layers: int
    microbatches_held: int
    terms: dict                  # name -> bytes
    allocated: float             # bytes the allocator hands out at the peak
    total: float                 # bytes of the GPU used: allocated + reserve + context
    phase: str = ""              # the moment of the step the peak falls in (memory._parts)
    phases: dict | None = None   # phase -> allocated bytes at that moment
    phase_terms: dict | None = None  # phase -> {term: bytes}, with estimate(..., detail=True)


class Peak(Record):
    stages: tuple                # Stage per pipeline stage (one without pp)
    peak: Stage                  # the largest

    @property
    def peak_gib(self) -> float:
        return self.peak.total / GIB

    def to_json(self, capacity_gib: float | None = None, capacity_source: str | None = None) -> dict:
        r = lambda b: round(b / GIB, 3)  # noqa: E731
        out = {"peak_gib": r(self.peak.total), "peak_stage": self.peak.index, "peak_phase": self.peak.phase,
               "terms": {k: r(v) for k, v in self.peak.terms.items()},
               "stages": [{"stage": s.index, "layers": s.layers, "microbatches_held": s.microbatches_held,
                           "peak_gib": r(s.total), "allocated_gib": r(s.allocated)} for s in self.stages]}
        if capacity_gib is not None:
            out["capacity_gib"] = round(capacity_gib, 3)
            out["capacity_source"] = capacity_source
            out["fits"] = self.peak.total / GIB <= capacity_gib
        return out


def layer_bytes_per_token(s: Shape, ac: str, tp: int, moe: bool, precision: str = "param") -> float:
    """Bytes one layer keeps for its backward, per token of the microbatch (before the cp split). ``precision``:
    how the step computes (``PRECISIONS``)."""
    d, F = s.dim or 0, s.ffn_hidden or 0
    hq = (s.n_heads or 0) * (s.head_dim or 0) or d             # query (and attention output) width
    kv = (s.n_kv_heads or s.n_heads or 0) * (s.head_dim or 0) or d
    a = 4 if precision == "fp32" else s.compute_bytes
    r = _resid_bytes(s, precision)
    tt = s.framework == "torchtitan"
    autocast = tt and precision == "autocast"
    sp = tp if s.sequence_parallel else 1  # sequence parallel with tp: norm inputs are sequence-sharded
    # KempnerForge repeats K and V to every query head before SDPA (model/attention.py:174-175); torchtitan passes
    # enable_gqa (models/llama3/model/model.py:201)
    kv_saved = hq if s.framework == "kempnerforge" else kv
    heads = s.n_heads or 0
    norm = norm_per_token(s, precision, tp)
    # under autocast each projection keeps its own cast of the (fp32) norm output: wq, wk, wv; w1, w3 (measured)
    attn_in, mlp_in = (3 * a * d, (1 if moe else 2) * a * d) if autocast else (a * d, a * d)
    qk = 0.0
    if s.qk_norm:
        # the q and k norms over each head: the fused kernel's input and rstd per head; under autocast their input
        # is bf16 (wq's output) and their weight fp32, so the norm decomposes: fp32 input and normalised
        qk = ((8 if autocast else a) * (hq + kv) + 4 * (heads + (s.n_kv_heads or heads))) / tp
    # attention: its norm, the gathered norm output (QKV input), q, k, v, the SDPA output (o-proj input) and
    # SDPA's fp32 logsumexp per head (tests/memory_fake_worker.py measured each of these on torchtitan's block)
    attn = norm + attn_in + a * (hq + 2 * kv_saved + hq) / tp + 4 * heads / tp + qk
    if moe and s.moe_hidden:
        # routed: each token's top_k copies (permuted input, hidden of SwiGLU ×4, output), shared experts, router
        Fm = s.moe_hidden
        mlp_hidden = a * (s.top_k * (2 * d + 4 * Fm) + s.shared_experts * 4 * Fm) / tp + 4 * (s.num_experts or 0) / tp
    else:
        mlp_hidden = a * 4 * F / tp            # w1 out, w3 out, silu out, the product (w2 input)
    mlp = norm + mlp_in + mlp_hidden
    none = attn + mlp
    if ac == "none":
        return none
    full = r * d / sp                          # the block input
    if ac == "full":
        return full
    if ac == "memory_budget":
        return full + max(0.0, min(1.0, s.memory_budget)) * (none - full)
    # selective
    if s.framework == "kempnerforge":          # checkpoints Attention only (distributed/parallel.py:113-119)
        return norm + a * d + mlp
    if s.ac_option.isdigit():                  # every Nth layer fully checkpointed
        n = max(1, int(s.ac_option))
        return full / n + none * (1 - 1 / n)
    # op-level SAC: the block input, every other mm output (wq, wv, w1, w2), SDPA's output, reduce-scatter outputs
    if moe and s.moe_hidden:
        # an MoE layer's feed-forward: the routed experts run torch._grouped_mm, which no save list holds (so they
        # are recomputed and keep nothing), and the router's gate mm is recomputed uncounted
        # (force_recompute_mm_shapes_by_fqns, default ["moe.router.gate"]): the mm outputs kept are the shared
        # experts' w1 and w2, if any (measured on DeepSeek-V3 16B's own block, bench/moe_op_sac.py); with ep the
        # all-to-all outputs are kept too (``estimate``, it knows ep)
        ffn = s.shared_experts * s.moe_hidden / tp + d if s.shared_experts else 0.0
    else:
        ffn = F / tp + d
    mm = a * (hq / tp + kv / tp + ffn)
    return full + mm + a * hq / tp + 4 * heads / tp + (a * 2 * d / tp if tp > 1 else 0.0)


def _resid_bytes(s: Shape, precision: str) -> int:
    """The bytes of an element of the residual stream: fp32 unless the parameters are in the compute dtype (the
    residual adds are no autocast op, and the embedding's output is in the parameters' dtype)."""
    return s.compute_bytes if precision == "param" else 4


def norm_per_token(s: Shape, precision: str, tp: int) -> float:
    """Bytes an RMSNorm over the model's width keeps for its backward, per token."""
    sp = tp if s.sequence_parallel else 1  # sequence parallel with tp: norm inputs are sequence-sharded
    if s.framework == "torchtitan":
        # torch's nn.RMSNorm, input and weight of one dtype: on a GPU the fused kernel, which keeps its input in
        # its own dtype and an fp32 rstd per row (measured on an H100, bench/saved_activations_h100_*.json)
        return (_resid_bytes(s, precision) * (s.dim or 0) + 4) / sp
    # KempnerForge's model/norm.py:22-27 and Transformers' LlamaRMSNorm upcast in Python: the fp32 input and the
    # normalised tensor (norm_bytes per element) whatever the compute dtype, on the sequence shard
    return s.norm_bytes * (s.dim or 0) / sp


def estimate(s: Shape, degrees: dict, microbatch_tokens: int | None, microbatches: int, schedule: str | None,
             ends_only: bool = False, detail: bool = False) -> Peak | None:
    """The peak per GPU of every pipeline stage for one layout, or None without the model's size. ``ends_only``:
    the first and last stages only, where the peak always is (the first holds the most microbatches and the extra
    layer of an uneven split, the last the logits): what the ranking needs, in constant time, and what a pipeline of
    more than MAX_PIPELINE_STAGES gets (as its layer counts are not listed either: a pp of millions, which the rules
    refuse, must not cost millions of stages). ``detail``: each stage also keeps every phase's terms
    (``phase_terms``)."""
    if not s.params or not s.n_layers or not s.dim:
        return None
    pp, ds, cp, tp, ep = (degrees.get(n, 1) or 1 for n in ("pp", "dp_shard", "cp", "tp", "ep"))
    dr = degrees.get("dp_replicate", 1) or 1
    etp = degrees.get("etp", 1) or 1
    kf = s.framework == "kempnerforge"
    fsdp = ds if kf else ds * cp                   # KempnerForge shards over dp_shard; torchtitan over dp_shard·cp
    efsdp = max(1, ds if kf else ds * cp * tp // max(1, ep * etp))
    if not kf and ep == 1:
        # torchtitan without ep shards the experts like dense weights: over tp, then FSDP over dp_shard·cp (no
        # efsdp mesh: parallel_dims._mesh_exist; 0.3.0's expert_param_placement_dense in moe_sharding.py)
        etp, efsdp = tp, fsdp
    ddp = s.ddp_replicate and dr > 1 and fsdp == 1  # torchtitan 0.2.x's replicate(): DDP, buckets of fp32 gradients
    sharded = fsdp > 1 or (dr > 1 and not ddp)      # FSDP2 applied (KempnerForge: any dp dim; torchtitan: HSDP/FSDP)
    V, d, L = s.vocab or 0, s.dim, s.n_layers
    embed = V * d
    out_w = 0 if s.tied else V * d
    experts = s.expert_params if s.num_experts else 0
    dense_layer = max(0, s.params - embed - out_w - experts) / L
    expert_layer = experts / s.moe_layers if s.moe_layers else 0.0
    moe_every = L / s.moe_layers if s.moe_layers else 0
    tokens = (microbatch_tokens or 0) / (1 if kf else cp)   # KempnerForge does not split sequences over cp
    stages = []
    regime = precision(s, sharded, tp, pp)
    per_token = _per_token(s, tp, regime)
    for i in (sorted({0, pp - 1}) if ends_only or pp > MAX_PIPELINE_STAGES else range(pp)):
        layers = L // pp + (1 if i < L % pp else 0)
        moe_n = round(layers / moe_every) if moe_every else 0
        first, last = i == 0, i == pp - 1
        p_dense = dense_layer * layers + (embed if first else 0) + (out_w if last else 0) + (
            embed if last and s.tied and pp > 1 else 0)
        p_exp = expert_layer * moe_n
        local = p_dense / (tp * fsdp) + p_exp / (ep * etp * efsdp)      # sharded parameters on this GPU
        unsharded = p_dense / tp + p_exp / (ep * etp)                   # this stage's parameters, gathered
        unit = dense_layer / tp + expert_layer / (ep * etp) if moe_n else dense_layer / tp
        held = _held(pp, microbatches, schedule, i) if tokens else 0
        # autocast keeps the bf16 copy of every matmul weight it cast (the output projection's too, tied or not;
        # the embedding is no autocast op) for the backward (measured: a·layer_params per layer)
        copies = (dense_layer * layers + p_exp + (V * d if last else 0)) * s.compute_bytes \
            if regime == "autocast" and s.framework == "torchtitan" else 0.0
        parts = _parts(s, kf, sharded, pp, tp, ep, first, last, layers, moe_n, local, unsharded, unit, embed, out_w,
                       tokens, held, microbatches, per_token, ddp, regime, copies)
        stages.append(stage_at_peak(i, layers, held, parts, TERMS, detail))
    return Peak(tuple(stages), max(stages, key=lambda st: st.total))


PRECISIONS = ("param", "autocast", "fp32")


def precision(s: Shape, sharded: bool, tp: int, pp: int) -> str:
    """How a step computes (``PRECISIONS``): "param" in the parameters' dtype (FSDP2's MixedPrecisionPolicy casts
    them to the compute dtype; KempnerForge stores them in it); "autocast": fp32 parameters under autocast to the
    compute dtype, whose residual stream stays fp32 (torchtitan 0.2.x without FSDP2: one GPU, or dp_replicate
    alone, DDP; distributed/utils.py maybe_enable_amp; Accelerate without FSDP); "fp32": no mixed precision at all
    (torchtitan 0.2.x without FSDP2 but with tp or pp: maybe_enable_amp returns a nullcontext). The registry
    versions of torchtitan always apply FSDP2, so compute in the parameters' dtype even at one GPU."""
    if s.framework == "kempnerforge" or sharded:
        return "param"
    if s.framework != "torchtitan":
        return "autocast"
    if not s.ddp_replicate:
        return "param"
    # autocast to fp32 (mixed_precision_param = "float32") casts nothing
    return "fp32" if tp > 1 or pp > 1 or s.compute_bytes >= 4 else "autocast"


def stage_at_peak(index: int, layers: int, held: float, parts: dict, names: tuple, detail: bool) -> Stage:
    """A stage's Stage from what it holds at each moment ({phase: {term: bytes}}): the largest moment, plus the
    allocator's reserve over it and the CUDA context."""
    totals = {name: sum(terms.values()) for name, terms in parts.items()}
    phase = max(totals, key=totals.get)
    t = dict.fromkeys(names, 0.0) | parts[phase]
    allocated = totals[phase]
    t["allocator_reserve"] = allocated * RESERVE_FRACTION
    t["cuda_context"] = CONTEXT_GIB * GIB
    return Stage(index, layers, held, t, allocated, sum(t.values()), phase, totals,
                 {name: dict.fromkeys(names, 0.0) | terms for name, terms in parts.items()} if detail else None)


def _parts(s: Shape, kf: bool, sharded: bool, pp: int, tp: int, ep: int, first: bool, last: bool, layers: int,
           moe_n: int, local: float, unsharded: float, unit: float, embed: float, out_w: float, tokens: float,
           held: float, microbatches: int, per_token: dict, ddp: bool = False, regime: str = "param",
           copies: float = 0.0) -> dict:
    """What one stage holds at each moment of a step where its peak can fall: {phase: {term: bytes}}.

    The moments (docs/cost-model.md, "Memory": the phases; each measured on torchtitan's own step by
    tests/memory_fake_worker.py): the end of the forward with the loss computed ("forward"), the loss's backward
    with every layer's activations still held ("loss_backward"), the backward of the stage's last layer (every
    layer's activations, the layer recomputed, its gradients, two units gathered, the reduce-scatter buffers:
    "layer_backward") and of its first (the gradients all produced, one layer's activations left:
    "first_layer_backward"), and the optimizer step ("optimizer"). ``regime``: ``precision``'s; ``copies``: the
    bytes of the weights' autocast copies, held through the forward (autocast's cache, until the forward's
    autocast region exits) and, without checkpointing, through the backward (saved by their matmuls)."""
    a, d, V = 4 if regime == "fp32" else s.compute_bytes, s.dim or 0, s.vocab or 0
    states = {"params": local * s.state_bytes, "optimizer": 2 * local * s.state_bytes}
    grads = local * s.state_bytes
    accumulating = microbatches > 1
    # FSDP2 upcasts unsharded gradients to reduce_dtype (fp32) and keeps them while gradient sync is off
    # (torch fsdp/_fully_shard/_fsdp_param.py to_accumulated_grad_if_needed): KempnerForge's maybe_no_sync
    # (training/grad.py:15-40) with grad_accum_steps > 1, and torch.pipelining's stage with FSDP
    # (pipelining/stage.py: set_requires_gradient_sync(False) before the last backward)
    no_sync = sharded and (pp > 1 or s.accumulate_unsharded) and accumulating
    # gradients of the step's earlier microbatches, alive through a later microbatch's forward: the unsharded fp32
    # ones without sync, else the sharded ones (torchtitan reduce-scatters every microbatch, train.py:530-545);
    # the step's first microbatch starts with none (zero_grad(set_to_none=True) after the previous step)
    carried = {"unsharded_grads": unsharded * s.reduce_bytes} if no_sync else {"grads": grads} if accumulating else {}
    # the FSDP2 units gathered: torchtitan with pp keeps the whole stage gathered between forward and backward
    # (parallelize.py:327, reshard_after_forward = not pp_enabled); otherwise the root's parameters, which FSDP2
    # does not reshard after forward (KempnerForge's root holds embedding, norm and output, distributed/
    # parallel.py:281-289, for the whole step; torchtitan's [norm, output] group, reshard_after_forward False,
    # models/llama3/infra/parallelize.py:347-355, until its backward), and in a layer's backward the unit computing
    # and the one prefetched (measured: one unsharded, one in the all-gather buffer)
    whole = sharded and (pp > 1 or not s.reshard_after_forward) and not kf
    kf_root = ((embed if first else 0) + (out_w if last else 0)) / tp if kf else 0.0
    # Accelerate's tail unit [final norm, lm_head] (reshard_after_forward False) takes the embedding when tied
    tail = embed if s.tied and s.framework == "accelerate" else out_w
    tt_root = (tail if last else 0) / tp if not kf else 0.0
    gathered_fwd = unsharded * a if whole else (kf_root + tt_root) * a if sharded else 0.0
    gathered_bwd = unsharded * a if whole else (2 * unit + kf_root) * a if sharded else 0.0
    if no_sync:
        # only the last microbatch reduces: one unit's accumulated fp32 gradient copied into the reduce-scatter input
        reduce = unit * s.reduce_bytes
    elif sharded:
        # reduce-scatter of one unit: its unsharded gradient in the compute dtype and its fp32 copy, and the previous
        # unit's fp32 input, which FSDP2 holds until the next reduce-scatter is issued (not seen by a fake run,
        # whose collectives complete at once)
        reduce = unit * (a + 2 * s.reduce_bytes)
    elif ddp:
        # DDP's reducer allocates its gradient buckets (bucket_cap_mb=100, every bucket at construction) as a copy
        # of all the gradients, alive for the whole step (torch nn/parallel/distributed.py, gradient_as_bucket_view
        # False as torchtitan 0.2.x's apply_ddp leaves it)
        reduce = local * s.state_bytes
    else:
        reduce = 0.0
    phases = {}
    if tokens:
        per_layer = per_token[s.ac, False] * (layers - moe_n) + per_token[s.ac, True] * moe_n
        if moe_n and ep > 1 and s.sac_saves_all_to_all and _op_sac(s):
            # op-level SAC keeps the outputs of the save list's all_to_all_single: each MoE layer's dispatched tokens
            # and its combined outputs (top_k copies of each token, each way) stay alive until the layer's backward
            per_layer += 2 * s.top_k * d * a / tp * moe_n
        acts = per_layer * tokens * held
        one_layer = per_layer / max(1, layers) * tokens
        # a layer's backward: the saved set of a layer with no checkpointing (what recomputation rebuilds) and the
        # gradients in flight (the block's output and input gradient, two of the MLP hidden's: 2·(2d + 2F)/tp per
        # token), less the layer's own saved set, which ``acts`` already holds
        none = per_token["none", moe_n > 0] * tokens
        work = none - one_layer + a * (2 * d + 2 * (s.ffn_hidden or 0)) / tp * tokens
        moe = {"moe_dispatch": 2 * tokens / tp * s.top_k * d * a} if moe_n and ep > 1 else {}
        # the weights' autocast copies past the forward: those of the layers whose matmuls keep their inputs
        kept = copies * _uncheckpointed(s)
        fwd = {**states, **carried, "fsdp_unsharded": gathered_fwd, "activations": acts + copies, **moe,
               **({"reduce_buffers": reduce} if ddp else {})}
        if last and V:
            # the final norm and the output projection's (gathered) input
            fwd["activations"] += (norm_per_token(s, regime, tp) + a * d) * tokens
            # the logits and the loss, by the elements of the logits this GPU computes (U: their fp32 bytes)
            if kf:
                # bf16 cross-entropy on logits gathered to the full vocabulary (output ColwiseParallel with
                # Replicate output, tensor_parallel.py:168-172; training/loss.py): forward the logits and their
                # log-softmax, backward also both gradients
                unit_logits = tokens * V * 2
                forward_loss, backward_loss = 2 * unit_logits, 4 * unit_logits
            else:
                # torchtitan: fp32 cross-entropy (components/loss.py:20-24, .float()), loss parallel over tp unless
                # disabled; measured: forward the bf16 logits, their fp32 copy and the log-softmax (loss parallel:
                # also its shifted logits and their exp, torch tensor/parallel/loss.py _log_softmax); backward the
                # saved log-softmax and two fp32 gradients (loss parallel: three fp32 temporaries,
                # _nll_loss_and_log_softmax_backward)
                lp = s.loss_parallel and tp > 1
                u = tokens * V * 4 / (tp if lp else 1)
                forward_loss, backward_loss = (3.5 * u, 4 * u) if lp else (2.5 * u, 3 * u)
                if a == 4:  # fp32 logits: the loss's .float() copies nothing, and they are u, not u/2
                    forward_loss -= 0.5 * u
                if s.compiled_loss and not lp:
                    # inductor fuses .float(), the log-softmax and the nll into reductions (its forward graph saves
                    # the logits and two [tokens, 1] statistics; its backward writes one gradient in the logits'
                    # dtype: bench/compiled_loss.py): the logits through the forward, then with their gradient
                    logits = tokens * V * a
                    forward_loss, backward_loss = logits, 2 * logits
                if s.framework == "accelerate":
                    # the training loop of Accelerate's examples keeps ``outputs`` (its bf16 logits) through backward
                    backward_loss += 0.5 * u
            if s.loss_chunks and not kf:
                # ChunkedLossWrapper (components/loss.py, 0.3.0 and main): the output projection and the loss run on
                # one chunk of the tokens at a time, each chunk's backward at once, so one chunk's logits are alive;
                # a [tokens, dim] fp32 buffer gathers the hidden states' gradient (GradAccumulator), and with FSDP
                # the output projection stays gathered with gradient sync off until the last chunk, so its unsharded
                # gradient accumulates in the reduce dtype (set_requires_gradient_sync(False); torch
                # fsdp/_fully_shard/_fsdp_param.py to_accumulated_grad_if_needed)
                # The loop's ``logits`` keeps a chunk's logits bound through that chunk's backward (which the
                # uncompiled loss does not save) and into the next chunk's forward, until lm_head returns the next.
                gathered = tokens * d * 4
                chunk = tokens * V * a / s.loss_chunks / (tp if lp else 1)
                forward_loss = forward_loss / s.loss_chunks + gathered + (chunk if s.loss_chunks > 1 else 0.0)
                backward_loss = backward_loss / s.loss_chunks + gathered + (
                    out_w / tp * s.reduce_bytes if sharded and s.loss_chunks > 1 else 0.0) + (
                    0.0 if s.compiled_loss and not lp else chunk)  # a compiled loss saves them: counted already
            phases["forward"] = {**fwd, "logits_loss": forward_loss}
            phases["loss_backward"] = {**fwd, "activations": fwd["activations"] - copies + kept,
                                       "logits_loss": backward_loss}
        else:
            phases["forward"] = fwd
        bwd = {**states, **carried, "fsdp_unsharded": gathered_bwd, "reduce_buffers": reduce, **moe}
        phases["layer_backward"] = {**bwd, "activations": acts + kept, "recompute": work}
        # the stage's first layer: every gradient produced (sharded unless sync is off), one layer's activations of
        # this microbatch left, the other microbatches' the stage holds
        rest = acts * (held - 1) / held if held else 0.0
        done = {"unsharded_grads": unsharded * s.reduce_bytes} if no_sync else {"grads": grads}
        phases["first_layer_backward"] = {**bwd, **done, "activations": rest + one_layer + kept / max(1, layers),
                                          "recompute": work}
    else:
        phases["forward"] = {**states, **carried, "fsdp_unsharded": gathered_fwd,
                             **({"reduce_buffers": reduce} if ddp else {})}
    # the optimizer step: fused AdamW (both frameworks' default) adds nothing; foreach two full-size temporaries of
    # the sharded states
    phases["optimizer"] = {**states, "grads": grads, **({"reduce_buffers": reduce} if ddp else {}),
                           "optimizer_step": 2 * local * s.state_bytes if s.foreach_optimizer else 0.0}
    return phases


def _uncheckpointed(s: Shape) -> float:
    """The share of a stage's layers whose forward keeps everything for the backward (no checkpointing)."""
    if s.ac == "none":
        return 1.0
    if s.ac == "memory_budget":
        return max(0.0, min(1.0, s.memory_budget))
    if s.ac == "selective" and s.ac_option.isdigit():
        return 1 - 1 / max(1, int(s.ac_option))
    return 0.0


def _op_sac(s: Shape) -> bool:
    """torchtitan's op-level selective activation checkpointing (its save list and every-other-mm policy)."""
    return s.framework == "torchtitan" and s.ac == "selective" and not s.ac_option.isdigit()


_PER_TOKEN: dict = {}  # (shape, tp, regime) -> _per_token's answer; a dict, not functools (its import costs a run)


def _per_token(s: Shape, tp: int, regime: str) -> dict:
    """Bytes per token per layer for the shape's AC mode and with none (the recomputed layer), dense and MoE."""
    key = (s, tp, regime)
    hit = _PER_TOKEN.get(key)
    if hit is None:
        if len(_PER_TOKEN) >= 256:  # a layout search asks for many shapes: keep the cache bounded
            _PER_TOKEN.clear()
        hit = _PER_TOKEN[key] = {(ac, moe): layer_bytes_per_token(s, ac, tp, moe, regime)
                                 for ac, moe in ((s.ac, False), (s.ac, True), ("none", False), ("none", True))}
    return hit


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
