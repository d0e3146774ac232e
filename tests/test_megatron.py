"""The megatron dialect without Megatron: its launch grammar, script reading, groups, layer split and findings.

(tests/test_real_megatron.py compares the same arithmetic with Megatron-Core's own code.)
"""

from __future__ import annotations

import pytest

from meshlint.engine.check import Options, run_checks
from meshlint.frameworks.megatron import core_0_16, flags, ranks
from meshlint.inputs.launch import Word, parse_launch_args
from meshlint.inputs.scripts import launches_in_text
from meshlint.engine.units import analyse_launch, analyse_source
from meshlint.engine.ruleset import load_rules

RULES = load_rules()
OPTIONS = Options(rules=RULES)
MODEL = ["--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32", "--seq-length", "4096",
         "--max-position-embeddings", "4096", "--micro-batch-size", "1", "--global-batch-size", "64"]


def words(*texts: str) -> list:
    return [Word(t, 1, 1 + 10 * i) for i, t in enumerate(texts)]


def check_argv(*argv: str):
    return run_checks(analyse_launch(parse_launch_args(list(argv)), OPTIONS), OPTIONS)


def check_script(text: str, tmp_path, name: str = "run.sh"):
    from meshlint.engine.check import check_all

    path = tmp_path / name
    path.write_text(text)
    return check_all(str(path), OPTIONS)


def codes(report) -> list:
    return sorted(f.code for f in report.findings if f.severity in ("error", "warning"))


# ----------------------------------------------------------------------------- the argparse grammar

def test_parser_forms():
    parsed = flags.parse(words("--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size=2",
                               "--sequence-parallel", "--no-check-for-nan-in-loss-and-grad",
                               "--rampup-batch-size", "16", "16", "1000", "--lr", "1e-4", "--ckpt-format", "torch_dist"),
                         "pretrain_gpt.py")
    v = parsed.values
    assert v["tensor_model_parallel_size"] == 4 and v["pipeline_model_parallel_size"] == 2
    assert v["sequence_parallel"] is True and v["check_for_nan_in_loss_and_grad"] is False
    assert v["rampup_batch_size"] == [16, 16, 1000] and v["lr"] == 1e-4 and v["ckpt_format"] == "torch_dist"
    assert parsed.refusals == []
    # where each value is set: the value's word; for --flag=value the column after '='
    assert parsed.given["pipeline_model_parallel_size"].col == 21 + len("--pipeline-model-parallel-size=")


@pytest.mark.parametrize("argv, says", [
    (["--tensor_model_parallel_size", "2"], "unrecognized arguments: --tensor_model_parallel_size 2 (did you mean "
                                            "--tensor-model-parallel-size?)"),
    (["--tensor-model-parallel-size", "two"], "argument --tensor-model-parallel-size: invalid int value: 'two'"),
    (["--tensor-model-parallel-size"], "argument --tensor-model-parallel-size: expected one argument"),
    (["--sequence-parallel=true"], "argument --sequence-parallel: ignored explicit argument 'true'"),
    (["--ckpt-format", "zip"], "invalid choice: 'zip'"),
    (["--rampup-batch-size", "16", "16"], "expected 3 arguments"),
    (["extra"], "the parser takes no positional arguments"),
    (["--tensor-model-parallel", "2"], "unrecognized arguments"),  # allow_abbrev=False: no prefix matching
])
def test_parser_refusals(argv, says):
    parsed = flags.parse(words(*argv), "pretrain_gpt.py")
    assert parsed.refusals and says in parsed.refusals[0].message


def test_extra_provider_options_only_for_their_entry_script():
    assert not flags.parse(words("--export-kd-teacher-load", "x"), "pretrain_gpt.py", ("modelopt",)).refusals
    refused = flags.parse(words("--export-kd-teacher-load", "x"), "pretrain_bert.py", ()).refusals
    assert refused and "modelopt" in refused[0].message


def test_later_occurrence_wins_and_negative_numbers_are_values():
    parsed = flags.parse(words("--tensor-model-parallel-size", "2", "--tensor-model-parallel-size", "4",
                               "--context-parallel-size", "-1"), "pretrain_gpt.py")
    assert parsed.values["tensor_model_parallel_size"] == 4 and parsed.values["context_parallel_size"] == -1


# ----------------------------------------------------------------------------- launch lines and scripts

@pytest.mark.parametrize("argv, world", [
    (["torchrun", "--nnodes", "2", "--nproc_per_node", "8", "pretrain_gpt.py"], 16),
    (["torchrun", "--nproc-per-node=4", "/opt/Megatron-LM/pretrain_mamba.py"], 4),
    (["python", "-m", "torch.distributed.run", "--nproc_per_node", "8", "pretrain_gpt.py"], 8),
])
def test_launchers(argv, world):
    report = analyse_launch(parse_launch_args(argv + MODEL), OPTIONS)
    assert report.dialect == "megatron" and report.topology.world_size == world


def test_other_scripts_are_not_megatron():
    assert launches_in_text("torchrun --nproc_per_node 8 train.py --tensor-model-parallel-size 2\n") == []
    assert launches_in_text("python pretrain_gpt.sh\n") == []


SCRIPT = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gpus-per-node=8
GPUS_PER_NODE=8
NNODES=${SLURM_NNODES:-1}
DISTRIBUTED_ARGS=(--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES)
MODEL_ARGS=(
    --num-layers 30
    --hidden-size 4096 --num-attention-heads 32
    --seq-length 4096 --max-position-embeddings 4096
)
OPTS="--micro-batch-size 1 --global-batch-size 64"
PAR=(
    "--tensor-model-parallel-size 2"
    --pipeline-model-parallel-size 4
)
if [ -n "$WANDB" ]; then
    PAR+=(--wandb-project x)
fi
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py ${MODEL_ARGS[@]} $OPTS ${PAR[@]} "$@"
"""


def test_script_arrays_variables_and_positions(tmp_path):
    [report] = check_script(SCRIPT, tmp_path)
    assert report.topology.world_size == 16       # --nnodes from ${SLURM_NNODES:-1}: #SBATCH --nodes=2
    assert report.resolution.degrees["tp"] == 2   # a quoted array item split by the unquoted expansion
    [f] = [f for f in report.findings if f.code == "ML963"]   # 30 layers on pp 4 (NVIDIA/Megatron-LM#1304)
    assert (f.line, f.col) == (15, 36)            # the word that set pp, inside the array
    notes = " ".join(report.spec.extra["notes"])
    assert "PAR+=( ... ) on line 18" in notes and "passes the script's arguments through" in notes


def test_unreadable_options_are_unknown_not_defaulted(tmp_path):
    text = ('case "$X" in a) TP=2;; esac\nOPTS="--tensor-model-parallel-size $TP --micro-batch-size 1"\n'
            "torchrun --nproc_per_node 8 pretrain_gpt.py ${OPTS}\n")
    [report] = check_script(text, tmp_path)
    # $OPTS is read but for $TP (set only in a case branch): tp is unknown, never defaulted to 1, and the options
    # validate_args requires are visibly not in $OPTS (ML972; before, the whole of $OPTS was unknown)
    assert report.resolution.degrees["tp"] is None and "ML972" in codes(report)
    assert "ML111" in codes(report) or "ML111" in [f.code for f in report.findings]   # says what was not read
    # a variable the script does not determine at all may hold any option: nothing is required of it
    text = 'OPTS="$(cat opts.txt)"\ntorchrun --nproc_per_node 8 pretrain_gpt.py ${OPTS}\n'
    [report] = check_script(text, tmp_path)
    assert codes(report) == []                    # no ML972 (required options): they may be in $OPTS
    assert [f.code for f in report.findings] == ["ML111"]
    assert report.resolution.framework_error is None and report.resolution.degrees["tp"] is None


# ----------------------------------------------------------------------------- groups, split, findings

def test_groups_of_a_million_ranks_by_arithmetic():
    spec = core_0_16.spec_from_degrees({"tp": 8, "pp": 16, "cp": 2, "ep": 64, "etp": 1}, num_experts=64)
    res = core_0_16.resolve(spec, 1 << 20)
    dense, expert = spec.extra["grids"]
    assert res.framework_error is None and res.degrees["dp_shard"] == 4096
    rank = 1_000_003
    assert dense.group(rank, "tp") == list(range(1_000_000, 1_000_008))
    assert dense.group(rank, "pp")[::5] == [16963, 344643, 672323, 1000003]
    assert dense.count("tp-pp") == 8192 and dense.index(rank, "tp") == (rank // 8)
    assert expert.group(rank, "ep") == list(range(1_000_000, 1_000_064))
    assert res.axes["dp_cp"].members(rank, 3) == dense.group(rank, "dp-cp")[:3]
    assert dense.axis("tp-pp", "mp") is None     # several strided runs: not one 1-D family


def test_tp_pp_dp_mapping_moves_pp():
    default = ranks.make_grid("dense", 2, 1, 2, 2, 1, ranks.DEFAULT_ORDER)
    moved = ranks.make_grid("dense", 2, 1, 2, 2, 1, ranks.TP_PP_DP_ORDER)
    assert default.group(0, "pp") == [0, 4] and moved.group(0, "pp") == [0, 2]
    assert default.group(0, "dp") == [0, 2] and moved.group(0, "dp") == [0, 4]
    with pytest.raises(ranks.OrderError):
        ranks.make_grid("dense", 2, 1, 2, 2, 1, "tp-dp")


@pytest.mark.parametrize("argv, code", [
    (["--num-layers", "80", "--pipeline-model-parallel-size", "16", "--num-layers-per-virtual-pipeline-stage", "2"],
     "ML963"),                               # NVIDIA/Megatron-LM#468
    (["--num-layers", "80", "--pipeline-model-parallel-size", "16", "--num-virtual-stages-per-pipeline-rank", "2"],
     "ML963"),                               # the same through the other flag: get_num_layers_to_build refuses it
    (["--num-layers", "8", "--decoder-first-pipeline-num-layers", "2", "--decoder-last-pipeline-num-layers", "3"],
     "ML963"),                               # pp 1: 0.16.1 builds 3 of 8 layers without an error
    (["--num-experts", "8", "--expert-model-parallel-size", "3"], "ML309"),
    (["--tensor-model-parallel-size", "16", "--group-query-attention", "--num-query-groups", "8"], None),  # tp a multiple
])
def test_findings_on_launch_lines(argv, code):
    base = [a for a in MODEL if a not in ("--num-layers", "32")] if "--num-layers" in argv else MODEL
    report = check_argv("torchrun", "--nnodes", "32", "--nproc_per_node", "8", "pretrain_gpt.py", *base, *argv)
    assert (code in codes(report)) if code else not [c for c in codes(report) if c not in ("ML202", "ML201")], \
        [f"{f.code} {f.message}" for f in report.findings]


def test_explain_names_every_group():
    from meshlint.report.explain import render

    report = analyse_launch(parse_launch_args(["torchrun", "--nproc_per_node", "8", "pretrain_gpt.py", *MODEL,
                                               "--tensor-model-parallel-size", "2", "--num-experts", "4",
                                               "--expert-model-parallel-size", "2"]), OPTIONS)
    text = render(report)
    assert "RankGenerator(order='tp-cp-ep-dp-pp')" in text
    for glob in ("_MODEL_PARALLEL_GROUP", "_DATA_PARALLEL_GROUP_WITH_CP", "_EXPERT_DATA_PARALLEL_GROUP"):
        assert glob in text
    assert "dense get_ranks('tp-pp') _MODEL_PARALLEL_GROUP" in text and "4 groups of 2; rank 0's: [0, 1]" in text


def test_analyse_source_dispatches_megatron():
    from meshlint.inputs.megatron_launch import make_source

    launch = parse_launch_args(["torchrun", "--nproc_per_node", "4", "pretrain_gpt.py", *MODEL])
    report = analyse_source(make_source(launch), OPTIONS, launch)
    assert report.dialect == "megatron" and report.resolution.degrees["dp_shard"] == 4


# ----------------------------------------------------------------------------- hostile launch lines

VOCAB = ["--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--num-layers", "--num-experts",
         "--expert-model-parallel-size", "--num-virtual-stages-per-pipeline-rank", "--decoder-first-pipeline-num-layers",
         "--decoder-last-pipeline-num-layers", "--global-batch-size", "--micro-batch-size", "--sequence-parallel",
         "--use-tp-pp-dp-mapping", "--rampup-batch-size", "--num-attention-heads", "--hidden-size", "--context-parallel-size",
         "--account-for-embedding-in-pipeline-split", "--tensor-model-parallel-size=", "--bogus", "0", "1", "2", "3", "4",
         "8", "16", "-1", "x", "1e3", "--", "", "99999999999"]


def test_any_launch_line_gives_findings_not_a_traceback():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(st.lists(st.sampled_from(VOCAB), max_size=14), st.sampled_from(["1", "2", "8", "16", "0"]))
    def run(argv, nproc):
        argv = [a + "2" if a.endswith("=") else a for a in argv]
        try:
            launch = parse_launch_args(["torchrun", "--nproc_per_node", nproc, "pretrain_gpt.py", *argv])
        except Exception as exc:  # noqa: BLE001 - only meshlint's own input errors are allowed
            from meshlint.errors import InputError

            assert isinstance(exc, InputError), exc
            return
        report = run_checks(analyse_launch(launch, OPTIONS), OPTIONS)
        assert report.status == "checked"
        for f in report.findings:
            assert f.message and "<error:" not in f.message and "<error:" not in (f.help or ""), f

    run()
