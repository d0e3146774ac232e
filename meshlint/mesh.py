"""Device meshes as pure arithmetic: dims, strides, coordinates, groups, placement.

A mesh built by ``init_device_mesh(shape, names)`` or by unflattening the world
mesh lays ranks out row-major: the LAST dim varies fastest. So the group of a
rank along a dim of size ``s`` and stride ``t`` (the product of the sizes after
it) is ``{base + k*t : k < s}``. Everything here is O(number of dims) or
O(group size); nothing walks the world, so a million-rank mesh is instant.
"""

from __future__ import annotations

from math import gcd, prod
from typing import NamedTuple


class Mesh(NamedTuple):
    name: str
    dims: tuple
    sizes: tuple

    @property
    def size(self) -> int:
        return prod(self.sizes)

    @property
    def strides(self) -> tuple:
        out, acc = [], 1
        for size in reversed(self.sizes):
            out.append(acc)
            acc *= size
        return tuple(reversed(out))

    def dim_index(self, dim: str) -> int:
        return self.dims.index(dim)

    def coords(self, rank: int) -> tuple:
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} is outside mesh {self.name!r} of {self.size} ranks")
        out = []
        for stride, size in zip(self.strides, self.sizes):
            out.append((rank // stride) % size)
        return tuple(out)

    def rank_of(self, coords) -> int:
        if len(coords) != len(self.dims):
            raise ValueError(f"mesh {self.name!r} has {len(self.dims)} dims, got {len(coords)} coordinates")
        rank = 0
        for c, stride, size, dim in zip(coords, self.strides, self.sizes, self.dims):
            if not 0 <= c < size:
                raise ValueError(f"coordinate {c} out of range for dim {dim!r} of size {size}")
            rank += c * stride
        return rank

    def axis(self, dim: str) -> "Axis":
        i = self.dim_index(dim)
        return Axis(dim, self.sizes[i], self.strides[i], self.name, self.size)

    def to_json(self) -> dict:
        return {"dims": list(self.dims), "sizes": list(self.sizes), "strides": list(self.strides),
                "ranks": self.size}


class Axis(NamedTuple):
    """A 1-D family of groups: ``size`` ranks ``stride`` apart, inside a mesh of ``span`` ranks."""

    name: str
    size: int
    stride: int
    mesh: str
    span: int

    @property
    def groups(self) -> int:
        return self.span // self.size

    def group(self, rank: int) -> list:
        if not 0 <= rank < self.span:
            raise ValueError(f"rank {rank} is outside the {self.span}-rank mesh")
        block = self.size * self.stride
        base = rank - ((rank // self.stride) % self.size) * self.stride
        assert base // block == rank // block
        return [base + k * self.stride for k in range(self.size)]

    def local_rank(self, rank: int) -> int:
        return (rank // self.stride) % self.size


class Placement(NamedTuple):
    """How an axis's groups sit on nodes."""

    intra_node: bool        # every group inside one node
    max_nodes: int          # nodes the widest group spans
    crossing_groups: int    # groups that cross a node boundary
    example: tuple | None   # (first members of) a crossing group


def node_of(rank: int, gpus_per_node: int, nodes: int, placement: str = "block") -> int:
    """Node index of a rank: block (SLURM default, torchrun) or cyclic distribution."""
    if placement == "cyclic":
        return rank % nodes
    return rank // gpus_per_node


def place(axis: Axis, gpus_per_node: int, world_size: int, placement: str = "block") -> Placement:
    """Exact placement of an axis's groups, by arithmetic (no walk over the world).

    Block placement (``rank = node * G + local``): with ``s > 1`` all groups
    stay inside a node exactly when ``stride * size`` divides ``G``, or when
    the whole mesh fits on one node. The counts below are exact and cost
    O(G): the layout of blocks against node boundaries repeats every
    ``lcm(stride * size, G)`` ranks.
    """
    s, t, span = axis.size, axis.stride, axis.span
    g = gpus_per_node
    nodes = -(-max(world_size, span) // g)
    if s == 1 or nodes == 1:
        return Placement(True, 1, 0, None)
    if placement == "cyclic":
        return _place_cyclic(axis, nodes)
    block = s * t
    if g % block == 0:
        return Placement(True, 1, 0, None)
    example = _first_crossing_block(axis, g)
    if t >= g:
        # consecutive members are at least a node apart: every group spans s nodes
        return Placement(False, s, axis.groups, example)
    reach = (s - 1) * t  # last member - first member
    threshold = g - reach  # a group crosses iff (first mod G) >= threshold
    period_blocks = g // gcd(block, g)
    total_blocks = span // block
    full, rest = divmod(total_blocks, period_blocks)

    def count(blocks: int) -> tuple[int, int]:
        crossing, top = 0, 0
        for m in range(blocks):
            b = (m * block) % g  # first members: b, b+1, ..., b+t-1 (mod G)
            crossing += _count_at_least(b, t, g, threshold)
            top = max(top, g - 1 if b + t - 1 >= g else b + t - 1)
        return crossing, top

    per_period, top = count(min(period_blocks, total_blocks))
    crossing = per_period * full + (count(rest)[0] if rest else 0)
    max_nodes = 1 + (top + reach) // g
    return Placement(crossing == 0, max_nodes, crossing, example if crossing else None)


def _count_at_least(b: int, n: int, g: int, threshold: int) -> int:
    """How many of (b + j) mod g, j < n (n < g), are >= threshold."""
    if threshold <= 0:
        return n
    if threshold >= g:
        return 0
    first = min(n, g - b)  # b .. b+first-1 before wrapping past g-1
    count = max(0, (b + first - 1) - max(b, threshold) + 1)
    wrapped = n - first  # then 0 .. wrapped-1
    if wrapped:
        count += max(0, wrapped - threshold)
    return count


def _first_crossing_block(axis: Axis, g: int) -> tuple:
    """A group that crosses a node boundary (the one holding the last rank of node 0, if any)."""
    for candidate in (g - 1, g, 0):
        if 0 <= candidate < axis.span:
            members = axis.group(candidate)
            if members[0] // g != members[-1] // g:
                return tuple(members[:16])
    return tuple(axis.group(0)[:16])


def _place_cyclic(axis: Axis, nodes: int) -> Placement:
    """Cyclic distribution (``node = rank % N``): members differ by multiples of t."""
    s, t = axis.size, axis.stride
    distinct = nodes // gcd(nodes, t)
    if distinct == 1:
        return Placement(True, 1, 0, None)
    example = tuple(axis.group(0)[:16])
    return Placement(False, min(s, distinct), axis.groups, example)
