"""The launching process: start the ranks, watch them, end them, collect one report. No torch.

The supervisor (torch's elastic agent and every rank under it) runs in a
session of its own. The watchdog polls it; on ``--timeout`` or Ctrl-C the
whole process group gets SIGTERM, then SIGKILL, and every process of the
session is accounted for before the report is written: none may be left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from meshlint.smoke import progress

GRACE_S = 3.0


class Outcome:
    """What the launch observed: the ranks' progress files, the agent's verdict, and how it ended."""

    def __init__(self):
        self.ended = "done"          # done | failed | timeout | interrupted | error
        self.seconds = 0.0
        self.states: dict = {}
        self.supervisor: dict = {}
        self.log_tail: list = []
        self.leftover: list | None = None
        self.session: int | None = None


def launch(job: dict, timeout: float) -> Outcome:
    out = Outcome()
    directory = tempfile.mkdtemp(prefix="meshlint-smoke-")
    job = dict(job, progress_dir=directory, run_id=job.get("run_id") or uuid.uuid4().hex[:12], timeout=timeout)
    job_path = os.path.join(directory, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    log_path = os.path.join(directory, "supervisor.log")
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "meshlint.smoke.supervisor", job_path], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    out.session = proc.pid
    previous = signal.signal(signal.SIGTERM, _terminated)  # a scheduler's SIGTERM ends the ranks too
    try:
        while proc.poll() is None:
            if time.monotonic() - start > timeout:
                out.ended = "timeout"
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        out.ended = "interrupted"
    finally:
        signal.signal(signal.SIGTERM, previous)
        if proc.poll() is None:
            _end_session(proc)
        out.leftover = _reap_session(proc.pid)
    out.seconds = time.monotonic() - start
    out.states = progress.read_all(directory)
    out.supervisor = _read_json(os.path.join(directory, "supervisor.json"))
    out.log_tail = _tail(log_path)
    if out.ended == "done":
        status = out.supervisor.get("status")
        out.ended = {"done": "done", "failed": "failed"}.get(status, "error")
    if os.environ.get("MESHLINT_SMOKE_KEEP"):
        sys.stderr.write(f"meshlint smoke: kept {directory}\n")
    else:
        shutil.rmtree(directory, ignore_errors=True)
    return out


def _terminated(_signum, _frame) -> None:
    raise KeyboardInterrupt


def _end_session(proc: subprocess.Popen) -> None:
    """SIGTERM to the agent's whole process group (the agent stops its ranks), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if not session_members(proc.pid):
            return


def _reap_session(session: int) -> list | None:
    """Kill whatever of the session is still alive; return what could not be killed (should be nothing)."""
    deadline = time.monotonic() + GRACE_S
    while True:
        alive = session_members(session)
        if alive is None or not alive:
            return alive
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def session_members(session: int) -> list | None:
    """Live (non-zombie) processes of a session, from /proc; None where /proc is not there."""
    if not os.path.isdir("/proc"):
        return None
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        state, sid = fields[0], int(fields[3])
        if sid == session and state not in ("Z", "X"):
            out.append(int(entry))
    return out


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _tail(path: str, lines: int = 15) -> list:
    try:
        with open(path, errors="replace") as f:
            return [line.rstrip("\n") for line in f.readlines()[-lines:]]
    except OSError:
        return []
