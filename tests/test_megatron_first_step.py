"""Megatron refusals past start-up and the Bridge fields behind them (the cases under NVIDIA/Megatron-LM#1766,
#1829 / NeMo#14288, NVIDIA-NeMo/Megatron-Bridge#2667), and the help/skip texts fixed beside them."""

from __future__ import annotations

from meshlint.engine.check import Options, run_checks
from meshlint.engine.ruleset import load_rules
from meshlint.engine.units import analyse_launch
from meshlint.frameworks.megatron import core_0_16
from meshlint.inputs import bridge_recipe
from meshlint.inputs.launch import parse_launch_args

RULES = load_rules()
OPTIONS = Options(rules=RULES, gpu_memory_gib=1e9)
MODEL = ["--num-layers", "24", "--hidden-size", "1024", "--num-attention-heads", "16", "--seq-length", "1024",
         "--max-position-embeddings", "1024", "--micro-batch-size", "1", "--mock-data", "--tokenizer-type",
         "NullTokenizer", "--vocab-size", "32000"]


def check(*argv: str, nproc: int = 8):
    launch = ["torchrun", "--nproc_per_node", str(nproc), "pretrain_gpt.py", *MODEL, *argv]
    return run_checks(analyse_launch(parse_launch_args(launch), OPTIONS), OPTIONS)


def found(report, code: str) -> list:
    return [f for f in report.findings if f.code == code]


# ----------------------------------------------------------------------------- ML986: MoE, tp > 1, no SP

MOE = ["--num-experts", "8", "--moe-router-topk", "2", "--global-batch-size", "64"]


def test_moe_with_tp_and_no_sequence_parallel_is_an_error_whatever_etp():
    for etp in ("1", "2"):
        report = check(*MOE, "--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "4",
                       "--expert-tensor-parallel-size", etp)
        [f] = found(report, "ML986")
        assert f.severity == "error" and "moe_layer.py:379-383" in f.message and "tensor parallelism 2" in f.message
        assert "add --sequence-parallel" in f.help


def test_moe_with_sequence_parallel_or_tp1_or_dense_is_fine():
    assert not found(check(*MOE, "--tensor-model-parallel-size", "2", "--sequence-parallel"), "ML986")
    assert not found(check(*MOE, "--expert-model-parallel-size", "8"), "ML986")
    assert not found(check("--global-batch-size", "64", "--tensor-model-parallel-size", "2"), "ML986")
    assert not found(check(*MOE, "--tensor-model-parallel-size", "2", "--skip-train"), "ML986")


# ----------------------------------------------------------------------------- ML988: interleaved microbatches

PP6 = ["--tensor-model-parallel-size", "2", "--sequence-parallel", "--pipeline-model-parallel-size", "6",
       "--num-virtual-stages-per-pipeline-rank", "2"]


def test_fewer_microbatches_than_the_group_is_the_users_value_error():
    report = check(*PP6, "--global-batch-size", "3", nproc=12)
    [f] = found(report, "ML988")
    assert "[PP=6 , M=3]" in f.message and "schedules.py:995-1003" in f.message
    assert "--global-batch-size to 6, 12, 18" in f.help
    assert not found(report, "ML606") and not found(report, "ML605")   # the refusal, not a bubble


def test_a_short_last_group_is_the_runtime_error():
    [f] = found(check(*PP6, "--global-batch-size", "8", nproc=12), "ML988")
    assert "8 % 6 = 2" in f.message and "schedules.py:1005-1015" in f.message


def test_whole_groups_pass_and_the_bubble_counts_virtual_stages():
    report = check(*PP6, "--global-batch-size", "12", nproc=12)
    assert not found(report, "ML988")
    plan = core_0_16.pipeline_plan(report.spec, report.resolution)
    assert plan["bubble"] == (6 - 1) / (2 * 12 + 6 - 1)
    [f] = found(check(*PP6, "--global-batch-size", "6", nproc=12), "ML606")   # 6 microbatches, 12 stages
    assert "(v·m + pp − 1) = (6 − 1) / (2·6 + 6 − 1)" in f.message


def test_a_group_size_below_pp_points_at_it():
    [f] = found(check(*PP6, "--global-batch-size", "12", "--microbatch-group-size-per-virtual-pipeline-stage", "3",
                      nproc=12), "ML988")
    assert "[PP=6 , M=12]" in f.message and f.key == "microbatch_group_size_per_vp_stage"


def test_no_virtual_stages_no_group_check():
    assert not found(check("--pipeline-model-parallel-size", "6", "--global-batch-size", "3", nproc=6), "ML988")


# ----------------------------------------------------------------------------- ML987: Bridge a2a+p2p

RECIPE = '''# meshlint: world_size=8
from megatron.bridge.models.llama import Llama3ModelProvider8B
from megatron.bridge.training.config import ConfigContainer


def llama3_8b_cp8_config() -> ConfigContainer:
    cfg = ConfigContainer(model=Llama3ModelProvider8B())
    cfg.model.context_parallel_size = 8
    cfg.model.cp_comm_type = "a2a+p2p"
{extra}    return cfg
'''


def _bridge(tmp_path, extra: str = ""):
    from meshlint.engine.check import check_all

    path = tmp_path / "recipe.py"
    path.write_text(RECIPE.replace("{extra}", extra))
    return check_all(str(path), OPTIONS)


def _codes(reports) -> list:
    return [f.code for r in reports for f in r.findings if f.severity == "error"]


def test_bridge_reads_cp_comm_type_and_refuses_a2a_p2p_without_hierarchical_sizes(tmp_path):
    reports = _bridge(tmp_path)
    [f] = [f for r in reports for f in r.findings if f.code == "ML987"]
    assert f.line == 9 and "silently off" in f.message and "v0.3.1" in f.message and "[2, 4]" in f.help
    assert "ML983" not in _codes(reports)   # Bridge runs no validate_args
    assert "ML987" not in _codes(_bridge(tmp_path, "    cfg.model.hierarchical_context_parallel_sizes = [2, 4]\n"))
    assert "ML987" not in _codes(_bridge(tmp_path, "    cfg.model.context_parallel_size = 1\n"))


def test_list_overrides_are_lists():
    assert bridge_recipe.parse_override("model.hierarchical_context_parallel_sizes=[2,4]") == \
        ("model", "hierarchical_context_parallel_sizes", [2, 4])
    assert bridge_recipe.parse_override("model.cp_comm_type=a2a+p2p") == ("model", "cp_comm_type", "a2a+p2p")


def test_the_launch_line_path_still_refuses_it_at_validate_args():
    report = check("--global-batch-size", "64", "--context-parallel-size", "8", "--cp-comm-type", "a2a+p2p")
    assert any("arguments.py:407" in f.message for f in found(report, "ML983"))
    assert not found(report, "ML987")


# ----------------------------------------------------------------------------- texts

def test_ml963_help_does_not_propose_first_last_beside_layers_per_virtual_stage():
    [f] = found(check("--global-batch-size", "64", "--pipeline-model-parallel-size", "4",
                      "--num-layers-per-virtual-pipeline-stage", "4", nproc=4), "ML963")
    assert "replace --num-layers-per-virtual-pipeline-stage by --num-virtual-stages-per-pipeline-rank" in f.help


def test_ml963_blames_the_disabled_p2p_overlap_not_the_split():
    [f] = found(check("--global-batch-size", "64", "--pipeline-model-parallel-size", "2",
                      "--num-virtual-stages-per-pipeline-rank", "2", "--no-overlap-p2p-communication", nproc=2),
                "ML963")
    assert "cannot be split" not in f.message and "arguments.py:579" in f.message
    assert f.help.startswith("drop --no-overlap-p2p-communication")


def test_ml203_help_for_cp_speaks_of_cp():
    report = run_checks(analyse_launch(parse_launch_args(
        ["torchrun", "--nnodes", "2", "--nproc_per_node", "4", "pretrain_gpt.py", *MODEL, "--global-batch-size", "8",
         "--context-parallel-size", "8"]), OPTIONS), OPTIONS)
    [f] = found(report, "ML203")
    assert "CP across nodes" in f.help and "EP" not in f.help


def test_a_bridge_script_without_recipe_is_skipped_with_a_bridge_note(tmp_path):
    from meshlint.engine.check import check_all

    path = tmp_path / "repro.py"
    path.write_text("from megatron.bridge import AutoBridge\n\nbridge = AutoBridge.from_hf_pretrained('x')\n"
                    "provider = bridge.to_megatron_provider()\nprovider.tensor_model_parallel_size = 4\n")
    [r] = check_all(str(path), OPTIONS)
    assert r.status == "skipped" and "megatron.bridge" in r.note and "torchtitan" not in r.note


# ----------------------------------------------------------------------------- ML989: flex dispatcher, etp·ep = 1

FLEX = [*MOE, "--moe-token-dispatcher-type", "flex", "--disable-bias-linear"]


def test_flex_dispatcher_without_expert_parallelism_is_an_error():
    report = check(*FLEX, "--pipeline-model-parallel-size", "2")
    [f] = found(report, "ML989")
    assert f.severity == "error" and "token_dispatcher.py:1346" in f.message
    assert "expert parallelism 1 and expert tensor parallelism 1" in f.message
    assert "--expert-model-parallel-size to 2, 4 (" in f.help and "alltoall" in f.help
    # either degree lifts it: the check multiplies the expert tp group by the ep group
    assert not found(check(*FLEX, "--expert-model-parallel-size", "2"), "ML989")
    assert not found(check(*FLEX, "--tensor-model-parallel-size", "2", "--sequence-parallel",
                           "--expert-tensor-parallel-size", "2"), "ML989")
    # tp alone does not: MoEFlexTokenDispatcher reads the expert tp group (--expert-tensor-parallel-size 1)
    assert found(check(*FLEX, "--tensor-model-parallel-size", "2", "--sequence-parallel",
                       "--expert-tensor-parallel-size", "1"), "ML989")
    assert not found(check(*MOE, "--moe-token-dispatcher-type", "alltoall"), "ML989")
    # one rank left: no ep > 1 fits, the help names another dispatcher only
    [f] = found(check(*FLEX, nproc=1), "ML989")
    assert "--expert-model-parallel-size" not in f.help and "alltoall" in f.help


FLEX_RECIPE = '''# meshlint: world_size=8
from megatron.bridge.models.olmoe import OlMoEModelProvider
from megatron.bridge.training.config import ConfigContainer


def olmoe_flex_config() -> ConfigContainer:
    cfg = ConfigContainer(model=OlMoEModelProvider())
    cfg.model.moe_token_dispatcher_type = "flex"
{extra}    return cfg
'''


def test_bridge_recipe_with_flex_dispatcher_and_no_expert_parallelism(tmp_path):
    from meshlint.engine.check import check_all

    def run(extra: str = ""):
        path = tmp_path / "recipe.py"
        path.write_text(FLEX_RECIPE.replace("{extra}", extra))
        return [f for r in check_all(str(path), OPTIONS) for f in r.findings if f.code == "ML989"]

    [f] = run()
    assert "model.moe_token_dispatcher_type flex" in f.message and "expert_model_parallel_size to" in f.help
    assert not run("    cfg.model.expert_model_parallel_size = 8\n")


# ----------------------------------------------------------------------------- explain: stages in the model's order

def test_interleaved_layer_counts_are_listed_in_stage_order():
    """NVIDIA/Megatron-LM#1852: with virtual stages the stage list follows the layout string (stage v·pp + r is rank
    r's chunk v), so the empty stages of "Et|(tt|)*14|(tt|)*13ttt|ttt|L" (stages 15 and 31: rank 15) show where the
    string puts them; the release builds [1, 2] on rank 0 and [0, 0] on rank 15 (tests/test_real_megatron.py's
    layout mode runs the same string)."""
    from meshlint.frameworks.megatron.core_0_16 import pipeline_plan

    report = check("--global-batch-size", "64", "--pipeline-model-parallel-size", "16", "--num-layers", "61",
                   "--pipeline-model-parallel-layout", "Et|(tt|)*14|(tt|)*13ttt|ttt|L", nproc=16)
    plan = pipeline_plan(report.spec, report.resolution)
    assert plan["stages"] == 32 and plan["stages_per_rank"] == 2
    assert plan["layer_counts"] == [1] + [2] * 14 + [0] + [2] * 13 + [3, 3, 0]


# ----------------------------------------------------------------------------- ML203: a long group's example

def test_a_crossing_group_longer_than_its_example_says_so():
    """NVIDIA-NeMo/Megatron-Bridge#4980's ep 32 over 4 nodes: the placement fact keeps a group's first 16 members;
    the message showed them as "{0-15}", a whole group of 16, for a group of 32."""
    moe = ["--num-experts", "64", "--moe-router-topk", "2", "--global-batch-size", "64"]
    options = OPTIONS

    def crossing(ep: str, nproc: int) -> list:
        launch = ["torchrun", "--nproc_per_node", "8", "--nnodes", str(nproc // 8), "pretrain_gpt.py", *MODEL, *moe,
                  "--expert-model-parallel-size", ep]
        report = run_checks(analyse_launch(parse_launch_args(launch), options), options)
        return [f.message for f in report.findings if f.code == "ML203"]

    [long] = crossing("32", 32)
    assert "a group like {0-15} (its first 16 of 32 ranks) on 4 nodes" in long, long
    [short] = crossing("16", 32)
    assert "a group like {0-15} on 2 nodes" in short, short
