"""torchtitan's command-line surface (main b5bcd76c6 and 0.3.0): the trainer's sections, the fixed fields
and their types, the component configs' fields, renamed keys, the activation-checkpoint subcommands."""

from __future__ import annotations



# ----------------------------------------------------------------------------- torchtitan's CLI surface

# Trainer.Config's fields (trainer.py:77-116 at b5bcd76c6; the same in 0.3.0). model_spec is suppressed.
TRAINER_SECTIONS = ("profiler", "metrics", "tokenizer", "dataloader", "optimizer", "lr_scheduler", "training",
                    "parallelism", "checkpoint", "activation_checkpoint", "compile", "comm", "validator",
                    "debug", "override", "loss")
TOP_LEAVES = {"hf_assets_path": "str", "dump_folder": "str"}

# The fixed dataclasses of torchtitan/config/configs.py: their fields ARE the command line (the
# "frozen" CLI, torchtitan/config/README.md), so an unknown field there is refused as tyro refuses it.
# Other sections hold component configs whose class (and so whose fields) a config function picks:
# their options are accepted and typed from the value the config holds.
# Types: int, float, float|int, bool, str, int?, str? (None allowed), lit:a,b (Literal), list[str]
# (torchtitan's comma rule, manager.py:239-250), list[list[str]]? (one comma list per word), imports.
_COMMON = {
    "training": {
        "max_norm": "float|int", "steps": "int", "enable_cpu_offload": "bool", "disable_cuda_graphs": "bool",
        "dtype": "lit:bfloat16,float32", "mixed_precision_param": "lit:bfloat16,float32",
        "mixed_precision_reduce": "lit:float32", "gc_freq": "int", "gc_debug": "bool",
    },
    "parallelism": {
        "data_parallel_replicate_degree": "int", "data_parallel_shard_degree": "int",
        "fsdp_reshard_after_forward": "lit:default,always,never", "enable_fsdp_symm_mem": "bool",
        "tensor_parallel_degree": "int", "enable_sequence_parallel": "bool", "pipeline_parallel_degree": "int",
        "module_fqns_per_model_part": "list[list[str]]?", "pipeline_parallel_first_stage_less_layers": "int",
        "pipeline_parallel_last_stage_less_layers": "int", "pipeline_parallel_layers_per_stage": "int?",
        "pipeline_parallel_schedule": "str", "pipeline_parallel_schedule_csv": "str?",
        "context_parallel_degree": "int", "context_parallel_load_balancer": "str?",
        "context_parallel_ptrr_mask_key": "str?", "expert_parallel_degree": "int",
    },
    "compile": {"enable": "bool", "enable_async_tensor_parallel": "bool", "components": "list[str]",
                "backend": "str"},
    "comm": {"init_timeout_seconds": "int", "train_timeout_seconds": "int", "trace_buf_size": "int",
             "save_traces_folder": "str", "save_traces_file_prefix": "str",
             "mode": "lit:default,fake_backend,local_tensor,torchcomms"},
    "debug": {"seed": "int?", "spmd_typechecking": "bool", "deterministic": "bool", "deterministic_warn_only": "bool",
              "moe_force_load_balance": "bool", "detect_anomaly": "bool", "batch_invariant": "bool",
              "print_config": "bool", "save_config_file": "str?", "enable_structured_logging": "bool"},
    "override": {"imports": "imports"},
}


def _schema(training: dict, parallelism: dict) -> dict:
    out = {section: dict(fields) for section, fields in _COMMON.items()}
    out["training"].update(training)
    out["parallelism"].update(parallelism)
    return out


SCHEMAS = {
    # configs.py at b5bcd76c6: TrainingConfig :36-58, ParallelismConfig :112-280
    "main@b5bcd76c6": _schema(
        {"num_tokens_per_microbatch_per_dp_rank": "int", "num_tokens_per_train_step": "int",
         "max_context_length": "int"},
        {"spmd_backend": "lit:partial_dtensor,spmd_types", "num_pp_microbatches": "int"}),
    # configs.py of the torchtitan 0.3.0 wheel: the old batch keys, a full_dtensor backend
    "0.3.0": _schema(
        {"local_batch_size": "int", "global_batch_size": "int", "seq_len": "int"},
        {"spmd_backend": "lit:partial_dtensor,full_dtensor,spmd_types", "pipeline_parallel_microbatch_size": "int"}),
}
STRICT_SECTIONS = tuple(_COMMON)

# Fields of the component configs main's registries use (read off ``--help`` of llama3, deepseek_v3,
# qwen3 and flux debug configs at b5bcd76c6): they type an override and tell a flag from an option,
# but a section's other fields are not refused, since a config function may pick another class.
COMPONENT_FIELDS = {
    "checkpoint": {
        "async_mode": "lit:disabled,async,async_with_pinned_mem", "create_seed_checkpoint": "bool", "enable": "bool",
        "enable_first_step_checkpoint": "bool", "exclude_from_loading": "list[str]",
        "export_dtype": "lit:float16,bfloat16,float32", "folder": "str", "initial_load_in_hf": "bool",
        "initial_load_in_hf_quantized": "bool", "initial_load_model_only": "bool", "initial_load_path": "str?",
        "interval": "int", "keep_latest_k": "int", "last_save_in_hf": "bool", "last_save_model_only": "bool",
        "load_only": "bool", "load_step": "int"},
    "lr_scheduler": {"decay_ratio": "float?", "decay_type": "lit:linear,sqrt,cosine", "min_lr_factor": "float",
                     "total_steps": "int?", "warmup_steps": "int"},
    "metrics": {"disable_color_printing": "bool", "enable_tensorboard": "bool", "enable_wandb": "bool",
                "log_freq": "int", "save_for_all_ranks": "bool", "save_tb_folder": "str"},
    "profiler": {"enable_memory_snapshot": "bool", "enable_profiling": "bool", "memory_snapshot_freq": "int?",
                 "memory_snapshot_max_entries": "int", "profile_freq": "int", "profiler_active": "int",
                 "profiler_repeat": "int?", "profiler_skip_first": "int?", "profiler_skip_first_wait": "int?",
                 "profiler_warmup": "int", "save_memory_snapshot_folder": "str", "save_traces_folder": "str"},
    "validator": {"enable": "bool", "freq": "int", "steps": "int"},
    "dataloader": {"seed": "int"},
    "loss": {"num_chunks": "int"},
    "optimizer": {"implementation": "lit:for-loop,foreach,fused,fused_opt_states_bf16"},
}
# What main renamed since 0.3.0 (DIALECTS.md, "Renamed keys"), for a helpful refusal.
RENAMED = {"training.local_batch_size": "training.num_tokens_per_microbatch_per_dp_rank",
           "training.global_batch_size": "training.num_tokens_per_train_step",
           "training.seq_len": "training.max_context_length",
           "parallelism.pipeline_parallel_microbatch_size": "parallelism.num_pp_microbatches"}
RENAMED_BACK = {v: k for k, v in RENAMED.items()}

# activation_checkpoint.py:332-337: subcommand name -> the class it selects (None: no AC)
AC_SECTION = "activation_checkpoint"
AC_SUBCOMMANDS = {"selective": "SelectiveAC.Config", "full": "FullAC.Config",
                  "memory-budget": "MemoryBudgetAC.Config", "none": None}


def schema_for(version: str | None) -> dict:
    """section -> field -> type for a version id ("main@b5bcd76c6", "0.3.0"), or the union of both
    (where a field's types differ, the first version's wins; choices are merged)."""
    key = _version_key(version)
    if key is not None:
        return SCHEMAS[key]
    merged: dict = {}
    for schema in SCHEMAS.values():
        for section, fields in schema.items():
            into = merged.setdefault(section, {})
            for name, kind in fields.items():
                old = into.get(name)
                if old and old.startswith("lit:") and kind.startswith("lit:") and old != kind:
                    choices = list(dict.fromkeys(old[4:].split(",") + kind[4:].split(",")))
                    into[name] = "lit:" + ",".join(choices)
                elif old is None:
                    into[name] = kind
    return merged


def _version_key(version: str | None) -> str | None:
    if not version:
        return None
    if "0.3.0" in version:
        return "0.3.0"
    if "main" in version or "b5bcd76c6" in version:
        return "main@b5bcd76c6"
    return None
