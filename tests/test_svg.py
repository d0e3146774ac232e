"""``render_svg``: valid SVG, one cell per GPU with the right marks, and a bounded summary for huge worlds."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

import pytest
from conftest import FIXTURES

from meshlint.engine.check import Options, analyse
from meshlint.mesh.devmesh import Mesh, node_of
from meshlint.report.svg import BADGE_PALETTE, PALETTE, SVG_NS, TEXT, render_svg
from meshlint.mesh.topology import CliTopology

NS = {"svg": SVG_NS}


def draw(path, **topology):
    """(svg text, report) for a config, the way ``explain --svg`` calls render_svg."""
    rep = analyse(str(path), Options(rules=[], topology=CliTopology(**topology)))
    res = rep.resolution
    assert res.axes and res.world_used, res.framework_error
    mesh = res.mesh or next(m for m in res.meshes.values() if m)
    svg = render_svg(str(path), res.axes, res.world_used, rep.topology.gpus_per_node, rep.topology.placement,
                     covered=mesh.size)
    return svg, rep


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{{{SVG_NS}}}svg"
    assert len(root.get("viewBox").split()) == 4
    return root


def gpus(root) -> list:
    return [e for e in root.iter() if "gpu" in (e.get("class") or "").split()]


def all_text(root) -> str:
    return " ".join("".join(e.itertext()) for e in root.iter(f"{{{SVG_NS}}}text"))


SMALL = [
    ("kempnerforge/70b_32gpu_tp4_pp4.toml", {"world_size": 32, "gpus_per_node": 4}, 32, 4),
    ("kempnerforge/moe_ep_32gpu.toml", {}, 32, 4),
    ("kempnerforge/cp2_8gpu.toml", {"world_size": 8, "gpus_per_node": 8}, 8, 8),
    ("torchtitan/qwen3_moe_8gpu_pp2_ep2.toml", {"world_size": 8}, 8, 8),
    ("torchtitan/llama3_8b_8gpu_hsdp_tp.toml", {"world_size": 8}, 8, 8),
]


@pytest.mark.parametrize("name, topology, world, g", SMALL)
def test_one_cell_per_gpu_on_its_node(name, topology, world, g):
    svg, rep = draw(FIXTURES / name, **topology)
    root = parse(svg)
    cells = gpus(root)
    assert len(cells) == world
    assert sorted(int(c.get("data-rank")) for c in cells) == list(range(world))
    for c in cells:
        rank = int(c.get("data-rank"))
        assert int(c.get("data-node")) == node_of(rank, g, -(-world // g))
        assert int(c.get("data-local")) == rank % g
    assert root.get("data-aggregated") == "false"
    text = all_text(root)
    assert "Legend" in text and "node 0" in text and rep.topology.gpus_per_node == g


@pytest.mark.parametrize("name, topology, world, g", [s for s in SMALL if "cp2" not in s[0]])
def test_fill_is_the_tp_group(name, topology, world, g):
    svg, rep = draw(FIXTURES / name, **topology)
    tp = rep.resolution.axes["tp"]
    fills = {int(c.get("data-rank")): c.get("fill") for c in gpus(parse(svg))}
    for rank in range(world):
        assert {fills[r] for r in tp.group(rank)} == {fills[rank]}  # one group, one colour
    for node in range(world // g):
        firsts = {tp.group(r)[0] for r in range(node * g, (node + 1) * g)}
        assert len({fills[r] for r in firsts}) == len(firsts)  # groups in a node differ


def test_pp_stages_outlined_and_labelled():
    svg, rep = draw(FIXTURES / "kempnerforge/70b_32gpu_tp4_pp4.toml", world_size=32, gpus_per_node=4)
    root = parse(svg)
    pp = rep.resolution.axes["pp"]
    assert all(int(c.get("data-pp")) == pp.local_rank(int(c.get("data-rank"))) for c in gpus(root))
    outline = [e for e in root.iter() if e.get("class") == "pp-boundary"]
    assert len(outline) == 1 and outline[0].get("d").count("M") >= 4 * 2  # a box per stage at least
    labels = [e.text for e in root.iter() if e.get("class") == "pp-label"]
    assert labels == ["PP 0", "PP 0", "PP 1", "PP 1", "PP 2", "PP 2", "PP 3", "PP 3"]
    assert "PP stage boundary" in all_text(root)


def test_pp_stages_sharing_a_node_are_named_in_the_cells():
    svg, _ = draw(FIXTURES / "torchtitan/qwen3_moe_8gpu_pp2_ep2.toml", world_size=8)
    root = parse(svg)
    text = all_text(root)
    assert "PP 0, 1" in text and "p k in a cell = stage k" in text
    assert text.count("p0") >= 4 and text.count("p1") >= 4


def test_ep_badges_give_the_ep_rank_and_group():
    svg, rep = draw(FIXTURES / "kempnerforge/moe_ep_32gpu.toml")
    root = parse(svg)
    ep = rep.resolution.axes["ep"]
    badges = [e for e in root.iter() if e.get("class") == "ep-badge"]
    assert len(badges) == 32
    by_rank = {int(c.get("data-rank")): int(c.get("data-ep")) for c in gpus(root)}
    assert by_rank == {r: ep.local_rank(r) for r in range(32)}
    badge_colour = [b.find("svg:rect", NS).get("fill") for b in badges]  # drawn in rank order
    assert badge_colour[0] == badge_colour[4] != badge_colour[1]  # {0, 4} is one EP group
    assert "EP group" in all_text(root)


def test_dp_coordinate_with_replicas():
    svg, rep = draw(FIXTURES / "torchtitan/llama3_8b_8gpu_hsdp_tp.toml", world_size=8)
    root = parse(svg)
    axes = rep.resolution.axes
    dp = {int(c.get("data-rank")): (c.get("data-dp-replicate"), c.get("data-dp")) for c in gpus(root)}
    assert dp == {r: (str(axes["dp_replicate"].local_rank(r)), str(axes["fsdp"].local_rank(r))) for r in range(8)}
    texts = [e.text for e in root.iter() if e.get("class") == "dp"]
    assert texts[:4] == ["dp 0·0", "dp 0·0", "dp 0·1", "dp 0·1"] and texts[4] == "dp 1·0"
    assert "dp_replicate" in all_text(root)


def test_ranks_outside_the_kempnerforge_cp_mesh_are_hatched():
    svg, rep = draw(FIXTURES / "kempnerforge/cp2_8gpu.toml", world_size=8, gpus_per_node=8)
    assert rep.resolution.outside == (4, 7)
    root = parse(svg)
    outside = {int(c.get("data-rank")) for c in gpus(root) if "outside" in c.get("class").split()}
    assert outside == {4, 5, 6, 7}
    for c in gpus(root):
        inside = int(c.get("data-rank")) < 4
        assert c.get("fill").startswith("url(#") != inside
    assert "ranks 4–7 outside the mesh" in all_text(root)


def test_colour_falls_back_to_the_innermost_axis(write):
    svg, _ = draw(write("[distributed]\npp = 2\ndp_replicate = 2\n"), world_size=16, gpus_per_node=4)
    root = parse(svg)
    fills = {int(c.get("data-rank")): c.get("fill") for c in gpus(root)}
    # mesh (pp 2, dp_replicate 2, dp_shard 4): dp_shard, stride 1, is innermost
    assert len({fills[r] for r in range(4)}) == 1 and fills[0] != fills[4]
    assert "fill colour = dp_shard group" in all_text(root)


def test_cyclic_placement_deals_ranks_round_the_nodes():
    svg, _ = draw(FIXTURES / "kempnerforge/70b_32gpu_tp4_pp4.toml", world_size=32, gpus_per_node=4,
                  placement="cyclic")
    cells = gpus(parse(svg))
    assert len(cells) == 32
    for c in cells:
        rank = int(c.get("data-rank"))
        assert (int(c.get("data-node")), int(c.get("data-local"))) == (rank % 8, rank // 8)


def test_512_gpus_one_cell_each(write):
    svg, _ = draw(write("[distributed]\ntp = 8\npp = 4\ndp_replicate = 2\n"), world_size=512, gpus_per_node=8)
    root = parse(svg)
    cells = gpus(root)
    assert len(cells) == 512
    assert {int(c.get("data-node")) for c in cells} == set(range(64))
    assert root.get("data-aggregated") == "false" and "ggregated" not in all_text(root)
    assert "node 63" in all_text(root)


def test_65536_gpus_are_aggregated_and_small(write):
    svg, _ = draw(write("[distributed]\ntp = 8\npp = 4\n"), world_size=65536, gpus_per_node=8)
    root = parse(svg)
    cells = gpus(root)
    assert 8 <= len(cells) <= 256
    assert len(svg) < 100_000
    assert root.get("data-aggregated") == "true"
    text = all_text(root)
    assert "Aggregated" in text and "not drawn" in text
    nodes = {int(c.get("data-node")) for c in cells}
    # the first nodes, the first node of each of the 4 stages, the last node
    assert {0, 1, 2048, 4096, 6144, 8191} <= nodes
    assert {int(c.get("data-rank")) for c in cells} >= {0, 16384, 65535}


def test_a_very_wide_node_shows_its_first_and_last_gpus():
    mesh = Mesh("device", ("dp_shard", "tp"), (512, 2))
    axes = {d: mesh.axis(d) for d in mesh.dims}
    root = parse(render_svg("wide", axes, 1024, 1024))
    locals_ = {int(c.get("data-local")) for c in gpus(root)}
    assert 0 in locals_ and 1023 in locals_ and len(locals_) < 100
    assert "of node 0 not drawn" in all_text(root)


def test_partial_last_node_and_no_axes():
    root = parse(render_svg("t", {}, 30, 4))
    cells = gpus(root)
    assert len(cells) == 30 and max(int(c.get("data-node")) for c in cells) == 7
    assert len({c.get("fill") for c in cells}) == 1


def test_text_is_escaped():
    title = 'configs/<a&b> "x" \x01\x1b.toml'
    root = parse(render_svg(title, {}, 8, 8))
    assert root.find("svg:title", NS).text == 'configs/<a&b> "x" .toml'
    assert title[:15] in all_text(root)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError):
        render_svg("t", {}, 0, 8)
    with pytest.raises(ValueError):
        render_svg("t", {}, 8, 0)


def _luminance(colour: str) -> float:
    def channel(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_text_is_legible_on_every_colour():
    assert len(set(PALETTE)) == len(PALETTE) >= 8
    assert all(_contrast(c, TEXT) >= 4.5 for c in PALETTE)
    assert all(_contrast(c, "#ffffff") >= 4.5 for c in BADGE_PALETTE)


def test_import_is_light():
    code = ("import sys, meshlint.report.svg; "
            "print(sorted(m for m in ('torch', 'jsonschema', 'click', 'meshlint.engine.check') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_cell_colour_is_from_the_palette():
    svg, _ = draw(FIXTURES / "kempnerforge/moe_ep_32gpu.toml")
    groups = defaultdict(set)
    for c in gpus(parse(svg)):
        assert c.get("fill") in PALETTE
        groups[c.get("data-group")].add(c.get("fill"))
    assert all(len(f) == 1 for f in groups.values())
