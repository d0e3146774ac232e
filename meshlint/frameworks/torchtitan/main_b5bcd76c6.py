"""torchtitan main at b5bcd76c6 (2026-08-21): registry configs read and resolved as that commit does.

What differs from 0.3.0 (torchtitan_v030): the token-budget keys
(``num_tokens_per_microbatch_per_dp_rank``, ``num_tokens_per_train_step``,
``max_context_length``, ``num_pp_microbatches``), no ``full_dtensor`` backend,
and ParallelDims raises when ep does not divide ``dp_shard*cp*tp``.
Every fact below was read off torchtitan at b5bcd76c6 and run on the fake
process group (tests/test_tt_versions.py); citations are file:line@b5bcd76c6.

Defaults (dataclass fields):
  torchtitan/config/configs.py:37   num_tokens_per_microbatch_per_dp_rank = 16384 (> 0, :55-58)
  torchtitan/config/configs.py:43   num_tokens_per_train_step = -1 (-1 or > 0, :59-60)
  torchtitan/config/configs.py:51   max_context_length = 2048 (> 0, :61-62)
  torchtitan/config/configs.py:75   disable_cuda_graphs = False (CUDA graphs are ON by default)
  torchtitan/config/configs.py:87   dtype = "float32"
  torchtitan/config/configs.py:122  data_parallel_replicate_degree = 1
  torchtitan/config/configs.py:133  data_parallel_shard_degree = -1
  torchtitan/config/configs.py:166  tensor_parallel_degree = 1
  torchtitan/config/configs.py:169  enable_sequence_parallel = True
  torchtitan/config/configs.py:172  spmd_backend = "spmd_types" ("partial_dtensor" | "spmd_types", :259-264)
  torchtitan/config/configs.py:180  pipeline_parallel_degree = 1
  torchtitan/config/configs.py:216  pipeline_parallel_schedule = "1F1B"
  torchtitan/config/configs.py:232  num_pp_microbatches = 1 (> 0: trainer.py:124-128)
  torchtitan/config/configs.py:239  context_parallel_degree = 1
  torchtitan/config/configs.py:242  context_parallel_load_balancer = "headtail" (not "": :265-269)
  torchtitan/config/configs.py:282  expert_parallel_degree = 1
  torchtitan/config/configs.py:295  compile.enable = False; :298 enable_async_tensor_parallel = False (needs
                                    compile.enable and "model" in components: :306-313)
ParallelDims (torchtitan/distributed/parallel_dims.py):
  :175-185  degrees >= 1, dp_shard -1 or >= 1; dp_shard = world // (dp_replicate*cp*tp*pp) floored;
            assert dp_shard >= 1; assert the product == world
  :187-192  ValueError: expert_parallel_degree (ep) must divide dp_shard * cp * tp (n)
  :280-343  meshes: dataloading (pp, batch, cp, tp); loss = dataloading[batch, cp] flattened;
            spmd_types: dense (pp, dp_replicate, dp_shard, cp, tp) and (pp, dp, cp, tp) sliced to
            spmd_dense_for_fwdbwd (dp, cp, tp); partial_dtensor: dense (pp, dp_replicate, fsdp, tp);
            sparse (pp, dp_replicate, efsdp, ep), efsdp = dp_shard*cp*tp // ep; with spmd_types and
            ep > 1 also spmd_sparse_for_fwdbwd = sparse[dp_replicate, efsdp, ep]
  :194-209  _mesh_exist: fsdp always; dp_shard always under spmd_types; efsdp iff ep > 1; else size > 1
"""

from __future__ import annotations

from meshlint.frameworks.torchtitan import registry as _tt
from meshlint.frameworks.base import Key

NAME = "torchtitan"
SECTION = "parallelism"
STRICT_SECTIONS = _tt.STRICT_SECTIONS
VERSION = "main@b5bcd76c6"
COMMIT = "b5bcd76c6"
DATE = "2026-08-21"
DESCRIPTION = ("torchtitan main at b5bcd76c6: registry configs, token-budget training keys, spmd_types "
               "(default) or partial_dtensor, no ETP, ParallelDims checks that ep divides dp_shard·cp·tp")

P, T, C, M = "parallelism.", "training.", "compile.", "model."
KEYS = [
    # training (TrainingConfig, configs.py:36-114)
    Key(T + "num_tokens_per_microbatch_per_dp_rank", "int", 16384),
    Key(T + "num_tokens_per_train_step", "int", -1),
    Key(T + "max_context_length", "int", 2048),
    Key(T + "max_norm", "float", 1.0),
    Key(T + "steps", "int", 10000),
    Key(T + "enable_cpu_offload", "bool", False),
    Key(T + "disable_cuda_graphs", "bool", False),
    Key(T + "dtype", "str", "float32", None, ("bfloat16", "float32")),
    Key(T + "mixed_precision_param", "str", "bfloat16", None, ("bfloat16", "float32")),
    Key(T + "mixed_precision_reduce", "str", "float32", None, ("float32",)),
    Key(T + "gc_freq", "int", 50),
    Key(T + "gc_debug", "bool", False),
    # parallelism (ParallelismConfig, configs.py:120-291)
    Key(P + "data_parallel_replicate_degree", "int", 1, "dp_replicate"),
    Key(P + "data_parallel_shard_degree", "int", -1, "dp_shard"),
    Key(P + "fsdp_reshard_after_forward", "str", "default", None, ("default", "always", "never")),
    Key(P + "enable_fsdp_symm_mem", "bool", False),
    Key(P + "tensor_parallel_degree", "int", 1, "tp"),
    Key(P + "enable_sequence_parallel", "bool", True),
    Key(P + "spmd_backend", "str", "spmd_types", None, ("partial_dtensor", "spmd_types")),
    Key(P + "pipeline_parallel_degree", "int", 1, "pp"),
    Key(P + "module_fqns_per_model_part", "array?", None),
    Key(P + "pipeline_parallel_first_stage_less_layers", "int", 1),
    Key(P + "pipeline_parallel_last_stage_less_layers", "int", 1),
    Key(P + "pipeline_parallel_layers_per_stage", "int?", None),
    Key(P + "pipeline_parallel_schedule", "str", "1F1B"),
    Key(P + "pipeline_parallel_schedule_csv", "str?", ""),
    Key(P + "num_pp_microbatches", "int", 1),
    Key(P + "context_parallel_degree", "int", 1, "cp"),
    Key(P + "context_parallel_load_balancer", "str?", "headtail"),
    Key(P + "context_parallel_ptrr_mask_key", "str?", None),
    Key(P + "expert_parallel_degree", "int", 1, "ep"),
    # compile (CompileConfig, configs.py:293-314)
    Key(C + "enable", "bool", False),
    Key(C + "enable_async_tensor_parallel", "bool", False),
    Key(C + "components", "array", ["model", "loss"]),
    Key(C + "backend", "str", "inductor"),
    # the model: model_spec=model_registry(flavor, attn_backend=..., moe_comm_backend=...)
    Key(M + "name", "str", None),
    Key(M + "flavor", "str", None),
    Key(M + "attn_backend", "str?", None),            # None here: the model_registry default below
    Key(M + "moe_comm_backend", "str?", None),
    Key(M + "non_blocking_capacity_factor", "float?", None),
    Key(M + "num_mtp_layers", "int?", None),          # deepseek_v3's multi-token prediction depth
    Key(M + "tp_gemm_backend", "str?", None),         # llama3: "default" or "dist_gemm" (fused TP GEMMs)
    Key(M + "converters", "array?", None),            # model_registry(converters=[...]): see _converters
]

# model_registry at b5bcd76c6: ModelSpec name -> its defaults and its pipelining function
MODELS = {
    "llama3": {"attn_backend": "flex", "moe_comm_backend": None, "pipelining": "pipeline_llm",
               "source": "torchtitan/models/llama3/__init__.py:369-390"},
    "deepseek_v3": {"attn_backend": "flex", "moe_comm_backend": "standard", "pipelining": "pipeline_llm",
                    "source": "torchtitan/models/deepseek_v3/__init__.py:616-640"},
    "qwen3": {"attn_backend": "flex", "moe_comm_backend": "standard", "pipelining": "pipeline_llm",
              "source": "torchtitan/models/qwen3/__init__.py:613-632 (flavor default :477)"},
    "qwen3_5": {"attn_backend": "flex", "moe_comm_backend": "standard", "pipelining": "pipeline_vlm",
                "source": "torchtitan/models/qwen3_5/__init__.py:1100-1121 (flavor default :408)"},
    "gpt_oss": {"attn_backend": "varlen", "moe_comm_backend": "standard", "pipelining": "pipeline_llm",
                "source": "torchtitan/models/gpt_oss/__init__.py:388-409"},
    "kimi_k2_5": {"attn_backend": "flex", "moe_comm_backend": "standard", "pipelining": "pipeline_vlm",
                  "family": "kimi", "source": "torchtitan/models/kimi_k2_7/__init__.py:478-500"},
    "muse_glimmer": {"attn_backend": "flex", "moe_comm_backend": None, "pipelining": "pipeline_muse_glimmer",
                     "source": "torchtitan/models/muse_glimmer/__init__.py:520-537"},
    "flux": {"attn_backend": "sdpa", "moe_comm_backend": None, "pipelining": None,
             "source": "torchtitan/models/flux/__init__.py:556-573 (pipelining_fn=None)"},
}

SEMANTICS = _tt.Version(
    version=VERSION,
    keys=KEYS,
    backends=("partial_dtensor", "spmd_types"),
    backend_error="ParallelismConfig raises ValueError: parallelism.spmd_backend must be either "
                  "'partial_dtensor' or 'spmd_types'.",
    ep_must_divide=True,
    spmd_meshes=False,
    checks=(
        _tt.Check(T + "num_tokens_per_microbatch_per_dp_rank", "gt0", "greater than 0",
                  "ValueError: num_tokens_per_microbatch_per_dp_rank must be greater than 0.", "configs.py:55-58"),
        _tt.Check(T + "num_tokens_per_train_step", "gt0_or_m1", "-1 or greater than 0",
                  "ValueError: num_tokens_per_train_step must be -1 or greater than 0.", "configs.py:59-60"),
        _tt.Check(T + "max_context_length", "gt0", "greater than 0",
                  "ValueError: max_context_length must be greater than 0.", "configs.py:61-62"),
        _tt.Check(P + "num_pp_microbatches", "gt0", "greater than 0",
                  "ValueError: parallelism.num_pp_microbatches must be greater than 0.", "trainer.py:124-128"),
        _tt.Check(P + "context_parallel_load_balancer", "nonempty", "a load balancer name or None",
                  "ValueError: context_parallel_load_balancer cannot be an empty string. Use None to disable "
                  "load balancing.", "configs.py:265-269"),
    ),
    models=MODELS,
    microbatches="count",
    # renamed after 0.3.0 (different units: tokens, not samples)
    renamed={"local_batch_size": "num_tokens_per_microbatch_per_dp_rank",
             "global_batch_size": "num_tokens_per_train_step", "seq_len": "max_context_length",
             "pipeline_parallel_microbatch_size": "num_pp_microbatches"},
)


# the entry points every version module has (meshlint/frameworks/versions.py), with these semantics
read, resolve, attach_model, pipeline_plan, bytes_per_param, spec_from_degrees = _tt.bound(SEMANTICS)
