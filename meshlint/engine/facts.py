"""The facts rule expressions read, built from a spec, its topology and its resolution.

``FACT_DOCS`` is the public list of root names (documented in docs/rules-language.md);
a rule that reads any other name is rejected when it is loaded.
"""

from __future__ import annotations

from meshlint.frameworks.base import DEGREES, Resolution, Spec, degree_items
from meshlint.mesh.devmesh import Mesh, place
from meshlint.mesh.topology import Topology

FACT_DOCS = {
    "dialect": "kempnerforge | torchtitan | native | accelerate | megatron",
    "framework_version": "the framework version whose semantics were applied: 0.2.x | 0.3.0 | main@b5bcd76c6 "
                         "(torchtitan), 5666d0d (KempnerForge); null when none was recorded",
    "framework": "{name, version, decided_by, id}: which framework semantics were applied and how that was decided; "
                 "id is name@version (just the dialect when it has no version), what a rule's `frameworks` matches",
    "unreadable": "list of {key, reason, line, col}: values a registry config sets in a way meshlint cannot "
                  "follow statically (their facts are null)",
    "world_size": "number of ranks (null when unknown)",
    "world_known": "true when a world size was given or found",
    "world_source": "where the world size came from",
    "gpus_per_node": "GPUs per node (null when unknown)",
    "gpus_per_node_source": "where gpus_per_node came from",
    "nodes": "world_size / gpus_per_node, rounded up (null when either is unknown)",
    "placement": "block | cyclic: how ranks are numbered across nodes",
    "valid_worlds": "in words, which world sizes the degrees allow",
    "valid_world_kind": "exact | multiple | none",
    "valid_world_n": "the exact world size, or the step of valid world sizes",
    "pp": "pipeline-parallel degree", "dp_replicate": "replicate (HSDP/DDP) degree",
    "dp_shard": "shard (FSDP) degree, resolved (null while -1 cannot be resolved)",
    "cp": "context-parallel degree", "tp": "tensor-parallel degree", "ep": "expert-parallel degree",
    "etp": "expert tensor-parallel degree (torchtitan 0.2.x; null for later torchtitan and for KempnerForge)",
    "batch": "torchtitan: dp_replicate × dp_shard", "fsdp": "torchtitan: dp_shard × cp",
    "efsdp": "torchtitan: fsdp × tp // (etp × ep), as torchtitan computes it",
    "declared": "table of degrees as written (dp_shard may be -1; null if unusable)",
    "dp_shard_inferred": "true when dp_shard is -1 (inferred)",
    "keys": "table: degree name -> config key path, for pointing findings at the right line",
    "world_factors": "list of {name, value, inferred}: the degrees whose product the framework compares with "
                     "the world (inferred: the one filled from the world size, dp_shard = -1 or a size -1 dim)",
    "mesh": "the mesh the framework builds: {name, dims, sizes, strides, size} (null when none)",
    "meshes": "table: mesh name -> mesh (null when that mesh cannot be built)",
    "axes": "list of 1-D meshes with placement: {name, role, mesh, size, stride, groups, intra_node, "
            "max_nodes, crossing_groups, example}",
    "mesh_ranks": "ranks the mesh covers",
    "outside": "{first, last, count} of ranks outside the mesh, or null",
    "framework_error": "the first error the framework raises resolving or building its mesh, or null",
    "error_stage": "load | resolve | mesh (null when it builds)",
    "model": "model facts (n_heads, n_kv_heads, num_experts, is_moe, n_layers, dim, max_seq_len, ...); "
             "`called` prefixes a model fact in messages: 'model.' where the config states it, "
             "'llama3 8B ' where it comes from the model table; registry versions: converters (model_registry's, "
             "each {field: value, class, name, kind, pads_dispatcher, fqns_call}: a field that could not be read is "
             "null, fqns_call records fqns = nvfp4_bf16_tail_fqns(num_layers, bf16_tail_fraction)) and linears (the "
             "flavor's Linear.Config nodes as traverse(Linear.Config) names them: {fqn pattern, in_features, "
             "out_features, fqns, order}, from the generated model table; null when the config applies no converter)",
    "train": "KempnerForge [train] facts (seq_len, batch_size, grad_accum_steps, compile_model, mixed_precision)",
    "training": "torchtitan training facts (local_batch_size, global_batch_size, seq_len up to 0.3.0; "
                "num_tokens_per_microbatch_per_dp_rank, num_tokens_per_train_step, max_context_length on main; "
                "disable_cuda_graphs, dtype)",
    "parallelism": "other parallelism settings (pp_schedule, pp_microbatch_size, async_tp in 0.2.x; the registry "
                   "versions by field name: spmd_backend, enable_sequence_parallel, num_pp_microbatches, ...)",
    "compile": "torchtitan compile facts (enable; enable_async_tensor_parallel and components in the registry "
               "versions)",
    "vlm": "KempnerForge [vlm] facts (present, arch) and its sequence budget as KempnerForge computes it: "
           "max_text_len, has_vision_encoder, encoder_type, num_tokens (per image), num_tokens_from ('config': "
           "vision_encoder.num_tokens > 0, checked at load; 'build': the random encoder's default, checked when the "
           "model is built; null: probed from a Hugging Face encoder), adapter_type, pool_window, tokens_per_frame, "
           "frames, visual_tokens, residual_image_tokens, required_seq_len, pool_error (the pooling adapter's refusal)",
    "video": "KempnerForge [video] facts (present, max_frames)",
    "eval": "KempnerForge [eval] facts (enabled, dataset_path, hf_dataset_name, has_data_source)",
    "launch": "KempnerForge launch lines in the file's comments: space_overrides, a list of {line, col, key, value, "
              "refused, says, effective} for each '--section.key value' (KempnerForge takes it as a flag set to "
              "\"true\" and drops the value); overrides, a list of {line, key, value} for each '--section.key=value' "
              "written in a comment (meshlint does not apply them: a rule may leave a key alone that the documented "
              "launch sets); dashless_overrides, a list of {line, col, key, value, word, kept} for each "
              "'section.key=value' written without '--' (KempnerForge's parser skips it; kept: the value the run "
              "keeps, null where KempnerForge has no such key). On a launch line or in a script, the launch's own "
              "words (line and col of the word)",
    "trainer": "torchtitan registry configs: config_class (the trainer config class as written, e.g. Trainer.Config, "
               "PolicyTrainer.Config) and runs_trainer (true when torchtitan.trainer.Trainer runs it, so "
               "Trainer.Config's and Trainer.__init__'s checks apply; false for RL PolicyTrainer configs)",
    "accelerate": "Accelerate: sp (DeepSpeed SP size), cp_backend, sp_backend, cp_comm_strategy, "
                  "sp_attn_implementation, distributed_type, fsdp_version, is_fsdp2, config_reaches_ranks (the "
                  "launcher passes parallelism_config to the ranks: multi-GPU, FSDP and DeepSpeed only), "
                  "num_processes, num_machines, world (the processes the launcher starts), section_present, keys "
                  "(setting -> key path), model_config (where the model's config.json was found, or why not), "
                  "ignored_flags (--parallelism_config_* flags of a launch that does not pass them on; "
                  "keys_ignored: the first), per_machine (processes started on each machine), gpu_ids and "
                  "gpu_ids_count (the devices made visible; null for all), mixed_precision, ds_launcher and "
                  "ds_launcher_given (deepspeed_multinode_launcher), ds_hostfile_given, machine_rank, "
                  "machine_rank_given and machine_rank_once (the per-task Slurm variable a --machine_rank under srun "
                  "was expanded from, by the script's own shell, where torchrun's static rendezvous reads it), config_file_given "
                  "(false: a launch line with no --config_file)",
    "pipeline": "how the framework splits the model into pipeline stages and feeds its schedule "
                "(see meshlint/mesh/pipeline.py)",
    "memory": "bytes_per_param (weights + gradients + AdamW moments), gpu_gib (the GPU memory to compare with) and "
              "capacity_source (where it came from); the whole per-GPU peak of the config's own layout "
              "(meshlint/mesh/memory.py, docs/cost-model.md): peak_gib (the largest pipeline stage), peak_stage, stages, "
              "summary (the largest terms, GiB), largest (the largest term), ac (the activation-checkpointing mode), "
              "margin (ML505's fraction); null where the model's size is unknown",
    "problems": "list of invalid values: {key, expected, actual, value, note}",
    "choices": "help lines only: {degree: [values]} that appear in some layout passing every error rule at once "
               "on this config's world (one shared search, so findings never propose contradictory degrees); null "
               "until a config has an error, and when the world is unknown or the search spends its budget of work",
    "config": "the whole config as the framework will use it, by section as its schema names them "
              "(config.checkpoint.enable, config.optimizer.param_groups[0].optimizer_name): the value the file or a "
              "launch override sets, else the schema's literal default; null where meshlint cannot read the value "
              "(a registry function's unreadable expression), where the default is not a literal, and for keys of a "
              "class the schema does not know, so a rule reading it is skipped rather than run on a guess. Each table "
              "also holds `class`, the config class standing there ('MemoryBudgetAC.Config', 'MoMaConfig'; null when "
              "unknown; below the schema's tables, e.g. a registry's dataset tree, as written: 'DatasetMixConfig'); an optional section left out (KempnerForge [vlm]) is null. Degrees: read pp, tp, ... (the "
              "degree search varies those, not config.parallelism); null for a dialect without a generated schema",
    "datasets": "torchtitan: the dataset names this version registers, generated from its source "
                "(meshlint/data/datasets.toml, by meshlint/generate/datasets.py): registries (module -> {names, "
                "lowercased: the name is lowercased before the lookup, source, refused_by}), loaders (a dataloader "
                "config class -> the registry its dataloader.dataset is looked up in), source_loaders (the same for "
                "each of dataloader.sources), models (0.2.x: model name -> the registry its [training] dataset is "
                "looked up in); null for other dialects and versions",
    "refusals": "checks of the framework's config classes (their __post_init__) that the config fails, from the "
                "generated schema, every one: {key, keys (every field the check reads, '|'-joined, key first), message, "
                "framework, source}; ML112 reports each unless another rule reports an error on one of its keys",
    "kept_values": "values of the wrong type, or outside a Literal, that the framework keeps as written (Python does "
                   "not check dataclass fields; tyro only warns), from the generated schema: "
                   "{key, message, framework, expected, value, source}",
    "unknown_keys": "list of keys the framework does not define: {key, section, name, suggestion}",
    "ignored_keys": "torchtitan 0.1.0: keys and sections its ConfigManager drops without a word (it reads only the "
                    "fields its dataclasses have): {key, section, name, suggestion, elsewhere, other_versions, "
                    "framework}",
    "written_for": "a TOML config read as the default version whose every unknown key is a key of another TOML-era "
                   "version (a torchtitan 0.1.0 config read as 0.2.x): {version, keys}, else null",
    "unmodelled": "torchtitan registry configs: what the checkout's code has that the applied version does not "
                  "model and this config depends on (a field it sets, the model it builds, a ParallelDims check "
                  "when ep > 1): {kind (key | model | check | etp | backend-value), name, where, detail, at (the key to point at)}",
    "near_misses": "keys outside the strict sections that are a letter or two from a key meshlint reads: "
                   "{key, section, name, suggestion}",
    "degree_values": "list of declared degrees: {name, key, value, present}",
    "max_degree": "the largest degree meshlint accepts (16,777,216)",
    "native": "native dialect: {dims: [{index, name, role, size, key}], duplicates}",
    "megatron": "Megatron-Core (megatron dialect; null fields elsewhere): args (every option by dest as the parser "
                "and validate_args leave it), given (dests the launch sets), order (the RankGenerator order), dp, "
                "edp (expert data parallel), vp (virtual pipeline size or null), model_size (tp·pp·cp), expert_size "
                "(etp·ep·pp), split_error/split_source/split_key (the first check refusing the layer split, where), "
                "layout (--pipeline-model-parallel-layout as written or null), layout_error (the first check refusing "
                "it; split_source/split_key say where), split_pps (where the split is refused: the pp values up to "
                "64 it accepts that tp·cp·pp divides the world for), "
                "layer_counts (layers per virtual stage per pp rank), parser_refusals ({message, line, col, later: "
                "the first later Megatron-LM release that has an option 0.16.1 lacks, or null}: argparse's errors), world_implied (the world is the smallest the degrees allow), incomplete (a word the script does not "
                "determine may hold any option: options not written elsewhere are null, not defaulted), env ({known: a script's "
                "launch, whose exports meshlint reads; cuda_device_max_connections: the value it exports, null when "
                "unset or unknown; cuda_device_max_connections_set}), core_refusals (list of {site, message, key, "
                "options, condition}: the checks of ModelParallelConfig/TransformerConfig.__post_init__ the options "
                "trigger, from config_checks_0_16.json), validate_refusals (the same for Megatron-LM's validate_args, from "
                "validate_checks_0_16.json: each check replayed on the options as validate_args has changed them by "
                "its line), pstate_refusals (the same for initialize_model_parallel's checks of --use-sharp, "
                "--sharp-enabled-group, --hybrid-context-parallel and --hierarchical-context-parallel-sizes), decrease_batch (--decrease-batch-size-if-needed), rampup (the first refusal of --rampup-batch-size by Megatron-Core's ramp-up calculator, at start-up "
                "or at a training iteration: {site, message, key, iteration}; null: none, or not decidable), "
                "microbatch_group (the interleaved schedule's refusal of the microbatch count at the first step, "
                "schedules.py:995-1015: {error, site, cause, need, group, m, pp, valid (accepted microbatch counts), batches "
                "(the global batch sizes giving them)}; null: none, or not decidable), cp_comm_types (--cp-comm-type / "
                "model.cp_comm_type as a list of strings; null: unknown)",
    "topology_conflicts": "list of {what, kept, kept_value, other, other_value, explicit}: explicit when the kept "
                          "value is the user's own word to meshlint (the command line or a '# meshlint:' directive)",
    "srun_idle": "srun starts the ranks itself with fewer tasks per node than the nodes have GPUs (the kept world "
                 "is its task count): {tasks_per_node, gpus_per_node (the allocation's), nodes, default (no task "
                 "count: SLURM's one task per node), world (nodes × GPUs), source, line, col (srun's word), agree "
                 "(the other sources that count every GPU; their disagreements are folded into this)}; null: none",
    "world_candidates": "the world sizes the file's launch-line comments name when they name several and nothing "
                        "else settles it: [{source, world (null: not stated), words}] (none is chosen)",
    "directive_problems": "list of {line, message} for malformed '# meshlint:' directives",
    "skipped": "rules skipped for lack of a fact: [{code, name, needs}] (complete only in messages)",
    "unused_suppressions": "suppression comments that suppressed nothing: [{line, selector, reason, comment}] "
                           "(only with --report-unused-suppressions; null otherwise)",
}
BOUND_NAMES = {"item", "params"}

# Fields of the grouped facts: the same in every dialect (null where a dialect
# has no such value), so one rule can serve all dialects, and a misspelt field
# in a rule file is caught when the rule is loaded.
GROUP_FIELDS = {
    "model": ("n_layers", "n_heads", "n_kv_heads", "n_kv_heads_defaulted", "dim", "head_dim", "vocab_size", "max_seq_len",
              "tie_embeddings", "ffn_hidden_dim", "ffn_dim_multiplier", "num_experts", "moe_top_k", "moe_frequency",
              "shared_experts", "moe_hidden_dim", "is_moe", "attention", "params", "name", "flavor", "known",
              "source", "called",
              # torchtitan registry versions: model_registry's arguments and the ModelSpec's pipelining function
              "attn_backend", "moe_comm_backend", "non_blocking_capacity_factor", "pipelining", "pipelining_fn",
              "family", "vision_n_heads", "linear_key_heads", "linear_value_heads", "rope_max_len", "validator", "num_mtp_layers", "tp_gemm_backend", "registered", "attn_type",
              "converters", "attn_masks", "attn_mask_keys", "linears"),
    "train": ("batch_size", "seq_len", "grad_accum_steps", "compile_model", "mixed_precision"),
    "training": ("local_batch_size", "global_batch_size", "seq_len", "dtype",
                 "num_tokens_per_microbatch_per_dp_rank", "num_tokens_per_train_step", "max_context_length",
                 "disable_cuda_graphs"),
    "pipeline": ("schedule", "style", "stages", "stages_per_rank", "layer_counts", "effective_counts",
                 "n_microbatches", "microbatch_size", "split_error", "schedule_error", "unknown_schedule",
                 "bubble", "microbatches_key"),
    "memory": ("bytes_per_param", "gpu_gib", "peak_gib", "peak_stage", "capacity_source", "margin", "summary",
               "largest", "stages", "ac"),
    "parallelism": ("pp_schedule", "pp_microbatch_size", "pp_layers_per_stage", "pp_first_stage_less_layers",
                    "pp_last_stage_less_layers", "async_tp",
                    # torchtitan registry versions, by ParallelismConfig field name
                    "spmd_backend", "enable_sequence_parallel", "num_pp_microbatches",
                    "pipeline_parallel_microbatch_size", "pipeline_parallel_schedule",
                    "context_parallel_load_balancer", "pipeline_parallel_schedule_csv",
                    "context_parallel_ptrr_mask_key"),
    "compile": ("enable", "enable_async_tensor_parallel", "components", "backend"),
    "trainer": ("config_class", "runs_trainer"),
    "framework": ("name", "version", "decided_by", "id"),
    "vlm": ("present", "arch", "max_text_len", "has_vision_encoder", "encoder_type", "num_tokens", "num_tokens_from",
            "adapter_type", "pool_window", "tokens_per_frame", "frames", "visual_tokens", "residual_image_tokens",
            "required_seq_len", "pool_error"),
    "video": ("present", "max_frames"),
    "eval": ("enabled", "dataset_path", "hf_dataset_name", "has_data_source"),
    "launch": ("space_overrides", "overrides", "dashless_overrides"),
    "native": ("dims", "duplicates", "world_size", "gpus_per_node"),
    "accelerate": ("sp", "cp_backend", "sp_backend", "cp_comm_strategy", "sp_attn_implementation", "distributed_type",
                   "fsdp_version", "is_fsdp2", "config_reaches_ranks", "num_processes", "num_machines", "world",
                   "section_present", "keys", "model_config", "ignored_flags", "keys_ignored", "per_machine",
                   "gpu_ids", "gpu_ids_count", "mixed_precision", "ds_launcher", "ds_launcher_given",
                   "ds_hostfile_given", "machine_rank", "machine_rank_given", "machine_rank_once",
                   "config_file_given"),
    "megatron": ("args", "given", "order", "dp", "edp", "vp", "model_size", "expert_size", "split_error",
                 "split_source", "split_key", "layout_error", "layout", "split_pps", "layer_counts", "parser_refusals", "world_implied",
                 "incomplete", "env", "core_refusals", "validate_refusals", "pstate_refusals", "rampup", "decrease_batch",
                 "microbatch_group", "cp_comm_types"),
}

ROLE_OF = {"batch": "dp", "loss": "dp", "dp": "dp", "fsdp": "dp_shard", "efsdp": "dp_shard", "dp_cp": "dp",
           "dp_shard_cp": "dp_shard",  # Accelerate's flattened meshes: the loss average and FSDP's shards
           "dp_replicate": "dp_replicate", "dp_shard": "dp_shard", "pp": "pp", "cp": "cp", "tp": "tp", "ep": "ep",
           "etp": "etp",
           # Megatron's groups (dialects/megatron/ranks.py): expert dp, and the groups spanning several dims
           "edp": "dp", "mp": "model", "tp_dp_cp": "model", "tp_dp": "model", "tp_cp": "model",
           "tp_ep": "model", "tp_ep_pp": "model"}


def build_facts(spec: Spec, topo: Topology, res: Resolution) -> dict:
    from meshlint.frameworks.base import MAX_DEGREE

    deg = res.degrees
    fw = getattr(spec, "framework", None) or {}
    # a TOML config of a versioned dialect is that dialect's TOML-era version (torchtitan 0.2.x)
    version = fw.get("version") or _toml_version(spec.dialect)
    facts: dict = {
        "dialect": spec.dialect,
        "framework_version": version,
        "framework": {"name": fw.get("name") or spec.dialect, "version": version, "decided_by": fw.get("decided_by"),
                      "id": f"{fw.get('name') or spec.dialect}@{version}" if version else spec.dialect},
        "unreadable": list(getattr(spec, "unreadable", None) or []),
        "world_size": topo.world_size,
        "world_known": topo.world_size is not None,
        "world_source": topo.world_source,
        "gpus_per_node": topo.gpus_per_node,
        "gpus_per_node_source": topo.gpus_per_node_source,
        "nodes": topo.nodes,
        "placement": topo.placement,
        "declared": {n: spec.degrees.get(n) for n in DEGREES},
        "dp_shard_inferred": spec.degrees.get("dp_shard") == -1,
        "keys": dict(spec.degree_keys),
        "world_factors": [{"name": n, "value": v, "inferred": i} for n, v, i in res.world_factors],
        "framework_error": res.framework_error,
        "error_stage": res.error_stage,
        "problems": spec.problems,
        "refusals": spec.extra.get("refusals", []),
        "kept_values": spec.extra.get("kept_values", []),
        "ignored_keys": spec.extra.get("ignored_keys", []),
        "written_for": spec.extra.get("written_for"),
        "unmodelled": spec.extra.get("unmodelled", []),
        "config": spec.extra.get("config") or None,  # null, not {}: a rule reading it is skipped
        "datasets": _datasets(version) if spec.dialect == "torchtitan" else None,
        "choices": None,
        "unknown_keys": spec.unknown_keys,
        "near_misses": spec.near_misses,
        "degree_values": degree_items(spec),
        "max_degree": MAX_DEGREE,
        "native": {"dims": spec.extra.get("dims", []), "duplicates": spec.extra.get("duplicates", [])},
        "topology_conflicts": [
            {"what": what, "kept": kept, "kept_value": kv, "other": other, "other_value": ov,
             "explicit": kept == topo_cli_source(topo, what)}
            for what, kept, kv, other, ov in topo.conflicts
        ],
        "srun_idle": getattr(topo, "srun_idle", None),
        "world_candidates": [{"source": src, "world": w, "words": words}
                             for src, w, words in getattr(topo, "world_candidates", [])],
        "directive_problems": [{"line": line, "message": msg} for line, _col, msg in topo.directive_problems],
        "skipped": [],
        "unused_suppressions": None,
    }
    for name in DEGREES + ("batch", "fsdp", "efsdp"):
        facts[name] = deg.get(name)
    kind, n = res.valid_worlds or (None, None)
    facts["valid_world_kind"], facts["valid_world_n"] = kind, n
    facts["valid_worlds"] = _valid_worlds_text(res.valid_worlds)
    mesh = res.mesh
    facts["mesh"] = _mesh_fact(mesh)
    facts["meshes"] = {name: _mesh_fact(m) for name, m in res.meshes.items()}
    facts["mesh_ranks"] = mesh.size if mesh else None
    facts["outside"] = ({"first": res.outside[0], "last": res.outside[1], "count": res.outside[1] - res.outside[0] + 1}
                        if res.outside else None)
    facts["axes"] = _axes(res, topo, spec)
    from meshlint.frameworks.dialects import module_of

    module = module_of(spec)  # the version module of its version (registry-era torchtitan, Megatron)
    facts["pipeline"] = module.pipeline_plan(spec, res) if hasattr(module, "pipeline_plan") else {}
    facts["memory"] = {"bytes_per_param": module.bytes_per_param(spec) if hasattr(module, "bytes_per_param")
                       else None, "gpu_gib": topo.gpu_memory_gib}
    if hasattr(module, "megatron_facts"):
        facts["megatron"] = module.megatron_facts(spec, res)
    for group, blank in _BLANK_GROUPS.items():  # every field of a group present (null when unknown), in this order
        table = blank.copy()
        table.update(facts.get(group, ()))
        facts[group] = table
    values = spec.values
    for head, fields in _value_groups(tuple(values)):  # "model.dim" -> facts["model"]["dim"]; "tp" -> parallelism
        table = facts.setdefault(head, {})
        for path, tail in fields:
            table[tail] = values[path]
    return facts


_GROUPS: dict = {}  # the keys of a spec's values -> their grouping by fact (one per reader and version, in practice)


def _value_groups(paths: tuple) -> list:
    """``[(head, [(path, tail), ...])]``: each dotted path under its head, a plain one under ``parallelism``, heads
    in the order they first come and paths in theirs (the order a path at a time would give each table)."""
    hit = _GROUPS.get(paths)
    if hit is None:
        groups: dict = {}
        for path in paths:
            head, _, tail = path.partition(".")
            if tail:
                groups.setdefault(head, []).append((path, tail))
            else:
                groups.setdefault("parallelism", []).append((path, head))
        if len(_GROUPS) >= 256:  # a long-lived process reads many kinds of config: keep the cache bounded
            _GROUPS.clear()
        hit = _GROUPS[paths] = list(groups.items())
    return hit


_BLANK_GROUPS = {group: dict.fromkeys(fields) for group, fields in GROUP_FIELDS.items()}  # copied per config
_DATASETS: dict = {}


def _datasets(version: str | None) -> dict | None:
    """The generated dataset-name facts of a torchtitan version (read once per process), or None."""
    if not _DATASETS:
        import os

        from meshlint import tomlfast

        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "datasets.toml")
        try:
            data = tomlfast.load(path)
        except (OSError, ValueError):
            data = {}
        for v, table in data.items():
            if isinstance(table, dict):
                _DATASETS[v] = {"registries": table.get("registries", {}), "loaders": table.get("loaders", {}),
                                "source_loaders": table.get("source_loaders", {}),
                                "models": {m: e.get("registry") for m, e in table.get("models", {}).items()}}
        _DATASETS.setdefault("", None)  # loaded (even when the file is missing)
    return _DATASETS.get(version or "")


def _toml_version(dialect: str) -> str | None:
    from meshlint.frameworks.versions import TOML_VERSION

    return TOML_VERSION.get(dialect)


def topo_cli_source(topo: Topology, what: str) -> str | None:
    """The source of the value kept for ``what`` when the user stated it for meshlint: the command
    line (--world-size, --nodes, --gpus-per-node) or a ``# meshlint:`` directive."""
    source = topo.world_source if what == "world size" else topo.gpus_per_node_source
    return source if source and (source.startswith("--") or source.startswith("directive on line")) else None


def _mesh_fact(mesh: Mesh | None) -> dict | None:
    if mesh is None:
        return None
    return {"name": mesh.name, "dims": list(mesh.dims), "sizes": list(mesh.sizes),
            "strides": list(mesh.strides), "size": mesh.size}


def _axes(res: Resolution, topo: Topology, spec: Spec) -> list:
    roles = {}
    if spec.dialect == "native":
        roles = {d["name"]: d["role"] for d in spec.extra.get("dims", [])}
    out = []
    gpn = topo.gpus_per_node
    world = res.world_used
    for name, axis in res.axes.items():
        item = {"name": name, "role": roles.get(name, ROLE_OF.get(name)), "mesh": axis.mesh, "size": axis.size,
                "stride": axis.stride, "groups": axis.groups, "intra_node": None, "max_nodes": None,
                "crossing_groups": None, "example": None}
        if gpn and world:
            p = place(axis, gpn, world, topo.placement)
            item.update(intra_node=p.intra_node, max_nodes=p.max_nodes, crossing_groups=p.crossing_groups,
                        example=list(p.example) if p.example else None)
        out.append(item)
    return out


def _valid_worlds_text(valid: tuple | None) -> str:
    if not valid:
        return "not valid on any world size until its degrees are fixed"
    kind, n = valid
    if kind == "exact":
        return f"valid only on exactly {n} GPUs"
    if kind == "multiple":
        return "valid on any number of GPUs" if n == 1 else f"valid on any multiple of {n} GPUs"
    return f"valid on no world size ({n})"
