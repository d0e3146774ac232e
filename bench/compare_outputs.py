#!/usr/bin/env python3
"""``meshlint check`` of two source trees, output for output: byte-identical or the first difference.

    python bench/compare_outputs.py --before /path/to/main [--after .] [--quick]

For a change that must not change output (a faster reader, fewer imports): each tree's meshlint
(``PYTHONPATH``) checks the same inputs - every fixture file, one at a time (``--quick``: each
fixture directory as one run), KempnerForge's and both torchtitan trees under
../shared/frameworks - in text and in JSON, first with every cache empty (a fresh
``MESHLINT_CACHE_DIR``), then again warm from that run's caches. Stdout, stderr and the exit
code must be the same bytes. A script, not a test: it runs about two thousand processes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ROOT.parent / "shared" / "frameworks"


def _targets(quick: bool) -> list:
    fixtures = ROOT / "fixtures"
    if quick:
        out = [[str(p)] for p in sorted(fixtures.iterdir()) if p.is_dir()]
    else:
        out = [[str(p)] for p in sorted(fixtures.rglob("*")) if p.is_file()]
    for tree in ("KempnerForge-5666d0d", "torchtitan-b5bcd76c6", "torchtitan-v0.2-9810191bb-parent"):
        if (FRAMEWORKS / tree).is_dir():
            out.append([str(FRAMEWORKS / tree)])
    return out


def _run(tree: str, args: list, cache: str, cwd: str) -> tuple:
    # cwd: a directory of neither tree (``python -m`` puts the working directory first on sys.path, before
    # PYTHONPATH), the same for both sides; the paths checked are absolute
    env = dict(os.environ, PYTHONPATH=tree, MESHLINT_CACHE_DIR=cache, NO_COLOR="1")
    env.pop("MESHLINT_NO_CACHE", None)
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", *args], capture_output=True, cwd=cwd,
                          env=env, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def _which(tree: str, cwd: str) -> str:
    env = dict(os.environ, PYTHONPATH=tree)
    return subprocess.run([sys.executable, "-c", "import meshlint; print(meshlint.__file__)"], capture_output=True,
                          text=True, cwd=cwd, env=env).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the source tree to compare against (its meshlint package)")
    parser.add_argument("--after", default=str(ROOT))
    parser.add_argument("--quick", action="store_true", help="each fixture directory as one run")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="meshlint-compare-")
    args.before, args.after = os.path.abspath(args.before), os.path.abspath(args.after)
    for tree in (args.before, args.after):
        found = _which(tree, scratch)
        if not found.startswith(os.path.join(tree, "meshlint") + os.sep):
            sys.exit(f"{tree}: its meshlint is not the one imported ({found})")
    runs = differ = 0
    try:
        for n, target in enumerate(_targets(args.quick)):
            for fmt in ("text", "json"):
                caches = {side: os.path.join(scratch, f"{side}-{n}-{fmt}") for side in ("before", "after")}
                for state in ("empty", "warm"):
                    got = {}
                    for side, tree in (("before", args.before), ("after", args.after)):
                        os.makedirs(caches[side], exist_ok=True)
                        got[side] = _run(tree, ["--format", fmt, *target], caches[side], scratch)
                    runs += 1
                    if got["before"] != got["after"]:
                        differ += 1
                        print(f"DIFFERENT: {' '.join(target)} --format {fmt}, caches {state}")
                        for side in ("before", "after"):
                            code, out, err = got[side]
                            print(f"  {side}: exit {code}, stdout {out[-400:]!r}, stderr {err[-400:]!r}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{runs} runs compared (text and JSON, caches empty then warm): {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
