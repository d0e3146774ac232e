"""Smoke wall time against its floor, at worlds of 2, 4 and 8 CPU ranks (a script, not a test).

The floor is the same launch (supervisor, torch's elastic agent, fork server,
gloo) doing only init_process_group + init_device_mesh + one barrier; the
mesh smoke adds the framework's meshes, the verification collectives and the
placement gather; the full smoke adds the collective probe and the training
step (with its unsharded reference). Runs are interleaved round-robin so a slow spell of the
machine hits both alike; best and median wall time, and best smoke / best floor.

    python bench/bench_smoke.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from meshlint.check import Options, check_file  # noqa: E402
from meshlint.rules import load_rules  # noqa: E402
from meshlint.smoke import launch, plan as smoke_plan  # noqa: E402
from meshlint.topology import CliTopology  # noqa: E402

CONFIG = """[parallelism]
tensor_parallel_degree = {tp}
expert_parallel_degree = {ep}
"""


def plan_for(world: int, directory: str) -> dict:
    tp = 2
    ep = 2 if world >= 4 else 1
    path = os.path.join(directory, f"bench_{world}gpu.toml")
    with open(path, "w") as f:
        f.write(CONFIG.format(tp=tp, ep=ep))
    report = check_file(path, Options(rules=load_rules(), topology=CliTopology(world)))
    return smoke_plan.build(report, world)


def once(plan: dict, floor: bool, step: bool = False) -> float:
    job = {"plan": plan, "device": "cpu", "backend": "gloo", "nproc": plan["world_size"], "floor": floor,
           "step": step}
    start = time.perf_counter()
    out = launch.launch(job, timeout=120)
    seconds = time.perf_counter() - start
    if out.ended != "done" or out.leftover:
        raise SystemExit(f"bench run failed: {out.ended} {out.supervisor} {out.log_tail[-3:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for world in (2, 4, 8):
            plan = plan_for(world, tmp)
            smoke, floor, full = [], [], []
            for _ in range(args.rounds):
                floor.append(once(plan, True))
                smoke.append(once(plan, False))
                full.append(once(plan, False, step=True))
            rows.append((world, smoke, floor, full))
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, gloo on CPU; {args.rounds} interleaved rounds\n")
    print("| world | floor | mesh smoke (--no-step) | ratio | with probe + training step | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for world, smoke, floor, full in rows:
        f = min(floor)
        print(f"| {world} | {f:.2f} s | {min(smoke):.2f} s | {min(smoke) / f:.2f} | {min(full):.2f} s | "
              f"{min(full) / f:.2f} |")
    print("\nbest of the rounds; medians: " + "; ".join(
        f"world {w}: floor {statistics.median(fl):.2f} s, mesh {statistics.median(sm):.2f} s, "
        f"full {statistics.median(fu):.2f} s" for w, sm, fl, fu in rows))


if __name__ == "__main__":
    main()
