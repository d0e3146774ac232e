"""--rampup-batch-size (meshlint/frameworks/megatron/rampup.py, ML984) against Megatron-Core 0.16.1's own
RampupBatchsizeNumMicroBatchesCalculator on seeded ramps: the same first refusal (line), at the same training
iteration, and none where the real calculator runs the whole training through. The real class runs in a
subprocess (tests/real_megatron_worker.py, mode ``rampup``) from the megatron-core wheel in .frameworks."""

from __future__ import annotations

import random
import re

import pytest

from meshlint.frameworks.megatron import rampup
from tests.test_real_megatron import WHEEL, _absent_core, _run

SEED = 20261129
N = 600


def _cases(n: int) -> list:
    rng = random.Random(SEED)
    out = []
    for _ in range(n):
        mbs, dp = rng.choice([1, 1, 2, 4]), rng.choice([1, 2, 3, 4, 8])
        unit = mbs * dp
        start = rng.choice([unit, 2 * unit, unit + rng.choice([0, 1, 2]), rng.randint(-1, 64)])
        incr = rng.choice([unit, 2 * unit, rng.randint(0, 24)])
        k = rng.randint(0, 6)
        gbs = start + k * incr + rng.choice([0, 0, 0, rng.randint(-3, 3)])
        samples = rng.choice([0, rng.randint(1, 50), rng.randint(50, 3000), -1])
        out.append({"ramp": [start, incr, samples], "gbs": gbs, "mbs": mbs, "dp": dp,
                    "decrease": rng.random() < 0.1, "train_samples": rng.randint(0, 6000)})
    return out


def test_rampup_refusals_match_the_real_calculator():
    why = _absent_core()
    if why:
        pytest.skip(why)
    cases = _cases(N)
    real = _run("rampup", cases, [WHEEL])
    refused = training = 0
    for case, got in zip(cases, real):
        mine = rampup.refusal(case["ramp"], case["gbs"], case["mbs"], case["dp"], case["decrease"],
                              case["train_samples"])
        if got["error"] is None:
            assert mine is None, (case, mine, got)
            continue
        assert mine is not None, (case, got)
        assert mine["site"] == f"num_microbatches_calculator.py:{got['line']}", (case, mine, got)
        assert mine["iteration"] == got["iteration"], (case, mine, got)
        refused += 1
        training += got["iteration"] is not None
    print(f"rampup vs the real calculator: {refused} refused at the same line and iteration ({training} during "
          f"training), {N - refused} accepted by both")
    assert refused >= N // 4 and training >= 20 and N - refused >= N // 10, (refused, training)


def test_the_cited_lines_are_the_releases():
    """The lines rampup.py names hold the statements it models, in the wheel's source."""
    source = WHEEL / "megatron" / "core" / "num_microbatches_calculator.py"
    if not source.is_file():
        pytest.skip(_absent_core() or "no wheel")
    lines = source.read_text(encoding="utf-8").splitlines()
    expect = {398: "global_batch_size > 0", 401: "start_global_batch_size > 0", 404: "batch_size_increment > 0",
              407: "ramup_samples >= 0", 421: "micro_batch_times_data_parallel_size > 0",
              425: "diff_batch_size >= 0", 429: "diff_batch_size % batch_size_increment == 0",
              436: "self.ramup_samples / num_increments", 456: "consumed_samples / self.rampup_samples_per_increment",
              476: "self.current_global_batch_size % self.micro_batch_times_data_parallel_size == 0"}
    for line, text in expect.items():
        assert text in lines[line - 1], (line, lines[line - 1])
    assert re.search(r"def refusal", (rampup.__file__ and open(rampup.__file__).read()))


def test_a_long_ramp_is_followed_by_segments():
    """GPT-3's ramp (32 -> 1536 by 16 over 4.9M samples... here 300M samples): answered without iterating."""
    assert rampup.refusal([32, 32, 300_000_000], 4096, 1, 32, False, 1_000_000_000) is None
    bad = rampup.refusal([32, 32, 300_000_000], 4096, 1, 64, False, 1_000_000_000)
    assert bad["site"].endswith(":476") and bad["iteration"] == 0
    odd = rampup.refusal([64, 32, 300_000], 4096, 1, 64, False, 1_000_000_000)
    assert odd["site"].endswith(":476") and "batch size 96" in odd["message"] and odd["iteration"] > 0


def test_a_ramp_of_many_increments_is_followed_to_its_first_indivisible_batch():
    # a million increments of 1 over 10^12 samples: batch 3 (odd, on dp 2) comes after 10^6 / 2 samples
    bad = rampup.refusal([2, 1, 10**12], 10**6 + 2, 1, 2, False, 10**13)
    assert bad["site"].endswith(":476") and "batch size 3 " in bad["message"]
    # a million increments of 2: every batch size divides, nothing to follow
    assert rampup.refusal([2, 2, 10**12], 2 * 10**6 + 2, 1, 2, False, 10**13) is None


def test_ML964_matches_the_constant_calculator_with_and_without_decreasing():
    """ML964 (a launch's global batch, micro batch and dp, --decrease-batch-size-if-needed or not) fires exactly
    where Megatron-Core's ConstantNumMicroBatchesCalculator raises, at the line its message names."""
    why = _absent_core()
    if why:
        pytest.skip(why)
    from meshlint.engine.check import Options, run_checks
    from meshlint.engine.ruleset import load_rules
    from meshlint.engine.units import analyse_launch
    from meshlint.inputs.launch import parse_launch_args

    rng = random.Random(SEED + 1)
    cases = [{"gbs": rng.randint(1, 40), "mbs": rng.choice([1, 2, 4]), "dp": rng.choice([1, 2, 4, 8]),
              "decrease": rng.random() < 0.5} for _ in range(120)]
    real = _run("constant", cases, [WHEEL])
    options = Options(rules=[r for r in load_rules() if r.code == "ML964"])
    refused = 0
    for case, got in zip(cases, real):
        argv = ["torchrun", f"--nproc_per_node={case['dp']}", "pretrain_gpt.py", "--num-layers", "8", "--hidden-size",
                "256", "--num-attention-heads", "8", "--seq-length", "128", "--max-position-embeddings", "128",
                "--micro-batch-size", str(case["mbs"]), "--global-batch-size", str(case["gbs"])]
        argv += ["--decrease-batch-size-if-needed"] if case["decrease"] else []
        report = run_checks(analyse_launch(parse_launch_args(argv), options), options)
        found = [f.message for f in report.findings if f.code == "ML964"]
        if got["error"] is None:
            assert not found, (case, found)
            continue
        refused += 1
        line = _statement(got["line"])
        assert len(found) == 1 and f"num_microbatches_calculator.py:{line})" in found[0], (case, found, got)
    assert 20 <= refused <= 100, refused


def _statement(line: int) -> int:
    """The first line of the wheel's assert/raise statement holding ``line`` (a traceback names the failing part)."""
    import ast

    tree = ast.parse((WHEEL / "megatron" / "core" / "num_microbatches_calculator.py").read_text(encoding="utf-8"))
    return next(n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Assert, ast.Raise))
                and n.lineno <= line <= n.end_lineno)
