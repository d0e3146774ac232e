"""Questions about one rank, answered by arithmetic: its coordinates, its groups, its node.

Everything is O(number of dims) or O(group size): explaining rank 1,000,000 of
a 1,048,576-rank world costs the same as rank 5 of 8.
"""

from __future__ import annotations

from typing import Protocol

from meshlint.mesh.devmesh import compact_ranks, node_of


class Resolution(Protocol):
    """What these questions read of a resolution (meshlint.frameworks.base.Resolution has it): the meshes by
    name and the 1-D axes (each with size, stride and the mesh it lives in)."""

    meshes: dict
    axes: dict

MAX_LISTED = 65_536  # group members listed in JSON; bigger groups are given as first/stride/size


def coords(res: Resolution, rank: int) -> dict:
    """``{mesh: {dim: index}}`` for every mesh that covers ``rank`` (None for one that does not)."""
    out = {}
    for name, mesh in res.meshes.items():
        if mesh is None or rank >= mesh.size:
            out[name] = None
        else:
            out[name] = dict(zip(mesh.dims, mesh.coords(rank)))
    return out


def flat_coords(res: Resolution, rank: int) -> dict:
    """``{dim: index}`` over all meshes (a dim named in two meshes has one coordinate in both)."""
    out: dict = {}
    for per_mesh in coords(res, rank).values():
        for dim, index in (per_mesh or {}).items():
            out.setdefault(dim, index)
    return out


def group(res: Resolution, axis_name: str, rank: int) -> dict | None:
    """The group of ``rank`` along a 1-D mesh: members (when not huge), first, stride, size."""
    axis = res.axes[axis_name]
    if rank >= axis.span:
        return None
    first = axis.group(rank)[0] if axis.size <= MAX_LISTED else rank - axis.local_rank(rank) * axis.stride
    info = {"first": first, "stride": axis.stride, "size": axis.size, "index": axis.local_rank(rank)}
    if axis.size <= MAX_LISTED:
        info["members"] = axis.group(rank)
    return info


def groups(res: Resolution, rank: int) -> dict:
    return {name: group(res, name, rank) for name in res.axes}


def describe_group(info: dict | None) -> str:
    """``{4-7}`` or ``{1, 5, 9, …, 29}`` (size 8, every 4th rank)."""
    if info is None:
        return "outside the mesh"
    if "members" in info:
        return "{" + compact_ranks(info["members"]) + "}"
    last = info["first"] + (info["size"] - 1) * info["stride"]
    return f"{{{info['first']}, {info['first'] + info['stride']}, …, {last}}} ({info['size']} ranks)"


def placement(rank: int, gpus_per_node: int | None, world: int, mode: str) -> dict | None:
    if not gpus_per_node:
        return None
    nodes = -(-world // gpus_per_node)
    node = node_of(rank, gpus_per_node, nodes, mode)
    local = rank % gpus_per_node if mode == "block" else rank // nodes
    return {"node": node, "local_rank": local}


def rank_of(res: Resolution, wanted: dict) -> tuple[str, int]:
    """Coordinates -> rank: the first mesh that has every named dim; omitted dims of size 1 count as 0."""
    problems = []
    for name, mesh in res.meshes.items():
        if mesh is None or not set(wanted) <= set(mesh.dims):
            continue
        missing = [d for d, s in zip(mesh.dims, mesh.sizes) if d not in wanted and s > 1]
        if missing:
            problems.append(f"mesh {name!r} also needs {', '.join(missing)}")
            continue
        try:
            return name, mesh.rank_of(tuple(wanted.get(d, 0) for d in mesh.dims))
        except ValueError as exc:
            problems.append(f"mesh {name!r}: {exc}")
    dims = sorted({d for m in res.meshes.values() if m for d in m.dims})
    raise ValueError("; ".join(problems) or f"no mesh has dims {', '.join(wanted)} (dims: {', '.join(dims)})")


def sample_ranks(world: int, extra: tuple = ()) -> list[int]:
    """First, a middle one, last (or the ones asked for)."""
    if extra:
        return sorted(set(extra))
    picks = [0, world // 2 + (1 if world > 4 else 0), world - 1]
    return sorted({r for r in picks if 0 <= r < world})
