#!/usr/bin/env python3
"""Time to read torchtitan's config registries statically (meshlint.inputs.pyregistry).

    python bench/bench_registry.py [--root DIR] [--repeat N] [--json]

Reads every ``config_registry.py`` of the checkout plus ``torchtitan_recipes/**/*.py``
(193 config functions at b5bcd76c6) in one process, the way one ``meshlint check``
run does, and reports the best and median wall time (and the best CPU time) of
--repeat rounds. Each round starts cold: the process-wide parse cache is emptied
first. Also reports the import time of the reader and, for scale, the time
``ast.parse`` alone takes on the same files.

This is a script, not a test: timings on shared machines are noisy.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import statistics
import sys
import time
from pathlib import Path

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "shared" / "frameworks" / "torchtitan-b5bcd76c6"


def registry_files(root: str) -> list[str]:
    files = sorted(glob.glob(os.path.join(root, "**", "config_registry.py"), recursive=True))
    files += sorted(glob.glob(os.path.join(root, "torchtitan_recipes", "**", "*.py"), recursive=True))
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(DEFAULT_ROOT))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not os.path.isdir(args.root):
        print(f"no torchtitan checkout at {args.root}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    from meshlint.inputs import pyregistry
    import_s = time.perf_counter() - t0

    files = registry_files(args.root)
    texts = [Path(f).read_text() for f in files]
    parse_s = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for text in texts:
            ast.parse(text)
        parse_s = min(parse_s, time.perf_counter() - t0)

    rounds = []
    cpu = []
    functions = unknown_root = 0
    for _ in range(args.repeat):
        pyregistry.clear_caches()
        t0, c0 = time.perf_counter(), time.process_time()
        read = [pyregistry.read_registry(f) for f in files]
        rounds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        functions = sum(len(r.functions) for r in read)
        unknown_root = sum(1 for r in read for s in r.functions.values() if "" in s.unknown)
    result = {
        "files": len(files),
        "bytes": sum(len(t) for t in texts),
        "functions": functions,
        "whole_config_unknown": unknown_root,
        "best_s": round(min(rounds), 4),
        "median_s": round(statistics.median(rounds), 4),
        "cpu_best_s": round(min(cpu), 4),
        "rounds": len(rounds),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "ast_parse_of_the_files_alone_s": round(parse_s, 4),
        "import_s": round(import_s, 4),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['files']} files ({result['bytes']:,} bytes), {functions} config functions "
              f"({unknown_root} wholly unknown)")
        print(f"read all: best {result['best_s'] * 1000:.0f} ms, median {result['median_s'] * 1000:.0f} ms "
              f"over {len(rounds)} cold rounds")
        print(f"  CPU time: best {result['cpu_best_s'] * 1000:.0f} ms (load average {result['load_average']})")
        print(f"  of which ast.parse of the registry files alone: {parse_s * 1000:.0f} ms; "
              f"import of the reader: {import_s * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
