"""Each rank's progress and findings, as a small JSON file the launching process can read at any time.

Files rather than a collective: when a rank hangs or dies, the others' files
still say how far every rank got, which is what the watchdog reports. Each
write replaces the file atomically, so a reader never sees half of one. No torch.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager


class Progress:
    def __init__(self, directory: str | None, rank: int, identity: dict):
        self.path = os.path.join(directory, f"rank-{rank:07d}.json") if directory else None
        self.state = {"rank": rank, **identity, "pid": os.getpid(), "started": time.time(), "phase": None, "step": None, "steps": 0,
                      "phases": [], "checks": [], "failures": [], "warnings": [], "error": None, "done": False}
        self.write()

    @contextmanager
    def phase(self, name: str):
        """Time a phase; an exception inside it is recorded (with the phase and step) and re-raised."""
        self.state["phase"], self.state["step"] = name, None
        self.write()
        start = time.perf_counter()
        try:
            yield
        except BaseException as exc:
            self.state["phases"].append({"name": name, "seconds": round(time.perf_counter() - start, 4), "ok": False})
            self.state["error"] = {"phase": name, "step": self.state["step"], "type": type(exc).__name__,
                                   "message": _one_line(exc), "where": _where(exc)}
            self.write()
            raise
        ok = not any(f.get("phase") == name for f in self.state["failures"])
        self.state["phases"].append({"name": name, "seconds": round(time.perf_counter() - start, 4), "ok": ok})
        self.write()

    def step(self, what: str) -> None:
        """The collective (or other step) this rank is about to enter: what a watchdog reports."""
        self.state["step"] = what
        self.state["steps"] += 1  # how far the rank got: a watchdog compares ranks by (phase, steps)
        self.write()

    def check(self, name: str, ok: bool, **where) -> None:
        self.state["checks"].append({"name": name, "ok": ok, **where})

    def fail(self, **failure) -> None:
        self.state["failures"].append({"phase": self.state["phase"], "rank": self.state["rank"], **failure})

    def warn(self, **warning) -> None:
        self.state["warnings"].append({"phase": self.state["phase"], **warning})

    def finish(self, **extra) -> dict:
        self.state.update(extra, done=True, phase=None, step=None)
        self.write()
        return self.state

    def write(self) -> None:
        if self.path is None:
            return
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, self.path)


def read_all(directory: str) -> dict[int, dict]:
    """Every rank's latest state, by rank."""
    out = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for name in names:
        if name.startswith("rank-") and name.endswith(".json"):
            try:
                with open(os.path.join(directory, name)) as f:
                    state = json.load(f)
            except (OSError, ValueError):
                continue
            out[state["rank"]] = state
    return out


def _where(exc: BaseException) -> str | None:
    """The innermost frame of the traceback, as file:line (function)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    f = frames[-1]
    return f"{f.filename}:{f.lineno} ({f.name})"


def _one_line(exc: BaseException, limit: int = 600) -> str:
    """An exception's message on one line (torch's can run to many), cut at ``limit`` characters."""
    text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    text = text or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
