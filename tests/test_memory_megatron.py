"""The whole-peak memory of a Megatron-LM launch (meshlint/mesh/memory_megatron.py): its parameters against
Megatron-Core's own GPTModel, its terms against Korthikanti et al. 2022 and the distributed optimizer's bytes per
parameter, and the report (files[].memory, ML504/ML505) on launch scripts."""

from __future__ import annotations

import random

import pytest

from meshlint.frameworks.megatron.core_0_16 import layer_split
from meshlint.mesh import memory_megatron as mm
from tests.test_real_megatron import WHEEL, _absent_core, _run

LLAMA2_7B = dict(num_layers=32, hidden_size=4096, ffn_hidden_size=11008, num_attention_heads=32, swiglu=True,
                 add_bias_linear=False, normalization="RMSNorm", position_embedding_type="rope",
                 untie_embeddings_and_output_weights=True, tokenizer_type="NullTokenizer", vocab_size=31999,
                 seq_length=4096, max_position_embeddings=4096, micro_batch_size=1, global_batch_size=128, bf16=True,
                 hidden_dropout=0.0, attention_dropout=0.0)


def _peak(a: dict, tp=1, pp=1, cp=1, ep=1, etp=None, dp=1, micro=None):
    degrees = dict(tp=tp, pp=pp, cp=cp, ep=ep, etp=etp or tp, dp_shard=dp)
    gbs, mbs = a.get("global_batch_size"), a.get("micro_batch_size")
    peak, notes = mm.estimate(a, degrees, layer_split(a, pp), micro or gbs // (mbs * dp))
    return peak, notes


def test_parameter_counts_of_known_models():
    assert mm.parameter_count(LLAMA2_7B) == 6_738_415_616   # Llama 2 7B (vocabulary 32,000)
    gpt3 = dict(num_layers=96, hidden_size=12288, num_attention_heads=96, seq_length=2048,
                max_position_embeddings=2048, tokenizer_type="GPT2BPETokenizer")
    assert abs(mm.parameter_count(gpt3) / 175e9 - 1) < 0.01     # GPT-3 175B, learned positions, tied


def test_bytes_per_parameter_follow_the_distributed_optimizer_table():
    """docs/source/api-guide/dist_optimizer.md: bf16 parameters with fp32 gradients take 18 bytes, or 6 + 12/d with
    the distributed optimizer over d data-parallel ranks."""
    a = dict(LLAMA2_7B, global_batch_size=64)
    for dist, dp, want in ((False, 8, 18), (True, 8, 6 + 12 / 8), (True, 32, 6 + 12 / 32)):
        peak, _ = _peak(dict(a, use_distributed_optimizer=dist, global_batch_size=dp), dp=dp)
        t = peak.peak.terms
        per_param = (t["params"] + t["grads"] + t["main_params"] + t["optimizer"]) / (t["params"] / 2)
        assert per_param == pytest.approx(want), (dist, dp)
    fp16 = _peak(dict(a, bf16=False, fp16=True))[0].peak.terms
    assert fp16["grads"] == fp16["params"]          # fp16 gradients unless --accumulate-allreduce-grads-in-fp32


def test_activations_match_korthikanti_for_the_papers_layer():
    """Korthikanti et al. 2022, §4.2: a GPT layer (4h MLP, GeLU, dropout, scores kept) stores s·b·h·(34 + 5·a·s/h)
    bytes without parallelism; with tp and sequence parallelism all of it ÷ t; tp alone leaves 10·s·b·h whole;
    selective recomputation drops the 5·a·s/h term."""
    h, a, s, t = 4096, 32, 2048, 8
    base = dict(num_layers=1, hidden_size=h, num_attention_heads=a, seq_length=s, max_position_embeddings=s,
                micro_batch_size=1, attention_backend="AttnBackend.unfused", hidden_dropout=0.1,
                attention_dropout=0.1, bf16=True)
    size, recipe = mm.sizes(base, 1), mm.recipe(base)
    per_token = mm.layer_bytes_per_token(size, recipe, 1, 1, s, moe=False)
    assert per_token == pytest.approx(h * (34 + 5 * a * s / h))
    sp = mm.recipe(dict(base, sequence_parallel=True))
    assert mm.layer_bytes_per_token(size, sp, t, t, s, moe=False) == pytest.approx(h * (34 + 5 * a * s / h) / t)
    assert mm.layer_bytes_per_token(size, recipe, t, t, s, moe=False) == pytest.approx(
        h * (10 + 24 / t + 5 * a * s / (h * t)))
    selective = mm.recipe(dict(base, sequence_parallel=True, recompute_granularity="selective"))
    assert mm.layer_bytes_per_token(size, selective, t, t, s, moe=False) == pytest.approx(h * 34 / t)


def test_microbatches_in_flight_follow_the_schedules():
    assert mm.held_chunks(1, 1, 64, 0) == (1, 1)
    assert [mm.held_chunks(4, 1, 64, r)[0] for r in range(4)] == [4, 3, 2, 1]
    assert mm.held_chunks(4, 1, 2, 0) == (2, 1)                    # fewer microbatches than stages
    # interleaved: (pp - rank - 1)·2 + (vp - 1)·pp warm-up virtual stages, plus the one in flight
    assert mm.held_chunks(4, 2, 64, 0) == (3 * 2 + 4 + 1, 2)
    assert mm.held_chunks(4, 2, 2, 0) == (4, 2)                    # at most m·vp


def test_first_stage_holds_the_most_activations_and_the_last_the_logits():
    a = dict(LLAMA2_7B, use_distributed_optimizer=True, global_batch_size=64)
    peak, _ = _peak(a, pp=4, dp=2)
    first, last = peak.stages[0], peak.stages[-1]
    assert first.microbatches_held == 4 and last.microbatches_held == 1
    acts = first.phase_terms if first.phase_terms else None
    assert acts is None  # detail off by default
    assert peak.peak.index == 0
    detailed, _ = mm.estimate(a, dict(tp=1, pp=4, cp=1, ep=1, etp=1, dp_shard=2), layer_split(a, 4), 32,
                              detail=True)
    assert detailed.stages[-1].phase_terms["forward"]["logits_loss"] == pytest.approx(
        6 * 4096 * 32000)                                            # bf16 logits + their fp32 copy, one microbatch
    assert detailed.stages[0].phase_terms["forward"]["logits_loss"] == 0


def test_recomputation_and_sequence_parallelism_shrink_activations():
    a = dict(LLAMA2_7B, global_batch_size=8)
    none = _peak(a, tp=2)[0].peak.terms["activations"]
    sp = _peak(dict(a, sequence_parallel=True), tp=2)[0].peak.terms["activations"]
    sel = _peak(dict(a, sequence_parallel=True, recompute_granularity="selective",
                     recompute_modules=["core_attn", "layernorm", "mlp"]), tp=2)[0].peak.terms["activations"]
    full = _peak(dict(a, sequence_parallel=True, recompute_granularity="full", recompute_method="uniform",
                      recompute_num_layers=1), tp=2)[0].peak.terms["activations"]
    assert none > sp > sel > full
    tokens, layer_input = 4096, 2 * 4096 / 2      # bf16 layer input, sequence-sharded over tp 2
    final_norm = 2 * 2 * 4096 / 2                 # the final norm's input and output
    assert full == pytest.approx((32 * layer_input + final_norm) * tokens)
    block = _peak(dict(a, sequence_parallel=True, recompute_granularity="full", recompute_method="block",
                       recompute_num_layers=8), tp=2)[0].peak.terms["activations"]
    assert full < block < sp


def test_moe_layer_frequency_strings():
    assert mm.moe_pattern(2, 5) == (1, 0, 1, 0, 1)
    assert mm.moe_pattern("([0]+[1]*3)*2", 8) == (0, 1, 1, 1, 0, 1, 1, 1)
    assert mm.moe_pattern("[1]*3", 4) is None            # the wrong length: unknown, not guessed
    assert mm.moe_pattern("__import__('os')", 4) is None


def test_unknown_vocabulary_is_a_lower_bound_and_fsdp_is_not_modelled():
    a = dict(LLAMA2_7B, tokenizer_type="HuggingFaceTokenizer")
    peak, notes = _peak(a)
    assert peak is not None and any("vocabulary" in n for n in notes)
    assert _peak(dict(LLAMA2_7B, use_torch_fsdp2=True))[0] is None


# ----------------------------------------------------------------------------- against Megatron-Core's own model

def _param_cases(n: int) -> list:
    rng = random.Random(2205)
    out = []
    for _ in range(n):
        tp, pp = rng.choice([1, 2, 4]), rng.choice([1, 2, 3])
        heads = tp * rng.choice([1, 2, 4])
        groups = rng.choice([g for g in (1, 2, 4, heads) if heads % g == 0 and g % tp == 0] or [heads])
        experts = rng.choice([0, 0, 4, 8])
        ep = rng.choice([e for e in (1, 2, 4) if not experts or experts % e == 0]) if experts else 1
        out.append({"tp": tp, "pp": pp, "ep": ep, "layers": pp * rng.randint(1, 3), "hidden": 64 * heads // tp * tp,
                    "ffn": 32 * tp * rng.randint(2, 6), "heads": heads, "groups": groups,
                    "swiglu": rng.random() < 0.5, "bias": rng.random() < 0.5, "rmsnorm": rng.random() < 0.5,
                    "experts": experts, "moe_ffn": 32 * rng.randint(1, 4), "topk": 2, "vocab": 128 * tp * 3,
                    "positions": rng.choice([0, 512]), "untie": rng.random() < 0.5})
    return out


def _args(c: dict) -> dict:
    mla = c.get("mla")   # built with the local spec: its down projections column-parallel (transformer_impl local)
    extra = {"multi_latent_attention": True, "q_lora_rank": mla["q_lora"] or None, "kv_lora_rank": mla["kv_lora"],
             "qk_head_dim": mla["qk"], "qk_pos_emb_head_dim": mla["pe"], "v_head_dim": mla["v"],
             "qk_layernorm": mla["qk_norm"], "transformer_impl": "local"} if mla else {}
    return dict(**extra, num_layers=c["layers"], hidden_size=c["hidden"], ffn_hidden_size=c["ffn"],
                num_attention_heads=c["heads"], group_query_attention=True, num_query_groups=c["groups"],
                swiglu=c["swiglu"], add_bias_linear=c["bias"], normalization="RMSNorm" if c["rmsnorm"] else "LayerNorm",
                num_experts=c["experts"] or None, moe_ffn_hidden_size=c["moe_ffn"], moe_router_topk=c["topk"],
                padded_vocab_size=c["vocab"], max_position_embeddings=c["positions"] or 4096,
                position_embedding_type="learned_absolute" if c["positions"] else "rope",
                untie_embeddings_and_output_weights=c["untie"], seq_length=64, micro_batch_size=1, bf16=True)


def _params_match_megatron_core(cases: list) -> None:
    """Each pp stage's parameters in the estimate equal those of Megatron-Core's GPTModel built for the case."""
    why = _absent_core()
    if why:
        pytest.skip(why)
    real = _run("params", cases, [WHEEL])
    for case, stages in zip(cases, real):
        a = _args(case)
        peak, _ = mm.estimate(a, dict(tp=case["tp"], pp=case["pp"], cp=1, ep=case["ep"], etp=1,
                                      dp_shard=1), layer_split(a, case["pp"]), 1)
        for got, stage in zip(stages, peak.stages):
            assert stage.terms["params"] / 2 == pytest.approx(got["dense"] + got["experts"]), (case, got)


def test_parameters_per_stage_match_megatron_cores_gpt_model():
    _params_match_megatron_core(_param_cases(24))


def _mla_cases(n: int) -> list:
    """Seeded models with multi-latent attention: with and without query compression and q/k norms."""
    rng = random.Random(1616)
    out = []
    for case in _param_cases(n):
        out.append({**case, "groups": case["heads"], "positions": 0,
                    "mla": {"q_lora": rng.choice([0, 32, 96]), "kv_lora": rng.choice([16, 64]),
                            "qk": rng.choice([16, 32]), "pe": rng.choice([8, 16]), "v": rng.choice([16, 48]),
                            "qk_norm": rng.random() < 0.5}})
    return out


def test_mla_parameters_per_stage_match_megatron_cores_gpt_model():
    """MLASelfAttention's projections and norms (local spec: the down projections column-parallel, ÷ tp)."""
    _params_match_megatron_core(_mla_cases(12))


def test_mla_with_transformer_engine_keeps_the_down_projections_whole():
    """TE's spec builds the down projections as TELinear(parallel_mode='duplicated') (gpt_layer_specs.py:119,121):
    the same parameters at tp 1, each tp rank the whole of them at tp > 1."""
    a = dict(num_layers=2, hidden_size=256, num_attention_heads=8, ffn_hidden_size=512, multi_latent_attention=True,
             q_lora_rank=64, kv_lora_rank=32, qk_head_dim=16, qk_pos_emb_head_dim=8, v_head_dim=16,
             padded_vocab_size=1024, seq_length=64, micro_batch_size=1, bf16=True)
    te, local = (mm.sizes({**a, "transformer_impl": impl}, 4) for impl in ("transformer_engine", "local"))
    assert mm.attention_params(te, 1) == mm.attention_params(local._replace(mla=local.mla._replace(down_tp=1)), 1)
    assert mm.attention_params(te, 4) - mm.attention_params(local, 4) == 256 * (64 + 32 + 8) * (1 - 1 / 4)


# ----------------------------------------------------------------------------- the report

SCRIPT = """#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
GPT=(
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 --swiglu
  --disable-bias-linear --normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights
  --seq-length 4096 --max-position-embeddings 4096 --bf16 --attention-dropout 0 --hidden-dropout 0
  --tokenizer-type NullTokenizer --vocab-size 31999 --use-distributed-optimizer
  --micro-batch-size {mbs} --global-batch-size 2048
)
torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py "${{GPT[@]}}" --pipeline-model-parallel-size 2
"""


def test_files_memory_and_ml504_on_a_script(tmp_path):
    from tests.test_megatron import check_script

    ok = check_script(SCRIPT.format(mbs=2), tmp_path)
    report = ok[0]
    mem = report.memory
    assert mem is not None and mem["peak_stage"] == 0 and len(mem["stages"]) == 2
    assert mem["capacity_gib"] == 80 and mem["fits"] is True and mem["lower_bound"] is False
    assert 55 < mem["peak_gib"] < 80
    big = check_script(SCRIPT.format(mbs=4), tmp_path, "big.sh")
    report = big[0]
    assert report.memory["peak_gib"] > 80
    assert "ML504" in [f.code for f in report.findings]
