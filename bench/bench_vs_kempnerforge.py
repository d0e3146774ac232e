#!/usr/bin/env python3
"""meshlint on KempnerForge's 30 real configs against KempnerForge's own loader on ONE, side by side.

    python bench/bench_vs_kempnerforge.py [--repeat 15] [--json] [--bytecode cached|as-is] [--phases]

Issue 11's speed goal: ``meshlint check configs/train/*.toml`` (all 30 configs, every rule)
costs at most 0.6 times what KempnerForge itself spends to load and validate one config
(``load_config(path).validate(world)``, its own code from ../shared/frameworks/KempnerForge-5666d0d).
Both are whole processes, Python start-up included, run alternately in the same rounds, with
``python -c pass`` as the floor. Reported: best and median wall time and child CPU time (user +
system, which a loaded machine disturbs far less than wall time), and the ratio of the bests.
A script, not a test: timings on shared machines are noisy.

Bytecode. An installed package runs from compiled bytecode (pip and pre-commit compile it at
install time). A development shell may not: with ``PYTHONDONTWRITEBYTECODE`` set, every module
whose .pyc is missing or stale is compiled from source in every process, and KempnerForge's
read-only tree can never keep its .pyc at all. ``--bytecode cached`` (the default) gives both
sides the installed state: one private ``PYTHONPYCACHEPREFIX`` for all three commands, filled by
an untimed run of each first. ``--bytecode as-is`` runs them in the environment as it is.
Both say which in the output. ``meshlint check`` on the one config KempnerForge loads is timed too
(a pre-commit hook passes only the files a commit changes). ``--phases`` adds where meshlint's CPU
time goes inside one process (start-up, imports, rule loading, the first config, the other 29). The rule cache is warm in both modes (the pre-commit state); meshlint
keeps no cache of results, so every timed ``check`` does all the work on all 30 configs.
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

ROOT = Path(__file__).resolve().parents[1]
KF = ROOT.parent / "shared" / "frameworks" / "KempnerForge-5666d0d"
ONE = KF / "configs" / "train" / "7b.toml"
KF_LOAD = (f"import sys; sys.path.insert(0, {str(KF)!r})\n"
           "from kempnerforge.config.loader import load_config\n"
           f"load_config({str(ONE)!r}).validate(world_size=8)\n")


def run(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.exit(f"{cmd[:4]} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# CPU time of each phase of one `meshlint check` process, read with time.process_time() inside it.
PHASES = r"""
import io, sys, time
T = time.process_time
t0 = T()                      # the interpreter and site, before any meshlint code
from meshlint.settings import CliSettings, Planner
from meshlint import check
t1 = T()
planner = Planner(CliSettings())
files = check.collect_paths(sys.argv[1:])
options = planner.options_for(files[0])   # finds the project configuration, loads the rules (cache warm)
t2 = T()
first = check.check_all(files[0], options)
t3 = T()
reports = [r for f in files[1:] for r in check.check_all(f, planner.options_for(f))]
t4 = T()
from meshlint.report import text
text.render(first + reports, False, use_color=False)
t5 = T()
print(t0, t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)
"""
PHASE_NAMES = ("interpreter start-up", "imports", "project config + rules", "first config",
               "each other config", "text report")


def phases(configs: list[str], env: dict | None, repeat: int) -> dict:
    rows = []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-c", PHASES, *configs], capture_output=True, text=True,
                              cwd=ROOT, env=env, check=True)
        rows.append([float(x) * 1e3 for x in proc.stdout.split()])
    out = {}
    for i, name in enumerate(PHASE_NAMES):
        col = [r[i] / (len(configs) - 1 if name == "each other config" else 1) for r in rows]
        out[name] = {"cpu_best_ms": min(col), "cpu_median_ms": statistics.median(col)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--phases", action="store_true", help="also time the phases inside one meshlint process")
    parser.add_argument("--bytecode", choices=("cached", "as-is"), default="cached",
                        help="cached: both sides run from compiled bytecode, as installed (default); "
                             "as-is: the environment's own bytecode state")
    args = parser.parse_args()
    if not KF.is_dir():
        sys.exit(f"needs KempnerForge's source at {KF}")
    configs = sorted(str(p) for p in (KF / "configs" / "train").glob("*.toml"))
    commands = {
        "floor": [sys.executable, "-c", "pass"],
        "kempnerforge": [sys.executable, "-c", KF_LOAD],
        "meshlint": [sys.executable, "-m", "meshlint", "check", *configs],
        "meshlint_one": [sys.executable, "-m", "meshlint", "check", str(ONE)],
    }
    env = None
    if args.bytecode == "cached":
        env = dict(os.environ, PYTHONPYCACHEPREFIX=tempfile.mkdtemp(prefix="meshlint-bench-pyc-"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    times: dict = {name: ([], []) for name in commands}
    for cmd in commands.values():  # untimed: the rule cache, the page cache and (cached mode) bytecode
        run(cmd, env)
    for _ in range(args.repeat):
        for name, cmd in commands.items():
            wall, cpu = run(cmd, env)
            times[name][0].append(wall)
            times[name][1].append(cpu)
    out = {name: {"wall_best_ms": min(w) * 1e3, "wall_median_ms": statistics.median(w) * 1e3,
                  "cpu_best_ms": min(c) * 1e3, "cpu_median_ms": statistics.median(c) * 1e3}
           for name, (w, c) in times.items()}
    out["configs"] = len(configs)
    out["bytecode"] = args.bytecode
    out["ratio_wall_best"] = out["meshlint"]["wall_best_ms"] / out["kempnerforge"]["wall_best_ms"]
    out["ratio_cpu_best"] = out["meshlint"]["cpu_best_ms"] / out["kempnerforge"]["cpu_best_ms"]
    out["ratio_one_cpu_best"] = out["meshlint_one"]["cpu_best_ms"] / out["kempnerforge"]["cpu_best_ms"]
    if args.phases:
        out["phases"] = phases(configs, env, args.repeat)
    out["load"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print("| process | wall best | wall median | CPU best | CPU median |")
    print("| --- | ---: | ---: | ---: | ---: |")
    labels = {"floor": "python -c pass", "kempnerforge": "KempnerForge load_config + validate, 1 config",
              "meshlint": f"meshlint check, {len(configs)} configs", "meshlint_one": "meshlint check, 1 config"}
    for name, label in labels.items():
        t = out[name]
        print(f"| {label} | {t['wall_best_ms']:.0f} ms | {t['wall_median_ms']:.0f} ms | "
              f"{t['cpu_best_ms']:.0f} ms | {t['cpu_median_ms']:.0f} ms |")
    print(f"\nmeshlint / KempnerForge: {out['ratio_wall_best']:.2f} (wall, best), {out['ratio_cpu_best']:.2f} (CPU, best);"
          f" goal <= 0.6. One config: {out['ratio_one_cpu_best']:.2f} (CPU, best)."
          f" Bytecode {args.bytecode}, {args.repeat} rounds, load average {out['load']:.1f}.")
    if args.phases:
        print("\n| meshlint phase (one process, CPU) | best | median |\n| --- | ---: | ---: |")
        for name, t in out["phases"].items():
            print(f"| {name} | {t['cpu_best_ms']:.1f} ms | {t['cpu_median_ms']:.1f} ms |")


if __name__ == "__main__":
    main()
