"""Every raise/assert of Megatron-Core 0.16.1's start-up and first training step a launch line can reach, classified: docs/refusals-megatron.md.

    python -m meshlint.generate.megatron_refusals --write /path/to/Megatron-LM   # at tag core_v0.16.1
    python -m meshlint.generate.megatron_refusals --check /path/to/Megatron-LM

The sites are enumerated with meshlint/generate/refusals.py's ast walker, in the functions a launch
runs between parsing its options and building the model's layers: parse_args, validate_args and
core_transformer_config_from_args (megatron/training/arguments.py, Megatron-LM only), the microbatch
calculators, initialize_model_parallel and RankGenerator, ModelParallelConfig/TransformerConfig's
__post_init__ and get_num_layers_to_build (megatron/core, also in the wheel); and, in FIRST_STEP, the first
training step's checks on the paths a parallel layout decides: the MoE layer (built, then its forward), its
token dispatcher and router, and the pipeline schedule train_step runs. Each is classified with
that module's verdicts: a hand entry below (the rule covering it), its generic patterns (packages, the
GPU, files), or, for a check that reads only the parsed options (validate_args and the config classes
see nothing else), ``open``: decidable from the launch line, not yet a rule. It is a document of its
own because docs/refusals.md is rendered only from every torchtitan/KempnerForge source together.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from meshlint.frameworks.megatron import config_checks, validate_checks
from meshlint.generate import refusals as base

VERSION = "megatron-0.16.1"
DOC = base.DOC.parent / "refusals-megatron.md"
SCOPE = {  # file -> the functions of it a launch runs before the first step
    "megatron/training/arguments.py": ("parse_args", "validate_args", "core_transformer_config_from_args"),
    "megatron/core/num_microbatches_calculator.py": ("ConstantNumMicroBatchesCalculator.__init__",
                                                     "RampupBatchsizeNumMicroBatchesCalculator.__init__"),
    "megatron/core/parallel_state.py": ("initialize_model_parallel", "RankGenerator.__init__"),
    "megatron/core/model_parallel_config.py": ("ModelParallelConfig.__post_init__",),
    "megatron/core/transformer/transformer_config.py": ("TransformerConfig.__post_init__",),
    "megatron/core/transformer/transformer_block.py": ("get_num_layers_to_build",),
    "megatron/core/transformer/pipeline_parallel_layer_layout.py": (
        "PipelineParallelLayerLayout.__init__", "PipelineParallelLayerLayout.validate_layer_layout",
        "PipelineParallelLayerLayout.parse_str_to_list"),
}
# the first training step's checks on the code paths a parallel layout decides: the MoE layer's construction
# and forward, its token dispatcher and router, and the pipeline schedule train_step runs (nested helpers of a
# schedule are left out: they only check the schedule's own bookkeeping of send/recv handles)
FIRST_STEP = {
    "megatron/core/transformer/moe/moe_layer.py": (
        "BaseMoELayer.__init__", "MoELayer.__init__", "MoELayer.forward", "MoELayer.forward.custom_forward",
        "MoELayer.preprocess", "MoELayer.routed_experts_compute"),
    "megatron/core/transformer/moe/token_dispatcher.py": (
        "MoEAllGatherTokenDispatcher.__init__", "MoEAlltoAllTokenDispatcher.__init__",
        "MoEFlexTokenDispatcher.__init__", "_DeepepManager.__init__", "_HybridEPManager.__init__"),
    "megatron/core/transformer/moe/router.py": ("TopKRouter.__init__", "TopKRouter.sinkhorn_load_balancing"),
    "megatron/core/pipeline_parallel/schedules.py": (
        "get_forward_backward_func", "forward_backward_no_pipelining",
        "forward_backward_pipelining_with_interleaving", "forward_backward_pipelining_without_interleaving"),
}
SCOPE.update(FIRST_STEP)
R = base.Rule
OPEN_WHY = ("a check of the parsed options alone (these functions read nothing else): decidable from the launch line, "
            "not yet a rule")
ARGS, PS, TC = "megatron/training/arguments.py", "megatron/core/parallel_state.py", "*/transformer_config.py"
MOE, DISPATCH, ROUTER, SCHED = "*/moe/moe_layer.py", "*/moe/token_dispatcher.py", "*/moe/router.py", "*/schedules.py"
TRAIN_STEP = ("Megatron-LM's train_step passes the schedule neither p2p_communicator nor pg_collection "
              "(training.py:1652-1663): it builds both from parallel_state")
FIRST_STEP_HAND = [
    # ---------------------------------------------------------------- the pipeline schedule (train_step's first call)
    R("rule ML988", "the interleaved schedule's microbatch group (core_0_16.microbatch_group_refusal)", SCHED,
      func="forward_backward_pipelining_with_interleaving",
      text=r"microbatch_group_size_per_vp_stage|final_microbatch_group_size"),
    R("internal", TRAIN_STEP, SCHED, text=r"p2p_communicator|pg_collection"),
    R("runtime", "installed packages: train_step passes an adjust_tensor_shapes_fn only where NVIDIA ModelOpt is "
      "installed (training.py:1621-1630)", SCHED, text=r"adjust_tensor_shapes_fn"),
    R("internal", "get_model builds one model chunk per virtual stage and train_step one data iterator per chunk; "
      "get_forward_backward_func picks this schedule from pp and vp alone (schedules.py:144-150)", SCHED,
      text=r"model chunking|isinstance\(model, list\)|isinstance\(data_iterator, list\)|torch\.nn\.Module"),
    R("internal", "core_transformer_config_from_args sets batch_p2p_comm = not overlap_p2p_comm (arguments.py:1326)",
      SCHED, text=r"overlap_p2p_comm and batch_p2p_comm|overlap_p2p_comm and config\.batch_p2p_comm"),
    R("internal", "validate_args sets overlap_p2p_comm False without virtual stages (arguments.py:583-585)", SCHED,
      func="forward_backward_pipelining_without_interleaving", text=r"config\.overlap_p2p_comm"),
    R("internal", "the schedule's own bookkeeping of its p2p wait handles", SCHED,
      text=r"wait_handles|should have registered"),
    # ---------------------------------------------------------------- the MoE layer, its dispatcher and router
    R("rule ML986", "MoE with tp > 1 and no sequence parallelism, at the first training forward", MOE,
      func=r"^MoELayer\.forward$", text=r"sequence_parallel"),
    R("rule ML309", "experts ÷ ep (validate_args asks first, arguments.py)", MOE, text=r"num_moe_experts % ep_size"),
    R("internal", "a process group has at least one rank; with experts ÷ ep (rule ML309) every rank holds "
      "experts/ep > 0 consecutive experts", MOE, text=r"ep_size > 0|local_expert_indices"),
    R("internal", "a process group has at least one rank; with experts ÷ ep (rule ML309) every rank holds "
      "experts/ep > 0 consecutive experts", DISPATCH, text=r"num_local_experts|local_expert_indices|"
                                                             r"num_moe_experts is not None"),
    R("rule ML968", "argparse's choices refuse any other value first (allgather, alltoall, flex; deepep, hybridep)",
      text=r"Unsupported token dispatcher type|Invalid backend"),
    R("internal", "the experts fold their bias into the output when given the routing probabilities (mlp.py:244-248, "
      "experts.py:764 and :926) and the legacy GroupedMLP refuses a bias when built (experts.py:82)", MOE,
      text=r"mlp_bias is None"),
    R("internal", "TransformerConfig.__post_init__ asks first: --moe-pad-expert-input-to-capacity needs "
      "--moe-expert-capacity-factor (transformer_config.py:1131-1134, rule ML982)", DISPATCH,
      text=r"drop_and_pad and not"),
    R("rule ML989", "the flex dispatcher needs etp·ep > 1 (frameworks/megatron/core_0_16.py)", DISPATCH,
      text=r"tp_size \* self\.ep_size > 1"),
    R("internal", "its own priorities: cuda_dtoh_point and cuda_sync_point are set together from the config",
      DISPATCH, text=r"cuda_sync_point_priority"),
    R("runtime", "installed packages: MoE latent projections need Transformer Engine", MOE, text=r"HAVE_TE"),
    R("runtime", "installed packages: the flex dispatcher's backend (DeepEP, HybridEP) is a package of its own", DISPATCH,
      text=r"is not installed"),
    R("open", "--moe-latent-size with --moe-shared-expert-overlap: not a parallel layout, not yet a rule "
      "(transformer_config.py does not ask)", MOE, text=r"shared_expert_overlap"),
    R("open", "--moe-router-load-balancing-type sinkhorn with a nonzero --moe-aux-loss-coeff: not a parallel layout, "
      "not yet a rule (transformer_config.py does not ask)", ROUTER, text=r"moe_aux_loss_coeff == 0"),
]
HAND = FIRST_STEP_HAND + [
    R("rule ML981", "the custom layout string (--pipeline-model-parallel-layout)",
      text=r"\| (The length of pipeline_model_parallel_layout|pipeline_model_parallel_layout cannot be set)"),
    R("internal", "validate_args sets the virtual pipeline size from the layout itself (arguments.py:525)", TC,
      text=r"conflicts with pipeline_model_parallel_layout"),
    R("internal", "a layout string always parses to lists of layer names", "*/pipeline_parallel_layer_layout.py",
      text=r"must be a list of lists|must be LayerType or str|must be a valid LayerType|is not a valid LayerType"),
    R("internal", "no layout character names an encoder layer", "*/pipeline_parallel_layer_layout.py",
      text=r"Encoder layer is not supported"),
    R("rule ML981", "the custom layout string (--pipeline-model-parallel-layout)", "*/pipeline_parallel_layer_layout.py"),
    R("open", "first/last layers in bf16 under fp8: not modelled yet", text=r"num_layers_at_(start|end)_in_bf16"),
    R("open", "no-RoPE layer pattern: not modelled yet", text=r"no_rope"),
    R("open", "multi-token prediction: not modelled yet", text=r"mtp_num_layers|Multi-Token"),
    R("open", "--num-layers with --encoder-num-layers: not modelled yet", text=r"cannot have both num-layers"),
    R("runtime", "NVIDIA Kitchen installed: only its options (added to the parser where it is) put a quantization "
      "recipe in kw_args first (arguments.py:1371-1376)", ARGS, text=r"'quant_recipe' in kw_args"),
    R("runtime", "NVIDIA Kitchen installed: only its options (added to the parser where it is) set use_kitchen "
      "(arguments.py:1371-1376)", TC, text=r"self\.use_kitchen"),
    R("runtime", "installed packages: the fused kernel is None where Transformer Engine does not provide it",
      TC, text=r"fused_apply_rotary_pos_emb is None|fused_permute is None"),
    R("runtime", "the GPU's compute capability (torch.cuda.get_device_capability(), 8 or more for GroupedGEMM): "
      "a launch line does not say which GPU", ARGS, text=r"dc\[0\] >= 8"),
    R("rule ML984", "--rampup-batch-size: the ramp-up calculator followed as it runs (frameworks/megatron/rampup.py)",
      "*/num_microbatches_calculator.py", func=r"^RampupBatchsizeNumMicroBatchesCalculator\."),
    R("internal", "--decrease-batch-size-if-needed: _round makes the running batch a multiple (:261-263)",
      "*/num_microbatches_calculator.py", text=r"^decrease_batch_size_if_needed and"),
    R("rule ML972", "required options", ARGS, text=r"either num-layers or encoder-num-layers"),
    R("rule ML960", "world ÷ tp·pp·cp", ARGS, text=r"total_model_size"),
    R("rule ML960", "world ÷ tp·pp·cp", PS, text=r"world_size % model_size"),
    R("rule ML961", "world ÷ etp·ep·pp", PS, text=r"expert_tensor_model_pipeline_parallel"),
    R("rule ML962", "the pp-moving order's expert grid", PS, text=r"pp-last rank ordering|expected to be the same"),
    R("rule ML978", "optimizer instances ÷ dp·cp and expert dp", PS, text=r"partial DistOpt shard factor"),
    R("rule ML985", "SHARP's options (frameworks/megatron/pstate.py)", PS,
      text=r"dp_replica group requires|only valid when use_sharp"),
    R("rule ML985", "every dp-cp group (dp·cp ranks) even (frameworks/megatron/pstate.py)", PS,
      text=r"Hybrid context parallel requires"),
    R("rule ML985", "the hierarchical sizes multiply to cp (validate_args asks first, arguments.py:405)", PS,
      text=r"np\.prod\(hierarchical_context_parallel_sizes\)"),
    R("rule ML985", "the hierarchical sizes multiply to cp (frameworks/megatron/pstate.py)", ARGS,
      text=r"context_parallel_size == prod\(args\.hierarchical_context_parallel_sizes"),
    R("rule ML968", "argparse's choices refuse any other value first (dp, dp_replica; nccl, ucc)", PS,
      text=r"Invalid sharp_enabled_group|backend for PP communication"),
    R("rule ML963", "the layer split", "*/transformer_block.py"),
    R("rule ML963", "the layer split", ARGS, func="validate_args",
      text=r"layers|virtual pipeline|pipeline_model_parallel_layout|interleaved schedule|pipeline-model-parallel size"),
    R("rule ML963", "the layer split (uneven first/last stages)", TC,
      text=r"num_layers_in_(first|last)_pipeline_stage|middle|account_for_(embedding|loss)|number of layers"),
    R("rule ML963", "virtual stages need pp > 1 (validate_args asks first)", PS,
      text=r"virtual_pipeline_model_parallel_size is not None"),
    R("rule ML964", "global batch ÷ micro batch · dp", "*/num_microbatches_calculator.py",
      func="ConstantNumMicroBatchesCalculator", text=r"global_batch_size % micro_batch_times"),
    R("rule ML964", "at least one microbatch: with --decrease-batch-size-if-needed a global batch below micro batch · dp "
      "leaves none", "*/num_microbatches_calculator.py", func="ConstantNumMicroBatchesCalculator",
      text=r"num_micro_batches >= 1"),
    R("rule ML304", "heads ÷ tp", TC, text=r"num_attention_heads % self.tensor_model_parallel_size"),
    R("rule ML965", "query groups vs tp", TC, text=r"num_query_groups"),
    R("rule ML967", "hidden ÷ heads", ARGS, text=r"hidden_size % args.num_attention_heads"),
    R("rule ML969", "ep needs experts", ARGS, text=r"num_experts must be non None"),
    R("rule ML969", "ep needs experts (validate_args asks first)", TC, text=r"num_moe_experts must be non None"),
    R("rule ML309", "experts ÷ ep", ARGS, text=r"multiple of expert model parallel"),
    R("rule ML970", "seq length ÷ 2·cp", ARGS, text=r"seq-length should be a multiple"),
    R("rule ML971", "positions ≥ seq length", ARGS, text=r"max_position_embeddings >= args\.(seq_length|decoder)"),
    R("rule ML972", "required options", ARGS, text=r"micro_batch_size is not None|encoder_num_layers is not None"),
    R("rule ML973", "removed options", ARGS, text=r"no longer valid|is no longer"),
    R("rule ML974", "ramp-up with --train-iters", ARGS, text=r"rampup for iteration-based"),
    R("rule ML975", "fp16 and bf16", ARGS, text=r"^args\.(fp16|bf16) and not \(not args\.(bf16|fp16)\) \|"),
    R("internal", "validate_args refuses --fp16 with --bf16 first (rule ML975)", TC, text=r"^self\.fp16 and self\.bf16 \|"),
    R("rule ML976", "--overlap-param-gather's needs", ARGS, text=r"overlap_param_gather and .*(use_distributed_optimizer|"
                                                                r"overlap_grad_reduce)"),
    R("rule ML977", "--tp-comm-overlap needs sp", ARGS, text=r"Tensor parallel communication/GEMM overlap"),
    R("internal", "initialize_model_parallel is called once per process", PS, text=r"already initialized"),
    R("internal", "Megatron-LM initialises torch.distributed first", PS, text=r"torch\.distributed\.is_initialized"),
    R("internal", "initialize_model_parallel builds its generators with every name in the order and ep or cp at 1",
      PS, func=r"RankGenerator\.__init__"),
    R("internal", "validate_args switches sequence parallelism off at tp = 1 (arguments.py:907-913)",
      "*/model_parallel_config.py", text=r"sequence parallelism without tensor parallelism"),
    R("internal", "core_transformer_config_from_args sets pipeline_dtype from the params dtype",
      "*/model_parallel_config.py", text=r"pipeline_dtype must be specified"),
    R("partial ML979", "read from the script's exports (a warning: the GPU's generation, which decides it, is unknown)",
      ARGS, text=r"CUDA_DEVICE_MAX_CONNECTIONS to 1"),
    R("runtime", "the process's environment (NVTE_*, NCCL_*, ...: not read from the script yet)",
      text=r"os\.environ|os\.getenv|getenv\("),
    R("runtime", "installed packages and their versions (Transformer Engine, torch, modelopt, yaml, resiliency)",
      text=r"is_te_min_version|is_torch_min_version|get_te_version|HAVE_[A-Z_]+|importlib|nvidia_resiliency|"
           r"modelopt|MultiStorageClientFeature|torch_memory_saver|Cannot import"),
    R("runtime", "the GPU", text=r"get_device_arch_version|torch\.cuda|is_grad_enabled"),
    R("open", OPEN_WHY, ARGS, text=r"fake_process_group"),  # an option, though its text names the process group
]
OPEN = ("open", OPEN_WHY)
GENERATED_WHY = "its condition, evaluated on the options (config_checks_0_16.json, generated from this source)"
PIPELINE_WHY = ("replayed from the parsed options: validate_args to its end, core_transformer_config_from_args, "
                "__post_init__ up to it (config_checks_0_16.json, generated from this source)")
VALIDATE_WHY = ("its condition, evaluated on the options as validate_args has changed them by this line "
                "(validate_checks_0_16.json, generated from this source)")


def enumerate_sites(root: Path) -> list:
    """Every raise/assert in SCOPE's functions at ``root`` (a Megatron-LM checkout), in file and line order."""
    sites: list = []
    for rel, functions in SCOPE.items():
        path = Path(root) / rel
        found: list = []
        base._Walker(rel, found).visit(ast.parse(path.read_text(encoding="utf-8"), filename=rel))
        sites += [s for s in found if s.function in functions]
    return sorted(sites, key=lambda s: (s.file, s.line))


def classify(site, generated: bool = True) -> tuple:
    """(verdict, why, basis); ``generated=False``: before the generated tables (their generators ask so)."""
    verdict = _classify(site)
    if generated and verdict[0] == "open" and site.where in config_checks.partial():
        given = ", ".join("--" + o.replace("_", "-") for o in config_checks.partial()[site.where])
        return "partial ML982", f"{PIPELINE_WHY}; undecided where {given} is given (its type converter is not " \
            "modelled)", "generated"
    if generated and verdict[0] == "open" and site.where in config_checks.sites():
        return "rule ML982", PIPELINE_WHY if site.where in config_checks.pipelined() else GENERATED_WHY, "generated"
    if generated and verdict[0] == "open" and site.where in validate_checks.sites():
        return "rule ML983", VALIDATE_WHY, "generated"
    if generated and verdict[0] == "open" and site.where in validate_checks.skipped():
        return "open", "ML983's generator cannot follow it: " + validate_checks.skipped()[site.where], "generated"
    if generated and verdict[:2] == OPEN and site.where in config_checks.skipped():
        return "open", "ML982's generator leaves it: " + config_checks.skipped()[site.where], "generated"
    return verdict


def _classify(site) -> tuple:
    for rule in HAND:
        if rule.matches(site, VERSION):
            return rule.verdict, rule.why, rule.basis
    for rule in base.PATTERNS:
        if rule.matches(site, VERSION):
            return rule.verdict, rule.why, "pattern"
    return (*OPEN, "function")


def render(rows: list) -> str:
    c = base.counts(rows)
    lines = [
        "# Refusals of Megatron-Core 0.16.1: every raise and assert a launch line can reach up to its first training step",
        "",
        "<!-- Generated by meshlint/generate/megatron_refusals.py: edit the classification there, then regenerate:",
        "     python -m meshlint.generate.megatron_refusals --write /path/to/Megatron-LM   (tag core_v0.16.1) -->",
        "",
        "Megatron-LM at tag `core_v0.16.1` (55ac70825), the code megatron-core 0.16.1 on the package index ships plus "
        "megatron/training. The functions read: " + ", ".join(f"`{f}`" for fs in SCOPE.values() for f in fs) + ". "
        "Verdicts as in [refusals.md](refusals.md); `open` here means a check of the parsed options alone, which "
        "validate_args and the config classes see and nothing else. From `BaseMoELayer.__init__` on they are the first "
        "training step's (the MoE layer built and run, its token dispatcher and router, the pipeline schedule "
        "train_step runs), each site classified by hand (FIRST_STEP_HAND). tests/test_real_megatron.py checks the list "
        "against the source where a checkout is given (MEGATRON_LM_ROOT).",
        "",
        "| sites | not reachable | not decidable | decidable | by a rule | not yet covered |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| {c['sites']} | {c['internal']} | {c['runtime']} | {c['decidable']} | {c['rule'] + c['partial']} | "
        f"{c['open']} |",
        "",
        f"<!-- sites: {VERSION} -->",
        "",
        "| site | function | condition | message | verdict | why |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for site, verdict, why, _ in rows:
        lines.append(f"| `{site.where}` | {base._cell(site.function)} | {base._cell(base._short(site.condition, 120))} "
                     f"| {base._cell(base._short(site.message, 100))} | {verdict} | {base._cell(why)} |")
    lines += ["", f"<!-- end sites: {VERSION} -->", ""]
    return "\n".join(lines)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="ROOT")
    mode.add_argument("--check", metavar="ROOT")
    args = ap.parse_args(argv)
    root = Path(args.write or args.check)
    rows = [(s, *classify(s)) for s in enumerate_sites(root)]
    text = render(rows)
    if args.check:
        same = DOC.is_file() and DOC.read_text(encoding="utf-8") == text
        print(f"{DOC}: {'up to date' if same else 'stale: regenerate it'}")
        return 0 if same else 1
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}: {len(rows)} sites")
    return 0


if __name__ == "__main__":
    sys.exit(main())
