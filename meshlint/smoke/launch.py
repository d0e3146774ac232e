"""The launching process: start the ranks, watch them, end them, collect one report. No torch.

The supervisor (torch's elastic agent and every rank under it) runs in a
session of its own, in a run directory of its own: the ranks' progress files,
and the TMPDIR of every process of the run (torch's ``torchelastic_*`` logs,
``pytorch-errorfile-*``, the fork server's socket). The watchdog polls it and
prints live progress on stderr; on ``--timeout``, Ctrl-C, SIGTERM or SIGHUP the
whole process group gets SIGTERM, then SIGKILL, and every process of the
session is accounted for before the report is written: none may be left, and
the run directory is removed whatever happened. If this process is killed
outright (SIGKILL), the supervisor sees its stdin pipe close and does the
same itself (``lifeline``).
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
from meshlint.smoke.lifeline import session_members

GRACE_S = 3.0
POLL_S = 0.05
SHOW_S = 0.5        # how often the live progress is refreshed
SOCKET_ROOM = 70    # the fork server's unix socket lives under TMPDIR: its path must stay < 108 bytes
HANDLED = ("SIGINT", "SIGTERM", "SIGHUP")


class Outcome:
    """What the launch observed: the ranks' progress files, the agent's verdict, and how it ended."""

    def __init__(self):
        self.ended = "done"          # done | failed | timeout | interrupted | error
        self.signal: str | None = None  # interrupted by: SIGINT | SIGTERM | SIGHUP
        self.seconds = 0.0
        self.states: dict = {}
        self.supervisor: dict = {}
        self.log_tail: list = []
        self.leftover: list | None = None
        self.session: int | None = None


class Interrupted(BaseException):
    """A signal asked this process to stop (raised by the handler, in the watch loop)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def launch(job: dict, timeout: float, show=None) -> Outcome:
    """Run the job's world under the supervisor; ``show(states, supervisor, seconds)`` is told the progress."""
    out = Outcome()
    directory = tempfile.mkdtemp(prefix="meshlint-smoke-")
    extra_tmp = None
    try:
        children_tmp = os.path.join(directory, "tmp")
        if len(children_tmp) > SOCKET_ROOM and os.path.isdir("/tmp"):
            children_tmp = extra_tmp = tempfile.mkdtemp(prefix="mls-", dir="/tmp")
        else:
            os.mkdir(children_tmp)
        job = dict(job, progress_dir=directory, tmpdir=extra_tmp, launcher_pid=os.getpid(),
                   run_id=job.get("run_id") or uuid.uuid4().hex[:12], timeout=timeout)
        _run(job, timeout, out, directory, children_tmp, show)
    finally:
        if os.environ.get("MESHLINT_SMOKE_KEEP"):
            sys.stderr.write(f"meshlint smoke: kept {directory}\n")
        else:
            shutil.rmtree(directory, ignore_errors=True)
            if extra_tmp:
                shutil.rmtree(extra_tmp, ignore_errors=True)
    return out


def _run(job: dict, timeout: float, out: Outcome, directory: str, children_tmp: str, show) -> None:
    job_path = os.path.join(directory, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    log_path = os.path.join(directory, "supervisor.log")
    env = dict(os.environ, TMPDIR=children_tmp, TMP=children_tmp, TEMP=children_tmp)
    previous = {name: signal.getsignal(getattr(signal, name)) for name in HANDLED if hasattr(signal, name)}
    start = time.monotonic()
    proc = None
    try:
        for name in previous:  # a scheduler's SIGTERM, a closed terminal's SIGHUP: end the ranks too
            signal.signal(getattr(signal, name), _interrupted)
        with open(log_path, "wb") as log:
            # stdin is the supervisor's lifeline: it reads end of file when this process dies
            proc = subprocess.Popen([sys.executable, "-m", "meshlint.smoke.supervisor", job_path],
                                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env)
        out.session = proc.pid
        shown = 0.0
        while proc.poll() is None:
            now = time.monotonic() - start
            if now > timeout:
                out.ended = "timeout"
                break
            if show is not None and now - shown >= SHOW_S:
                shown = now
                show(progress.read_all(directory), _read_json(os.path.join(directory, "supervisor.json")), now)
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        out.ended, out.signal = "interrupted", "SIGINT"
    except Interrupted as exc:
        out.ended, out.signal = "interrupted", exc.name
    finally:
        for name in previous:  # the cleanup is not to be interrupted: it is bounded (3 × GRACE_S)
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        try:
            if proc is not None:
                if proc.poll() is None:
                    _end_session(proc)
                out.leftover = _reap_session(proc.pid)
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        finally:
            for name, handler in previous.items():
                signal.signal(getattr(signal, name), handler)
    out.seconds = time.monotonic() - start
    out.states = progress.read_all(directory)
    out.supervisor = _read_json(os.path.join(directory, "supervisor.json"))
    out.log_tail = _tail(log_path)
    if out.ended == "done":
        status = out.supervisor.get("status")
        out.ended = {"done": "done", "failed": "failed"}.get(status, "error")


def _interrupted(signum, _frame) -> None:
    name = signal.Signals(signum).name
    if name == "SIGINT":
        raise KeyboardInterrupt
    raise Interrupted(name)


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
