"""Megatron-Core 0.16.1: --pipeline-model-parallel-layout read as the release reads it (layout.py, the split, explain's
pipeline facts), and ML961's help proposing only degrees that divide (tests/test_real_megatron.py compares the layout
with the release's own class where it is installed)."""

from __future__ import annotations

import math
import random
import re

import pytest

from meshlint.frameworks.megatron import core_0_16, layout
from tests.test_megatron import MODEL, check_argv, codes


@pytest.mark.parametrize("text, pp, layers, counts, vp", [
    ("Et|tt|ttt|ttL", 4, 8, [[1], [2], [3], [2]], None),
    ("E|t|t|t|t|t|t|t,tL", 4, 8, [[0, 1], [1, 1], [1, 1], [1, 2]], 2),
    ("E(tt|)*3,tt,L", 4, 8, [[2], [2], [2], [2]], None),        # the last stage "ttL"
    ("E|(t|)*6,tt,L", 4, 8, [[0, 1], [1, 1], [1, 1], [1, 2]], 2),  # the second case, written short
    ("Ettt|ttt||ttL", 4, 8, [[3], [3], [0], [2]], None),        # an empty stage is allowed
    ("Et*3|t*3|t*2L", 3, 8, [[3], [3], [2]], None),
    ("Ettttttt|tL", 1, 8, [[7, 1]], 2),                         # split, then refused for pp 1 below
])
def test_layout_strings_resolve_like_the_release(text, pp, layers, counts, vp):
    got = layout.resolve(text, pp, layers, None)
    assert got["counts"] == counts and got["vp"] == vp
    split = core_0_16.layer_split({"num_layers": layers, "pipeline_model_parallel_layout": text}, pp)
    if pp == 1 and vp:  # validate_args: virtual stages need pp > 1 (arguments.py:575), before TransformerConfig
        assert split["error"] and split["source"] == "arguments.py:575"
    else:
        assert split["error"] is None and split["counts"] == counts and split["vp"] == vp


def test_the_list_form_a_python_config_gives_resolves_like_its_string():
    """Megatron-Bridge recipes (Kimi-K2's _get_kimi_k2_pipeline_layout) give the layout as a list of stages of
    layer-type names, which PipelineParallelLayerLayout.__init__ takes as well as the string."""
    rows = [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4] * 14 + [["decoder", "Loss "]]
    text = "Etttt|" + "tttt|" * 14 + "tL"
    for pp in (16, 8, 4, 2):
        assert layout.resolve(rows, pp, 61, None) == layout.resolve(text, pp, 61, None)
    with pytest.raises(layout.LayoutError, match="'encoder' is not a valid LayerType"):
        layout.stages([["embedding", "encoder"], ["loss"]])
    with pytest.raises(layout.LayoutError, match="a list of lists"):
        layout.stages(["Et", "tL"])
    split = core_0_16.layer_split({"num_layers": 61, "pipeline_model_parallel_layout": rows}, 16)
    assert split["error"] is None and split["counts"] == [[4]] + [[4]] * 14 + [[1]]


@pytest.mark.parametrize("text, pp, layers, mtp, says", [
    ("Et|tt|tx|ttttL", 4, 8, None, "Invalid layer character: 'x'"),
    ("Et|tt|tt|tt|tL", 4, 8, None, "5 stages, not divisible by pipeline_model_parallel_size (4)"),
    ("tE|tt|ttt|ttL", 4, 8, None, "first layer must be embedding"),
    ("Et|tt|ttt|Ltt", 4, 8, None, "last layer must be loss"),
    ("EEt|tt|ttt|ttL", 4, 8, None, "Embedding must be specified exactly once"),
    ("EtL|tt|ttt|ttL", 4, 8, None, "Loss must be specified exactly once"),
    ("Et|tt|tt|ttL", 4, 8, None, "Number of decoder layers 7"),
    ("Et|tt|ttt|ttmL", 4, 8, None, "Number of mtp layers in layout (1) must match mtp_num_layers (None)"),
    ("Et|tt|ttm|tttL", 4, 8, 1, "decoder layers must be placed before MTP layers"),
    ("Etttt|ttttm||L", 2, 8, 1, "MTP layers must be in the last virtual pipeline stage"),
    ("", 1, 8, None, "has no layers"),
])
def test_layout_refusals(text, pp, layers, mtp, says):
    with pytest.raises(layout.LayoutError, match=re.escape(says)):
        layout.resolve(text, pp, layers, mtp)


def test_layout_beside_other_split_options_is_refused_first():
    for extra in ({"decoder_first_pipeline_num_layers": 1}, {"account_for_loss_in_pipeline_split": True}):
        split = core_0_16.layer_split({"num_layers": 8, "pipeline_model_parallel_layout": "Et|tt|ttt|ttL", **extra}, 4)
        assert split["source"] == "transformer_config.py:1317" and "cannot be set with" in split["error"]
    both = core_0_16.layer_split({"num_layers": 8, "pipeline_model_parallel_layout": "Et|tt|ttt|ttL",
                                  "num_virtual_stages_per_pipeline_rank": 2}, 4)
    assert both["source"] == "arguments.py:503"


def test_layout_on_a_launch_line_gives_the_split_and_ml980():
    base = MODEL[2:]  # without --num-layers 32
    ok = check_argv("torchrun", "--nproc_per_node", "8", "pretrain_gpt.py", *base, "--num-layers", "8",
                    "--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "E|t|t|t|t|t|t|ttL")
    assert not [c for c in codes(ok) if c.startswith("ML9")], [f.message for f in ok.findings]
    split = ok.spec.extra["split"]
    assert split["vp"] == 2 and split["counts"] == [[0, 1], [1, 1], [1, 1], [1, 2]]
    assert split["embedding_at"] == (0, 0) and split["loss_at"] == (3, 1)
    bad = check_argv("torchrun", "--nproc_per_node", "8", "pretrain_gpt.py", *base, "--num-layers", "8",
                     "--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et|tt|tt|ttL")
    assert "ML981" in codes(bad) and "ML963" not in codes(bad)
    finding = next(f for f in bad.findings if f.code == "ML981")
    assert "Number of decoder layers 7 in the layout must match num_layers 8" in finding.message


# ----------------------------------------------------------------------------- ML961's help

def _ml961_cases(n: int) -> list:
    rng = random.Random(961)
    out = []
    while len(out) < n:
        tp, pp = rng.choice([1, 2, 4]), rng.choice([1, 2, 4])
        ep, etp = rng.choice([2, 3, 4, 8, 16]), rng.choice([1, 1, 2, 4])
        experts = rng.choice([8, 16, 32, 64, 12])
        world = tp * pp * rng.choice([1, 2, 3, 4, 6, 8])
        mapped = rng.random() < 0.2
        if world % (etp * ep * pp) and experts % ep == 0:
            out.append((tp, pp, ep, etp, experts, world, mapped))
    return out


@pytest.mark.parametrize("tp, pp, ep, etp, experts, world, mapped", _ml961_cases(40))
def test_ml961_help_proposes_only_degrees_that_divide(tp, pp, ep, etp, experts, world, mapped):
    nodes, per = (world // 8, 8) if world % 8 == 0 else (1, world)
    argv = ["torchrun", "--nnodes", str(nodes), "--nproc_per_node", str(per), "pretrain_gpt.py", *MODEL,
            "--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp),
            "--expert-model-parallel-size", str(ep), "--expert-tensor-parallel-size", str(etp),
            "--num-experts", str(experts), "--sequence-parallel"] + (["--use-tp-pp-dp-mapping"] if mapped else [])
    report = check_argv(*argv)
    found = [f for f in report.findings if f.code == "ML961"]
    assert len(found) == 1, [f"{f.code} {f.message}" for f in report.findings]
    text = found[0].help
    eps = re.search(r"ep in ([\d, ]+) \(", text)
    for e in map(int, eps.group(1).split(", ")) if eps else ():
        assert world % (etp * e * pp) == 0 and experts % e == 0, text
        assert not (mapped and pp > 1) or etp * e == tp, text   # ML962: the same dp for both grids
    etps = re.search(r"etp in ([\d, ]+) with ep", text)
    for e in map(int, etps.group(1).split(", ")) if etps else ():
        assert world % (e * ep * pp) == 0, text
    step = math.lcm(tp * pp, etp * ep * pp)
    assert f"a multiple of {step} GPUs" in text
    for w in map(int, re.search(r"the nearest: ([\d or]+)\)", text).group(1).split(" or ")):
        assert w % (tp * pp) == 0 and w % (etp * ep * pp) == 0 and w > 0, text
    if not eps:
        assert "no ep does" in text


@pytest.mark.parametrize("extra", [
    ["--num-layers", "30"],
    ["--num-layers", "80", "--num-layers-per-virtual-pipeline-stage", "2"],
    ["--num-layers", "48", "--decoder-first-pipeline-num-layers", "11", "--decoder-last-pipeline-num-layers", "13"],
    ["--num-layers", "34", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"],
    ["--num-layers", "8", "--pipeline-model-parallel-layout", "Ett|tt|tt|ttL"],
])
def test_ml963_and_ml980_help_propose_only_pp_values_that_split(extra):
    argv = ["torchrun", "--nnodes", "4", "--nproc_per_node", "8", "pretrain_gpt.py", *MODEL[2:], *extra,
            "--pipeline-model-parallel-size", "16"]
    report = check_argv(*argv)
    found = [f for f in report.findings if f.code in ("ML963", "ML981")]
    assert len(found) == 1, [f"{f.code} {f.message}" for f in report.findings]
    shown = re.search(r"pp in ([\d, ]+)", found[0].help)
    assert shown, found[0].help
    for pp in map(int, shown.group(1).split(", ")):
        again = check_argv(*argv[:-1], str(pp))
        assert not {"ML963", "ML981", "ML960"} & set(codes(again)), (pp, found[0].help)
