"""``python -m meshlint.smoke.supervisor JOB``: start every rank on this host with torch's elastic agent. [torch]

The launching process starts this in a session of its own and watches it; so
a timeout or Ctrl-C can end the agent and every rank at once (one process
group), whatever state they are in. The agent is torch's: LaunchConfig +
elastic_launch, c10d rendezvous on localhost:0, no restarts. On CPU the ranks
come from a fork server that imports torch once (not once per rank); on CUDA
they are spawned (a forked child cannot use CUDA). What happened is written to
``supervisor.json`` beside the job.
"""

from __future__ import annotations

import json
import os
import sys
import time


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
    multiprocessing.set_forkserver_preload(["torch", "torch.distributed", "torch._dynamo",
                                            "torch.distributed.fsdp", "torch.distributed.pipelining",
                                            "torch.distributed.tensor.parallel", "meshlint.smoke.worker",
                                            "meshlint.smoke.step"])
    multiprocessing.forkserver.ensure_running()


def main(job_path: str) -> int:
    directory = os.path.dirname(job_path)
    with open(job_path) as f:
        device_asked = json.load(f).get("device")
    if device_asked != "cuda":
        _start_forkserver()
    with open(job_path) as f:
        job = json.load(f)
    out = {"status": "starting", "started": time.time()}

    def record(**extra) -> None:
        out.update(extra)
        tmp = os.path.join(directory, "supervisor.json.tmp")
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, os.path.join(directory, "supervisor.json"))

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
