"""Compare what torch built with what meshlint predicted, on one rank. [torch]

Per mesh: the rank's coordinate. Per 1-D mesh the framework names: the
group's members as torch records them, then (real mode) an all_gather of the
members' ranks inside the group and an all_reduce of them, which must equal
the predicted member list and its sum. Groups on torch's ``fake`` backend
(torchtitan's unused size-1 dims) are checked by members only: nothing runs
over them in the framework either.
"""

from __future__ import annotations

from meshlint.smoke import meshbuild, plan as smoke_plan
from meshlint.smoke.groupcheck import check_group, compare
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
        compare(prog, "coordinate", None, want, got, mesh=name)
