"""Device meshes as pure arithmetic: dims, strides, coordinates, groups, placement.

A mesh built by ``init_device_mesh(shape, names)`` or by unflattening the world
mesh lays ranks out row-major: the LAST dim varies fastest. So the group of a
rank along a dim of size ``s`` and stride ``t`` (the product of the sizes after
it) is ``{base + k*t : k < s}``. Everything here is O(number of dims), O(log)
(placement) or O(members asked for); nothing walks the world or a group, so a
16-million-rank mesh costs what an 8-rank one does.
"""

from __future__ import annotations

from math import gcd, prod

from meshlint.record import Record
from meshlint.limits import MAX_EXAMPLE_MEMBERS


class Mesh(Record):
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


class Axis(Record):
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
        """Every member of ``rank``'s group: O(size), so callers bound the size (see ``members``)."""
        return self.members(rank)

    def first(self, rank: int) -> int:
        """The lowest rank of ``rank``'s group."""
        if not 0 <= rank < self.span:
            raise ValueError(f"rank {rank} is outside the {self.span}-rank mesh")
        return rank - ((rank // self.stride) % self.size) * self.stride

    def members(self, rank: int, limit: int | None = None) -> list:
        """The first ``limit`` members (all without a limit) of ``rank``'s group, lowest first."""
        base = self.first(rank)
        count = self.size if limit is None else min(self.size, limit)
        return [base + k * self.stride for k in range(count)]

    def local_rank(self, rank: int) -> int:
        return (rank // self.stride) % self.size


class Placement(Record):
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
    """Exact placement of an axis's groups, in closed form: O(log) whatever the world or node size.

    Block placement (``rank = node * G + local``): with ``s > 1`` all groups
    stay inside a node exactly when ``stride * size`` divides ``G``, or when
    the whole mesh fits on one node. Otherwise the groups' first members are
    ``m * block + j`` (``j < stride``), a group crosses a node boundary when
    its first member sits at or past ``G - reach`` within its node, and those
    are counted with floor sums (:func:`_count_at_least`), not by walking the
    blocks or the nodes.
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
    blocks = span // block
    threshold = g - reach  # a group crosses iff (first mod G) >= threshold
    crossing = axis.groups if threshold <= 0 else _count_at_least(blocks, block, t, g, threshold)
    wide, rest = divmod(reach, g)  # a group spans wide+1 nodes, or wide+2 when its first member sits late
    late = rest > 0 and _count_at_least(blocks, block, t, g, g - rest) > 0
    return Placement(crossing == 0, wide + 1 + late, crossing, example if crossing else None)


def _count_at_least(blocks: int, block: int, t: int, g: int, threshold: int) -> int:
    """How many first members ``m*block + j`` (m < blocks, j < t) sit at or past ``threshold`` in their node.

    With ``F(x) = sum(u // g for u < x)``, the residues below ``threshold`` among
    ``z < y`` number ``F(y + g) - F(y + g - threshold)``; summing that over the
    blocks is four floor sums. ``0 < threshold <= g``.
    """
    def total(c: int) -> int:  # sum over m < blocks of F(m*block + c), c >= 0
        f, fi, ff = _floor_sums(blocks - 1, block, c, g)
        return block * fi + c * f - g * (ff + f) // 2

    below = total(t + g) - total(t + g - threshold) - total(g) + total(g - threshold)
    return blocks * t - below


def _floor_sums(n: int, a: int, b: int, c: int) -> tuple[int, int, int]:
    """For q_i = (a*i + b) // c, i = 0..n: (sum q_i, sum i*q_i, sum q_i**2); a, b >= 0, c > 0.

    The generalised Euclidean algorithm: O(log) steps (each swaps a and c).
    """
    if n < 0:
        return 0, 0, 0
    s1, s2 = n * (n + 1) // 2, n * (n + 1) * (2 * n + 1) // 6
    if a == 0:
        q = b // c
        return (n + 1) * q, q * s1, (n + 1) * q * q
    if a >= c or b >= c:
        qa, qb = a // c, b // c
        f, g, h = _floor_sums(n, a % c, b % c, c)
        return (f + qa * s1 + qb * (n + 1),
                g + qa * s2 + qb * s1,
                h + 2 * qb * f + 2 * qa * g + qa * qa * s2 + qb * qb * (n + 1) + 2 * qa * qb * s1)
    m = (a * n + b) // c
    if m == 0:
        return 0, 0, 0
    f, g, h = _floor_sums(m - 1, c, c - b - 1, a)
    f_out = n * m - f
    g_out = (m * n * (n + 1) - h - f) // 2
    h_out = n * m * (m + 1) - 2 * g - 2 * f - f_out
    return f_out, g_out, h_out


def _first_crossing_block(axis: Axis, g: int) -> tuple:
    """A group that crosses a node boundary (the one holding the last rank of node 0, if any):
    its first members only, however large the group."""
    last = (axis.size - 1) * axis.stride
    for candidate in (g - 1, g, 0):
        if 0 <= candidate < axis.span:
            first = axis.first(candidate)
            if first // g != (first + last) // g:
                return tuple(axis.members(candidate, MAX_EXAMPLE_MEMBERS))
    return tuple(axis.members(0, MAX_EXAMPLE_MEMBERS))


def _place_cyclic(axis: Axis, nodes: int) -> Placement:
    """Cyclic distribution (``node = rank % N``): members differ by multiples of t."""
    s, t = axis.size, axis.stride
    distinct = nodes // gcd(nodes, t)
    if distinct == 1:
        return Placement(True, 1, 0, None)
    example = tuple(axis.members(0, MAX_EXAMPLE_MEMBERS))
    return Placement(False, min(s, distinct), axis.groups, example)


def compact_ranks(items: list[int], max_parts: int = 8) -> str:
    parts: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{items[i]}-{items[j]}")
        else:
            parts.extend(str(x) for x in items[i : j + 1])
        i = j + 1
    if len(parts) > max_parts:
        parts = parts[: max_parts - 2] + ["…", parts[-1]]
    return ", ".join(parts)
