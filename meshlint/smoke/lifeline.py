"""Every process of a smoke run ends when the process that started it dies, SIGKILL included. No torch.

Two mechanisms, so that one failing is not enough to leave a process behind:
on Linux the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG)``, via
ctypes), and everywhere a daemon thread that notices the death itself, by
end of file on a pipe only the parent holds (the supervisor's stdin) or by
polling ``os.getppid()`` and the pids the process depends on. The chain:
launching process → supervisor (stdin pipe, SIGUSR1 on parent death: it
cleans up) → fork server (multiprocessing's own alive pipe, plus SIGKILL on
parent death) → ranks (SIGKILL on parent death, plus polling the agent).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_S = 0.25


def set_parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent (thread) dies. Linux only."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
        return False


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process now has the pid
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(0) is all there is


def watch(on_death, parent: int, depends_on: tuple = (), death_signal: int | None = signal.SIGKILL,
          pipe_fd: int | None = None) -> None:
    """Call ``on_death()`` (in a daemon thread) once ``parent`` or any of ``depends_on`` is gone.

    ``parent`` is the pid this process was started by, as its starter knows it
    (not ``os.getppid()`` now: the parent may already be dead, and then this
    process belongs to init or a subreaper). ``pipe_fd``: the read end of a
    pipe whose write end only the parent holds; end of file means it died.
    """
    if death_signal is not None:
        set_parent_death_signal(death_signal)
    fired = threading.Lock()

    def fire() -> None:
        if fired.acquire(blocking=False):
            on_death()

    def gone() -> bool:
        return os.getppid() != parent or not all(alive(p) for p in depends_on)

    if gone():  # it died before the kernel was asked to tell us
        fire()
        return

    def poll() -> None:
        while not gone():
            time.sleep(POLL_S)
        fire()

    threading.Thread(target=poll, name="meshlint-lifeline", daemon=True).start()
    if pipe_fd is not None:
        def read_to_eof() -> None:
            try:
                while os.read(pipe_fd, 4096):
                    pass
            except OSError:
                pass
            fire()

        threading.Thread(target=read_to_eof, name="meshlint-lifeline-pipe", daemon=True).start()


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


def die() -> None:
    """What a rank does when its parent is gone: nothing to save, end now."""
    os._exit(1)
