"""meshlint's Accelerate 1.15.0 resolution against the release itself: its own ParallelismConfig (values
passed as the launcher passes them, PARALLELISM_CONFIG_* strings), build_device_mesh on the fake process
group and _validate_accelerator, for a few hundred seeded layouts (tests/real_accelerate_worker.py). meshlint
must give the same verdict (ok, or the same error at the same stage, message included), the same mesh (dim
names and sizes), the same flattened meshes (names, and rank 0's group in each) and the same dp_replicate.
Skips saying why when torch or .frameworks/accelerate-1.15.0 (.ci/frameworks.sh) is absent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from meshlint.dialects.accelerate import v1_15
from meshlint.mesh import Mesh

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / ".frameworks" / "accelerate-1.15.0"
WORKER = Path(__file__).resolve().parent / "real_accelerate_worker.py"
N_CASES = 400
WORLDS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
DTYPES = [("FSDP", "2"), ("FSDP", "2"), ("FSDP", "1"), ("MULTI_GPU", "1"), ("MULTI_GPU", "1"), ("DEEPSPEED", "1"),
          ("NO", "1"), ("MULTI_CPU", "1")]


def _why_absent() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    if not (RELEASE / "accelerate" / "parallelism_config.py").is_file():
        failed = ROOT / ".frameworks" / "accelerate-1.15.0.failed"
        return (failed.read_text().strip() if failed.is_file()
                else f"{RELEASE} is not set up (run .ci/frameworks.sh)")
    if not (RELEASE / ".deps-done").is_file():
        failed = ROOT / ".frameworks" / "accelerate-deps.failed"
        return failed.read_text().strip() if failed.is_file() else "accelerate's import dependencies are not set up"
    return None


def _factorization(rng: random.Random, world: int) -> dict:
    """Sizes that multiply to ``world`` (or to a divisor of it, now and then), in a random assignment."""
    target = world if rng.random() < 0.8 else rng.choice([d for d in range(1, world + 1) if world % d == 0])
    sizes = dict.fromkeys(("dp_replicate", "dp_shard", "tp", "cp"), 1)
    rest = target
    for name in rng.sample(list(sizes), 4):
        choices = [d for d in range(1, rest + 1) if rest % d == 0]
        sizes[name] = rng.choice(choices)
        rest //= sizes[name]
    sizes[rng.choice(list(sizes))] *= rest
    return sizes


def _odd(rng: random.Random, world: int):
    """A value the release may refuse: out of range, not a multiple, or a string int() may not read."""
    return rng.choice([0, -1, 3, 5, 2 * world, str(world), " 2", "2.0", "two", True])


def cases(seed: int = 115) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(N_CASES):
        world = rng.choice(WORLDS)
        env = {f"{n}_size": v for n, v in _factorization(rng, world).items()}
        if rng.random() < 0.25:
            env[rng.choice(list(env))] = _odd(rng, world)
        if rng.random() < 0.1:
            env["sp_size"] = rng.choice([1, 2, 4])
        if rng.random() < 0.05:
            env["cp_backend"] = rng.choice(["torch", "ring"])
        if rng.random() < 0.05:
            env["sp_backend"] = rng.choice(["deepspeed", "ulysses"])
        if rng.random() < 0.1:
            env["cp_comm_strategy"] = rng.choice(["allgather", "alltoall", "ring"])
        dtype, fsdp = rng.choice(DTYPES)
        out.append({"id": i, "world": world, "env": env, "dtype": dtype, "fsdp_version": fsdp})
    return out


def meshlint_verdict(case: dict) -> dict:
    spec = v1_15.new_spec()
    v1_15.apply_values(spec, dict(case["env"]), {}, {"distributed_type": case["dtype"],
                                                     "fsdp_version": case["fsdp_version"],
                                                     "num_processes": case["world"], "num_machines": 1})
    res = v1_15.resolve(spec, case["world"])
    if res.error_stage in ("load", "mesh"):
        return {"stage": res.error_stage, "error": res.framework_error}
    mesh: Mesh | None = res.meshes.get("device_mesh")
    out = {"stage": res.error_stage, "error": res.framework_error,
           "mesh": [list(mesh.dims), list(mesh.sizes)] if mesh else None, "flattened": {},
           "dp_replicate": res.degrees["dp_replicate"]}
    for name in ("dp", "dp_shard_cp", "dp_cp"):
        if name in res.axes:
            out["flattened"][name] = res.axes[name].members(0)
    return out


def _same_error(real: str | None, mine: str | None) -> bool:
    """meshlint quotes the release's message up to its first sentence or two: the prefix must match."""
    if real is None or mine is None:
        return real is mine
    mine = mine.split(" (init_device_mesh)")[0].split(" (PARALLELISM_CONFIG_")[0]
    return real.startswith(mine.rstrip(".")) or mine.startswith(real)


@pytest.fixture(scope="module")
def real():
    why = _why_absent()
    if why:
        pytest.skip(why)
    todo = cases()
    env = {**os.environ, "PYTHONPATH": str(RELEASE)}
    proc = subprocess.run([sys.executable, str(WORKER)], input="\n".join(json.dumps(c) for c in todo),
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {d["id"]: d for d in map(json.loads, proc.stdout.splitlines())}
    assert len(got) == len(todo), proc.stderr[-3000:]
    return todo, got


def test_same_verdict_and_meshes_as_the_release(real):
    todo, got = real
    diffs = []
    kinds: dict = {}
    for case in todo:
        theirs, mine = got[case["id"]], meshlint_verdict(case)
        kinds[theirs["stage"]] = kinds.get(theirs["stage"], 0) + 1
        same = theirs["stage"] == mine["stage"] and _same_error(theirs["error"], mine["error"])
        if same and theirs["stage"] not in ("load", "mesh"):
            same = all(theirs[k] == mine[k] for k in ("mesh", "flattened", "dp_replicate"))
        if not same:
            diffs.append(f"{case}\n  real:     {theirs}\n  meshlint: {mine}")
    assert not diffs, f"{len(diffs)} of {len(todo)} differ:\n" + "\n".join(diffs[:10])
    # the seeds reach every verdict: valid, refused at construction, by torch's mesh, by the Accelerator
    assert all(kinds.get(k, 0) >= 10 for k in (None, "load", "mesh", "resolve")), kinds
