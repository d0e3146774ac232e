"""The whole-peak memory of an Accelerate run (meshlint/estimate/memory_accelerate.py): the parameters of known Hugging
Face models from their config.json, the dtypes and sharding of Accelerate 1.15.0's FSDP2, FSDP1 and DDP paths, the
lower bound where the batch is the script's, the report (files[].memory, ML504/ML505), and the formula against the
fake-tensor measurement of Accelerate's own FSDP2 (bench/memory_vs_fake_accelerate.py, saved numbers)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from meshlint.engine.check import Options, check_file
from meshlint.engine.ruleset import load_rules
from meshlint.estimate.memory_accelerate import model_shape, strategy

ROOT = Path(__file__).resolve().parents[1]
GIB = 2 ** 30
RULES = load_rules()
LLAMA3_8B = dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                 num_key_value_heads=8, num_hidden_layers=32, vocab_size=128256, tie_word_embeddings=False,
                 torch_dtype="bfloat16")
P_8B = 8_030_261_248


def _bench():
    """bench/memory_vs_fake_accelerate.py (its layouts and the prediction ``check`` makes for each)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.append(str(ROOT / "bench"))
    return importlib.import_module("memory_vs_fake_accelerate")


@pytest.mark.parametrize("config, params", [
    (LLAMA3_8B, P_8B),
    ({**LLAMA3_8B, "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
      "num_hidden_layers": 80}, 70_553_706_496),                                        # Llama 3 70B
    ({**LLAMA3_8B, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
      "tie_word_embeddings": True}, 1_235_814_400),                                     # Llama 3.2 1B (tied)
    (dict(model_type="qwen2", hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
          num_key_value_heads=4, num_hidden_layers=28, vocab_size=152064), 7_615_616_512),  # Qwen2.5 7B (qkv bias)
    (dict(model_type="mixtral", hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
          num_key_value_heads=8, num_hidden_layers=32, vocab_size=32000, num_local_experts=8,
          num_experts_per_tok=2), 46_702_792_704),                                      # Mixtral 8x7B
])
def test_parameter_counts_of_published_models(config, params):
    shape, note = model_shape(config, "none", 2, 4, 2, True, False)
    assert shape.params == params and note is None


def test_configs_it_cannot_size_say_why():
    assert model_shape({"model_type": "gpt2", "n_embd": 768}, "none", 2, 4, 2, True, False)[0] is None
    shape, why = model_shape({**LLAMA3_8B, "kv_lora_rank": 512}, "none", 2, 4, 2, True, False)
    assert shape is None and "latent attention" in why


def test_fsdp1_strategies_by_name_and_number():
    assert [strategy(x) for x in (None, "1", 2, "no_shard", "HYBRID_SHARD", "5", "bogus")] == [
        "FULL_SHARD", "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2", "FULL_SHARD"]


def _memory(tmp_path, launch: str, config: dict = LLAMA3_8B, name: str = "m", gib: float = 80.0):
    model = tmp_path / name
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(config))
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\naccelerate launch {launch} train.py --model_name_or_path {name}\n")
    report = check_file(str(script), Options(rules=RULES, gpu_memory_gib=gib))
    assert report.status == "checked", report.error
    return report


FSDP2 = "--use_fsdp --fsdp_version 2 --num_processes 8 --mixed_precision bf16"
BATCH = "--per_device_train_batch_size 1 --max_seq_length 4096"


def test_fsdp2_keeps_fp32_master_weights_sharded_over_the_world(tmp_path):
    # fsdp2_prepare_model upcasts trainable parameters to fp32 under mixed precision (utils/fsdp_utils.py:815-820);
    # no ParallelismConfig: fully_shard over the whole world
    m = _memory(tmp_path, FSDP2).memory
    t = m["terms"]
    assert t["params"] == pytest.approx(P_8B * 4 / 8 / GIB, abs=1e-3)
    assert t["optimizer"] == pytest.approx(P_8B * 8 / 8 / GIB, abs=1e-3)
    assert m["lower_bound"] is True and t["activations"] == 0


def test_the_batch_from_the_scripts_arguments_gives_the_whole_peak(tmp_path):
    report = _memory(tmp_path, FSDP2)
    bound = report.memory
    script = tmp_path / "run.sh"
    script.write_text(f"accelerate launch {FSDP2} train.py --model_name_or_path m {BATCH}\n")
    whole = check_file(str(script), Options(rules=RULES)).memory
    assert whole["lower_bound"] is False and whole["terms"]["activations"] > 10
    assert whole["peak_gib"] > bound["peak_gib"] and whole["fits"] is True
    assert bound["fits"] is None  # under the capacity, a lower bound says nothing


def test_mixed_precision_no_keeps_the_loaded_dtype(tmp_path):
    m = _memory(tmp_path, FSDP2.replace("bf16", "no")).memory
    assert m["terms"]["params"] == pytest.approx(P_8B * 2 / 8 / GIB, abs=1e-3)  # config.json's bfloat16
    assert any("config.json" in n for n in m["notes"])
    fp32 = _memory(tmp_path, FSDP2.replace("bf16", "no"), {**LLAMA3_8B, "torch_dtype": "float32"}, "f").memory
    assert fp32["terms"]["params"] == pytest.approx(P_8B * 4 / 8 / GIB, abs=1e-3)


def test_hsdp_from_the_parallelism_config_shards_over_dp_shard_only(tmp_path):
    pc = ("--use_parallelism_config --parallelism_config_dp_replicate_size 2 "
          "--parallelism_config_dp_shard_size 4")
    m = _memory(tmp_path, f"{FSDP2} {pc}").memory
    assert m["terms"]["params"] == pytest.approx(P_8B * 4 / 4 / GIB, abs=1e-3)


def test_ddp_holds_everything_on_every_rank_and_its_buckets(tmp_path):
    report = _memory(tmp_path, "--multi_gpu --num_processes 8 --mixed_precision bf16")
    t = report.memory["terms"]
    assert t["params"] == pytest.approx(P_8B * 2 / GIB, abs=1e-3)
    assert t["reduce_buffers"] == pytest.approx(t["params"], abs=1e-3)  # DDP's gradient buckets
    assert [f.code for f in report.findings if f.severity == "error"] == ["ML504"]


def test_fsdp1_full_shard_hybrid_and_shard_grad_op(tmp_path):
    full = _memory(tmp_path, "--use_fsdp --num_processes 16 --num_machines 2 --mixed_precision bf16").memory
    assert full["terms"]["params"] == pytest.approx(P_8B * 4 / 16 / GIB, abs=1e-3)
    hybrid = _memory(tmp_path, "--use_fsdp --num_processes 16 --num_machines 2 --mixed_precision bf16 "
                               "--fsdp_sharding_strategy HYBRID_SHARD").memory
    assert hybrid["terms"]["params"] == pytest.approx(P_8B * 4 / 8 / GIB, abs=1e-3)  # within a node of 8
    zero2 = _memory(tmp_path, "--use_fsdp --num_processes 16 --num_machines 2 --mixed_precision bf16 "
                              "--fsdp_sharding_strategy SHARD_GRAD_OP").memory
    # every unit stays gathered (bf16) from its forward to its backward
    assert zero2["terms"]["fsdp_unsharded"] == pytest.approx(P_8B * 2 / GIB, rel=0.01)


def test_activation_checkpointing_from_the_plugin_or_the_script(tmp_path):
    def acts(extra: str, script_args: str = "") -> float:
        script = tmp_path / "run.sh"
        script.write_text(f"accelerate launch {FSDP2} {extra} train.py --model_name_or_path m {BATCH} "
                          f"{script_args}\n")
        m = check_file(str(script), Options(rules=RULES, gpu_memory_gib=1e6)).memory
        return m["terms"]["activations"], m["activation_checkpointing"]

    _memory(tmp_path, FSDP2)
    none, full = acts(""), acts("--fsdp_activation_checkpointing true")
    assert none[1] == "none" and full[1] == "full" and full[0] < none[0] / 10
    assert acts("", "--gradient_checkpointing") == full


def test_what_is_not_sized_says_why(tmp_path):
    report = _memory(tmp_path, f"{FSDP2} --fsdp_offload_params true")
    assert report.memory is None and any("fsdp_offload_params" in n for n in report.resolution.notes)
    report = _memory(tmp_path, "--use_deepspeed --num_processes 8")
    assert report.memory is None and any("DEEPSPEED" in n for n in report.resolution.notes)
    script = tmp_path / "nomodel.sh"
    script.write_text(f"accelerate launch {FSDP2} train.py\n")
    assert check_file(str(script), Options(rules=RULES)).memory is None


def test_the_json_report_validates(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from meshlint.report.json_report import file_json

    schema = json.loads((ROOT / "docs" / "report-v1.schema.json").read_text())
    memory_schema = schema["properties"]["files"]["items"]["properties"]["memory"]
    doc = file_json(_memory(tmp_path, FSDP2))
    assert doc["memory"]["lower_bound"] is True and doc["memory"]["fits"] is None
    jsonschema.Draft7Validator(memory_schema).validate(doc["memory"])


def test_within_10_percent_of_the_fake_tensor_measurement_of_accelerates_fsdp2():
    """bench/memory_vs_fake_accelerate.py measured Accelerate's own fsdp2_prepare_model on a model of
    Transformers' Llama shapes; the formula, recomputed now, must stay within 10 % of each run."""
    import tempfile

    LAYOUTS, predicted = _bench().LAYOUTS, _bench().predicted

    saved = {r["id"]: r for r in json.loads((ROOT / "bench" / "memory_fake_accelerate.json").read_text())["rows"]}
    assert {lid for lid, *_ in LAYOUTS} <= set(saved)
    with tempfile.TemporaryDirectory() as tmp:
        for layout in LAYOUTS:
            want, measured = predicted(layout, tmp), saved[layout[0]]["measured_gib"]
            # never under the measurement; within 10 % of what a fake run can see (its collectives complete at once,
            # so the previous unit's reduce-scatter input, which the formula keeps in a layer's backward, is unseen)
            assert want["allocated_gib"] >= measured * 0.99, layout[0]
            assert want["allocated_gib"] - want["unseen_gib"] == pytest.approx(measured, rel=0.10), layout[0]


def test_suggest_prices_each_layout_with_the_same_estimate_as_check(tmp_path):
    # suggest's cost model sizes an Accelerate run from the same config.json and settings as check's ML504
    # (memory_accelerate.sized): the config's own layout (no ParallelismConfig: FSDP2 over all 8 ranks, which also
    # read 8 batches) gets check's peak, and every alternative has a whole peak, not "memory: unknown"
    from click.testing import CliRunner

    from meshlint.cli.commands import main
    from meshlint.cli.suggest import suggest_cmd

    if "suggest" not in main.commands:
        main.add_command(suggest_cmd)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(LLAMA3_8B))
    script = tmp_path / "run.sh"
    script.write_text(f"accelerate launch {FSDP2} train.py --model_name_or_path m {BATCH}\n")
    checked = check_file(str(script), Options(rules=RULES)).memory
    result = CliRunner().invoke(main, ["suggest", str(script), "--format", "json", "--top", "4"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    current = doc["current"]["estimate"]
    assert current["memory"]["peak_gib"] == pytest.approx(checked["peak_gib"], rel=1e-6)
    assert current["tokens_per_iteration"] == 8 * 4096  # each of the 8 FSDP ranks reads its own batch
    assert doc["alternatives"]
    for alt in doc["alternatives"]:
        assert alt["estimate"]["memory"]["peak_gib"] > 0 and alt["estimate"]["memory"]["fits"] is not None
