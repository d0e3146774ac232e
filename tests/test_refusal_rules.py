"""Rules ML801-ML833 and ML870-ML876 (refusals the inventory listed as open) on edits of the frameworks' own shipped configs.

Each case edits one real config (torchtitan main's and 0.3.0's registry functions, torchtitan 0.2.x's
train_configs TOML, KempnerForge's configs/train TOML) and checks it in process with ``check_file``
(the edited text is passed as ``raw``, under the real file's name, so a registry function that derives
from another in the same file still resolves). A positive edit must get the rule's error on the
edited line; a negative edit -- one the framework accepts, per the source cited in each rule's
[doc] -- must get no error at all from the ML8xx rules. A framework tree that is not on this
machine skips its cases, saying which.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from meshlint.engine.check import Options, check_file
from meshlint.engine.ruleset import load_rules
from meshlint.mesh.topology import CliTopology

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "frameworks"
TREES = {
    "main@b5bcd76c6": SHARED / "torchtitan-b5bcd76c6",
    "0.3.0": ROOT / ".frameworks" / "torchtitan-0.3.0",
    "0.2.x": SHARED / "torchtitan-v0.2-9810191bb-parent",
    "kf": SHARED / "KempnerForge-5666d0d",
}
RULES = load_rules()
EDIT = "meshlint_edit"  # the function appended to a registry file
LLAMA = "torchtitan/models/llama3/config_registry.py"
LLAMA02 = "torchtitan/models/llama3/train_configs/debug_model.toml"
DSV3_02 = "torchtitan/models/deepseek_v3/train_configs/debug_model.toml"
# names an edit uses that the shipped registry file may not import
IMPORTS = ("from torchtitan.distributed.activation_checkpoint import MemoryBudgetAC\n"
           "from torchtitan.hf_datasets.text_datasets import HFDataSource, InterleavedHuggingFaceTextDataLoader\n"
           "from torchtitan.components.checkpointer.torch_checkpointing import TorchCheckpointingManager\n"
           "from torchtitan.components.data import FirstFitPackingConfig, HuggingFaceRandomAccessSource\n"
           "from torchtitan.components.data import SingleDatasetConfig\n"
           "from torchtitan.config import CompileConfig\n"
           "from torchtitan.components.optimizer import OptimizersContainer, ParamGroupConfig\n")


def groups(name: str) -> str:
    """An edit that replaces the optimizer with one param group (positions of ``x[0].y = ...`` are not recorded)."""
    return (f"config.optimizer = OptimizersContainer.Config(param_groups=[ParamGroupConfig("
            f"pattern='.*', optimizer_name={name!r}, optimizer_kwargs={{'lr': 8e-4}})])")


def registry_edit(base: str, *lines: str) -> str:
    """A function deriving from the shipped ``base`` and changing it, as a user's edit would."""
    body = "".join(f"    {line}\n" for line in lines)
    return f"\n\n{IMPORTS}\n\ndef {EDIT}():\n    config = {base}()\n{body}    return config\n"


def toml_set(text: str, section: str, key: str, value: str) -> str:
    """``key = value`` in ``[section]`` (the line replaced, or added under the header)."""
    lines = text.split("\n")
    start = lines.index(f"[{section}]")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    for i in range(start + 1, end):
        if re.match(rf"{re.escape(key)}\s*=", lines[i]):
            lines[i] = f"{key} = {value}"
            return "\n".join(lines)
    lines.insert(start + 1, f"{key} = {value}")
    return "\n".join(lines)


# (id, tree, relative path, registry base function or None for TOML, the edit, world, code, positive)
# A registry edit is a list of statements; a TOML edit a list of (section, key, value).
CASES = [
    ("cp-balancer-typo", "main@b5bcd76c6", "torchtitan/models/llama3/config_registry.py", "llama3_debugmodel",
     ["config.parallelism.context_parallel_degree = 2",
      "config.parallelism.context_parallel_load_balancer = 'roundrobin'"], 8, "ML801", True),
    ("cp-balancer-ptrr", "main@b5bcd76c6", "torchtitan/models/llama3/config_registry.py", "llama3_debugmodel",
     ["config.parallelism.context_parallel_degree = 2",
      "config.parallelism.context_parallel_load_balancer = 'ptrr'"], 8, "ML801", False),
    ("cp-balancer-typo-030", "0.3.0", "torchtitan/models/llama3/config_registry.py", "llama3_debugmodel",
     ["config.parallelism.context_parallel_degree = 2",
      "config.parallelism.context_parallel_load_balancer = 'round_robin'"], 8, "ML801", True),
    ("cp-qwen35", "main@b5bcd76c6", "torchtitan/models/qwen3_5/config_registry.py", "qwen35_debugmodel",
     ["config.parallelism.context_parallel_degree = 2"], 8, "ML802", True),
    ("tp-qwen35", "main@b5bcd76c6", "torchtitan/models/qwen3_5/config_registry.py", "qwen35_debugmodel",
     ["config.parallelism.tensor_parallel_degree = 2"], 8, "ML802", False),
    ("cp-muse-mm", "main@b5bcd76c6", "torchtitan/models/muse_glimmer/config_registry.py", "muse_glimmer_debugmodel_mm",
     ["config.parallelism.context_parallel_degree = 2"], 8, "ML802", True),
    ("cp-muse-text", "main@b5bcd76c6", "torchtitan/models/muse_glimmer/config_registry.py", "muse_glimmer_debugmodel",
     ["config.parallelism.context_parallel_degree = 2"], 8, "ML802", False),
    ("cp-qwen35-030", "0.3.0", "torchtitan/models/qwen3_5/config_registry.py", "qwen35_debugmodel",
     ["config.parallelism.context_parallel_degree = 2"], 8, "ML802", True),
    ("cp-gpt-oss-02", "0.2.x", "torchtitan/models/gpt_oss/train_configs/debug_model.toml", None,
     [("parallelism", "context_parallel_degree", "2")], 8, "ML809", True),
    ("gpt-oss-02", "0.2.x", "torchtitan/models/gpt_oss/train_configs/debug_model.toml", None, [], 8, "ML809", False),
    ("flux-accumulate", "main@b5bcd76c6", "torchtitan/models/flux/config_registry.py", "flux_debugmodel",
     ["config.training.num_tokens_per_train_step = 4 * 8 * config.training.num_tokens_per_microbatch_per_dp_rank"],
     8, "ML803", True),
    ("flux-one-step", "main@b5bcd76c6", "torchtitan/models/flux/config_registry.py", "flux_debugmodel",
     ["config.training.num_tokens_per_train_step = 8 * config.training.num_tokens_per_microbatch_per_dp_rank"],
     8, "ML803", False),
    ("flux-accumulate-02", "0.2.x", "torchtitan/models/flux/train_configs/debug_model.toml", None,
     [("training", "global_batch_size", "64")], 8, "ML810", True),
    ("flux-one-step-02", "0.2.x", "torchtitan/models/flux/train_configs/debug_model.toml", None,
     [("training", "global_batch_size", "32")], 8, "ML810", False),
    ("flux-accumulate-030", "0.3.0", "torchtitan/models/flux/config_registry.py", "flux_debugmodel",
     ["config.training.global_batch_size = 4 * 8 * config.training.local_batch_size"], 8, "ML810", True),
    ("flux-one-step-030", "0.3.0", "torchtitan/models/flux/config_registry.py", "flux_debugmodel",
     ["config.training.global_batch_size = 8 * config.training.local_batch_size"], 8, "ML810", False),
    ("llama-sdpa", "main@b5bcd76c6", "torchtitan/models/llama3/config_registry.py", "llama3_debugmodel",
     ["config.model_spec = model_registry('debugmodel', attn_backend='sdpa')"], 8, "ML804", True),
    ("llama-varlen", "main@b5bcd76c6", "torchtitan/models/llama3/config_registry.py", "llama3_debugmodel",
     ["config.model_spec = model_registry('debugmodel', attn_backend='varlen')"], 8, "ML804", False),
    ("qwen3-moe-backend-typo", "main@b5bcd76c6", "torchtitan/models/qwen3/config_registry.py", "qwen3_30b_a3b",
     ["config.model_spec = model_registry('30B-A3B', moe_comm_backend='all_to_all')"], 64, "ML805", True),
    ("qwen3-moe-standard", "main@b5bcd76c6", "torchtitan/models/qwen3/config_registry.py", "qwen3_30b_a3b",
     ["config.model_spec = model_registry('30B-A3B', moe_comm_backend='standard')"], 64, "ML805", False),
    ("pp-abstract", "main@b5bcd76c6", "torchtitan/models/llama3/config_registry.py", "llama3_debugmodel",
     ["config.parallelism.pipeline_parallel_degree = 2", "config.parallelism.num_pp_microbatches = 2",
      "config.training.disable_cuda_graphs = True",
      "config.parallelism.pipeline_parallel_schedule = 'PipelineScheduleSingle'"], 8, "ML806", True),
    ("pp-gpipe", "main@b5bcd76c6", "torchtitan/models/llama3/config_registry.py", "llama3_debugmodel",
     ["config.parallelism.pipeline_parallel_degree = 2", "config.parallelism.num_pp_microbatches = 2",
      "config.training.disable_cuda_graphs = True",
      "config.parallelism.pipeline_parallel_schedule = 'GPipe'"], 8, "ML806", False),
    ("kf-odd-head-dim", "kf", "configs/train/debug.toml", None, [("model", "dim", "260")], 4, "ML807", True),
    ("kf-even-head-dim", "kf", "configs/train/debug.toml", None, [("model", "dim", "272")], 4, "ML807", False),
    ("muse-partial-dtensor", "main@b5bcd76c6", "torchtitan/models/muse_glimmer/config_registry.py",
     "muse_glimmer_debugmodel", ["config.parallelism.spmd_backend = 'partial_dtensor'"], 8, "ML808", True),
    ("qwen35-partial-dtensor", "main@b5bcd76c6", "torchtitan/models/qwen3_5/config_registry.py", "qwen35_debugmodel",
     ["config.parallelism.spmd_backend = 'partial_dtensor'"], 8, "ML808", False),
    ("qwen35-full-dtensor-030", "0.3.0", "torchtitan/models/qwen3_5/config_registry.py", "qwen35_debugmodel",
     ["config.parallelism.spmd_backend = 'full_dtensor'"], 8, "ML808", True),
    # ML811-ML820 read the `config` fact (every value, file or schema default)
    ("optimizer-sgd-02", "0.2.x", LLAMA02, None, [("optimizer", "name", '"SGD"')], 8, "ML811", True),
    ("optimizer-adam-02", "0.2.x", LLAMA02, None, [("optimizer", "name", '"Adam"')], 8, "ML811", False),
    ("param-group-sgd", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     [groups("SGD")], 8, "ML812", True),
    ("param-group-muon", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     [groups("DistMuon")], 8, "ML812", False),
    ("param-group-adamw-lower-030", "0.3.0", LLAMA, "llama3_debugmodel",
     [groups("adamw")], 8, "ML812", True),
    ("seed-disabled-02", "0.2.x", LLAMA02, None,
     [("checkpoint", "create_seed_checkpoint", "true"), ("checkpoint", "enable", "false"),
      ("parallelism", "data_parallel_shard_degree", "1")], 1, "ML830", True),
    ("seed-enabled-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.enable = True", "config.checkpoint.create_seed_checkpoint = True"], 1, "ML813", False),
    ("seed-disabled-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.enable = False", "config.checkpoint.create_seed_checkpoint = True"], 1, "ML813", True),
    ("seed-8-ranks-030", "0.3.0", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.enable = True", "config.checkpoint.create_seed_checkpoint = True"], 8, "ML814", True),
    ("seed-8-ranks-02", "0.2.x", LLAMA02, None,
     [("checkpoint", "create_seed_checkpoint", "true"), ("checkpoint", "enable", "true")], 8, "ML831", True),
    ("memory-budget-uncompiled", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.activation_checkpoint = MemoryBudgetAC.Config(memory_budget=0.5)"], 8, "ML815", True),
    ("memory-budget-compiled", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.activation_checkpoint = MemoryBudgetAC.Config(memory_budget=0.5)",
      "config.compile = CompileConfig(enable=True, components=['model', 'loss'])"], 8, "ML815", False),
    ("keep-one-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.keep_latest_k = 1"], 8, "ML816", True),
    ("keep-two-030", "0.3.0", LLAMA, "llama3_debugmodel", ["config.checkpoint.keep_latest_k = 2"], 8, "ML816", False),
    ("keep-one-02", "0.2.x", LLAMA02, None, [("checkpoint", "keep_latest_k", "1"), ("checkpoint", "enable", "true")],
     8, "ML832", True),
    ("keep-one-02-disabled", "0.2.x", LLAMA02, None,
     [("checkpoint", "keep_latest_k", "1"), ("checkpoint", "enable", "false")], 8, "ML832", False),
    ("hf-save-full-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.last_save_in_hf = True", "config.checkpoint.last_save_model_only = False"], 8, "ML817", True),
    ("hf-save-model-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.last_save_in_hf = True", "config.checkpoint.last_save_model_only = True"], 8, "ML817", False),
    ("hf-load-full-02", "0.2.x", LLAMA02, None,
     [("checkpoint", "initial_load_in_hf", "true"), ("checkpoint", "initial_load_model_only", "false"),
      ("checkpoint", "enable", "true")], 8, "ML833", True),
    ("async-sync-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.async_mode = 'sync'"], 8, "ML818", True),
    ("async-upper-030", "0.3.0", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.async_mode = 'ASYNC'"], 8, "ML818", False),
    ("exclude-model-030", "0.3.0", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.exclude_from_loading = ['model']"], 8, "ML819", True),
    ("exclude-optimizer-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.exclude_from_loading = ['optimizer']"], 8, "ML819", True),
    ("exclude-optimizer-030", "0.3.0", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.exclude_from_loading = ['optimizer']"], 8, "ML819", False),
    ("kf-optimizer-adam", "kf", "configs/train/debug.toml", None, [("optimizer", "name", '"adam"')], 4, "ML820", True),
    ("kf-optimizer-lion", "kf", "configs/train/debug.toml", None, [("optimizer", "name", '"lion"')], 4, "ML820", False),
    ("kf-loss-typo", "kf", "configs/train/debug.toml", None, [("train", "loss_fn", '"crossentropy"')], 4, "ML820",
     True),
    ("kf-model-type", "kf", "configs/train/debug.toml", None, [("model", "model_type", '"llama"')], 4, "ML820", True),
    ("kf-router-moe", "kf", "configs/train/debug.toml", None,
     [("model", "moe_router", '"top2"'), ("model", "num_experts", "4"), ("model", "moe_top_k", "2")], 4, "ML820", True),
    ("kf-router-dense", "kf", "configs/train/debug.toml", None, [("model", "moe_router", '"top2"')], 4, "ML820", False),
    ("optim-in-bwd-pp-02", "0.2.x", LLAMA02, None,
     [("optimizer", "early_step_in_backward", "true"), ("parallelism", "pipeline_parallel_degree", "2"),
      ("parallelism", "data_parallel_shard_degree", "4")], 8, "ML821", True),
    ("optim-in-bwd-fsdp-02", "0.2.x", LLAMA02, None, [("optimizer", "early_step_in_backward", "true")], 8, "ML821",
     False),
    ("float8-recipe-all-gather-02", "0.2.x", DSV3_02, None,
     [("quantize.linear.float8", "enable_fsdp_float8_all_gather", "true"),
      ("quantize.linear.float8", "recipe_name", '"rowwise"'), ("model", "converters", '["quantize.linear.float8"]')],
     8, "ML822", True),
    ("float8-recipe-02", "0.2.x", DSV3_02, None,
     [("quantize.linear.float8", "recipe_name", '"rowwise"'), ("model", "converters", '["quantize.linear.float8"]')],
     8, "ML822", False),
    ("float8-moe-pp-02", "0.2.x", DSV3_02, None,
     [("model", "converters", '["quantize.grouped_mm.float8"]'), ("parallelism", "pipeline_parallel_degree", "2"),
      ("parallelism", "data_parallel_shard_degree", "4")], 8, "ML823", True),
    ("float8-moe-fsdp-02", "0.2.x", DSV3_02, None, [("model", "converters", '["quantize.grouped_mm.float8"]')], 8,
     "ML823", False),
    ("mx-compiled-tp-02", "0.2.x", LLAMA02, None,
     [("parallelism", "tensor_parallel_degree", "2"), ("parallelism", "data_parallel_shard_degree", "4"),
      ("model", "converters", '["quantize.linear.mx"]'), ("compile", "enable", "true")], 8, "ML824", True),
    ("mx-eager-tp-02", "0.2.x", LLAMA02, None,
     [("parallelism", "tensor_parallel_degree", "2"), ("parallelism", "data_parallel_shard_degree", "4"),
      ("model", "converters", '["quantize.linear.mx"]'), ("compile", "enable", "false")], 8, "ML824", False),
    ("mixed-quantization-02", "0.2.x", DSV3_02, None,
     [("model", "converters", '["quantize.linear.mx", "quantize.grouped_mm.float8"]')], 8, "ML825", True),
    ("no-repeat-dp-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel", ["config.dataloader.repeat = False"], 8,
     "ML826", True),
    ("no-repeat-one-rank-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.dataloader.repeat = False", "config.parallelism.data_parallel_shard_degree = 1"], 1, "ML826", False),
    ("kf-hf-no-tokenizer", "kf", "configs/train/debug.toml", None, [("data", "hf_dataset_name", '"wikitext"')], 4,
     "ML827", True),
    ("kf-hf-tokenizer", "kf", "configs/train/debug.toml", None,
     [("data", "hf_dataset_name", '"wikitext"'), ("data", "tokenizer_path", '"gpt2"')], 4, "ML827", False),
    ("kf-pack-no-tokenizer", "kf", "configs/train/7b.toml", None, [("data", "pack_sequences", "true")], 32, "ML827",
     True),
    ("kf-mmap-and-hf", "kf", "configs/train/7b.toml", None, [("data", "hf_dataset_name", '"wikitext"')], 32, "ML827",
     False),  # dataset_path wins: the Hugging Face branch is never reached
    # ML858: the VLM data path (train.py:294-318); a key a --section.key=value in the file's comments sets is supplied
    ("kf-video-no-tokenizer", "kf", "configs/train/vlm_video_webvid.toml", None, [("data", "tokenizer_path", '""')],
     4, "ML858", True),
    ("kf-video-tokenizer", "kf", "configs/train/vlm_video_webvid.toml", None, [("data", "tokenizer_path", '"gpt2"')],
     4, "ML858", False),
    ("kf-vlm-no-tokenizer", "kf", "configs/train/vlm_7b_siglip2.toml", None, [("data", "tokenizer_path", '""')], 8,
     "ML858", True),  # its comments override the dataset only
    ("kf-vlm-no-dataset", "kf", "configs/train/vlm_7b_freeze_schedule.toml", None,
     [("data", "hf_dataset_name", '""')], 4, "ML858", False),  # its usage comment passes --data.hf_dataset_name=...
    ("kf-vlm-no-tokenizer-launch", "kf", "configs/train/vlm_debug.toml", None, [("data", "tokenizer_path", '""')], 4,
     "ML858", False),  # its usage line passes --data.tokenizer_path=gpt2
    ("ckpt-interval-zero-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel", ["config.checkpoint.interval = 0"], 8,
     "ML828", True),
    ("ckpt-hf-remote-030", "0.3.0", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.last_save_in_hf = True", "config.checkpoint.last_save_model_only = True",
      "config.checkpoint.folder = 's3://bucket/ckpt'"], 8, "ML828", True),
    ("ckpt-remote-dcp-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.folder = 's3://bucket/ckpt'"], 8, "ML828", False),
    # ML870-ML873 (torchtitan data and checkpoint refusals; tests/test_data_refusals_real.py runs the framework)
    ("interleaved-infinite-030", "0.3.0", LLAMA, "llama3_debugmodel",
     ["config.dataloader = InterleavedHuggingFaceTextDataLoader.Config(sources=[HFDataSource(dataset='c4', "
      "infinite=False), HFDataSource(dataset='c4_test')])"], 8, "ML870", True),
    ("interleaved-weights-030", "0.3.0", LLAMA, "llama3_debugmodel",
     ["config.dataloader = InterleavedHuggingFaceTextDataLoader.Config(sources=[HFDataSource(dataset='c4', "
      "weight=0.7), HFDataSource(dataset='c4_test', weight=0.3)])"], 8, "ML870", False),
    ("exclude-misspelt-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.enable = True", "config.checkpoint.exclude_from_loading = ['lr_schedulers']"], 8, "ML871",
     True),
    ("exclude-known-030", "0.3.0", LLAMA, "llama3_debugmodel",
     ["config.checkpoint.enable = True", "config.checkpoint.exclude_from_loading = ['dataloader', 'train_state']"], 8,
     "ML871", False),
    ("exclude-misspelt-02", "0.2.x", LLAMA02, None,
     [("checkpoint", "enable", "true"), ("checkpoint", "exclude_from_loading", '["data_loader"]')], 8, "ML871", True),
    ("torch-ckpt-remote-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint = TorchCheckpointingManager.Config(enable=True)", "config.dump_folder = 's3://bucket/run'"],
     8, "ML872", True),
    ("torch-ckpt-local-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.checkpoint = TorchCheckpointingManager.Config(enable=True)"], 8, "ML872", False),
    ("dataset-unregistered-030", "0.3.0", LLAMA, "llama3_debugmodel", ["config.dataloader.dataset = 'fineweb'"], 8,
     "ML873", True),
    ("dataset-uppercase-030", "0.3.0", LLAMA, "llama3_debugmodel", ["config.dataloader.dataset = 'C4_test'"], 8,
     "ML873", False),
    ("dataset-flux-030", "0.3.0", "torchtitan/models/flux/config_registry.py", "flux_debugmodel",
     ["config.dataloader.dataset = 'c4'"], 8, "ML873", True),
    ("dataset-flux-02", "0.2.x", "torchtitan/models/flux/train_configs/debug_model.toml", None,
     [("training", "dataset", '"c4"')], 8, "ML873", True),
    ("dataset-llama3-02", "0.2.x", LLAMA02, None, [("training", "dataset", '"c4_validation"')], 8, "ML873", False),
    ("hf-revision-in-kwargs-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.dataloader.dataset = FirstFitPackingConfig(dataset=SingleDatasetConfig(source="
      "HuggingFaceRandomAccessSource.Config(path='json', split='train', load_dataset_kwargs={'revision': 'main'})))"],
     8, "ML874", True),
    ("packing-bins-main", "main@b5bcd76c6", LLAMA, "llama3_debugmodel",
     ["config.dataloader.dataset = FirstFitPackingConfig(dataset=SingleDatasetConfig(source="
      "HuggingFaceRandomAccessSource.Config(path='json', split='train', revision='main')), num_packing_bins=2)"],
     8, "ML874", False),
    ("mm-mrope-raster-030", "0.3.0", "torchtitan/models/qwen3_5/config_registry.py", "qwen35_debugmodel",
     ["config.dataloader.patch_order = 'raster'"], 8, "ML875", True),
    ("mm-raster-kimi-030", "0.3.0", "torchtitan/models/kimi_k2_7/config_registry.py", "kimi_k2_5_debugmodel",
     ["config.dataloader.patch_order = 'raster'"], 8, "ML875", False),
]


def _run(tree: str, rel: str, base, edit, world: int):
    root = TREES[tree]
    path = root / rel
    if not path.is_file():
        pytest.skip(f"{root} is not on this machine")
    text = path.read_text(encoding="utf-8")
    version = tree if tree in ("main@b5bcd76c6", "0.3.0") else None
    options = Options(rules=RULES, topology=CliTopology(world_size=world, gpus_per_node=min(world, 8)),
                      torchtitan_version=version)
    if base is None:
        for section, key, value in edit:
            text = toml_set(text, section, key, value)
        return check_file(str(path), options, raw=text.encode()), text
    text = text + registry_edit(base, *edit)
    return check_file(f"{path}::{EDIT}", options, raw=text.encode()), text


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_refusal_rule_on_an_edit_of_a_shipped_config(case):
    _id, tree, rel, base, edit, world, code, positive = case
    report, text = _run(tree, rel, base, edit, world)
    assert report.status == "checked", report.error or report.note
    mine = [f for f in report.findings if f.code.startswith("ML8") and f.severity == "error"]
    if not positive:
        assert not mine, "\n".join(f"{f.line}: {f.code} {f.message}" for f in mine)
        return
    hits = [f for f in mine if f.code == code]
    assert hits, f"no {code}: " + "; ".join(f"{f.code} {f.message[:80]}" for f in report.findings)
    lines = text.split("\n")
    # the finding points at the edited line (a registry edit: inside the appended function)
    if base is None and edit:
        line = lines[hits[0].line - 1]
        # the edited line, or the header of its table when the fix is a key the file lacks (data.tokenizer_path)
        assert any(line.startswith(f"{key} = ") or line == f"[{section}]" for section, key, _value in edit), line
    elif base is not None:
        assert lines[hits[0].line - 1].lstrip().startswith("config.")


def test_unedited_shipped_configs_get_none_of_these_errors():
    """The configs the cases start from pass as shipped (the frameworks run them)."""
    for tree, rel, base, world in (("main@b5bcd76c6", "torchtitan/models/qwen3_5/config_registry.py",
                                    "qwen35_debugmodel", 8),
                                   ("main@b5bcd76c6", "torchtitan/models/flux/config_registry.py", "flux_debugmodel", 8),
                                   ("main@b5bcd76c6", "torchtitan/models/muse_glimmer/config_registry.py",
                                    "muse_glimmer_debugmodel_mm", 8),
                                   ("0.2.x", "torchtitan/models/flux/train_configs/debug_model.toml", None, 8),
                                   ("kf", "configs/train/debug.toml", None, 4)):
        if not (TREES[tree] / rel).is_file():
            continue
        report, _ = _run(tree, rel, base, [] if base is None else ["pass"], world)
        assert report.status == "checked", report.error
        assert not [f for f in report.findings if f.code.startswith("ML8")], (tree, rel)


# ML829: [[data.datasets]] / [[data.phases]] appended to a shipped KempnerForge config (none ships with them)
APPENDED = [
    ("source-without-path", '[[data.datasets]]\nname = "web"\nweight = 1.0\n', True),
    ("source-with-path", '[[data.datasets]]\nname = "web"\npath = "/data/web"\nweight = 1.0\n', False),
    ("phases-out-of-order", '[[data.phases]]\nstart_step = 100\n[[data.phases]]\nstart_step = 50\n', True),
    ("phases-in-order", '[[data.phases]]\nstart_step = 50\n[[data.phases]]\nstart_step = 100\n', False),
    ("phase-negative-weight", '[[data.phases]]\nstart_step = 10\ndataset_weights = {web = -1.0}\n', True),
]


@pytest.mark.parametrize("case", APPENDED, ids=[c[0] for c in APPENDED])
def test_kempnerforge_data_checks_on_an_edit_of_a_shipped_config(case):
    _id, extra, positive = case
    path = TREES["kf"] / "configs/train/debug.toml"
    if not path.is_file():
        pytest.skip(f"{TREES['kf']} is not on this machine")
    text = path.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + extra
    options = Options(rules=RULES, topology=CliTopology(world_size=4, gpus_per_node=4))
    report = check_file(str(path), options, raw=text.encode())
    assert report.status == "checked", report.error
    hits = [f for f in report.findings if f.code == "ML829"]
    assert bool(hits) == positive, [f"{f.code} {f.message}" for f in report.findings]
    if positive:
        assert text.split("\n")[hits[0].line - 1].startswith("[[data.")
