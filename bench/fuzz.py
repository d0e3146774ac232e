#!/usr/bin/env python3
"""The long fuzz run: N generated inputs through meshlint in-process, with figures.

    python bench/fuzz.py                  # 2,000 inputs
    python bench/fuzz.py -n 20000 --seed 7 --json

Inputs come from tests/fuzzgen.py (configs of every dialect, rule packs and
command lines of check/explain/diff/rules, with hostile values); each is run
through meshlint's click app and judged by the same oracle as the short run in
tests/test_fuzz.py. Prints the inputs fuzzed, the failures (each with a
reproducer), the worst time (wall, and CPU: on a shared machine the wall time
also counts what else runs) and the worst peak memory of one input (Python
allocations, tracemalloc, measured on a second run of the slowest inputs and of
every ``--memory-every``-th one), the process's peak RSS, and how many rule
evaluation errors hostile rule packs produced (findings, not failures).
A per-input alarm turns a hang into a reported failure instead of a stuck run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzzgen import cases, describe, run_case  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402


class Hang(BaseException):  # not an Exception: meshlint's own net (a failed file's report) must not catch it
    pass


WARM_UP = {
    "kf.toml": b"# meshlint: world_size=16 gpus_per_node=8\n[model]\nnum_experts = 8\n[distributed]\ntp = 2\npp = 2\nep = 2\n",
    "tt.toml": b'# meshlint: world_size=16 gpus_per_node=8\n[model]\nname = "llama3"\nflavor = "8B"\n'
               b"[parallelism]\ntensor_parallel_degree = 2\npipeline_parallel_degree = 2\n",
    "native.toml": b'[mesh]\nworld_size = 16\ngpus_per_node = 8\ndims = [{ name = "dp", size = -1 }, { name = "tp", size = 4 }]\n',
}
PACK = (("r.toml", 'code = "ZZ001"\nname = "warm"\nseverity = "info"\nsummary = "s"\ncheck = "tp > 0"\nmessage = "m"\n'),)


def _rss_now() -> str:
    """The process's resident memory now (Linux), so a long run shows whether memory grows with the inputs
    (the peak in the summary is a high-water mark that one hungry input sets)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return ""
    return f", RSS now {pages * resource.getpagesize() / 2**20:.0f} MB"


def warm_up(work: str) -> None:
    from fuzzgen import Case

    for name, raw in WARM_UP.items():
        for argv in (("check", "{f0}", "--format", "json"), ("check", "{f0}", "--format", "sarif"),
                     ("explain", "{f0}", "--rank", "1"), ("diff", "{f0}", "{f0}"), ("check", "{f0}", "--rules", "{pack}"),
                     ("rules", "--rules", "{pack}"), ("explain", "{f0}", "--svg", "{out}")):
            run_case(Case(((name, raw),), PACK, argv, argv[0]), work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--inputs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=None, help="derandomize with this seed (default: random)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds one input may take before it is a hang")
    parser.add_argument("--memory-every", type=int, default=10, help="also measure the peak memory of every k-th input")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", metavar="DIR", help="write each failure and the slowest input (by CPU) here, whole, "
                                                      "as JSON reproducers (files hex-encoded)")
    args = parser.parse_args()

    os.environ.setdefault("MESHLINT_CACHE_DIR", tempfile.mkdtemp(prefix="meshlint-fuzz-cache-"))
    stats = {"inputs": 0, "failures": 0, "worst_seconds": 0.0, "worst_input": None, "worst_cpu_seconds": 0.0,
             "worst_cpu_input": None, "worst_peak_mb": 0.0,
             "worst_peak_input": None, "rule_evaluation_errors": 0, "exit_codes": {}, "by_command": {}}
    failures: list[str] = []
    slow: list[tuple[float, object]] = []

    def on_alarm(signum, frame):
        raise Hang()

    signal.signal(signal.SIGALRM, on_alarm)
    work = tempfile.mkdtemp(prefix="meshlint-fuzz-")

    def save(case, name: str, notes: list) -> None:
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            doc = {"argv": list(case.argv), "command": case.command, "notes": notes,
                   "files": [[n, raw.hex()] for n, raw in case.files], "pack": [list(p) for p in case.pack]}
            with open(os.path.join(args.save, f"{name}.json"), "w") as f:
                json.dump(doc, f, indent=1)

    def peak_of(case) -> float:
        tracemalloc.start()
        try:
            run_case(case, work)
            return tracemalloc.get_traced_memory()[1] / 1e6
        finally:
            tracemalloc.stop()

    @settings(max_examples=args.inputs, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(case=cases())
    def one(case):
        stats["inputs"] += 1
        signal.setitimer(signal.ITIMER_REAL, args.timeout)
        try:
            result = run_case(case, work)
            problems, seconds = result.problems, result.seconds
            if result.cpu_seconds > stats["worst_cpu_seconds"]:
                stats["worst_cpu_seconds"], stats["worst_cpu_input"] = result.cpu_seconds, describe(case)[:400]
                save(case, "slowest", [f"{result.cpu_seconds:.3f} s CPU"])
            stats["rule_evaluation_errors"] += result.rule_errors
            code = str(result.exit_code)
        except Hang:
            problems, seconds, code = [f"no result after {args.timeout} s (a hang)"], args.timeout, "hang"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        stats["exit_codes"][code] = stats["exit_codes"].get(code, 0) + 1
        stats["by_command"][case.command] = stats["by_command"].get(case.command, 0) + 1
        if problems:
            stats["failures"] += 1
            failures.append(describe(case) + "\n  " + "\n  ".join(problems))
            save(case, f"failure-{stats['failures']}", problems)
        if seconds > stats["worst_seconds"]:
            stats["worst_seconds"], stats["worst_input"] = seconds, describe(case)[:400]
        slow.append((seconds, case))
        slow.sort(key=lambda x: -x[0])
        del slow[5:]
        if stats["inputs"] % args.memory_every == 0 and not problems:
            peak = peak_of(case)
            if peak > stats["worst_peak_mb"]:
                stats["worst_peak_mb"], stats["worst_peak_input"] = peak, describe(case)[:400]
        if stats["inputs"] % 250 == 0:
            print(f"  {stats['inputs']} inputs, {stats['failures']} failures, worst {stats['worst_seconds']:.2f} s"
                  f"{_rss_now()}", file=sys.stderr, flush=True)

    if args.seed is not None:
        one = seed(args.seed)(one)
    warm_up(work)  # first uses import modules and fill caches once per process: not the cost of an input
    start = time.perf_counter()
    one()
    for _seconds, case in slow:  # the slowest inputs are the likeliest memory hogs: measure them too
        peak = peak_of(case)
        if peak > stats["worst_peak_mb"]:
            stats["worst_peak_mb"], stats["worst_peak_input"] = peak, describe(case)[:400]
    stats["total_seconds"] = round(time.perf_counter() - start, 1)
    stats["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    stats["worst_seconds"] = round(stats["worst_seconds"], 3)
    stats["worst_cpu_seconds"] = round(stats["worst_cpu_seconds"], 3)
    stats["worst_peak_mb"] = round(stats["worst_peak_mb"], 1)
    stats["python"] = sys.version.split()[0]
    if args.json:
        print(json.dumps({**stats, "failure_reports": failures}, indent=2))
    else:
        commands = ", ".join(f"{k} {v}" for k, v in sorted(stats["by_command"].items()))
        print(f"inputs fuzzed: {stats['inputs']} ({commands}) in {stats['total_seconds']} s")
        print(f"failures: {stats['failures']}")
        print(f"worst time of one input: {stats['worst_seconds']} s wall, {stats['worst_cpu_seconds']} s CPU")
        print(f"worst peak memory of one input (tracemalloc): {stats['worst_peak_mb']} MB; "
              f"process peak RSS {stats['peak_rss_mb']} MB")
        print(f"exit codes: {dict(sorted(stats['exit_codes'].items()))}")
        print(f"rule evaluation errors reported as findings (hostile rule packs): {stats['rule_evaluation_errors']}")
        print(f"slowest input: {stats['worst_input']}")
        for report in failures[:20]:
            print("\nFAILURE\n" + report)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
