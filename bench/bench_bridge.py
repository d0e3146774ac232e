#!/usr/bin/env python3
"""Speed of the Megatron-Bridge path: every recipe file of a Bridge checkout checked, and one recipe.

    python bench/bench_bridge.py /path/to/Megatron-Bridge [--repeat 3]     # Markdown table on stdout

Wall time of whole processes (``meshlint check`` on all of ``src/megatron/bridge/recipes`` and
``perf_recipes``, and on one recipe function), Python start-up included, best and median of --repeat runs;
and in-process, the static read alone (recipe_sources on every file), per recipe function. A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_megatron import timed  # noqa: E402 - a whole `meshlint` process, best and median of N


def recipe_files(checkout: str) -> list:
    out = []
    for sub in ("recipes", "perf_recipes"):
        base = os.path.join(checkout, "src", "megatron", "bridge", sub)
        for folder, dirs, files in os.walk(base):
            dirs.sort()
            out += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", help="a Megatron-Bridge checkout (holding src/megatron/bridge)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files = recipe_files(args.checkout)
    if not files:
        print(f"no recipe files under {args.checkout}/src/megatron/bridge", file=sys.stderr)
        return 2
    sys.path.insert(0, ROOT)
    from meshlint.inputs.bridge_recipe import is_recipe_text, recipe_sources

    start = time.perf_counter()
    count = 0
    for path in files:
        with open(path, "rb") as f:
            if is_recipe_text(f.read()):
                count += len(recipe_sources(path))
    read = time.perf_counter() - start
    first = next(p for p in files if p.endswith(os.path.join("llama", "llama3.py"))) if any(
        p.endswith(os.path.join("llama", "llama3.py")) for p in files) else files[0]
    all_best, all_median = timed(["check", "--format", "json", *files], args.repeat)
    one_best, one_median = timed(["check", first], args.repeat)
    print("| what | best | median |\n| --- | --- | --- |")
    print(f"| `meshlint check` all {len(files)} recipe files ({count} recipe functions) | {all_best:.2f} s | "
          f"{all_median:.2f} s |")
    print(f"| `meshlint check` {os.path.relpath(first, args.checkout)} | {one_best:.2f} s | {one_median:.2f} s |")
    print(f"| static read alone, in-process | {read:.2f} s ({1000 * read / max(count, 1):.1f} ms per recipe) | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
