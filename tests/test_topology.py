"""World size and node shape: every source, precedence, and disagreement."""

from __future__ import annotations

from meshlint.mesh.topology import (
    CliTopology,
    comment_hints,
    directive_hints,
    filename_hint,
    resolve_topology,
)


def comments(*lines):
    return [(i + 1, 1, text) for i, text in enumerate(lines)]


def test_directive():
    hints, problems = directive_hints(comments(" meshlint: world_size=32 gpus_per_node=4"))
    assert (hints[0].world_size, hints[0].gpus_per_node) == (32, 4)
    assert not problems
    hints, _ = directive_hints(comments(" meshlint: nodes=8 gpus_per_node=8"))
    assert hints[0].world_size == 64


def test_directive_problems_name_the_problem():
    _, problems = directive_hints(comments(" meshlint: wold_size=32", " meshlint: world_size=abc", " meshlint: world_size"))
    messages = [p[2] for p in problems]
    assert "did you mean world_size?" in messages[0]
    assert "expected a whole number" in messages[1]
    assert "is not key=value" in messages[2]


def test_directive_ignores_suppressions_and_trailing_comments():
    hints, problems = directive_hints(comments(" meshlint: ignore[ML203]", " meshlint: world_size=8   # note"))
    assert not problems
    assert hints[0].world_size == 8


def test_filename_convention():
    assert filename_hint("70b_32gpu_tp4_pp4.toml").world_size == 32
    assert filename_hint("moe_ep_32gpu.toml").world_size == 32
    assert filename_hint("llama-64GPUs.toml").world_size == 64
    assert filename_hint("7b.toml") is None
    assert filename_hint("gpu_tuning.toml") is None
    assert filename_hint("a_8gpu_16gpu.toml") is None  # ambiguous


def test_comment_hints():
    launch, shape = comment_hints(comments(" 8 nodes × 4 H200", " srun --nodes=8 --ntasks-per-node=4 --gpus-per-node=4"))
    assert (launch.world_size, launch.gpus_per_node, launch.nodes) == (32, 4, 8)
    assert (shape.world_size, shape.gpus_per_node) == (32, 4)
    (torchrun,) = comment_hints(comments(" torchrun --nproc_per_node=8 train.py"))
    assert (torchrun.world_size, torchrun.gpus_per_node) == (8, 8)
    (two_nodes,) = comment_hints(comments(" torchrun --nnodes 2 --nproc-per-node 8 train.py"))
    assert two_nodes.world_size == 16


def test_precedence_and_conflicts():
    cli = CliTopology(world_size=64).hint()
    topo = resolve_topology([cli, filename_hint("x_32gpu.toml")])
    assert topo.world_size == 64 and topo.world_source == "--world-size 64"
    assert topo.conflicts[0][0] == "world size"
    topo = resolve_topology([None, filename_hint("x_32gpu.toml"), *comment_hints(comments(" 8 nodes x 4 GPUs"))])
    assert (topo.world_size, topo.gpus_per_node, topo.nodes) == (32, 4, 8)
    assert not topo.conflicts


def test_nothing_is_defaulted():
    topo = resolve_topology([None, filename_hint("7b.toml")])
    assert topo.world_size is None and topo.gpus_per_node is None and topo.nodes is None


def test_cli_nodes_times_gpus():
    hint = CliTopology(nodes=4, gpus_per_node=8).hint()
    assert (hint.world_size, hint.gpus_per_node) == (32, 8)
