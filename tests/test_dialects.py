"""Resolution exactly as each framework does it: the seed examples and the framework's own errors."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from meshlint.frameworks.dialects import DIALECTS, detect
from meshlint.errors import InputError
from meshlint.inputs.source import parse_source, read_source


def resolve(text: str, world: int | None, dialect: str | None = None):
    source = parse_source("x.toml", text.encode())
    module = DIALECTS[dialect or detect(source.data)]
    spec = module.read(source)
    return spec, module.resolve(spec, world)


def resolve_file(path, world):
    source = read_source(str(path))
    module = DIALECTS[detect(source.data)]
    return module.resolve(module.read(source), world)


# --------------------------------------------------------------------- seed examples

@pytest.mark.parametrize("name, dims, sizes", [
    ("7b_32gpu_fsdp.toml", ("dp_shard",), (32,)),
    ("70b_32gpu_tp4.toml", ("dp_shard", "tp"), (8, 4)),
    ("70b_32gpu_tp4_pp4.toml", ("pp", "dp_shard", "tp"), (4, 2, 4)),
    ("moe_ep_32gpu.toml", ("dp_shard", "ep", "tp"), (4, 2, 4)),
])
def test_kempnerforge_seed_meshes(name, dims, sizes):
    res = resolve_file(FIXTURES / "kempnerforge" / name, 32)
    assert (res.mesh.dims, res.mesh.sizes) == (dims, sizes)
    assert res.framework_error is None


def test_torchtitan_seed_mesh():
    res = resolve_file(FIXTURES / "torchtitan" / "llama3_8b_8gpu_hsdp_tp.toml", 8)
    assert (res.mesh.dims, res.mesh.sizes) == (("pp", "dp_replicate", "fsdp", "tp"), (1, 2, 2, 2))
    assert res.meshes["dataloading"].sizes == (1, 4, 1, 2)
    assert res.meshes["sparse"].sizes == (1, 2, 4, 1, 1)
    assert {n: a.size for n, a in res.axes.items()} == {
        "pp": 1, "batch": 4, "loss": 4, "dp_replicate": 2, "fsdp": 2, "cp": 1, "tp": 2, "ep": 1, "efsdp": 4, "etp": 1}


# --------------------------------------------------------------------- KempnerForge

@pytest.mark.parametrize("distributed, world, dims, sizes", [
    ("tp = 2", 2, ("dp_shard", "tp"), (1, 2)),                     # dp_shard inserted before tp
    ("ep = 2\ntp = 2", 4, ("dp_shard", "ep", "tp"), (1, 2, 2)),    # inserted before ep
    ("ep = 4", 4, ("dp_shard", "ep"), (1, 4)),
    ("dp_replicate = 2\ndp_shard = 4", 8, ("dp_replicate", "dp_shard"), (2, 4)),
    ("pp = 2\ndp_replicate = 2\ntp = 2", 8, ("pp", "dp_replicate", "dp_shard", "tp"), (2, 2, 1, 2)),
    ("cp = 4", 4, ("dp_shard",), (4,)),                            # flat fallback
    ("pp = 8", 8, ("pp",), (8,)),
])
def test_kempnerforge_mesh_construction(distributed, world, dims, sizes):
    _, res = resolve(f"[distributed]\n{distributed}\n", world)
    assert (res.mesh.dims, res.mesh.sizes) == (dims, sizes)


def test_kempnerforge_cp_leaves_ranks_outside_the_mesh():
    _, res = resolve("[distributed]\ntp = 2\ncp = 2\n", 8)
    assert (res.mesh.dims, res.mesh.sizes) == (("dp_shard", "tp"), (2, 2))
    assert res.outside == (4, 7)
    assert res.framework_error is None  # the arithmetic passes: that is the trap


def test_kempnerforge_single_process_builds_no_mesh():
    _, res = resolve("[distributed]\n", 1)
    assert res.mesh is None and res.framework_error is None and res.degrees["dp_shard"] == 1


@pytest.mark.parametrize("distributed, world, error", [
    ("tp = 4", 30, "ValueError: world_size (30) not divisible by dp_replicate*tp*pp*cp*ep (4)"),
    ("tp = 4\ndp_shard = 4", 32, "ValueError: Parallelism dimensions (1 × 4 × 4 × 1 × 1 × 1 = 16) do not match world_size (32)"),
    ("ep = 2\ndp_shard = 16", 16, "ValueError: Parallelism dimensions (1 × 16 × 1 × 1 × 1 × 2 = 32) do not match world_size (16)"),
    ("dp_shard = 0", 8, "ValueError: dp_shard must be -1 (auto) or positive"),
    ("dp_shard = -3", 8, "ValueError: dp_shard must be -1 (auto) or positive"),
    ("pp = 0", 8, "ValueError: pp must be >= 1"),
])
def test_kempnerforge_rejections(distributed, world, error):
    _, res = resolve(f"[distributed]\n{distributed}\n", world)
    assert res.framework_error == error
    assert res.mesh is None


def test_kempnerforge_counts_ep_in_the_world():
    _, res = resolve("[distributed]\ntp = 2\nep = 2\n", 16)
    assert res.degrees["dp_shard"] == 4


def test_kempnerforge_coerces_like_its_loader():
    spec, res = resolve('[distributed]\ntp = "4"\npp = 2.0\n', 32)
    assert spec.degrees["tp"] == 4 and spec.degrees["pp"] == 2
    assert spec.problems == []  # converted and run, not refused: the schema check's ML114 warns (test_cli)
    assert res.mesh.sizes == (2, 4, 4)


def test_kempnerforge_unknown_world_with_explicit_degrees_implies_the_world():
    _, res = resolve("[distributed]\ndp_shard = 2\ntp = 4\npp = 4\n", None)
    assert res.world_implied and res.world_used == 32 and res.mesh.sizes == (4, 2, 4)
    assert res.valid_worlds == ("exact", 32)
    _, res = resolve("[distributed]\ntp = 4\npp = 4\n", None)
    assert res.mesh is None and res.valid_worlds == ("multiple", 16)


# --------------------------------------------------------------------- torchtitan

def test_torchtitan_does_not_count_ep_and_builds_three_meshes():
    _, res = resolve("[parallelism]\npipeline_parallel_degree = 2\ndata_parallel_shard_degree = 2\n"
                     "tensor_parallel_degree = 2\nexpert_parallel_degree = 2\n", 8)
    assert res.meshes["dataloading"].sizes == (2, 2, 1, 2)
    assert res.meshes["dense"].sizes == (2, 1, 2, 2)
    assert res.meshes["sparse"].sizes == (2, 1, 2, 2, 1)
    assert res.axes["loss"].size == 2 and res.axes["loss"].stride == 2


def test_torchtitan_cp_goes_into_fsdp_and_loss():
    _, res = resolve("[parallelism]\ncontext_parallel_degree = 2\ntensor_parallel_degree = 2\n", 16)
    assert res.meshes["dense"].sizes == (1, 1, 8, 2)
    assert res.meshes["dataloading"].sizes == (1, 4, 2, 2)
    assert res.axes["loss"].size == 8


@pytest.mark.parametrize("parallelism, world, error", [
    ("tensor_parallel_degree = 4", 30,
     "AssertionError: Invalid parallel dims: dp_replicate(1) * dp_shard(7) * cp(1) * tp(4) * pp(1) != WORLD_SIZE(30)"),
    ("tensor_parallel_degree = 8", 4, "AssertionError: assert dp_shard >= 1 (dp_shard = -1 resolved to 4 // 8 = 0)"),
    ("expert_parallel_degree = 0", 8, "AssertionError: Parallelism degree should be >= 1, except for dp_shard"),
    ("data_parallel_shard_degree = 0", 8, "AssertionError: dp_shard must -1 or >=1."),
    ("tensor_parallel_degree = 4\nexpert_parallel_degree = 2\nexpert_tensor_parallel_degree = 2", 32,
     "AssertionError: Currently we only support ETP=TP or ETP=1"),
])
def test_torchtitan_rejections(parallelism, world, error):
    _, res = resolve(f"[parallelism]\n{parallelism}\n", world)
    assert res.framework_error == error
    assert res.mesh is None


def test_torchtitan_sparse_mesh_not_whole_dies_in_mesh_construction():
    _, res = resolve("[parallelism]\ndata_parallel_shard_degree = 3\ntensor_parallel_degree = 2\n"
                     "expert_parallel_degree = 4\n", 6)
    assert res.error_stage == "mesh" and "_unflatten" in res.framework_error
    assert res.meshes["sparse"] is None and res.meshes["dense"].sizes == (1, 1, 3, 2)
    assert res.valid_worlds[0] == "none"


def test_torchtitan_valid_worlds_include_the_sparse_constraint():
    _, res = resolve("[parallelism]\nexpert_parallel_degree = 4\n", None)
    assert res.valid_worlds == ("multiple", 4)
    _, res = resolve("[parallelism]\ntensor_parallel_degree = 2\nexpert_parallel_degree = 4\n", None)
    assert res.valid_worlds == ("multiple", 4)   # dp_shard must be even: world multiple of 2 * 2


def test_torchtitan_does_not_coerce_strings():
    spec, res = resolve('[parallelism]\ntensor_parallel_degree = "2"\n', 8)
    assert spec.degrees["tp"] is None and res.mesh is None


# --------------------------------------------------------------------- native and detection

def test_native_fill_and_order():
    _, res = resolve('[mesh]\ndims = [{name="pp", size=2}, {name="dp", size=-1}, {name="tp", size=4}]\n', 64)
    assert (res.mesh.dims, res.mesh.sizes) == (("pp", "dp", "tp"), (2, 8, 4))
    assert res.degrees["dp_shard"] == 8 and res.degrees["tp"] == 4


def test_native_mesh_bigger_than_the_world_cannot_be_built():
    _, res = resolve('[mesh]\ndims = [{name="dp", size=8}, {name="tp", size=8}]\n', 32)
    assert "bigger than default world size 32" in res.framework_error


def test_detection():
    assert detect({"distributed": {}}) == "kempnerforge"
    assert detect({"parallelism": {}}) == "torchtitan"
    assert detect({"mesh": {}}) == "native"
    assert detect({"model": {}}) is None
    with pytest.raises(InputError) as info:
        detect({"distributed": {}, "parallelism": {}})
    assert info.value.code == "ML004"


@pytest.mark.parametrize("dims, expected", [
    ("4", ['mesh.dims must be an array, got int 4: list the mesh dims outer -> inner']),
    ("[]", ["mesh.dims must be a non-empty array of dims, got an empty array"]),
    ('[{ name = "tp" }, 3]', ["mesh.dims[0].size must be an integer, got nothing",
                              "mesh.dims[1] must be a table { name, size }, got int:"]),
])
def test_malformed_native_dims_give_one_clear_message_each(check, dims, expected):
    report = check(f"[mesh]\nworld_size = 8\ndims = {dims}\n")
    errors = [f.message for f in report.findings if f.severity == "error"]
    assert len(errors) == len(expected) and all(e.startswith(x) or x in e for e, x in zip(errors, expected)), errors
