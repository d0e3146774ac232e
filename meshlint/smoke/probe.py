"""Per-dim collective probe: all_reduce latency and bandwidth on each 1-D mesh's group. [torch]

On GPUs this shows whether tp really sits on NVLink (hundreds of GB/s) or
crosses the network; on CPU gloo it shows the loopback. Latency: the median
of 20 one-element all_reduces; bandwidth: 4 MiB all_reduces, reported as bus
bandwidth, 2·(n − 1)/n · bytes / time (what NCCL's tests call busbw).
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from meshlint.smoke import meshbuild, plan as smoke_plan

SMALL_ITERS = 20
BIG_ITERS = 5
BIG_BYTES = 4 << 20


def run(plan: dict, meshes: dict, rank: int, device: str, step=None) -> dict:
    out = {}
    for axis, spec in plan["axes"].items():
        if spec["size"] < 2 or smoke_plan.expected_group(plan, axis, rank) is None:
            continue
        group = meshbuild.axis_mesh(plan, meshes, axis).get_group()
        if meshbuild.group_backend(group) == "fake":
            continue
        if step:
            step(f"probe {axis}")
        n = spec["size"]
        small = torch.zeros(1, device=device)
        big = torch.zeros(BIG_BYTES // 4, device=device)
        dist.all_reduce(small, group=group)  # warm-up: connections, buffers
        lat = [_timed(small, group, device) for _ in range(SMALL_ITERS)]
        dist.all_reduce(big, group=group)
        bw = [_timed(big, group, device) for _ in range(BIG_ITERS)]
        seconds = statistics.median(bw)
        out[axis] = {"size": n, "latency_us": round(statistics.median(lat) * 1e6, 1),
                     "bus_bandwidth_gbps": round(2 * (n - 1) / n * BIG_BYTES / seconds / 1e9, 3)}
    return out


def _timed(t: torch.Tensor, group, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    dist.all_reduce(t, group=group)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start
