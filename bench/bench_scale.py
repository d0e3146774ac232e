#!/usr/bin/env python3
"""meshlint on a monorepo's worth of configs: peak memory of one run, and an unchanged re-run against the first.

    python bench/bench_scale.py [--count 10000] [--format text] [--repeat 1] [--json]

Issue 21's goals: 10,000 configs in one ``meshlint check`` run at most 64 MB of peak RSS (reports are
streamed: meshlint/report/stream.py), and a re-run of the unchanged tree at most 0.25 of the first (the
results cache keeps as many entries as the tree has: meshlint/cli/results_cache.py). The configs are
bench_check.py's generated mix of the three dialects. Each round starts from an empty
``MESHLINT_CACHE_DIR`` (no rule cache, no results): FIRST is that run, RERUN the same command again.
Whole processes, CPU time (user + system) and peak RSS of the child; bytecode cached as an installed
package has it. A script, not a test: timings on shared machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_check import generate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run(cmd: list, env: dict, cwd: Path) -> dict:
    """Wall and CPU time and peak RSS of this one child (os.wait4: RUSAGE_CHILDREN's peak is of all of them)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=cwd)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            err.seek(0)
            sys.exit(f"{cmd[:6]} failed ({proc.returncode}): {err.read().decode()[-2000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}


def read_index(directory: str) -> dict:
    """The results cache's index (meshlint/cli/results_store.py), read by the tree being measured."""
    sys.path.insert(0, str(Path(os.environ.get("MESHLINT_TREE", ROOT))))
    from meshlint.cli.results_store import read_index as read

    return read(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--format", default="text", choices=("text", "json", "sarif", "github"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="meshlint-bench-scale-"))
    try:
        tree = work / "configs"
        generate(tree, args.count)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "MESHLINT_NO_CACHE")}
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        tree_root = Path(os.environ.get("MESHLINT_TREE", ROOT))  # another checkout's meshlint, to compare
        env["PYTHONPATH"] = str(tree_root)  # and its working directory: `python -m` looks there first
        cmd = [sys.executable, "-m", "meshlint", "check", "--format", args.format, str(tree)]
        # bytecode, as an installed package has it (pip compiles every module): the rules' compiled expressions are
        # one module per dialect, which a check of one config would not all load
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree_root / "meshlint")], env=env,
                       capture_output=True, cwd=tree_root)
        one = str(min(tree.rglob("*.toml")))
        subprocess.run([sys.executable, "-m", "meshlint", "check", "--no-cache", one],
                       env=dict(env, MESHLINT_CACHE_DIR=str(work / "warmup")), capture_output=True, cwd=tree_root)
        rounds = []
        for i in range(args.repeat):
            cache = work / f"cache{i}"
            cache.mkdir(mode=0o700)
            env["MESHLINT_CACHE_DIR"] = str(cache)
            first = run(cmd, env, tree_root)
            entries = len(read_index(str(cache / "results")))
            rerun = run(cmd, env, tree_root)
            rounds.append({"first": first, "rerun": rerun, "entries": entries})
        best = {k: min(rounds, key=lambda r: r[k]["cpu_s"])[k] for k in ("first", "rerun")}
        out = {"configs": args.count, "format": args.format, "rounds": rounds,
               "peak_rss_mb": max(r[k]["peak_rss_mb"] for r in rounds for k in ("first", "rerun")),
               "rerun_over_first_cpu": best["rerun"]["cpu_s"] / best["first"]["cpu_s"]}
        if args.json:
            print(json.dumps(out, indent=2))
            return
        print(f"{args.count:,} configs, --format {args.format}, best of {args.repeat} (CPU):")
        for name in ("first", "rerun"):
            r = best[name]
            print(f"  {name:6} CPU {r['cpu_s']:7.2f} s  wall {r['wall_s']:7.2f} s  peak RSS {r['peak_rss_mb']:6.1f} MB")
        print(f"  cache entries after the first run: {rounds[0]['entries']:,}")
        print(f"  re-run / first (CPU): {out['rerun_over_first_cpu']:.3f}   peak RSS: {out['peak_rss_mb']:.1f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
