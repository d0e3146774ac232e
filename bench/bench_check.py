#!/usr/bin/env python3
"""Speed and memory of the static path, measured the way users run it.

    python bench/bench_check.py            # Markdown table on stdout
    python bench/bench_check.py --json     # machine-readable

What it measures (wall time of whole processes, Python start-up included,
best and median of --repeat runs; peak RSS of the child process):
  * ``python -c pass``: the floor every command pays;
  * ``meshlint check`` on generated sets of 1, 30 and 1,000 configs (a mix of
    KempnerForge, torchtitan and native files, some with findings);
  * ``meshlint explain`` on worlds of 65,536 and 1,048,576 ranks (nothing in
    the static path is O(world), so these should cost about the same as 8);
  * in-process: rule loading, and resolve + placement of the million-rank world.

This is a script, not a test: timings on shared machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KF = """# {name}: {nodes} nodes × {gpn} GPUs
# srun --nodes={nodes} --ntasks-per-node={gpn} python scripts/train.py {name}.toml
[model]
dim = 4096
n_layers = 32
n_heads = 32
n_kv_heads = 8
max_seq_len = 4096
num_experts = {experts}

[train]
batch_size = 2
seq_len = 4096
grad_accum_steps = 4
compile_model = false

[distributed]
dp_shard = -1
tp = {tp}
pp = {pp}
ep = {ep}
"""

TT = """# meshlint: gpus_per_node={gpn}
[job]
description = "{name}"

[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 2
seq_len = 8192

[parallelism]
data_parallel_replicate_degree = {rep}
data_parallel_shard_degree = -1
tensor_parallel_degree = {tp}
pipeline_parallel_degree = {pp}
expert_parallel_degree = {ep}
"""

NATIVE = """[mesh]
world_size = {world}
gpus_per_node = {gpn}
dims = [
  {{ name = "pp", size = {pp} }},
  {{ name = "dp_shard", size = -1 }},
  {{ name = "tp", size = {tp} }},
]
"""


def generate(directory: Path, count: int) -> None:
    """A realistic mix: mostly valid configs, about one in six with a finding."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        nodes = (1, 2, 4, 8, 16)[i % 5]
        gpn = (4, 8)[i % 2]
        world = nodes * gpn
        tp = (1, 2, 4, 8)[i % 4] if i % 6 else 3  # tp = 3 is a deliberate mistake
        pp = (1, 2)[i % 2] if world % (tp * 2) == 0 else 1
        kind = i % 3
        name = f"cfg{i:04d}_{world}gpu"
        if kind == 0:
            experts = 8 if i % 4 == 0 else 0
            ep = 2 if experts and world % (tp * pp * 2) == 0 else 1
            text = KF.format(name=name, nodes=nodes, gpn=gpn, tp=tp, pp=pp, ep=ep, experts=experts)
        elif kind == 1:
            text = TT.format(name=name, gpn=gpn, tp=tp, pp=pp, rep=1, ep=1)
        else:
            text = NATIVE.format(world=world, gpn=gpn, pp=pp, tp=tp)
        (directory / f"{name}.toml").write_text(text)


# Users' installs have byte-compiled modules (pip compiles them when installing);
# measure that, not a shell that forbids writing .pyc files.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
# A private cache directory: the rule cache stays warm (as after a first run), the results cache is
# emptied before every run, so each `check` really checks every config (results_cache.py; the warm
# case is bench_vs_kempnerforge.py's)
CACHE = Path(tempfile.mkdtemp(prefix="meshlint-bench-cache-"))
ENV["MESHLINT_CACHE_DIR"] = str(CACHE)


def run_once(cmd: list[str]) -> tuple[float, float, float]:
    """Wall time, CPU time (user + sys) and peak RSS (MB) of one child process (results cache empty)."""
    shutil.rmtree(CACHE / "results", ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024


def measure(commands: dict[str, list[str]], rounds: int) -> dict:
    """Round-robin: every round runs every command once, so a slow spell of a
    shared machine hits all of them alike; report best and median of each."""
    for cmd in commands.values():
        subprocess.run(cmd, capture_output=True, env=ENV)  # warm-up: .pyc files, page cache, rule cache
    samples: dict[str, list] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, cmd in commands.items():
            samples[name].append(run_once(cmd))
    out = {}
    for name, runs in samples.items():
        walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
        out[name] = {"best_ms": round(min(walls) * 1000, 1), "median_ms": round(statistics.median(walls) * 1000, 1),
                     "cpu_best_ms": round(min(cpus) * 1000, 1), "peak_rss_mb": round(max(r[2] for r in runs), 1)}
    return out


def in_process() -> dict:
    from meshlint.frameworks.kempnerforge import v5666d0d as kempnerforge
    from meshlint.mesh.devmesh import place
    from meshlint.engine.ruleset import load_rules

    start = time.perf_counter()
    for _ in range(20):
        load_rules()
    rules_ms = (time.perf_counter() - start) / 20 * 1000
    degrees = {"pp": 4, "dp_replicate": 1, "dp_shard": -1, "cp": 1, "tp": 8, "ep": 1, "etp": None}
    spec = kempnerforge.Spec(dialect="kempnerforge", degrees=degrees)
    start = time.perf_counter()
    res = kempnerforge.resolve(spec, 1_048_576)
    placements = [place(axis, 8, 1_048_576) for axis in res.axes.values()]
    resolve_ms = (time.perf_counter() - start) * 1000
    assert res.mesh.sizes == (4, 32768, 8) and placements[-1].intra_node
    return {"load_rules_ms": round(rules_ms, 2), "resolve_and_place_1M_ranks_ms": round(resolve_ms, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    py = sys.executable
    meshlint = [py, "-m", "meshlint"]
    results: dict = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        commands = {"python -c pass (floor)": [py, "-c", "pass"], "meshlint --version": meshlint + ["--version"]}
        for count in (1, 30):
            generate(tmp / f"set{count}", count)
            commands[f"check {count} configs"] = meshlint + ["check", str(tmp / f"set{count}")]
        big = tmp / "big.toml"
        big.write_text("[distributed]\ntp = 8\npp = 4\n")
        for world in (8, 65_536, 1_048_576):
            commands[f"explain world {world:,}"] = meshlint + ["explain", str(big), "--world-size", str(world),
                                                              "--gpus-per-node", "8"]
            commands[f"check world {world:,}"] = meshlint + ["check", str(big), "--world-size", str(world),
                                                            "--gpus-per-node", "8"]
        results.update(measure(commands, args.repeat))
        generate(tmp / "set1000", 1000)
        results.update(measure({"check 1000 configs": meshlint + ["check", str(tmp / "set1000")]},
                               max(3, args.repeat // 3)))
    results["in-process"] = in_process()

    if args.json:
        print(json.dumps(results, indent=2))
        return
    floor = results["python -c pass (floor)"]["best_ms"]
    print(f"Python {results['python']}, {results['cpus']} CPUs; whole processes, interleaved rounds; "
          f"wall best / median, CPU best, peak RSS\n")
    print("| what | wall best | wall median | above the floor | CPU best | peak RSS |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        if isinstance(r, dict) and "best_ms" in r:
            print(f"| `{name}` | {r['best_ms']} ms | {r['median_ms']} ms | {r['best_ms'] - floor:.1f} ms "
                  f"| {r['cpu_best_ms']} ms | {r['peak_rss_mb']} MB |")
    print()
    for name, value in results["in-process"].items():
        print(f"- {name.replace('_', ' ')}: {value}")


if __name__ == "__main__":
    main()
