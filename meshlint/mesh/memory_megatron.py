"""The whole peak memory of one GPU for a Megatron-LM launch, per pipeline rank, from its flags alone (no torch).

Megatron-Core keeps no FSDP units: every rank holds its stage's parameters whole (÷ tp, experts ÷ ep·etp), a
full-size gradient buffer, and the optimizer's fp32 main parameters and moments, sharded over the data-parallel
ranks with --use-distributed-optimizer. The terms and where each comes from:

- parameters from the flags (megatron/training/theoretical_memory_usage.py counts the same ones): per layer QKV
  ``h·(q + 2·kv)``, the projection ``q·h``, the MLP ``h·F·(2 if --swiglu) + F·h``, biases unless
  --disable-bias-linear, two norms (LayerNorm 2h, RMSNorm h); a MoE layer (--moe-layer-freq) has a router ``E·h``,
  E experts of --moe-ffn-hidden-size and the shared expert; the embedding ``V·h`` (+ positions with the default
  learned_absolute), the output layer unless tied (a tied last stage without the embedding keeps its own copy,
  LanguageModule.setup_embeddings_and_output_layer), the final norm. V is the padded vocabulary
  (arguments.py ``_vocab_size_with_padding``: a multiple of --make-vocab-size-divisible-by · tp).
- bytes per parameter (docs/source/api-guide/dist_optimizer.md, "6 + 12/d" for bf16): the bf16/fp16 parameter,
  its gradient in the DDP buffer (fp32 for bf16: arguments.py:711-723 accumulates in fp32 unless
  --grad-reduce-in-bf16), and with mixed precision an fp32 main copy, Adam's two fp32 moments (SGD: one with
  momentum); the last three ÷ dp·cp (experts: ÷ the expert data-parallel size) with the distributed optimizer,
  ÷ --num-distributed-optimizer-instances fewer.
- activations per layer and token: Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
  Transformer Models", §4.1-4.2: 34·s·b·h per layer, 10 of it replicated over tp unless sequence parallel,
  5·a·s²·b for the attention scores) recounted for the layer the flags describe: both norms' inputs and outputs,
  Q, K, V and the attention output, flash/fused attention's fp32 log-sum-exp instead of the scores (the default
  --attention-backend; unfused and local keep the scores, softmax and dropout mask), the MLP's FC1 output and
  activation, 1-byte dropout masks where --hidden-dropout > 0; MoE: the router's fp32 logits and, per routed
  copy (top-k), the dispatched input, FC1 output, activation and expert output (gathered over etp).
  --recompute-granularity selective drops what --recompute-modules recompute (core_attn by default: the scores
  or the log-sum-exp); full keeps each recomputed layer's input: uniform one per --recompute-num-layers layers,
  block the first N layers of each virtual stage. The recomputed layers of one microbatch are alive again in the
  backward. Sequence parallelism shards everything over tp, cp the sequence.
- microbatches in flight (megatron/core/pipeline_parallel/schedules.py, get_pp_rank_microbatches): 1F1B holds
  min(pp − rank, m) microbatches of the stage; interleaved holds (pp − rank − 1)·2 + (vp − 1)·pp + 1 virtual
  stages' microbatches (microbatch_group_size_per_vp_stage = pp), at most m·vp.
- the last stage: the final norm, bf16 logits and their fp32 copy the vocab-parallel cross-entropy keeps
  (tensor_parallel/cross_entropy.py: ``.float()``, exp in place): (2 + 4)·tokens·V/tp.
- the caching allocator's reserve and the CUDA context as for the other frameworks (meshlint.mesh.memory).
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from meshlint.mesh.memory import Peak, stage_at_peak

# the vocabulary a tokenizer type implies where the flags do not give it (GPT-2's BPE: 50,257 tokens)
TOKENIZER_VOCAB = {"GPT2BPETokenizer": 50257}
MAX_LAYERS = 100_000  # the estimate walks the layers one by one: a larger count is not a model, not estimated
TERMS = ("params", "grads", "main_params", "optimizer", "activations", "recompute", "logits_loss",
         "allocator_reserve", "cuda_context")


class Sizes(NamedTuple):
    """The model as the flags describe it (Megatron-LM's GPT: megatron/core/models/gpt)."""

    layers: int
    hidden: int
    heads: int
    groups: int
    kv_channels: int
    ffn: int
    swiglu: bool
    bias: bool
    qkv_bias: bool
    norm: int                  # parameters per norm element: LayerNorm 2, RMSNorm 1
    vocab: int | None          # padded
    positions: int             # learned absolute position embeddings
    tied: bool
    experts: int
    moe_ffn: int
    shared_ffn: int
    topk: int
    moe_layers: tuple          # 1 per MoE layer, 0 per dense one
    mla: "MLA | None" = None   # multi-latent attention's shapes, None for standard attention


class MLA(NamedTuple):
    """Multi-latent attention (megatron/core/transformer/multi_latent_attention.py MLASelfAttention, 0.16.1)."""

    q_lora: int                # 0: no query compression (linear_q_proj)
    kv_lora: int
    qk: int                    # qk_head_dim
    pe: int                    # qk_pos_emb_head_dim
    v: int                     # v_head_dim
    qk_norm: bool              # q_layernorm / kv_layernorm (qk_layernorm), else IdentityOp
    down_tp: int               # the down projections' tp shards: TELinear 'duplicated' (1); the local spec's
                               # ColumnParallelLinear (tp)


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def moe_pattern(value, layers: int) -> tuple | None:
    """--moe-layer-freq (arguments.py moe_freq_type): an int N makes every Nth layer (from the first) MoE; a
    string is a Python list expression such as ``([1]*3+[0]*1)*3``, evaluated here without ``eval``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return tuple(1 if value > 0 and i % value == 0 else 0 for i in range(layers))
    if isinstance(value, (list, tuple)):   # a Megatron-Bridge provider's own per-layer list
        return tuple(1 if x else 0 for x in value) if len(value) == layers else None
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return moe_pattern(int(text), layers)
        got = pattern_list(text)
        return tuple(1 if x else 0 for x in got) if got is not None and len(got) == layers else None
    return None


def pattern_list(text: str) -> list | None:
    """A per-layer pattern written as a Python list expression (``([1]*3+[0]*1)*3``: what arguments.py's
    _eval_pattern accepts for --moe-layer-freq and --no-rope-freq), evaluated without ``eval``; None for anything
    else (a tuple, a name, a call, a list of millions)."""
    try:
        got = _list_expr(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return got if isinstance(got, list) else None


def _list_expr(node):
    """Literal ints and lists, ``+`` and ``*``: what moe_freq_type's strings use."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.List):
        return [_list_expr(e) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _list_expr(node.left), _list_expr(node.right)
        if isinstance(node.op, ast.Mult) and isinstance(left, list) and isinstance(right, int):
            if len(left) * right > 1_000_000:
                raise ValueError("too long")
        return left + right if isinstance(node.op, ast.Add) else left * right
    raise ValueError("not a list expression")


def vocabulary(a: dict, tp: int) -> int | None:
    """The padded vocabulary (arguments.py _vocab_size_with_padding), or None where the tokenizer decides it."""
    kind = a.get("tokenizer_type")
    size = _int(a.get("padded_vocab_size"))
    if size:
        return size
    if kind == "NullTokenizer" and _int(a.get("vocab_size")):
        raw = a["vocab_size"] + 1          # NullTokenizer adds the end-of-document token
    elif kind in TOKENIZER_VOCAB:
        raw = TOKENIZER_VOCAB[kind]
    elif kind is None and _int(a.get("vocab_size")):
        raw = a["vocab_size"]
    else:
        return None
    multiple = (_int(a.get("make_vocab_size_divisible_by")) or 128) * tp
    return -(-raw // multiple) * multiple


def sizes(a: dict, tp: int) -> Sizes | None:
    """The model's sizes from the flags, or None without the three the model needs."""
    L, h, heads = _int(a.get("num_layers")), _int(a.get("hidden_size")), _int(a.get("num_attention_heads"))
    if not (L and h and heads) or L > MAX_LAYERS:
        return None
    swiglu = bool(a.get("swiglu"))
    ffn = _int(a.get("ffn_hidden_size")) or (int((4 * h * 2 / 3) / 64) * 64 if swiglu else 4 * h)  # args.py:802
    experts = _int(a.get("num_experts")) or 0
    pattern = moe_pattern(a.get("moe_layer_freq", 1), L) if experts else (0,) * L
    positions = _int(a.get("max_position_embeddings")) or 0
    return Sizes(
        layers=L, hidden=h, heads=heads,
        groups=(_int(a.get("num_query_groups")) or heads) if a.get("group_query_attention") else heads,
        kv_channels=_int(a.get("kv_channels")) or h // heads, ffn=ffn, swiglu=swiglu,
        bias=a.get("add_bias_linear", True) is not False, qkv_bias=bool(a.get("add_qkv_bias")),
        norm=1 if a.get("normalization") == "RMSNorm" else 2, vocab=vocabulary(a, tp),
        positions=positions if a.get("position_embedding_type", "learned_absolute") == "learned_absolute" else 0,
        tied=not a.get("untie_embeddings_and_output_weights"), experts=experts,
        moe_ffn=_int(a.get("moe_ffn_hidden_size")) or ffn, shared_ffn=_int(a.get("moe_shared_expert_intermediate_size"))
        or 0, topk=_int(a.get("moe_router_topk")) or 2, moe_layers=pattern or (1,) * L, mla=mla(a, tp))


def mla(a: dict, tp: int) -> MLA | None:
    """--multi-latent-attention's shapes (arguments.py defaults: --q-lora-rank None, --kv-lora-rank 32,
    --qk-head-dim 128, --qk-pos-emb-head-dim 64, --v-head-dim 128), or None without it."""
    if not a.get("multi_latent_attention"):
        return None
    local = a.get("transformer_impl") == "local"
    return MLA(q_lora=_int(a.get("q_lora_rank")) or 0, kv_lora=_int(a.get("kv_lora_rank")) or 32,
               qk=_int(a.get("qk_head_dim")) or 128, pe=_int(a.get("qk_pos_emb_head_dim")) or 64,
               v=_int(a.get("v_head_dim")) or 128, qk_norm=bool(a.get("qk_layernorm")), down_tp=tp if local else 1)


def attention_params(m: Sizes, tp: int) -> float:
    """One layer's attention parameters on one tp rank, its input norm excluded. Standard: QKV and the projection
    (column- and row-parallel) and their biases. MLA (no biases but the projection's): the query and key-value
    down projections (whole on every tp rank with Transformer Engine), their norms (whole), the up projections to
    heads·(qk + pe) and heads·(qk + v), and the projection from heads·v (÷ tp)."""
    h = m.hidden
    if m.mla is None:
        q, kv = m.heads * m.kv_channels, m.groups * m.kv_channels
        return (h * (q + 2 * kv) + (q + 2 * kv if m.bias or m.qkv_bias else 0) + q * h) / tp + (h if m.bias else 0)
    c = m.mla
    q_head = c.qk + c.pe
    if c.q_lora:
        query = h * c.q_lora / c.down_tp + c.q_lora * m.heads * q_head / tp + (m.norm * c.q_lora if c.qk_norm else 0)
    else:
        query = h * m.heads * q_head / tp
    kv = h * (c.kv_lora + c.pe) / c.down_tp + c.kv_lora * m.heads * (c.qk + c.v) / tp + \
        (m.norm * c.kv_lora if c.qk_norm else 0)
    return query + kv + m.heads * c.v * h / tp + (h if m.bias else 0)


def layer_params(m: Sizes, tp: int = 1) -> tuple:
    """(dense layer, MoE layer without its routed experts, one MoE layer's routed experts) parameters on one tp
    rank: the column- and row-parallel weights and the column-parallel biases ÷ tp; the norms, the row-parallel
    biases and the router whole on every rank (megatron/core/tensor_parallel/layers.py)."""
    h = m.hidden
    gate = 2 if m.swiglu else 1
    attn = attention_params(m, tp)
    norms = 2 * m.norm * h
    mlp = lambda f, t: (h * f * gate + f * h + (f * gate if m.bias else 0)) / t + (h if m.bias else 0)  # noqa: E731
    dense = attn + norms + mlp(m.ffn, tp)
    moe_rest = attn + norms + m.experts * (h + (1 if m.bias else 0)) + (mlp(m.shared_ffn, tp) if m.shared_ffn else 0)
    return dense, moe_rest, m.experts * mlp(m.moe_ffn, 1)


class Recipe(NamedTuple):
    """How the launch trains: dtypes, optimizer sharding, recomputation, attention backend."""

    param_bytes: int
    grad_bytes: int
    main_bytes: int            # fp32 main parameters (0 when the parameters are fp32 already)
    moment_bytes: int          # the optimizer's state per parameter
    act_bytes: int
    distributed: bool
    instances: int
    granularity: str | None    # None | "selective" | "full"
    modules: tuple             # --recompute-modules (selective)
    method: str | None         # "uniform" | "block"
    recompute_layers: int
    unfused: bool              # attention keeps its scores (unfused / local backend)
    hidden_dropout: bool
    attention_dropout: bool
    sp: bool


def recipe(a: dict) -> Recipe:
    bf16, fp16 = bool(a.get("bf16")), bool(a.get("fp16"))
    mixed = bf16 or fp16
    if bf16:  # arguments.py:711-723
        grad = 2 if a.get("grad_reduce_in_bf16") or a.get("main_grads_dtype") == "bf16" else 4
    elif fp16:
        grad = 4 if a.get("accumulate_allreduce_grads_in_fp32") else 2
    else:
        grad = 4
    opt = a.get("optimizer") or "adam"
    if opt == "sgd":
        moments = 4 if (a.get("sgd_momentum") or 0) > 0 else 0
    elif opt in ("muon", "dist_muon"):
        moments = 4    # one momentum buffer (the Adam fallback for embeddings and norms is not counted apart)
    else:
        moments = 8
    if a.get("use_precision_aware_optimizer"):
        width = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
        moments = width.get(a.get("exp_avg_dtype"), 4) + width.get(a.get("exp_avg_sq_dtype"), 4) if moments == 8 \
            else moments
    backend = str(a.get("attention_backend") or "")
    return Recipe(
        param_bytes=2 if mixed else 4, grad_bytes=grad,
        main_bytes=(2 if a.get("main_params_dtype") == "fp16" else 4) if mixed else 0, moment_bytes=moments,
        act_bytes=2 if mixed else 4, distributed=bool(a.get("use_distributed_optimizer")),
        instances=_int(a.get("num_distributed_optimizer_instances")) or 1,
        granularity=a.get("recompute_granularity"),
        modules=tuple(a.get("recompute_modules") or ("core_attn",)), method=a.get("recompute_method"),
        recompute_layers=_int(a.get("recompute_num_layers")) or 1,
        unfused=("unfused" in backend or "local" in backend),
        hidden_dropout=(a.get("hidden_dropout", 0.1) or 0) > 0, attention_dropout=(a.get("attention_dropout", 0.1)
                                                                                    or 0) > 0,
        sp=bool(a.get("sequence_parallel")))


def layer_bytes_per_token(m: Sizes, r: Recipe, tp: int, etp: int, seq: int, moe: bool, keep_all: bool = False) -> float:
    """Bytes one layer keeps for its backward per token of the microbatch on this rank (after the cp split), with
    the recipe's selective recomputation (``keep_all``: none, the layer being recomputed)."""
    x, h = r.act_bytes, m.hidden
    q, kv = m.heads * m.kv_channels, m.groups * m.kv_channels
    mods = set(r.modules) if r.granularity == "selective" and not keep_all else set()
    masks = (2 * h if r.hidden_dropout else 0)
    norms_in = 2 * x * h                          # the residual into each norm
    norms_out = 0 if "layernorm" in mods else 2 * x * h   # QKV's and FC1's input
    replicated = norms_in + norms_out + masks     # Korthikanti's 10·sbh: sharded only with sequence parallelism
    sharded = x * (q + 2 * kv) + x * q            # Q, K, V and the attention output (the projection's input)
    if m.mla is not None:
        c = m.mla
        # the compressed query and key-value (and their norms' outputs), whole on each tp rank; Q and K of
        # heads·(qk + pe), V and the attention output of heads·v, ÷ tp
        replicated += x * ((c.q_lora * (2 if c.qk_norm else 1)) + c.kv_lora + c.pe + (c.kv_lora if c.qk_norm else 0))
        sharded = x * m.heads * (2 * (c.qk + c.pe) + 2 * c.v)
    if "core_attn" not in mods:
        if r.unfused:   # the softmax's output, its dropout mask and output: Korthikanti's 5·a·s per token
            sharded += m.heads * seq * (x + ((1 + x) if r.attention_dropout else 0))
        else:           # flash / fused attention: the fp32 log-sum-exp per head
            sharded += 4 * m.heads
    gate = 2 if m.swiglu else 1
    hidden = lambda f: x * f * gate + x * f  # noqa: E731  (FC1's output and the activation's)
    local = 0.0         # per token of this rank's sequence shard: the routed experts' tensors
    if moe:
        replicated += 4 * m.experts               # the router's fp32 logits
        if m.shared_ffn and "shared_experts" not in mods:
            sharded += hidden(m.shared_ffn)
        if "moe" not in mods:
            act = 0 if "moe_act" in mods else x * m.moe_ffn
            # each routed copy: the dispatched input and the expert output (gathered over etp), FC1's output
            local = m.topk * (2 * x * h * etp + x * m.moe_ffn * gate + act)
    elif "mlp" not in mods:
        sharded += hidden(m.ffn)
    seq_shard = tp if r.sp else 1
    return replicated / seq_shard + sharded / tp + local / seq_shard


def held_chunks(pp: int, vp: int, m: int, rank: int, group: int | None = None) -> tuple:
    """(virtual-stage microbatches in flight at the peak, of how many virtual stages) for one pp rank."""
    m = max(1, m)
    if pp <= 1:
        return 1, 1
    if vp <= 1:
        return min(pp - rank, m), 1
    warmup = (pp - rank - 1) * 2 + (vp - 1) * (group or pp)
    return min(warmup + 1, m * vp), vp


def estimate(a: dict, degrees: dict, split: dict, microbatches: int | None, detail: bool = False) -> tuple:
    """(Peak, notes) for one layout, or (None, why) where the flags do not give the model's size."""
    tp, pp, cp = (degrees.get(k) or 1 for k in ("tp", "pp", "cp"))
    ep, etp = degrees.get("ep") or 1, degrees.get("etp") or tp
    dp = degrees.get("dp_shard") or 1
    m = sizes(a, tp)
    if m is None:
        return None, [f"the model's size needs --num-layers (at most {MAX_LAYERS:,}), --hidden-size and "
                      "--num-attention-heads"]
    r = recipe(a)
    notes = []
    if a.get("use_torch_fsdp2") or a.get("use_megatron_fsdp"):
        return None, ["FSDP (--use-torch-fsdp2 / --use-megatron-fsdp) is not modelled for Megatron yet"]
    if m.vocab is None:
        notes.append("the vocabulary comes from the tokenizer (give --vocab-size): embedding and logits not counted")
    if a.get("mtp_num_layers"):
        notes.append("the MTP layers are not counted")
    counts = split.get("counts") or [[m.layers // pp] * 1 for _ in range(pp)]
    vp = len(counts[0]) if counts else 1
    emb_at, loss_at = split.get("embedding_at") or (0, 0), split.get("loss_at") or (pp - 1, vp - 1)
    # layer ids per (rank, virtual stage): Megatron numbers them virtual stage first, then pp rank
    ids, at = {}, 0
    for v in range(vp):
        for rank in range(pp):
            ids[rank, v] = range(at, at + counts[rank][v])
            at += counts[rank][v]
    dense_p, moe_rest_p, expert_p = layer_params(m, tp)
    V, h = m.vocab or 0, m.hidden
    d_dense = max(1, dp * cp // r.instances)
    edp = max(1, (dp * cp * tp) // (etp * ep) // r.instances)   # world ÷ (etp·ep·pp), per instance
    seq = _int(a.get("seq_length")) or 0
    mbs = _int(a.get("micro_batch_size")) or 1
    tokens = mbs * seq / cp
    n_micro = microbatches or 1
    per_tok = {moe: layer_bytes_per_token(m, r, tp, etp, seq // cp, moe) for moe in (False, True)}
    full_tok = {moe: layer_bytes_per_token(m, r, tp, etp, seq // cp, moe, keep_all=True) for moe in (False, True)}
    layer_input = r.act_bytes * h / (tp if r.sp or a.get("distribute_saved_activations") else 1)
    stages = []
    for rank in range(pp):
        layers = [i for v in range(vp) for i in ids[rank, v]]
        moe_n = sum(m.moe_layers[i] for i in layers if i < len(m.moe_layers))
        dense_n = len(layers) - moe_n
        holds_e, holds_l = emb_at[0] == rank, loss_at[0] == rank
        p_dense = dense_n * dense_p + moe_n * moe_rest_p
        if holds_e:
            p_dense += V * h / tp + m.positions * h
        if holds_l:
            p_dense += m.norm * h + (V * h / tp if (not m.tied or not holds_e) else 0)
        p_expert = moe_n * expert_p / (ep * etp)
        local = p_dense + p_expert
        states = {"params": local * r.param_bytes, "grads": local * r.grad_bytes,
                  "main_params": (p_dense / (d_dense if r.distributed else 1)
                                  + p_expert / (edp if r.distributed else 1)) * r.main_bytes,
                  "optimizer": (p_dense / (d_dense if r.distributed else 1)
                                + p_expert / (edp if r.distributed else 1)) * r.moment_bytes}
        # activations of one microbatch of each virtual stage, with full recomputation's saved inputs
        chunk_acts, chunk_work = [], []
        for v in range(vp):
            ids_v = list(ids[rank, v])
            kinds = [bool(m.moe_layers[i]) if i < len(m.moe_layers) else False for i in ids_v]
            full = [full_tok[k] for k in kinds]
            if r.granularity == "full":
                n = r.recompute_layers
                if r.method == "block":
                    saved = sum(layer_input if j < n else per_tok[k] for j, k in enumerate(kinds))
                    work = max(full, default=0.0)
                else:  # uniform: the input of each chunk of n layers
                    saved = layer_input * -(-len(kinds) // n)
                    work = max((sum(full[j:j + n]) for j in range(0, len(full), n)), default=0.0)
            else:
                saved = sum(per_tok[k] for k in kinds)
                work = max(full, default=0.0) - max((per_tok[k] for k in kinds), default=0.0)
            extra = 0.0
            if holds_e and (rank, v) == tuple(emb_at) and r.hidden_dropout:
                extra += h / (tp if r.sp else 1)          # the embedding's dropout mask
            if holds_l and (rank, v) == tuple(loss_at):
                extra += 2 * r.act_bytes * h / (tp if r.sp else 1)   # the final norm's input and output
            chunk_acts.append((saved + extra) * tokens)
            chunk_work.append(work * tokens)
        held, of = held_chunks(pp, vp, n_micro, rank, _int(a.get("microbatch_group_size_per_vp_stage")))
        acts = sum(chunk_acts) * held / of if of else 0.0
        # the working set of one layer's backward: the gradients of its output and input and of the MLP's hidden
        grads_work = r.act_bytes * (2 * h / (tp if r.sp else 1) + 2 * m.ffn / tp) * tokens
        recompute = max(chunk_work, default=0.0) + grads_work
        logits = (r.act_bytes + 4) * tokens * V / tp if holds_l and V else 0.0
        phases = {"forward": {**states, "activations": acts, "logits_loss": logits},
                  "backward": {**states, "activations": acts, "recompute": recompute},
                  "optimizer": dict(states)}
        stages.append(stage_at_peak(rank, len(layers), held, phases, TERMS, detail))
    return Peak(tuple(stages), max(stages, key=lambda s: s.total)), notes


def parameter_count(a: dict) -> int | None:
    """The model's parameters (the embedding and output once each where tied), from the flags."""
    m = sizes(a, 1)
    if m is None:
        return None
    dense_p, moe_rest_p, expert_p = layer_params(m)
    moe_n = sum(m.moe_layers)
    V = vocabulary(a, 1) or 0
    return int((m.layers - moe_n) * dense_p + moe_n * (moe_rest_p + expert_p) + V * m.hidden * (1 if m.tied else 2)
               + m.positions * m.hidden + m.norm * m.hidden)
