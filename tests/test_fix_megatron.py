"""suggest and fix on Megatron-LM launch scripts: layouts that keep --global-batch-size (only --micro-batch-size
changes), never the model, never ep on a dense model; fix rewrites each value where the script writes it (the
line, a bash array, a variable), adds the flags it does not write, reads the result back, and refuses what it
cannot do safely, leaving the file untouched."""

from __future__ import annotations

import json
import re

import pytest

from meshlint.cli.settings import CliSettings, Planner
from meshlint.engine.check import analyse_all, check_all
from meshlint.solve.fix import FixError, plan
from meshlint.solve.suggest import search
from meshlint.engine.search.valid import Solver
from tests.test_fix import run

DENSE = """\
#!/bin/bash
# Llama-2 7B shape on 16 GPUs
export CUDA_DEVICE_MAX_CONNECTIONS=1
TP=2
GPT=(
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 --swiglu
  --disable-bias-linear --normalization RMSNorm --position-embedding-type rope
  --seq-length 4096 --max-position-embeddings 4096 --bf16 --attention-dropout 0 --hidden-dropout 0
  --tokenizer-type NullTokenizer --vocab-size 31999 --use-distributed-optimizer
  --micro-batch-size 4 --global-batch-size 256
)
PAR=(--tensor-model-parallel-size $TP --sequence-parallel)
torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py "${GPT[@]}" "${PAR[@]}" --pipeline-model-parallel-size 1
"""
MOE = DENSE.replace("--num-attention-heads 32 --swiglu",
                    "--num-attention-heads 32 --swiglu --num-experts 16 --moe-ffn-hidden-size 1408").replace(
    "PAR=(--tensor-model-parallel-size $TP --sequence-parallel)",
    "PAR=(--tensor-model-parallel-size $TP --sequence-parallel --expert-model-parallel-size 4)")
MODEL_FLAGS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_experts", "seq_length",
               "vocab_size", "global_batch_size", "moe_ffn_hidden_size")


def _report(path, **topo):
    options = Planner(CliSettings(gpu_memory_gib=80, **topo)).options_for(str(path))
    (report,) = analyse_all(str(path), options)
    return report, options


@pytest.mark.parametrize("text", [DENSE, MOE], ids=["dense", "moe"])
def test_suggest_keeps_the_global_batch_and_the_model(tmp_path, text):
    path = tmp_path / "run.sh"
    path.write_text(text)
    report, options = _report(path)
    s = search(report, options, top=8)
    assert s.alternatives, s.diagnosis
    gbs, seq = 256, 4096
    moe = "num-experts" in text
    for alt in s.alternatives:
        v = alt.degrees
        assert v["pp"] * v["dp_shard"] * v["cp"] * v["tp"] == 16
        assert moe or v["ep"] == 1                               # never ep on a dense model
        mbs = next((c["new"] for c in alt.changes if c["key"] == "micro_batch_size"), 4)
        assert gbs % (mbs * v["dp_shard"]) == 0                  # Megatron's microbatch calculator accepts it
        assert alt.estimate.global_batch == {"sequences": gbs, "tokens": gbs * seq}
        assert not [c for c in alt.changes if c["key"] in MODEL_FLAGS]
        assert alt.estimate.fits is True and alt.estimate.memory_gib <= 80


def test_suggest_json_gives_memory_and_global_batch(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(DENSE)
    result = run("suggest", str(path), "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    import jsonschema
    from pathlib import Path

    schema = json.loads((Path(__file__).resolve().parent.parent / "docs" / "suggest-v1.schema.json").read_text())
    jsonschema.Draft7Validator(schema).validate(out)
    assert out["framework"].startswith("megatron@0.16.1")
    for alt in out["alternatives"]:
        mem = alt["estimate"]["memory"]
        assert mem["fits"] is True and mem["peak_gib"] <= mem["capacity_gib"] == 80
        assert alt["estimate"]["global_batch"] == {"sequences": 256, "tokens": 256 * 4096}


def test_fix_rewrites_values_where_they_are_written(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(DENSE)
    result = run("fix", str(path), "--set", "tp=1,pp=2,cp=2")
    assert result.exit_code == 0, result.output
    new = path.read_text()
    assert "TP=1\n" in new                                          # the variable $TP expands from
    assert "--pipeline-model-parallel-size 2\n" in new              # on the launch line
    assert "pretrain_gpt.py --context-parallel-size 2 " in new      # not written: added after the entry script
    assert new.count("\n") == DENSE.count("\n")
    (report,) = analyse_all(str(path), Planner(CliSettings()).options_for(str(path)))
    assert {k: report.resolution.degrees[k] for k in ("tp", "pp", "cp", "dp_shard")} == \
        {"tp": 1, "pp": 2, "cp": 2, "dp_shard": 4}
    assert report.spec.extra["args"]["global_batch_size"] == 256
    errors = [f for r in check_all(str(path), Planner(CliSettings(gpu_memory_gib=10_000)).options_for(str(path)))
              for f in r.findings if f.severity == "error"]
    assert not errors, [f.message for f in errors]


def test_fix_changes_the_microbatch_inside_the_array_to_keep_the_global_batch(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(DENSE.replace("--global-batch-size 256", "--global-batch-size 32"))
    report, options = _report(path)
    s = search(report, options, top=20)
    alt = next(a for a in s.alternatives if any(c["key"] == "micro_batch_size" for c in a.changes))
    batch = [c for c in alt.changes if c["key"] == "micro_batch_size"]
    p = plan(Solver(report, options), alt.degrees, options, batch)
    assert re.search(rf"--micro-batch-size {batch[0]['new']} --global-batch-size 32\n", p.new)


def test_fix_writes_etp_only_where_it_would_not_follow_tp(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(MOE)
    result = run("fix", str(path), "--set", "tp=1,etp=2,ep=4,pp=1,cp=1")
    assert result.exit_code == 0, result.output
    assert "--expert-tensor-parallel-size 2" in path.read_text()
    path.write_text(MOE)
    result = run("fix", str(path), "--set", "tp=4,etp=4,ep=2,pp=1,cp=1")
    assert result.exit_code == 0, result.output
    assert "--expert-tensor-parallel-size" not in path.read_text() and "TP=4\n" in path.read_text()


@pytest.mark.parametrize("edit, says", [
    (("TP=2\n", "TP=$((1 + 1))\n"), "not the literal 2"),                         # arithmetic: not rewritten
    (("--pipeline-model-parallel-size 1", "--pipeline-model-parallel-size $TP"), "read back differently"),  # shared
])
def test_fix_refuses_what_it_cannot_write_safely(tmp_path, edit, says):
    path = tmp_path / "run.sh"
    text = DENSE.replace(*edit)
    path.write_text(text)
    report, options = _report(path)
    assert report.status == "checked"
    with pytest.raises(FixError, match=re.escape(says)):
        plan(Solver(report, options), {**Solver(report, options).current, "tp": 4, "pp": 2, "dp_shard": 2}, options)
    result = run("fix", str(path), "--set", "tp=4,pp=2")
    assert result.exit_code == 2 and path.read_text() == text


def test_fix_refuses_another_world_and_a_command_line(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(DENSE)
    result = run("fix", str(path), "--set", "tp=4", "--world-size", "32")
    assert result.exit_code == 2 and "launches 16 GPUs" in result.output and path.read_text() == DENSE
    from meshlint.inputs.launch import parse_launch_args
    from meshlint.engine.units import analyse_launch

    argv = ["torchrun", "--nproc_per_node", "8", "pretrain_gpt.py", "--num-layers", "8", "--hidden-size", "512",
            "--num-attention-heads", "8", "--seq-length", "1024", "--max-position-embeddings", "1024",
            "--micro-batch-size", "1", "--global-batch-size", "16", "--tensor-model-parallel-size", "2"]
    options = Planner(CliSettings()).options_for("x")
    report = analyse_launch(parse_launch_args(argv), options)
    solver = Solver(report, options)
    with pytest.raises(FixError, match="--tensor-model-parallel-size 4"):
        plan(solver, {**solver.current, "tp": 4, "dp_shard": 2}, options)


def test_suggest_never_enumerates_a_pp_the_layers_refuse(tmp_path):
    """The layer split reads only pp and the options: a pp it refuses (ML963) is ruled out before enumeration,
    and the reason is kept for the diagnosis."""
    path = tmp_path / "run.sh"
    path.write_text(DENSE.replace("--num-layers 32", "--num-layers 30"))
    report, options = _report(path)
    solver = Solver(report, options)
    assert 4 not in solver.allowed["pp"] and 8 not in solver.allowed["pp"] and {1, 2} <= solver.allowed["pp"]
    assert solver.why_not["pp"][4] == "ML963"
    s = search(report, options, top=5)
    assert s.alternatives and all(30 % a.degrees["pp"] == 0 for a in s.alternatives)
    assert "ML963" not in s.stats["rejected_by_full_rules"]
