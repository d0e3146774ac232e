"""Pipeline plans: stage splits worked out by hand, and the schedule checks run against torch itself."""

from __future__ import annotations

import types

import pytest

from meshlint.mesh import pipeline

# ---------------------------------------------------------------------------- stage splits


@pytest.mark.parametrize("pp, n_layers, counts", [
    (4, 32, [8, 8, 8, 8]), (4, 30, [8, 8, 7, 7]), (3, 10, [4, 3, 3]), (2, 2, [1, 1]),
])
def test_kempnerforge_gives_the_earlier_stages_the_extra_layers(pp, n_layers, counts):
    plan = pipeline.kempnerforge(pp, n_layers, "1f1b", grad_accum_steps=pp, batch_size=8)
    assert plan["layer_counts"] == counts and sum(counts) == n_layers and plan["split_error"] is None


def test_kempnerforge_refuses_more_stages_than_layers_and_interleaving():
    assert pipeline.kempnerforge(8, 6, "1f1b", 8, 8)["split_error"] == "ValueError: pp_size (8) cannot exceed n_layers (6)"
    assert "requires a list of PipelineStage" in pipeline.kempnerforge(2, 8, "interleaved_1f1b", 8, 8)["schedule_error"]
    assert pipeline.kempnerforge(4, 8, "1f1b", 2, 8)["schedule_error"].startswith("ValueError: Number of microbatches (2)")


def tt(pp, n_layers, schedule="1F1B", layers_per_stage=None, first=1, last=1, local_batch=8, microbatch=1):
    return pipeline.torchtitan(pp, n_layers, schedule, layers_per_stage, first, last, local_batch, microbatch)


@pytest.mark.parametrize("kwargs, stages, counts, effective", [
    # llama3 8B: 32 + 1 + 1 = 34 effective layers
    (dict(pp=2, n_layers=32), 2, [16, 16], [17, 17]),
    (dict(pp=4, n_layers=32), 4, [8, 9, 8, 7], [9, 9, 8, 8]),
    (dict(pp=2, n_layers=32, schedule="Interleaved1F1B"), 4, [8, 9, 8, 7], [9, 9, 8, 8]),
    (dict(pp=4, n_layers=32, first=2, last=2), 4, [7, 9, 9, 7], [9, 9, 9, 9]),
    (dict(pp=4, n_layers=32, first=0, last=0), 4, [8, 8, 8, 8], [8, 8, 8, 8]),
    # layers_per_stage fixes the virtual stage count: ceil((32 + 2) / 3) = 12, 6 per rank
    (dict(pp=2, n_layers=32, schedule="Interleaved1F1B", layers_per_stage=3), 12,
     [2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 1], [3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2]),
    (dict(pp=1, n_layers=32), 1, [32], [34]),
    # llama3 405B on 8 ranks, 2 virtual stages each: 128 effective layers, 8 per stage
    (dict(pp=8, n_layers=126, schedule="interleaved1f1b", local_batch=16), 16, [7] + [8] * 14 + [7], [8] * 16),
])
def test_torchtitan_splits_layers_like_generate_llm_fqn_per_model_part(kwargs, stages, counts, effective):
    plan = tt(**kwargs)
    assert plan["stages"] == stages
    assert plan["layer_counts"] == counts and plan["effective_counts"] == effective
    if counts:
        assert sum(counts) == kwargs["n_layers"]


@pytest.mark.parametrize("kwargs, error", [
    (dict(pp=8, n_layers=6, schedule="Interleaved1F1B"),
     "ValueError: Number of stages (16) cannot be greater than effective layers (8)"),
    (dict(pp=4, n_layers=6, first=5, schedule="GPipe"), "ValueError: input_weight (5) exceeds minimum layers per stage (3)."),
    (dict(pp=4, n_layers=6, last=4, schedule="GPipe"), "ValueError: output_weight (4) exceeds minimum layers per stage (2)."),
    (dict(pp=4, n_layers=32, layers_per_stage=4),
     "ValueError: Number of virtual stages (9) must be divisible by pipeline parallel size (4)."),
    (dict(pp=2, n_layers=32, layers_per_stage=3),
     "ValueError: Single stage schedule requires exactly 1 stage per rank, but got 6 stages per rank."),
    (dict(pp=2, n_layers=32, layers_per_stage=17, schedule="Interleaved1F1B"),
     "ValueError: Multi-stage schedule requires at least 2 stages per rank, but got 1 stages per rank."),
    (dict(pp=2, n_layers=32, layers_per_stage=6, schedule="ZBVZeroBubble"),
     "AssertionError: v schedules assume 2 stages per rank, got 3"),
])
def test_torchtitan_refuses_splits_it_cannot_build(kwargs, error):
    assert tt(**kwargs)["split_error"].startswith(error)


def test_unknown_schedules_and_microbatch_counts():
    assert tt(pp=2, n_layers=32, schedule="1F1B-interleaved")["unknown_schedule"]
    assert tt(pp=2, n_layers=32, local_batch=8, microbatch=2)["n_microbatches"] == 4
    assert tt(pp=2, n_layers=32, local_batch=8, microbatch=3)["n_microbatches"] is None  # ML604's case
    assert tt(pp=4, n_layers=32, local_batch=6, schedule="GPipe")["bubble"] == pytest.approx(3 / 9)


# ---------------------------------------------------------------------------- schedules, against torch

def _stub_stage(pp: int, per_rank: int, index: int):
    """What a schedule's constructor reads from a PipelineStage: no process group needed."""
    import torch

    total = pp * per_rank
    return types.SimpleNamespace(num_stages=total, group_size=pp, group_rank=0, stage_index=index,
                                 is_first=index == 0, is_last=index == total - 1, submod=torch.nn.Linear(1, 1),
                                 stage_index_to_group_rank={})


def _torch_verdict(name: str, pp: int, per_rank: int, m: int) -> str | None:
    from torch.distributed.pipelining import schedules

    cls = getattr(schedules, "Schedule" + name)
    try:
        if per_rank == 1:
            cls(_stub_stage(pp, 1, 0), m)
        else:
            cls([_stub_stage(pp, per_rank, pp * k) for k in range(per_rank)], m)
    except ValueError as exc:
        return f"ValueError: {exc}"
    return None


CASES = [(name, pp, per, m)
         for name, per_options in (("1F1B", (1,)), ("GPipe", (1,)), ("Interleaved1F1B", (2, 3)), ("LoopedBFS", (2,)),
                                   ("InterleavedZeroBubble", (2, 3)), ("ZBVZeroBubble", (2,)), ("DualPipeV", (2,)))
         for per in per_options for pp in (2, 3, 4) for m in range(1, 14)]


def test_schedule_checks_agree_with_torch_on_every_case():
    pytest.importorskip("torch")
    disagreements = []
    for name, pp, per, m in CASES:
        n_layers = pp * per * 4 - 2  # 4 effective layers per virtual stage
        plan = tt(pp=pp, n_layers=n_layers, schedule=name, layers_per_stage=4 if per != 1 else None,
                  local_batch=m, microbatch=1)
        assert plan["split_error"] is None and plan["stages"] == pp * per, (name, pp, per)
        expected = _torch_verdict(name, pp, per, m)
        if plan["schedule_error"] != expected:
            disagreements.append((name, pp, per, m, plan["schedule_error"], expected))
    assert not disagreements, disagreements[:5]
    assert sum(_torch_verdict(*c) is not None for c in CASES) > 40  # the grid really exercises the refusals


# ---------------------------------------------------------------------------- in reports

def test_json_and_explain_show_the_model_and_the_pipeline(write):
    import json

    from conftest import ROOT, run_cli, run_cli_json

    path = write('# meshlint: gpus_per_node=8\n[model]\nname = "llama3"\nflavor = "70B"\n\n[parallelism]\n'
                 'tensor_parallel_degree = 8\npipeline_parallel_degree = 2\n'
                 'pipeline_parallel_schedule = "Interleaved1F1B"\n', "tt_16gpu.toml")
    _, doc = run_cli_json("check", str(path))
    f = doc["files"][0]
    assert f["model"]["known"] and f["model"]["n_layers"] == 80 and f["model"]["params"] > 70e9
    assert f["pipeline"] == {"schedule": "Interleaved1F1B", "stages": 4, "stages_per_rank": 2,
                             "layer_counts": [20, 21, 20, 19], "effective_counts": [21, 21, 20, 20],
                             "n_microbatches": 8, "microbatch_size": 1, "bubble": pytest.approx(1 / 9),
                             "split_error": None, "schedule_error": None}
    import jsonschema

    jsonschema.Draft7Validator(json.loads((ROOT / "docs" / "report-v1.schema.json").read_text())).validate(doc)
    _, out = run_cli("explain", str(path))
    assert "  model      llama3 70B: 80 layers, 64 heads / 8 KV heads, dim 8192" in out
    assert ("  pipeline   Interleaved1F1B, 4 stages (2 per rank): layers 20, 21, 20, 19 "
            "(with embedding/output 21, 21, 20, 20); 8 microbatches of 1, bubble 11%") in out
