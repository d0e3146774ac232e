"""The classification of every refusal site: the verdicts, the hand entries (``HAND``, keyed by a fingerprint
that survives line shifts) and the patterns (``PATTERNS``), and ``classify`` that picks one per site.

One table, read best whole: each entry names the site it decides and why."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from meshlint.generate.refusal_sites import Site


# ----------------------------------------------------------------------------- classification

VERDICTS = {
    "rule": "covered by a meshlint rule",
    "partial": "covered by a rule in part (the note says which part is not)",
    "schema": "covered by the schema check (meshlint/frameworks/schema_data.py: unknown keys, types, enums, the section's own "
              "__post_init__ checks)",
    "open": "decidable from the config (and world size, model tables), not yet covered",
    "runtime": "cannot be decided statically",
    "internal": "not reachable from a config value",
}


@dataclass(frozen=True)
class Rule:
    """A classification: sites matching file (fnmatch), func and text (regex search) get the verdict."""

    verdict: str            # "rule ML302" | "partial ML609" | "schema" | "open" | "runtime" | "internal"
    why: str
    file: str = "*"
    func: str = ""
    text: str = ""          # searched in "condition | message"
    versions: tuple = ()    # () = every version
    exc: str = ""

    def matches(self, site: Site, version: str) -> bool:
        if self.versions and version not in self.versions:
            return False
        if not fnmatch.fnmatch(site.file, self.file):
            return False
        if self.func and not re.search(self.func, site.function):
            return False
        if self.exc and not re.search(self.exc, site.exception):
            return False
        return not self.text or bool(re.search(self.text, f"{site.condition} | {site.message}"))

    @property
    def basis(self) -> str:
        return "site" if self.text else "function" if self.func else "file" if self.file != "*" else "pattern"


KF = ("kempnerforge",)
V02 = ("torchtitan-0.2.x",)
V030 = ("torchtitan-0.3.0",)
MAIN = ("torchtitan-main",)
REG = V030 + MAIN
TT = V02 + REG

HAND = [
    # ---------------------------------------------------------------- KempnerForge: load
    Rule("schema", "unknown keys in any table", "kempnerforge/config/loader.py", text=r"Unknown config keys", versions=KF),
    Rule("schema", "a value outside a Literal", "kempnerforge/config/loader.py", text=r"allowed Literal", versions=KF),
    Rule("schema", "an unknown [vlm] arch", "kempnerforge/config/*.py", text=r"Unknown vlm\.arch", versions=KF),
    Rule("internal", "nothing is reserved (_RESERVED_ARCHS is empty)", "kempnerforge/config/*.py", text=r"is reserved",
         versions=KF),
    Rule("runtime", "the config file itself is missing", "kempnerforge/config/loader.py", text=r"Config file not found",
         versions=KF),
    Rule("internal", "registering a name twice is a code error", "kempnerforge/config/registry.py", func=r"register$",
         versions=KF),
    Rule("rule ML820", "names looked up in the registry when the job is built: model.model_type, optimizer.name, "
                       "train.loss_fn, model.moe_router (MoE) by ML820; norm_type, activation and scheduler.name are "
                       "enums the schema check covers",
         "kempnerforge/config/registry.py", func=r"Registry\.get$", versions=KF),
    Rule("rule ML829", "[data] loops the schema check cannot evaluate: each source needs path or hf_name, phase "
                       "start_steps strictly increasing, phase dataset weights (and data.anneal_weights, which "
                       "train.py makes a TrainingPhase before the first step) non-negative",
         "kempnerforge/config/data.py", text=r"either path or hf_name|start_steps must be strictly|dataset_weights\[",
         versions=KF),
    Rule("rule ML103", "the degree product", "kempnerforge/config/distributed.py", func=r"validate_world_size", versions=KF),
    Rule("rule ML104", "dp_shard = -1 must divide", "kempnerforge/config/distributed.py", func=r"_resolve_dp_shard",
         versions=KF),
    Rule("rule ML102", "degree ranges (also evaluated by the schema check)", "kempnerforge/config/distributed.py",
         func=r"__post_init__", versions=KF),
    # JobConfig.validate(world_size)
    Rule("rule ML302", "train.seq_len <= model.max_seq_len", "kempnerforge/config/job.py", text=r"exceeds model\.max_seq_len",
         versions=KF),
    Rule("rule ML303", "tied embeddings with pp", "kempnerforge/config/job.py", text=r"Tied embeddings", versions=KF),
    Rule("rule ML316", "eval.enabled needs eval.dataset_path or eval.hf_dataset_name", "kempnerforge/config/job.py",
         text=r"eval\.enabled is True", versions=KF),
    Rule("rule ML304", "n_heads % tp", "kempnerforge/config/job.py", text=r"^.*n_heads \(\{self\.model\.n_heads\}\) must be",
         versions=KF),
    Rule("rule ML305", "n_kv_heads % tp (meshlint assumes n_kv_heads = n_heads when absent; KempnerForge keeps the "
                       "default instance's 32: see the schema tests)", "kempnerforge/config/job.py",
         text=r"n_kv_heads \(\{self\.model\.n_kv_heads\}\) must be divisible by tp", versions=KF),
    Rule("rule ML306", "fp8 with tp", "kempnerforge/config/job.py", text=r"FP8 \+ Tensor", versions=KF),
    Rule("rule ML307", "MoE with pp", "kempnerforge/config/job.py", text=r"MoE \+ Pipeline", versions=KF),
    Rule("rule ML308", "ep without MoE", "kempnerforge/config/job.py", text=r"requires an MoE model", versions=KF),
    Rule("rule ML309", "num_experts % ep", "kempnerforge/config/job.py", text=r"num_experts .* must be divisible by ep",
         versions=KF),
    Rule("rule ML310", "[vlm] with pp", "kempnerforge/config/job.py", text=r"VLM \+ Pipeline", versions=KF),
    Rule("rule ML311", "MoMa with ep", "kempnerforge/config/job.py", text=r"MoMa \+ Expert", versions=KF),
    Rule("rule ML313", "MoMa with model.num_experts > 0", "kempnerforge/config/job.py", text=r"MoMa \+ model\.num_experts",
         versions=KF),
    Rule("rule ML315", "VLM length: model.max_seq_len at load", "kempnerforge/config/job.py",
         text=r"model\.max_seq_len \(", versions=KF),
    Rule("rule ML314", "VLM length: train.seq_len in validate", "kempnerforge/config/job.py",
         text=r"train\.seq_len \(\{self\.train\.seq_len\}\) insufficient", versions=KF),
    Rule("rule ML314", "VLM sequence length: train.seq_len must hold image tokens x video.max_frames + "
                       "vlm.max_text_len when vision_encoder.num_tokens > 0",
         "kempnerforge/config/job.py", text=r"insufficient for VLM", versions=KF),
    Rule("internal", "narrowing asserts after __post_init__ materialised the sections", "kempnerforge/config/job.py",
         exc="AssertionError", versions=KF),
    Rule("schema", "[vlm] needs [vision_encoder], [video] needs [vlm] (the schema check evaluates JobConfig.__post_init__)",
         "kempnerforge/config/job.py", text=r"is set but \[", versions=KF),
    # scripts/train.py
    Rule("rule ML858", "VLM data: video needs data.tokenizer_path, image VLM data.hf_dataset_name and "
                       "data.tokenizer_path (a key that a --section.key=value in the file's comments sets counts as "
                       "supplied: meshlint does not apply launch-line overrides, and the shipped configs' usage lines "
                       "override these keys)",
         "scripts/train.py", text=r"Video training requires|VLM training requires data\.", versions=KF),
    Rule("rule ML827", "a text data source needs data.tokenizer_path (packing, [[data.datasets]] hf_name, "
                       "data.hf_dataset_name)", "scripts/train.py",
         text=r"tokenizer_path|hf_dataset_name", exc="ValueError", versions=KF),
    Rule("internal", "unreachable once the VLM data checks above pass", "scripts/train.py", text=r"real dataloader",
         versions=KF),
    Rule("internal", "narrowing asserts", "scripts/train.py", exc="AssertionError", versions=KF),
    # distributed, pipeline, model
    Rule("rule ML309", "num_experts % ep", "kempnerforge/distributed/expert_parallel.py", text=r"num_experts", versions=KF),
    Rule("rule ML601", "pp cannot exceed n_layers", "kempnerforge/distributed/pipeline_parallel.py", text=r"cannot exceed",
         versions=KF),
    Rule("rule ML607", "interleaved_1f1b needs several stages per rank, which train.py never builds",
         "kempnerforge/distributed/pipeline_parallel.py", text=r"interleaved_1f1b schedule requires", versions=KF),
    Rule("schema", "pp_schedule is an enum (refused at load, before this)", "kempnerforge/distributed/pipeline_parallel.py",
         text=r"Unknown PP schedule", versions=KF),
    Rule("partial ML315", "VLM sequence length at build time (random encoder's default counted; a Hugging Face "
                          "encoder's count is probed at run time)", "kempnerforge/distributed/parallel.py", text=r"insufficient for VLM", versions=KF),
    Rule("partial ML315", "VLM sequence length at build time (random encoder's default counted; a Hugging Face "
                          "encoder's count is probed at run time)", "kempnerforge/model/vlm.py", text=r"insufficient for VLM", versions=KF),
    Rule("internal", "get_dp_mesh is only called when a dp dim exists", "kempnerforge/distributed/parallel.py",
         text=r"No DP dimensions", versions=KF),
    Rule("internal", "the VLM builder's own invariants", "kempnerforge/distributed/parallel.py", exc="AssertionError",
         versions=KF),
    Rule("runtime", "a barrier timing out (network, a dead rank)", "kempnerforge/distributed/setup.py", versions=KF),
    Rule("rule ML807", "RoPE needs an even head_dim: model.dim / model.n_heads even", "kempnerforge/model/position.py",
         text=r"head_dim % 2", versions=KF),
    Rule("rule ML856", "MoT needs equal head counts across modalities (vlm.mot_image_n_heads / n_kv_heads 0 or equal "
                       "to the model's)", "kempnerforge/model/transformer.py", text=r"MoT v1 requires equal head",
         versions=KF),
    Rule("partial ML319", "pooling adapters: the patch grid must be square and divisible by adapter.pool_window "
                          "(random encoder's default counted; a Hugging Face encoder's count is probed at run time)", "kempnerforge/model/adapter.py",
         text=r"divisible by the pool|perfect square|grid % w", versions=KF),
    Rule("partial ML857", "attentional_pool: vision feature_dim divisible by adapter.pool_heads, checked when "
                          "vision_encoder.feature_dim > 0; with 0 the width is the built encoder's (the random stub's "
                          "default, a Hugging Face checkpoint's hidden size), not modelled",
         "kempnerforge/model/adapter.py", text=r"in_dim .* divisible by pool_heads", versions=KF),
    Rule("schema", "adapter fields are checked at load by AdapterConfig.__post_init__ first",
         "kempnerforge/model/adapter.py", func=r"__init__$|pooled_token_count", versions=KF),
    Rule("runtime", "HF vision encoders need transformers and an encoder path", "kempnerforge/model/vision.py",
         versions=KF),
    Rule("rule ML860", "vlm.freeze / freeze_schedule modules must be module aliases (vlm.module_patterns keys); "
                       "train.py checks after every step (the base list after step 1, a stage once reached), and "
                       "before the first step on a resume or a step-0 checkpoint",
         "kempnerforge/training/freeze.py", versions=KF),
    Rule("internal", "the mixture sampler gets one weight per [[data.datasets]] source (a source without path or "
                     "hf_name is refused at load), and negative weights are refused at load (DatasetSource weight > "
                     "0, TrainingPhase weights >= 0, the anneal shortcut's TrainingPhase too)",
         "kempnerforge/data/sampler.py", func=r"_validate_weights", text=r"^not weights|w < 0", versions=KF),
    Rule("rule ML859", "a data phase (or the anneal shortcut) that weighs every source 0: refused when the run reaches "
                       "its start_step (the switch follows the optimizer step; before the first step on a resume)",
         "kempnerforge/data/sampler.py", func=r"_validate_weights", versions=KF),
    Rule("runtime", "the checkpoint being resumed (owner, freeze metadata)", "kempnerforge/checkpoint/*.py", versions=KF),
    Rule("runtime", "pack_sequences: the tokenizer's eos token (from the tokenizer files)", "kempnerforge/data/dataset.py",
         text=r"eos_token_id", versions=KF),
    Rule("internal", "validated at load by the [video] / [vlm] sections' __post_init__ before these run",
         "kempnerforge/data/*.py", text=r"split must be one of|max_text_len must be positive|fps must be positive|"
                                       r"min_frames", versions=KF),
    Rule("internal", "the mixture is built only from a non-empty data.datasets", "kempnerforge/data/dataset.py",
         func=r"MixtureDataset\.__init__", versions=KF),
    Rule("runtime", "the dataset on disk or on the hub", "kempnerforge/data/*.py", versions=KF),
    Rule("internal", "model internals (modalities and activations are validated at load)", "kempnerforge/model/*.py",
         versions=KF),
    Rule("internal", "called by code only", "kempnerforge/config/vlm.py", func=r"resolved_heads|resolved_image_heads|for_arch",
         versions=KF),
    Rule("rule ML855", "[vlm] loops the schema check cannot evaluate: freeze_schedule start_steps strictly increasing; "
                       "MoMa's moma_experts_per_modality has no missing or unknown modality and only positive counts",
         "kempnerforge/config/vlm.py", text=r"freeze_schedule start_steps|moma_experts_per_modality", versions=KF),

    # ---------------------------------------------------------------- torchtitan: load
    Rule("schema", "unknown keys in any table", "torchtitan/config/manager.py", text=r"Invalid field names", versions=V02),
    Rule("runtime", "the TOML file cannot be read or parsed (meshlint: ML001/ML003)", "torchtitan/config/manager.py",
         func=r"_maybe_load_toml", versions=V02),
    Rule("runtime", "hf_assets_path points at an old tokenizer.model file on disk", "torchtitan/config/manager.py",
         text=r"old tokenizer\.model", versions=TT),
    Rule("runtime", "the launch line (--module/--config) and importing the registry", "torchtitan/config/manager.py",
         func=r"_load_config", versions=REG),
    Rule("internal", "registry plumbing checked by the framework's own code and tests", "torchtitan/config/configurable.py",
         versions=REG),
    Rule("runtime", "override.imports names modules to import: their contents decide", "torchtitan/config/override.py",
         versions=REG),
    Rule("rule ML713", "async TP needs compile.enable and 'model' in compile.components (also the schema check)",
         "torchtitan/config/configs.py", text=r"Async TP requires", versions=REG),
    Rule("runtime", "enable_fsdp_symm_mem asks the GPU (compute capability >= 9.0)", "torchtitan/config/configs.py",
         text=r"enable_fsdp_symm_mem", versions=REG),
    # ParallelDims
    Rule("rule ML102", "degrees >= 1", "torchtitan/distributed/parallel_dims.py", text=r"should be >= 1|dp_shard must -1",
         versions=TT),
    Rule("rule ML104", "dp_shard = -1 resolved to 0", "torchtitan/distributed/parallel_dims.py", text=r"^not \(dp_shard >= 1\)",
         versions=TT),
    Rule("rule ML103", "the degree product", "torchtitan/distributed/parallel_dims.py", text=r"Invalid parallel dims",
         versions=TT),
    Rule("rule ML401", "etp must equal tp or 1", "torchtitan/distributed/parallel_dims.py", text=r"ETP=TP", versions=V02),
    Rule("rule ML701", "ep must divide dp_shard*cp*tp", "torchtitan/distributed/parallel_dims.py",
         text=r"must divide dp_shard", versions=MAIN),
    Rule("rule ML405", "get_mesh('fsdp') when ep > 1 and dp_shard·cp = 1 (llama4, deepseek_v3, gpt_oss)",
         "torchtitan/distributed/parallel_dims.py", func=r"^get_mesh$", versions=V02),
    Rule("internal", "mesh bookkeeping after the checks above", "torchtitan/distributed/parallel_dims.py",
         func=r"_validate_meshes|get_optional_mesh|get_mesh|build_mesh|resolve_shared_mesh|SpmdLayout", versions=TT),
    # trainer init
    Rule("rule ML608", "global batch a multiple of local batch x batch degree", "torchtitan/train.py",
         text=r"global_batch_size %|global batch size must be", versions=V02),
    Rule("rule ML608", "global batch > 0 after the default (-1 -> local x batch degree)", "torchtitan/train.py",
         text=r"global_batch_size > 0", versions=V02),
    Rule("internal", "follows from the global batch check", "torchtitan/train.py", text=r"gradient_accumulation_steps > 0",
         versions=V02),
    Rule("rule ML613", "pipeline parallelism on a model with no pipelining function (qwen3, flux in v0.2.x)",
         "torchtitan/train.py", text=r"does not support pipelin", versions=V02),
    Rule("rule ML848", "validation.enable on a model with no validator (flux has one; the others use the default)",
         "torchtitan/train.py", text=r"build_validator_fn", versions=V02),
    Rule("rule ML813", "create_seed_checkpoint needs checkpoint.enable", "torchtitan/train.py",
         text=r"Must enable checkpointing when creating a seed checkpoint", versions=REG),
    Rule("rule ML830", "create_seed_checkpoint needs checkpoint.enable", "torchtitan/train.py",
         text=r"Must enable checkpointing when creating a seed checkpoint", versions=V02),
    Rule("rule ML814", "create_seed_checkpoint needs a world of 1", "torchtitan/train.py",
         text=r"seed checkpoint using a single device", versions=REG),
    Rule("rule ML831", "create_seed_checkpoint needs a world of 1", "torchtitan/train.py",
         text=r"seed checkpoint using a single device", versions=V02),
    Rule("runtime", "the data runs out / the loop's own state", "torchtitan/train.py",
         func=r"batch_generator|train$|forward_backward_step|post_dataloading_process", versions=TT),
    Rule("runtime", "main() re-raises what the trainer raised", "torchtitan/train.py", exc="re-raise", versions=TT),
    # parallelize functions (v0.2)
    Rule("rule ML614", "seq_len % (tp x 2cp): ML609 when cp > 1, ML614 when cp = 1 (the divisor is still 2·tp)",
         "torchtitan/models/*/infra/parallelize.py", text=r"seq_len_divisor", versions=V02),
    Rule("rule ML404", "DDP beyond the replicate group", "torchtitan/models/*/infra/parallelize.py",
         text=r"world_size != dp_(replicate_)?mesh\.size", versions=V02),
    Rule("internal", "tests ndim of the one-dimensional dp_replicate mesh: never true",
         "torchtitan/models/*/infra/parallelize.py", text=r"dp_mesh\.ndim > 1", versions=V02),
    Rule("rule ML404", "DDP (dp_replicate > 1 without FSDP) combined with tp or pp",
         "torchtitan/models/*/infra/parallelize.py", text=r"DDP has not supported", versions=V02),
    Rule("rule ML611", "async TP needs compile", "torchtitan/models/*/infra/parallelize.py", text=r"Async TP requires",
         versions=V02),
    Rule("rule ML611", "async TP needs compile", "torchtitan/distributed/tensor_parallel.py", text=r"Async TP requires",
         versions=V02),
    Rule("rule ML809", "gpt_oss refuses context parallelism outright", "torchtitan/models/gpt_oss/*",
         text=r"CP support for gpt-oss", versions=V02),
    Rule("rule ML854", "context parallelism needs an attention type that supports it (sdpa/flex, per model: the flavor's "
                 "attn_type, which the 0.2.x model table does not record)",
         "torchtitan/models/*", text=r"Context Parallel only supports", versions=V02),
    Rule("rule ML837", "expert_parallel_comm_backend = deepep needs ep > 1 and no etp", "torchtitan/models/*/infra/parallelize.py",
         text=r"DeepEP", versions=V02),
    Rule("rule ML838", "float8 tensorwise TP is refused for deepseek_v3", "torchtitan/models/*/infra/parallelize.py",
         text=r"float8 tensorwise TP", versions=V02),
    Rule("schema", "fsdp_reshard_after_forward is a Literal (kept by the loader, refused here; the schema check "
                   "reports it)", "torchtitan/models/*/infra/parallelize.py", text=r"reshard_after_forward_policy",
         versions=V02),
    Rule("internal", "meshes exist for the degrees that are enabled", "torchtitan/models/*/infra/parallelize.py",
         exc="AssertionError", versions=V02),
    # pipeline
    Rule("rule ML604", "local_batch_size % pipeline_parallel_microbatch_size", "torchtitan/distributed/pipeline_parallel.py",
         text=r"must be divisible by", func=r"build_pipeline_schedule", versions=V02),
    Rule("rule ML601", "layers per stage / stages per rank the schedule needs", "torchtitan/distributed/pipeline_parallel.py",
         text=r"virtual stages|stage per rank|stages per rank|Number of stages|empty stages|exceeds minimum layers",
         versions=TT),
    Rule("runtime", "pipeline_parallel_schedule_csv names a file", "torchtitan/distributed/pipeline_parallel.py",
         text=r"pp_schedule_csv", versions=TT),
    Rule("internal", "follows from the stage checks above", "torchtitan/distributed/pipeline_parallel.py",
         text=r"evenly divisible by pp_degree|v schedules assume|Unknown style|n_layers attribute", versions=TT),
    Rule("rule ML806", "pipeline_parallel_schedule = PipelineScheduleSingle names torch's abstract base class "
                       "(meshlint's schedule table accepts it)", "torchtitan/distributed/pipeline_parallel.py", text=r"abstract base class",
         versions=REG),
    Rule("rule ML604", "local_batch_size % pipeline_parallel_microbatch_size", "torchtitan/distributed/pipeline_parallel.py",
         text=r"must be divisible by microbatch_size", versions=V030),
    # activation checkpointing
    Rule("schema", "activation_checkpoint.mode is a Literal", "torchtitan/distributed/activation_checkpoint.py",
         text=r"Invalid AC mode", versions=V02),
    Rule("internal", "follows from the mode check", "torchtitan/distributed/activation_checkpoint.py",
         text=r"^ac_config\.mode|not \(ac_config\.mode == 'selective'\)", exc="AssertionError", versions=V02),
    Rule("rule ML835", "selective_ac_option must be 'op' or a positive integer", "torchtitan/distributed/activation_checkpoint.py",
         text=r"Invalid selective AC option", versions=V02),
    Rule("rule ML834", "memory_budget activation checkpointing needs compile", "torchtitan/distributed/activation_checkpoint.py",
         text=r"Memory budget mode requires", versions=V02),
    Rule("runtime", "the fqns named must be nn.Linear modules of the model (its module tree)",
         "torchtitan/distributed/activation_checkpoint.py", text=r"expected to match a nn\.Li", versions=TT),
    Rule("rule ML839", "DualPipeV with expert parallelism cannot use activation checkpointing",
         "torchtitan/distributed/dual_pipe_v.py", text=r"DualPipeV and Activation", versions=V02),
    Rule("internal", "DualPipeV schedule runtime", "torchtitan/distributed/dual_pipe_v.py", versions=TT),
    # context parallel
    Rule("internal", "context parallelism with varlen attention / an unknown attention type: reached only after the "
                     "model's update_from_config (or qwen3's parallelize_qwen3, earlier in the same function) refused "
                     "the same attention with cp > 1, which ML854 reports (models/llama3/model/args.py:57-65, "
                     "deepseek_v3/model/args.py:101-109, llama4/model/args.py:79-87, qwen3/infra/parallelize.py:69-75 "
                     "@9810191bb^); flux passes \"sdpa\"; attn_type comes only from flavors, which set sdpa, flex or "
                     "varlen, never another name",
         "torchtitan/distributed/context_parallel.py", func=r"apply_cp_to_attention_module", versions=V02),
    Rule("rule ML801", "context_parallel_load_balancer must be 'headtail', 'ptrr' or None (a plain str field)",
         "torchtitan/distributed/context_parallel*", text=r"Invalid load_balancer_type", versions=REG),
    Rule("rule ML844", "context_parallel_load_balancer must be 'headtail', 'ptrr' or None (a plain str field)",
         "torchtitan/distributed/context_parallel*", text=r"Invalid load_balancer_type", versions=V02),
    Rule("rule ML914", "the ptrr load balancer needs a BlockMask: an SDPA flavor builds no masks (the trainer builds "
                       "them for flex and varlen only); the dict half is not reachable with CP (gpt_oss refuses CP, "
                       "ML809; flex with CP is refused for every model but llama3's, ML854, whose flex masks are one "
                       "BlockMask)", "torchtitan/distributed/context_parallel.py", text=r"but got None or dict",
         versions=V02),
    Rule("internal", "the ptrr load balancer given masks that are not a BlockMask: with CP the masks are llama3's "
                     "flex BlockMask (varlen metadata only with varlen attention, refused with CP by ML854)",
         "torchtitan/distributed/context_parallel.py", text=r"PTRRLoadBalancer requires attention_masks to be a "
                                                             r"BlockMask, but got \{", versions=V02),
    Rule("rule ML913", "the ptrr load balancer on a model whose masks are a dict needs context_parallel_ptrr_mask_key",
         "torchtitan/distributed/context_parallel/api.py", text=r"no mask key was specified", versions=REG),
    Rule("partial ML913", "context_parallel_ptrr_mask_key must name one of the model's masks: ML913 checks it against "
                          "the literal keys a model's get_attention_masks can write (gpt_oss: basic_mask, "
                          "sliding_window_mask, both built for every flavor); muse_glimmer computes its keys "
                          "(_window_mask_key), which are not generated facts yet",
         "torchtitan/distributed/context_parallel/api.py", text=r"is not a key in attention_masks", versions=REG),
    Rule("internal", "the ptrr load balancer given no masks: with context parallelism a language model's attention is "
                     "flex (sdpa is refused by get_attention_config, ML804; varlen with CP by ML708), for which the "
                     "trainer always builds masks (trainer.py:715-723 @b5bcd76c6, 0.3.0:738-748) and every flavor "
                     "has a full-attention layer; flux shards with load_balancer_type=None",
         "torchtitan/distributed/context_parallel/api.py", text=r"but got None$|but got None\b", versions=REG),
    Rule("internal", "the ptrr load balancer given a mask that is not a BlockMask: the dicts of flex masks (gpt_oss, "
                     "muse_glimmer) hold BlockMasks; qwen3_5's holds DeltaNet varlen metadata, but qwen3_5 refuses "
                     "context parallelism (ML802)",
         "torchtitan/distributed/context_parallel/api.py", text=r"requires the mask to be a BlockMask", versions=REG),
    Rule("internal", "masks the framework builds itself", "torchtitan/distributed/context_parallel*",
         exc="AssertionError", versions=TT),
    Rule("runtime", "the installed torch lacks the experimental CP API", "torchtitan/distributed/utils.py",
         text=r"PyTorch version", versions=TT),
    Rule("runtime", "fake/local comm modes read NGPU and RANK from the environment", "torchtitan/distributed/utils.py",
         text=r"NGPU|RANK", versions=TT),
    Rule("rule ML609 ML614", "ReordererSequenceParallel splits the local_batch_size x seq_len / cp tokens over the tp "
                             "mesh (ep > 1, etp = 1): the same parallelize function first asserts seq_len % (tp x 2cp) "
                             "== 0 (ML609 with cp, ML614 without), which makes the split even, so a config that reaches "
                             "this raise is already refused", "torchtitan/distributed/expert_parallel.py",
         text=r"Uneven split", versions=V02),
    # components
    Rule("rule ML832", "checkpoint.keep_latest_k = 1 is refused (with checkpointing enabled)",
         "torchtitan/components/checkpoint.py", text=r"at least 2 checkpoint", versions=V02),
    Rule("schema", "checkpoint.async_mode is a Literal (kept by the loader, refused here)",
         "torchtitan/components/checkpoint.py", text=r"Unknown checkpoint async_mode", versions=V02),
    Rule("rule ML871", "checkpoint.exclude_from_loading names a state the checkpoint does not hold (model, optimizer, "
                       "lr_scheduler, dataloader, train_state)", "torchtitan/components/checkpoint*",
         text=r"not found in state_dict", versions=TT),
    Rule("rule ML833", "last_save_in_hf needs last_save_model_only; from_hf loading needs model_only",
         "torchtitan/components/checkpoint.py", text=r"Only model can be", versions=V02),
    Rule("rule ML836", "initial_load_in_hf_quantized needs initial_load_in_hf", "torchtitan/components/checkpoint.py",
         text=r"Quantized checkpoint can only", versions=V02),
    Rule("rule ML828", "initial_load_in_hf_quantized needs initial_load_in_hf and a path (refused first by "
                       "BaseCheckpointManager.Config.__post_init__)", "torchtitan/components/checkpointer/dcp.py",
         text=r"Quantized checkpoint can only", versions=REG),
    Rule("runtime", "last_save_in_hf needs a model with a state-dict adapter (decided by the model spec)",
         "torchtitan/components/checkpoint*", text=r"sd_adapter", versions=TT),
    Rule("runtime", "checkpoints on disk, async saving and fault tolerance at run time", "torchtitan/components/checkpoint.py",
         versions=V02),
    Rule("rule ML821", "optimizer.early_step_in_backward cannot combine with ep or pp", "torchtitan/components/optimizer.py",
         text=r"Optimizers in backward is not supported with (Expert|Pipeline)", versions=V02),
    Rule("runtime", "torchft manager state", "torchtitan/components/optimizer.py", text=r"TorchFT", versions=V02),
    Rule("schema", "optimizer.implementation is a Literal", "torchtitan/components/optimizer*", text=r"implementation in",
         versions=TT),
    Rule("rule ML811", "optimizer.name must be an optimizer torchtitan builds (Adam, AdamW)",
         "torchtitan/components/optimizer*", text=r"not added", versions=V02),
    Rule("rule ML812", "each param group's optimizer_name must be one torchtitan builds (Adam, AdamW, DistMuon)",
         "torchtitan/components/optimizer*", text=r"not added", versions=REG),
    Rule("internal", "optimizer container invariants", "torchtitan/components/optimizer*", versions=TT),
    Rule("schema", "lr_scheduler.decay_type is a Literal", "torchtitan/components/lr_scheduler.py",
         text=r"Unknown lr_decay_type", versions=V02),
    Rule("internal", "scheduler branches guarded by their own arithmetic", "torchtitan/components/*lr_scheduler.py",
         versions=TT),
    Rule("internal", "the dataloader kwargs are the fields of the framework's own dataloader config class, all of "
                     "them StatefulDataLoader parameters (an unknown config key is refused by the loader first; "
                     "persistent_workers / prefetch_factor with num_workers 0 are dropped, not refused)",
         "torchtitan/components/dataloader.py", text=r"Invalid dataloader kwargs", versions=TT),
    Rule("internal", "the dataset is passed positionally by the framework", "torchtitan/components/dataloader.py",
         text=r"'dataset' in kwargs", versions=TT),
    Rule("runtime", "resuming with another dp degree (the checkpoint)", "torchtitan/components/dataloader.py",
         func=r"load_state_dict", versions=TT),
    Rule("internal", "set by the trainer before logging", "torchtitan/components/metrics.py", exc="AssertionError",
         versions=TT),
    Rule("runtime", "tokenizer files on disk", "torchtitan/components/tokenizer.py", versions=TT),
    Rule("internal", "the validator's own invariants", "torchtitan/components/validate.py", exc="AssertionError",
         func=r"Validator\.validate|build_validator", versions=TT),
    Rule("schema", "validation.steps > 0 or -1 (Validation.__post_init__)", "torchtitan/config/job_config.py",
         func=r"Validation\.__post_init__", versions=V02),
    Rule("schema", "context_parallel_load_balancer cannot be '' (Parallelism.__post_init__)", "torchtitan/config/job_config.py",
         func=r"Parallelism\.__post_init__", versions=V02),
    # quantization (model converters)
    Rule("runtime", "float8/MXFP8 need the GPU model (SM89/SM100) and torchao", "torchtitan/components/quantization/*",
         text=r"capability|SM\d|torchao|gfx|CUDA", versions=TT),
    Rule("rule ML822", "float8 all-gather cannot combine with a float8 recipe", "torchtitan/components/quantization/float8.py",
         text=r"enable_fsdp_float8_all_gather", versions=V02),
    Rule("rule ML823", "float8 MoE (grouped mm) cannot combine with pp or cp", "torchtitan/components/quantization/float8.py",
         text=r"pipeline_parallel_degree == 1|context_parallel_degree == 1", versions=V02),
    Rule("rule ML824", "mxfp8 with compile cannot use tp", "torchtitan/components/quantization/mx.py",
         text=r"TP not yet supported", versions=V02),
    Rule("rule ML825", "model.converters cannot mix quantization types (float8 and mx)",
         "torchtitan/components/quantization/__init__.py", versions=TT),
    Rule("internal", "converter plumbing", "torchtitan/components/quantization/*", exc="AssertionError", versions=TT),
    # models (v0.2)
    Rule("internal", "attention types and mask types come from the flavor table (model_args), not the config",
         "torchtitan/models/*/model/model.py", text=r"attn_type|attn_mask_type|Varlen attention is not supported",
         versions=V02),
    Rule("internal", "shapes of tensors the model builds itself (RoPE caches, masks)", "torchtitan/models/*/model/model.py",
         exc="AssertionError", versions=V02),
    Rule("internal", "flavor constants in the model table", "torchtitan/models/*/model/model.py",
         text=r"every_n_layers_nope|Hidden size|positional dim", versions=V02),
    Rule("runtime", "the input batch", "torchtitan/models/*/model/model.py", func=r"forward", versions=V02),
    Rule("internal", "router settings come from the flavor table", "torchtitan/models/moe/moe.py", versions=V02),
    Rule("runtime", "HF checkpoint conversion (files)", "torchtitan/models/*state_dict_adapter.py", versions=TT),
    Rule("runtime", "HF checkpoint conversion (files)", "torchtitan/models/utils.py", func=r"StateDictAdapter", versions=TT),
    Rule("rule ML873", "the dataset name must be one torchtitan registers for the dataloader in use (c4, c4_test, ...; "
                       "the names generated from the source into meshlint/data/datasets.toml)",
         "torchtitan/*datasets*", text=r"is not supported\. Supported datasets", versions=TT),
    Rule("rule ML874", "a dataset mix needs datasets, each with a finite, positive weight (an empty mix, a weight <= 0, "
                       "inf or nan: float('inf') and math.inf are read as the numbers they are)",
         "torchtitan/components/data/dataset.py", text=r"positive-weight datasets", versions=MAIN),
    Rule("partial ML874", "a concatenation needs map-style children: ML874 reports one with no children; a child that "
                          "builds an iterable dataset (a streaming source, packing) is not reported (which children are "
                          "map-style follows from the classes' build(), not generated yet)",
         "torchtitan/components/data/dataset.py", text=r"map-style children", versions=MAIN),
    Rule("rule ML874", "packing: num_packing_bins > 0 (a data config's __post_init__ the schema walk does not reach; "
                       "ML874 follows the dataset tree)", "torchtitan/*", text=r"num_packing_bins must be positive",
         versions=REG),
    Rule("rule ML874", "a Hugging Face source field given both directly and in load_dataset_kwargs",
         "torchtitan/components/data/sources.py", text=r"repeated in kwargs", versions=MAIN),
    Rule("schema", "InterleavedDataset with no datasets: only an empty sources list reaches it, which the interleaved "
                   "loader's Config.__post_init__ refuses first (tyro rebuilds the config at launch; evaluated by the "
                   "schema check: ML112)", "torchtitan/hf_datasets/interleaved.py", text=r"dataset must be provided",
         versions=V030),
    Rule("internal", "the interleaved loaders pass one weight per source, so the lengths always agree",
         "torchtitan/hf_datasets/interleaved.py", text=r"must equal len\(weights\)", versions=V030),
    Rule("internal", "stopping_strategy='all_exhausted' needs datasets with reloop(): both datasets the interleaved "
                     "loaders build (HuggingFaceTextDataset, ChatDataset) have it", "torchtitan/hf_datasets/interleaved.py",
         text=r"each dataset must implement reloop", versions=V030),
    Rule("rule ML870", "interleaved datasets: weights non-negative with a positive sum; stopping_strategy "
                       "'on_first_exhausted' or 'all_exhausted'", "torchtitan/hf_datasets/interleaved.py",
         text=r"non-negative|Sum of weights|stopping_strategy", versions=V030),
    Rule("internal", "dataset objects the framework builds", "torchtitan/hf_datasets/interleaved.py", versions=V030),
    Rule("rule ML875", "multimodal patch_order must be 'block' or 'raster', and 'block' when the collator builds MRoPE "
                       "positions (refused on the first batch with an image or video)",
         "torchtitan/hf_datasets/multimodal/*", text=r"patch_order", versions=V030),
    Rule("rule ML876", "multimodal patch_order must be 'block' or 'raster', and 'block' when the collator builds MRoPE "
                       "positions (refused on the first batch with an image or video)",
         "torchtitan/hf_datasets/multimodal/*", text=r"patch_order", versions=MAIN),
    Rule("rule ML810", "flux does not support gradient accumulation (global batch > local x batch degree)",
         "torchtitan/models/flux/train.py", text=r"gradient accumulation", versions=V02),
    Rule("runtime", "flux: the autoencoder checkpoint file", "torchtitan/models/flux/model/autoencoder.py", versions=TT),
    Rule("internal", "registry plumbing", "torchtitan/protocols/*", text=r"already registered", versions=TT),
    Rule("rule ML853", "model.name must be a registered model", "torchtitan/protocols/train_spec.py",
         text=r"is not registered", versions=V02),
    Rule("schema", "training.gc_freq > 0 is not checked at load, but is a plain int (0 or negative refused here)",
         "torchtitan/tools/utils.py", text=r"gc_freq", versions=TT),
    Rule("internal", "module-level consistency", "torchtitan/tools/utils.py", func=r"<module>", versions=TT),
]

HAND += [
    # ---------------------------------------------------------------- torchtitan 0.3.0 / main: trainer
    Rule("rule ML702", "CUDA graphs (on by default) with pipeline parallelism", "torchtitan/trainer.py",
         text=r"CUDA graphs do not support pipeline", versions=REG),
    Rule("rule ML703", "CUDA graphs with expert parallelism need a host-sync-free token dispatcher", "torchtitan/trainer.py",
         text=r"CUDA graphs support only expert parallel", versions=REG),
    Rule("rule ML711", "pipeline parallelism on a model with no pipelining function", "torchtitan/trainer.py",
         text=r"does not support pipelining", versions=REG),
    Rule("rule ML704", "tokens per pipeline microbatch divisible by tp (SP) x 2cp", "torchtitan/trainer.py",
         text=r"tokens per pipeline microbatch", versions=MAIN),
    Rule("rule ML706", "num_tokens_per_train_step a multiple of one accumulation step's tokens", "torchtitan/trainer.py",
         text=r"num_tokens_per_train_step", versions=MAIN),
    Rule("rule ML705", "seq_len divisible by tp (SP) x 2cp", "torchtitan/trainer.py", text=r"seq_len_divisor|seq_len %",
         versions=V030),
    Rule("rule ML608", "global batch a multiple of local batch x batch degree", "torchtitan/trainer.py",
         text=r"global_batch_size|global batch size", versions=V030),
    Rule("rule ML604", "local_batch_size % pipeline_parallel_microbatch_size with pp (Trainer.Config.__post_init__)",
         "torchtitan/trainer.py", text=r"evenly divisible by|pipeline_parallel_microbatch_size", versions=V030),
    Rule("schema", "pipeline_parallel_microbatch_size > 0 (Trainer.Config.__post_init__)", "torchtitan/trainer.py",
         text=r"must be greater than 0", versions=V030),
    Rule("schema", "debug.batch_invariant is refused in pre-training (Trainer.Config.__post_init__, evaluated by the "
                   "schema check: ML112)", "torchtitan/trainer.py", text=r"Batch-invariant", versions=REG),
    Rule("schema", "parallelism.num_pp_microbatches > 0 (Trainer.Config.__post_init__, evaluated by the schema check)",
         "torchtitan/trainer.py", text=r"num_pp_microbatches must be greater than 0", versions=MAIN),
    Rule("schema", "a multi-source dataloader needs at least one source (Config.__post_init__, evaluated by the "
                   "schema check: ML112)", "torchtitan/hf_datasets/text_datasets.py", text=r"At least one source",
         versions=REG),
    Rule("rule ML870", "a multi-source dataloader's sources all have the same 'infinite' setting (a loop over the "
                       "sources the schema check cannot evaluate)", "torchtitan/hf_datasets/text_datasets.py",
         text=r"same 'infinite'", versions=REG),
    Rule("schema", "debug.spmd_typechecking under spmd_types cannot combine with pp (Trainer.Config.__post_init__, "
                   "evaluated by the schema check: ML112)", "torchtitan/trainer.py",
         text=r"SPMD typechecking is not supported with pipeline", versions=REG),
    Rule("rule ML840", "debug.spmd_typechecking under spmd_types cannot combine selective AC with a FlexAttention "
                       "model (attn_backend flex or flex_flash)", "torchtitan/trainer.py",
         text=r"typechecking is enabled", versions=REG),
    Rule("rule ML815", "memory-budget activation checkpointing needs compile.enable and 'model' in compile.components",
         "torchtitan/trainer.py", text=r"Memory budget activation", versions=REG),
    Rule("internal", "set by the config registry before the trainer runs", "torchtitan/trainer.py",
         text=r"model_spec", versions=REG),
    Rule("internal", "ChunkedLossWrapper needs an lm_head, which every built language model has", "torchtitan/trainer.py",
         text=r"lm_head|ChunkedLossWrapper", versions=REG),
    Rule("runtime", "the training loop's own state", "torchtitan/trainer.py",
         func=r"batch_generator|forward_backward_step|train_step|pp_forward|to_dict", versions=REG),
    Rule("runtime", "the data, in the training loop", "torchtitan/train.py", versions=REG),
    # models: update_from_config (decidable from the model's flavor and the parallelism)
    Rule("rule ML712", "weight tying with pp", "torchtitan/models/*", text=r"Weight tying is not supported with Pipeline",
         versions=REG),
    Rule("rule ML708", "context parallelism needs FlexAttention (not SDPA / varlen)", "torchtitan/models/*",
         text=r"Context Parallel (is not supported with ScaledDotProduct|only supports SDPA and FlexAtt)", versions=REG),
    Rule("rule ML304", "tp divides n_heads", "torchtitan/models/common/decoder.py", text=r"must divide n_heads",
         versions=REG),
    Rule("rule ML305", "tp divides n_kv_heads", "torchtitan/models/common/decoder.py", text=r"must divide n_kv_heads",
         versions=REG),
    Rule("rule ML309", "num_experts % ep", "torchtitan/models/common/decoder.py", text=r"num_experts .* must be divisible",
         versions=REG),
    Rule("rule ML846", "the training sequence length (max_context_length) exceeds the model's RoPE length", "torchtitan/models/common/decoder.py", text=r"exceeds attention RoPE", versions=MAIN),
    Rule("rule ML847", "the training sequence length (seq_len) exceeds the model's RoPE length", "torchtitan/models/common/decoder.py", text=r"exceeds attention RoPE", versions=V030),
    Rule("internal", "every flavor in the registry defines RoPE", "torchtitan/models/common/decoder.py",
         text=r"does not define RoPE", versions=REG),
    Rule("internal", "attention masks follow the model's attention type", "torchtitan/models/common/decoder.py",
         text=r"support attention masks", versions=REG),
    Rule("rule ML845", "tp divides the vision encoder's heads (kimi, muse_glimmer) and qwen3.5's delta-net key/value heads",
         "torchtitan/models/*", text=r"must divide vision num_heads|vision num_heads .* divisible by TP|"
                                    r"must divide n_key_heads", versions=REG),
    Rule("rule ML802", "context parallelism is refused for kimi, qwen3.5 and the muse_glimmer vision encoder "
                       "(flavors debugmodel_mm, 30B_mm)", "torchtitan/models/*",
         text=r"Context Parallel is not yet supported|context parallel is not supported", versions=REG),
    Rule("rule ML849", "deepseek MTP cannot use context parallelism (model_registry(..., num_mtp_layers=N) is not a fact "
                 "yet)", "torchtitan/models/deepseek_v3/mtp.py", text=r"MTP does not support context", versions=REG),
    Rule("rule ML849", "deepseek MTP cannot use pipeline parallelism (model_registry(..., num_mtp_layers=N) is not a fact "
                 "yet)", "torchtitan/models/deepseek_v3/mtp.py",
         text=r"MTP does not support pipeline", versions=REG),
    Rule("rule ML808", "muse_glimmer needs spmd_backend = spmd_types", "torchtitan/models/muse_glimmer/parallelize.py",
         text=r"only supports spmd_backend", versions=REG),
    Rule("rule ML707", "context parallelism needs spmd_backend = spmd_types", "torchtitan/distributed/context_parallel/api.py",
         text=r"Context Parallel requires parallelism\.spmd_backend", versions=MAIN),
    Rule("open", "context parallelism needs spmd_backend = spmd_types", "torchtitan/distributed/context_parallel/api.py",
         text=r"Context Parallel requires parallelism\.spmd_backend", versions=V030),
    Rule("rule ML850", "a FlexAttention model compiled with a backend other than inductor / aot_eager",
         "torchtitan/distributed/compile.py", text=r"FlexAttention but compile backend", versions=REG),
    Rule("rule ML804", "model attention backend: sdpa is refused for language models; the backend name must be known",
         "torchtitan/models/common/config_utils.py", text=r"sdpa is no longer supported|Unknown backend", versions=REG),
    Rule("runtime", "flex_flash attention needs a Hopper/Blackwell GPU", "torchtitan/models/common/config_utils.py",
         text=r"Hopper", versions=REG),
    Rule("rule ML851", "tp_gemm_backend = dist_gemm needs spmd_types and sequence parallelism",
         "torchtitan/models/common/dist_gemm.py", text=r"dist_gemm", versions=REG),
    Rule("internal", "tp_gemm_backend = dist_gemm needs fuse_qkv: not reachable from a config, since the only "
                     "model_registry functions that take tp_gemm_backend (llama3, graph_trainer/llama3, which reuses "
                     "llama3_configs) build every flavor with fuse_qkv=True (models/llama3/__init__.py:131,172,216,257,"
                     "298 @b5bcd76c6; 0.3.0 the same), and the one flavor with fuse_qkv=False (qwen3 "
                     "debugmodel_non_fused_qkv) has no tp_gemm_backend argument",
         "torchtitan/models/common/*", text=r"dist_gemm", versions=REG),
    Rule("rule ML805", "the MoE comm backend name must be standard, deepep, hybridep or minimal_async_ep",
         "torchtitan/models/common/config_utils.py", text=r"Unknown comm_backend", versions=REG),
    Rule("rule ML842", "an EP token dispatcher needs the tokens of a microbatch divisible by cp·tp",
         "torchtitan/models/common/token_dispatcher.py", func=r"update_ep_token_dispatcher_config",
         text=r"must be divisible by", versions=MAIN),
    Rule("rule ML843", "an EP token dispatcher needs seq_len divisible by cp·tp",
         "torchtitan/models/common/token_dispatcher.py", func=r"update_ep_token_dispatcher_config",
         text=r"must be divisible by", versions=V030),
    Rule("rule ML715", "an EP token dispatcher needs ep > 1", "torchtitan/models/common/token_dispatcher.py",
         func=r"update_ep_token_dispatcher_config", text=r"requires expert", versions=REG),
    Rule("internal", "an EP token dispatcher's num_max_tokens_per_rank must be set, positive and large enough: not "
                     "reachable from a config, since no model_registry flavor or argument sets it (make_moe_config and "
                     "make_token_dispatcher_config default it to None and no model passes it, models/common/"
                     "config_utils.py:360-460 @b5bcd76c6), and update_ep_token_dispatcher_config, run from the "
                     "decoder's update_from_config before the dispatchers are built, fills None with the required "
                     "per-rank count (token_dispatcher.py:1250-1254); DeepEP/HybridEP then see it set. 0.3.0 the same",
         "torchtitan/models/common/token_dispatcher.py",
         func=r"update_ep_token_dispatcher_config|DeepEPTokenDispatcher\.__init__|HybridEPTokenDispatcher\.init_buffer",
         exc="ValueError", versions=REG),
    Rule("rule ML715", "MinimalAsyncEP needs ep > 1", "torchtitan/distributed/minimal_async_ep/api.py",
         func=r"maybe_update_minimal_async_ep_config", text=r"requires expert parallelism", versions=REG),
    Rule("rule ML309", "MinimalAsyncEP needs num_experts % ep == 0", "torchtitan/distributed/minimal_async_ep/api.py",
         func=r"maybe_update_minimal_async_ep_config", text=r"must be divisible by expert_parallel_degree", versions=REG),
    Rule("rule ML841", "MinimalAsyncEP needs full recompute (FullAC, or the graph trainer's full memory policy)",
         "torchtitan/distributed/minimal_async_ep/api.py", func=r"maybe_update_minimal_async_ep_config",
         text=r"requires full recompute", versions=REG),
    Rule("internal", "the trainer always passes its training config", "torchtitan/distributed/minimal_async_ep/api.py",
         func=r"maybe_update_minimal_async_ep_config", text=r"requires a training runtime", versions=REG),
    Rule("rule ML852", "MinimalAsyncEP refuses the full_dtensor SPMD backend (0.3.0)", "torchtitan/distributed/minimal_async_ep/api.py",
         func=r"maybe_update_minimal_async_ep_config", exc="ValueError", versions=REG),
    Rule("internal", "set by update_from_config before use", "torchtitan/distributed/minimal_async_ep/api.py",
         func=r"maybe_update_minimal_async_ep_config", versions=REG),
    Rule("runtime", "MinimalAsyncEP buffers and the CUDA symmetric-memory backend", "torchtitan/distributed/minimal_async_ep/*",
         versions=REG),
    Rule("internal", "dispatcher state set when the model is parallelized", "torchtitan/models/common/token_dispatcher.py",
         versions=REG),
    Rule("internal", "the model's own layer configs (from the flavor table)", "torchtitan/models/*",
         func=r"TransformerBlock\.__init__|Attention\.__init__|get_nparams_and_flops|_set_.*sharding|sharding",
         exc="AssertionError", versions=REG),
    Rule("internal", "flavor constants (router groups, score function, RoPE, heads of the vision tower)",
         "torchtitan/models/*", func=r"TokenChoiceTopKRouter|MoE\.__init__|RoPE|rope|VisionAttention|"
                                     r"VisionRotaryEmbedding|MRoPE|FluxModel\.__init__|FusedQKVLinear|BaseAttention",
         versions=REG),
    Rule("runtime", "the input batch (multimodal placeholders, images, positions)", "torchtitan/models/*",
         func=r"forward|_prepare_multimodal|get_vision_positions|scatter_vision|roll_mtp|MTPLoss|_get_vision_features|"
              r"get_attention_masks|_causal_conv1d",
         versions=REG),
    Rule("rule ML709", "kimi's DistMuon needs tensor_parallel_degree = 1", "torchtitan/models/kimi_k2_7/config_registry.py",
         text=r"requires tensor_parallel_degree=1:", versions=MAIN),
    Rule("rule ML709+ML710", "kimi's DistMuon needs tensor_parallel_degree = 1 and pipeline_parallel_degree = 1",
         "torchtitan/models/kimi_k2_7/config_registry.py", text=r"requires tensor_parallel_degree=1 and pipeline",
         versions=V030),
    Rule("internal", "config_registry helpers check their own arguments", "torchtitan/models/*/config_registry.py",
         versions=REG),
    Rule("internal", "the model's own pieces", "torchtitan/models/*", func=r"MTPDecoder|init_states|MTPTransformerBlock",
         versions=REG),
    Rule("rule ML810", "flux does not support gradient accumulation (global batch > local x batch degree)",
         "torchtitan/models/flux/trainer.py", text=r"gradient accumulation", versions=V030),
    Rule("rule ML803", "flux does not support gradient accumulation (num_tokens_per_train_step > one microbatch per "
                       "data-parallel rank)", "torchtitan/models/flux/trainer.py", text=r"gradient accumulation",
         versions=MAIN),
    Rule("internal", "flux meshes follow from the backend and degrees", "torchtitan/models/flux/parallelize.py",
         versions=REG),
    Rule("runtime", "flux training loop, dataset and validator", "torchtitan/models/flux/*", versions=REG),
    Rule("rule ML826", "dataloader.repeat = false with data parallelism (dp > 1) is refused", "torchtitan/components/data/loader.py",
         text=r"repeat=False with data parallelism", versions=MAIN),
    Rule("rule ML911", "model_registry(converters=[...]) order: quantization converters before LoRA",
         "torchtitan/models/utils.py",
         func=r"validate_converter_order", versions=REG),
    # registry-era components
    Rule("rule ML818", "checkpoint.async_mode must be 'disabled', 'async' or 'async_with_pinned_mem' (refused first by "
                       "CheckpointManager.Config.__post_init__)", "torchtitan/components/checkpointer/*",
         text=r"Unknown checkpoint async_mode|Invalid async_mode", versions=REG),
    Rule("rule ML817", "HF save/load need model_only (refused first by BaseCheckpointManager.Config.__post_init__)",
         "torchtitan/components/checkpointer/*",
         text=r"Only model can be|initial_load_in_hf requires initial_load_model_only|last_save_in_hf requires "
              r"last_save_model_only", versions=REG),
    Rule("rule ML816", "checkpoint.keep_latest_k = 1 (BaseCheckpointManager.Config.__post_init__)",
         "torchtitan/components/checkpointer/base.py", text=r"at least 2 checkpoint", versions=REG),
    Rule("rule ML819", "checkpoint.exclude_from_loading: not 'model'; 'optimizer' only with 'lr_scheduler' (main) "
                       "(BaseCheckpointManager.Config.__post_init__)", "torchtitan/components/checkpointer/base.py",
         text=r"exclude_from_loading|must be excluded when", versions=REG),
    Rule("rule ML828", "initial_load_path must be absolute or a remote URI once stripped "
                       "(BaseCheckpointManager.Config.__post_init__)", "torchtitan/components/checkpointer/base.py",
         text=r"absolute path or a remote URI", versions=REG),
    Rule("rule ML828", "checkpoint.folder must not be empty or blank (BaseCheckpointManager.Config.__post_init__)",
         "torchtitan/components/checkpointer/base.py", text=r"folder' field cannot be empty", versions=REG),
    Rule("rule ML828", "the checkpoint config's own checks (BaseCheckpointManager.Config.__post_init__; the schema "
                       "check leaves them to ML828, except a value of the wrong type, whose TypeError it reports): "
                       "interval >= 1, keep_latest_k >= 0, quantized HF loading, no Hugging Face format on a remote path",
         "torchtitan/components/checkpointer/base.py", func=r"__post_init__$", versions=REG),
    Rule("rule ML872", "torch_checkpointing manager: no remote URIs (checkpoint.folder under dump_folder, initial_load_path)", "torchtitan/components/checkpointer/torch_checkpointing.py",
         text=r"remote URI", versions=REG),
    Rule("internal", "the checkpointer's own async state", "torchtitan/components/checkpointer/*", versions=REG),
    Rule("rule ML910", "LoRA rank must be positive", "torchtitan/components/lora.py", text=r"LoRA rank", versions=REG),
    Rule("internal", "LoRA converter plumbing", "torchtitan/components/lora.py", versions=REG),
    Rule("internal", "materialised by the converter before use", "torchtitan/components/quantization/nvfp4.py",
         text=r"not materialized", versions=REG),
    Rule("internal", "flavor constants: sliding windows, fused feed-forward biases, MoE configs, QKV config types",
         "torchtitan/models/common/*", text=r"window_size|bias on w1|isinstance\(moe, MoE\.Config\)|"
                                          r"QKVLinear\.Config", versions=REG),
    Rule("internal", "a vision model always builds its adapter", "torchtitan/models/muse_glimmer/parallelize.py",
         text=r"vision_adapter", versions=REG),
    Rule("rule ML912", "MoE quantization needs a token dispatcher that pads (moe_comm_backend standard or hybridep)",
         "torchtitan/components/quantization/utils.py",
         versions=REG),
    Rule("rule ML915", "nvfp4: every Linear the converter's fqns select (substring match on the FQN "
                       "traverse(Linear.Config) gives; all when empty) has in/out features divisible by 128 "
                       "(NVFP4Linear.Config.__post_init__; the Linears of each flavor are in the generated model table)",
         "torchtitan/components/quantization/nvfp4.py", text=r"divisible by", versions=REG),
    Rule("rule ML916", "nvfp4_bf16_tail_fqns(num_layers, bf16_tail_fraction) leaves at least one layer to convert "
                       "(the registry's call is recorded statically; the layer count of len(model_spec.model.layers) "
                       "comes from the model table)",
         "torchtitan/components/quantization/nvfp4.py", text=r"bf16_tail_fraction", versions=REG),
    Rule("internal", "loss plumbing (chunks, metrics)", "torchtitan/components/loss.py", versions=REG),
    Rule("internal", "validator plumbing", "torchtitan/components/validate.py", versions=REG),
    Rule("schema", "fsdp_reshard_after_forward is a Literal (kept, refused here; the schema check reports it)",
         "torchtitan/distributed/fsdp.py", text=r"reshard_after_forward_policy", versions=REG),
    Rule("internal", "FSDP meshes follow from the backend and degrees", "torchtitan/distributed/fsdp.py", versions=REG),
    Rule("runtime", "DistMuon (optimizer.name = DistMuon, kimi): its optimizer-state redistribution plans, buffers and "
                    "collectives at run time (ML709/ML710 cover the degrees it refuses)",
         "torchtitan/distributed/flex_shard/*", versions=REG),
    Rule("runtime", "DeepEP/HybridEP kernels and buffers (installed package, GPU)", "torchtitan/distributed/deepep/*",
         versions=REG),
    Rule("internal", "CUDA graph capture invariants (the same shapes every step)", "torchtitan/distributed/cudagraph.py",
         versions=REG),
    Rule("internal", "spmd_types redistribution plumbing", "torchtitan/distributed/spmd_types.py", versions=REG),
    Rule("internal", "module protocol plumbing: every built module declares its init and sharding",
         "torchtitan/protocols/*", versions=REG),
    Rule("internal", "tensor-parallel style plumbing", "torchtitan/distributed/tensor_parallel.py", versions=REG),
    Rule("runtime", "LOCAL_RANK from the launcher and the visible devices", "torchtitan/tools/utils.py",
         func=r"get_local_device", versions=REG),
    Rule("internal", "seed meshes exist; gradient clipping meshes are named", "torchtitan/distributed/utils.py",
         exc="AssertionError", versions=TT),
    Rule("rule ML808", "kimi and qwen3.5 refuse spmd_backend = full_dtensor", "torchtitan/models/*/parallelize.py",
         text=r"full_dtensor is not supported", versions=V030),
    Rule("rule ML708", "full_dtensor/spmd_types + CP with SDPA or varlen attention: varlen is ML708's; no model that "
                       "calls validate_config can hold SDPA (get_attention_config refuses attn_backend='sdpa' first, "
                       "ML804; flux, the one model that builds ScaledDotProductAttention, never calls validate_config)",
         "torchtitan/distributed/full_dtensor.py", text=r"CP is", versions=V030),
    Rule("internal", "full_dtensor meshes follow from the backend and degrees", "torchtitan/distributed/full_dtensor.py",
         versions=V030),
    Rule("internal", "resolving meshes the framework built itself", "torchtitan/distributed/parallel_dims.py",
         func=r"resolve_mesh", versions=V030),
    Rule("rule ML708", "context parallelism with varlen attention", "torchtitan/distributed/context_parallel/api.py",
         text=r"Variable-length attenti", versions=REG),
    Rule("internal", "context parallelism with a FlexAttention score_mod: no model passes one; every caller of "
                     "inner_attention passes attention_masks, scale, enable_gqa (gpt_oss also out_transform), never "
                     "score_mod (models/common/attention.py:996, deepseek_v3/model.py:143, gpt_oss/model.py:109, "
                     "qwen3_5/model.py:571, muse_glimmer/model.py:133, overrides/fused_mla.py:889 @0.3.0), and flux "
                     "passes is_causal only",
         "torchtitan/distributed/context_parallel/api.py", text=r"score_mod", versions=REG),
    Rule("internal", "attention modules are one of the known kinds", "torchtitan/distributed/context_parallel/api.py",
         text=r"Context Parallel forwar", versions=REG),
    Rule("rule ML705", "seq_len divisible by tp (SP) x 2cp", "torchtitan/models/muse_glimmer/parallelize.py",
         text=r"seq_len_divisor", versions=V030),
    Rule("internal", "follows from the global batch check", "torchtitan/trainer.py",
         text=r"gradient_accumulation_steps > 0", versions=V030),
    Rule("internal", "the vision tower's own pieces", "torchtitan/models/muse_glimmer/model.py", func=r"_inject_vision",
         versions=V030),
    Rule("internal", "shapes of RoPE caches the model builds", "torchtitan/models/common/rope.py", exc="AssertionError",
         versions=REG),
    Rule("internal", "tensor-parallel style plumbing", "torchtitan/distributed/__init__.py", versions=V02),
    Rule("runtime", "DeepEP kernels and buffers (installed package, GPU)", "torchtitan/distributed/deepep/*", versions=V02),
    Rule("internal", "sliding-window sizes come from the flavor table", "torchtitan/models/attention.py", versions=V02),
    Rule("internal", "flux RoPE dims come from the flavor table", "torchtitan/models/flux/model/layers.py", versions=V02),
    Rule("runtime", "flux training loop and validator", "torchtitan/models/flux/*", func=r"forward_backward_step|validate",
         versions=V02),
]

ACC = ("accelerate-1.15.0",)
HAND += [
    # ---------------------------------------------------------------- Accelerate 1.15.0: config file, launch, ParallelismConfig
    Rule("rule ML101", "a config file without distributed_type", "accelerate/commands/config/config_args.py",
         text=r"distributed_type. must be specified", versions=ACC),
    Rule("rule ML108", "unknown top-level keys of an accelerate config YAML (and parallelism_config keys the launcher "
                       "would drop)", "accelerate/commands/config/config_args.py", func=r"from_yaml_file$", versions=ACC),
    Rule("open", "JSON accelerate config files: meshlint reads the YAML form only",
         "accelerate/commands/config/config_args.py", func=r"from_json_file$", versions=ACC),
    Rule("rule ML112", "accelerate launch's own flag checks (one distributed type, --multi_gpu with 2+ processes, "
                       "--use_parallelism_config only with --use_fsdp, num_processes when a config file has none)",
         "accelerate/commands/launch.py", text=r"You can only use one of|at least 2 processes|use_parallelism_config|"
                                               r"manually pass in .--num_processes", versions=ACC),
    Rule("open", "gpu_ids with fewer than two ids on a multi-GPU launch", "accelerate/commands/launch.py",
         text=r"Less than two GPU ids", versions=ACC),
    Rule("runtime", "bf16 support of the machine", "accelerate/commands/launch.py", text=r"bf16 mixed precision",
         versions=ACC),
    Rule("runtime", "the installed torch", "accelerate/parallelism_config.py", text=r"torch>=2\.2\.0", versions=ACC),
    Rule("internal", "the Accelerator passes its own device type", "accelerate/parallelism_config.py",
         func=r"get_device_mesh$", versions=ACC),
    Rule("internal", "handler objects are set in code, not by a config", "accelerate/parallelism_config.py",
         text=r"cp_handler was set to", versions=ACC),
    Rule("rule ML102", "sizes below 1", "accelerate/parallelism_config.py",
         text=r"(dp_replicate|dp_shard|tp|cp)_size must be at least 1", versions=ACC),
    Rule("rule ML101", "sp_size below 1, cp_backend and sp_backend outside their choices",
         "accelerate/parallelism_config.py", text=r"sp_size must be at least 1|(cp|sp)_backend must be one of",
         versions=ACC),
    Rule("rule ML920", "cp and sp both above 1", "accelerate/parallelism_config.py", text=r"mutually exclusive",
         versions=ACC),
    Rule("rule ML921", "tp or cp with pure data parallelism", "accelerate/parallelism_config.py",
         text=r"pure data parallelism", versions=ACC),
    Rule("internal", "_set_size is called with the names of _sizes only", "accelerate/parallelism_config.py",
         func=r"_set_size$", versions=ACC),
    Rule("rule ML922", "the product of the sizes and the processes launched", "accelerate/parallelism_config.py",
         text=r"does not match", versions=ACC),
    Rule("rule ML923", "FSDP2 with neither dp_shard nor cp above 1 (accelerate#3798, #3804)",
         "accelerate/parallelism_config.py", text=r"no dimension for FSDP", versions=ACC),
    Rule("rule ML924", "a parallelism config under FSDP version 1 (or one process)", "accelerate/parallelism_config.py",
         text=r"only compatible", versions=ACC),
    Rule("runtime", "the installed torch / transformers", "accelerate/utils/dataclasses.py",
         text=r"is_torch_version|compare_versions", versions=ACC),
    Rule("rule ML101", "cp_comm_strategy and sp_attn_implementation outside their choices",
         "accelerate/utils/dataclasses.py", text=r"Invalid (cp_comm_strategy|sp_attn_implementation)", versions=ACC),
    Rule("internal", "accelerate launch always sets PARALLELISM_CONFIG_SP_SEQ_LENGTH when sp > 1",
         "accelerate/utils/dataclasses.py", text=r"sp_seq_length. must be provided", versions=ACC),
    Rule("runtime", "ports, FP8 libraries and the DeepSpeed install of the machine", "accelerate/utils/launch.py",
         text=r"is_port_in_use|is_fp8_available|compare_versions", versions=ACC),
    Rule("open", "launcher checks of flags meshlint does not model (--module with --no_python, mixed precision and "
                 "dynamo backend names, FSDP cpu-RAM-efficient loading without sync_module_states)",
         "accelerate/utils/launch.py", versions=ACC),
    Rule("runtime", "parameters of the model (tied weights, what FSDP2 wrapped)", "accelerate/accelerator.py",
         func=r"_prepare_fsdp2$", versions=ACC),
    Rule("partial ML927", "FSDP2 + TP: the optimizer's parameters not found after wrapping (accelerate#3821, fixed "
                          "before 1.15.0: _prepare_tp skips a model without DTensors and remaps the optimizer's "
                          "parameters); ML927 notes the TP that is skipped for a model loaded without a tp_plan",
         "accelerate/utils/fsdp_utils.py", func=r"fsdp2_switch_optimizer_parameters$", versions=ACC),
]

PATTERNS = [
    Rule("runtime", "re-raises an error from elsewhere", exc=r"^re-raise$|^e$"),
    Rule("runtime", "an optional package is missing", exc=r"ImportError|ModuleNotFoundError"),
    Rule("internal", "an abstract method every built class overrides", exc=r"NotImplementedError",
         text=r"^always \(when reached\)"),
    Rule("runtime", "files on disk", exc=r"FileNotFoundError|PermissionError"),
    Rule("runtime", "the GPU model / the machine",
         text=r"has_cuda_capability|has_rocm_capability|torch\.cuda|get_device_capability|torch\.version\.hip"),
    Rule("runtime", "files on disk", text=r"os\.path\.|\.isdir\(|\.isfile\(|_storage\."),
    Rule("runtime", "the process group / the network", text=r"dist\.get_rank|barrier|timed out|process group"),
    Rule("internal", "tensor shapes, dtypes and placements the framework builds itself (a config that passes the "
                     "decidable checks does not reach them)",
         text=r"\.shape|\.ndim|\.dim\(\)|\.numel\(\)|\.dtype|\.is_contiguous|placements|isinstance\([^)]*(Tensor|BlockMask|"
              r"VarlenMetadata|nn\.|Module)"),
    Rule("internal", "an invariant of the framework's own objects", exc="AssertionError",
         text=r"^(not \()?(\w+(\.\w+)*) is not None\)?$|^not \(\w+(\.\w+)* is not None\)$|^not \(isinstance\(|hasattr\("),
    Rule("runtime", "the data (rows, batches, iteration)", file="*dataset*"),
    Rule("runtime", "the data (rows, batches, iteration)", file="*/data/*"),
]


def classify(site: Site, version: str, evaluable: dict | None = None) -> tuple:
    """(verdict, why, basis) for one site: a hand rule, the schema's evaluable __post_init__ checks, or a pattern."""
    for rule in HAND:
        if rule.matches(site, version):
            return rule.verdict, rule.why, rule.basis
    if evaluable and site.where in evaluable:
        return "schema", f"{evaluable[site.where]}'s __post_init__: the schema check evaluates it", "schema"
    if site.function.endswith("__post_init__") and evaluable is not None and site.where in evaluable.get("__config__", ()):
        return "open", "a load-time check of a config class that the schema check cannot evaluate (loops, locals, "\
                       "methods)", "schema"
    for rule in PATTERNS:
        if rule.matches(site, version):
            return rule.verdict, rule.why, "pattern"
    return "unreviewed", "", ""
