"""What a Megatron-Bridge v0.3.1 recipe's ``ConfigContainer`` fields mean to Megatron-LM: the option dest each
field becomes (``FIELDS``), the memory-relevant fields and their Bridge/Megatron-Core defaults (``MEMORY_FIELDS``,
``DEFAULTS``), the sizes a Hugging Face config.json gives (``hf_sizes``), what the checkout's provider
``finalize()`` sets (``finalize_defaults``), and the option values core_0_16.read and memory_megatron take
(``megatron_args``, ``memory_dests``). The recipe's evaluation is inputs/bridge_recipe.py's."""

from __future__ import annotations

import ast
import json
import os

from meshlint.errors import InputError

# (section, field) of a ConfigContainer -> the Megatron-LM dest core_0_16.read takes it as
FIELDS = {
    ("model", "tensor_model_parallel_size"): "tensor_model_parallel_size",
    ("model", "pipeline_model_parallel_size"): "pipeline_model_parallel_size",
    ("model", "virtual_pipeline_model_parallel_size"): "num_virtual_stages_per_pipeline_rank",
    ("model", "context_parallel_size"): "context_parallel_size",
    ("model", "expert_model_parallel_size"): "expert_model_parallel_size",
    ("model", "expert_tensor_parallel_size"): "expert_tensor_parallel_size",
    ("model", "sequence_parallel"): "sequence_parallel",
    ("model", "pipeline_model_parallel_layout"): "pipeline_model_parallel_layout",
    ("model", "num_layers_in_first_pipeline_stage"): "decoder_first_pipeline_num_layers",
    ("model", "num_layers_in_last_pipeline_stage"): "decoder_last_pipeline_num_layers",
    ("model", "account_for_embedding_in_pipeline_split"): "account_for_embedding_in_pipeline_split",
    ("model", "account_for_loss_in_pipeline_split"): "account_for_loss_in_pipeline_split",
    ("model", "num_layers"): "num_layers",
    ("model", "hidden_size"): "hidden_size",
    ("model", "num_attention_heads"): "num_attention_heads",
    ("model", "num_query_groups"): "num_query_groups",
    ("model", "ffn_hidden_size"): "ffn_hidden_size",
    ("model", "kv_channels"): "kv_channels",
    ("model", "num_moe_experts"): "num_experts",
    ("model", "moe_ffn_hidden_size"): "moe_ffn_hidden_size",
    ("model", "moe_router_topk"): "moe_router_topk",
    ("model", "seq_length"): "seq_length",
    ("model", "pipeline_dtype"): "pipeline_dtype",
    # TransformerConfig.cp_comm_type (None, a string, or one per layer) and ModelParallelConfig's hierarchical sizes:
    # Bridge v0.3.1 hands them to Megatron-Core unchecked (ML987); Megatron-LM's check is validate_args' (ML983)
    ("model", "cp_comm_type"): "cp_comm_type",
    ("model", "hierarchical_context_parallel_sizes"): "hierarchical_context_parallel_sizes",
    ("model", "microbatch_group_size_per_vp_stage"): "microbatch_group_size_per_vp_stage",
    ("model", "moe_token_dispatcher_type"): "moe_token_dispatcher_type",  # the flex dispatcher's etp·ep (ML989)
    ("train", "micro_batch_size"): "micro_batch_size",
    ("train", "global_batch_size"): "global_batch_size",
    ("train", "rampup_batch_size"): "rampup_batch_size",
    ("train", "train_iters"): "train_iters",
    ("dist", "use_tp_pp_dp_mapping"): "use_tp_pp_dp_mapping",
    ("ddp", "num_distributed_optimizer_instances"): "num_distributed_optimizer_instances",
}
# what the whole-peak memory estimate reads (meshlint/mesh/memory_megatron.py), held under "bridge.SECTION.FIELD"
# until megatron_args turns them into Megatron-LM's dests (the mixed-precision config overriding, as Bridge does)
MEMORY_FIELDS = (
    ("model", "recompute_granularity"), ("model", "recompute_method"), ("model", "recompute_num_layers"),
    ("model", "recompute_modules"), ("model", "distribute_saved_activations"), ("model", "gated_linear_unit"),
    ("model", "normalization"), ("model", "share_embeddings_and_output_weights"), ("model", "add_qkv_bias"),
    ("model", "add_bias_linear"), ("model", "vocab_size"), ("model", "make_vocab_size_divisible_by"),
    ("model", "should_pad_vocab"), ("model", "position_embedding_type"), ("model", "mtp_num_layers"),
    ("model", "moe_shared_expert_intermediate_size"), ("model", "moe_layer_freq"), ("model", "hidden_dropout"),
    ("model", "attention_dropout"), ("model", "attention_backend"), ("model", "bf16"), ("model", "fp16"),
    ("model", "q_lora_rank"), ("model", "kv_lora_rank"), ("model", "qk_head_dim"), ("model", "qk_pos_emb_head_dim"),
    ("model", "v_head_dim"), ("model", "qk_layernorm"), ("model", "transformer_impl"),
    ("optimizer", "optimizer"), ("optimizer", "use_distributed_optimizer"),
    ("optimizer", "use_precision_aware_optimizer"), ("optimizer", "main_grads_dtype"),
    ("optimizer", "main_params_dtype"), ("optimizer", "exp_avg_dtype"), ("optimizer", "exp_avg_sq_dtype"),
    ("optimizer", "sgd_momentum"), ("ddp", "use_distributed_optimizer"), ("ddp", "grad_reduce_in_fp32"),
    ("ddp", "use_megatron_fsdp"), ("ddp", "use_custom_fsdp"),
    ("mixed_precision", "bf16"), ("mixed_precision", "fp16"), ("mixed_precision", "grad_reduce_in_fp32"),
)
FIELDS.update({key: "bridge." + ".".join(key) for key in MEMORY_FIELDS})
# ModelParallelConfig / TransformerConfig / GPTModelProvider / DistributedInitConfig defaults a recipe leaves
# (megatron/core/model_parallel_config.py, transformer_config.py at core_v0.16.1; bridge/training/config.py)
DEFAULTS = {
    ("model", "tensor_model_parallel_size"): 1, ("model", "pipeline_model_parallel_size"): 1,
    ("model", "virtual_pipeline_model_parallel_size"): None, ("model", "context_parallel_size"): 1,
    ("model", "expert_model_parallel_size"): 1, ("model", "expert_tensor_parallel_size"): None,
    ("model", "sequence_parallel"): False, ("model", "pipeline_model_parallel_layout"): None,
    ("model", "cp_comm_type"): None,                        # transformer_config.py:732 (core_v0.16.1)
    ("model", "hierarchical_context_parallel_sizes"): None,  # model_parallel_config.py:48
    ("model", "microbatch_group_size_per_vp_stage"): None,   # model_parallel_config.py:343 (None -> pp, :447-448)
    ("model", "moe_token_dispatcher_type"): "allgather",     # transformer_config.py:675
    ("model", "num_layers_in_first_pipeline_stage"): None, ("model", "num_layers_in_last_pipeline_stage"): None,
    ("model", "account_for_embedding_in_pipeline_split"): False,
    ("model", "account_for_loss_in_pipeline_split"): False,
    ("dist", "use_tp_pp_dp_mapping"): False, ("ddp", "num_distributed_optimizer_instances"): 1,
    ("train", "rampup_batch_size"): None,
    # the memory fields' defaults at v0.3.1 where neither the recipe nor the provider class sets them:
    # megatron/core/transformer/transformer_config.py (core_v0.16.1)
    ("model", "recompute_granularity"): None,            # :383
    ("model", "recompute_method"): None,                 # :394
    ("model", "recompute_num_layers"): None,             # :402
    ("model", "distribute_saved_activations"): False,    # :408
    ("model", "recompute_modules"): None,                # :411 (__post_init__: ["core_attn"])
    ("model", "gated_linear_unit"): False,               # :170
    ("model", "add_qkv_bias"): False,                    # :167
    ("model", "add_bias_linear"): True,                  # :161
    ("model", "hidden_dropout"): 0.1,                    # :137
    ("model", "attention_dropout"): 0.1,                 # :140
    ("model", "attention_backend"): "AttnBackend.auto",  # :110
    ("model", "mtp_num_layers"): None,                   # :48
    ("model", "moe_shared_expert_intermediate_size"): None,   # :534
    ("model", "moe_layer_freq"): 1,                      # :556
    ("model", "qk_layernorm"): False,                    # :208
    ("model", "transformer_impl"): "transformer_engine",  # :880
    # MLATransformerConfig's (:2016-2028): read only where the provider derives from it (multi_latent_attention)
    ("model", "q_lora_rank"): 512, ("model", "kv_lora_rank"): 512, ("model", "qk_head_dim"): 128,
    ("model", "qk_pos_emb_head_dim"): 64, ("model", "v_head_dim"): 128,
    # megatron/core/model_parallel_config.py:106, :109
    ("model", "fp16"): False, ("model", "bf16"): False,
    # Megatron-Bridge src/megatron/bridge/models/gpt_provider.py (v0.3.1)
    ("model", "share_embeddings_and_output_weights"): True,   # :135
    ("model", "make_vocab_size_divisible_by"): 128,      # :136
    ("model", "position_embedding_type"): "learned_absolute",  # :137
    ("model", "vocab_size"): None,                       # :161 (the tokenizer's at run time)
    ("model", "should_pad_vocab"): False,                # :164
    ("model", "normalization"): "LayerNorm",             # :171
    # megatron/core/optimizer/optimizer_config.py (Bridge's OptimizerConfig only defers __post_init__)
    ("optimizer", "use_precision_aware_optimizer"): False,    # :187
    ("optimizer", "main_grads_dtype"): "torch.float32",  # :197
    ("optimizer", "main_params_dtype"): "torch.float32",  # :200
    ("optimizer", "exp_avg_dtype"): "torch.float32",     # :203
    ("optimizer", "exp_avg_sq_dtype"): "torch.float32",  # :206
    ("optimizer", "optimizer"): "adam",                  # :209
    ("optimizer", "sgd_momentum"): 0.9,                  # :255
    ("optimizer", "use_distributed_optimizer"): False,   # :287
    # megatron/core/distributed/distributed_data_parallel_config.py
    ("ddp", "grad_reduce_in_fp32"): False,               # :11
    ("ddp", "use_distributed_optimizer"): False,         # :25
    ("ddp", "use_megatron_fsdp"): False,                 # :69
    ("ddp", "use_custom_fsdp"): False,                   # :72 (deprecated spelling)
    # a MixedPrecisionConfig's own (src/megatron/bridge/training/mixed_precision.py:36-42, v0.3.1): all its fields
    # overwrite the model's, optimizer's and DDP's of the same name (update_config_with_precision_overrides)
    ("mixed_precision", "fp16"): False, ("mixed_precision", "bf16"): False,
    ("mixed_precision", "grad_reduce_in_fp32"): True,
}
# the fields only MLATransformerConfig has (a GPT provider has no such attribute)
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim")
# the model's sizes: what a provider class or a Hugging Face config.json may give
SIZES = ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size", "kv_channels",
         "num_moe_experts", "moe_ffn_hidden_size", "moe_router_topk", "seq_length")
# Hugging Face config.json keys -> provider fields (what the model bridges' provider_bridge maps)
HF_KEYS = {"num_hidden_layers": "num_layers", "hidden_size": "hidden_size", "num_attention_heads": "num_attention_heads",
           "num_key_value_heads": "num_query_groups", "intermediate_size": "ffn_hidden_size", "head_dim": "kv_channels",
           "num_experts": "num_moe_experts", "n_routed_experts": "num_moe_experts",
           "num_local_experts": "num_moe_experts", "moe_intermediate_size": "moe_ffn_hidden_size",
           "num_experts_per_tok": "moe_router_topk", "vocab_size": "vocab_size"}
# what hf_sizes must find for a Hugging Face model's peak memory to be estimated
HF_ARCHITECTURE = ("gated_linear_unit", "normalization", "share_embeddings_and_output_weights", "add_bias_linear")


def hf_sizes(ref: str, start_dir: str) -> tuple:
    """({provider field: value}, how it was found or why not) from a model id's config.json (local only)."""
    from meshlint.inputs.hf_model import MAX_CONFIG_BYTES, find_config
    from meshlint.inputs.source import read_bytes

    path, how = find_config(ref, start_dir)
    if path is None:
        return None, how
    try:
        data = json.loads(read_bytes(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except (InputError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"cannot read {path}: {exc}"
    if isinstance(data, dict) and isinstance(data.get("text_config"), dict):
        data = {**data, **data["text_config"]}   # a vision-language model: its language model's sizes
    out = {}
    for key, field in HF_KEYS.items():
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out.setdefault(field, value)
    if isinstance(data, dict) and "kv_lora_rank" in data:
        # the DeepSeek family's multi-latent attention (models/deepseek/common.py get_common_configs, v0.3.1): its
        # shapes, q_a/kv_a layer norms (deepseek_v3_bridge.py: qk_layernorm), shared experts, first dense layers
        out.update(multi_latent_attention=True, qk_layernorm=True, q_lora_rank=data.get("q_lora_rank"))
        for key, field in (("kv_lora_rank", "kv_lora_rank"), ("qk_nope_head_dim", "qk_head_dim"),
                           ("qk_rope_head_dim", "qk_pos_emb_head_dim"), ("v_head_dim", "v_head_dim")):
            out[field] = data.get(key)
        moe, shared, dense = data.get("moe_intermediate_size"), data.get("n_shared_experts"), \
            data.get("first_k_dense_replace")
        if isinstance(moe, int) and isinstance(shared, int):
            out["moe_shared_expert_intermediate_size"] = moe * shared
        layers = out.get("num_layers")
        if isinstance(dense, int) and isinstance(layers, int) and 0 <= dense <= layers:
            out["moe_layer_freq"] = [0] * dense + [1] * (layers - dense)
    if isinstance(data, dict):   # what the model bridges' provider_bridge derives (models/llama/llama_bridge.py ...)
        if isinstance(data.get("tie_word_embeddings"), bool):
            out["share_embeddings_and_output_weights"] = data["tie_word_embeddings"]
        if isinstance(data.get("hidden_act"), str):   # the gated (gate/up/down) MLP of the SiLU families
            out["gated_linear_unit"] = data["hidden_act"] in ("silu", "swiglu")
            out["add_bias_linear"] = bool(data.get("mlp_bias", False))
        if "rms_norm_eps" in data:
            out["normalization"] = "RMSNorm"
        if isinstance(data.get("attention_bias"), bool):
            out["add_qkv_bias"] = data["attention_bias"]
    return out, how


_FINALIZE: dict = {}


def finalize_defaults(root: str | None) -> dict:
    """What the checkout's provider ``finalize()`` (models/transformer_config.py) sets before Megatron-Core's
    __post_init__ runs, read from its code (it, and the module's functions it calls by name):
    ``sp_off``: sequence_parallel = False (at tp = 1; Bridge main since e5c7b8c28, 2026-03-20);
    ``etp_one``: expert_tensor_parallel_size = 1 (when unset with ep > 1; later Bridge main).
    Bridge v0.3.1 sets neither: Megatron-Core then refuses sequence parallelism at tp = 1 and etp defaults to tp."""
    path = os.path.join(root, "megatron", "bridge", "models", "transformer_config.py") if root else None
    if path is None or not os.path.isfile(path):
        return {"sp_off": False, "etp_one": False}
    if path not in _FINALIZE:
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        bodies = []
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name == "finalize":
                bodies.append(fn)
                bodies += [helpers[c.func.id] for c in ast.walk(fn) if isinstance(c, ast.Call)
                           and isinstance(c.func, ast.Name) and c.func.id in helpers]

        def sets(attr: str, value) -> bool:
            return any(isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is value
                       and any(isinstance(t, ast.Attribute) and t.attr == attr for t in n.targets)
                       for body in bodies for n in ast.walk(body))

        _FINALIZE[path] = {"sp_off": sets("sequence_parallel", False), "etp_one": sets("expert_tensor_parallel_size", 1)}
    return _FINALIZE[path]


def megatron_args(values: dict, finalize: dict | None = None) -> dict:
    """The option values core_0_16.read takes: the dests above, and what Megatron-LM derives from them."""
    out = dict(values)
    finalize = finalize or {}
    # core_0_16.read switches sequence parallelism off at tp = 1 as validate_args does; a Bridge recipe has no
    # validate_args, so the value as set is kept for ML980 (unless the checkout's finalize() switches it off)
    out["bridge_sequence_parallel"] = False if finalize.get("sp_off") else values.get("sequence_parallel")
    ep = values.get("expert_model_parallel_size")
    if finalize.get("etp_one") and values.get("expert_tensor_parallel_size") is None and isinstance(ep, int) and ep > 1:
        out["expert_tensor_parallel_size"] = 1
    groups = out.get("num_query_groups")
    out["group_query_attention"] = groups is not None
    out.update(memory_dests(values))
    # no validate_args: Bridge builds ModelParallelConfig directly, so the Megatron-LM-only check that
    # interleaving without p2p overlap needs pp > 2 (arguments.py:579) does not apply
    out["overlap_p2p_comm"] = True
    out["bridge_recipe"] = True
    return out


_DTYPES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
           "uint8": "fp8", "float8_e4m3fn": "fp8"}


def memory_dests(values: dict) -> dict:
    """Megatron-LM's dests memory_megatron.estimate reads, from the recipe's model, optimizer, DDP and mixed-precision
    fields as Bridge combines them; ``bridge_memory_unknown`` says why not where one of them is not known."""
    from meshlint.frameworks.megatron import flags

    def get(section, field):
        return values.get("bridge." + section + "." + field)

    unknown = [f"{k[len('bridge.'):]}: {v.reason}" for k, v in values.items()
               if k.startswith("bridge.") and isinstance(v, flags.Unknown)]
    out = {}
    if unknown:
        out["bridge_memory_unknown"] = unknown[0]
        return out
    mixed = "bridge.mixed_precision.bf16" in values   # a MixedPrecisionConfig overrides the fields it shares
    pick = lambda section, field: get("mixed_precision", field) if mixed else get(section, field)  # noqa: E731
    bf16, fp16 = bool(pick("model", "bf16")), bool(pick("model", "fp16"))
    reduce_fp32 = bool(pick("ddp", "grad_reduce_in_fp32"))
    out.update(bf16=bf16, fp16=fp16, grad_reduce_in_bf16=bf16 and not reduce_fp32,
               accumulate_allreduce_grads_in_fp32=reduce_fp32,
               # config.py:1888-1900: either config's switch turns on the distributed optimizer for both
               use_distributed_optimizer=bool(get("optimizer", "use_distributed_optimizer")
                                              or get("ddp", "use_distributed_optimizer")),
               use_megatron_fsdp=bool(get("ddp", "use_megatron_fsdp") or get("ddp", "use_custom_fsdp")),
               optimizer=get("optimizer", "optimizer"), sgd_momentum=get("optimizer", "sgd_momentum"),
               use_precision_aware_optimizer=bool(get("optimizer", "use_precision_aware_optimizer")))
    for field in ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"):
        dtype = get("optimizer", field)
        out[field] = _DTYPES.get(str(dtype).rsplit(".", 1)[-1], "fp32") if dtype is not None else "fp32"
    for field in ("recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules",
                  "distribute_saved_activations", "normalization", "add_qkv_bias", "add_bias_linear",
                  "position_embedding_type", "mtp_num_layers", "moe_shared_expert_intermediate_size",
                  "moe_layer_freq", "hidden_dropout", "attention_dropout", "make_vocab_size_divisible_by",
                  "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "qk_layernorm",
                  "transformer_impl"):
        out[field] = get("model", field)
    out["attention_backend"] = str(get("model", "attention_backend") or "")
    out["swiglu"] = bool(get("model", "gated_linear_unit"))
    hidden = values.get("hidden_size")
    if values.get("ffn_hidden_size") is None and isinstance(hidden, int):
        out["ffn_hidden_size"] = 4 * hidden   # TransformerConfig.__post_init__ (not Megatron-LM's swiglu 2/3 rule)
    out["untie_embeddings_and_output_weights"] = get("model", "share_embeddings_and_output_weights") is False
    vocab = get("model", "vocab_size")
    if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 0:
        # gpt_provider.py:244-250: padded (to a multiple of make_vocab_size_divisible_by x tp) only when asked
        tp = values.get("tensor_model_parallel_size")
        multiple = (get("model", "make_vocab_size_divisible_by") or 1) * (tp if isinstance(tp, int) and tp > 0 else 1)
        out["padded_vocab_size"] = -(-vocab // multiple) * multiple if get("model", "should_pad_vocab") else vocab
    else:   # the tokenizer's, at run time
        out["tokenizer_type"] = "bridge"
    return out
