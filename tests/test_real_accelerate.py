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

from meshlint.frameworks.accelerate import v1_15
from meshlint.errors import InputError
from meshlint.mesh.devmesh import Mesh

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


# ----------------------------------------------------------------------------- accelerate launch

LAUNCH_WORKER = Path(__file__).resolve().parent / "real_accelerate_launch_worker.py"
N_LAUNCHES = 200


def launch_cases(seed: int = 1150) -> list:
    """Command lines with and without a config file: distributed-type flags, --use_parallelism_config, sizes in
    the file and on the command line (which win), processes and machines."""
    rng = random.Random(seed)
    out = []
    for i in range(N_LAUNCHES):
        argv, config = [], None
        machines = rng.choice([1, 1, 2])
        processes = rng.choice([2, 4, 8, 16])
        if rng.random() < 0.6:
            dtype = rng.choice(["FSDP", "FSDP", "MULTI_GPU", "NO", "MULTI_CPU"])
            lines = [f"distributed_type: {dtype}", f"num_machines: {machines}", "main_process_ip: 10.0.0.1", "main_process_port: 29500"]
            if dtype == "FSDP":
                lines += ["fsdp_config:", f"  fsdp_version: {rng.choice([1, 2, 2])}"]
            if rng.random() < 0.9:
                lines.append(f"num_processes: {processes}")
            if rng.random() < 0.7:
                lines.append("parallelism_config:")
                for name in rng.sample(["dp_replicate", "dp_shard", "tp", "cp"], rng.randint(1, 4)):
                    lines.append(f"  parallelism_config_{name}_size: {rng.choice([1, 2, 4])}")
            config = "\n".join(lines) + "\n"
        if rng.random() < 0.5:
            argv.append("--use_parallelism_config")
        for flag, p in (("use_fsdp", 0.8 if argv else 0.4), ("multi_gpu", 0.1)):
            if rng.random() < (p if config is None else p / 2):
                argv.append(f"--{flag}")
        if "--use_fsdp" in argv or rng.random() < 0.1:
            argv += ["--fsdp_version", rng.choice(["1", "2", "2"])]
        for name in ("dp_replicate", "dp_shard", "tp", "cp"):
            if rng.random() < 0.3:  # as written, all dashes (Accelerate adds that form), or mixed (refused)
                spelling = rng.choice([f"--parallelism_config_{name}_size", "--" + f"parallelism_config_{name}_size"
                                       .replace("_", "-")] * 4 + [f"--parallelism-config-{name}-size"])
                argv += [spelling, str(rng.choice([1, 2, 4]))]
        if config is None or rng.random() < 0.3:
            argv += ["--num_processes", str(processes)]
        if rng.random() < 0.3:
            argv += ["--num_machines", str(machines), "--machine_rank", "0", "--main_process_ip", "10.0.0.1", "--main_process_port", "29500"]
        if config is None and not {"--use_fsdp", "--multi_gpu"} & set(argv):
            argv.append("--multi_gpu")  # without a config or a type flag the launcher asks torch for GPUs
        out.append({"id": i, "argv": argv, "config": config})
    return out


def meshlint_launch(case: dict, folder: Path) -> dict:
    from meshlint.inputs.accelerate_input import launch_spec
    from meshlint.inputs.accelerate_launch import parse_argv

    argv = list(case["argv"])
    if case["config"] is not None:
        path = folder / f"c{case['id']}.yaml"
        path.write_text(case["config"])
        argv = ["--config_file", str(path)] + argv
    try:
        launch = parse_argv(["accelerate", "launch", *argv, "train.py"])
    except InputError:
        return {"error": "usage"}
    _source, spec = launch_spec(launch, v1_15)
    refusals = spec.extra.get("refusals") or []
    if refusals:
        return {"error": refusals[0]["message"]}
    v = spec.values
    use = v["accelerate.section_present"] and v["accelerate.config_reaches_ranks"] is not False
    sizes = {f"PARALLELISM_CONFIG_{n.upper()}_SIZE": str(spec.degrees[n]) for n in ("dp_replicate", "dp_shard", "tp",
                                                                                    "cp")}
    sizes["PARALLELISM_CONFIG_SP_SIZE"] = str(v["accelerate.sp"])
    multi = v["accelerate.distributed_type"] in v1_15.MULTI_GPU_LAUNCHER
    return {"error": None, "use": "true" if use else None, "sizes": sizes if use else {},
            "world": v["accelerate.world"] if multi else None}


def test_launch_lines_pass_the_same_sizes_as_the_release(tmp_path):
    why = _why_absent()
    if why:
        pytest.skip(why)
    todo = launch_cases()
    env = {**os.environ, "PYTHONPATH": str(RELEASE), "HF_HOME": str(tmp_path / "hf-home")}
    proc = subprocess.run([sys.executable, str(LAUNCH_WORKER)], input="\n".join(json.dumps(c) for c in todo),
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {d["id"]: d for d in map(json.loads, proc.stdout.splitlines())}
    diffs, used, refused = [], 0, 0
    for case in todo:
        theirs, mine = got[case["id"]], meshlint_launch(case, tmp_path)
        if theirs["error"] or mine["error"]:
            refused += 1
            same = _same_error(theirs["error"], mine["error"])
        else:
            used += theirs["use"] == "true"
            same = theirs == {**mine, "id": theirs["id"]}
        if not same:
            diffs.append(f"{case}\n  real:     {theirs}\n  meshlint: {mine}")
    assert not diffs, f"{len(diffs)} of {len(todo)} differ:\n" + "\n".join(diffs[:8])
    assert used >= 30 and refused >= 10, (used, refused)
