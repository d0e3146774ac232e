#!/usr/bin/env python3
"""``meshlint check`` on every config function of torchtitan main's registries, as a user runs it.

    python bench/bench_torchtitan.py [--repeat 7] [--json]

One process per round: ``meshlint check --world-size 64 --gpus-per-node 8`` on the 17
``config_registry.py`` files of torchtitan b5bcd76c6 plus ``torchtitan_recipes/tests/*.py``
(193 config functions), Python start-up included. Reports the best and median wall time and
CPU time of the child, and the number of configs the run reported. Rounds alternate with the
floor (``python -c pass``) so a loaded machine shows in both. A script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT = ROOT.parent / "shared" / "frameworks" / "torchtitan-b5bcd76c6"


def inputs() -> list[str]:
    files = sorted(str(p) for p in CHECKOUT.rglob("config_registry.py"))
    files += sorted(str(p) for p in (CHECKOUT / "torchtitan_recipes" / "tests").glob("*.py")
                    if p.name != "__init__.py")
    return files


def timed(cmd: list[str]) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not CHECKOUT.is_dir():
        sys.exit(f"needs the torchtitan checkout at {CHECKOUT}")
    files = inputs()
    cmd = [sys.executable, "-m", "meshlint", "check", "--world-size", "64", "--gpus-per-node", "8", "-q", *files]
    floor, walls, cpus, summary = [], [], [], ""
    for _ in range(args.repeat):
        floor.append(timed([sys.executable, "-c", "pass"])[0])
        wall, cpu, out = timed(cmd)
        walls.append(wall)
        cpus.append(cpu)
        summary = out.strip().splitlines()[-1] if out.strip() else ""
    configs = int(m.group(1)) if (m := re.match(r"(\d+) configs? checked", summary)) else None
    result = {"files": len(files), "configs": configs, "summary": summary,
              "wall_best_s": min(walls), "wall_median_s": statistics.median(walls),
              "cpu_best_s": min(cpus), "floor_best_s": min(floor), "load": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"| torchtitan b5bcd76c6 registries | {len(files)} files, {configs} configs |")
    print("| --- | ---: |")
    print(f"| meshlint check, wall best / median | {min(walls) * 1000:.0f} ms / {statistics.median(walls) * 1000:.0f} ms |")
    print(f"| CPU best | {min(cpus) * 1000:.0f} ms |")
    print(f"| python -c pass (floor) | {min(floor) * 1000:.0f} ms |")
    print(f"\n{summary}  (load average {result['load']:.1f})")


if __name__ == "__main__":
    main()
