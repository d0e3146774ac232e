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


def build_and_verify(plan: dict, rank: int, prog: Progress, device: str, collectives: bool = True,
                     world_groups: bool = True, before=None) -> dict:
    """The mesh and verify phases of one rank: the framework's meshes (or, for Megatron-LM, its process groups)
    built and checked; ``world_groups``: also every group of the world (Megatron, where all are known);
    ``before(phase)`` runs first in each phase (the tests' fault injection). Returns the meshes built."""
    before = before or (lambda phase: None)
    if is_megatron(plan):
        from meshlint.smoke import megatron

        with prog.phase("mesh"):
            before("mesh")
            built = megatron.build(plan, steps=prog.step, built=prog.state.setdefault("built", []))
        with prog.phase("verify"):
            before("verify")
            if world_groups:
                megatron.verify_world(plan, built, prog)
            megatron.verify_rank(plan, built, rank, prog, device, collectives)
        return {}
    with prog.phase("mesh"):
        before("mesh")
        meshes = meshbuild.build(plan, device, steps=prog.step, built=prog.state.setdefault("built", []))
    with prog.phase("verify"):
        before("verify")
        verify(plan, meshes, rank, prog, device, collectives)
    return meshes


def is_megatron(plan: dict) -> bool:
    return bool(plan["recipe"]) and plan["recipe"][0]["op"] == "megatron"


def verify(plan: dict, meshes: dict, rank: int, prog: Progress, device: str, collectives: bool = True) -> None:
    _coordinates(plan, meshes, rank, prog)
    for axis in plan["axes"]:
        expected = smoke_plan.expected_group(plan, axis, rank)
        if expected is None:
            continue  # the rank is outside this mesh (reported as a coordinate failure)
        mesh = meshbuild.axis_mesh(plan, meshes, axis)
        check_group(prog, axis, expected, mesh.get_group(), rank, device, collectives)
    prog.step(None)


def check_group(prog: Progress, axis: str, expected: list, group, rank: int, device: str, collectives: bool) -> None:
    """One group: the members torch recorded, then (``collectives``) an all_gather and an all_reduce inside it."""
    actual = dist.get_process_group_ranks(group)
    _compare(prog, "members", axis, expected, actual)
    if not collectives:
        return
    if meshbuild.group_backend(group) == "fake":
        prog.check("collectives", True, axis=axis, skipped="fake backend (the framework never communicates over it)")
        return
    prog.step(f"all_gather {axis}")
    gathered = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(len(actual))]
    dist.all_gather(gathered, torch.tensor([rank], dtype=torch.int64, device=device), group=group)
    _compare(prog, "all_gather", axis, expected, [int(t.item()) for t in gathered])
    prog.step(f"all_reduce {axis}")
    total = torch.tensor([rank], dtype=torch.int64, device=device)
    dist.all_reduce(total, group=group)
    _compare(prog, "all_reduce", axis, sum(expected), int(total.item()))


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
