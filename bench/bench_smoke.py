"""Smoke wall time against its floor, at worlds of 2, 4 and 8 CPU ranks (a script, not a test).

The floor is the same launch (supervisor, torch's elastic agent, fork server,
gloo) doing only init_process_group + init_device_mesh + one barrier; the
mesh smoke adds the framework's meshes, the verification collectives and the
placement gather; the full smoke adds the collective probe and the training
step (with its unsharded reference). Runs are interleaved round-robin so a slow spell of the
machine hits both alike; best and median wall time, and best smoke / best floor.

    python bench/bench_smoke.py [--rounds 5]
    python bench/bench_smoke.py --faults [--rounds 1]
    python bench/bench_smoke.py --variants [-k NAME]

``--faults``: every way a run can go wrong, each in a private TMPDIR with a
tag in the environment of its processes: how long it took to end (from the
signal, or from the start against ``--timeout``), its exit code, whether it
printed its report, and what was left afterwards (processes with the tag,
entries in the TMPDIR). Both must be 0.

``--variants``: the exhaustive real runs the test suite leaves out (it keeps
one launch per kind): every framework and version (KempnerForge, torchtitan
0.2.x TOML, 0.3.0 and main@b5bcd76c6 registries, their shipped debug models
where a checkout is at hand), every spmd backend, schedules, --scale-to,
refusals and sabotage, two torchrun nodes; each row says whether the run
ended as expected (exit 1 if one did not).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from meshlint.engine.check import Options, check_file  # noqa: E402
from meshlint.engine.ruleset import load_rules  # noqa: E402
from meshlint.smoke import launch, plan as smoke_plan  # noqa: E402
from meshlint.mesh.topology import CliTopology  # noqa: E402

CONFIG = """[parallelism]
tensor_parallel_degree = {tp}
expert_parallel_degree = {ep}
"""


def plan_for(world: int, directory: str) -> dict:
    tp = 2
    ep = 2 if world >= 4 else 1
    path = os.path.join(directory, f"bench_{world}gpu.toml")
    with open(path, "w") as f:
        f.write(CONFIG.format(tp=tp, ep=ep))
    report = check_file(path, Options(rules=load_rules(), topology=CliTopology(world)))
    return smoke_plan.build(report, world)


def once(plan: dict, floor: bool, step: bool = False) -> float:
    job = {"plan": plan, "device": "cpu", "backend": "gloo", "nproc": plan["world_size"], "floor": floor,
           "step": step}
    start = time.perf_counter()
    out = launch.launch(job, timeout=120)
    seconds = time.perf_counter() - start
    if out.ended != "done" or out.leftover:
        raise SystemExit(f"bench run failed: {out.ended} {out.supervisor} {out.log_tail[-3:]}")
    return seconds


ROOT = Path(__file__).resolve().parent.parent
KF_MOE = str(ROOT / "fixtures" / "kempnerforge" / "moe_8gpu_tp2_ep2.toml")
TAG = "MESHLINT_BENCH_TAG"


def _tagged(tag: str) -> list:
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


class Fault:
    """One fault run: processes tagged, a private TMPDIR, timings."""

    def __init__(self):
        import uuid

        self.tag = uuid.uuid4().hex
        self.tmp = tempfile.mkdtemp(prefix="mlb-", dir="/tmp")
        self.procs: list = []

    def start(self, args: list, env: dict | None = None):
        import subprocess

        full = {**os.environ, TAG: self.tag, "TMPDIR": self.tmp, **(env or {})}
        proc = subprocess.Popen([sys.executable, "-m", "meshlint", *args], cwd=ROOT, env=full, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(proc)
        return proc

    def wait_line(self, proc, text: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        for line in proc.stderr:  # the live progress
            if text in line or time.monotonic() > deadline:
                return

    def gone_after(self, start: float, limit: float = 120) -> float:
        """Seconds from ``start`` until no process of the run is alive."""
        while _tagged(self.tag) and time.monotonic() - start < limit:
            time.sleep(0.02)
        return time.monotonic() - start

    def leftovers(self) -> tuple[int, int]:
        time.sleep(1.0)
        pids = _tagged(self.tag)
        files = os.listdir(self.tmp)
        for pid in pids:
            os.kill(pid, 9)
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)
        return len(pids), len(files)


def _report(out: str) -> str:
    import json

    try:
        doc = json.loads(out)
    except ValueError:
        return "no JSON"
    return f"{doc['ended']}" + (f" ({doc['signal']})" if doc.get("signal") else "")


def faults() -> list:
    """(fault, seconds to end, what it measures, exit code, report, processes left, files left)."""
    import signal
    import socket

    rows = []

    def launcher_run(name: str, env: dict, extra: list, how: str | None):
        f = Fault()
        start = time.monotonic()
        proc = f.start(["smoke", KF_MOE, "--format", "json", *extra], env)
        if how:
            f.wait_line(proc, "mesh:")
            start = time.monotonic()
            getattr(proc, how)() if how in ("kill", "terminate") else proc.send_signal(signal.SIGINT)
        out = proc.stdout.read()
        code = proc.wait()
        seconds = f.gone_after(start)
        rows.append((name, seconds, "signal → every process gone" if how else "start → every process gone", code,
                     _report(out) if how != "kill" else "-", *f.leftovers()))

    launcher_run("a rank crashes (crash@3:verify)", {"MESHLINT_SMOKE_FAULT": "crash@3:verify"}, ["--no-step"], None)
    launcher_run("a rank hangs, --timeout 30 (hang@5:verify)", {"MESHLINT_SMOKE_FAULT": "hang@5:verify"},
                 ["--no-step", "--timeout", "30"], None)
    for how, label in (("interrupt", "Ctrl-C (SIGINT)"), ("terminate", "SIGTERM"), ("kill", "SIGKILL")):
        launcher_run(f"{label} to the launching process during a hang", {"MESHLINT_SMOKE_FAULT": "hang@1:mesh"},
                     ["--timeout", "300"], how)

    cfg = os.path.join(tempfile.mkdtemp(prefix="mlb-cfg-"), "tt_2gpu.toml")
    with open(cfg, "w") as fh:
        fh.write("[parallelism]\ntensor_parallel_degree = 2\n")
    squatter = socket.socket()
    squatter.bind(("", 0))
    squatter.listen(8)

    def free() -> int:
        with socket.socket() as s:
            s.bind(("", 0))
            return s.getsockname()[1]

    cases = [("MASTER_PORT taken by another program: rank 0", 0, squatter.getsockname()[1]),
             ("MASTER_PORT taken by another program: rank 1", 1, squatter.getsockname()[1]),
             ("a peer that never comes: rank 0 alone", 0, free()),
             ("a dead rendezvous (nobody at MASTER_PORT): rank 1 alone", 1, free())]
    f = Fault()
    start = time.monotonic()
    procs = [f.start(["smoke", cfg, "--format", "json", "--timeout", "20"],
                     {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
                      "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}) for _, rank, port in cases]
    ended = []
    for p in procs:
        out = p.stdout.read()
        code = p.wait()
        ended.append((time.monotonic() - start, code, _report(out)))
    squatter.close()
    import shutil

    shutil.rmtree(os.path.dirname(cfg), ignore_errors=True)
    left = f.leftovers()
    for (name, _, _), (seconds, code, rep) in zip(cases, ended):
        rows.append((name + ", --timeout 20", seconds, "process start → exit (python and torch start-up included)",
                     code, rep, *left))
    return rows


# ----------------------------------------------------------------------------- --variants

SHARED = ROOT.parent / "shared" / "frameworks"
MAIN_MODELS = SHARED / "torchtitan-b5bcd76c6" / "torchtitan" / "models"
V030_MODELS = ROOT / ".frameworks" / "torchtitan-0.3.0" / "torchtitan" / "models"
LLAMA4_MOE = (ROOT / "fixtures" / "torchtitan" / "qwen3_moe_8gpu_pp2_ep2.toml").read_text().replace(
    'name = "qwen3"', 'name = "llama4"').replace('flavor = "debugmodel_moe"', 'flavor = "debugmodel"')
TT_ETP = ('# meshlint: gpus_per_node=8\n[model]\nname = "qwen3"\nflavor = "debugmodel_moe"\n[training]\n'
          'seq_len = 8192\n[parallelism]\ndata_parallel_replicate_degree = 2\ncontext_parallel_degree = 2\n'
          'tensor_parallel_degree = 2\nexpert_parallel_degree = 2\nexpert_tensor_parallel_degree = 2\n')
REGISTRY = '''from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.trainer import Trainer


def main_pp_ep():
    return Trainer.Config(
        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=8192, disable_cuda_graphs=True),
        parallelism=ParallelismConfig(tensor_parallel_degree=2, expert_parallel_degree=2,
                                      pipeline_parallel_degree=2, num_pp_microbatches=2),
    )


def main_pp_ep_partial():
    return Trainer.Config(
        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=8192, disable_cuda_graphs=True),
        parallelism=ParallelismConfig(tensor_parallel_degree=2, expert_parallel_degree=2,
                                      pipeline_parallel_degree=2, num_pp_microbatches=2,
                                      spmd_backend="partial_dtensor"),
    )


def main_hsdp_cp_ep():
    return Trainer.Config(
        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=8192, disable_cuda_graphs=True),
        parallelism=ParallelismConfig(tensor_parallel_degree=2, expert_parallel_degree=2,
                                      context_parallel_degree=2, data_parallel_replicate_degree=2),
    )


def main_partial_cp():
    return Trainer.Config(
        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=8192, disable_cuda_graphs=True),
        parallelism=ParallelismConfig(tensor_parallel_degree=2, context_parallel_degree=2,
                                      spmd_backend="partial_dtensor"),
    )


def v030_full_dtensor_cp_ep():
    return Trainer.Config(
        training=TrainingConfig(local_batch_size=2, seq_len=2048),
        parallelism=ParallelismConfig(tensor_parallel_degree=2, expert_parallel_degree=2,
                                      context_parallel_degree=2, spmd_backend="full_dtensor"),
    )


def v030_zbv():
    return Trainer.Config(
        training=TrainingConfig(local_batch_size=4, seq_len=2048, disable_cuda_graphs=True),
        parallelism=ParallelismConfig(pipeline_parallel_degree=2, tensor_parallel_degree=2,
                                      pipeline_parallel_schedule="ZBVZeroBubble"),
    )
'''


def _variants(d: Path) -> list:
    """(name, meshlint smoke arguments, environment, expected ok)."""
    files = {"llama4_moe_8gpu_pp2_ep2.toml": LLAMA4_MOE, "tt_etp_8gpu.toml": TT_ETP,
             "tt_32gpu.toml": "[parallelism]\ndata_parallel_replicate_degree = 2\ntensor_parallel_degree = 2\n"
                              "pipeline_parallel_degree = 2\n",
             "tt_interleaved_4gpu.toml": '[parallelism]\npipeline_parallel_degree = 2\ntensor_parallel_degree = 2\n'
                                         'pipeline_parallel_schedule = "Interleaved1F1B"\n',
             "kf_moe_pp_8gpu.toml": "[model]\nnum_experts = 4\n[train]\ngrad_accum_steps = 4\n[distributed]\npp = 2\n"
                                    "ep = 2\n",
             "config_registry.py": REGISTRY}
    for name, text in files.items():
        (d / name).write_text(text)
    kf, tt = ROOT / "fixtures" / "kempnerforge", ROOT / "fixtures" / "torchtitan"
    reg = d / "config_registry.py"
    rows = [
        ("KempnerForge MoE fsdp+tp+ep", [str(kf / "moe_8gpu_tp2_ep2.toml")], {}, True),
        ("KempnerForge dense fsdp+tp+pp (GPipe)", [str(kf / "dense_8gpu_tp2_pp2.toml")], {}, True),
        ("KempnerForge dense, sabotage=data", [str(kf / "dense_8gpu_tp2_pp2.toml")],
         {"MESHLINT_SMOKE_SABOTAGE": "data"}, False),
        ("KempnerForge cp2: ranks outside the mesh", [str(kf / "cp2_8gpu.toml")], {}, False),
        ("KempnerForge MoE + PP: refused (ML307)", [str(d / "kf_moe_pp_8gpu.toml")], {}, False),
        ("torchtitan 0.2.x llama4 fsdp+tp+pp+ep", [str(d / "llama4_moe_8gpu_pp2_ep2.toml")], {}, True),
        ("torchtitan 0.2.x qwen3 + pp: refused (ML613)", [str(tt / "qwen3_moe_8gpu_pp2_ep2.toml")], {}, False),
        ("torchtitan 0.2.x hsdp+cp+tp+ep+etp", [str(d / "tt_etp_8gpu.toml")], {}, True),
        ("torchtitan 0.2.x hsdp+cp+tp+ep+etp, sabotage=expert-grad", [str(d / "tt_etp_8gpu.toml")],
         {"MESHLINT_SMOKE_SABOTAGE": "expert-grad"}, False),
        ("torchtitan 0.2.x 32 GPUs --scale-to 8", [str(d / "tt_32gpu.toml"), "--scale-to", "8"], {}, True),
        ("torchtitan 0.2.x Interleaved1F1B", [str(d / "tt_interleaved_4gpu.toml")], {}, True),
        ("torchtitan main spmd_types fsdp+tp+pp+ep", [f"{reg}::main_pp_ep", "--world-size", "8"], {}, True),
        ("torchtitan main partial_dtensor fsdp+tp+pp+ep", [f"{reg}::main_pp_ep_partial", "--world-size", "8"], {},
         True),
        ("torchtitan main hsdp+cp+tp+ep, 16 --scale-to 8", [f"{reg}::main_hsdp_cp_ep", "--world-size", "16",
                                                             "--scale-to", "8"], {}, True),
        ("torchtitan main partial_dtensor + cp: refused (ML707)", [f"{reg}::main_partial_cp", "--world-size", "8"],
         {}, False),
        ("torchtitan 0.3.0 full_dtensor cp+tp+ep", [f"{reg}::v030_full_dtensor_cp_ep", "--world-size", "8"], {},
         True),
        ("torchtitan 0.3.0 ZBVZeroBubble", [f"{reg}::v030_zbv", "--world-size", "8"], {}, True),
        ("torchtitan main --fake 4096", [f"{reg}::main_pp_ep", "--world-size", "4096", "--fake"], {}, True),
    ]
    for label, models in (("main", MAIN_MODELS), ("0.3.0", V030_MODELS)):
        if not models.is_dir():
            print(f"(no torchtitan {label} checkout at {models}: its shipped registries are skipped)")
            continue
        rows += [
            (f"torchtitan {label} llama3_debugmodel", [f"{models}/llama3/config_registry.py::llama3_debugmodel",
                                                       "--world-size", "4"], {}, True),
            (f"torchtitan {label} qwen35_debugmodel_moe fsdp+tp+pp+ep",
             [f"{models}/qwen3_5/config_registry.py::qwen35_debugmodel_moe", "--world-size", "8"], {}, True),
            (f"torchtitan {label} qwen3_moe_deepep ep 4",
             [f"{models}/qwen3/config_registry.py::qwen3_moe_deepep", "--world-size", "4"], {}, True),
        ]
    return rows


def run_smoke(args: list, env: dict, tmp: str, timeout: float) -> tuple:
    """``meshlint smoke ARGS --format json`` in a process of its own, its TMPDIR ``tmp``: (the finished process,
    its wall seconds, its JSON report or None when it printed none)."""
    import json
    import subprocess

    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "meshlint", "smoke", *args, "--format", "json"], cwd=ROOT,
                          env={**os.environ, **env, "TMPDIR": tmp}, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - start
    try:
        return proc, seconds, json.loads(proc.stdout)
    except ValueError:
        return proc, seconds, None


def variants(pattern: str | None) -> int:
    bad = 0
    with tempfile.TemporaryDirectory(prefix="mlb-var-") as tmp:
        d = Path(tmp)
        print("| variant | world | framework | exit | ok | parallelisms | schedule | max rel. error | seconds | "
              "as expected |")
        print("| --- | ---: | --- | ---: | --- | --- | --- | ---: | ---: | --- |")
        for name, args, env, expected in _variants(d):
            if pattern and pattern.lower() not in name.lower():
                continue
            proc, seconds, doc = run_smoke(args, env, tmp, 900)
            if doc is None:
                bad += 1
                print(f"| {name} | | | {proc.returncode} | no report | | | | {seconds:.1f} | NO: "
                      f"{proc.stderr.strip()[-300:]!r} |", flush=True)
                continue
            step = doc.get("step") or {}
            on = " + ".join(k for k, v in (step.get("parallelisms") or {}).items() if v) or "-"
            fw = doc.get("framework") or {}
            good = doc["ok"] is expected and proc.returncode == (0 if expected else 1) and \
                doc.get("leftover_processes") in (0, None)
            bad += not good
            err = step.get("max_rel_error")
            print(f"| {name} | {doc['world_size']} | {fw.get('version') or doc['dialect']} | {proc.returncode} | "
                  f"{doc['ok']} | {on} | {step.get('schedule') or '-'} | {'-' if err is None else f'{err:.1e}'} | "
                  f"{seconds:.1f} | {'yes' if good else 'NO: ' + '; '.join(f['message'][:120] for f in doc['failures'])} |",
                  flush=True)
    return bad


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=None, help="default: 5 (1 with --faults)")
    parser.add_argument("--faults", action="store_true", help="time every fault to its end and count leftovers")
    parser.add_argument("--variants", action="store_true", help="every framework, version and layout, run for real")
    parser.add_argument("-k", dest="pattern", help="with --variants: only those whose name contains this")
    args = parser.parse_args()
    if args.variants:
        raise SystemExit(1 if variants(args.pattern) else 0)
    if args.faults:
        print("| fault | ended after | measured | exit | report | processes left | TMPDIR entries left |")
        print("| --- | ---: | --- | ---: | --- | ---: | ---: |")
        for _ in range(args.rounds or 1):
            for name, seconds, what, code, rep, procs, files in faults():
                print(f"| {name} | {seconds:.2f} s | {what} | {code} | {rep} | {procs} | {files} |", flush=True)
        return
    args.rounds = args.rounds or 5
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for world in (2, 4, 8):
            plan = plan_for(world, tmp)
            smoke, floor, full = [], [], []
            for _ in range(args.rounds):
                floor.append(once(plan, True))
                smoke.append(once(plan, False))
                full.append(once(plan, False, step=True))
            rows.append((world, smoke, floor, full))
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, gloo on CPU; {args.rounds} interleaved rounds\n")
    print("| world | floor | mesh smoke (--no-step) | ratio | with probe + training step | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for world, smoke, floor, full in rows:
        f = min(floor)
        print(f"| {world} | {f:.2f} s | {min(smoke):.2f} s | {min(smoke) / f:.2f} | {min(full):.2f} s | "
              f"{min(full) / f:.2f} |")
    print("\nbest of the rounds; medians: " + "; ".join(
        f"world {w}: floor {statistics.median(fl):.2f} s, mesh {statistics.median(sm):.2f} s, "
        f"full {statistics.median(fu):.2f} s" for w, sm, fl, fu in rows))


if __name__ == "__main__":
    main()
