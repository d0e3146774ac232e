"""The cost model's communication terms in closed form, and against the bytes real smoke steps moved (docs/cost-model.md)."""

from __future__ import annotations

import pytest

from meshlint.estimate import cost

# The smoke's tiny decoder as bench/bench_cost_vs_smoke.py fixes it: d 256, 16 heads x 16, 8 KV heads,
# 4 layers, vocab 512, 256-token sequences, fp32; one microbatch without pp, max(pp, 2) with 1F1B.
D, L, V, SEQ, HQ, KQ, HIDDEN = 256, 4, 512, 256, 256, 128, 1024
PARAMS = V * D + L * (D * HQ + 2 * D * KQ + HQ * D + 3 * D * HIDDEN + 2 * D) + D + D * V


def _work(param_bytes=4, m=2, schedule="1F1B"):
    return cost.Workload("torchtitan@0.2.x", PARAMS, 0, PARAMS, L, 0, D, HQ, KQ, 0, V, SEQ, ((SEQ, m), (SEQ, 1)),
                         schedule, 16, param_bytes, "none", "test")


def _bytes(work, world, **degrees) -> dict:
    """Ring bytes each rank sends per iteration, by kind: the model priced on a 1 GB/s link with no latency."""
    link = cost.Link(1.0, 0.0)
    profile = cost.Cluster("test", "test", world, 1.0, 1e6, link, link, 1.0, "none", 0.5)
    full = {k: degrees.get(k, 1) for k in ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep", "etp")}
    return {k: v * 1e9 for k, v in cost.Model(work, profile, world, world, "block", 1e6).estimate(full).raw.items()}


def test_activations_travel_in_the_parameters_dtype():
    """fp32 training moves fp32 activations: TP, CP and PP messages are twice the bf16 ones (they were priced as
    bf16 whatever the config said)."""
    for degrees in ({"tp": 4}, {"cp": 4}, {"pp": 4}):
        fp32, bf16 = _bytes(_work(4, m=4), 4, **degrees), _bytes(_work(2, m=4), 4, **degrees)
        kind = next(iter(degrees))
        assert fp32[kind] == pytest.approx(2 * bf16[kind])


def test_tp_cp_fsdp_closed_forms():
    act = 4
    tp = _bytes(_work(), 4, tp=4)["tp"]   # 4 AG/RS per layer and pass (sequence parallel), 2 passes
    assert tp == pytest.approx(L * 4 * 2 * 3 / 4 * SEQ * D * act)
    cp = _bytes(_work(), 4, cp=4)["cp"]   # K and V chunks, (cp-1)·(passes+1) ring steps per layer
    assert cp == pytest.approx(L * 3 * 3 * 2 * SEQ / 4 * KQ * act)
    fsdp = _bytes(_work(), 4, dp_shard=4)["fsdp"]   # no pp: 2 gathers of fp32 params, 1 scatter of fp32 grads
    assert fsdp == pytest.approx(3 * 3 / 4 * PARAMS * 4)


@pytest.mark.parametrize("pp, schedule, sends", [(2, "1F1B", 1), (4, "1F1B", 2), (2, "Interleaved1F1B", 3),
                                                  (4, "Interleaved1F1B", 4), (2, "ZBVZeroBubble", 2),
                                                  (3, "DualPipeV", 4), (1, "1F1B", 0)])
def test_pipeline_sends_of_the_busiest_rank(pp, schedule, sends):
    assert cost.pp_sends(pp, schedule) == sends
    if pp > 1:
        got = _bytes(_work(m=4, schedule=schedule), pp, pp=pp)["pp"]
        assert got == pytest.approx(4 * sends * SEQ * D * 4)


# Bytes per rank a real step moved (bench/bench_cost_vs_smoke.py, 4 gloo ranks, the tiny decoder above, counted in
# every collective of the forward and backward), where the smoke parallelizes as the framework does.
MEASURED_MB = {"fsdp dp_shard=4": 36.98, "pp pp=4": 1.57}


def test_model_matches_the_bytes_real_steps_moved():
    fsdp = _bytes(_work(), 4, dp_shard=4)["fsdp"] / 1e6
    assert fsdp == pytest.approx(MEASURED_MB["fsdp dp_shard=4"], rel=0.03)   # the root module is gathered once
    # pp=4, 4 microbatches: the busiest rank sends 2 per microbatch; the mean over ranks (measured) is 2·(pp-1)/pp
    busiest = _bytes(_work(m=4), 4, pp=4)["pp"] / 1e6
    assert busiest * 3 / 4 == pytest.approx(MEASURED_MB["pp pp=4"], rel=0.01)
