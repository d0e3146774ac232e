"""suggest and fix keep the training recipe: the global batch, the model, and parallelisms the model can use."""

from __future__ import annotations

import json

from click.testing import CliRunner

from meshlint.cli.commands import main
from meshlint.cli.suggest import fix_cmd, suggest_cmd
from meshlint.solve import batch

if "fix" not in main.commands:
    main.add_command(suggest_cmd)
    main.add_command(fix_cmd)

KF70 = """\
# meshlint: world_size=32 gpus_per_node=8
[model]
dim = 8192
n_layers = 80
n_heads = 64
n_kv_heads = 8
vocab_size = 128256
ffn_hidden_dim = 28672
max_seq_len = 4096

[train]
batch_size = 1
seq_len = 4096
grad_accum_steps = 8
activation_checkpointing = "full"

[distributed]
dp_shard = -1
tp = 4
"""
TT70 = """\
# meshlint: world_size=64 gpus_per_node=8
[model]
name = "llama3"
flavor = "70B"

[training]
local_batch_size = 8
seq_len = 8192

[activation_checkpoint]
mode = "full"

[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 8
"""


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def suggest_json(path, *args):
    result = run("suggest", str(path), "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_kempnerforge_70b_at_64_keeps_the_batch_and_fits(tmp_path):
    path = tmp_path / "kf70.toml"
    path.write_text(KF70)
    doc = suggest_json(path, "--world-size", "64", "--node", "8xH100", "--top", "5")
    # the config's own global batch: 1 sequence × 8 microbatches × dp 8 (32 GPUs / tp 4)
    assert doc["global_batch"] == {"sequences": 64, "tokens": 64 * 4096, "kept": True}
    assert doc["alternatives"]
    for alt in doc["alternatives"]:
        est = alt["estimate"]
        assert est["global_batch"] == {"sequences": 64, "tokens": 64 * 4096}
        mem = est["memory"]
        assert mem["capacity_gib"] == doc["cluster"]["gpu_memory_gib"] or mem["capacity_gib"] < 80
        assert mem["fits"] is (mem["peak_gib"] <= mem["capacity_gib"])
        assert alt["degrees"]["cp"] == 1 and alt["degrees"]["ep"] == 1  # KempnerForge's cp does nothing; dense
        d = alt["degrees"]
        dp = d["dp_replicate"] * d["dp_shard"]
        written = {c["key"]: c["new"] for c in alt["changes"]}
        local = written.get("train.batch_size", 1) * written.get("train.grad_accum_steps", 8)
        assert local * dp == 64  # what each rank reads, times the ranks, is the global batch
    assert doc["alternatives"][0]["estimate"]["memory"]["fits"] is True


def test_dense_torchtitan_is_never_offered_expert_parallelism(tmp_path):
    path = tmp_path / "tt70.toml"
    path.write_text(TT70)
    doc = suggest_json(path, "--top", "10")
    assert doc["alternatives"]
    assert all(a["degrees"]["ep"] == 1 and a["degrees"].get("etp", 1) == 1 for a in doc["alternatives"])
    assert doc["stats"]["skipped"]["unusable_parallelism"] > 0
    assert doc["global_batch"]["sequences"] == 8 * 8  # local 8 × dp 8 (64 GPUs / tp 8)
    for alt in doc["alternatives"]:
        assert alt["estimate"]["global_batch"]["sequences"] == 64


def test_allow_batch_change_keeps_each_rank_batch(tmp_path):
    path = tmp_path / "tt70.toml"
    path.write_text(TT70)
    doc = suggest_json(path, "--top", "10", "--allow-batch-change")
    assert doc["global_batch"]["kept"] is False
    assert all(c["degree"] is not None for a in doc["alternatives"] for c in a["changes"])
    assert any(a["estimate"]["global_batch"]["sequences"] != 64 for a in doc["alternatives"])


def test_fix_writes_the_batch_keys_it_changes(tmp_path):
    path = tmp_path / "kf70.toml"
    path.write_text(KF70)
    result = run("fix", str(path), "--world-size", "64", "--set", "tp=8,pp=1,dp_replicate=1")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    # 64 GPUs / tp 8 = dp 8: each rank keeps 8 sequences per step
    assert "tp = 8" in text and "grad_accum_steps = 8" in text and "batch_size = 1" in text
    path.write_text(KF70)
    result = run("fix", str(path), "--world-size", "64", "--set", "tp=4,pp=1,dp_replicate=1")
    assert result.exit_code == 0, result.output
    # dp 16: half the accumulation keeps 64 sequences
    assert "grad_accum_steps = 4" in path.read_text()


def test_plan_keeps_the_global_batch_or_refuses():
    r = batch.Recipe("kempnerforge", 64, 64 * 4096, 4096, 2, 1,
                     {"local": ("train.batch_size", 2), "accum": ("train.grad_accum_steps", 4)})
    p = batch.plan(r, 16, 1)
    assert (p.microbatch_tokens, p.microbatches) == (2 * 4096, 2) and p.global_batch["sequences"] == 64
    assert [c["key"] for c in p.changes] == ["train.grad_accum_steps"]
    p = batch.plan(r, 64, 1)  # one sequence per rank: the microbatch shrinks
    assert (p.microbatch_tokens, p.microbatches) == (4096, 1)
    assert {c["key"] for c in p.changes} == {"train.batch_size", "train.grad_accum_steps"}
    assert batch.plan(r, 48, 1) is None  # 64 sequences do not split over 48 ranks
    tt = batch.Recipe("torchtitan", 64, 64 * 8192, 8192, 8, 1,
                      {"local": ("training.local_batch_size", 8), "global": ("training.global_batch_size", -1)})
    p = batch.plan(tt, 4, 1, fits=lambda tokens, m: tokens <= 4 * 8192)
    # 16 sequences per rank: the largest microbatch that fits is 4, so torchtitan accumulates 4
    assert p.microbatch_tokens == 4 * 8192 and p.microbatches == 4
    assert {c["key"]: c["new"] for c in p.changes} == {"training.local_batch_size": 4,
                                                       "training.global_batch_size": 64}


def test_megatron_keeps_its_written_global_batch_when_its_own_layout_is_refused():
    # tp 8 · pp 16 = 128 on 8 GPUs: the launch's own layout has no dp, yet --global-batch-size is written, so the
    # layouts suggest offers keep it (only the microbatch count changes), rather than a batch that moves with dp
    bad = "fixtures/rules/ML960-megatron-world-not-divisible-by-model-size/bad_8gpu.sh"
    doc = suggest_json(bad, "--top", "5")
    assert doc["global_batch"] == {"sequences": 64, "tokens": 64 * 4096, "kept": True}
    assert doc["alternatives"]
    for alt in doc["alternatives"]:
        assert alt["estimate"]["global_batch"] == {"sequences": 64, "tokens": 64 * 4096}
        assert "global_batch_size" not in {c["key"] for c in alt["changes"]}
