"""The whole-peak memory of Megatron-Bridge recipes: the recipe's own optimizer, DDP, mixed-precision and provider
fields read (meshlint/inputs/bridge_recipe.py memory_dests), the estimate equal to the Megatron-LM launch with the
same settings, and - where the Bridge mirror is present - no ML504/ML505 on the shipped recipes at their worlds
except the one that really does not fit."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from meshlint.frameworks.megatron import core_0_16
from meshlint.inputs import bridge_recipe as bridge
from tests.test_megatron_bridge import _tree

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "megatron_bridge"
RECIPES = FIX / "checkout/src/megatron/bridge/recipes/memory_recipes.py"


def _run(targets, *extra) -> list:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(FIX / "hf")}
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", *map(str, targets), "--format", "json", *extra],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return json.loads(proc.stdout)["files"]


def _args(function: str) -> dict:
    (source,) = bridge.recipe_sources(str(RECIPES), function)
    return core_0_16.read(source).extra["args"]


@pytest.fixture(scope="module")
def checked() -> dict:
    return {f["path"].split("::")[1]: f for f in _run([RECIPES], "--world-size", "16")}


def test_precision_optimizer_and_recompute_come_from_the_recipe():
    a = _args("llama3_8b_memory_config")   # mixed_precision="bf16_mixed": the checkout's @register'd function
    assert (a["bf16"], a["fp16"], a["use_distributed_optimizer"], a["grad_reduce_in_bf16"]) == \
        (True, False, True, False)
    assert (a["swiglu"], a["normalization"], a["untie_embeddings_and_output_weights"], a["add_bias_linear"]) == \
        (True, "RMSNorm", True, False)          # Llama3ModelProvider8B's own defaults (the provider table)
    assert a["padded_vocab_size"] == 128256 and a["hidden_dropout"] == 0.0 and a["recompute_granularity"] is None
    assert not _args("llama3_8b_memory_plain_config")["use_distributed_optimizer"]
    assert _args("llama3_8b_memory_fp32_config")["bf16"] is False   # no MixedPrecisionConfig: Megatron-Core's fp32
    # the mixed-precision config's grad_reduce_in_fp32 overrides the DDP config's
    # (mixed_precision.py update_config_with_precision_overrides)
    assert _args("llama3_8b_memory_bf16_reduce_config")["grad_reduce_in_bf16"] is True
    r = _args("llama3_8b_memory_recompute_config")
    assert (r["recompute_granularity"], r["recompute_method"], r["recompute_num_layers"]) == ("full", "uniform", 1)


def test_memory_dests_combine_as_bridge_does():
    base = {"bridge.model.bf16": False, "bridge.ddp.grad_reduce_in_fp32": False,
            "bridge.optimizer.use_distributed_optimizer": False, "bridge.ddp.use_distributed_optimizer": True,
            "bridge.mixed_precision.bf16": True, "bridge.mixed_precision.fp16": False,
            "bridge.mixed_precision.grad_reduce_in_fp32": True, "bridge.model.vocab_size": 1000,
            "bridge.model.should_pad_vocab": True, "bridge.model.make_vocab_size_divisible_by": 128,
            "tensor_model_parallel_size": 4}
    out = bridge.memory_dests(base)
    assert out["use_distributed_optimizer"] is True        # config.py: either switch turns both on
    assert out["bf16"] is True and out["grad_reduce_in_bf16"] is False
    assert out["padded_vocab_size"] == 1024                # should_pad_vocab: a multiple of 128 x tp 4
    assert bridge.memory_dests({**base, "bridge.model.should_pad_vocab": False})["padded_vocab_size"] == 1000
    no_mp = {k: v for k, v in base.items() if not k.startswith("bridge.mixed_precision.")}
    assert bridge.memory_dests(no_mp)["bf16"] is False and bridge.memory_dests(no_mp)["grad_reduce_in_bf16"] is False
    assert bridge.memory_dests({**base, "bridge.model.vocab_size": None})["tokenizer_type"] == "bridge"


def test_peak_follows_the_recipe(checked):
    t = {name: f["memory"]["terms"] for name, f in checked.items() if f["memory"]}
    dist, plain = t["llama3_8b_memory_config"], t["llama3_8b_memory_plain_config"]
    assert plain["optimizer"] == pytest.approx(4 * dist["optimizer"], rel=1e-3)   # dp 4 shards the Adam moments
    assert t["llama3_8b_memory_recompute_config"]["activations"] < dist["activations"] / 10
    assert t["llama3_8b_memory_fp32_config"]["params"] == pytest.approx(2 * dist["params"], rel=1e-3)
    assert t["llama3_8b_memory_bf16_reduce_config"]["grads"] == pytest.approx(dist["grads"] / 2, rel=1e-3)
    assert [x["rule"] for x in checked["llama3_70b_memory_config"]["findings"] if x["severity"] == "error"] == ["ML504"]
    assert not [x for x in checked["llama3_8b_memory_config"]["findings"] if x["rule"] in ("ML504", "ML505")]
    none = checked["llama3_8b_no_optimizer_config"]
    assert none["memory"] is None
    assert any("the recipe sets no optimizer config" in n for n in none["notes"])


def test_estimate_equals_the_megatron_lm_launch_with_the_same_settings(checked, tmp_path):
    script = tmp_path / "llama3_8b.sh"
    script.write_text(
        "torchrun --nproc_per_node=8 --nnodes=2 pretrain_gpt.py --tensor-model-parallel-size 2 "
        "--pipeline-model-parallel-size 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 --swiglu --normalization RMSNorm "
        "--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope "
        "--hidden-dropout 0 --attention-dropout 0 --seq-length 8192 --max-position-embeddings 8192 "
        "--micro-batch-size 1 --global-batch-size 64 --bf16 --use-distributed-optimizer --vocab-size 128256 "
        "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1\n")
    (launch,) = _run([script])
    mine = checked["llama3_8b_memory_recompute_config"]["memory"]
    assert launch["memory"]["peak_gib"] == pytest.approx(mine["peak_gib"], rel=0.01)
    assert launch["memory"]["terms"].keys() == mine["terms"].keys()


def test_a_decorator_that_changes_the_function_is_not_followed(tmp_path):
    src = tmp_path / "src" / "megatron" / "bridge"
    (src / "training").mkdir(parents=True)
    (src / "recipes").mkdir()
    (src / "training" / "mixed_precision.py").write_text(
        "from megatron.bridge.training.config import MixedPrecisionConfig\n\n\ndef wrap(func):\n"
        "    return lambda: MixedPrecisionConfig(fp16=True)\n\n\n@wrap\ndef bf16_mixed():\n"
        "    return MixedPrecisionConfig(bf16=True)\n")
    recipe = src / "recipes" / "r.py"
    recipe.write_text(
        "from megatron.bridge.models.llama import Llama3ModelProvider8B\n"
        "from megatron.bridge.training.config import ConfigContainer, OptimizerConfig, TrainingConfig\n"
        "from megatron.bridge.training.mixed_precision import bf16_mixed\n\n\n"
        "def a_config() -> ConfigContainer:\n"
        "    return ConfigContainer(model=Llama3ModelProvider8B(), train=TrainingConfig(global_batch_size=8),\n"
        "                           optimizer=OptimizerConfig(), mixed_precision=bf16_mixed())\n")
    (source,) = bridge.recipe_sources(str(recipe), "a_config")
    assert "decorated by @wrap" in source.parsed.values["bridge_memory_unknown"]


# ----------------------------------------------------------------------------- the real recipes (when fetched)

def _at_own_world(src: Path) -> dict:
    """{recipe: (world, ML504/ML505 rules)} for each recipe whose world is known: the name's ``_NNgpu_``, else the
    smallest world of its degrees (dp 1: the most a GPU holds; the recipe runs at a multiple of it)."""
    files = sorted((src / "recipes").rglob("*.py")) + sorted((src / "perf_recipes").rglob("*.py"))
    groups: dict = {}
    for f in _run(files):
        if f["status"] != "checked":
            continue
        d, name = f["declared"], f["path"].split("::")[-1]
        named = re.search(r"_(\d+)gpu_", name)
        tp, pp, cp, ep, etp = (d.get(k) for k in ("tp", "pp", "cp", "ep", "etp"))
        if named:
            world = int(named.group(1))
        elif all(isinstance(v, int) for v in (tp, pp, cp, ep)):
            world = math.lcm(tp * pp * cp, (etp or tp) * ep * pp)
        else:
            continue
        groups.setdefault(world, []).append(f["path"])
    out = {}
    for world, targets in groups.items():
        for f in _run(targets, "--world-size", str(world)):
            out[f["path"].split("/megatron/bridge/", 1)[1]] = (
                world, f["memory"] is not None,
                sorted(x["rule"] for x in f["findings"] if x["rule"] in ("ML504", "ML505")))
    return out


# Gemma 3 1B at 32K tokens, micro batch 1, no recomputation, one H100: its MLP alone keeps 26 x 32768 x 3 x 6912
# bf16 values (33 GiB: fc1's gated output and the activation), the fused cross-entropy an fp32 copy of the
# 32768 x 262144 logits (32 GiB: megatron/core/fusions/fused_cross_entropy.py .float()) beside the bf16 ones (16 GiB)
# and the weights, gradients and Adam state 16.8 GiB: more than 80 GB before attention and norms are counted.
GEMMA3_1B = "only Gemma 3 1B at 32K tokens on one GPU, GPT-3 175B on 32 and Kimi K2 on 512 exceed 80 GB (see above)"
# GPT-3 175B (96 layers, h 12288: 174.0e9 parameters) at tp 4 x pp 8 on 32 GPUs is dp 1: each GPU holds 5.44e9
# parameters with bf16 weights and gradients (grad_reduce_in_fp32 False), fp32 main weights and Adam's two fp32
# moments, none of it sharded at dp 1: 16 bytes x 5.44e9 = 81 GiB before any activation. The recipe's own docstring
# says "64 nodes with 8 GPUs each" (512: dp 16), where it is sized at 79.7 GiB: no ML504 (ML505: near the 80).
GPT3_175B = (32, True, ["ML504"])
# Kimi K2 (1T, MLA, 384 experts, top-8) at tp 2 x pp 16 x ep 32 on 512 GPUs (its smallest world; edp 1), only core
# attention recomputed, Muon: each GPU keeps 2.45e9 parameters with bf16 weights, fp32 gradients, fp32 main weights
# and a momentum, unsharded (32 GiB), and 1F1B holds 16 microbatches of the first stage's 4 layers: per token each
# MoE layer saves 8 routed copies of the dispatched input and expert output (2 x 7168) and FC1's output and
# activation (3 x 2048), 327 KB per token, 671 MB per layer and microbatch at 4096 tokens over sp 2: 30 GiB for 3
# MoE layers x 16 microbatches before attention, norms and the allocator (peak 107 GiB). NVIDIA's own H100
# benchmark of this model (perf_recipes/kimi/h100/kimi_k2.py at 067f987df) runs tp 8, vp 2, ep 64 on 1024 GPUs and
# recomputes the MLP and MLA's up projections.
KIMI_K2 = (512, True, ["ML504"])


def test_shipped_recipes_at_v0_3_1_fit_at_their_worlds(tmp_path):
    got = _at_own_world(_tree("v0.3.1", tmp_path))
    assert len(got) == 160 and sum(1 for _, est, _ in got.values() if est) >= 6
    assert {k: v for k, v in got.items() if v[2]} == {
        "recipes/gemma/gemma3.py::gemma3_1b_pretrain_config": (1, True, ["ML504"]),
        "recipes/gpt/gpt3_175b.py::gpt3_175b_pretrain_config": GPT3_175B,
        "recipes/kimi/kimi_k2.py::kimi_k2_pretrain_config": KIMI_K2}, GEMMA3_1B


def test_shipped_recipes_at_067f987df_fit_at_their_worlds(tmp_path):
    got = _at_own_world(_tree("067f987df03b8355b03192d88d70f1709fedf51a", tmp_path))
    assert len(got) == 741 and sum(1 for _, est, _ in got.values() if est) >= 4
    assert {k: v for k, v in got.items() if v[2]} == {
        "recipes/gemma/h100/gemma3.py::gemma3_1b_pretrain_1gpu_h100_bf16_config": (1, True, ["ML504"]),
        "recipes/gpt/h100/gpt3_175b.py::gpt3_175b_pretrain_32gpu_h100_bf16_config": GPT3_175B}, GEMMA3_1B
