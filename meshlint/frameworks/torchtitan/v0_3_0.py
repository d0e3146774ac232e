"""torchtitan 0.3.0 (the release on the package index): registry configs read and resolved as it does.

Between v0.2.x and main: registry configs and no ETP like main, but the old
batch keys (``local_batch_size``, ``global_batch_size``, ``seq_len``,
``pipeline_parallel_microbatch_size``), a third spmd backend ``full_dtensor``,
and no ep check in ParallelDims: an ep that does not divide ``dp_shard*cp*tp``
dies late, in ``DeviceMesh._unflatten`` of the sparse mesh. Every fact below
was read off the 0.3.0 wheel (``pip download --no-deps torchtitan==0.3.0``) and
run on the fake process group (tests/test_tt_versions.py); citations are
file:line@0.3.0.

Defaults (dataclass fields):
  torchtitan/config/configs.py:37   local_batch_size = 8
  torchtitan/config/configs.py:43   global_batch_size = -1
  torchtitan/config/configs.py:52   seq_len = 2048
  torchtitan/config/configs.py:66   disable_cuda_graphs = False (CUDA graphs are ON by default)
  torchtitan/config/configs.py:78   dtype = "float32"
  torchtitan/config/configs.py:113  data_parallel_replicate_degree = 1
  torchtitan/config/configs.py:124  data_parallel_shard_degree = -1
  torchtitan/config/configs.py:157  tensor_parallel_degree = 1
  torchtitan/config/configs.py:160  enable_sequence_parallel = True
  torchtitan/config/configs.py:163  spmd_backend = "spmd_types" ("partial_dtensor" | "full_dtensor" | "spmd_types",
                                    :253-261)
  torchtitan/config/configs.py:174  pipeline_parallel_degree = 1
  torchtitan/config/configs.py:210  pipeline_parallel_schedule = "1F1B"
  torchtitan/config/configs.py:226  pipeline_parallel_microbatch_size = 1 (> 0, and dividing local_batch_size
                                    when pp > 1: trainer.py:124-139)
  torchtitan/config/configs.py:232  context_parallel_degree = 1
  torchtitan/config/configs.py:235  context_parallel_load_balancer = "headtail" (not "": :262-266)
  torchtitan/config/configs.py:279  expert_parallel_degree = 1
  torchtitan/config/configs.py:292  compile.enable = False; :295 enable_async_tensor_parallel = False (:303-310)
ParallelDims (torchtitan/distributed/parallel_dims.py):
  :170-190  degrees >= 1, dp_shard -1 or >= 1, floored inference, assert dp_shard >= 1, product assert;
            NO ep check
  :208-389  meshes as main, plus full_dtensor: dense (pp, dp_replicate, dp_shard, cp, tp), no fwd/bwd view;
            spmd_meshes() = the activated (candidate dense axes) and (dp_replicate, efsdp, ep) meshes
  :191-206  _mesh_exist: dp_shard always under full_dtensor and spmd_types
"""

from __future__ import annotations

from meshlint.frameworks.torchtitan import registry as _tt
from meshlint.frameworks.base import Key

NAME = "torchtitan"
SECTION = "parallelism"
STRICT_SECTIONS = _tt.STRICT_SECTIONS
VERSION = "0.3.0"
COMMIT = "0.3.0"
DATE = "2026-09-03"  # the wheel's build date; its semantics predate main b5bcd76c6
DESCRIPTION = ("torchtitan 0.3.0 (package index): registry configs with the old batch keys, spmd_types "
               "(default), full_dtensor or partial_dtensor, no ETP, no ep check in ParallelDims")

P, T, C, M = "parallelism.", "training.", "compile.", "model."
KEYS = [
    # training (TrainingConfig, configs.py:36-105)
    Key(T + "local_batch_size", "int", 8),
    Key(T + "global_batch_size", "int", -1),
    Key(T + "seq_len", "int", 2048),
    Key(T + "max_norm", "float", 1.0),
    Key(T + "steps", "int", 10000),
    Key(T + "enable_cpu_offload", "bool", False),
    Key(T + "disable_cuda_graphs", "bool", False),
    Key(T + "dtype", "str", "float32", None, ("bfloat16", "float32")),
    Key(T + "mixed_precision_param", "str", "bfloat16", None, ("bfloat16", "float32")),
    Key(T + "mixed_precision_reduce", "str", "float32", None, ("float32",)),
    Key(T + "gc_freq", "int", 50),
    Key(T + "gc_debug", "bool", False),
    # parallelism (ParallelismConfig, configs.py:111-288)
    Key(P + "data_parallel_replicate_degree", "int", 1, "dp_replicate"),
    Key(P + "data_parallel_shard_degree", "int", -1, "dp_shard"),
    Key(P + "fsdp_reshard_after_forward", "str", "default", None, ("default", "always", "never")),
    Key(P + "enable_fsdp_symm_mem", "bool", False),
    Key(P + "tensor_parallel_degree", "int", 1, "tp"),
    Key(P + "enable_sequence_parallel", "bool", True),
    Key(P + "spmd_backend", "str", "spmd_types", None, ("partial_dtensor", "full_dtensor", "spmd_types")),
    Key(P + "pipeline_parallel_degree", "int", 1, "pp"),
    Key(P + "module_fqns_per_model_part", "array?", None),
    Key(P + "pipeline_parallel_first_stage_less_layers", "int", 1),
    Key(P + "pipeline_parallel_last_stage_less_layers", "int", 1),
    Key(P + "pipeline_parallel_layers_per_stage", "int?", None),
    Key(P + "pipeline_parallel_schedule", "str", "1F1B"),
    Key(P + "pipeline_parallel_schedule_csv", "str?", ""),
    Key(P + "pipeline_parallel_microbatch_size", "int", 1),
    Key(P + "context_parallel_degree", "int", 1, "cp"),
    Key(P + "context_parallel_load_balancer", "str?", "headtail"),
    Key(P + "context_parallel_ptrr_mask_key", "str?", None),
    Key(P + "expert_parallel_degree", "int", 1, "ep"),
    # compile (CompileConfig, configs.py:290-311)
    Key(C + "enable", "bool", False),
    Key(C + "enable_async_tensor_parallel", "bool", False),
    Key(C + "components", "array", ["model", "loss"]),
    Key(C + "backend", "str", "inductor"),
    # the model: model_spec=model_registry(flavor, attn_backend=..., moe_comm_backend=...)
    Key(M + "name", "str", None),
    Key(M + "flavor", "str", None),
    Key(M + "attn_backend", "str?", None),
    Key(M + "moe_comm_backend", "str?", None),
    Key(M + "non_blocking_capacity_factor", "float?", None),
    Key(M + "num_mtp_layers", "int?", None),          # deepseek_v3's multi-token prediction depth
    Key(M + "tp_gemm_backend", "str?", None),         # llama3: "default" or "dist_gemm" (fused TP GEMMs)
    Key(M + "converters", "array?", None),            # model_registry(converters=[...]): see _converters
]

# model_registry at 0.3.0 (same defaults as main; kimi's trainer config refuses tp > 1 AND pp > 1 here)
MODELS = {
    "llama3": {"attn_backend": "flex", "moe_comm_backend": None, "pipelining": "pipeline_llm",
               "source": "torchtitan/models/llama3/__init__.py:369-390"},
    "deepseek_v3": {"attn_backend": "flex", "moe_comm_backend": "standard", "pipelining": "pipeline_llm",
                    "source": "torchtitan/models/deepseek_v3/__init__.py:616-640"},
    "qwen3": {"attn_backend": "flex", "moe_comm_backend": "standard", "pipelining": "pipeline_llm",
              "source": "torchtitan/models/qwen3/__init__.py:613-632 (flavor default :477)"},
    "qwen3_5": {"attn_backend": "flex", "moe_comm_backend": "standard", "pipelining": "pipeline_vlm",
                "source": "torchtitan/models/qwen3_5/__init__.py:1100-1121"},
    "gpt_oss": {"attn_backend": "varlen", "moe_comm_backend": "standard", "pipelining": "pipeline_llm",
                "source": "torchtitan/models/gpt_oss/__init__.py:388-409"},
    "kimi_k2_5": {"attn_backend": "flex", "moe_comm_backend": "standard", "pipelining": "pipeline_vlm",
                  "family": "kimi", "source": "torchtitan/models/kimi_k2_7/__init__.py:474-496"},
    "muse_glimmer": {"attn_backend": "flex", "moe_comm_backend": None, "pipelining": "pipeline_muse_glimmer",
                     "source": "torchtitan/models/muse_glimmer/__init__.py:520-537"},
    "flux": {"attn_backend": "sdpa", "moe_comm_backend": None, "pipelining": None,
             "source": "torchtitan/models/flux/__init__.py:558-575 (pipelining_fn=None)"},
}

SEMANTICS = _tt.Version(
    version=VERSION,
    keys=KEYS,
    backends=("partial_dtensor", "full_dtensor", "spmd_types"),
    backend_error="ParallelismConfig raises ValueError: parallelism.spmd_backend must be one of "
                  "'partial_dtensor', 'full_dtensor', or 'spmd_types'.",
    ep_must_divide=False,
    spmd_meshes=True,
    checks=(
        _tt.Check(P + "pipeline_parallel_microbatch_size", "gt0", "greater than 0",
                  "ValueError: parallelism.pipeline_parallel_microbatch_size must be greater than 0.",
                  "trainer.py:124-129"),
        _tt.Check(P + "context_parallel_load_balancer", "nonempty", "a load balancer name or None",
                  "ValueError: context_parallel_load_balancer cannot be an empty string. Use None to disable "
                  "load balancing.", "configs.py:262-266"),
    ),
    models=MODELS,
    microbatches="batch",
    renamed={"num_tokens_per_microbatch_per_dp_rank": "local_batch_size",
             "num_tokens_per_train_step": "global_batch_size", "max_context_length": "seq_len",
             "num_pp_microbatches": "pipeline_parallel_microbatch_size"},
)


# the entry points every version module has (meshlint/frameworks/versions.py), with these semantics
read, resolve, attach_model, pipeline_plan, bytes_per_param, spec_from_degrees = _tt.bound(SEMANTICS)
