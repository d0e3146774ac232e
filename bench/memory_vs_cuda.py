#!/usr/bin/env python3
"""The memory estimate and the fake-tensor measurement against a real GPU's allocator (a script, not a test).

    python bench/memory_vs_cuda.py --cuda --out cuda.json      # on a host with a GPU: the real peaks
    python bench/memory_vs_cuda.py --cuda-results cuda.json    # here: the estimate and the fake measurement beside

``meshlint smoke --fake --memory`` measures a framework's own training step on fake tensors on CPU, made to count
what a GPU's caching allocator is asked for (meshlint/smoke/memtrack.py names each correction), and
``meshlint check`` estimates the same peak statically (meshlint/mesh/memory.py). Both claim the GPU's number; this
script checks the claim on a GPU. Each job is torchtitan v0.2.2's own model, parallelize_fn, loss and train.py's
step at one rank (one GPU: no FSDP, autocast to bf16 as torchtitan does then), run twice with real tensors under
nccl; the second step's ``torch.cuda.max_memory_allocated`` per phase (forward, the loss's backward, the layers'
backward, the optimizer) is the truth. The optimizer is AdamW's for-loop step, as the fake measurement runs it,
and once the fused step torchtitan would run. Then, on any machine, the same jobs' static estimate
(``check --world-size 1 --format json``: the allocated bytes, no allocator reserve nor CUDA context) and
fake-tensor measurement, with each one's error against the GPU. torchtitan 0.2.2 comes from
``.frameworks/torchtitan-0.2.2`` (or --torchtitan-root).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCHTITAN = ROOT / ".frameworks" / "torchtitan-0.2.2"
GIB = 2 ** 30


def _toml(name: str, flavor: str, batch: int, seq: int, ac: str, op: bool = False) -> str:
    text = (f'[model]\nname = "{name}"\nflavor = "{flavor}"\n[training]\nlocal_batch_size = {batch}\n'
            f'seq_len = {seq}\n[activation_checkpoint]\nmode = "{ac}"\n')
    return text + ('selective_ac_option = "op"\n' if op else "")


# (id, config text, fused optimizer): a real model at sizes one 80 GB GPU holds, each activation checkpointing mode
JOBS = [
    ("qwen3-1.7B-b2-s4096-selective-op", _toml("qwen3", "1.7B", 2, 4096, "selective", op=True), False),
    ("qwen3-1.7B-b2-s4096-full", _toml("qwen3", "1.7B", 2, 4096, "full"), False),
    ("qwen3-1.7B-b1-s4096-none", _toml("qwen3", "1.7B", 1, 4096, "none"), False),
    ("qwen3-1.7B-b2-s4096-selective-op-fused", _toml("qwen3", "1.7B", 2, 4096, "selective", op=True), True),
    ("qwen3-0.6B-b4-s4096-selective-op", _toml("qwen3", "0.6B", 4, 4096, "selective", op=True), False),
    ("llama3-debug-b8-s8192-none", _toml("llama3", "debugmodel", 8, 8192, "none"), False),
]


def _run_job(root: Path, path: Path, device: str, fused: bool) -> dict:
    job = {"path": str(path), "cli": [], "world": 1, "rank": 0, "device": device, "fused": fused}
    proc = subprocess.run([sys.executable, "-m", "meshlint.smoke.memory_torchtitan", str(root)], cwd=ROOT,
                          input=json.dumps(job), capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get(
                              "PYTHONPATH"))))})
    lines = proc.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"}


def _estimate(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", str(path), "--world-size", "1", "--dialect",
                           "torchtitan", "--format", "json", "--isolated"], cwd=ROOT, capture_output=True, text=True)
    memory = json.loads(proc.stdout)["files"][0].get("memory") or {}
    stage = next(iter(memory.get("stages") or []), {})
    return {"allocated_gib": stage.get("allocated_gib"), "peak_phase": memory.get("peak_phase")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda", action="store_true", help="measure each job on this host's GPU")
    parser.add_argument("--out", type=Path, help="with --cuda: write the measurements here (JSON)")
    parser.add_argument("--cuda-results", type=Path, help="the GPU's measurements (--cuda's --out) to compare with")
    parser.add_argument("--torchtitan-root", type=Path, default=TORCHTITAN)
    parser.add_argument("-k", dest="pattern", help="only the jobs whose id contains this")
    args = parser.parse_args()
    jobs = [j for j in JOBS if not args.pattern or args.pattern in j[0]]
    with tempfile.TemporaryDirectory(prefix="mlb-memcuda-") as tmp:
        paths = {}
        for job_id, text, _ in jobs:
            paths[job_id] = Path(tmp) / f"{job_id}.toml"
            paths[job_id].write_text(text)
        if args.cuda:
            import torch

            results = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "runs": {}}
            for job_id, _, fused in jobs:
                got = _run_job(args.torchtitan_root, paths[job_id], "cuda", fused)
                results["runs"][job_id] = got
                print(job_id, json.dumps({k: got.get(k) for k in ("stage", "peak_bytes", "peak_phase", "error")}),
                      flush=True)
            if args.out:
                args.out.write_text(json.dumps(results, indent=1) + "\n")
            return 0
        if not args.cuda_results:
            parser.error("give --cuda (on a GPU host) or --cuda-results FILE")
        cuda = json.loads(args.cuda_results.read_text())
        print(f"GPU: {cuda['gpu']}, torch {cuda['torch']} (the fake measurement and the estimate ran here)\n")
        print("| job | GPU peak (phase) | fake-tensor measurement | error | meshlint estimate (allocated) | error |")
        print("| --- | --- | --- | ---: | --- | ---: |")
        for job_id, _, fused in jobs:
            real = cuda["runs"].get(job_id) or {}
            if "peak_bytes" not in real:
                print(f"| {job_id} | not measured: {real.get('error', 'absent')[:120]} | | | | |")
                continue
            gpu = real["peak_bytes"] / GIB
            fake = _run_job(args.torchtitan_root, paths[job_id], "fake", False)
            est = _estimate(paths[job_id])
            fake_gib = fake.get("peak_bytes", 0) / GIB if "peak_bytes" in fake else None
            est_gib = est["allocated_gib"]

            def err(x):
                return "-" if x is None else f"{100 * (x - gpu) / gpu:+.1f} %"

            fake_text = "-" if fake_gib is None else f"{fake_gib:.2f} GiB ({fake['peak_phase']})"
            est_text = "-" if est_gib is None else f"{est_gib:.2f} GiB ({est['peak_phase']})"
            print(f"| {job_id} | {gpu:.2f} GiB ({real['peak_phase']}) | {fake_text} | {err(fake_gib)} | {est_text} | "
                  f"{err(est_gib)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
