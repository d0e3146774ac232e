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


def timed(cmd: list[str], repeat: int) -> dict:
    subprocess.run(cmd, capture_output=True, env=ENV)  # warm-up: writes .pyc, fills the page cache
    times, rss = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        rss.append(max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
    return {"best_ms": round(min(times) * 1000, 1), "median_ms": round(statistics.median(times) * 1000, 1),
            "peak_rss_mb": round(max(rss) / 1024, 1)}


def in_process() -> dict:
    from meshlint.dialects import kempnerforge
    from meshlint.mesh import place
    from meshlint.rules import load_rules

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
        results["python -c pass (floor)"] = timed([py, "-c", "pass"], args.repeat)
        results["meshlint --version"] = timed(meshlint + ["--version"], args.repeat)
        for count in (1, 30, 1000):
            generate(tmp / f"set{count}", count)
            repeat = args.repeat if count < 1000 else max(3, args.repeat // 2)
            results[f"check {count} configs"] = timed(meshlint + ["check", str(tmp / f"set{count}")], repeat)
        big = tmp / "big.toml"
        big.write_text("[distributed]\ntp = 8\npp = 4\n")
        for world in (8, 65_536, 1_048_576):
            results[f"explain world {world:,}"] = timed(
                meshlint + ["explain", str(big), "--world-size", str(world), "--gpus-per-node", "8"], args.repeat)
            results[f"check world {world:,}"] = timed(
                meshlint + ["check", str(big), "--world-size", str(world), "--gpus-per-node", "8"], args.repeat)
    results["in-process"] = in_process()

    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"Python {results['python']}, {results['cpus']} CPUs; best / median of repeated runs, peak RSS\n")
    print("| what | best | median | peak RSS |")
    print("| --- | ---: | ---: | ---: |")
    for name, r in results.items():
        if isinstance(r, dict) and "best_ms" in r:
            print(f"| `{name}` | {r['best_ms']} ms | {r['median_ms']} ms | {r['peak_rss_mb']} MB |")
    print()
    for name, value in results["in-process"].items():
        print(f"- {name.replace('_', ' ')}: {value}")


if __name__ == "__main__":
    main()
