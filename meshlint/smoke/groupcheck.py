"""One process group checked against its predicted members, and the collectives inside it. [torch]

Shared by the DeviceMesh checks (verify) and Megatron's groups (megatron).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from meshlint.smoke.meshbuild import group_backend
from meshlint.smoke.progress import Progress


def check_group(prog: Progress, axis: str, expected: list, group, rank: int, device: str, collectives: bool) -> None:
    """One group: the members torch recorded, then (``collectives``) an all_gather and an all_reduce inside it."""
    actual = dist.get_process_group_ranks(group)
    compare(prog, "members", axis, expected, actual)
    if not collectives:
        return
    if group_backend(group) == "fake":
        prog.check("collectives", True, axis=axis, skipped="fake backend (the framework never communicates over it)")
        return
    prog.step(f"all_gather {axis}")
    gathered = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(len(actual))]
    dist.all_gather(gathered, torch.tensor([rank], dtype=torch.int64, device=device), group=group)
    compare(prog, "all_gather", axis, expected, [int(t.item()) for t in gathered])
    prog.step(f"all_reduce {axis}")
    total = torch.tensor([rank], dtype=torch.int64, device=device)
    dist.all_reduce(total, group=group)
    compare(prog, "all_reduce", axis, sum(expected), int(total.item()))


def compare(prog: Progress, check: str, axis: str | None, expected, actual, **where) -> None:
    ok = expected == actual
    place = {"axis": axis} if axis else {}
    place.update(where)
    prog.check(check, ok, **place)
    if not ok:
        prog.fail(check=check, expected=expected, actual=actual, **place)

