"""Mesh arithmetic: coordinates, groups and placement, checked against brute force."""

from __future__ import annotations

import itertools

import pytest

from meshlint.mesh.devmesh import Mesh, place


def brute(axis, g, placement="block", nodes=None):
    groups = {tuple(axis.group(r)) for r in range(axis.span)}
    nodes = nodes or -(-axis.span // g)
    node = (lambda r: r % nodes) if placement == "cyclic" else (lambda r: r // g)
    spans = [len({node(r) for r in grp}) for grp in groups]
    crossing = sum(s > 1 for s in spans)
    return crossing == 0, max(spans), crossing


def test_coordinates_and_groups_row_major():
    m = Mesh("m", ("pp", "dp_shard", "tp"), (4, 2, 4))
    assert m.strides == (8, 4, 1)
    assert m.coords(13) == (1, 1, 1)
    assert m.rank_of((1, 1, 1)) == 13
    assert m.axis("tp").group(13) == [12, 13, 14, 15]
    assert m.axis("dp_shard").group(13) == [9, 13]
    assert m.axis("pp").group(13) == [5, 13, 21, 29]
    for r in range(m.size):
        assert m.rank_of(m.coords(r)) == r


@pytest.mark.parametrize("sizes", list(itertools.product([1, 2, 3, 4], [1, 2, 5], [1, 2, 4, 3])))
@pytest.mark.parametrize("g", [1, 2, 3, 4, 6, 8])
def test_block_placement_matches_brute_force(sizes, g):
    m = Mesh("m", ("a", "b", "c"), sizes)
    for dim in m.dims:
        axis = m.axis(dim)
        p = place(axis, g, m.size)
        assert (p.intra_node, p.max_nodes, p.crossing_groups) == brute(axis, g), (sizes, g, dim)
        if not p.intra_node:
            assert len({r // g for r in p.example}) > 1


@pytest.mark.parametrize("sizes", [(2, 4), (4, 2), (2, 2, 2), (3, 4)])
@pytest.mark.parametrize("g", [2, 4])
def test_cyclic_placement_matches_brute_force(sizes, g):
    m = Mesh("m", tuple("abc"[: len(sizes)]), sizes)
    nodes = -(-m.size // g)
    for dim in m.dims:
        axis = m.axis(dim)
        p = place(axis, g, m.size, "cyclic")
        assert (p.intra_node, p.max_nodes, p.crossing_groups) == brute(axis, g, "cyclic", nodes), (sizes, g, dim)


def test_million_rank_mesh_is_arithmetic():
    m = Mesh("m", ("pp", "dp_shard", "tp"), (4, 32768, 8))
    assert m.size == 1_048_576
    assert place(m.axis("tp"), 8, m.size).intra_node
    p = place(m.axis("dp_shard"), 8, m.size)
    assert (p.intra_node, p.max_nodes, p.crossing_groups) == (False, 32768, 32)
    assert m.axis("dp_shard").group(m.size - 1)[-1] == m.size - 1
