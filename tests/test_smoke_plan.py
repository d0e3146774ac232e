"""The smoke's torch-free parts: plans from the static resolution, launcher detection, report assembly."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from meshlint.smoke import plan as smoke_plan
from meshlint.smoke import rankenv
from meshlint.smoke import report as smoke_report
from meshlint.smoke.faults import parse as parse_faults


def _plan(check, text, name, **topology):
    report = check(text, name, **topology)
    return smoke_plan.build(report, report.topology.world_size)


def test_kempnerforge_plan_is_one_init_device_mesh_with_the_resolved_dims(check):
    plan = _plan(check, (FIXTURES / "kempnerforge" / "moe_8gpu_tp2_ep2.toml").read_text(), "moe_8gpu.toml")
    assert plan["recipe"] == [{"op": "init", "mesh": "device", "dims": ["dp_shard", "ep", "tp"], "sizes": [2, 2, 2]}]
    assert plan["axes"]["tp"] == {"mesh": "device", "size": 2, "stride": 1, "span": 8, "role": "tp"}
    assert smoke_plan.expected_coords(plan, 5) == {"device": [1, 0, 1]}
    assert smoke_plan.expected_group(plan, "ep", 5) == [5, 7]


def test_torchtitan_plan_follows_parallel_dims_build_mesh(check):
    plan = _plan(check, (FIXTURES / "torchtitan" / "qwen3_moe_8gpu_pp2_ep2.toml").read_text(), "q_8gpu.toml")
    assert [(op["op"], op.get("mesh")) for op in plan["recipe"]] == [
        ("world", None), ("unflatten", "dataloading"), ("flatten", "loss"), ("unflatten", "dense"),
        ("unflatten", "sparse")]
    assert plan["recipe"][4]["sizes"] == [2, 1, 2, 2, 1]  # pp, dp_replicate, efsdp = 2·2/(1·2), ep, etp
    assert smoke_plan.expected_group(plan, "loss", 3) == [1, 3]  # batch × cp, stride tp
    assert smoke_plan.expected_group(plan, "ep", 4) == [4, 5]


def test_cp_outside_the_mesh_is_in_the_plan(check):
    plan = _plan(check, (FIXTURES / "kempnerforge" / "cp2_8gpu.toml").read_text(), "cp2_8gpu.toml")
    assert plan["outside"] == [4, 7]
    assert smoke_plan.expected_coords(plan, 6) == {"device": None}
    assert smoke_plan.expected_group(plan, "tp", 6) is None


def test_a_config_the_framework_refuses_before_any_mesh_has_no_plan(check):
    report = check("[distributed]\ntp = 3\n", "c_8gpu.toml")
    with pytest.raises(smoke_plan.PlanError, match="refuses this config before building a mesh"):
        smoke_plan.build(report, 8)


def test_a_sparse_mesh_that_is_not_whole_is_still_attempted(check):
    plan = _plan(check, (FIXTURES / "torchtitan" / "moe_6gpu_sparse_not_whole.toml").read_text(), "s_6gpu.toml")
    assert plan["expected_error"].startswith("ValueError in DeviceMesh._unflatten")
    assert plan["recipe"][-1]["sizes"] == [1, 1, 1, 4, 1]


@pytest.mark.parametrize("environ, expected", [
    ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"},
     (3, 8, 1, 2, "#1", "torchrun")),
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "5", "SLURM_NTASKS_PER_NODE": "8",
      "SLURM_NODEID": "0"}, (5, 16, 5, 8, "#0", "srun")),
    ({}, None),
])
def test_launched_ranks_are_recognised(environ, expected):
    env = rankenv.detect(environ)
    if expected is None:
        assert env is None
    else:
        assert (env.rank, env.world_size, env.local_rank, env.local_world_size, env.node[-2:], env.launcher) == expected


def test_srun_gets_a_rendezvous_address_from_the_node_list():
    env = rankenv.detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"})
    out = rankenv.rendezvous_env(env, {"SLURM_JOB_NODELIST": "gpu[012-015,020],login1", "SLURM_JOB_ID": "77"})
    assert out["MASTER_ADDR"] == "gpu012" and out["RANK"] == "0" and 20000 <= int(out["MASTER_PORT"]) < 40000
    assert rankenv.rendezvous_env(env, {"MASTER_ADDR": "h", "MASTER_PORT": "1"}).keys() == {"RANK", "WORLD_SIZE",
                                                                                             "LOCAL_RANK"}


def test_faults_are_parsed_strictly():
    assert parse_faults("crash@3:verify, hang@5:mesh,bogus@1:x, exit@x:y") == {(3, "verify"): "crash",
                                                                              (5, "mesh"): "hang"}


DEGREES = {"pp": 1, "dp_replicate": 1, "dp_shard": 4, "cp": 1, "tp": 1, "ep": 1, "etp": 1}


def _state(rank, phase, step, steps, done=False, **extra):
    return {"rank": rank, "phase": phase, "step": step, "steps": steps, "phases": [], "checks": [], "failures": [],
            "warnings": [], "error": None, "done": done, **extra}


def test_a_timeout_names_the_rank_everyone_waits_for():
    plan = {"config": "c.toml", "dialect": "kempnerforge", "world_size": 4, "meshes": {}, "degrees": DEGREES}
    states = {0: _state(0, "verify", "all_gather tp", 3), 1: _state(1, "verify", "all_gather tp", 3),
              2: _state(2, "verify", None, 1), 3: _state(3, "verify", "all_gather dp", 2)}
    report = smoke_report.assemble(plan, states, mode="real", launcher="elastic", device="cpu", backend="gloo",
                                   ended="timeout", timeout=12)
    (failure,) = report["failures"]
    assert failure["ranks"] == [2] and failure["check"] == "timeout"
    assert failure["message"] == ("timed out after 12 s in phase verify: rank 2 did not arrive (in verify, before its "
                                  "first collective); the others wait: ranks 0, 1 in 'all_gather tp'; rank 3 in "
                                  "'all_gather dp'")
    assert not report["ok"]


def test_a_crash_is_reported_first_and_lost_peers_after_it():
    plan = {"config": "c.toml", "dialect": "kempnerforge", "world_size": 3, "meshes": {}, "degrees": DEGREES}
    lost = {"phase": "verify", "step": "x", "type": "RuntimeError", "message": "pair.cc: Connection closed by peer"}
    states = {0: _state(0, "verify", "x", 2, error=lost), 1: _state(1, "verify", None, 1, error={
        "phase": "verify", "step": None, "type": "InjectedCrash", "message": "boom"}), 2: _state(2, None, None, 4,
                                                                                                done=True)}
    report = smoke_report.assemble(plan, states, mode="real", launcher="elastic", device="cpu", backend="gloo",
                                   ended="failed")
    assert [f["check"] for f in report["failures"]] == ["exception", "peer-lost"]
    assert report["failures"][0]["message"] == "rank 1 failed in phase verify: InjectedCrash: boom"
    assert report["failures"][1]["ranks"] == [0]


def test_without_torch_the_smoke_says_how_to_install_it(monkeypatch, write):
    from conftest import run_cli

    import meshlint.smoke.run as smoke_run

    monkeypatch.setattr(smoke_run.importlib.util, "find_spec", lambda name: None)
    code, out = run_cli("smoke", str(write("[distributed]\ntp = 2\n", "c_8gpu.toml")))
    assert code == 2 and "meshlint smoke needs torch: pip install torch==2.13.0" in out


def test_an_unknown_world_size_is_a_usage_error(write):
    from conftest import run_cli

    code, out = run_cli("smoke", str(write("[distributed]\ntp = 2\n")))
    assert code == 2 and "the world size is unknown: pass --world-size N" in out


@pytest.mark.parametrize("environ, message", [
    ({"RANK": "abc", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "RANK='abc' is not a whole number from 0 to 1"),
    ({"RANK": "0", "WORLD_SIZE": "0", "LOCAL_RANK": "0"}, "WORLD_SIZE=0 is out of range"),
    ({"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "RANK=2 is out of range: it must be below the WORLD_SIZE"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, "LOCAL_RANK is not set, but RANK and WORLD_SIZE are"),
    ({"WORLD_SIZE": "2"}, "RANK and LOCAL_RANK are not set, but WORLD_SIZE is"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_PORT": "notaport"}, "MASTER_PORT='notaport'"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_PORT": "70000"}, "MASTER_PORT=70000 is out of range"),
    ({"RANK": "0", "WORLD_SIZE": "9" * 40, "LOCAL_RANK": "0"}, "WORLD_SIZE='9999"),
    ({"SLURM_PROCID": "x", "SLURM_NTASKS": "4"}, "SLURM_PROCID='x' is not a whole number"),
])
def test_bad_launcher_variables_are_named(environ, message):
    with pytest.raises(rankenv.LauncherError, match=None) as info:
        rankenv.detect(environ)
    assert message in str(info.value)


def test_a_one_process_world_is_planned_without_a_mesh(check):
    plan = _plan(check, "[model]\ndim = 256\nn_layers = 2\nn_heads = 4\nn_kv_heads = 4\n[distributed]\ntp = 1\n", "kf_1gpu.toml")
    assert plan["recipe"] == [] and plan["meshes"] == {} and plan["no_mesh"].startswith("a one-process world")
    with pytest.raises(smoke_plan.PlanError, match="builds no DeviceMesh"):
        smoke_plan.build(check("[distributed]\ntp = 1\n", "kf_1gpu.toml"), 2)


def test_a_launched_rank_reports_its_own_view():
    plan = {"config": "c.toml", "dialect": "kempnerforge", "world_size": 2, "meshes": {}, "degrees": DEGREES}
    states = {1: _state(1, "rendezvous", "init_process_group", 1)}
    report = smoke_report.assemble(plan, states, mode="real", launcher="torchrun", device="cpu", backend="gloo",
                                   ended="timeout", timeout=20, ranks_expected=[1], reported_by=1,
                                   endpoint="127.0.0.1:29500")
    (failure,) = report["failures"]
    assert report["reported_by"] == 1 and failure["ranks"] == [1]
    assert failure["message"].startswith("rank 1 timed out after 20 s in phase rendezvous ('init_process_group'): "
                                         "the rendezvous at 127.0.0.1:29500 never completed")
    report = smoke_report.assemble(plan, states, mode="real", launcher="torchrun", device="cpu", backend="gloo",
                                   ended="interrupted", signal="SIGTERM", reported_by=1)
    assert report["failures"][0]["message"] == "interrupted by SIGTERM: rank 1 stopped"
    assert report["signal"] == "SIGTERM" and "rank 1 alone" in smoke_report.render_text(report)


def test_exit_codes_name_the_signal():
    from meshlint.smoke.watchdog import exit_code

    assert (exit_code("SIGINT"), exit_code("SIGTERM"), exit_code("SIGHUP"), exit_code(None)) == (130, 143, 129, 1)


def test_live_progress_names_the_phase_the_count_and_the_slowest_rank():
    from meshlint.smoke.live import Live, describe

    assert describe({}, {}, 8)[1].startswith("starting torch's elastic agent")
    assert describe({}, {"status": "running", "backend": "gloo", "device": "cpu"}, 8)[1] == \
        "starting 8 ranks (gloo on cpu)"
    states = {r: _state(r, "mesh", "init device", 1) for r in range(8)}
    states[5] = _state(5, "rendezvous", "init_process_group", 1)
    assert describe(states, {}, 8)[1] == "mesh: 7/8 ranks; slowest rank 5 in rendezvous ('init_process_group')"
    assert describe({0: _state(0, "verify", None, 3)}, {}, 2)[1] == "verify: 1/2 ranks; 1 not started yet"

    class Sink(list):
        def write(self, text):
            self.append(text)

        def flush(self):
            pass

    sink = Sink()
    live = Live(8, stream=sink, tty=False)
    for _ in range(3):  # a line per change, not per tick
        live(states, {}, 1.0)
    live.close()
    assert len(sink) == 1 and sink[0].startswith("meshlint smoke:   1.0 s  mesh: 7/8")


LIFELINE_CHILD = """
import os, signal, sys, time
from meshlint.smoke import lifeline
lifeline.watch(lifeline.die, parent=int(sys.argv[1]), death_signal={sig})
print("watching", flush=True)
time.sleep(120)
"""
LIFELINE_PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(__import__("os").getpid())],
                         stdout=subprocess.PIPE, text=True)
print(child.pid, flush=True)
print(child.stdout.readline().strip(), flush=True)
import time; time.sleep(120)
"""


@pytest.mark.parametrize("sig", ["signal.SIGKILL", "None"], ids=["pdeathsig", "polling"])
def test_a_child_ends_when_its_parent_is_killed(sig):
    import os
    import signal
    import subprocess
    import sys
    import time

    from meshlint.smoke.lifeline import alive

    parent = subprocess.Popen([sys.executable, "-c", LIFELINE_PARENT, LIFELINE_CHILD.format(sig=sig)],
                              stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(parent.stdout.readline())
        assert parent.stdout.readline().strip() == "watching"
        parent.kill()
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child)
    finally:
        parent.kill()
        if child and alive(child):
            os.kill(child, signal.SIGKILL)


def test_torchtitan_main_plan_makes_every_global_mesh_by_the_frameworks_method():
    from meshlint.frameworks.torchtitan import main_b5bcd76c6 as torchtitan_main

    spec = torchtitan_main.spec_from_degrees({"tp": 2, "ep": 2, "pp": 2, "dp_shard": -1}, spmd_backend="spmd_types")
    spec.framework = {"name": "torchtitan", "version": "main@b5bcd76c6"}
    recipe = smoke_plan._torchtitan(torchtitan_main.resolve(spec, 16), spec, 16)
    assert [(op["op"], op.get("mesh"), op.get("of")) for op in recipe] == [
        ("world", None, None), ("unflatten", "dataloading", None), ("flatten", "loss", "dataloading"),
        ("unflatten", "dense", None), ("unflatten", "sparse", None),
        ("unflatten", "spmd_dense_for_fwdbwd:full", None),
        ("slice", "spmd_dense_for_fwdbwd", "spmd_dense_for_fwdbwd:full"),
        ("slice", "spmd_sparse_for_fwdbwd", "sparse")]
    by_mesh = {op.get("mesh"): op for op in recipe}
    assert by_mesh["dense"]["dims"] == ["pp", "dp_replicate", "dp_shard", "cp", "tp"]
    # _mesh_exist under spmd_types: dp_shard always real, dp_replicate and cp (size 1) fake
    assert by_mesh["dense"]["fake"] == ["dp_replicate", "cp"]
    assert by_mesh["spmd_dense_for_fwdbwd:full"]["sizes"] == [2, 4, 1, 2]
    assert by_mesh["spmd_sparse_for_fwdbwd"]["dims"] == ["dp_replicate", "efsdp", "ep"]


WATCHDOG = """
import os, signal, sys, time
from meshlint.smoke.watchdog import RankWatchdog
stopped = RankWatchdog(time.monotonic() + 0.3, lambda: 5, lambda name: 6)
stopped.start()
stopped.stop()  # the rank finished: no report at the deadline, and SIGTERM is the main thread's again
time.sleep(1.0)
print("still here", flush=True)
armed = RankWatchdog(time.monotonic() + 60, lambda: 5, lambda name: print(name, flush=True) or 7)
armed.start()
os.kill(os.getpid(), signal.SIG{sig})
time.sleep(30)
"""


@pytest.mark.parametrize("sig", ["TERM", "INT"])
def test_the_rank_watchdog_reports_a_signal_and_stands_down_when_stopped(sig):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", WATCHDOG.replace("{sig}", sig)], capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.split() == ["still", "here", f"SIG{sig}"] and proc.returncode == 7, proc.stderr


MAIN_REGISTRY = '''from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.trainer import Trainer


def pp_ep() -> Trainer.Config:
    return Trainer.Config(
        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=8192, disable_cuda_graphs=True),
        parallelism=ParallelismConfig(tensor_parallel_degree=2, expert_parallel_degree=2,
                                      pipeline_parallel_degree=2, num_pp_microbatches=4,
                                      pipeline_parallel_schedule="Interleaved1F1B"),
    )
'''


def test_a_main_registry_plan_scales_without_etp_and_keeps_its_schedule(rules, tmp_path):
    # torchtitan main has no expert tensor parallelism: nothing may ask for an etp dim, and --scale-to
    # re-resolves with main's own ParallelDims (dialects.module_of), not v0.2.x's
    from meshlint.engine.check import Options, check_file
    from meshlint.smoke import scale
    from meshlint.mesh.topology import CliTopology

    path = tmp_path / "config_registry.py"
    path.write_text(MAIN_REGISTRY)
    report = check_file(f"{path}::pp_ep", Options(rules=rules, topology=CliTopology(world_size=32)))
    assert report.spec.framework["version"] == "main@b5bcd76c6"
    scaled, what = scale.scale(report, 8)
    assert what == {"from": 32, "to": 8, "before": {"dp_replicate": 1, "dp_shard": 8},
                    "after": {"dp_replicate": 1, "dp_shard": 2}, "kept": {"tp": 2, "pp": 2, "cp": 1, "ep": 2}}
    assert scale.describe(what) == "scaled from 32 to 8 ranks: dp_shard 8 → 2 (tp 2, pp 2, ep 2 kept)"
    plan = smoke_plan.build(scaled, 8)
    assert plan["framework"]["version"] == "main@b5bcd76c6" and plan["degrees"]["etp"] is None
    assert plan["model"]["pp_schedule"] == "Interleaved1F1B"  # the registry's own field, not 1F1B by default
    assert not any("etp" in op.get("dims", ()) for op in plan["recipe"])
    assert smoke_report.parallelisms(plan) == {"fsdp": True, "dp_replicate": False, "tp": True, "pp": True,
                                               "ep": True, "etp": False, "cp": False}
    with pytest.raises(scale.ScaleError, match="do not divide 6"):  # tp·pp = 4
        scale.scale(report, 6)
    report16 = scale.scale(report, 16)[0]
    with pytest.raises(scale.ScaleError, match="scaling only shrinks"):
        scale.scale(report16, 16)


def test_the_report_names_the_framework_version():
    plan = {"config": "r.py::f", "dialect": "torchtitan", "world_size": 2, "meshes": {}, "degrees": DEGREES,
            "framework": {"name": "torchtitan", "version": "0.3.0", "decided_by": "the config's own keys"}}
    report = smoke_report.assemble(plan, {}, mode="fake", launcher="fake", device="cpu", backend="fake",
                                   ranks_expected=[])
    assert report["framework"]["version"] == "0.3.0"
    assert "  framework  torchtitan 0.3.0" in smoke_report.render_text(report).splitlines()
