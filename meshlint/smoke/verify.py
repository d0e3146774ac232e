"""Compare what torch built with what meshlint predicted, on one rank. [torch]

Per mesh: the rank's coordinate. Per 1-D mesh the framework names: the
group's members as torch records them, then (real mode) an all_gather of the
members' ranks inside the group and an all_reduce of them, which must equal
the predicted member list and its sum. Groups on torch's ``fake`` backend
(torchtitan's unused size-1 dims) are checked by members only: nothing runs
over them in the framework either.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from meshlint.smoke import meshbuild, plan as smoke_plan
from meshlint.smoke.progress import Progress


def verify(plan: dict, meshes: dict, rank: int, prog: Progress, device: str, collectives: bool = True) -> None:
    _coordinates(plan, meshes, rank, prog)
    for axis in plan["axes"]:
        expected = smoke_plan.expected_group(plan, axis, rank)
        if expected is None:
            continue  # the rank is outside this mesh (reported as a coordinate failure)
        mesh = meshbuild.axis_mesh(plan, meshes, axis)
        group = mesh.get_group()
        actual = dist.get_process_group_ranks(group)
        _compare(prog, "members", axis, expected, actual)
        backend = meshbuild.group_backend(group)
        if not collectives:
            continue
        if backend == "fake":
            prog.check("collectives", True, axis=axis, skipped="fake backend (the framework never communicates over it)")
            continue
        prog.step(f"all_gather {axis}")
        gathered = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(len(actual))]
        dist.all_gather(gathered, torch.tensor([rank], dtype=torch.int64, device=device), group=group)
        _compare(prog, "all_gather", axis, expected, [int(t.item()) for t in gathered])
        prog.step(f"all_reduce {axis}")
        total = torch.tensor([rank], dtype=torch.int64, device=device)
        dist.all_reduce(total, group=group)
        _compare(prog, "all_reduce", axis, sum(expected), int(total.item()))
    prog.step(None)


def _coordinates(plan: dict, meshes: dict, rank: int, prog: Progress) -> None:
    expected = smoke_plan.expected_coords(plan, rank)
    for name, want in expected.items():
        mesh = meshes.get(name)
        if mesh is None:
            continue
        got = mesh.get_coordinate()
        got = list(got) if got is not None else None
        if want is None and got is None:
            size = smoke_plan.mesh_of(plan, name).size
            prog.check("coverage", False, mesh=name)
            prog.fail(check="coverage", mesh=name, expected=f"a coordinate in the {size}-rank mesh", actual=None,
                      message=f"rank {rank} is outside mesh {name!r} ({size} of {plan['world_size']} ranks): "
                              "it gets no coordinate and no group on any of its dims")
            continue
        _compare(prog, "coordinate", None, want, got, mesh=name)


def _compare(prog: Progress, check: str, axis: str | None, expected, actual, **where) -> None:
    ok = expected == actual
    place = {"axis": axis} if axis else {}
    place.update(where)
    prog.check(check, ok, **place)
    if not ok:
        prog.fail(check=check, expected=expected, actual=actual, **place)
