"""The whole per-GPU peak of a Hugging Face Accelerate 1.15.0 run (FSDP2, FSDP1, DDP): the model's sizes from its
``config.json``, the dtypes, sharding and checkpointing Accelerate applies from the config file and launch line, and
the batch and sequence where the training script's arguments give them, priced by meshlint.mesh.memory (torchtitan's
FSDP2 arithmetic, ``framework="accelerate"``). Every term's source is in docs/cost-model.md ("Memory of an
Accelerate run"). No torch."""

from __future__ import annotations

from meshlint.errors import InputError
from meshlint.mesh import memory

# FSDP1's sharding strategies by name and by number (accelerate/utils/constants.py FSDP_SHARDING_STRATEGY)
STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")
MULTI_DEVICE = ("MULTI_GPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_NPU", "MULTI_XPU", "MULTI_HPU",
                "MULTI_NEURON")
# training-script flags (Transformers' TrainingArguments and examples, TRL): the per-device batch and the sequence
BATCH_FLAGS = ("--per_device_train_batch_size", "--per-device-train-batch-size", "--micro_batch_size")
SEQ_FLAGS = ("--max_seq_length", "--max-seq-length", "--max_length", "--max-length", "--block_size", "--seq_length",
             "--seq_len", "--max_seq_len", "--model_max_length")
# config.json's tie_word_embeddings is left out when it equals the class default (save_pretrained writes the diff):
# True for these model types (Transformers' Gemma*/GPT-2 configs), False for Llama, Mistral, Qwen2/3, Mixtral
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text", "gpt2")


def _flag(args: list, names: tuple):
    """The value of the last of ``names`` in a script's arguments (``--x v`` or ``--x=v``); "true" for a bare switch."""
    found = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name:
                nxt = args[i + 1] if i + 1 < len(args) else None
                found = nxt if nxt is not None and not nxt.startswith("--") else "true"
            elif arg.startswith(name + "="):
                found = arg.split("=", 1)[1]
    return found


def _int(text) -> int | None:
    try:
        value = int(str(text))
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def _true(value) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes", "y")


def settings(report) -> dict:
    """What Accelerate applies, as ``accelerate launch`` merges the config file and its flags (flags win) and the
    training script's own arguments (``--bf16``/``--fp16`` of TrainingArguments pass mixed_precision to the
    Accelerator, which wins over the launcher's ACCELERATE_MIXED_PRECISION)."""
    source, v = report.source, report.spec.values
    launch = getattr(source, "launch", None)
    config = getattr(source, "config", None) if launch is not None else source
    data = getattr(config, "data", None) if config is not None else None
    data = data if isinstance(data, dict) else {}
    fsdp = data.get("fsdp_config") if isinstance(data.get("fsdp_config"), dict) else {}
    flags = {k: w.text for k, w in (launch.flags.items() if launch is not None else ())}
    args = report.spec.extra.get("script_args") or []

    def get(flag: str, key: str, default):
        return flags[flag] if flag in flags else fsdp.get(key, default)

    precision = str(flags.get("mixed_precision", data.get("mixed_precision", "no"))).lower()
    for name in ("bf16", "fp16"):
        if _true(_flag(args, (f"--{name}",)) or "false"):
            precision = name
    checkpointing = _true(get("fsdp_activation_checkpointing", "fsdp_activation_checkpointing", False))
    script_ac = _flag(args, ("--gradient_checkpointing", "--gradient-checkpointing"))
    accum = _int(_flag(args, ("--gradient_accumulation_steps", "--gradient-accumulation-steps")) or
                 flags.get("gradient_accumulation_steps")) or 1
    return {"distributed_type": v.get("accelerate.distributed_type"), "fsdp_version": str(v.get(
        "accelerate.fsdp_version") or "1"), "mixed_precision": precision,
            "fsdp_ac": checkpointing, "script_ac": script_ac is not None and _true(script_ac),
            "reshard": get("fsdp_reshard_after_forward", "fsdp_reshard_after_forward", None),
            "strategy": get("fsdp_sharding_strategy", "fsdp_sharding_strategy", None),
            "offload": _true(get("fsdp_offload_params", "fsdp_offload_params", False)),
            "batch": _int(_flag(args, BATCH_FLAGS)), "seq": _int(_flag(args, SEQ_FLAGS)), "accumulation": accum}


def strategy(value) -> str:
    """FSDP1's sharding strategy from fsdp_sharding_strategy / fsdp_reshard_after_forward (a name or 1-5)."""
    text = str(value if value is not None else "FULL_SHARD").strip().upper()
    if text.isdigit() and 1 <= int(text) <= len(STRATEGIES):
        return STRATEGIES[int(text) - 1]
    return text if text in STRATEGIES else "FULL_SHARD"


def model_shape(cfg: dict, ac: str, compute: int, state: int, reduce: int, reshard: bool, accumulate: bool):
    """(Shape, note or None) of a Llama-like decoder's config.json (Llama, Mistral, Qwen2/3, Gemma, Mixtral,
    Qwen-MoE), or (None, why) where its sizes are not those of one."""
    def n(*keys):
        for key in keys:
            value = cfg.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    d, L, heads, V = n("hidden_size"), n("num_hidden_layers"), n("num_attention_heads"), n("vocab_size")
    ffn = n("intermediate_size")
    if not (d and L and heads and V and ffn):
        return None, ("its config.json lacks hidden_size, num_hidden_layers, num_attention_heads, vocab_size or "
                      "intermediate_size (not a Llama-like decoder meshlint sizes)")
    if n("kv_lora_rank", "q_lora_rank"):
        return None, "multi-head latent attention (DeepSeek) is not sized yet"
    kv = n("num_key_value_heads") or heads
    head_dim = n("head_dim") or d // heads
    hq, hkv = heads * head_dim, kv * head_dim
    experts = n("num_local_experts", "num_experts", "n_routed_experts") or 0
    top_k = n("num_experts_per_tok") or 0 if experts else 0
    moe_hidden = n("moe_intermediate_size") or ffn if experts else 0
    shared = (n("shared_expert_intermediate_size") or 0) // moe_hidden if experts and moe_hidden else 0
    tied = cfg.get("tie_word_embeddings", cfg.get("model_type") in TIED_BY_DEFAULT) is True
    bias = hq + 2 * hkv if cfg.get("attention_bias") is True or cfg.get("model_type") in ("qwen2", "qwen2_moe") else 0
    attn = d * hq + 2 * d * hkv + hq * d + bias + 2 * d            # q, k, v, o (+ biases), the two norms
    if experts:
        mlp = experts * 3 * d * moe_hidden + experts * d + shared * 3 * d * moe_hidden  # experts, router, shared
    else:
        mlp = 3 * d * ffn                                         # gate, up, down
    params = V * d * (1 if tied else 2) + L * (attn + mlp) + d
    note = None if cfg.get("model_type") in _SIZED else (
        f"model_type {cfg.get('model_type')!r} sized as a Llama-like decoder (GQA attention, gated MLP)")
    return memory.Shape(
        framework="accelerate", params=params, n_layers=L, dim=d, ffn_hidden=moe_hidden * (top_k + shared)
        if experts else ffn, n_heads=heads, n_kv_heads=kv, head_dim=head_dim, vocab=V, tied=tied,
        num_experts=experts, moe_layers=L if experts else 0, moe_hidden=moe_hidden, top_k=top_k,
        shared_experts=shared, expert_params=L * experts * 3 * d * moe_hidden if experts else 0, ac=ac,
        state_bytes=state, compute_bytes=compute, accumulate_unsharded=accumulate, loss_parallel=False,
        ddp_replicate=True, reduce_bytes=reduce, reshard_after_forward=reshard, sequence_parallel=False,
        # Transformers' LlamaRMSNorm keeps its fp32 input and the normalised tensor cast back to the compute dtype
        norm_bytes=4 + compute), note


_SIZED = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "mixtral", "qwen3_moe", "olmo2")


def layout(st: dict, degrees: dict, world: int | None, gpus_per_node: int | None) -> tuple:
    """(degrees for meshlint.mesh.memory, None) or (None, why): the ranks each state is sharded over."""
    tp, dr, ds, cp = (degrees.get(k) or 1 for k in ("tp", "dp_replicate", "dp_shard", "cp"))
    dtype = st["distributed_type"]
    base = {"pp": 1, "ep": 1, "etp": 1, "tp": tp, "cp": 1, "dp_shard": 1, "dp_replicate": 1}
    if dtype == "FSDP" and st["fsdp_version"] == "2":
        if dr * ds * tp * cp == 1:  # no ParallelismConfig: fully_shard over the whole world (fsdp2_prepare_model)
            if not world:
                return None, "the world size is not known"
            return {**base, "dp_shard": world}, None
        return {**base, "dp_replicate": dr, "dp_shard": ds, "cp": cp}, None
    if dtype == "FSDP":
        if not world:
            return None, "the world size is not known"
        kind = strategy(st["strategy"] if st["strategy"] is not None else st["reshard"])
        if kind == "NO_SHARD":
            return {**base, "dp_replicate": world}, None
        if kind.startswith("HYBRID"):  # shards within a node, replicates across nodes (torch FSDP1)
            if not gpus_per_node or world % gpus_per_node:
                return None, "HYBRID_SHARD shards within a node: the GPUs per node are not known"
            return {**base, "dp_shard": gpus_per_node, "dp_replicate": world // gpus_per_node}, None
        return {**base, "dp_shard": world}, None
    if dtype in MULTI_DEVICE or dtype == "NO":
        return {**base, "dp_replicate": max(1, (world or 1) // tp)}, None
    return None, f"distributed_type {dtype} is not sized yet (FSDP, FSDP2 and DDP are)"


def sized(report) -> tuple:
    """(Shape, settings, (note on the model or None, note on the dtypes or None)) of an Accelerate run's model as
    Accelerate trains it (dtypes, sharding kind, checkpointing), or (None, settings, why) where there is nothing to size: no model config, offload, an
    unreadable or unrecognised config.json. Shared by the check's estimate and suggest's cost model."""
    from meshlint.inputs.hf_model import load_config

    st = settings(report)
    path = report.spec.extra.get("model_config_path")
    if not path:
        return None, st, "the launch names no model whose config.json meshlint can read"
    if st["offload"]:
        return None, st, "fsdp_offload_params keeps the parameters, gradients and optimizer states on the CPU"
    try:
        cfg = load_config(path)
    except InputError as exc:
        return None, st, exc.message
    fsdp = st["distributed_type"] == "FSDP"
    fsdp2 = fsdp and st["fsdp_version"] == "2"
    mp = st["mixed_precision"]
    # Accelerate upcasts trainable parameters to fp32 under mixed precision for FSDP2 (utils/fsdp_utils.py:815-820)
    # and FSDP1 (accelerator.py:1996-2038); otherwise they keep the dtype the script loaded: config.json's
    # (from_pretrained's default dtype="auto" in Transformers 5), fp32 where it names none
    loaded = DTYPE_BYTES.get(str(cfg.get("dtype") or cfg.get("torch_dtype")), 4)
    upcast = fsdp and mp != "no"
    state = 4 if upcast else loaded
    compute = loaded if mp == "no" else 2     # autocast / MixedPrecisionPolicy.param_dtype (fp8: bf16)
    # the MixedPrecisionPolicy's reduce_dtype is the compute dtype (utils/dataclasses.py:2136-2140); DDP reduces the
    # gradients in the parameters' dtype
    reduce = compute if fsdp else state
    kind = strategy(st["strategy"] if st["strategy"] is not None else st["reshard"])
    reshard = (not fsdp) or (_true(st["reshard"]) if fsdp2 and st["reshard"] is not None else
                             fsdp2 or kind in ("FULL_SHARD", "HYBRID_SHARD"))
    ac = "full" if (fsdp and st["fsdp_ac"]) or st["script_ac"] else "none"
    shape, note = model_shape(cfg, ac, compute, state, reduce, reshard, fsdp and st["accumulation"] > 1)
    if shape is None:
        return None, st, note
    dtypes = None
    if not upcast:
        dtypes = (f"parameters, gradients and AdamW moments in {'fp32' if state == 4 else 'the 16-bit dtype'} of "
                     "config.json (from_pretrained's dtype='auto'; Accelerate upcasts to fp32 only under FSDP with "
                     "mixed precision): a script that loads the model in another dtype changes them")
    return shape, st, (note, dtypes)


def tokens(st: dict) -> int | None:
    """Tokens of one microbatch on one rank (the script's per-device batch × sequence), or None where not given."""
    return st["batch"] * st["seq"] if st["batch"] and st["seq"] else None


def file_memory(report, res, options, finish) -> dict | None:
    """``files[].memory`` of an Accelerate config (``finish``: memory_check's common tail); None, with a note on the
    resolution saying why, where the model, the world or the distributed type leaves nothing to size."""
    if not report.spec.extra.get("model_config_path") or res.framework_error:
        return None

    def skip(why: str) -> None:
        note = f"memory: not estimated ({why})"
        if note not in res.notes:
            res.notes.append(note)

    shape, st, found = sized(report)
    if shape is None:
        return skip(found)
    topo = report.topology
    degrees, why = layout(st, res.degrees or {}, getattr(topo, "world_size", None) or res.world_used,
                          getattr(topo, "gpus_per_node", None))
    if degrees is None:
        return skip(why)
    mb_tokens = tokens(st)
    try:
        peak = memory.estimate(shape, degrees, mb_tokens, st["accumulation"], None)
    except (ArithmeticError, TypeError, ValueError):
        return None
    if peak is None:
        return None
    out = finish(peak, options, shape.ac)
    model_note, dtype_note = found
    notes = [model_note] if model_note else []
    out["lower_bound"] = mb_tokens is None
    if mb_tokens is None:
        notes.append("the batch and sequence are the training script's (no --per_device_train_batch_size and "
                     "--max_seq_length/--block_size on the launch line): model states and buffers only, a lower bound")
        out["summary"] += " (a lower bound: no activations, the batch and sequence are the training script's)"
        if out.get("fits") is True:
            out["fits"] = None  # under the capacity says nothing without the activations
    if dtype_note:
        notes.append(dtype_note)
    out["notes"] = notes
    return out
