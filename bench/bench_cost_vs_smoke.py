"""Check the cost model's communication terms against real CPU training steps run by ``meshlint smoke`` (a script).

For a few layouts at worlds of 2, 4 and 8 CPU ranks (gloo), it runs ``meshlint smoke CONFIG --world-size N``
as a subprocess, with a ``sitecustomize`` on ``PYTHONPATH`` that only this script's children see. In every
rank that hook

* gives the smoke's tiny decoder one fixed shape for every layout (``SHAPE``: the smoke normally sizes it
  per layout, which would make layouts incomparable), through ``meshlint.smoke.model.shape``;
* opens a window between the end of the step's build (``step._local_adamw`` returns) and the end of its
  forward + backward (``step._rescale`` is entered), after a barrier: the window is the training step
  without the smoke's gradient gathering and comparison;
* in the counting run (one per layout) records every collective issued in that window with a
  ``TorchDispatchMode`` (c10d and functional-collective ops, autograd backward included): op, group
  members, bytes, and the seconds spent in it (plus ``Work.wait``).

Each collective is converted to the bytes a rank sends under ring algorithms (all-reduce 2(n-1)/n S,
all-gather/reduce-scatter (n-1)/n S, all-to-all the bytes that leave the rank, send S) and attributed to a
parallelism by the mesh dims its group spans. ``meshlint.estimate.cost.Model`` prices the same layouts of the
same tiny model (exact parameter count and shapes, fp32, no recomputation) on a "cpu-gloo" cluster profile
whose link is fitted here (alpha, beta) from a gloo all-reduce sweep. Reported: bytes per kind measured vs
modelled, modelled communication time vs measured step time and vs measured in-collective time, and
Spearman's rho between them.

    python bench/bench_cost_vs_smoke.py [--worlds 2,4,8] [--repeats 0] [--json out.json]

Everything runs on this host: with more ranks than cores the CPU is oversubscribed and times include
waiting for a core; bytes and call counts do not depend on that.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# One tiny-decoder shape for every layout (divisible by tp, ep, cp up to 8): fp32, ~4.6 M parameters.
SHAPE = {"vocab": 512, "dim": 256, "n_heads": 16, "n_kv_heads": 8, "head_dim": 16, "hidden": 1024,
         "n_layers": 4, "seq_len": 256, "moe_experts": 8, "top_k": 2, "expert_hidden": 512}

DENSE = """# meshlint: gpus_per_node={world}
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 4
seq_len = 2048
[parallelism]
{degrees}
pipeline_parallel_schedule = "1F1B"
pipeline_parallel_microbatch_size = 1
"""
MOE = """# meshlint: gpus_per_node={world}
[model]
name = "qwen3"
flavor = "debugmodel_moe"
[training]
local_batch_size = 4
seq_len = 512
[parallelism]
{degrees}
expert_tensor_parallel_degree = 1
pipeline_parallel_schedule = "1F1B"
pipeline_parallel_microbatch_size = 1
"""
KEYS = {"pp": "pipeline_parallel_degree", "dp_replicate": "data_parallel_replicate_degree",
        "dp_shard": "data_parallel_shard_degree", "cp": "context_parallel_degree",
        "tp": "tensor_parallel_degree", "ep": "expert_parallel_degree"}
ORDER = ("pp", "dp_replicate", "dp_shard", "cp", "tp")   # torchtitan's world mesh, tp innermost

LAYOUTS = {
    2: [("dense", {"dp_shard": 2}), ("dense", {"tp": 2}), ("dense", {"pp": 2}), ("dense", {"cp": 2}),
        ("dense", {"dp_replicate": 2})],
    4: [("dense", {"dp_shard": 4}), ("dense", {"tp": 4}), ("dense", {"cp": 4}), ("dense", {"pp": 4}),
        ("dense", {"tp": 2, "dp_shard": 2}), ("dense", {"pp": 2, "dp_shard": 2}),
        ("dense", {"cp": 2, "dp_shard": 2}), ("dense", {"tp": 2, "cp": 2}), ("dense", {"pp": 2, "tp": 2}),
        ("dense", {"dp_replicate": 2, "dp_shard": 2}),
        ("moe", {"dp_shard": 4}), ("moe", {"dp_shard": 4, "ep": 2}), ("moe", {"dp_shard": 4, "ep": 4})],
    8: [("dense", {"dp_shard": 8}), ("dense", {"tp": 2, "dp_shard": 4}), ("dense", {"pp": 2, "dp_shard": 4}),
        ("dense", {"cp": 2, "dp_shard": 4})],
}

# ----------------------------------------------------------------------------- the hook in every rank

HOOK = r'''
"""meshlint bench_cost_vs_smoke hook (only on this bench's children's PYTHONPATH)."""
import importlib.abc, importlib.util, json, os, sys, time

_OUT = os.environ.get("MLBENCH_OUT")


def _install():
    state = {"t0": None, "records": [], "mode": None, "count": os.environ.get("MLBENCH_COUNT") == "1"}
    shape = json.loads(os.environ["MLBENCH_SHAPE"])

    def patch_model(mod):
        orig = mod.shape

        def shape_fixed(degrees, stages, moe):
            c = orig(degrees, stages, moe)
            experts = shape["moe_experts"] if c.n_experts else 0
            return c._replace(vocab=shape["vocab"], dim=shape["dim"], n_heads=shape["n_heads"],
                              n_kv_heads=shape["n_kv_heads"], head_dim=shape["head_dim"], hidden=shape["hidden"],
                              n_layers=max(shape["n_layers"], c.n_layers), n_experts=experts,
                              top_k=min(shape["top_k"], experts) if experts else 0,
                              expert_hidden=shape["expert_hidden"], seq_len=shape["seq_len"])
        mod.shape = shape_fixed

    def patch_step(mod):
        import torch
        import torch.distributed as dist
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.distributed import distributed_c10d as c10d

        names = {}

        PG = torch._C._distributed_c10d.ProcessGroup

        def ranks_of(pg=None, name=None):
            if pg is not None and not isinstance(pg, PG):
                pg = PG.unbox(pg)  # the op's argument is the TorchScript box of the group
            key = name or pg.group_name
            if key not in names:
                if pg is None:
                    pg = c10d._resolve_process_group(name)
                names[key] = tuple(dist.get_process_group_ranks(pg))
            return names[key]

        def nbytes(x):
            if isinstance(x, torch.Tensor):
                return x.numel() * x.element_size()
            if isinstance(x, (list, tuple)):
                return sum(nbytes(y) for y in x)
            return 0

        class Count(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                ns = func.namespace
                if ns not in ("c10d", "_c10d_functional", "_c10d_functional_autograd"):
                    return func(*args, **kwargs)
                t = time.perf_counter()
                out = func(*args, **kwargs)
                dt = time.perf_counter() - t
                a = dict(zip([x.name for x in func._schema.arguments], args))
                a.update(kwargs)
                op = func._schema.name.split("::")[1]
                if op == "wait_tensor":
                    state["records"].append({"op": op, "s": dt})
                    return out
                group = ranks_of(pg=a["process_group"]) if "process_group" in a else (
                    ranks_of(name=a["group_name"]) if "group_name" in a else None)
                rec = {"op": op, "ns": ns, "group": group, "s": dt,
                       "in": nbytes(a.get("input", a.get("inputs", a.get("input_tensor", a.get("tensors",
                             a.get("input_tensors", a.get("tensor"))))))),
                       "out": nbytes(a.get("output", a.get("outputs", a.get("output_tensor",
                              a.get("output_tensors"))))) if not ns.startswith("_c10d_functional") else nbytes(out)}
                for k in ("output_split_sizes", "input_split_sizes", "dst", "src", "group_size"):
                    if k in a and a[k] is not None:
                        rec[k] = list(a[k]) if isinstance(a[k], (list, tuple)) else a[k]
                state["records"].append(rec)
                return out

        Work = torch._C._distributed_c10d.Work
        orig_wait = Work.wait

        def wait(self, *args, **kwargs):
            if state["mode"] is None:
                return orig_wait(self, *args, **kwargs)
            t = time.perf_counter()
            try:
                return orig_wait(self, *args, **kwargs)
            finally:
                state["records"].append({"op": "Work.wait", "s": time.perf_counter() - t})

        if state["count"]:
            Work.wait = wait
        orig_adamw, orig_rescale = mod._local_adamw, mod._rescale

        def local_adamw(parts):
            result = orig_adamw(parts)
            dist.barrier()
            state["t0"] = time.perf_counter()
            if state["count"]:
                state["mode"] = Count()
                state["mode"].__enter__()
            return result

        def rescale(parts, sabotage):
            t1 = time.perf_counter()
            if state["mode"] is not None:
                state["mode"].__exit__(None, None, None)
                state["mode"] = None
            if state["t0"] is not None:
                rank = dist.get_rank()
                with open(os.path.join(_OUT, f"rank{rank}.json"), "w") as f:
                    json.dump({"rank": rank, "window_s": t1 - state["t0"], "records": state["records"]}, f)
                state["t0"] = None
            return orig_rescale(parts, sabotage)

        mod._local_adamw, mod._rescale = local_adamw, rescale

    patches = {"meshlint.smoke.model": patch_model, "meshlint.smoke.step": patch_step}

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in patches:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            loader, patch = spec.loader, patches[name]
            original = loader.exec_module

            def exec_module(module):
                original(module)
                patch(module)
            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


if _OUT:
    _install()
'''

# ----------------------------------------------------------------------------- gloo microbenchmark


def _mb_worker(rank: int, world: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rows = []
    for size in (4, 1 << 10, 1 << 14, 1 << 17, 1 << 20, 1 << 22, 1 << 24):
        x = torch.ones(size // 4)
        reps = 20 if size <= 1 << 17 else 6
        for _ in range(2):
            dist.all_reduce(x)
        times = []
        for _ in range(reps):
            dist.barrier()
            t = time.perf_counter()
            dist.all_reduce(x)
            times.append(time.perf_counter() - t)
        t = torch.tensor([statistics.median(times)])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        rows.append((size, float(t)))
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def microbench(world: int) -> dict:
    """Median gloo all_reduce time per message size on ``world`` CPU processes, and the alpha-beta fit
    t = 2(n-1)·alpha + 2(n-1)/n · S / beta (least squares, relative error)."""
    out = tempfile.mktemp(suffix=".json")
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_cost_vs_smoke as b, "
            f"torch.multiprocessing as mp; mp.spawn(b._mb_worker, args=({world}, {29500 + 7 * world}, {out!r}), "
            f"nprocs={world})")
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
                   capture_output=True, timeout=600)
    rows = json.load(open(out))
    os.unlink(out)
    n = world
    # weighted least squares on t/t (every size counts alike): minimize sum ((a·x1 + b·x2 - t)/t)^2
    x1 = [2 * (n - 1) for _ in rows]
    x2 = [2 * (n - 1) / n * s for s, _ in rows]
    ts = [t for _, t in rows]
    s11 = sum((a / t) ** 2 for a, t in zip(x1, ts))
    s22 = sum((b / t) ** 2 for b, t in zip(x2, ts))
    s12 = sum(a * b / t ** 2 for a, b, t in zip(x1, x2, ts))
    r1 = sum(a / t for a, t in zip(x1, ts))
    r2 = sum(b / t for b, t in zip(x2, ts))
    det = s11 * s22 - s12 * s12
    alpha = (r1 * s22 - r2 * s12) / det
    inv_beta = (s11 * r2 - s12 * r1) / det
    return {"world": world, "sizes": rows, "alpha_us": alpha * 1e6, "beta_gbps": 1 / inv_beta / 1e9}


# ----------------------------------------------------------------------------- the model's view


def tiny_shape(kind: str, degrees: dict) -> dict:
    """The shape the hooked smoke trains for this layout (model.shape with SHAPE laid over it)."""
    pp = degrees.get("pp", 1)
    stages = pp  # 1F1B: one stage per rank
    return dict(SHAPE, n_layers=max(SHAPE["n_layers"], stages, 2),
                n_experts=SHAPE["moe_experts"] if kind == "moe" or degrees.get("ep", 1) > 1 else 0,
                microbatches=max(stages, 2) if pp > 1 else 1)


def workload(kind: str, degrees: dict):
    from meshlint.estimate.cost import Workload

    c = tiny_shape(kind, degrees)
    d, L, V, E = c["dim"], c["n_layers"], c["vocab"], c["n_experts"]
    hq, kq = c["n_heads"] * c["head_dim"], c["n_kv_heads"] * c["head_dim"]
    attn = d * hq + 2 * d * kq + hq * d
    expert = 3 * d * c["expert_hidden"]
    ffn = (d * E + E * expert) if E else 3 * d * c["hidden"]
    params = V * d + L * (attn + ffn + 2 * d) + d + d * V
    expert_params = L * E * expert if E else 0
    active = params - expert_params + (L * c["top_k"] * expert if E else 0)
    seq, m = c["seq_len"], c["microbatches"]
    return Workload("torchtitan@0.2.x", params, expert_params, active, L, L if E else 0, d, hq, kq,
                    c["top_k"] if E else 0, V, seq, ((seq, m), (seq, 1)), "1F1B", 16, 4, "none", "bench")


def predict(kind: str, degrees: dict, world: int, link) -> dict:
    """The model's communication per kind on the cpu-gloo profile: seconds, ring bytes per rank, alpha steps."""
    from meshlint.estimate.cost import Cluster, Link, Model

    full = {k: degrees.get(k, 1) for k in ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep")}
    full["etp"] = 1
    work = workload(kind, degrees)
    out = {}
    for what, lk in (("s", Link(link["beta_gbps"], link["alpha_us"])), ("bytes", Link(1.0, 0.0)),
                     ("steps", Link(1e30, 1.0))):
        prof = Cluster("cpu-gloo", "loopback", world, 1.0, 1e6, lk, lk, 1.0, "none", 0.5)
        est = Model(work, prof, world, world, "block", 1e6).estimate(full)
        scale = {"s": 1.0, "bytes": 1e9, "steps": 1e6}[what]
        out[what] = {k: v * scale for k, v in est.raw.items()}
    return out


# ----------------------------------------------------------------------------- measuring


def coords(rank: int, degrees: dict) -> dict:
    out = {}
    for dim in reversed(ORDER):
        size = degrees.get(dim, 1)
        out[dim] = rank % size
        rank //= size
    return out


def kind_of(rec: dict, degrees: dict) -> str:
    if rec["op"] in ("alltoall_base_", "all_to_all_single", "alltoall_"):
        return "ep"
    if rec["op"] in ("send", "recv_", "recv_any_source_"):
        return "pp"
    group = rec.get("group") or ()
    spans = {dim for dim in ORDER if len({coords(r, degrees)[dim] for r in group}) > 1}
    if spans == {"tp"}:
        return "tp"
    if spans == {"cp"} and rec["op"] in ("all_gather_into_tensor", "reduce_scatter_tensor"):
        return "cp"  # the functional (autograd) gather of K/V and its backward
    if spans and spans <= {"dp_shard", "cp"}:
        return "fsdp"
    if spans == {"dp_replicate"}:
        return "dp_replicate"
    if spans == {"pp"}:
        return "pp"
    return "+".join(sorted(spans)) or "self"


def ring_bytes(rec: dict) -> tuple:
    """(bytes this rank sends under ring algorithms, alpha steps) for one recorded collective."""
    op, n = rec["op"], len(rec.get("group") or ()) or 1
    if op in ("send",):
        return rec["in"], 1
    if op in ("recv_", "recv_any_source_", "barrier"):
        return 0, 0
    if n <= 1:
        return 0, 0
    if op in ("allreduce_", "all_reduce"):
        return 2 * (n - 1) / n * rec["in"], 2 * (n - 1)
    if op in ("_allgather_base_", "allgather_into_tensor_coalesced_", "allgather_", "all_gather_into_tensor"):
        return (n - 1) / n * rec["out"], n - 1
    if op in ("_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_", "reduce_scatter_", "reduce_scatter_tensor"):
        return (n - 1) / n * rec["in"], n - 1
    if op in ("alltoall_base_", "all_to_all_single"):
        splits = rec.get("input_split_sizes")
        if splits and sum(splits):
            mine = rec["group"].index(rec["rank"])
            return rec["in"] * (1 - splits[mine] / sum(splits)), n - 1
        return (n - 1) / n * rec["in"], n - 1
    if op == "broadcast_":
        return (n - 1) / n * rec["in"], n - 1
    return 0, 0


def run_smoke(kind: str, degrees: dict, world: int, workdir: str, count: bool) -> dict:
    degree_lines = "\n".join(f"{KEYS[k]} = {v}" for k, v in degrees.items())
    cfg = os.path.join(workdir, f"{kind}_{world}_" + "_".join(f"{k}{v}" for k, v in degrees.items()) + ".toml")
    with open(cfg, "w") as f:
        f.write((MOE if kind == "moe" else DENSE).format(world=world, degrees=degree_lines))
    out = tempfile.mkdtemp(dir=workdir)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(workdir, "hook"), str(ROOT)]),
               MLBENCH_OUT=out, MLBENCH_SHAPE=json.dumps(SHAPE), MLBENCH_COUNT="1" if count else "0")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "meshlint", "smoke", cfg, "--world-size", str(world), "--device",
                           "cpu", "--isolated", "--format", "json", "--timeout", "300"],
                          env=env, capture_output=True, text=True, timeout=400)
    wall = time.perf_counter() - start
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {"ok": False, "failures": [proc.stdout[-500:], proc.stderr[-1500:]]}
    ranks = []
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as f:
            ranks.append(json.load(f))
    step = report.get("step") or {}
    return {"ok": bool(report.get("ok")) and len(ranks) == world, "wall_s": wall, "ranks": ranks,
            "step_seconds": step.get("seconds"), "failures": report.get("failures"),
            "parallelisms": step.get("parallelisms"), "model": step.get("model")}


def summarize(kind: str, degrees: dict, runs: list, counted: dict) -> dict:
    windows = [max(r["window_s"] for r in run["ranks"]) for run in runs]
    per_kind_bytes: dict = {}
    per_kind_steps: dict = {}
    per_kind_calls: dict = {}
    in_coll = []
    for r in counted["ranks"]:
        spent = 0.0
        for rec in r["records"]:
            spent += rec["s"]
            if "group" not in rec:
                continue
            rec["rank"] = r["rank"]
            k = kind_of(rec, degrees)
            b, s = ring_bytes(rec)
            per_kind_bytes[k] = per_kind_bytes.get(k, 0.0) + b
            per_kind_steps[k] = per_kind_steps.get(k, 0) + s
            per_kind_calls[k] = per_kind_calls.get(k, 0) + (1 if b or s else 0)
        in_coll.append(spent)
    n = len(counted["ranks"])
    return {"kind": kind, "degrees": degrees, "window_s": windows, "window_median_s": statistics.median(windows),
            "counted_window_s": max(r["window_s"] for r in counted["ranks"]),
            "in_collectives_s": max(in_coll) if in_coll else 0.0,
            "bytes": {k: v / n for k, v in per_kind_bytes.items()},
            "steps": {k: v / n for k, v in per_kind_steps.items()},
            "calls": {k: v / n for k, v in per_kind_calls.items()}}


def spearman(a: list, b: list) -> float | None:
    def ranks(x):
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        i = 0
        while i < len(x):
            j = i
            while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den if den else None


def label(kind: str, degrees: dict) -> str:
    return ("moe " if kind == "moe" else "") + " x ".join(f"{k}={v}" for k, v in degrees.items())


def analyse(world: int, link: dict, rows: list) -> dict:
    """Predictions for the measured rows (recomputed, so ``--reanalyse`` sees the current cost.py),
    the markdown table, and Spearman's rho."""
    good = [r for r in rows if "failed" not in r]
    for r in good:
        r["predicted"] = predict(r["kind"], r["degrees"], world, link)
        r["measured_priced_s"] = (sum(r["bytes"].values()) / (link["beta_gbps"] * 1e9)
                                  + sum(r["steps"].values()) * link["alpha_us"] * 1e-6)
    mb = lambda x: f"{x / 1e6:.2f}"  # noqa: E731
    print(f"\n### world {world} (gloo all_reduce fit: alpha {link['alpha_us']:.0f} us, "
          f"beta {link['beta_gbps']:.3f} GB/s)\n")
    print("| layout | measured MB/rank (by kind) | model MB/rank | measured / model | measured collectives "
          "priced, ms | model comm, ms | in collectives, ms | step, ms |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if "failed" in r:
            print(f"| {label(r['kind'], r['degrees'])} | smoke failed | | | | | | |")
            continue
        meas = {k: v for k, v in r["bytes"].items() if v}
        pred = {k: v for k, v in r["predicted"]["bytes"].items() if v}
        tm, tp_ = sum(meas.values()), sum(pred.values())
        print(f"| {label(r['kind'], r['degrees'])} | " + ", ".join(f"{k} {mb(v)}" for k, v in sorted(meas.items()))
              + " | " + ", ".join(f"{k} {mb(v)}" for k, v in sorted(pred.items()))
              + f" | {tm / tp_:.2f} | {r['measured_priced_s'] * 1e3:.0f} | "
              f"{sum(r['predicted']['s'].values()) * 1e3:.0f} | {r['in_collectives_s'] * 1e3:.0f} | "
              f"{r['window_median_s'] * 1e3:.0f} |" if tp_ else " | - | | | | |")
    corr = {}
    if len(good) >= 3:
        pred_s = [sum(r["predicted"]["s"].values()) for r in good]
        step = [r["window_median_s"] for r in good]
        corr["model bytes vs measured bytes"] = spearman([sum(r["predicted"]["bytes"].values()) for r in good],
                                                         [sum(r["bytes"].values()) for r in good])
        corr["model comm time vs measured collectives priced alike"] = spearman(
            pred_s, [r["measured_priced_s"] for r in good])
        corr["model comm time vs time in collectives"] = spearman(pred_s, [r["in_collectives_s"] for r in good])
        corr["model comm time vs step time"] = spearman(pred_s, step)
        corr["measured collectives priced vs step time"] = spearman([r["measured_priced_s"] for r in good], step)
    print("\nSpearman (n = %d): " % len(good) + "; ".join(
        f"{k} {v:.2f}" if v is not None else f"{k} n/a" for k, v in corr.items()))
    return corr


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", default="2,4,8")
    ap.add_argument("--repeats", type=int, default=0,
                    help="timed runs per layout besides the counting run (whose window is the step time when 0)")
    ap.add_argument("--only", default=None, help="run only these layouts (labels, comma-separated)")
    ap.add_argument("--json", default=None, help="write every number here")
    ap.add_argument("--reanalyse", nargs="+", default=None, metavar="JSON",
                    help="recompute the model side of saved runs (several: merged, a layout's later success wins)")
    args = ap.parse_args(argv)
    if args.reanalyse:
        saved = {"machine": [], "worlds": {}}
        for path in args.reanalyse:
            with open(path) as f:
                run = json.load(f)
            saved["machine"].append(run["machine"])
            for world, data in run["worlds"].items():
                into = saved["worlds"].setdefault(world, {"link": data["link"], "layouts": []})
                for row in data["layouts"]:
                    same = [i for i, r in enumerate(into["layouts"])
                            if label(r["kind"], r["degrees"]) == label(row["kind"], row["degrees"])]
                    if not same:
                        into["layouts"].append(row)
                    elif "failed" in into["layouts"][same[0]] and "failed" not in row:
                        into["layouts"][same[0]] = row
        print(f"machine: {saved['machine']}")
        for world, data in sorted(saved["worlds"].items(), key=lambda kv: int(kv[0])):
            data["spearman"] = analyse(int(world), data["link"], data["layouts"])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(saved, f, indent=1)
        return 0
    worlds = [int(w) for w in args.worlds.split(",")]
    workdir = tempfile.mkdtemp(prefix="mlbench-cost-")
    os.makedirs(os.path.join(workdir, "hook"))
    with open(os.path.join(workdir, "hook", "sitecustomize.py"), "w") as f:
        f.write(HOOK)
    results = {"machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg(),
                           "command": " ".join(["python", "bench/bench_cost_vs_smoke.py"] + list(argv or sys.argv[1:]))},
               "worlds": {}}
    for world in worlds:
        link = microbench(world)
        print(f"\n== world {world}: gloo all_reduce fit alpha {link['alpha_us']:.0f} us, "
              f"beta {link['beta_gbps']:.3f} GB/s (sizes: " + ", ".join(
                  f"{s}B {t * 1e3:.2f}ms" for s, t in link["sizes"]) + ")", flush=True)
        rows = []
        for kind, degrees in LAYOUTS[world]:
            name = label(kind, degrees)
            if args.only and name not in args.only.split(","):
                continue
            counted = run_smoke(kind, degrees, world, workdir, count=True)
            if not counted["ok"]:
                print(f"{name}: smoke FAILED {json.dumps(counted['failures'])[:600]}", flush=True)
                rows.append({"kind": kind, "degrees": degrees, "failed": counted["failures"]})
                continue
            timed = [run_smoke(kind, degrees, world, workdir, count=False) for _ in range(args.repeats)]
            timed = [t for t in timed if t["ok"]] or [counted]
            row = summarize(kind, degrees, timed, counted)
            row["smoke_model"] = counted["model"]
            rows.append(row)
            print(f"{name:32s} step {row['window_median_s'] * 1e3:7.1f} ms (counted {row['counted_window_s'] * 1e3:6.1f}"
                  f", in coll {row['in_collectives_s'] * 1e3:6.1f}) | bytes measured "
                  + ", ".join(f"{k} {v / 1e6:.2f}MB" for k, v in sorted(row["bytes"].items())), flush=True)
        corr = analyse(world, link, rows)
        results["worlds"][world] = {"link": link, "layouts": rows, "spearman": corr}
        if args.json:  # after every world, so an interrupted run keeps what it measured
            results["machine"]["load_after"] = os.getloadavg()
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
