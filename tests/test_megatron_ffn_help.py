"""ML966's help keeps the model: it proposes a tensor-parallel size that shards the FFN and the heads as they are,
never a different --ffn-hidden-size."""

from __future__ import annotations

from meshlint.engine.check import Options, run_checks
from meshlint.engine.ruleset import load_rules
from meshlint.engine.units import analyse_launch
from meshlint.inputs.launch import parse_launch_args

OPTIONS = Options(rules=[r for r in load_rules() if r.code == "ML966"])


def _help(*argv: str, world: int = 8) -> str:
    launch = parse_launch_args(["torchrun", f"--nproc_per_node={world}", "pretrain_gpt.py", "--num-layers", "8",
                                "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "1",
                                *argv])
    found = [f for f in run_checks(analyse_launch(launch, OPTIONS), OPTIONS).findings if f.code == "ML966"]
    assert len(found) == 1, found
    return found[0].help


def test_the_help_proposes_a_tp_dividing_the_ffn_and_the_heads():
    text = _help("--hidden-size", "4096", "--num-attention-heads", "32", "--ffn-hidden-size", "11004",
                 "--tensor-model-parallel-size", "8")
    assert text.startswith("use tp in 2, 4 ") and "keeping the model" in text and "--ffn-hidden-size" not in text


def test_query_groups_and_the_world_limit_the_proposal():
    # 11004 = 2^2 * 3 * 7 * 131 and 24 heads: tp 2, 3, 4, 6, 12; 3 query groups keep 3, 6, 12 (ML965); a world of
    # 24 keeps 3, 6 and 12, one of 16 none of them
    model = ("--hidden-size", "3072", "--num-attention-heads", "24", "--ffn-hidden-size", "11004",
             "--tensor-model-parallel-size", "8")
    assert _help(*model, world=24).startswith("use tp in 2, 3, 4, 6, 12 ")
    grouped = (*model, "--group-query-attention", "--num-query-groups", "3")
    assert _help(*grouped, world=24).startswith("use tp in 3, 6, 12 ")
    assert _help(*grouped, world=16).startswith("no tp above 1 ")


def test_no_tp_fits_says_so():
    text = _help("--hidden-size", "4096", "--num-attention-heads", "31", "--ffn-hidden-size", "11001",
                 "--tensor-model-parallel-size", "8")
    assert "no tp above 1" in text and "use tp = 1" in text
