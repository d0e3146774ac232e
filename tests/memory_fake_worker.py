"""Measure what one rank allocates in one training step of torchtitan v0.2's own model code at full size, on one
CPU, with meshlint.smoke.memory_torchtitan (the technique of ``meshlint smoke --memory --fake``: FakeTensorMode,
the fake process group, FSDPMemTracker and its corrections). Prints {job id: {peak_bytes, by category, optimizer,
stage, phases, peak_phase}} as JSON. Jobs (a JSON list on stdin): {id, path (a v0.2 TOML), cli (overrides), world}.

Run by tests/test_memory_measured.py and bench/memory_vs_fake_tt.py; it needs torch and the v0.2 tree."""

from __future__ import annotations

import json
import sys


def main(root: str) -> None:
    from meshlint.smoke import memory_torchtitan

    why = memory_torchtitan.prepare(root)
    if why is not None:
        print(f"SKIP: {why}")
        return
    print(json.dumps({job["id"]: memory_torchtitan.measure(job) for job in json.load(sys.stdin)}))


if __name__ == "__main__":
    main(sys.argv[1])
