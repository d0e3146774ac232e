"""Live progress of a launched smoke on stderr: the phase, how many ranks are there, the slowest rank. No torch.

On a terminal one line is rewritten in place (and wiped at the end); into a
file or a pipe (CI logs) a line is written only when the phase or the count
of ranks there changes. Never on stdout: the report (text or JSON) is alone there.
"""

from __future__ import annotations

import sys

from meshlint.smoke.report import PHASES

ORDER = {p: i for i, p in enumerate(PHASES)}
DONE = len(PHASES)


def describe(states: dict, supervisor: dict, world: int) -> tuple[tuple, str]:
    """(what changed, the line) for the ranks' states and the supervisor's."""
    if not states:
        if supervisor.get("status") == "running":
            return ("start",), f"starting {world} ranks ({supervisor.get('backend')} on {supervisor.get('device')})"
        return ("agent",), "starting torch's elastic agent and the fork server (importing torch)"

    def where(st: dict) -> int:
        return DONE if st.get("done") else ORDER.get(st.get("phase") or "", 0)

    front = max(where(st) for st in states.values())
    there = sum(1 for st in states.values() if where(st) >= front)
    phase = "done" if front == DONE else PHASES[front]
    line = f"{phase}: {there}/{world} ranks"
    live = {r: st for r, st in states.items() if not st.get("done")}
    if len(states) < world:
        missing = world - len(states)
        line += f"; {missing} not started yet"
    elif live and there < world:
        rank, st = min(live.items(), key=lambda kv: (where(kv[1]), kv[1].get("steps", 0), kv[0]))
        line += f"; slowest rank {rank} in {st.get('phase')}" + (f" ({st['step']!r})" if st.get("step") else "")
    return (phase, there, len(states)), line


class Live:
    """``show(states, supervisor, seconds)`` for ``launch.launch``; ``close()`` when the run has ended."""

    def __init__(self, world: int, stream=None, tty: bool | None = None):
        self.world = world
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.last: tuple | None = None
        self.width = 0

    def __call__(self, states: dict, supervisor: dict, seconds: float) -> None:
        key, line = describe(states, supervisor, self.world)
        text = f"meshlint smoke: {seconds:5.1f} s  {line}"
        try:
            if self.tty:
                self.stream.write("\r" + text.ljust(self.width))
                self.width = len(text)
            elif key != self.last:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed or gone: progress is not worth failing over
            pass
        self.last = key

    def close(self) -> None:
        if self.tty and self.width:
            try:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass
