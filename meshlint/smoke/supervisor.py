"""``python -m meshlint.smoke.supervisor JOB``: start every rank on this host with torch's elastic agent. [torch]

The launching process starts this in a session of its own and watches it; so
a timeout or Ctrl-C can end the agent and every rank at once (one process
group), whatever state they are in. It watches the launching process in turn
(``lifeline``): if that dies, even by SIGKILL, this process kills every other
process of its session and removes the run's directories, then exits. Its
TMPDIR is inside the run directory, so whatever torch writes there
(``torchelastic_*``, ``pytorch-errorfile-*``) goes with it. The agent is torch's: LaunchConfig +
elastic_launch, c10d rendezvous on localhost:0, no restarts. On CPU the ranks
come from a fork server that imports torch once (not once per rank); on CUDA
they are spawned (a forked child cannot use CUDA). What happened is written to
``supervisor.json`` beside the job.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time

from meshlint.smoke import lifeline


def choose_device(device: str, backend: str, nproc: int) -> tuple[str, str, str | None]:
    """(device, backend, why): nccl on CUDA when the host has a GPU per rank, else gloo on CPU."""
    import torch

    note = None
    if device == "auto":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus >= nproc:
            device = "cuda"
        else:
            device = "cpu"
            if gpus:
                note = f"{gpus} GPUs for {nproc} ranks: running on CPU processes"
    elif device == "cuda":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus < nproc:
            raise SystemExit(f"--device cuda needs a GPU per rank: {nproc} ranks, {gpus} GPUs here")
    if backend == "auto":
        backend = "nccl" if device == "cuda" else "gloo"
    return device, backend, note


def _start_forkserver() -> None:
    """Ranks fork from multiprocessing's fork server, a fresh interpreter that imports torch once.

    Forking the agent itself is fast but unsafe: its children inherit the
    agent's rendezvous store and sockets, and one in eight runs hung in
    init_process_group that way. Starting the server first lets its torch
    import overlap this process's.
    """
    import multiprocessing
    import multiprocessing.forkserver

    # torch._dynamo is imported by the first forward (2.4 s here): once in the server, not once per rank
    multiprocessing.set_forkserver_preload(["meshlint.smoke.forkguard", "torch", "torch.distributed", "torch._dynamo",
                                            "torch.distributed.fsdp", "torch.distributed.pipelining",
                                            "torch.distributed.tensor.parallel", "meshlint.smoke.worker",
                                            "meshlint.smoke.step"])
    multiprocessing.forkserver.ensure_running()


def abandon(job: dict) -> None:
    """The launching process is gone: kill the rest of this session, remove the run's files, exit."""
    me = os.getpid()
    for _ in range(3):
        others = [p for p in (lifeline.session_members(os.getsid(0)) or []) if p != me]
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not others:
            break
        time.sleep(0.05)
    for path in (job.get("tmpdir"), job.get("progress_dir")):
        if path:
            shutil.rmtree(path, ignore_errors=True)
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)  # where there is no /proc: the group, this process last
    finally:
        os._exit(1)


def main(job_path: str) -> int:
    directory = os.path.dirname(job_path)
    with open(job_path) as f:
        job = json.load(f)

    def on_death(*_args) -> None:
        abandon(job)

    # SIGUSR1, not SIGKILL, from the kernel: this process has files to remove and ranks to end first
    signal.signal(signal.SIGUSR1, on_death)
    launcher = job.get("launcher_pid")
    if launcher:
        lifeline.watch(on_death, parent=launcher, death_signal=signal.SIGUSR1, pipe_fd=0)
    job["agent_pid"] = os.getpid()  # the ranks watch this process
    out = {"status": "starting", "started": time.time()}

    def record(**extra) -> None:
        out.update(extra)
        tmp = os.path.join(directory, "supervisor.json.tmp")
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, os.path.join(directory, "supervisor.json"))

    record()
    if job.get("device") != "cuda":
        _start_forkserver()

    try:
        import torch  # noqa: F401
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch
    except ImportError as exc:
        record(status="error", error=f"torch is not importable: {exc}")
        return 2
    try:
        device, backend, note = choose_device(job["device"], job["backend"], job["nproc"])
    except SystemExit as exc:
        record(status="error", error=str(exc))
        return 2
    job.update(device=device, backend=backend)
    start_method = "spawn" if device == "cuda" else "forkserver"
    record(status="running", device=device, backend=backend, note=note, start_method=start_method,
           torch=torch.__version__, agent_pid=os.getpid())
    os.environ["MESHLINT_SMOKE_RUN"] = job["run_id"]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=job["nproc"], run_id=job["run_id"],
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0,
                          monitor_interval=0.1, start_method=start_method)
    from meshlint.smoke.worker import run_rank

    try:
        results = elastic_launch(config, run_rank)(job)
    except ChildFailedError as exc:
        failures = [{"rank": rank, "exitcode": f.exitcode, "signal": f.signal_name() if f.exitcode < 0 else None,
                     "message": _message(f)} for rank, f in sorted(exc.failures.items())]
        record(status="failed", failures=failures)
        return 1
    except Exception as exc:  # the agent itself failed (rendezvous, ports)
        record(status="error", error=f"{type(exc).__name__}: {exc}")
        return 1
    record(status="done", returned=sorted(results))
    return 0


def _message(failure) -> str | None:
    message = getattr(failure, "message", None)
    if isinstance(message, dict):
        message = message.get("message", {}).get("message") if isinstance(message.get("message"), dict) else \
            message.get("message")
    return str(message) if message else None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
