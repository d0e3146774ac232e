"""Issue 12 part 3: each miss fixed, checked on edits of the frameworks' own shipped configs against the frameworks.

Every case below is a small edit of a config the framework ships (KempnerForge 5666d0d's configs/train/*.toml,
torchtitan 9810191bb^'s train_configs/*.toml), read from ../shared/frameworks/. meshlint checks the edited file;
the framework's own code, run in a subprocess, says whether it refuses the same file:

* KempnerForge: ``load_config`` (with the case's launch-line overrides), ``JobConfig.validate(world)``, for
  VLMs with the ``random`` encoder ``build_vlm_wrapper`` on the meta device (the build-time length and pooling
  checks; Hugging Face encoders are not built: they need a download), then scripts/train.py's checks that need
  neither data nor GPUs, called as train.py calls them (``kf_train_checks``: the VLM dataset's keys, the mixture
  sampler's phase switches, the freeze state recorded after each step).
* torchtitan v0.2: ``ConfigManager.parse_args``, ``ParallelDims`` + ``build_mesh`` on the fake process group,
  ``Trainer.__init__``'s pipelining test (train.py:218-222: the TrainSpec's ``pipelining_fn``), then the model
  on the meta device through the TrainSpec's own ``pipelining_fn`` or ``parallelize_fn``. torchtitan's package
  ``__init__`` is not run, and third-party modules the parallelize path never calls (tokenizers, torchdata,
  datasets, einops, safetensors, and triton for the MoE kernels' import only) are empty stand-ins, as are
  ``torch.utils.tensorboard``'s writer: no torchtitan code is replaced.

The tests assert that meshlint reports an error exactly when the framework refuses, that the codes each case
targets are among them, that a sweep of plain degree edits (tp, cp, pp, ep, replicate) disagrees only where
``SWEEP_KNOWN`` says why, that the frameworks' unedited configs get no error from the new rules, and that the
committed fixtures under fixtures/rules/ are these very edits (``python tests/test_misses.py --write-fixtures``
regenerates them). A framework that cannot be imported here skips its tests, saying why.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "frameworks"
KF_ROOT = SHARED / "KempnerForge-5666d0d"
TT_ROOT = SHARED / "torchtitan-v0.2-9810191bb-parent"
FIXTURES = ROOT / "fixtures" / "rules"
NEW_CODES = {"ML313", "ML314", "ML315", "ML316", "ML317", "ML318", "ML319", "ML404", "ML405", "ML613", "ML614",
             "ML855", "ML856", "ML857", "ML858", "ML859", "ML860"}

KF_ORIGIN = "KempnerForge (MIT) {path} at 5666d0d"
TT_ORIGIN = "torchtitan (BSD-3-Clause, Copyright (c) Meta Platforms, Inc. and affiliates) {path} at 9810191bb^"


# ----------------------------------------------------------------------------- edits

@dataclass(frozen=True)
class Set:
    """``key = value`` in ``[section]`` (replacing the line, or added after the header; the section is added if
    missing); ``expect`` puts a ``# expect:`` marker on that line for the fixture."""

    key: str
    value: str
    expect: str = ""


@dataclass(frozen=True)
class Drop:
    """Remove a whole ``[section]`` (its header and lines up to the next header)."""

    section: str


@dataclass(frozen=True)
class Replace:
    old: str
    new: str


@dataclass
class Case:
    id: str
    fw: str                      # "kf" | "tt"
    base: str                    # path inside the framework's tree
    changes: tuple = ()
    world: int | None = None
    expect: frozenset = frozenset()   # meshlint error codes the case targets (empty: the framework accepts it)
    what: str = ""               # the edit, in words (the fixture's header)
    cli: tuple = ()              # KempnerForge overrides, as its launch line in the file writes them
    fixture: str = ""            # fixtures/rules/<dir>/<name> this edit is committed as
    extra: dict = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return KF_ROOT if self.fw == "kf" else TT_ROOT

    def text(self) -> str:
        text = (self.root / self.base).read_text()
        for change in self.changes:
            text = apply(text, change)
        return text

    def fixture_text(self) -> str:
        origin = (KF_ORIGIN if self.fw == "kf" else TT_ORIGIN).format(path=self.base)
        head = [f"# Edited copy of {origin}.", f"# Edit: {self.what}" if self.what else "# Edit: none (as shipped)."]
        if self.world is not None and self.fw == "tt":
            head.append(f"# meshlint: world_size={self.world}")
        return "\n".join(head) + "\n" + self.text()


def apply(text: str, change) -> str:
    lines = text.split("\n")
    if isinstance(change, Replace):
        assert text.count(change.old) == 1, f"{change.old!r} is not in the base exactly once"
        return text.replace(change.old, change.new)
    if isinstance(change, Drop):
        start = lines.index(f"[{change.section}]")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
        return "\n".join(lines[:start] + lines[end:])
    section, _, key = change.key.rpartition(".")
    line = f"{key} = {change.value}" + (f"  # expect: {change.expect}" if change.expect else "")
    header = f"[{section}]"
    if header not in lines:
        return text.rstrip("\n") + f"\n\n{header}\n{line}\n"
    start = lines.index(header)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    for i in range(start + 1, end):
        if re.match(rf"{re.escape(key)}\s*=", lines[i]):
            lines[i] = line
            return "\n".join(lines)
    lines.insert(start + 1, line)
    return "\n".join(lines)


KF = "configs/train/"
TTM = "torchtitan/models/"
PAR = "parallelism."
TP2 = (Set(PAR + "data_parallel_replicate_degree", "2"), Set(PAR + "data_parallel_shard_degree", "1"),
       Set(PAR + "tensor_parallel_degree", "2"))
WEBVID_RANDOM = (Set("vision_encoder.type", '"random"'), Set("vision_encoder.path", '""'),
                 Set("vision_encoder.num_tokens", "196"), Set("vision_encoder.feature_dim", "768"))
MIXTURE = ('[[data.datasets]]\nname = "web"\npath = "/data/web"\nweight = 1.0\n\n'
           '[[data.datasets]]\nname = "code"\npath = "/data/code"\nweight = 0.5\n\n')
WEBVID_SMOKE = "the config's own quick-smoke overrides written in: vision_encoder type random, num_tokens 196, " \
               "feature_dim 768"

CASES = [
    # ---- KempnerForge: MoMa with model.num_experts (ML313)
    Case("kf-moma-experts", "kf", KF + "vlm_debug_moma.toml", (Set("model.num_experts", "4", "ML313"),),
         expect=frozenset({"ML313"}), what="[model] num_experts = 4 (MoMa)",
         fixture="ML313-moma-with-experts/bad_vlm_debug_moma.toml"),
    Case("kf-moma-as-shipped", "kf", KF + "vlm_debug_moma.toml",
         fixture="ML313-moma-with-experts/good_vlm_debug_moma.toml"),
    Case("kf-moma-7b-experts", "kf", KF + "vlm_7b_moma.toml", (Set("model.num_experts", "8"),),
         expect=frozenset({"ML313"})),
    Case("kf-mot-experts", "kf", KF + "vlm_debug_mot.toml", (Set("model.num_experts", "4"),)),
    # ---- KempnerForge: VLM sequence budget (ML314 train.seq_len, ML315 model.max_seq_len)
    Case("kf-vlm-seq-short", "kf", KF + "vlm_debug.toml", (Set("train.seq_len", "575", "ML314"),),
         expect=frozenset({"ML314"}), what="[train] seq_len = 575 (64 image + 512 text tokens need 576)",
         fixture="ML314-vlm-seq-len-too-short/bad_vlm_debug.toml"),
    Case("kf-vlm-as-shipped", "kf", KF + "vlm_debug.toml",
         fixture="ML314-vlm-seq-len-too-short/good_vlm_debug.toml"),
    Case("kf-vlm-both-short", "kf", KF + "vlm_debug.toml",
         (Set("model.max_seq_len", "575", "ML315"), Set("train.seq_len", "575", "ML314")),
         expect=frozenset({"ML314", "ML315"}), what="[model] max_seq_len = 575, [train] seq_len = 575",
         fixture="ML315-vlm-max-seq-len-too-short/bad_vlm_debug.toml"),
    Case("kf-vlm-build-short", "kf", KF + "vlm_debug.toml",
         (Set("vision_encoder.num_tokens", "0"), Set("model.max_seq_len", "520", "ML315"), Set("train.seq_len", "512")),
         expect=frozenset({"ML315"}),
         what="[vision_encoder] num_tokens = 0 (the random encoder's 16), [model] max_seq_len = 520, "
              "[train] seq_len = 512",
         fixture="ML315-vlm-max-seq-len-too-short/bad_vlm_debug_build.toml"),
    Case("kf-vlm-build-fits", "kf", KF + "vlm_debug.toml",
         (Set("vision_encoder.num_tokens", "0"), Set("model.max_seq_len", "528"), Set("train.seq_len", "512")),
         what="[vision_encoder] num_tokens = 0 (the random encoder's 16), [model] max_seq_len = 528, "
              "[train] seq_len = 512",
         fixture="ML315-vlm-max-seq-len-too-short/good_vlm_debug_build.toml"),
    Case("kf-cross-attn-seq-short", "kf", KF + "vlm_7b_cross_attn.toml", (Set("train.seq_len", "511"),),
         expect=frozenset({"ML314"})),
    Case("kf-cross-attn-text-longer", "kf", KF + "vlm_7b_cross_attn.toml", (Set("vlm.max_text_len", "1024"),),
         expect=frozenset({"ML314"})),
    Case("kf-cross-attn-many-tokens", "kf", KF + "vlm_7b_cross_attn.toml", (Set("vision_encoder.num_tokens", "4096"),)),
    Case("kf-jd-many-tokens", "kf", KF + "vlm_7b.toml", (Set("vision_encoder.num_tokens", "512"),),
         expect=frozenset({"ML314"})),
    Case("kf-moma-tokens", "kf", KF + "vlm_7b_moma.toml", (Set("vision_encoder.num_tokens", "513"),),
         expect=frozenset({"ML314", "ML315"})),
    Case("kf-video-fits", "kf", KF + "vlm_video_webvid.toml", WEBVID_RANDOM, what=WEBVID_SMOKE,
         fixture="ML319-adapter-pool-grid/good_vlm_video_webvid.toml"),
    Case("kf-video-10-frames", "kf", KF + "vlm_video_webvid.toml", WEBVID_RANDOM + (Set("video.max_frames", "10"),)),
    Case("kf-video-11-frames", "kf", KF + "vlm_video_webvid.toml", WEBVID_RANDOM + (Set("video.max_frames", "11"),),
         expect=frozenset({"ML314", "ML315"})),
    Case("kf-video-mlp-adapter", "kf", KF + "vlm_video_webvid.toml",
         WEBVID_RANDOM + (Set("adapter.type", '"mlp_2layer"'),),
         expect=frozenset({"ML314", "ML315"})),
    Case("kf-video-not-square", "kf", KF + "vlm_video_webvid.toml",
         WEBVID_RANDOM[:2] + (Set("vision_encoder.num_tokens", "200", "ML319"), WEBVID_RANDOM[3]),
         expect=frozenset({"ML319"}), what=WEBVID_SMOKE.replace("196", "200 (not a square grid)"),
         fixture="ML319-adapter-pool-grid/bad_vlm_video_webvid.toml"),
    Case("kf-attn-pool-ragged", "kf", KF + "vlm_video_webvid.toml",
         WEBVID_RANDOM + (Set("adapter.type", '"attentional_pool"'), Set("adapter.pool_window", "3")),
         expect=frozenset({"ML319"})),
    Case("kf-attn-pool-even", "kf", KF + "vlm_video_webvid.toml",
         WEBVID_RANDOM + (Set("adapter.type", '"attentional_pool"'),)),
    Case("kf-attn-pool-build", "kf", KF + "vlm_debug.toml",
         (Set("vision_encoder.num_tokens", "0"), Set("adapter.type", '"attentional_pool"'),
          Set("adapter.pool_window", "3")), expect=frozenset({"ML319"})),
    # ---- KempnerForge: [vlm] loops the schema check cannot evaluate (ML855)
    Case("kf-moma-zero-experts", "kf", KF + "vlm_debug_moma.toml",
         (Set("vlm.moma_experts_per_modality.image", "0", "ML855"),), expect=frozenset({"ML855"}),
         what="[vlm.moma_experts_per_modality] image = 0",
         fixture="ML855-kempnerforge-vlm-config-refused/bad_vlm_debug_moma.toml"),
    Case("kf-moma-one-image-expert", "kf", KF + "vlm_debug_moma.toml",
         (Set("vlm.moma_experts_per_modality.image", "1"),), what="[vlm.moma_experts_per_modality] image = 1",
         fixture="ML855-kempnerforge-vlm-config-refused/good_vlm_debug_moma.toml"),
    Case("kf-moma-unknown-modality", "kf", KF + "vlm_debug_moma.toml",
         (Set("vlm.moma_experts_per_modality.video", "1"),), expect=frozenset({"ML855"})),
    Case("kf-moma-missing-modality", "kf", KF + "vlm_debug_moma.toml",
         (Set("vlm.moma_modalities", '["image", "text", "audio"]'),), expect=frozenset({"ML855"})),
    Case("kf-moma-7b-missing-modality", "kf", KF + "vlm_7b_moma.toml",
         (Set("vlm.moma_modalities", '["image", "text", "audio"]'),), expect=frozenset({"ML855"})),
    Case("kf-freeze-schedule-order", "kf", KF + "vlm_7b_freeze_schedule.toml",
         (Replace("freeze_schedule = [\n", "freeze_schedule = [  # expect: ML855\n"),
          Replace("{start_step = 20,", "{start_step = 5,")), expect=frozenset({"ML855"}),
         what="the second freeze_schedule stage starts at step 5 (before the first, at 10)",
         fixture="ML855-kempnerforge-vlm-config-refused/bad_vlm_7b_freeze_schedule.toml"),
    Case("kf-freeze-schedule-same-step", "kf", KF + "vlm_7b_freeze_schedule.toml",
         (Replace("{start_step = 20,", "{start_step = 10,"),), expect=frozenset({"ML855"})),
    Case("kf-freeze-schedule-later", "kf", KF + "vlm_7b_freeze_schedule.toml",
         (Replace("{start_step = 20,", "{start_step = 25,"),)),
    # ---- KempnerForge: MoT image head counts (ML856), attentional_pool heads (ML857), built on the meta device
    Case("kf-mot-image-heads", "kf", KF + "vlm_debug_mot.toml", (Set("vlm.mot_image_n_heads", "2", "ML856"),),
         expect=frozenset({"ML856"}), what="[vlm] mot_image_n_heads = 2 (the model has n_heads = 4)",
         fixture="ML856-kempnerforge-mot-unequal-heads/bad_vlm_debug_mot.toml"),
    Case("kf-mot-image-heads-equal", "kf", KF + "vlm_debug_mot.toml", (Set("vlm.mot_image_n_heads", "4"),),
         what="[vlm] mot_image_n_heads = 4 (equal to the model's n_heads)",
         fixture="ML856-kempnerforge-mot-unequal-heads/good_vlm_debug_mot.toml"),
    Case("kf-mot-image-kv-heads", "kf", KF + "vlm_debug_mot.toml", (Set("vlm.mot_image_n_kv_heads", "2"),),
         expect=frozenset({"ML856"})),
    Case("kf-mot-7b-image-kv-heads", "kf", KF + "vlm_7b_mot.toml", (Set("vlm.mot_image_n_kv_heads", "32"),),
         expect=frozenset({"ML856"})),
    Case("kf-attn-pool-heads", "kf", KF + "vlm_debug.toml",
         (Set("adapter.type", '"attentional_pool"'), Set("adapter.pool_heads", "5", "ML857")),
         expect=frozenset({"ML857"}), what='added [adapter] type = "attentional_pool", pool_heads = 5 '
                                           '(vision_encoder.feature_dim is 384)',
         fixture="ML857-kempnerforge-attentional-pool-heads/bad_vlm_debug.toml"),
    Case("kf-attn-pool-heads-divide", "kf", KF + "vlm_debug.toml",
         (Set("adapter.type", '"attentional_pool"'), Set("adapter.pool_heads", "6")),
         what='added [adapter] type = "attentional_pool", pool_heads = 6 (vision_encoder.feature_dim is 384)',
         fixture="ML857-kempnerforge-attentional-pool-heads/good_vlm_debug.toml"),
    Case("kf-attn-pool-heads-video", "kf", KF + "vlm_video_webvid.toml",
         WEBVID_RANDOM + (Set("adapter.type", '"attentional_pool"'), Set("adapter.pool_heads", "7")),
         expect=frozenset({"ML857"})),
    Case("kf-attn-pool-heads-default", "kf", KF + "vlm_video_webvid.toml",
         WEBVID_RANDOM + (Set("adapter.type", '"attentional_pool"'), Set("vision_encoder.feature_dim", "1000")),
         expect=frozenset({"ML857"})),
    # ---- KempnerForge: the VLM dataset's keys (ML858); a key the file's launch line sets is supplied there
    Case("kf-video-no-tokenizer", "kf", KF + "vlm_video_webvid.toml", (Set("data.tokenizer_path", '""', "ML858"),),
         expect=frozenset({"ML858"}), what='[data] tokenizer_path = "" (no launch line in the file supplies one)',
         fixture="ML858-kempnerforge-vlm-data-missing/bad_vlm_video_webvid.toml"),
    Case("kf-vlm-no-tokenizer", "kf", KF + "vlm_7b_siglip2.toml", (Set("data.tokenizer_path", '""'),),
         expect=frozenset({"ML858"})),
    Case("kf-vlm-tokenizer-at-launch", "kf", KF + "vlm_debug.toml", (Set("data.tokenizer_path", '""'),),
         cli=("--data.hf_dataset_name=sayakpaul/coco-30-val-2014", "--data.tokenizer_path=gpt2"),
         what='[data] tokenizer_path = "" (the usage line passes --data.tokenizer_path=gpt2)',
         fixture="ML858-kempnerforge-vlm-data-missing/good_vlm_debug.toml"),
    # ---- KempnerForge: a data phase weighing every source 0 (ML859), appended to a config that ships none
    Case("kf-phase-all-zero", "kf", KF + "debug.toml",
         (Replace("[distributed]", MIXTURE + '[[data.phases]]\nstart_step = 50\n'
                                   'dataset_weights = {web = 0.0, code = 0.0}  # expect: ML859\n\n[distributed]'),),
         expect=frozenset({"ML859"}), what="two [[data.datasets]] sources and a [[data.phases]] entry at step 50 "
                                           "weighing both 0",
         fixture="ML859-kempnerforge-phase-weights-all-zero/bad_debug.toml"),
    Case("kf-phase-one-positive", "kf", KF + "debug.toml",
         (Replace("[distributed]", MIXTURE + '[[data.phases]]\nstart_step = 50\n'
                                   'dataset_weights = {web = 0.0}\n\n[distributed]'),),
         what="two [[data.datasets]] sources and a [[data.phases]] entry at step 50 weighing web 0 (code keeps its "
              "weight)",
         fixture="ML859-kempnerforge-phase-weights-all-zero/good_debug.toml"),
    Case("kf-phase-at-zero", "kf", KF + "debug.toml",
         (Replace("[distributed]", MIXTURE + '[[data.phases]]\nstart_step = 0\n'
                                   'dataset_weights = {web = 0, code = 0}\n\n[distributed]'),),
         expect=frozenset({"ML859"})),
    Case("kf-phase-after-the-run", "kf", KF + "debug.toml",
         (Replace("[distributed]", MIXTURE + '[[data.phases]]\nstart_step = 500\n'
                                   'dataset_weights = {web = 0.0, code = 0.0}\n\n[distributed]'),)),
    Case("kf-anneal-all-zero", "kf", KF + "debug.toml",
         (Replace("[distributed]", MIXTURE + "[distributed]"), Set("data.anneal_start_step", "80"),
          Set("data.anneal_weights", "{web = 0.0, code = 0.0}")), expect=frozenset({"ML859"})),
    Case("kf-anneal-negative", "kf", KF + "debug.toml",
         (Set("data.anneal_start_step", "80"), Set("data.anneal_weights", "{web = -1.0}")),
         expect=frozenset({"ML829"})),
    # ---- KempnerForge: freeze modules that are not module aliases (ML860), refused after the first step
    Case("kf-freeze-unknown-module", "kf", KF + "vlm_video_webvid.toml",
         (Replace('freeze = [{module = "vision_encoder", frozen = true}]',
                  'freeze = [{module = "vision", frozen = true}]  # expect: ML860'),),
         expect=frozenset({"ML860"}), what='[vlm] freeze = [{module = "vision", ...}] (the alias is vision_encoder)',
         fixture="ML860-kempnerforge-freeze-module-unknown/bad_vlm_video_webvid.toml"),
    Case("kf-freeze-raw-pattern", "kf", KF + "vlm_video_webvid.toml",
         (Replace('freeze = [{module = "vision_encoder", frozen = true}]',
                  'freeze = [{module = "vision_encoder.*", frozen = true}]'),), expect=frozenset({"ML860"})),
    Case("kf-freeze-stage-typo", "kf", KF + "vlm_7b_freeze_schedule.toml",
         (Replace("freeze_schedule = [\n", "freeze_schedule = [  # expect: ML860\n"),
          Replace('{start_step = 20, specs = [{module = "adapter"', '{start_step = 20, specs = [{module = "adaptor"')),
         expect=frozenset({"ML860"}), what='the freeze_schedule stage at step 20 names module "adaptor"',
         fixture="ML860-kempnerforge-freeze-module-unknown/bad_vlm_7b_freeze_schedule.toml"),
    Case("kf-freeze-stage-arch-alias", "kf", KF + "vlm_7b_freeze_schedule.toml",
         (Replace('{start_step = 20, specs = [{module = "adapter"', '{start_step = 20, specs = [{module = "cross_attention"'),),
         what='the freeze_schedule stage at step 20 names module "cross_attention" (the cross_attention arch\'s alias)',
         fixture="ML860-kempnerforge-freeze-module-unknown/good_vlm_7b_freeze_schedule.toml"),
    Case("kf-freeze-stage-after-the-run", "kf", KF + "vlm_7b_freeze_schedule.toml",
         (Replace('{start_step = 20, specs = [{module = "adapter"', '{start_step = 40, specs = [{module = "adaptor"'),)),
    Case("kf-freeze-own-patterns", "kf", KF + "vlm_7b_freeze_schedule.toml",
         (Replace('arch = "cross_attention"\n', 'arch = "cross_attention"\nmodule_patterns = {adapter = ["adapter.*"], '
                                               'vision_encoder = ["vision_encoder.*"]}\n'),
          Replace('{start_step = 20, specs = [{module = "adapter"', '{start_step = 20, specs = [{module = "cross_attention"')),
         expect=frozenset({"ML860"})),
    # ---- KempnerForge: eval without a data source (ML316)
    Case("kf-eval-no-data", "kf", KF + "debug.toml", (Set("eval.enabled", "true", "ML316"),),
         expect=frozenset({"ML316"}), what="added [eval] enabled = true",
         fixture="ML316-eval-without-data/bad_debug.toml"),
    Case("kf-eval-hf-data", "kf", KF + "debug.toml",
         (Set("eval.hf_dataset_name", '"wikitext"'), Set("eval.enabled", "true")),
         what='added [eval] enabled = true, hf_dataset_name = "wikitext"',
         fixture="ML316-eval-without-data/good_debug.toml"),
    Case("kf-eval-source-removed", "kf", KF + "13b_24gpu_validation.toml",
         (Replace('hf_dataset_name = "wikitext"\n', ""),), expect=frozenset({"ML316"})),
    Case("kf-eval-empty-path", "kf", KF + "13b_24gpu_validation.toml",
         (Replace('hf_dataset_name = "wikitext"\n', 'dataset_path = ""\n'),), expect=frozenset({"ML316"})),
    Case("kf-eval-path", "kf", KF + "debug.toml",
         (Set("eval.dataset_path", '"/data/eval"'), Set("eval.enabled", "true"))),
    # ---- KempnerForge: launch-line overrides in the space form (ML317 refused, ML318 misread)
    Case("kf-space-int", "kf", KF + "7b.toml",
         (Replace("add --train.max_steps=50", "add --train.max_steps 50  # expect: ML317"),),
         expect=frozenset({"ML317"}), cli=("--train.max_steps", "50"),
         what="the quick-test override of train.max_steps written with a space instead of '='",
         fixture="ML317-space-form-override-refused/bad_7b.toml"),
    Case("kf-space-as-shipped", "kf", KF + "7b.toml", cli=("--train.max_steps=50",),
         fixture="ML317-space-form-override-refused/good_7b.toml"),
    Case("kf-space-tp", "kf", KF + "7b.toml",
         (Replace("scripts/train.py configs/train/7b.toml\n# Multi",
                  "scripts/train.py configs/train/7b.toml --distributed.tp 4\n# Multi"),),
         expect=frozenset({"ML317"}), cli=("--distributed.tp", "4")),
    Case("kf-space-enum", "kf", KF + "7b.toml",
         (Replace("add --train.max_steps=50", "add --distributed.pp_schedule gpipe"),),
         expect=frozenset({"ML317"}), cli=("--distributed.pp_schedule", "gpipe")),
    Case("kf-space-unknown-key", "kf", KF + "7b.toml",
         (Replace("add --train.max_steps=50", "add --distributed.tpp 4"),),
         expect=frozenset({"ML317"}), cli=("--distributed.tpp", "4")),
    Case("kf-space-str", "kf", KF + "vlm_7b.toml",
         (Replace("#   --data.hf_dataset_name=<dataset> --data.tokenizer_path=<tokenizer>",
                  "#   --data.hf_dataset_name <dataset> --data.tokenizer_path=<tokenizer>  # expect: ML318"),),
         cli=("--data.hf_dataset_name", "<dataset>", "--data.tokenizer_path=<tokenizer>"),
         what="the data.hf_dataset_name override written with a space instead of '='",
         fixture="ML318-space-form-override-misread/bad_vlm_7b.toml",
         extra={"misread": {"data.hf_dataset_name": "true"}}),
    Case("kf-space-str-as-shipped", "kf", KF + "vlm_7b.toml",
         cli=("--data.hf_dataset_name=<dataset>", "--data.tokenizer_path=<tokenizer>"),
         fixture="ML318-space-form-override-misread/good_vlm_7b.toml"),
    Case("kf-space-bool", "kf", KF + "7b.toml",
         (Replace("scripts/train.py configs/train/7b.toml\n# Multi",
                  "scripts/train.py configs/train/7b.toml --train.compile_model false\n# Multi"),),
         cli=("--train.compile_model", "false"), extra={"misread": {"train.compile_model": True}}),
    Case("kf-space-bool-true", "kf", KF + "debug.toml",
         (Replace("[model]", "# torchrun --nproc_per_node=2 scripts/train.py configs/train/debug.toml "
                             "--train.compile_model true\n[model]"),),
         cli=("--train.compile_model", "true")),
    # ---- KempnerForge: sections the schema check (ML112) already covers
    Case("kf-vlm-no-encoder", "kf", KF + "vlm_debug.toml", (Drop("vision_encoder"),), expect=frozenset({"ML112"})),
    Case("kf-video-no-vlm", "kf", KF + "vlm_video_webvid.toml", (Drop("vlm"),), expect=frozenset({"ML112"})),
    # ---- KempnerForge: moe_expert_ffn_multiplier (sizes; its range is the schema check's)
    Case("kf-moe-mult-half", "kf", KF + "debug_moe.toml", (Set("model.moe_expert_ffn_multiplier", "0.5"),)),
    Case("kf-moe-mult-quarter", "kf", KF + "moe_24gpu.toml", (Set("model.moe_expert_ffn_multiplier", "0.25"),)),
    Case("kf-moe-mult-odd", "kf", KF + "moe_ep_32gpu.toml", (Set("model.moe_expert_ffn_multiplier", "0.37"),)),
    Case("kf-moe-mult-zero", "kf", KF + "debug_moe.toml", (Set("model.moe_expert_ffn_multiplier", "0.0"),),
         expect=frozenset({"ML112"})),
    Case("kf-moe-mult-dense", "kf", KF + "debug.toml", (Set("model.moe_expert_ffn_multiplier", "0.0"),)),
    # ---- torchtitan v0.2: DDP with tp or pp (ML404)
    Case("tt-ddp-tp", "tt", TTM + "llama3/train_configs/llama3_70b.toml",
         (Set(PAR + "data_parallel_replicate_degree", "2", "ML404"), Set(PAR + "data_parallel_shard_degree", "1")),
         world=16, expect=frozenset({"ML404"}),
         what="data_parallel_replicate_degree = 2, data_parallel_shard_degree = 1 (DDP) with its tp 8, on 16 GPUs",
         fixture="ML404-ddp-with-tp-or-pp/bad_llama3_70b.toml"),
    Case("tt-ddp-alone", "tt", TTM + "llama3/train_configs/debug_model.toml",
         (Set(PAR + "data_parallel_replicate_degree", "2"), Set(PAR + "data_parallel_shard_degree", "1")), world=2,
         what="data_parallel_replicate_degree = 2, data_parallel_shard_degree = 1 (DDP alone), on 2 GPUs",
         fixture="ML404-ddp-with-tp-or-pp/good_llama3_debug.toml"),
    Case("tt-ddp-pp", "tt", TTM + "llama3/train_configs/debug_model.toml",
         (Set(PAR + "data_parallel_replicate_degree", "2"), Set(PAR + "data_parallel_shard_degree", "1"),
          Set(PAR + "pipeline_parallel_degree", "2")), world=4, expect=frozenset({"ML404"})),
    Case("tt-ddp-tp-llama4", "tt", TTM + "llama4/train_configs/debug_model.toml", TP2, world=4,
         expect=frozenset({"ML404"})),
    Case("tt-ddp-tp-llama3-ft", "tt", TTM + "llama3_ft/train_configs/debug_model.toml", TP2, world=4,
         expect=frozenset({"ML404"})),
    Case("tt-ddp-tp-ep-llama4", "tt", TTM + "llama4/train_configs/debug_model.toml",
         TP2 + (Set(PAR + "expert_parallel_degree", "2"),), world=4, expect=frozenset({"ML405"})),
    # ---- torchtitan v0.2: expert parallelism without an fsdp dimension (ML405)
    Case("tt-ep-no-fsdp-llama4", "tt", TTM + "llama4/train_configs/debug_model.toml",
         (Set(PAR + "data_parallel_shard_degree", "1"), Set(PAR + "tensor_parallel_degree", "2"),
          Set(PAR + "expert_parallel_degree", "2", "ML405")), world=2, expect=frozenset({"ML405"}),
         what="data_parallel_shard_degree = 1, tensor_parallel_degree = 2, expert_parallel_degree = 2, on 2 GPUs",
         fixture="ML405-ep-without-fsdp/bad_llama4_debug.toml"),
    Case("tt-ep-fsdp-llama4", "tt", TTM + "llama4/train_configs/debug_model.toml",
         (Set(PAR + "data_parallel_shard_degree", "2"), Set(PAR + "tensor_parallel_degree", "2"),
          Set(PAR + "expert_parallel_degree", "2")), world=4,
         what="data_parallel_shard_degree = 2, tensor_parallel_degree = 2, expert_parallel_degree = 2, on 4 GPUs",
         fixture="ML405-ep-without-fsdp/good_llama4_debug.toml"),
    Case("tt-ep-no-fsdp-deepseek", "tt", TTM + "deepseek_v3/train_configs/debug_model.toml",
         (Set(PAR + "data_parallel_shard_degree", "1"), Set(PAR + "tensor_parallel_degree", "2"),
          Set(PAR + "expert_parallel_degree", "2")), world=2, expect=frozenset({"ML405"})),
    Case("tt-ep-no-fsdp-gpt-oss", "tt", TTM + "gpt_oss/train_configs/debug_model.toml",
         (Set(PAR + "data_parallel_shard_degree", "1"), Set(PAR + "tensor_parallel_degree", "2"),
          Set(PAR + "expert_parallel_degree", "2")), world=2, expect=frozenset({"ML405"})),
    Case("tt-ep-no-fsdp-qwen3-moe", "tt", TTM + "qwen3/train_configs/qwen3_moe_debug.toml",
         (Set(PAR + "data_parallel_shard_degree", "1"), Set(PAR + "tensor_parallel_degree", "2"),
          Set(PAR + "expert_parallel_degree", "2")), world=2),
    Case("tt-ep-cp-llama4", "tt", TTM + "llama4/train_configs/debug_model.toml",
         (Set(PAR + "data_parallel_shard_degree", "1"), Set(PAR + "context_parallel_degree", "2"),
          Set(PAR + "expert_parallel_degree", "2")), world=2),
    Case("tt-ddp-tp-ep-llama3", "tt", TTM + "llama3/train_configs/debug_model.toml",
         TP2 + (Set(PAR + "expert_parallel_degree", "2"),), world=4, expect=frozenset({"ML404"})),
    Case("tt-ddp-tp-qwen3", "tt", TTM + "qwen3/train_configs/qwen3_0.6b.toml", TP2, world=4),
    Case("tt-ddp-tp-deepseek", "tt", TTM + "deepseek_v3/train_configs/debug_model.toml", TP2, world=4),
    Case("tt-ddp-tp-gpt-oss", "tt", TTM + "gpt_oss/train_configs/debug_model.toml", TP2, world=4),
    Case("tt-ddp-tp-flux", "tt", TTM + "flux/train_configs/debug_model.toml", TP2, world=4),
    Case("tt-hsdp-tp", "tt", TTM + "llama3/train_configs/llama3_70b.toml",
         (Set(PAR + "data_parallel_replicate_degree", "2"), Set(PAR + "data_parallel_shard_degree", "2")), world=32),
    # ---- torchtitan v0.2: pipelining a model without a pipelining function (ML613)
    Case("tt-pp-qwen3", "tt", TTM + "qwen3/train_configs/qwen3_0.6b.toml",
         (Set(PAR + "pipeline_parallel_degree", "2", "ML613"),), world=8, expect=frozenset({"ML613"}),
         what="pipeline_parallel_degree = 2, on 8 GPUs",
         fixture="ML613-pipeline-unsupported-by-model/bad_qwen3_0.6b.toml"),
    Case("tt-pp-llama3", "tt", TTM + "llama3/train_configs/debug_model.toml",
         (Set(PAR + "pipeline_parallel_degree", "2"),), world=8, what="pipeline_parallel_degree = 2, on 8 GPUs",
         fixture="ML613-pipeline-unsupported-by-model/good_llama3_debug.toml"),
    Case("tt-pp-gpt-oss", "tt", TTM + "gpt_oss/train_configs/debug_model.toml",
         (Set(PAR + "pipeline_parallel_degree", "2"),), world=8, expect=frozenset({"ML613"})),
    Case("tt-pp-flux", "tt", TTM + "flux/train_configs/debug_model.toml",
         (Set(PAR + "pipeline_parallel_degree", "2"),), world=8, expect=frozenset({"ML613"})),
    Case("tt-pp-vlm", "tt", "torchtitan/experiments/vlm/train_configs/debug_model.toml",
         (Set(PAR + "pipeline_parallel_degree", "2"),), world=8, expect=frozenset({"ML613"})),
    Case("tt-pp-deepseek", "tt", TTM + "deepseek_v3/train_configs/debug_model.toml",
         (Set(PAR + "pipeline_parallel_degree", "2"),), world=8),
    # ---- torchtitan v0.2: seq_len % (tp * 2 * cp) with cp = 1 (ML614; cp > 1 is ML609)
    Case("tt-seq-odd", "tt", TTM + "llama3/train_configs/llama3_8b.toml", (Set("training.seq_len", "8191", "ML614"),),
         world=8, expect=frozenset({"ML614"}), what="[training] seq_len = 8191, on 8 GPUs (pure FSDP)",
         fixture="ML614-seq-len-indivisible-without-cp/bad_llama3_8b.toml"),
    Case("tt-seq-as-shipped", "tt", TTM + "llama3/train_configs/llama3_8b.toml", world=8,
         what="none (as shipped), on 8 GPUs", fixture="ML614-seq-len-indivisible-without-cp/good_llama3_8b.toml"),
    Case("tt-seq-odd-qwen3", "tt", TTM + "qwen3/train_configs/qwen3_0.6b.toml", (Set("training.seq_len", "4095"),),
         world=8, expect=frozenset({"ML614"})),
    Case("tt-seq-odd-deepseek", "tt", TTM + "deepseek_v3/train_configs/debug_model.toml",
         (Set("training.seq_len", "2047"),), world=8, expect=frozenset({"ML614"})),
    Case("tt-seq-odd-gpt-oss", "tt", TTM + "gpt_oss/train_configs/debug_model.toml", (Set("training.seq_len", "2047"),),
         world=8, expect=frozenset({"ML614"})),
    Case("tt-seq-odd-llama4", "tt", TTM + "llama4/train_configs/debug_model.toml", (Set("training.seq_len", "2047"),),
         world=8, expect=frozenset({"ML614"})),
    Case("tt-seq-odd-llama3-ft", "tt", TTM + "llama3_ft/train_configs/debug_model.toml",
         (Set("training.seq_len", "2047"),), world=8, expect=frozenset({"ML614"})),
    Case("tt-seq-odd-vlm", "tt", "torchtitan/experiments/vlm/train_configs/debug_model.toml",
         (Set("training.seq_len", "4095"),), world=8, expect=frozenset({"ML614"})),
    Case("tt-seq-tp2", "tt", TTM + "llama3/train_configs/debug_model.toml",
         (Set(PAR + "tensor_parallel_degree", "2"), Set("training.seq_len", "2050")), world=8,
         expect=frozenset({"ML614"})),
    Case("tt-seq-tp2-fits", "tt", TTM + "llama3/train_configs/debug_model.toml",
         (Set(PAR + "tensor_parallel_degree", "2"), Set("training.seq_len", "2052")), world=8),
    Case("tt-seq-odd-flux", "tt", TTM + "flux/train_configs/debug_model.toml", (Set("training.seq_len", "2047"),),
         world=8),
    Case("tt-seq-cp2", "tt", TTM + "llama3/train_configs/debug_model.toml",
         (Set(PAR + "context_parallel_degree", "2"), Set("training.seq_len", "2050")), world=8,
         expect=frozenset({"ML609"})),
]


def _sweep() -> list:
    """Plain degree edits a new user tries, on each debug-size config: checked the same way, for misses of any rule."""
    tt = {"llama3": "llama3/train_configs/debug_model.toml", "llama4": "llama4/train_configs/debug_model.toml",
          "qwen3": "qwen3/train_configs/qwen3_0.6b.toml", "qwen3-moe": "qwen3/train_configs/qwen3_moe_debug.toml",
          "deepseek": "deepseek_v3/train_configs/debug_model.toml", "gpt-oss": "gpt_oss/train_configs/debug_model.toml",
          "flux": "flux/train_configs/debug_model.toml", "llama3-8b": "llama3/train_configs/llama3_8b.toml"}
    degrees = {"tp2": ({"tensor_parallel_degree": 2}, 8), "tp4": ({"tensor_parallel_degree": 4}, 8),
               "tp3": ({"tensor_parallel_degree": 3}, 6), "cp2": ({"context_parallel_degree": 2}, 8),
               "pp2": ({"pipeline_parallel_degree": 2}, 8), "rep2": ({"data_parallel_replicate_degree": 2}, 8),
               "ep2": ({"expert_parallel_degree": 2}, 8),
               "ep4tp2": ({"expert_parallel_degree": 4, "tensor_parallel_degree": 2}, 8),
               "cp2tp2": ({"context_parallel_degree": 2, "tensor_parallel_degree": 2}, 8),
               "hsdp-tp2": ({"data_parallel_shard_degree": 2, "data_parallel_replicate_degree": 2,
                             "tensor_parallel_degree": 2}, 8)}
    if not LONG:  # each torchtitan case builds the model and parallelizes it: the suite takes a spread of them
        degrees = {d: degrees[d] for d in ("tp3", "cp2", "pp2", "ep4tp2", "cp2tp2", "hsdp-tp2")}
    out = [Case(f"sweep-tt-{m}-{d}", "tt", TTM + base, tuple(Set(PAR + k, str(v)) for k, v in kv.items()), world=w)
           for m, base in tt.items() for d, (kv, w) in degrees.items()]
    kf = ("debug", "debug_moe", "7b", "vlm_debug", "vlm_debug_moe", "vlm_debug_moma", "moe_24gpu", "hf_wikitext")
    kdegrees = {"tp2": {"tp": 2}, "tp3": {"tp": 3}, "pp2": {"pp": 2}, "ep2": {"ep": 2}, "ep4": {"ep": 4},
                "cp2": {"cp": 2}, "rep2": {"dp_replicate": 2}}
    out += [Case(f"sweep-kf-{b}-{d}", "kf", KF + b + ".toml",
                 tuple(Set("distributed." + k, str(v)) for k, v in kv.items()))
            for b in kf for d, kv in kdegrees.items()]
    return out


# MESHLINT_LONG=1 (the long run) sweeps every degree edit on every torchtitan config; the suite a spread
LONG = os.environ.get("MESHLINT_LONG", "") not in ("", "0")
SWEEP = _sweep()
# Where the sweep and the framework run disagree, and why (the test fails unless these are exactly the
# disagreements). gpt_oss refusing cp (models/gpt_oss/model/args.py:89-92) is ML809 now.
KF_PP_BUILD = ("the worker stops at validate; KempnerForge builds its 1F1B schedule (1 microbatch on 2 stages: "
               "ML605) with the model")
KF_CP_OUTSIDE = ("the worker stops at validate, which counts cp in the world; KempnerForge's DeviceMesh has no cp dim and "
                 "leaves world / cp ranks outside it, which crash in build_parallel_model (ML321)")
SWEEP_KNOWN = {"sweep-kf-debug-pp2": KF_PP_BUILD, "sweep-kf-hf_wikitext-pp2": KF_PP_BUILD,
               **{f"sweep-kf-{b}-cp2": KF_CP_OUTSIDE for b in ("debug", "debug_moe", "7b", "vlm_debug", "vlm_debug_moe",
                                                               "vlm_debug_moma", "hf_wikitext")}}
BY_ID = {c.id: c for c in CASES + SWEEP}
assert len(BY_ID) == len(CASES) + len(SWEEP)


def kf_world(case: Case) -> int:
    """The world a KempnerForge case runs on: the file name's ``_<N>gpu``, else dp_shard (or 2) times the rest."""
    match = re.search(r"_([0-9]+)gpu", case.base)
    if match:
        return int(match.group(1))
    d = tomllib.loads(case.text()).get("distributed", {})
    others = 1
    for name in ("dp_replicate", "tp", "pp", "cp", "ep"):
        value = d.get(name, 1)
        others *= value if isinstance(value, int) and value > 0 else 1
    shard = d.get("dp_shard", -1)
    return others * (shard if isinstance(shard, int) and shard > 0 else 2)


def world_of(case: Case) -> int:
    return case.world if case.fw == "tt" else kf_world(case)


def unedited_cases() -> list:
    out = []
    if KF_ROOT.is_dir():
        out += [Case(f"kf:{p.name}", "kf", KF + p.name) for p in sorted((KF_ROOT / "configs" / "train").glob("*.toml"))]
    if TT_ROOT.is_dir():
        for p in sorted(TT_ROOT.glob("torchtitan/**/train_configs/*.toml")):
            world = 32 if p.name == "llama4_17bx128e.toml" else 8  # tp 8 x pp 4; the others: run_train.sh's NGPU
            out.append(Case(f"tt:{p.relative_to(TT_ROOT)}", "tt", str(p.relative_to(TT_ROOT)), world=world))
    return out


# ----------------------------------------------------------------------------- meshlint's side

def meshlint_findings(path: Path, world: int) -> list:
    from meshlint.engine.check import Options, check_file
    from meshlint.engine.ruleset import load_rules
    from meshlint.mesh.topology import CliTopology

    # what the framework refuses at config time, compared with meshlint's errors: the whole-peak memory
    # (ML504) is physics, not a refusal, so GPUs are taken as large enough (as tests/test_rule_fixtures.py does)
    report = check_file(str(path), Options(rules=load_rules(), topology=CliTopology(world_size=world),
                                           gpu_memory_gib=1e9))
    assert report.status == "checked", report.error
    return report.findings


def errors(findings) -> set:
    return {f.code for f in findings if f.severity == "error"}


# ----------------------------------------------------------------------------- the frameworks' side (subprocesses)

def start_worker(kind: str, cases: list, tmp: Path):
    """Start the framework's own code on ``cases`` in a subprocess; ``finish_worker`` collects its verdicts."""
    root = KF_ROOT if kind == "kf" else TT_ROOT
    if not root.is_dir():
        return f"{root} is not here (../shared/frameworks)"
    jobs = []
    for case in cases:
        path = tmp / f"{case.id.replace(':', '_').replace('/', '_')}.toml"
        path.write_text(case.text())
        jobs.append({"id": case.id, "path": str(path), "world": world_of(case), "cli": list(case.cli)})
    (tmp / f"{kind}-jobs.json").write_text(json.dumps(jobs))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with open(tmp / f"{kind}-jobs.json") as stdin:
        return subprocess.Popen([sys.executable, __file__, f"--{kind}-worker", str(root)], stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(tmp))


def finish_worker(kind: str, proc) -> dict | str:
    """{case id: {"refused": bool | None, "error": str | None, ...}}, or why the framework cannot run here."""
    if isinstance(proc, str):
        return proc
    try:
        stdout, stderr = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if "SKIP:" in stdout:
        return stdout.split("SKIP:", 1)[1].strip()
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"{kind} worker failed ({proc.returncode}):\n{(stderr or stdout)[-1500:]}")
    return json.loads(lines[-1])


def kf_worker(root: str) -> None:
    sys.path.insert(0, root)
    try:
        import torch
        from kempnerforge.config.loader import load_config
    except Exception as exc:  # noqa: BLE001 - report why, and skip
        print(f"SKIP: KempnerForge cannot be imported here: {type(exc).__name__}: {exc}")
        return
    import logging

    logging.disable(logging.WARNING)
    out = {}
    for job in json.load(sys.stdin):
        result = {"refused": False, "error": None, "stage": None}
        try:
            result["stage"] = "load_config"
            config = load_config(job["path"], cli_args=job["cli"])
            result["values"] = {"data.hf_dataset_name": config.data.hf_dataset_name,
                                "train.compile_model": config.train.compile_model}
            m = config.model
            result["params"] = m.num_params_estimate
            result["expert_hidden"] = m.computed_expert_ffn_hidden_dim if m.is_moe else None
            result["stage"] = "validate"
            config.validate(job["world"])
            if config.vlm is not None and config.vision_encoder.type == "random":
                from kempnerforge.model.vlm import build_vlm_wrapper

                result["stage"] = "build_vlm_wrapper"
                frames = config.video.max_frames if config.video is not None else 1
                with torch.device("meta"):
                    build_vlm_wrapper(config.model, config.vision_encoder, config.adapter, config.vlm, frames)
            result["stage"] = "scripts/train.py"
            kf_train_checks(config)
            result["stage"] = "done"
        except ModuleNotFoundError as exc:  # a package this machine lacks: not a verdict
            result.update(refused=None, missing=exc.name)
        except Exception as exc:  # noqa: BLE001 - the framework's refusal is the result
            result.update(refused=True, error=f"{type(exc).__name__}: {exc}"[:400])
        out[job["id"]] = result
    print(json.dumps(out))


def kf_train_checks(config) -> None:
    """scripts/train.py's checks that config values reach without data, GPUs or a process group, called the way
    train.py calls them: the VLM dataset's keys (:294-318), the anneal shortcut's TrainingPhase (:599-611), the
    mixture sampler's weight switches at each data phase (:356-405, :903-918, after the step that reaches
    start_step), and the freeze state it records after every step (:1016-1024), for steps 1..train.max_steps."""
    from kempnerforge.config.schema import TrainingPhase
    from kempnerforge.data.sampler import MixtureSampler
    from kempnerforge.training.freeze import effective_freeze

    data, max_steps = config.data, config.train.max_steps
    if config.vlm is not None:
        if config.video is not None:
            if not data.tokenizer_path:
                raise ValueError("Video training requires data.tokenizer_path")
        elif not data.hf_dataset_name or not data.tokenizer_path:
            raise ValueError("VLM training requires data.hf_dataset_name and data.tokenizer_path")
    if data.phases:
        phases = sorted(data.phases, key=lambda p: p.start_step)
    elif data.anneal_start_step > 0 and data.anneal_weights:
        phases = [TrainingPhase(start_step=data.anneal_start_step, dataset_weights=dict(data.anneal_weights))]
    else:
        phases = []
    if config.vlm is None and data.datasets:
        sources = [s for s in data.datasets if s.path or s.hf_name]
        names = [s.name or s.path or s.hf_name for s in sources]
        weights = {n: s.weight for n, s in zip(names, sources)}
        sampler = MixtureSampler(cumulative_sizes=[10 * i for i in range(len(names) + 1)],
                                 weights=[s.weight for s in sources], num_replicas=1, rank=0,
                                 temperature=data.mix_temperature)
        for phase in phases:
            if max(phase.start_step, 1) <= max_steps:
                sampler.update_weights([phase.dataset_weights.get(n, weights[n]) for n in names],
                                       temperature=data.mix_temperature)
    if config.vlm is not None and max_steps >= 1:
        vlm = config.vlm
        steps = {1} | {s.start_step for s in vlm.freeze_schedule if 1 <= s.start_step <= max_steps}
        for step in sorted(steps):
            effective_freeze(step, vlm.freeze, vlm.freeze_schedule, set(vlm.module_patterns.keys()))


def tt_worker(root: str) -> None:
    from meshlint.smoke.tt_import import import_torchtitan_v02

    imported = import_torchtitan_v02(root)
    if isinstance(imported, str):
        print(f"SKIP: {imported}")
        return
    stood_in, pdm, ConfigManager, get_train_spec = imported
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import logging

    logging.disable(logging.WARNING)
    pdm.device_type = "cpu"
    out = {}
    for job in json.load(sys.stdin):
        result = {"refused": False, "error": None, "stage": None, "stood_in": sorted(stood_in)}
        try:
            result["stage"] = "ConfigManager.parse_args"
            jc = ConfigManager().parse_args(["--job.config_file", job["path"]])
            p = jc.parallelism
            if dist.is_initialized():
                dist.destroy_process_group()
            dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=job["world"])
            result["stage"] = "ParallelDims"
            dims = pdm.ParallelDims(dp_shard=p.data_parallel_shard_degree,
                                    dp_replicate=p.data_parallel_replicate_degree,
                                    cp=p.context_parallel_degree, tp=p.tensor_parallel_degree,
                                    pp=p.pipeline_parallel_degree, ep=p.expert_parallel_degree,
                                    etp=p.expert_tensor_parallel_degree, world_size=job["world"])
            dims.build_mesh()
            train_spec = get_train_spec(jc.model.name)
            result["stage"] = "Trainer.__init__ pipelining test"
            if dims.pp_enabled and not train_spec.pipelining_fn:  # train.py:218-222, as written there
                raise RuntimeError(f"Pipeline Parallel is enabled but {jc.model.name} does not support pipelining")
            args = train_spec.model_args[jc.model.flavor]
            args.update_from_config(jc)
            with torch.device("meta"):
                model = train_spec.model_cls(args)
            if dims.pp_enabled:
                result["stage"] = "pipelining_fn"
                loss = train_spec.build_loss_fn(jc) if train_spec.build_loss_fn else None
                train_spec.pipelining_fn(model, dims, jc, torch.device("cpu"), args, train_spec.parallelize_fn, loss)
            else:
                result["stage"] = "parallelize_fn"
                train_spec.parallelize_fn(model, dims, jc)
            result["stage"] = "done"
        except ModuleNotFoundError as exc:  # a package this machine lacks (torchao for float8): not a verdict
            result.update(refused=None, missing=exc.name)
        except BaseException as exc:  # noqa: BLE001 - AssertionError included: the framework's refusal
            if isinstance(exc, KeyboardInterrupt):
                raise
            result.update(refused=True, error=f"{type(exc).__name__}: {exc}".strip()[:400])
        out[job["id"]] = result
    print(json.dumps(out))


# ----------------------------------------------------------------------------- the tests

@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """Both frameworks' verdicts on every case and every unedited config (one subprocess per framework)."""
    tmp = tmp_path_factory.mktemp("misses")
    everything = CASES + SWEEP + unedited_cases()
    procs = {kind: start_worker(kind, [c for c in everything if c.fw == kind], tmp) for kind in ("kf", "tt")}
    return {kind: finish_worker(kind, proc) for kind, proc in procs.items()}, tmp


def _framework(verdicts, case: Case) -> dict:
    found, _ = verdicts
    result = found[case.fw]
    if isinstance(result, str):
        pytest.skip(result)
    if result[case.id]["refused"] is None:
        pytest.skip(f"the framework needs {result[case.id]['missing']}, which is not installed here")
    return result[case.id]


_FINDINGS: dict = {}


def _meshlint(case: Case, tmp: Path) -> list:
    if case.id not in _FINDINGS:  # several tests ask about the same case
        path = tmp / f"meshlint_{case.id.replace(':', '_').replace('/', '_')}.toml"
        path.write_text(case.text())
        _FINDINGS[case.id] = meshlint_findings(path, world_of(case))
    return _FINDINGS[case.id]


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_meshlint_errors_exactly_when_the_framework_refuses(case_id, verdicts):
    case = BY_ID[case_id]
    framework = _framework(verdicts, case)
    findings = _meshlint(case, verdicts[1])
    found = errors(findings)
    shown = "\n".join(f"{f.line}: {f.code} [{f.severity}] {f.message}" for f in findings)
    assert bool(found) == framework["refused"], f"framework: {framework}\nmeshlint:\n{shown}"
    assert case.expect <= found, f"expected {sorted(case.expect)}; meshlint:\n{shown}\nframework: {framework}"
    assert bool(case.expect) == framework["refused"], f"the case's own expectation is wrong: {framework}"


@pytest.mark.parametrize("case", unedited_cases(), ids=lambda c: c.id)
def test_unedited_configs_agree_and_get_no_new_error(case, verdicts):
    framework = _framework(verdicts, case)
    findings = _meshlint(case, verdicts[1])
    assert not (errors(findings) & NEW_CODES), [f.message for f in findings if f.code in NEW_CODES]
    assert not {f.code for f in findings if f.code in NEW_CODES}
    assert bool(errors(findings)) == framework["refused"], (framework, [(f.code, f.message) for f in findings])


def test_degree_sweep_disagrees_only_where_known(verdicts):
    found, tmp = verdicts
    disagree = {}
    for case in SWEEP:
        result = found[case.fw]
        if isinstance(result, str) or result[case.id]["refused"] is None:
            continue
        if bool(errors(_meshlint(case, tmp))) != result[case.id]["refused"]:
            disagree[case.id] = result[case.id]["error"]
    if all(isinstance(found[k], str) for k in ("kf", "tt")):
        pytest.skip("neither framework can run here")
    known = {k for k in SWEEP_KNOWN if not isinstance(found[BY_ID[k].fw], str)}
    assert set(disagree) == known, disagree


def test_misread_space_overrides_are_what_kempnerforge_runs_with(verdicts):
    for case in CASES:
        if case.fw == "kf" and "misread" in case.extra:
            framework = _framework(verdicts, case)
            assert not framework["refused"], framework
            for key, value in case.extra["misread"].items():
                assert framework["values"][key] == value, (case.id, framework["values"])
            findings = _meshlint(case, verdicts[1])
            assert "ML318" in {f.code for f in findings}, [f.message for f in findings]


def test_moe_sizes_match_kempnerforge(verdicts):
    """model.params and the experts' width equal KempnerForge's own num_params_estimate and
    computed_expert_ffn_hidden_dim, on every config it loads (moe_expert_ffn_multiplier edits included)."""
    from meshlint.frameworks.kempnerforge import v5666d0d as kempnerforge
    from meshlint.inputs.source import read_source

    checked = 0
    for case in CASES + unedited_cases():
        if case.fw != "kf":
            continue
        framework = _framework(verdicts, case)
        if "params" not in framework:
            continue
        path = verdicts[1] / f"sizes_{case.id.replace(':', '_')}.toml"
        path.write_text(case.text())
        values = kempnerforge.read(read_source(str(path))).values
        assert values["model.params"] == framework["params"], case.id
        if framework["expert_hidden"] is not None:
            assert values["model.moe_hidden_dim"] == framework["expert_hidden"], case.id
        checked += 1
    assert checked >= 40


def test_corpus_counts(verdicts, capsys):
    """The numbers of the closing note: edits tried, refused by the framework, meshlint errors, agreement."""
    found, tmp = verdicts
    rows = []
    groups = (("targeted edits", CASES), ("degree sweep", SWEEP), ("unedited", unedited_cases()))
    for name, cases in groups:
        for case in cases:
            if isinstance(found[case.fw], str):
                continue
            refused = found[case.fw][case.id]["refused"]
            if refused is None:  # a package the framework needs is missing here
                continue
            rows.append((name, case.fw, refused, bool(errors(_meshlint(case, tmp))), case.id in SWEEP_KNOWN))
    if not rows:
        pytest.skip("neither framework can run here")
    for name, _ in groups:
        for fw in ("kf", "tt"):
            part = [r for r in rows if r[0] == name and r[1] == fw]
            print(f"{name} {fw}: {len(part)} configs, framework refuses {sum(r[2] for r in part)}, meshlint errors on "
                  f"{sum(r[3] for r in part)}, agree on {sum(r[2] == r[3] for r in part)}")
    assert all(r[2] == r[3] or r[4] for r in rows)


@pytest.mark.parametrize("case", [c for c in CASES if c.fixture], ids=lambda c: c.id)
def test_fixtures_are_these_edits_of_the_real_configs(case):
    if not case.root.is_dir():
        pytest.skip(f"{case.root} is not here")
    path = FIXTURES / case.fixture
    assert path.read_text() == case.fixture_text(), f"regenerate: python tests/test_misses.py --write-fixtures"


def test_space_form_scanner_reads_only_launch_words():
    from meshlint.frameworks.kempnerforge.v5666d0d import space_overrides

    comments = [(1, 1, " set --distributed.tp to 4 for the big model"),
                (2, 1, " torchrun --nproc_per_node=4 scripts/train.py c.toml --distributed.tp=4"),
                (3, 1, " --train.compile_model \\"), (4, 1, " continues here"),
                (5, 1, " add --train.max_steps 50"),
                (6, 1, " srun python scripts/train.py c.toml --train.compile_model true --checkpoint.dir out/x")]
    found = [(i["line"], i["key"], i["refused"]) for i in space_overrides(comments)]
    assert found == [(5, "train.max_steps", True), (6, "checkpoint.dir", False)]


def test_launch_overrides_in_comments():
    from meshlint.frameworks.kempnerforge.v5666d0d import equals_overrides

    comments = [(1, 1, " uv run python scripts/train.py configs/train/vlm_debug.toml \\"),
                (2, 1, "     --data.hf_dataset_name=... --data.tokenizer_path=gpt2"),
                (3, 1, " torchrun --nproc_per_node=4 scripts/train.py c.toml --train.max_steps=50 --foo.bar=1"),
                (4, 1, " set --distributed.tp 4 (the space form is ML317's)")]
    found = [(i["line"], i["key"], i["value"]) for i in equals_overrides(comments)]
    assert found == [(2, "data.hf_dataset_name", "..."), (2, "data.tokenizer_path", "gpt2"), (3, "train.max_steps", "50")]


def write_fixtures() -> None:
    for case in CASES:
        if case.fixture:
            path = FIXTURES / case.fixture
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(case.fixture_text())
            print("wrote", path.relative_to(ROOT))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write-fixtures"]:
        write_fixtures()
    elif sys.argv[1:2] == ["--kf-worker"]:
        kf_worker(sys.argv[2])
    elif sys.argv[1:2] == ["--tt-worker"]:
        tt_worker(sys.argv[2])
