#!/usr/bin/env python3
"""What the whole-config schema check costs `meshlint check` on KempnerForge's 30 real configs.

    python bench/bench_schema_cost.py [--repeat 9] [--json]

Issue 12's speed goal: checking every key against the framework's generated schema (unknown keys,
types, enums, each section's ``__post_init__``, and the ``config`` fact it builds for the rules)
must not slow ``meshlint check configs/train/*.toml`` by more than 10 %. Each round runs one
``meshlint check`` process per variant, alternately, in the plain form a pre-commit hook uses:

* ``timed``: the real run, with the CPU time spent inside the schema check
  (``dialects.schema_check.apply``) summed by a wrapper: its share of the rest of the process;
* ``without``: the same process with that function replaced by a no-op (what meshlint was before
  the schema check), to cross-check the share as a difference of whole-process CPU times.

Bytecode is cached (one private ``PYTHONPYCACHEPREFIX``), the rule cache warm and the results
cache emptied before every run, so each config is really checked. CPU time (user + system)
of the child, best and median of the rounds. A script, not a test: timings on shared machines are noisy.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KF = ROOT.parent / "shared" / "frameworks" / "KempnerForge-5666d0d"

RUN = r"""
import contextlib, io, sys, time
sys.path.insert(0, sys.argv.pop(1))
mode = sys.argv.pop(1)
from meshlint.dialects import schema_check
spent = [0.0]
real = schema_check.apply
def timed(*args, **kwargs):
    t = time.process_time()
    try:
        return real(*args, **kwargs)
    finally:
        spent[0] += time.process_time() - t
schema_check.apply = timed if mode == "timed" else (lambda *args, **kwargs: None)
from meshlint import entry
sys.argv = ["meshlint", "check", *sys.argv[1:]]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        entry.main()
    except SystemExit:
        pass
print(spent[0] * 1000)
"""


def run(mode: str, configs: list, env: dict) -> tuple:
    shutil.rmtree(os.path.join(env["MESHLINT_CACHE_DIR"], "results"), ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", RUN, str(ROOT), mode, *configs], env=env, capture_output=True,
                          text=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or "Traceback" in proc.stderr:
        sys.exit(f"meshlint failed: {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return cpu, float(proc.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configs = sorted(str(p) for p in (KF / "configs" / "train").glob("*.toml"))
    if not configs:
        sys.exit(f"needs KempnerForge's configs at {KF}")
    scratch = tempfile.mkdtemp(prefix="meshlint-bench-schema-")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "MESHLINT_NO_CACHE")}
    env.update(PYTHONPYCACHEPREFIX=os.path.join(scratch, "pyc"), MESHLINT_CACHE_DIR=os.path.join(scratch, "cache"))
    os.mkdir(env["MESHLINT_CACHE_DIR"], 0o700)
    try:
        for mode in ("timed", "without"):  # untimed: bytecode and the rule cache
            run(mode, configs, env)
        rows: dict = {"timed": [], "without": []}
        for _ in range(args.repeat):
            for mode in rows:
                rows[mode].append(run(mode, configs, env))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    shares = sorted(schema / (cpu - schema) * 100 for cpu, schema in rows["timed"])
    spent = [schema for _, schema in rows["timed"]]
    with_cpu = [cpu for cpu, _ in rows["timed"]]
    without_cpu = [cpu for cpu, _ in rows["without"]]
    out = {
        "configs": len(configs), "rounds": args.repeat,
        "schema_check_ms": {"best": min(spent), "median": statistics.median(spent)},
        "share_of_rest_percent": {"best": shares[0], "median": statistics.median(shares)},
        "process_cpu_ms": {"with": {"best": min(with_cpu), "median": statistics.median(with_cpu)},
                           "without": {"best": min(without_cpu), "median": statistics.median(without_cpu)}},
        "slowdown_percent_of_bests": (min(with_cpu) / min(without_cpu) - 1) * 100,
        "load": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"meshlint check on {len(configs)} KempnerForge configs, {args.repeat} rounds, load {out['load']:.1f}:")
    print(f"  schema check (with the config fact): best {min(spent):.1f} ms, median {statistics.median(spent):.1f} ms "
          f"of CPU; {shares[0]:.1f} % (best), {statistics.median(shares):.1f} % (median) of the rest of the process")
    print(f"  whole process: with {min(with_cpu):.0f} ms / without {min(without_cpu):.0f} ms (bests), "
          f"{out['slowdown_percent_of_bests']:+.1f} %; medians {statistics.median(with_cpu):.0f} / "
          f"{statistics.median(without_cpu):.0f} ms")
    print("  goal: at most 10 %")


if __name__ == "__main__":
    main()
