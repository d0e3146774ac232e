"""The watchdog of a rank that torchrun or srun started: ``--timeout`` and signals end it with its report. No torch.

Such a rank has no launching process of meshlint's own to watch it, and it may
be stuck where Python never regains control (a TCPStore handshake with a
program that took MASTER_PORT, a collective whose peer never came). So a
thread does the watching: it waits for the deadline or for SIGINT, SIGTERM or
SIGHUP (blocked in every other thread, taken here with ``sigtimedwait``),
then prints the rank's own report and ends the process with ``os._exit``.
Whoever reports first, the rank or the watchdog, ``claim``s the one report.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


def exit_code(signame: str | None) -> int:
    """128 + the signal's number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP); 1 without one."""
    if not signame:
        return 1
    return 128 + int(getattr(signal, signame, 2))


class RankWatchdog:
    """``on_timeout()`` at ``deadline`` (monotonic), ``on_signal(name)`` at a signal; each returns the exit code."""

    def __init__(self, deadline: float, on_timeout, on_signal):
        self.deadline = deadline
        self.on_timeout = on_timeout
        self.on_signal = on_signal
        self._claim = threading.Lock()
        self._stopped = False
        self._blocked = False

    def claim(self) -> bool:
        """True for the first caller only: that one prints the report."""
        return self._claim.acquire(blocking=False)

    def start(self) -> None:
        """Call on the main thread, before any other thread is started (they inherit the blocked signals)."""
        if hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
            self._blocked = True
            target = self._wait_signals
        else:  # pragma: no cover - macOS and Windows: handlers on the main thread, a timer for the deadline
            for sig in SIGNALS:
                signal.signal(sig, lambda signum, _f: self._fire(self.on_signal, signal.Signals(signum).name))
            target = self._wait_deadline
        threading.Thread(target=target, name="meshlint-watchdog", daemon=True).start()

    def stop(self) -> None:
        """The rank is done (and has reported): stand down, and give the signals back to the main thread."""
        self._stopped = True
        if self._blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)

    def _wait_signals(self) -> None:
        while not self._stopped:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self._fire(self.on_timeout)
            info = signal.sigtimedwait(SIGNALS, min(left, 0.5))
            if info is None:
                continue
            if self._stopped:  # taken just as the rank finished: deliver it as if never taken
                os.kill(os.getpid(), info.si_signo)
                return
            self._fire(self.on_signal, signal.Signals(info.si_signo).name)

    def _wait_deadline(self) -> None:  # pragma: no cover - see start()
        while time.monotonic() < self.deadline and not self._stopped:
            time.sleep(min(0.5, max(0.0, self.deadline - time.monotonic())))
        if not self._stopped:
            self._fire(self.on_timeout)

    def _fire(self, action, *args) -> None:
        if not self.claim():  # the rank is printing its own report: let it finish
            while True:
                time.sleep(3600)
        code = 1
        try:
            code = action(*args)
        except BaseException as exc:  # the report itself failed: say so in one line, still end
            with_type = f"{type(exc).__name__}: {exc}"
            try:
                sys.stderr.write(f"meshlint smoke: the watchdog could not write the report ({with_type})\n")
            except (OSError, ValueError):
                pass
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code)
