"""Faults injected on purpose, for the tests of the watchdog and the crash report. No torch.

``MESHLINT_SMOKE_FAULT="crash@3:verify"`` makes rank 3 raise when it enters
the verify phase; ``hang@5:mesh`` makes rank 5 sleep there forever;
``exit@2:rendezvous`` makes rank 2 die without a word (``os._exit``). Several
faults are separated by commas. Nothing reads this variable but the smoke ranks.
"""

from __future__ import annotations

import os
import time

VARIABLE = "MESHLINT_SMOKE_FAULT"


class InjectedCrash(RuntimeError):
    pass


def parse(text: str | None) -> dict[tuple[int, str], str]:
    out = {}
    for part in (text or "").split(","):
        kind, _, where = part.strip().partition("@")
        rank, _, phase = where.partition(":")
        if kind in ("crash", "hang", "exit") and rank.isdigit() and phase:
            out[(int(rank), phase)] = kind
    return out


def maybe_inject(rank: int, phase: str, environ: dict | None = None) -> None:
    env = os.environ if environ is None else environ
    kind = parse(env.get(VARIABLE)).get((rank, phase))
    if kind == "crash":
        raise InjectedCrash(f"injected crash on rank {rank} in phase {phase} ({VARIABLE})")
    if kind == "exit":
        os._exit(13)
    if kind == "hang":
        while True:  # until the watchdog ends the run
            time.sleep(3600)
