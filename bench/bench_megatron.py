#!/usr/bin/env python3
"""Speed of the Megatron-LM path: a launch line checked and explained at 8, 65,536 and 1,048,576 ranks.

    python bench/bench_megatron.py            # Markdown table on stdout

Wall time of whole processes (``meshlint check -- torchrun ... pretrain_gpt.py ...`` and ``meshlint explain
--rank N -- ...``), Python start-up included, best and median of --repeat runs; and in-process, the
resolution (both RankGenerators, every group's 1-D family, the layer split) of the million-rank world.
Nothing on the path is O(world): the three worlds should cost about the same. A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = ["--num-layers", "128", "--hidden-size", "16384", "--num-attention-heads", "128", "--group-query-attention",
         "--num-query-groups", "8", "--seq-length", "8192", "--max-position-embeddings", "8192",
         "--micro-batch-size", "1", "--global-batch-size", "16384", "--tensor-model-parallel-size", "8",
         "--pipeline-model-parallel-size", "16", "--context-parallel-size", "2", "--num-experts", "64",
         "--expert-model-parallel-size", "64", "--expert-tensor-parallel-size", "1"]


def launch(nodes: int) -> list:
    return ["--", "torchrun", "--nnodes", str(nodes), "--nproc_per_node", "8", "pretrain_gpt.py", *MODEL]


def timed(argv: list, repeat: int) -> tuple:
    env = {**os.environ, "PYTHONPATH": ROOT}
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "meshlint", *argv], env=env, capture_output=True, check=False)
        runs.append(time.perf_counter() - start)
    return min(runs), statistics.median(runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print("| command | world | best s | median s |\n| --- | ---: | ---: | ---: |")
    for nodes in (1, 8192, 131072):
        world = nodes * 8
        for name, argv in (("check", ["check", *launch(nodes)]),
                           ("explain --rank", ["explain", "--rank", str(world - 1), *launch(nodes)])):
            best, median = timed(argv, args.repeat)
            print(f"| {name} | {world:,} | {best:.3f} | {median:.3f} |")
    sys.path.insert(0, ROOT)
    from meshlint.frameworks.megatron import core_0_16

    spec = core_0_16.spec_from_degrees({"tp": 8, "pp": 16, "cp": 2, "ep": 64, "etp": 1}, num_experts=64,
                                       num_layers=128)
    start = time.perf_counter()
    for _ in range(100):
        res = core_0_16.resolve(spec, 1 << 20)
        core_0_16.pipeline_plan(spec, res)
    print(f"\nin-process resolve + layer split of 1,048,576 ranks: {(time.perf_counter() - start) * 10:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
