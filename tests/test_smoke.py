"""Real smokes on CPU: gloo processes started by torch's elastic agent (or torchrun), checked end to end.

Each test is a whole ``meshlint smoke`` run (a few seconds on a 2-core machine).
Faults are injected with MESHLINT_SMOKE_FAULT; after every run no process of
it may be left.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import FIXTURES, ROOT, run_subprocess

pytest.importorskip("torch")

KF_MOE = str(FIXTURES / "kempnerforge" / "moe_8gpu_tp2_ep2.toml")
TT_MOE = str(FIXTURES / "torchtitan" / "qwen3_moe_8gpu_pp2_ep2.toml")
KF_CP2 = str(FIXTURES / "kempnerforge" / "cp2_8gpu.toml")


def smoke_json(*args, env=None, timeout=120):
    proc = run_subprocess("smoke", *args, "--format", "json", env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def leftovers() -> list:
    """Processes of any smoke run still alive (there must be none between tests)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "meshlint.smoke.supervisor" in cmd and state != "Z":
            out.append(cmd)
    return out


@pytest.fixture(autouse=True)
def _nothing_left_behind():
    yield
    deadline = time.monotonic() + 5
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() == []


def test_kempnerforge_moe_tp_ep_fsdp_on_8_ranks():
    code, doc = smoke_json(KF_MOE)
    assert code == 0 and doc["ok"] and doc["version"] == 1
    assert (doc["mode"], doc["launcher"], doc["backend"], doc["device"], doc["world_size"]) == (
        "real", "elastic", "gloo", "cpu", 8)
    assert doc["meshes"] == {"device": {"dims": ["dp_shard", "ep", "tp"], "sizes": [2, 2, 2], "built": True}}
    rows = {(c["name"], c.get("axis") or c.get("mesh")): c for c in doc["checks"]}
    for axis in ("dp_shard", "ep", "tp"):
        for check in ("members", "all_gather", "all_reduce"):
            assert rows[(check, axis)]["ok"] and rows[(check, axis)]["ranks"] == 8
    assert rows[("placement", "tp")]["ok"] and rows[("placement", "ep")]["severity"] == "warning"
    assert [p["name"] for p in doc["phases"]] == ["launch", "rendezvous", "mesh", "verify", "placement", "probe",
                                                  "step"]
    step = doc["step"]
    assert step["ran"] and step["ok"] and step["max_rel_error"] <= step["tolerance"] == 1e-5
    assert {k for k, v in step["parallelisms"].items() if v} == {"fsdp", "tp", "ep"}
    assert abs(step["loss"] - step["reference_loss"]) <= 1e-5 * step["reference_loss"]
    assert set(doc["probe"]) == {"dp_shard", "ep", "tp"} and doc["probe"]["tp"]["latency_us"] > 0
    assert doc["leftover_processes"] == 0 and len(doc["placement"]) == 8
    _valid(doc)


def _valid(doc: dict) -> None:
    import jsonschema

    schema = json.loads((ROOT / "docs" / "smoke-report-v1.schema.json").read_text())
    jsonschema.Draft7Validator(schema).validate(doc)


def test_torchtitan_pp_fsdp_tp_ep_on_8_ranks():
    code, doc = smoke_json(TT_MOE)
    assert code == 0 and doc["ok"], doc["failures"]
    # all four at once, and the sharded step computes what the unsharded model computes
    step = doc["step"]
    assert step["ok"] and {k for k, v in step["parallelisms"].items() if v} == {"fsdp", "tp", "pp", "ep"}
    assert step["schedule"] == "Schedule1F1B" and step["model"]["n_experts"] == 4
    assert step["grad_norm"] == pytest.approx(step["reference_grad_norm"], rel=1e-5)
    assert set(doc["meshes"]) == {"dataloading", "dense", "sparse"}
    assert doc["meshes"]["sparse"]["sizes"] == [2, 1, 2, 2, 1]
    rows = {(c["name"], c.get("axis")) for c in doc["checks"] if c["ok"]}
    for axis in ("pp", "batch", "loss", "fsdp", "tp", "ep", "efsdp"):
        assert ("all_reduce", axis) in rows, axis
    # torchtitan puts its unused size-1 dims on the fake backend: members checked, nothing sent
    fake = {c["axis"] for c in doc["checks"] if c["name"] == "collectives"}
    assert fake == {"cp", "dp_replicate", "etp"}


def test_kempnerforge_cp2_fails_naming_the_ranks_outside_the_mesh():
    code, doc = smoke_json(KF_CP2)
    assert code == 1 and not doc["ok"]
    failure, step = doc["failures"]
    assert failure["check"] == "coverage" and failure["ranks"] == [4, 5, 6, 7]
    assert step["message"] == "no training step: ranks 4-7 are outside the mesh the framework builds"
    assert failure["message"] == ("ranks 4-7 (4 of 8) are outside mesh 'device': no coordinate and no group on any "
                                  "of its dims")
    assert any(f["rule"] == "ML301" for f in doc["static_findings"])
    assert doc["step"]["ran"] is False and doc["step"]["not_applied"]
    _valid(doc)


def test_fake_mode_builds_a_4096_rank_world_as_sample_ranks(tmp_path):
    cfg = tmp_path / "big_4096gpu.toml"
    cfg.write_text("# meshlint: gpus_per_node=8\n[parallelism]\npipeline_parallel_degree = 4\n"
                   "tensor_parallel_degree = 8\ndata_parallel_replicate_degree = 4\nexpert_parallel_degree = 8\n")
    code, doc = smoke_json(str(cfg), "--fake", "--rank", "0", "--rank", "1234", "--rank", "4095")
    assert code == 0 and doc["ok"] and doc["mode"] == "fake" and doc["ranks_checked"] == [0, 1234, 4095]
    rows = {(c["name"], c.get("axis") or c.get("mesh")): c for c in doc["checks"]}
    assert rows[("coordinate", "sparse")]["ranks"] == 3 and rows[("members", "efsdp")]["ok"]
    assert not any(c["name"] in ("all_gather", "all_reduce") for c in doc["checks"])  # no communication
    assert doc["step"]["ran"] is False and doc["step"]["reason"].startswith("--fake")
    _valid(doc)


def test_a_crashed_rank_ends_the_run_with_its_rank_and_error():
    code, doc = smoke_json(KF_MOE, "--no-step", env={"MESHLINT_SMOKE_FAULT": "crash@3:verify"})
    assert code == 1 and doc["ended"] == "failed"
    first = doc["failures"][0]
    assert first["ranks"] == [3] and first["phase"] == "verify"
    assert "InjectedCrash: injected crash on rank 3" in first["message"]
    assert doc["leftover_processes"] == 0


def test_a_rank_that_dies_silently_is_named_by_the_agent():
    code, doc = smoke_json(KF_MOE, "--no-step", env={"MESHLINT_SMOKE_FAULT": "exit@2:mesh"})
    assert code == 1
    assert any(f["check"] == "crash" and f["ranks"] == [2] and "exit code 13" in f["message"]
               for f in doc["failures"]), doc["failures"]


def test_a_hang_ends_at_the_timeout_naming_the_phase_and_the_missing_rank():
    start = time.monotonic()
    code, doc = smoke_json(KF_MOE, "--no-step", "--timeout", "10", env={"MESHLINT_SMOKE_FAULT": "hang@5:verify"})
    assert code == 1 and doc["ended"] == "timeout"
    assert time.monotonic() - start < 40
    (failure,) = doc["failures"]
    assert failure["check"] == "timeout" and failure["phase"] == "verify" and failure["ranks"] == [5]
    assert "rank 5 did not arrive (in verify, before its first collective)" in failure["message"]
    assert doc["leftover_processes"] == 0
    _valid(doc)


def test_ctrl_c_stops_every_rank():
    proc = subprocess.Popen([sys.executable, "-m", "meshlint", "smoke", KF_MOE, "--timeout", "120"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MESHLINT_SMOKE_FAULT": "hang@1:mesh"})
    time.sleep(6)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted (Ctrl-C): every rank was stopped" in out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("tp, ok", [(2, True), (4, False)])
def test_two_torchrun_nodes_on_localhost(tmp_path, tp, ok):
    # two agents on one host count as two nodes: a tp group of 4 over 2 × 2 ranks must be caught
    cfg = tmp_path / "two_nodes.toml"
    cfg.write_text(f"[parallelism]\ntensor_parallel_degree = {tp}\n")
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
                               "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", port,
                               "--rdzv-backend", "static", "-m", "meshlint", "smoke", str(cfg), "--format", "json",
                               "--timeout", "60"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for node in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    doc = json.loads(outs[0][0])  # global rank 0 runs on node 0 and prints the one report
    assert outs[1][0] == ""
    assert doc["launcher"] == "torchrun" and doc["world_size"] == 4 and doc["ok"] is ok
    assert sorted({r["node"] for r in doc["placement"]}) == [f"{socket.gethostname()}#0", f"{socket.gethostname()}#1"]
    if not ok:
        (failure,) = doc["failures"]
        assert failure["check"] == "placement" and failure["axis"] == "tp" and failure["members"] == [0, 1, 2, 3]


def test_check_smoke_runs_the_smoke_after_the_check():
    proc = run_subprocess("check", "--smoke", KF_MOE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 file checked" in proc.stdout and f"meshlint smoke {KF_MOE}: OK (real, 8 ranks" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["smoke", str(FIXTURES / "kempnerforge" / "70b_32gpu_tp4.toml"), "--world-size", "128"],
     "a world of 128 ranks is too large to start on this host"),
    (["smoke", KF_MOE, "--rank", "3"], "--rank picks the ranks of a --fake smoke"),
    (["smoke", KF_MOE, "--fake", "--rank", "9"], "--rank 9 is outside the world of 8 ranks"),
])
def test_usage_errors_exit_2(args, message):
    proc = run_subprocess(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------- the training step


def test_kempnerforge_dense_tp_pp_fsdp_step_matches_the_unsharded_model():
    code, doc = smoke_json(str(FIXTURES / "kempnerforge" / "dense_8gpu_tp2_pp2.toml"))
    assert code == 0, doc["failures"]
    step = doc["step"]
    assert {k for k, v in step["parallelisms"].items() if v} == {"fsdp", "tp", "pp"}
    assert step["schedule"] == "ScheduleGPipe" and step["loss_rel_error"] <= 1e-5
    assert step["peak_memory_mb"]["max"] > 0 and set(step["seconds"]) == {"reference", "build", "step"}
    _valid(doc)


def test_a_broken_parallelization_fails_the_numeric_check():
    # MESHLINT_SMOKE_SABOTAGE=data: every rank reads the first data shard (a wrong batch split)
    code, doc = smoke_json(str(FIXTURES / "kempnerforge" / "dense_8gpu_tp2_pp2.toml"),
                           env={"MESHLINT_SMOKE_SABOTAGE": "data"})
    assert code == 1 and doc["step"]["ran"] and doc["step"]["ok"] is False
    gradients = [f for f in doc["failures"] if f.get("quantity") == "gradients"]
    assert len(gradients) == 1 and gradients[0]["message"].startswith("21 of 21 parameter gradients differ")
    assert "fsdp" in gradients[0]["suspects"] and "tp" not in gradients[0]["suspects"]
    assert any(f.get("quantity") == "loss" for f in doc["failures"])


def test_scale_to_runs_a_32_gpu_config_on_8_ranks(tmp_path):
    cfg = tmp_path / "tt_32gpu.toml"
    cfg.write_text("[parallelism]\ndata_parallel_replicate_degree = 2\ntensor_parallel_degree = 2\n"
                   "pipeline_parallel_degree = 2\n")
    code, doc = smoke_json(str(cfg), "--scale-to", "8")
    assert code == 0 and doc["world_size"] == 8, doc["failures"]
    assert doc["scaled"] == {"from": 32, "to": 8, "before": {"dp_replicate": 2, "dp_shard": 4},
                             "after": {"dp_replicate": 1, "dp_shard": 2}, "kept": {"tp": 2, "pp": 2, "cp": 1,
                                                                                     "ep": 1, "etp": 1}}
    # dp_replicate gives way so that dp_shard stays at least 2 (FSDP keeps sharding)
    assert doc["notes"][0] == "scaled from 32 to 8 ranks: dp_replicate 2 → 1, dp_shard 4 → 2 (tp 2, pp 2 kept)"
    assert doc["step"]["ok"] and doc["step"]["parallelisms"]["fsdp"]


def test_a_combination_the_framework_refuses_is_a_failure_that_says_so(tmp_path):
    cfg = tmp_path / "moe_pp_8gpu.toml"
    cfg.write_text("[model]\nnum_experts = 4\n[train]\ngrad_accum_steps = 4\n[distributed]\npp = 2\nep = 2\n")
    code, doc = smoke_json(str(cfg))
    assert code == 1 and doc["step"]["ran"] is False and doc["step"]["ok"] is False
    assert any(f["message"].startswith("no training step: the framework refuses this config (ML307")
               for f in doc["failures"])
    assert doc["meshes"]["device"]["built"]  # the mesh itself is still built and verified


TT_HSDP_CP_ETP = ("# meshlint: gpus_per_node=8\n[model]\nname = \"qwen3\"\nflavor = \"debugmodel_moe\"\n"
                  "[training]\nseq_len = 8192\n[parallelism]\ndata_parallel_replicate_degree = 2\n"
                  "context_parallel_degree = 2\ntensor_parallel_degree = 2\nexpert_parallel_degree = 2\n"
                  "expert_tensor_parallel_degree = 2\n")


@pytest.mark.parametrize("sabotage", [None, "expert-grad"])
def test_torchtitan_hsdp_cp_tp_ep_etp_step(tmp_path, sabotage):
    # efsdp = 1 here while the data-parallel degree is 4: the expert gradients need torchtitan's
    # divide factor (on gloo, applied by hand: gloo has no PREMUL_SUM); without it they are 4x off
    cfg = tmp_path / "tt_8gpu.toml"
    cfg.write_text(TT_HSDP_CP_ETP)
    env = {"MESHLINT_SMOKE_SABOTAGE": sabotage} if sabotage else None
    code, doc = smoke_json(str(cfg), env=env)
    step = doc["step"]
    assert {k for k, v in step["parallelisms"].items() if v} == {"fsdp", "dp_replicate", "tp", "ep", "etp", "cp"}
    if sabotage is None:
        assert code == 0 and step["ok"], doc["failures"]
        assert doc["probe"]["cp"]["size"] == 2
    else:
        (gradients,) = [f for f in doc["failures"] if f.get("quantity") == "gradients"]
        assert code == 1 and gradients["suspects"] == ["ep", "etp"]
        assert all(".experts." in p for p in gradients["params"])


def test_an_interleaved_schedule_runs_two_stages_per_rank(tmp_path):
    cfg = tmp_path / "tt_4gpu.toml"
    cfg.write_text('[parallelism]\npipeline_parallel_degree = 2\ntensor_parallel_degree = 2\n'
                   'pipeline_parallel_schedule = "Interleaved1F1B"\n')
    code, doc = smoke_json(str(cfg))
    step = doc["step"]
    assert code == 0 and step["ok"], doc["failures"]
    assert step["schedule"] == "ScheduleInterleaved1F1B" and step["model"]["n_layers"] == 4
    assert step["microbatches"] == 4
