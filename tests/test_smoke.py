"""Real smokes on CPU: gloo processes started by torch's elastic agent (or torchrun), checked end to end.

Each test is a whole ``meshlint smoke`` run (a few seconds to a minute on a
loaded 2-core machine). Every test is self-contained: its processes carry a tag
of their own in their environment and a private TMPDIR; afterwards none of
them may be alive and the TMPDIR must be empty, and whatever is left is killed
even when the test fails. Heavy runs (many ranks) take one of a few slots
shared by all pytest-xdist workers (a file lock), so ``pytest -n auto`` does
not run more of them at once than the machine can carry. Timeouts are
generous; nothing is asserted about speed beyond "it ended".
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest
from conftest import FIXTURES, ROOT

pytest.importorskip("torch")

KF_MOE = str(FIXTURES / "kempnerforge" / "moe_8gpu_tp2_ep2.toml")
# fixtures/torchtitan/qwen3_moe_8gpu_pp2_ep2.toml's layout on a model torchtitan 0.2.x can pipeline (qwen3's
# TrainSpec has no pipelining function: ML613, and the smoke refuses the step, as torchtitan would)
TT_MOE_TEXT = (FIXTURES / "torchtitan" / "qwen3_moe_8gpu_pp2_ep2.toml").read_text().replace(
    'name = "qwen3"', 'name = "llama4"').replace('flavor = "debugmodel_moe"', 'flavor = "debugmodel"')
KF_CP2 = str(FIXTURES / "kempnerforge" / "cp2_8gpu.toml")
TAG = "MESHLINT_TEST_TAG"
RUN_S = 400          # the most any one run may take here before the test gives up on it (a loaded 2-core VM)
SLOTS = int(os.environ.get("MESHLINT_SMOKE_TEST_SLOTS") or max(1, (os.cpu_count() or 2) // 8))


# ----------------------------------------------------------------------------- isolation


def tagged(tag: str) -> list:
    """pids of the live processes whose environment carries ``tag`` (zombies excluded)."""
    needle = f"{TAG}={tag}".encode()
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    continue
        except (OSError, IndexError):
            continue
        out.append(int(pid))
    return out


class Proc:
    """A child process whose stdout and stderr are read by threads (a test can wait for a line)."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.out: list = []
        self.err: list = []
        self.threads = [threading.Thread(target=self._read, args=(s, sink), daemon=True)
                        for s, sink in ((popen.stdout, self.out), (popen.stderr, self.err))]
        for t in self.threads:
            t.start()

    @staticmethod
    def _read(stream, sink: list) -> None:
        for line in stream:
            sink.append(line)

    def wait_for(self, text: str, timeout: float = RUN_S) -> None:
        """Until a line of stderr contains ``text`` (the live progress), or fail."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.err):
            assert self.popen.poll() is None, f"ended before {text!r}: {''.join(self.err)[-3000:]}"
            assert time.monotonic() < deadline, f"no {text!r} after {timeout} s: {''.join(self.err)[-3000:]}"
            time.sleep(0.1)

    def finish(self, timeout: float = RUN_S) -> tuple[int, str, str]:
        code = self.popen.wait(timeout=timeout)
        for t in self.threads:  # to the end of the pipes: what the process wrote last is read by now
            t.join(timeout=timeout)
            assert not t.is_alive(), "the process ended but its output is still open (a child holds it?)"
        return code, "".join(self.out), "".join(self.err)


class Run:
    """One test's processes: a tag in their environment, a private TMPDIR, a slot for heavy runs."""

    def __init__(self, slots_dir: str):
        self.tag = uuid.uuid4().hex
        # not pytest's tmp_path: the fork server's unix socket lives under it (108 bytes at most)
        self.tmpdir = tempfile.mkdtemp(prefix="mlt-")
        self.slots_dir = slots_dir
        self.procs: list = []

    def env(self, extra: dict | None = None) -> dict:
        return {**os.environ, TAG: self.tag, "TMPDIR": self.tmpdir, **(extra or {})}

    def start(self, args: list, env: dict | None = None) -> Proc:
        proc = Proc(subprocess.Popen(args, cwd=ROOT, env=self.env(env), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                     errors="replace"))
        self.procs.append(proc)
        return proc

    def meshlint(self, *args: str, env: dict | None = None) -> Proc:
        return self.start([sys.executable, "-m", "meshlint", *args], env)

    def smoke(self, *args: str, env: dict | None = None) -> tuple[int, dict, str]:
        """``meshlint smoke ... --format json`` in a heavy slot: (exit code, the report, stderr)."""
        with self.slot():
            code, out, err = self.meshlint("smoke", *args, "--format", "json", env=env).finish()
        assert code in (0, 1) and out.startswith("{"), f"exit {code}, stdout {out[:300]!r}, stderr {err[-3000:]}"
        return code, json.loads(out), err

    @contextlib.contextmanager
    def slot(self):
        """One of SLOTS places for a heavy run, across xdist workers; freed when the holder dies, too."""
        while True:
            for i in range(SLOTS):
                f = open(os.path.join(self.slots_dir, f"slot-{i}"), "w")
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    f.close()
                    continue
                try:
                    yield
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)
                    f.close()
                return
            time.sleep(0.2)

    def alive(self) -> list:
        return tagged(self.tag)

    def cleanup(self) -> tuple[list, list]:
        """Kill whatever is left (the test may have failed half-way); return (what was alive, files left)."""
        deadline = time.monotonic() + 10  # a run that just ended may take a moment to be reaped
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = self.alive()
        for _ in range(50):
            pids = self.alive()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        for proc in self.procs:
            with contextlib.suppress(Exception):
                proc.popen.kill()
                proc.popen.wait(timeout=10)
        files = sorted(os.listdir(self.tmpdir)) if os.path.isdir(self.tmpdir) else []
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        return left, files


@pytest.fixture(scope="session")
def _slots_dir(tmp_path_factory) -> str:
    base = tmp_path_factory.getbasetemp()
    # under xdist every worker has its own basetemp, all in one parent: the slots live there
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "smoke-slots"
    path.mkdir(exist_ok=True)
    return str(path)


@pytest.fixture
def run(_slots_dir):
    r = Run(_slots_dir)
    try:
        yield r
    finally:
        left, files = r.cleanup()
    assert left == [], f"processes of the run still alive after it: {left}"
    assert files == [], f"left in TMPDIR: {files}"


def _valid(doc: dict) -> None:
    import jsonschema

    schema = json.loads((ROOT / "docs" / "smoke-report-v1.schema.json").read_text())
    jsonschema.Draft7Validator(schema).validate(doc)


# ----------------------------------------------------------------------------- meshes


def test_kempnerforge_moe_tp_ep_fsdp_on_8_ranks(run):
    code, doc, err = run.smoke(KF_MOE)
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
    assert doc["signal"] is None and doc["reported_by"] is None
    # live progress went to stderr (stdout above was nothing but the JSON)
    progress = [line for line in err.splitlines() if line.startswith("meshlint smoke:")]
    assert any("starting" in line for line in progress) and any("8/8 ranks" in line for line in progress), err
    _valid(doc)


def test_torchtitan_pp_fsdp_tp_ep_on_8_ranks(run, tmp_path):
    cfg = tmp_path / "llama4_moe_8gpu_pp2_ep2.toml"
    cfg.write_text(TT_MOE_TEXT)
    code, doc, _ = run.smoke(str(cfg))
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


def test_kempnerforge_cp2_fails_naming_the_ranks_outside_the_mesh(run):
    code, doc, _ = run.smoke(KF_CP2)
    assert code == 1 and not doc["ok"]
    failure, step = doc["failures"]
    assert failure["check"] == "coverage" and failure["ranks"] == [4, 5, 6, 7]
    assert step["message"] == "no training step: ranks 4-7 are outside the mesh the framework builds"
    assert failure["message"] == ("ranks 4-7 (4 of 8) are outside mesh 'device': no coordinate and no group on any "
                                  "of its dims")
    assert any(f["rule"] == "ML301" for f in doc["static_findings"])
    assert doc["step"]["ran"] is False and doc["step"]["not_applied"]
    _valid(doc)


def test_a_one_process_config_runs_the_step_without_a_mesh(run, tmp_path):
    # KempnerForge builds no DeviceMesh for a world of one and trains anyway: so must the smoke
    cfg = tmp_path / "kf_1gpu.toml"
    cfg.write_text("[model]\ndim = 256\nn_layers = 2\nn_heads = 4\nn_kv_heads = 4\n[distributed]\ntp = 1\n")
    code, doc, _ = run.smoke(str(cfg))
    assert code == 0 and doc["ok"] and doc["world_size"] == 1 and doc["meshes"] == {}, doc["failures"]
    assert doc["step"]["ran"] and doc["step"]["ok"] and not any(doc["step"]["parallelisms"].values())
    assert doc["notes"][0].startswith("a one-process world: the framework builds no DeviceMesh")
    _valid(doc)


def test_fake_mode_builds_a_4096_rank_world_as_sample_ranks(run, tmp_path):
    cfg = tmp_path / "big_4096gpu.toml"
    cfg.write_text("# meshlint: gpus_per_node=8\n[parallelism]\npipeline_parallel_degree = 4\n"
                   "tensor_parallel_degree = 8\ndata_parallel_replicate_degree = 4\nexpert_parallel_degree = 8\n")
    code, doc, _ = run.smoke(str(cfg), "--fake", "--rank", "0", "--rank", "1234", "--rank", "4095")
    assert code == 0 and doc["ok"] and doc["mode"] == "fake" and doc["ranks_checked"] == [0, 1234, 4095]
    rows = {(c["name"], c.get("axis") or c.get("mesh")): c for c in doc["checks"]}
    assert rows[("coordinate", "sparse")]["ranks"] == 3 and rows[("members", "efsdp")]["ok"]
    assert not any(c["name"] in ("all_gather", "all_reduce") for c in doc["checks"])  # no communication
    assert doc["step"]["ran"] is False and doc["step"]["reason"].startswith("--fake")
    _valid(doc)


# ----------------------------------------------------------------------------- faults: every one ends, reported


def test_a_crashed_rank_ends_the_run_with_its_rank_and_error(run):
    code, doc, _ = run.smoke(KF_MOE, "--no-step", env={"MESHLINT_SMOKE_FAULT": "crash@3:verify"})
    assert code == 1 and doc["ended"] == "failed"
    first = doc["failures"][0]
    assert first["ranks"] == [3] and first["phase"] == "verify"
    assert "InjectedCrash: injected crash on rank 3" in first["message"]
    assert doc["leftover_processes"] == 0  # and the fixture: no pytorch-errorfile-* left in TMPDIR


def test_a_rank_that_dies_silently_is_named_by_the_agent(run):
    code, doc, _ = run.smoke(KF_MOE, "--no-step", env={"MESHLINT_SMOKE_FAULT": "exit@2:mesh"})
    assert code == 1
    assert any(f["check"] == "crash" and f["ranks"] == [2] and "exit code 13" in f["message"]
               for f in doc["failures"]), doc["failures"]


def test_a_hang_ends_at_the_timeout_naming_the_phase_and_the_missing_rank(run):
    # the timeout leaves room for a slow start (8 ranks importing torch on 2 loaded cores)
    code, doc, _ = run.smoke(KF_MOE, "--no-step", "--timeout", "45", env={"MESHLINT_SMOKE_FAULT": "hang@5:verify"})
    assert code == 1 and doc["ended"] == "timeout" and doc["seconds"] < 45 + 15
    (failure,) = doc["failures"]
    assert failure["check"] == "timeout" and failure["phase"] == "verify" and failure["ranks"] == [5], failure
    assert "rank 5 did not arrive (in verify, before its first collective)" in failure["message"]
    assert doc["leftover_processes"] == 0
    _valid(doc)


@pytest.mark.parametrize("sig, code, message", [
    (signal.SIGINT, 130, "interrupted (Ctrl-C): every rank was stopped"),
    (signal.SIGTERM, 143, "interrupted by SIGTERM: every rank was stopped"),
], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_every_rank_and_is_named(run, sig, code, message):
    with run.slot():
        proc = run.meshlint("smoke", KF_MOE, "--timeout", str(RUN_S), env={"MESHLINT_SMOKE_FAULT": "hang@1:mesh"})
        proc.wait_for("mesh:")  # the live progress: the ranks are in the mesh phase, rank 1 hangs there
        proc.popen.send_signal(sig)
        got, out, err = proc.finish()
    assert got == code, err
    assert message in out and "processes left behind" not in out


def test_sigkill_of_the_launching_process_ends_every_process_of_the_run(run):
    with run.slot():
        proc = run.meshlint("smoke", KF_MOE, "--timeout", str(RUN_S), env={"MESHLINT_SMOKE_FAULT": "hang@1:mesh"})
        proc.wait_for("mesh:")
        assert len(run.alive()) >= 10  # this process, the supervisor, the fork server, 8 ranks
        proc.popen.kill()
        proc.finish()
        deadline = time.monotonic() + 60  # it takes well under a second; generous for a loaded machine
        while run.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
    assert run.alive() == []
    assert os.listdir(run.tmpdir) == []  # the supervisor removed the run's directory on its way out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def test_every_launch_failure_ends_at_the_timeout_with_each_ranks_report(run, tmp_path):
    # ranks started by hand, as torchrun would: a port another program holds (both ranks), a peer that
    # never comes (rank 0 alone), a dead rendezvous (rank 1 alone, nobody at MASTER_PORT); all at once
    cfg = tmp_path / "tt_2gpu.toml"
    cfg.write_text("[parallelism]\ntensor_parallel_degree = 2\n")
    timeout = 45  # room for four processes importing torch at once on 2 loaded cores
    squatter = socket.socket()
    squatter.bind(("", 0))
    squatter.listen(8)  # accepts connections, never answers
    taken = squatter.getsockname()[1]
    cases = {"taken-0": (0, taken), "taken-1": (1, taken), "alone-0": (0, _free_port()), "alone-1": (1, _free_port())}
    try:
        with run.slot():
            procs = {}
            for name, (rank, port) in cases.items():
                env = {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
                procs[name] = run.meshlint("smoke", str(cfg), "--format", "json", "--timeout", str(timeout), env=env)
            ended = {name: p.finish(timeout=timeout + RUN_S) for name, p in procs.items()}
    finally:
        squatter.close()
    docs = {}
    for name, (code, out, err) in ended.items():
        assert code == 1 and "Traceback" not in err, (name, err)
        docs[name] = json.loads(out)  # every rank: its own report, in the asked format
        assert docs[name]["reported_by"] == cases[name][0] and docs[name]["seconds"] < timeout + 15
        _valid(docs[name])
    (failure,) = docs["taken-0"]["failures"]
    assert docs["taken-0"]["ended"] == "failed" and "EADDRINUSE" in failure["message"]
    assert any(f"127.0.0.1:{taken}) is taken by another program" in n for n in docs["taken-0"]["notes"])
    for name in ("taken-1", "alone-0", "alone-1"):
        (failure,) = docs[name]["failures"]
        assert docs[name]["ended"] == "timeout" and failure["phase"] == "rendezvous", (name, failure)
        assert "the rendezvous at 127.0.0.1:" in failure["message"] and "never completed" in failure["message"]


@pytest.mark.parametrize("tp, ok", [(2, True), (4, False)])
def test_two_torchrun_nodes_on_localhost(run, tmp_path, tp, ok):
    # two agents on one host count as two nodes: a tp group of 4 over 2 × 2 ranks must be caught
    cfg = tmp_path / "two_nodes.toml"
    cfg.write_text(f"[parallelism]\ntensor_parallel_degree = {tp}\n")
    # torchrun's own agent writes torch's cache (torchinductor_<user>) to its TMPDIR: give it one apart
    agent_tmp = tmp_path / "torchrun-tmp"
    agent_tmp.mkdir()
    with run.slot():
        for attempt in range(3):  # a free port may be taken by someone else before torchrun binds it
            port = str(_free_port())
            procs = [run.start([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
                                "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", port,
                                "--rdzv-backend", "static", "--log-dir", str(tmp_path / f"logs-{attempt}-{node}"),
                                "-m", "meshlint", "smoke", str(cfg), "--format", "json", "--timeout", "120"],
                               env={"TMPDIR": str(agent_tmp)})
                     for node in (0, 1)]
            outs = [p.finish() for p in procs]
            if attempt < 2 and any("EADDRINUSE" in err for _, _, err in outs):
                continue
            break
    doc = json.loads(outs[0][1])  # global rank 0 runs on node 0 and prints the one report
    assert outs[1][1] == ""
    # the ranks' own temporary files (meshlint-rank*) are gone; only torchrun's cache may remain
    assert [p.name for p in agent_tmp.iterdir() if not p.name.startswith("torchinductor_")] == []
    assert doc["launcher"] == "torchrun" and doc["world_size"] == 4 and doc["ok"] is ok
    assert sorted({r["node"] for r in doc["placement"]}) == [f"{socket.gethostname()}#0", f"{socket.gethostname()}#1"]
    if not ok:
        (failure,) = doc["failures"]
        assert failure["check"] == "placement" and failure["axis"] == "tp" and failure["members"] == [0, 1, 2, 3]


def test_check_smoke_runs_the_smoke_after_the_check(run):
    with run.slot():
        code, out, err = run.meshlint("check", "--smoke", KF_MOE).finish()
    assert code == 0, out + err
    assert "1 file checked" in out and f"meshlint smoke {KF_MOE}: OK (real, 8 ranks" in out


def _has_quiet() -> bool:
    from click.testing import CliRunner

    from meshlint.cli import main

    return "--quiet" in CliRunner().invoke(main, ["smoke", "--help"]).output


@pytest.mark.skipif(not _has_quiet(), reason="meshlint smoke -q/--quiet is not wired in cli.py yet")
def test_quiet_prints_no_progress(run, tmp_path):
    cfg = tmp_path / "kf_1gpu.toml"
    cfg.write_text("[distributed]\ntp = 1\n")
    with run.slot():
        code, out, err = run.meshlint("smoke", str(cfg), "-q", "--no-step").finish()
    assert code == 0 and out.startswith("meshlint smoke ") and "meshlint smoke:" not in err, err


@pytest.mark.parametrize("args, env, message", [
    (["smoke", str(FIXTURES / "kempnerforge" / "70b_32gpu_tp4.toml"), "--world-size", "128"], {},
     "a world of 128 ranks is too large to start on this host"),
    (["smoke", KF_MOE, "--rank", "3"], {}, "--rank picks the ranks of a --fake smoke"),
    (["smoke", KF_MOE, "--fake", "--rank", "9"], {}, "--rank 9 is outside the world of 8 ranks"),
    # bad launcher variables: a usage error naming the variable, before anything starts
    (["smoke", KF_MOE], {"RANK": "abc", "WORLD_SIZE": "8", "LOCAL_RANK": "0"}, "RANK='abc' is not a whole number"),
    (["smoke", KF_MOE], {"RANK": "0", "WORLD_SIZE": "0", "LOCAL_RANK": "0"}, "WORLD_SIZE=0 is out of range"),
    (["smoke", KF_MOE], {"RANK": "0", "WORLD_SIZE": "8"}, "LOCAL_RANK is not set"),
    (["smoke", KF_MOE], {"RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "MASTER_PORT": "notaport"},
     "MASTER_PORT='notaport' is not a whole number from 1 to 65535"),
])
def test_usage_errors_exit_2(run, args, env, message):
    code, _, err = run.meshlint(*args, env=env).finish()
    assert code == 2 and message in err and "Traceback" not in err, err


# ---------------------------------------------------------------------------- the training step


def test_kempnerforge_dense_tp_pp_fsdp_step_matches_the_unsharded_model(run):
    code, doc, _ = run.smoke(str(FIXTURES / "kempnerforge" / "dense_8gpu_tp2_pp2.toml"))
    assert code == 0, doc["failures"]
    step = doc["step"]
    assert {k for k, v in step["parallelisms"].items() if v} == {"fsdp", "tp", "pp"}
    assert step["schedule"] == "ScheduleGPipe" and step["loss_rel_error"] <= 1e-5
    assert step["peak_memory_mb"]["max"] > 0 and set(step["seconds"]) == {"reference", "build", "step"}
    _valid(doc)


def test_a_broken_parallelization_fails_the_numeric_check(run):
    # MESHLINT_SMOKE_SABOTAGE=data: every rank reads the first data shard (a wrong batch split)
    code, doc, _ = run.smoke(str(FIXTURES / "kempnerforge" / "dense_8gpu_tp2_pp2.toml"),
                             env={"MESHLINT_SMOKE_SABOTAGE": "data"})
    assert code == 1 and doc["step"]["ran"] and doc["step"]["ok"] is False
    gradients = [f for f in doc["failures"] if f.get("quantity") == "gradients"]
    assert len(gradients) == 1 and gradients[0]["message"].startswith("21 of 21 parameter gradients differ")
    assert "fsdp" in gradients[0]["suspects"] and "tp" not in gradients[0]["suspects"]
    assert any(f.get("quantity") == "loss" for f in doc["failures"])


def test_scale_to_runs_a_32_gpu_config_on_8_ranks(run, tmp_path):
    cfg = tmp_path / "tt_32gpu.toml"
    cfg.write_text("[parallelism]\ndata_parallel_replicate_degree = 2\ntensor_parallel_degree = 2\n"
                   "pipeline_parallel_degree = 2\n")
    code, doc, _ = run.smoke(str(cfg), "--scale-to", "8")
    assert code == 0 and doc["world_size"] == 8, doc["failures"]
    assert doc["scaled"] == {"from": 32, "to": 8, "before": {"dp_replicate": 2, "dp_shard": 4},
                             "after": {"dp_replicate": 1, "dp_shard": 2}, "kept": {"tp": 2, "pp": 2, "cp": 1,
                                                                                     "ep": 1, "etp": 1}}
    # dp_replicate gives way so that dp_shard stays at least 2 (FSDP keeps sharding)
    assert doc["notes"][0] == "scaled from 32 to 8 ranks: dp_replicate 2 → 1, dp_shard 4 → 2 (tp 2, pp 2 kept)"
    assert doc["step"]["ok"] and doc["step"]["parallelisms"]["fsdp"]


def test_a_combination_the_framework_refuses_is_a_failure_that_says_so(run, tmp_path):
    cfg = tmp_path / "moe_pp_8gpu.toml"
    cfg.write_text("[model]\nnum_experts = 4\n[train]\ngrad_accum_steps = 4\n[distributed]\npp = 2\nep = 2\n")
    code, doc, _ = run.smoke(str(cfg))
    assert code == 1 and doc["step"]["ran"] is False and doc["step"]["ok"] is False
    assert any(f["message"].startswith("no training step: the framework refuses this config (ML307")
               for f in doc["failures"])
    assert doc["meshes"]["device"]["built"]  # the mesh itself is still built and verified


TT_HSDP_CP_ETP = ("# meshlint: gpus_per_node=8\n[model]\nname = \"qwen3\"\nflavor = \"debugmodel_moe\"\n"
                  "[training]\nseq_len = 8192\n[parallelism]\ndata_parallel_replicate_degree = 2\n"
                  "context_parallel_degree = 2\ntensor_parallel_degree = 2\nexpert_parallel_degree = 2\n"
                  "expert_tensor_parallel_degree = 2\n")


@pytest.mark.parametrize("sabotage", [None, "expert-grad"])
def test_torchtitan_hsdp_cp_tp_ep_etp_step(run, tmp_path, sabotage):
    # efsdp = 1 here while the data-parallel degree is 4: the expert gradients need torchtitan's
    # divide factor (on gloo, applied by hand: gloo has no PREMUL_SUM); without it they are 4x off
    cfg = tmp_path / "tt_8gpu.toml"
    cfg.write_text(TT_HSDP_CP_ETP)
    env = {"MESHLINT_SMOKE_SABOTAGE": sabotage} if sabotage else None
    code, doc, _ = run.smoke(str(cfg), env=env)
    step = doc["step"]
    assert {k for k, v in step["parallelisms"].items() if v} == {"fsdp", "dp_replicate", "tp", "ep", "etp", "cp"}
    if sabotage is None:
        assert code == 0 and step["ok"], doc["failures"]
        assert doc["probe"]["cp"]["size"] == 2
    else:
        (gradients,) = [f for f in doc["failures"] if f.get("quantity") == "gradients"]
        assert code == 1 and gradients["suspects"] == ["ep", "etp"]
        assert all(".experts." in p for p in gradients["params"])


def test_an_interleaved_schedule_runs_two_stages_per_rank(run, tmp_path):
    cfg = tmp_path / "tt_4gpu.toml"
    cfg.write_text('[parallelism]\npipeline_parallel_degree = 2\ntensor_parallel_degree = 2\n'
                   'pipeline_parallel_schedule = "Interleaved1F1B"\n')
    code, doc, _ = run.smoke(str(cfg))
    step = doc["step"]
    assert code == 0 and step["ok"], doc["failures"]
    assert step["schedule"] == "ScheduleInterleaved1F1B" and step["model"]["n_layers"] == 4
    assert step["microbatches"] == 4


REGISTRY = '''from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.trainer import Trainer


def smoke_main() -> Trainer.Config:
    return Trainer.Config(
        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=8192, max_context_length=2048,
                                disable_cuda_graphs=True),
        parallelism=ParallelismConfig(tensor_parallel_degree=2, expert_parallel_degree=2,
                                      pipeline_parallel_degree=2, num_pp_microbatches=2,
                                      spmd_backend="{backend}"),
    )
'''


@pytest.mark.parametrize("backend", ["spmd_types", "partial_dtensor"])
def test_torchtitan_main_registry_meshes_and_step(run, tmp_path, backend):
    # torchtitan main@b5bcd76c6: every global mesh its ParallelDims.build_mesh makes (spmd_types: the 5-D
    # dense storage mesh, the per-stage spmd_dense_for_fwdbwd and spmd_sparse_for_fwdbwd views), then the step
    cfg = tmp_path / "config_registry.py"
    cfg.write_text(REGISTRY.format(backend=backend))
    code, doc, _ = run.smoke(f"{cfg}::smoke_main", "--world-size", "8")
    assert code == 0 and doc["ok"], doc["failures"]
    dense = ["pp", "dp_replicate", "dp_shard", "cp", "tp"] if backend == "spmd_types" else \
        ["pp", "dp_replicate", "fsdp", "tp"]
    assert doc["meshes"]["dense"]["dims"] == dense and doc["meshes"]["dense"]["built"]
    assert doc["meshes"]["sparse"] == {"dims": ["pp", "dp_replicate", "efsdp", "ep"], "sizes": [2, 1, 2, 2],
                                       "built": True}
    checked = {c["axis"] for c in doc["checks"] if c["name"] == "members" and c["ok"]}
    assert {"pp", "batch", "loss", "tp", "ep", "efsdp"} <= checked
    assert ("dp" in checked) is (backend == "spmd_types")  # the 1-D dp of spmd_dense_for_fwdbwd
    step = doc["step"]
    assert step["ok"] and {k for k, v in step["parallelisms"].items() if v} == {"fsdp", "tp", "pp", "ep"}
