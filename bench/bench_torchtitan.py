#!/usr/bin/env python3
"""``meshlint check`` on every config function of torchtitan main's registries, as a user runs it.

    python bench/bench_torchtitan.py [--repeat 7] [--json]

One process per round on the 17 ``config_registry.py`` files of torchtitan b5bcd76c6 plus
``torchtitan_recipes/tests/*.py`` (193 config functions), Python start-up included, for three
targets: no world size (as a pre-commit hook runs it: the registries name none), ``--world-size 8
--gpus-per-node 8`` (run_train.sh's default NGPU) and ``--world-size 64 --gpus-per-node 8``. At a
world a config's degrees do not fit, ML103 reports it and the degree search behind its help line
(the valid values of each degree, issue 12) runs for that config: that search is most of the
difference between the rows. Reports the best and median wall time and CPU time of the child, and
the number of configs and errors the run reported. Rounds alternate with the floor (``python -c
pass``) so a loaded machine shows in both; bytecode is cached in a private PYTHONPYCACHEPREFIX
(filled by an untimed run), as an installed package has it. A script, not a test.
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
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT = ROOT.parent / "shared" / "frameworks" / "torchtitan-b5bcd76c6"


def inputs() -> list[str]:
    files = sorted(str(p) for p in CHECKOUT.rglob("config_registry.py"))
    files += sorted(str(p) for p in (CHECKOUT / "torchtitan_recipes" / "tests").glob("*.py")
                    if p.name != "__init__.py")
    return files


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


TARGETS = {"no world size": [], "--world-size 8 --gpus-per-node 8": ["--world-size", "8", "--gpus-per-node", "8"],
           "--world-size 64 --gpus-per-node 8": ["--world-size", "64", "--gpus-per-node", "8"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not CHECKOUT.is_dir():
        sys.exit(f"needs the torchtitan checkout at {CHECKOUT}")
    files = inputs()
    with tempfile.TemporaryDirectory(prefix="meshlint-bench-pyc-") as pyc:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = pyc
        cmds = {name: [sys.executable, "-m", "meshlint", "check", "--no-cache", *extra, "-q", *files]
                for name, extra in TARGETS.items()}
        for cmd in cmds.values():
            timed(cmd, env)  # untimed: fills the bytecode cache
        floor: list = []
        runs = {name: ([], [], "") for name in cmds}
        for _ in range(args.repeat):
            floor.append(timed([sys.executable, "-c", "pass"], env)[1])
            for name, cmd in cmds.items():
                wall, cpu, out = timed(cmd, env)
                walls, cpus, _ = runs[name]
                walls.append(wall)
                cpus.append(cpu)
                runs[name] = (walls, cpus, out.strip().splitlines()[-1] if out.strip() else "")
    result = {"files": len(files), "floor_cpu_best_s": min(floor), "load": os.getloadavg()[0], "targets": {}}
    for name, (walls, cpus, summary) in runs.items():
        m = re.match(r"(\d+) configs? checked.*?: (\d+) errors?", summary)
        result["targets"][name] = {"summary": summary, "configs": int(m.group(1)) if m else None,
                                   "errors": int(m.group(2)) if m else None, "wall_best_s": min(walls),
                                   "wall_median_s": statistics.median(walls), "cpu_best_s": min(cpus),
                                   "cpu_median_s": statistics.median(cpus)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"torchtitan b5bcd76c6 registries: {len(files)} files; best of {args.repeat} rounds; "
          f"python -c pass {min(floor) * 1000:.0f} ms CPU; load average {result['load']:.1f}\n")
    print("| target | configs | errors | CPU best | CPU median | wall best |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in result["targets"].items():
        print(f"| {name} | {r['configs']} | {r['errors']} | {r['cpu_best_s'] * 1000:.0f} ms | "
              f"{r['cpu_median_s'] * 1000:.0f} ms | {r['wall_best_s'] * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
