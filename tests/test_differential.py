"""meshlint's resolution against literal transcriptions of the frameworks' own code.

The reference functions below follow KempnerForge's ``DistributedConfig``
(``__post_init__``, ``resolve``, ``validate_world_size``) and
``init_distributed``, and torchtitan's ``ParallelDims._validate`` and
``build_mesh``, statement by statement and in the same order (with the
``ep`` dim order of shared/DIALECTS.md). meshlint's own implementation is
structured differently (it reports instead of raising, and keeps going), so
comparing the two on thousands of random configs checks that it accepts,
rejects and builds exactly what the frameworks do.
"""

from __future__ import annotations

import random
from math import prod

import pytest

from meshlint.frameworks.kempnerforge import v5666d0d as kempnerforge
from meshlint.frameworks.torchtitan import v0_2 as torchtitan
from meshlint.frameworks.base import Spec

DEGREE_VALUES = [1] * 6 + [2] * 5 + [3, 4, 4, 6, 8] + [-1, 0, -2]  # mostly valid, some not
WORLDS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]


class Rejected(Exception):
    pass


# --------------------------------------------------------------------------- KempnerForge, transcribed

def kempnerforge_reference(dp_shard, dp_replicate, tp, pp, cp, ep, world_size):
    # DistributedConfig.__post_init__
    if dp_shard == 0 or dp_shard < -1:
        raise Rejected("ValueError: dp_shard must be -1 (auto) or positive")
    for name, val in [("dp_replicate", dp_replicate), ("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep)]:
        if val < 1:
            raise Rejected(f"ValueError: {name} must be >= 1")
    # resolve() -> _resolve_dp_shard() and validate_world_size()
    if dp_shard > 0:
        resolved = dp_shard
    else:
        other = dp_replicate * tp * pp * cp * ep
        if world_size % other != 0:
            raise Rejected(f"ValueError: world_size ({world_size}) not divisible by dp_replicate*tp*pp*cp*ep ({other})")
        resolved = world_size // other
    expected = dp_replicate * resolved * tp * pp * cp * ep
    if expected != world_size:
        raise Rejected(f"ValueError: Parallelism dimensions ({dp_replicate} × {resolved} × {tp} × {pp} × {cp} × "
                       f"{ep} = {expected}) do not match world_size ({world_size})")
    # init_distributed: the single-GPU path returns before building a mesh
    if world_size == 1:
        return None
    mesh_dims, mesh_sizes = [], []
    for name, size in [("pp", pp), ("dp_replicate", dp_replicate), ("dp_shard", resolved), ("ep", ep), ("tp", tp)]:
        if size > 1:
            mesh_dims.append(name)
            mesh_sizes.append(size)
    if (tp > 1 or ep > 1) and "dp_shard" not in mesh_dims:
        idx = mesh_dims.index("ep") if "ep" in mesh_dims else mesh_dims.index("tp")
        mesh_dims.insert(idx, "dp_shard")
        mesh_sizes.insert(idx, 1)
    if not mesh_dims:
        mesh_dims, mesh_sizes = ["dp_shard"], [world_size]
    return tuple(mesh_dims), tuple(mesh_sizes)


# --------------------------------------------------------------------------- torchtitan, transcribed

def torchtitan_reference(dp_replicate, dp_shard, cp, tp, pp, ep, etp, world_size):
    # ParallelDims._validate
    for d in (dp_replicate, cp, tp, pp, ep, etp):
        if not d >= 1:
            raise Rejected("AssertionError: Parallelism degree should be >= 1, except for dp_shard")
    if not (dp_shard == -1 or dp_shard >= 1):
        raise Rejected("AssertionError: dp_shard must -1 or >=1.")
    if dp_shard < 0:
        dp_shard = world_size // (dp_replicate * cp * tp * pp)
    if not dp_shard >= 1:
        raise Rejected("AssertionError")
    if dp_replicate * dp_shard * cp * tp * pp != world_size:
        raise Rejected(f"AssertionError: Invalid parallel dims: dp_replicate({dp_replicate}) * dp_shard({dp_shard}) * "
                       f"cp({cp}) * tp({tp}) * pp({pp}) != WORLD_SIZE({world_size})")
    if ep > 1:
        if not (etp == tp or etp == 1):
            raise Rejected("AssertionError: Currently we only support ETP=TP or ETP=1")
    # build_mesh: each unflatten of the [world_size] mesh needs sizes that multiply to it
    batch = dp_replicate * dp_shard
    fsdp = dp_shard * cp
    efsdp = fsdp * tp // (etp * ep)
    meshes = {
        "dataloading": (pp, batch, cp, tp),
        "dense": (pp, dp_replicate, fsdp, tp),
        "sparse": (pp, dp_replicate, efsdp, ep, etp),
    }
    for name, sizes in meshes.items():
        if prod(sizes) != world_size:
            raise Rejected(f"unflatten {name}")
    return meshes


# --------------------------------------------------------------------------- the comparison

def kf_config(rng):
    return {n: rng.choice(DEGREE_VALUES) for n in ("dp_shard", "dp_replicate", "tp", "pp", "cp", "ep")}


def tt_config(rng):
    return {n: rng.choice(DEGREE_VALUES) for n in ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep", "etp")}


def world_for(rng, degrees, factors):
    """Half the time a world the degrees can fill (so valid configs are well covered), else any."""
    values = [degrees[n] for n in factors if n != "dp_shard"]
    if rng.random() < 0.5 and all(v >= 1 for v in values):
        shard = degrees["dp_shard"] if degrees["dp_shard"] >= 1 else rng.choice([1, 2, 3, 4])
        return prod(values) * shard
    return rng.choice(WORLDS)


def meshlint_resolve(module, degrees, world):
    spec = Spec(module.NAME, dict(degrees))
    if module is kempnerforge:
        spec.degrees["etp"] = None
        spec.load_error = kempnerforge._load_error(spec.degrees)
    else:
        spec.load_error = torchtitan._validate_degrees(spec.degrees)
    return module.resolve(spec, world)


@pytest.mark.parametrize("seed", range(4))
def test_kempnerforge_agrees_with_its_own_code(seed):
    rng = random.Random(seed)
    agreed = rejected = 0
    for _ in range(1500):
        degrees = kf_config(rng)
        world = world_for(rng, degrees, kempnerforge.FACTORS)
        try:
            expected = kempnerforge_reference(world_size=world, **degrees)
            error = None
        except Rejected as exc:
            expected, error = None, str(exc)
        res = meshlint_resolve(kempnerforge, degrees, world)
        assert res.framework_error == error, (degrees, world)
        got = (res.mesh.dims, res.mesh.sizes) if res.mesh else None
        assert got == expected, (degrees, world)
        agreed += 1
        rejected += error is not None
    assert agreed == 1500 and 150 < rejected < 1350  # both outcomes really exercised


@pytest.mark.parametrize("seed", range(4))
def test_torchtitan_agrees_with_its_own_code(seed):
    rng = random.Random(100 + seed)
    built = 0
    for _ in range(1500):
        degrees = tt_config(rng)
        world = world_for(rng, degrees, torchtitan.FACTORS)
        try:
            expected = torchtitan_reference(world_size=world, **degrees)
            error = None
        except Rejected as exc:
            expected, error = None, str(exc)
        res = meshlint_resolve(torchtitan, degrees, world)
        if error is None:
            assert res.framework_error is None, (degrees, world)
            assert {n: m.sizes for n, m in res.meshes.items()} == expected, (degrees, world)
            assert res.mesh.sizes == expected["dense"]
            built += 1
        else:
            assert res.framework_error is not None and res.mesh is None, (degrees, world, error)
            if not error.startswith(("AssertionError\n", "unflatten")) and error != "AssertionError":
                assert res.framework_error == error, (degrees, world)
            if error.startswith("unflatten"):
                assert res.error_stage == "mesh" and res.meshes.get("sparse") is None
    assert built > 100


def test_every_valid_world_is_accepted_and_every_other_rejected():
    """``valid_worlds`` says exactly which world sizes the framework accepts."""
    rng = random.Random(7)
    for module, make, reference in ((kempnerforge, kf_config, kempnerforge_reference),
                                    (torchtitan, tt_config, torchtitan_reference)):
        for _ in range(400):
            degrees = make(rng)
            res = meshlint_resolve(module, degrees, None)
            if res.valid_worlds is None:
                continue
            kind, n = res.valid_worlds
            for world in range(1, 97):
                try:
                    reference(world_size=world, **degrees)
                    accepted = True
                except Rejected:
                    accepted = False
                predicted = (kind == "exact" and world == n) or (kind == "multiple" and world % n == 0)
                assert accepted == predicted, (module.NAME, degrees, world, res.valid_worlds)
