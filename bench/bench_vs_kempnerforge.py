#!/usr/bin/env python3
"""meshlint on KempnerForge's 30 real configs against KempnerForge's own loader on ONE, side by side.

    python bench/bench_vs_kempnerforge.py [--repeat 15] [--json] [--bytecode cached|as-is] [--phases]

Issue 11's speed goal: ``meshlint check configs/train/*.toml`` (all 30 configs, every rule)
costs at most 0.6 times what KempnerForge itself spends to load and validate one config
(``load_config(path).validate(world)``, its own code from ../shared/frameworks/KempnerForge-5666d0d).
Both are whole processes, Python start-up included, run alternately in the same rounds, with
``python -c pass`` as the floor, and a second floor: a process that only reads the 30 configs with
the standard library's TOML parser (KempnerForge's own), checking nothing. Its ratio is what no
checker in Python can beat on a cold run. Reported: best and median wall time and child CPU time (user +
system, which a loaded machine disturbs far less than wall time), and the ratio of the bests; then the median
CPU split into user time (the process's own work) and system time (the kernel's, for its system calls and page
faults) for the floor, the peer and meshlint's empty and warm runs.
A script, not a test: timings on shared machines are noisy.

Bytecode. An installed package runs from compiled bytecode (pip and pre-commit compile it at
install time). A development shell may not: with ``PYTHONDONTWRITEBYTECODE`` set, every module
whose .pyc is missing or stale is compiled from source in every process, and KempnerForge's
read-only tree can never keep its .pyc at all. ``--bytecode cached`` (the default) gives both
sides the installed state: one private ``PYTHONPYCACHEPREFIX`` for every command, filled by
an untimed run of each first. ``--bytecode as-is`` runs them in the environment as it is.
Both say which in the output. ``meshlint check`` on the one config KempnerForge loads is timed too
(a pre-commit hook passes only the files a commit changes). ``--phases`` adds where meshlint's CPU
time goes inside one process without the results cache (start-up, imports, rule loading, the
first config, the other 29).

The results cache (meshlint/cli/results_cache.py) is timed both ways, each run with its own
``MESHLINT_CACHE_DIR``: COLD, an empty results cache (every config checked, and its entry
written) but the rule cache warm, as after installation and a first run; WARM, every config's
entry already there, as on a pre-commit run after a commit that touched no config. Each row has
its ratio to KempnerForge's one config. Issue 21 adds EMPTY, every cache empty (a first run after
installing: goal 1.0), and WARM with flags (``--world-size 16 --gpus-per-node 4``: goal 0.5), and
``--instructions``, each process's instruction count (callgrind), steadier than CPU time on a
shared machine.

The install. The bench runs the ``meshlint`` beside the interpreter that runs it, and the peer with that
interpreter. Run by the venv of the README's command 1 (``pip install .``: the wheel, as pre-commit and CI
install it too; its results cache keys on pip's RECORD, meshlint/installed.py), it times what users run; by the
venv of command 2, the editable install (``pip install -e .``, whose results cache keys on every file's size and
mtime). ``--wheel`` builds the wheel and installs it into a new venv in a temporary directory, with the running
interpreter's pip (an old pip's console script imports ``re`` first: docs/benchmarks.md, ninth pass).
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

ROOT = Path(__file__).resolve().parents[1]
KF = ROOT.parent / "shared" / "frameworks" / "KempnerForge-5666d0d"
ONE = KF / "configs" / "train" / "7b.toml"
# The floor of any checker written in Python: start-up, then the standard library's TOML parser (the one
# KempnerForge's loader uses) on each config, and nothing else. Its ratio bounds what a cold run can reach.
PARSE_ONLY = "import sys, tomllib\nfor path in sys.argv[1:]:\n    with open(path, 'rb') as f:\n        tomllib.load(f)\n"
FLAGS = ["--world-size", "16", "--gpus-per-node", "4"]  # issue 21: a flagged run, as CI scripts write them
GOALS = {"meshlint_empty": 1.0, "meshlint_warm_flags": 0.5}  # issue 21; the others issue 11's 0.6
KF_LOAD = (f"import sys; sys.path.insert(0, {str(KF)!r})\n"
           "from kempnerforge.config.loader import load_config\n"
           f"load_config({str(ONE)!r}).validate(world_size=8)\n")


def _meshlint(python: list, no_site: bool) -> list:
    """What a user runs: the ``meshlint`` console script installed beside this interpreter (pre-commit and CI
    run that), by this interpreter; ``python -m meshlint`` where there is none, or with -S (runpy costs it
    ~4.6 M instructions more)."""
    script = Path(sys.executable).parent / "meshlint"
    if script.is_file() and not no_site:
        return [*python, str(script)]
    return [*python, "-m", "meshlint"]


def _in_a_wheel_install(argv: list) -> int:
    """This bench, run by the interpreter of a new venv where meshlint's wheel is installed (its console script
    written by this interpreter's pip, as a current pip writes it)."""
    with tempfile.TemporaryDirectory(prefix="meshlint-bench-wheel-") as tmp:
        steps = [[sys.executable, "-m", "build", "--wheel", "--outdir", tmp, str(ROOT)],
                 [sys.executable, "-m", "venv", "--without-pip", f"{tmp}/venv"]]
        for step in steps:
            proc = subprocess.run(step, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"{' '.join(step[:4])} failed: {proc.stderr[-2000:]}")
        wheel = next(Path(tmp).glob("meshlint-*.whl"))
        proc = subprocess.run([sys.executable, "-m", "pip", "--python", f"{tmp}/venv/bin/python", "install", "--quiet",
                               "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"pip install {wheel.name} failed: {proc.stderr[-2000:]}")
        print(f"meshlint from {wheel.name}, installed in a new venv (no dependencies)", flush=True)
        return subprocess.run([f"{tmp}/venv/bin/python", __file__, *argv]).returncode


def run(cmd: list[str], env: dict | None = None) -> tuple[float, float, float]:
    """(wall, CPU = user + system, system) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1) or b"Traceback" in proc.stderr:
        sys.exit(f"{cmd[:4]} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    system = after.ru_stime - before.ru_stime
    return wall, (after.ru_utime - before.ru_utime) + system, system


class CacheDirs:
    """Fresh MESHLINT_CACHE_DIRs: ``cold()`` holds the warm rule cache only, ``warm`` every result too."""

    def __init__(self, base: dict, configs: list[str], meshlint: list[str]):
        self.root = tempfile.mkdtemp(prefix="meshlint-bench-cache-")
        self.base = base
        self.rules = self._dir("rules")
        # the rule cache (and the model table, should a config need it); cold() copies only those
        run([*meshlint, "check", *configs], self.env(self.rules))
        self.warm = self._dir("warm")
        for files in (configs, [str(ONE)], [*FLAGS, *configs]):  # each command's results (untimed)
            run([*meshlint, "check", *files], self.env(self.warm))
        self.count = 0

    def empty(self) -> dict:
        """A new directory with nothing in it: no rule cache, no results (a first run after installing)."""
        self.count += 1
        return self.env(self._dir(f"empty-{self.count}"))

    def _dir(self, name: str) -> str:
        path = os.path.join(self.root, name)
        os.mkdir(path, 0o700)
        return path

    def env(self, directory: str) -> dict:
        return dict(self.base, MESHLINT_CACHE_DIR=directory)

    def cold(self) -> dict:
        """A new directory with a copy of the rule cache and no results."""
        self.count += 1
        path = self._dir(f"cold-{self.count}")
        for name in os.listdir(self.rules):
            if name.startswith("rules-") and name.endswith(".json"):
                shutil.copy2(os.path.join(self.rules, name), os.path.join(path, name))
        return self.env(path)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# CPU time of each phase of one `meshlint check` process, read with time.process_time() inside it.
PHASES = r"""
import io, sys, time
T = time.process_time
t0 = T()                      # the interpreter and site, before any meshlint code
from meshlint.cli.settings import CliSettings, Planner
from meshlint.engine import check
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


def phases(configs: list[str], env: dict | None, repeat: int, python: list[str]) -> dict:
    rows = []
    for _ in range(repeat):
        proc = subprocess.run([*python, "-c", PHASES, *configs], capture_output=True, text=True,
                              cwd=ROOT, env=env, check=True)
        rows.append([float(x) * 1e3 for x in proc.stdout.split()])
    out = {}
    for i, name in enumerate(PHASE_NAMES):
        col = [r[i] / (len(configs) - 1 if name == "each other config" else 1) for r in rows]
        out[name] = {"cpu_best_ms": min(col), "cpu_median_ms": statistics.median(col)}
    return out


def instructions(commands: dict, env: dict, configs: list, python: list) -> dict:
    """Instructions of one run of the headline commands, counted by callgrind (fresh cache directories)."""
    import re

    dirs = CacheDirs(env, configs, _meshlint(python, "-S" in python))
    out = {}
    try:
        for name in ("floor", "kempnerforge", "parse_only", "meshlint_empty", "meshlint_cold", "meshlint_warm",
                     "meshlint_warm_flags"):
            cmd, cmd_env = commands[name]
            fresh = {"meshlint_empty": dirs.empty, "meshlint_cold": dirs.cold,
                     "meshlint_warm": lambda: dirs.env(dirs.warm), "meshlint_warm_flags": lambda: dirs.env(dirs.warm)}
            cmd_env = fresh[name]() if name in fresh else cmd_env
            proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                                  capture_output=True, text=True, cwd=ROOT, env=cmd_env)
            found = re.search(r"Collected : (\d+)", proc.stderr)
            if found is None:
                sys.exit(f"callgrind gave no count for {name}: {proc.stderr[-1000:]}")
            out[name] = int(found.group(1))
    finally:
        dirs.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--phases", action="store_true", help="also time the phases inside one meshlint process")
    parser.add_argument("--instructions", action="store_true",
                        help="also count each process's instructions once (valgrind's callgrind, ~50x slower): "
                             "steady where CPU times on a shared machine are not")
    parser.add_argument("--no-site", action="store_true",
                        help="run every command with python -S (meshlint found through PYTHONPATH): leaves out what "
                             "this machine's site-packages .pth hooks import at every start-up, on both sides")
    parser.add_argument("--bytecode", choices=("cached", "as-is"), default="cached",
                        help="cached: both sides run from compiled bytecode, as installed (default); "
                             "as-is: the environment's own bytecode state")
    parser.add_argument("--wheel", action="store_true",
                        help="time meshlint installed from its wheel, as pre-commit and CI install it: build the wheel, "
                             "install it (no dependencies: a check needs none) into a new venv with this interpreter's "
                             "pip, and run this bench there (the peer too)")
    args = parser.parse_args()
    if not KF.is_dir():
        sys.exit(f"needs KempnerForge's source at {KF}")
    if args.wheel:
        sys.exit(_in_a_wheel_install([a for a in sys.argv[1:] if a != "--wheel"]))
    configs = sorted(str(p) for p in (KF / "configs" / "train").glob("*.toml"))
    env = dict(os.environ)
    if args.bytecode == "cached":
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="meshlint-bench-pyc-")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("MESHLINT_NO_CACHE", None)
    python = [sys.executable]
    if args.no_site:
        python.append("-S")
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    meshlint = _meshlint(python, args.no_site)
    check_all = [*meshlint, "check", *configs]
    check_one = [*meshlint, "check", str(ONE)]
    for cmd in ([*python, "-c", "pass"], [*python, "-c", KF_LOAD], check_all):  # untimed: bytecode, page cache
        run(cmd, env)
    dirs = CacheDirs(env, configs, meshlint)
    # name -> (command, its environment: a fixed dict, or a function giving a fresh one per run)
    commands = {
        "floor": ([*python, "-c", "pass"], env),
        "kempnerforge": ([*python, "-c", KF_LOAD], env),
        "parse_only": ([*python, "-c", PARSE_ONLY, *configs], env),
        "meshlint_empty": (check_all, dirs.empty),
        "meshlint_cold": (check_all, dirs.cold),
        "meshlint_warm_flags": ([*meshlint, "check", *FLAGS, *configs], dirs.env(dirs.warm)),
        "meshlint_warm": (check_all, dirs.env(dirs.warm)),
        "meshlint_one_cold": (check_one, dirs.cold),
        "meshlint_one_warm": (check_one, dirs.env(dirs.warm)),
    }
    times: dict = {name: ([], [], []) for name in commands}
    try:
        for _ in range(args.repeat):
            for name, (cmd, cmd_env) in commands.items():
                wall, cpu, system = run(cmd, cmd_env() if callable(cmd_env) else cmd_env)
                times[name][0].append(wall)
                times[name][1].append(cpu)
                times[name][2].append(system)
    finally:
        dirs.close()
    out = {name: {"wall_best_ms": min(w) * 1e3, "wall_median_ms": statistics.median(w) * 1e3,
                  "cpu_best_ms": min(c) * 1e3, "cpu_median_ms": statistics.median(c) * 1e3,
                  # CPU split: user time (the process's own work) and system time (the kernel's, for its calls)
                  "user_median_ms": statistics.median(a - b for a, b in zip(c, s)) * 1e3,
                  "system_median_ms": statistics.median(s) * 1e3}
           for name, (w, c, s) in times.items()}
    out["configs"] = len(configs)
    out["bytecode"] = args.bytecode
    out["site"] = "skipped (python -S)" if args.no_site else "as-is"
    kf = out["kempnerforge"]
    out["ratios"] = {name: {"cpu_best": out[name]["cpu_best_ms"] / kf["cpu_best_ms"],
                            "cpu_median": out[name]["cpu_median_ms"] / kf["cpu_median_ms"],
                            "wall_best": out[name]["wall_best_ms"] / kf["wall_best_ms"]}
                     for name in commands if name.startswith("meshlint") or name == "parse_only"}
    if args.phases:
        out["phases"] = phases(configs, env, args.repeat, python)
    if args.instructions:
        out["instructions"] = instructions(commands, env, configs, python)
    out["load"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print("| process | wall best | wall median | CPU best | CPU median | / KempnerForge (CPU best, median) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    labels = {"floor": "python -c pass", "kempnerforge": "KempnerForge load_config + validate, 1 config",
              "parse_only": f"only reading the {len(configs)} configs with tomllib (no check at all)",
              "meshlint_empty": f"meshlint check, {len(configs)} configs, every cache EMPTY (a first run)",
              "meshlint_cold": f"meshlint check, {len(configs)} configs, results cache COLD",
              "meshlint_warm_flags": f"meshlint check {' '.join(FLAGS)}, {len(configs)} configs, WARM",
              "meshlint_warm": f"meshlint check, {len(configs)} configs, results cache WARM",
              "meshlint_one_cold": "meshlint check, 1 config, results cache COLD",
              "meshlint_one_warm": "meshlint check, 1 config, results cache WARM"}
    for name, label in labels.items():
        t = out[name]
        ratio = out["ratios"].get(name)
        shown = f"{ratio['cpu_best']:.2f}, {ratio['cpu_median']:.2f}" if ratio else ""
        print(f"| {label} | {t['wall_best_ms']:.0f} ms | {t['wall_median_ms']:.0f} ms | "
              f"{t['cpu_best_ms']:.0f} ms | {t['cpu_median_ms']:.0f} ms | {shown} |")
    # both statistics: on a shared VM the best of a few dozen rounds swings by several per cent from run to run
    # (docs/benchmarks.md, thirteenth pass), the median less
    def judged(r: dict, goal: float) -> str:
        marks = ["meets" if r[k] <= goal else "misses" for k in ("cpu_best", "cpu_median")]
        return f"{marks[0]} {goal}" if marks[0] == marks[1] else f"best {marks[0]}, median {marks[1]} {goal}"

    verdict = ", ".join(f"{name.removeprefix('meshlint_')} {r['cpu_best']:.2f}/{r['cpu_median']:.2f} "
                        f"({judged(r, GOALS.get(name, 0.6))})"
                        for name, r in out["ratios"].items() if name != "parse_only")
    verdict += f"; only parsing the configs: {out['ratios']['parse_only']['cpu_best']:.2f}"
    print(f"\nmeshlint / KempnerForge, CPU best/median: {verdict}. Bytecode {args.bytecode}, site {out['site']}, {args.repeat} rounds, "
          f"load average {out['load']:.1f} on {os.cpu_count()} CPUs.")
    print("\n| process | user median | system median |\n| --- | ---: | ---: |")
    for name in ("floor", "kempnerforge", "meshlint_empty", "meshlint_warm"):
        print(f"| {labels[name]} | {out[name]['user_median_ms']:.1f} ms | {out[name]['system_median_ms']:.1f} ms |")
    if args.instructions:
        kf_ir = out["instructions"]["kempnerforge"]
        print("\n| process (callgrind) | instructions | / KempnerForge |\n| --- | ---: | ---: |")
        for name, ir in out["instructions"].items():
            print(f"| {labels[name]} | {ir / 1e6:,.0f} M | {ir / kf_ir:.2f} |")
    if args.phases:
        print("\n| meshlint phase (one process, CPU) | best | median |\n| --- | ---: | ---: |")
        for name, t in out["phases"].items():
            print(f"| {name} | {t['cpu_best_ms']:.1f} ms | {t['cpu_median_ms']:.1f} ms |")


if __name__ == "__main__":
    main()
