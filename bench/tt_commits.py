#!/usr/bin/env python3
"""meshlint over torchtitan's registry-era history: which semantics each commit is read with, and whether
anything crashes.

    python bench/tt_commits.py [-n 24] [--cache DIR] [--json out.json]

Samples ``-n`` commits from 9810191bb (the first registry commit) to the local mirror's HEAD
(/work/.mirror/pytorch+torchtitan/repo): the commits where the modelled semantics changed (ETP removed,
spmd_backend added, full_dtensor removed, the token-budget key rename, the ep check) and the rest spread
evenly over the range. For each it exports the torchtitan package, checks every config_registry.py of the
tree and the launch ``--module llama3 --config llama3_debugmodel --parallelism.tensor_parallel_degree 2`` at
world 8, in-process, and prints a table: commit, date, version applied, how decided, unmodelled items,
configs checked, error findings, ML008s and crashes (a traceback out of meshlint), seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tt_history  # noqa: E402


def _how(decided_by: str | None) -> str:
    text = decided_by or "-"
    text = text.split(": ", 1)[1] if text.startswith("identified from the code") else text
    return ("nearest: " + text.split("points: ", 1)[0].split("(the code matches it on ")[-1].rstrip(" ")
            if text.startswith("nearest") else "every marker matches")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=24, help="commits to sample (default 24)")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "meshlint-tt-commits"),
                    help="where exported trees are kept between runs")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    if not tt_history.available():
        print(f"no torchtitan mirror at {tt_history.MIRROR}", file=sys.stderr)
        return 2
    rows = []
    print("| commit | date | why sampled | version applied | how decided | unmodelled | configs | errors | "
          "ML008 | crashes | launch | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for sha, date, why in tt_history.sample(args.n):
        root = tt_history.export(sha, args.cache)
        start = time.perf_counter()
        r = tt_history.check_tree(root)
        took = time.perf_counter() - start
        shown = ", ".join(r["unmodelled"][:4]) + (f" +{len(r['unmodelled']) - 4}" if len(r["unmodelled"]) > 4 else "")
        print(f"| {sha} | {date} | {why} | {r['version']} | {_how(r['decided_by'])} | {len(r['unmodelled'])}: "
              f"{shown or '-'} | {r['configs']} | {r['errors']} | {len(r['ml008'])} | {len(r['crashes'])} | "
              f"{r['launch']} | {took:.2f} |", flush=True)
        for crash in r["crashes"]:
            print(crash, file=sys.stderr)
        rows.append({"commit": sha, "date": date, "why": why, **r, "seconds": round(took, 3)})
    crashed = sum(bool(r["crashes"]) or bool(r["ml008"]) for r in rows)
    versions = {}
    for r in rows:
        versions[r["version"]] = versions.get(r["version"], 0) + 1
    print(f"\n{len(rows)} commits, {sum(r['configs'] for r in rows)} configs checked; versions applied: "
          + ", ".join(f"{v} x{n}" for v, n in versions.items())
          + f"; commits with a crash or ML008: {crashed}; with unmodelled items: "
          f"{sum(bool(r['unmodelled']) for r in rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
