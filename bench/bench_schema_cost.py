#!/usr/bin/env python3
"""What the whole-config schema check costs `meshlint check` on KempnerForge's 30 real configs.

    python bench/bench_schema_cost.py [--repeat 9] [--json]

Issue 12's speed goal: checking every key against the framework's generated schema (unknown keys,
types, enums, each section's ``__post_init__``, and the ``config`` fact it builds for the rules)
must not slow ``meshlint check configs/train/*.toml`` by more than 10 %. Each round runs one
``meshlint check`` process per variant, alternately, in the plain form a pre-commit hook uses:

* ``timed``: the real run, with the CPU time spent inside the check of every key (``Schema.check``)
  and inside ``dialects.schema_check.apply`` (the check plus the ``config`` fact) summed by wrappers:
  each as a share of the rest of the process;
* ``no-check``: the same process with ``Schema.check`` (the check of every key) answering nothing, the
  ``config`` fact still built (rules read it), to cross-check the share as a difference of
  whole-process CPU times. Replacing the whole of ``apply`` instead would also take the ``config`` fact
  away, and with it the work of every rule that reads it: not the cost of the check.

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
from meshlint.frameworks import schema_data
from meshlint.frameworks import schema_check
spent = {"apply": 0.0, "check": 0.0}
def timer(name, real):
    def timed(*args, **kwargs):
        t = time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            spent[name] += time.process_time() - t
    return timed
if mode == "timed":
    schema_check.apply = timer("apply", schema_check.apply)
    schema_data.Schema.check = timer("check", schema_data.Schema.check)
elif mode == "no-check":  # the config fact is still built: only the check of every key is gone
    schema_data.Schema.check = lambda self, *args, **kwargs: []
from meshlint.cli import entry
sys.argv = ["meshlint", "check", *sys.argv[1:]]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        entry.main()
    except SystemExit:
        pass
print(spent["apply"] * 1000, spent["check"] * 1000)
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
    apply_ms, check_ms = (float(x) for x in proc.stdout.split()[-2:])
    return cpu, apply_ms, check_ms


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
        for mode in ("timed", "no-check"):  # untimed: bytecode and the rule cache
            run(mode, configs, env)
        rows: dict = {"timed": [], "no-check": []}
        for _ in range(args.repeat):
            for mode in rows:
                rows[mode].append(run(mode, configs, env))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def stats(values: list) -> dict:
        return {"best": min(values), "median": statistics.median(values)}

    timed = rows["timed"]
    out = {
        "configs": len(configs), "rounds": args.repeat,
        # the check of every key (Schema.check), as a share of the rest of the same process
        "schema_check_ms": stats([c for _, _, c in timed]),
        "schema_check_share_percent": stats([c / (cpu - c) * 100 for cpu, _, c in timed]),
        # the check and the `config` fact it comes with (dialects.schema_check.apply)
        "with_config_fact_ms": stats([a for _, a, _ in timed]),
        "with_config_fact_share_percent": stats([a / (cpu - a) * 100 for cpu, a, _ in timed]),
        "process_cpu_ms": {"with": stats([cpu for cpu, _, _ in timed]),
                           "without_check": stats([cpu for cpu, _, _ in rows["no-check"]])},
        "load": os.getloadavg()[0],
    }
    with_cpu, without_cpu = out["process_cpu_ms"]["with"], out["process_cpu_ms"]["without_check"]
    out["slowdown_percent"] = {k: (with_cpu[k] / without_cpu[k] - 1) * 100 for k in ("best", "median")}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"meshlint check on {len(configs)} KempnerForge configs, {args.repeat} rounds, load {out['load']:.1f}:")
    for label, ms, share in (("schema check (every key)", "schema_check_ms", "schema_check_share_percent"),
                             ("with the config fact", "with_config_fact_ms", "with_config_fact_share_percent")):
        print(f"  {label}: {out[ms]['best']:.1f} ms best, {out[ms]['median']:.1f} ms median of CPU; "
              f"{out[share]['best']:.1f} % / {out[share]['median']:.1f} % (best / median) of the rest of the process")
    print(f"  whole process with / without the schema check: {with_cpu['best']:.0f} / {without_cpu['best']:.0f} ms best "
          f"({out['slowdown_percent']['best']:+.1f} %), {with_cpu['median']:.0f} / {without_cpu['median']:.0f} ms median "
          f"({out['slowdown_percent']['median']:+.1f} %)")
    print("  goal: at most 10 %")


if __name__ == "__main__":
    main()
