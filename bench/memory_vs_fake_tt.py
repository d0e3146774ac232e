"""The whole-peak memory model against a fake-tensor measurement of torchtitan v0.2's own training step.

Each layout is a small v0.2 TOML (its model flavor, batch, sequence, activation checkpointing and parallelism;
torchtitan's defaults for the rest: fp32 master weights, bf16 FSDP2 compute, fused AdamW). ``--measure`` runs
tests/memory_fake_worker.py on it (torchtitan's own model, parallelize_fn, loss and train step under
FakeTensorMode, the fake process group and FSDPMemTracker: one rank's steady-state peak, by category and phase)
and saves the numbers in bench/memory_fake_torchtitan.json with the torch version, the tree's commit and the
command, so tests compare the formula with them without torch. Without ``--measure`` it prints, per layout, the
measured peak against meshlint.mesh.memory's allocated bytes (the fake run has no allocator reserve or CUDA
context), and per category. Needs ../shared/frameworks/torchtitan-v0.2-9810191bb-parent and torch to measure;
an 8B layout is a minute or two of one CPU core.

    PYTHONPATH=. python bench/memory_vs_fake_tt.py [--measure [--only ID,...]] [--json | --markdown]
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
TREE = ROOT.parent / "shared" / "frameworks" / "torchtitan-v0.2-9810191bb-parent"
TREE_COMMIT = "238fa9953e4aec2a62582121564273d7cbb1e9f1"  # 9810191bb^ in pytorch/torchtitan
SAVED = ROOT / "bench" / "memory_fake_torchtitan.json"
WORKER = ROOT / "tests" / "memory_fake_worker.py"
GIB = 2 ** 30
CHUNK = 3  # layouts per worker process

# (id, flavor, world, dp_replicate, tp, mode, selective option, local batch, seq, loss parallel)
LAYOUTS = [
    ("debug-fsdp8-none", "debugmodel", 8, 1, 1, "none", "op", 8, 2048, True),
    ("debug-fsdp8-op", "debugmodel", 8, 1, 1, "selective", "op", 8, 2048, True),
    ("debug-fsdp8-layer2", "debugmodel", 8, 1, 1, "selective", "2", 8, 2048, True),
    ("debug-fsdp8-full", "debugmodel", 8, 1, 1, "full", "op", 8, 2048, True),
    ("debug-fsdp8-op-b2s8192", "debugmodel", 8, 1, 1, "selective", "op", 2, 8192, True),
    ("debug-hsdp2x4-op", "debugmodel", 8, 2, 1, "selective", "op", 8, 2048, True),
    ("debug-tp2-none", "debugmodel", 8, 1, 2, "none", "op", 8, 2048, True),
    ("debug-tp2-op", "debugmodel", 8, 1, 2, "selective", "op", 8, 2048, True),
    ("debug-tp2-full", "debugmodel", 8, 1, 2, "full", "op", 8, 2048, True),
    ("debug-tp2-op-noloss", "debugmodel", 8, 1, 2, "selective", "op", 8, 2048, False),
    ("debug-tp4-op", "debugmodel", 8, 1, 4, "selective", "op", 8, 2048, True),
    ("debug-tp4-layer2", "debugmodel", 8, 1, 4, "selective", "2", 4, 4096, True),
    ("debug-single-op", "debugmodel", 1, 1, 1, "selective", "op", 8, 2048, True),
    ("debug-tp2-nofsdp-full", "debugmodel", 2, 1, 2, "full", "op", 8, 2048, True),
    ("8B-fsdp8-op", "8B", 8, 1, 1, "selective", "op", 1, 8192, True),
    ("8B-fsdp8-full", "8B", 8, 1, 1, "full", "op", 1, 8192, True),
    ("8B-tp2-op", "8B", 8, 1, 2, "selective", "op", 1, 8192, True),
    ("8B-fsdp8-none", "8B", 8, 1, 1, "none", "op", 1, 8192, True),
    ("8B-tp4-op", "8B", 8, 1, 4, "selective", "op", 1, 8192, True),
    ("8B-tp2-op-noloss", "8B", 8, 1, 2, "selective", "op", 1, 8192, False),
    ("8B-fsdp8-layer2", "8B", 8, 1, 1, "selective", "2", 1, 8192, True),
    ("8B-tp2-full", "8B", 8, 1, 2, "full", "op", 1, 8192, True),
    ("8B-fsdp8-op-b2s4096", "8B", 8, 1, 1, "selective", "op", 2, 4096, True),
    ("8B-tp2-none-b2s2048", "8B", 8, 1, 2, "none", "op", 2, 2048, True),
    ("8B-fsdp32-full-b2s2048", "8B", 32, 1, 1, "full", "op", 2, 2048, True),
    ("70B-tp8-fsdp4-full", "70B", 32, 1, 8, "full", "op", 1, 8192, True),
    ("70B-tp8-fsdp4-op", "70B", 32, 1, 8, "selective", "op", 1, 8192, True),
]


def toml_of(layout) -> str:
    """The layout as a torchtitan v0.2 TOML (the keys it sets; torchtitan's defaults for the rest)."""
    _, flavor, world, dr, tp, mode, option, batch, seq, loss_parallel = layout
    return (f"[model]\nname = \"llama3\"\nflavor = \"{flavor}\"\n[training]\nlocal_batch_size = {batch}\n"
            f"seq_len = {seq}\n[activation_checkpoint]\nmode = \"{mode}\"\nselective_ac_option = \"{option}\"\n"
            f"[parallelism]\ndata_parallel_replicate_degree = {dr}\n"
            f"data_parallel_shard_degree = {world // (dr * tp)}\ntensor_parallel_degree = {tp}\n"
            f"disable_loss_parallel = {str(not loss_parallel).lower()}\n")


def degrees_of(layout) -> dict:
    _, _, world, dr, tp, *_ = layout
    return {"dp_replicate": dr, "dp_shard": world // (dr * tp), "tp": tp}


def run_worker(layouts, tmp: Path, python: str = sys.executable) -> dict:
    """Measure ``layouts`` in one worker process (torch and torchtitan imported once): {id: worker result}."""
    jobs = []
    for layout in layouts:
        path = tmp / f"{layout[0]}.toml"
        path.write_text(toml_of(layout))
        jobs.append({"id": layout[0], "path": str(path), "cli": [], "world": layout[2]})
    proc = subprocess.run([python, str(WORKER), str(TREE)], input=json.dumps(jobs), capture_output=True,
                          text=True, cwd=tmp, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=3600)
    last = proc.stdout.strip().splitlines()[-1:] or [""]
    if proc.returncode or not last[0].startswith("{"):
        raise SystemExit(f"the worker failed ({proc.returncode}): {last[0]}\n{proc.stderr[-3000:]}")
    return json.loads(last[0])


def measure(only: set | None) -> None:
    import torch

    saved = json.loads(SAVED.read_text()) if SAVED.exists() else {"runs": {}}
    chosen = [lay for lay in LAYOUTS if not only or lay[0] in only]
    with tempfile.TemporaryDirectory() as d:
        # a few layouts per worker (torch and torchtitan imported once for them), saved as each worker ends
        groups = [[lay for lay in chosen if lay[1] == f] for f in dict.fromkeys(lay[1] for lay in chosen)]
        for group in [g[i:i + CHUNK] for g in groups for i in range(0, len(g), CHUNK)]:
            flavor = group[0][1]
            results = run_worker(group, Path(d))
            for lay in group:
                saved["runs"][lay[0]] = {"world": lay[2], "degrees": degrees_of(lay), "config": toml_of(lay),
                                         "result": results[lay[0]]}
            saved.update(about=__doc__.splitlines()[0], torch=torch.__version__,
                         torchtitan_tree=TREE.name, torchtitan_commit=TREE_COMMIT,
                         worker="tests/memory_fake_worker.py",
                         command="PYTHONPATH=. python bench/memory_vs_fake_tt.py --measure")
            saved["runs"] = dict(sorted(saved["runs"].items(), key=lambda kv: _order(kv[0])))
            SAVED.write_text(json.dumps(saved, indent=1) + "\n")
            print(f"{flavor}: {len(group)} layouts measured", file=sys.stderr)


def _order(run_id: str) -> int:
    return next((i for i, lay in enumerate(LAYOUTS) if lay[0] == run_id), len(LAYOUTS))


# the tracker's categories, grouped as the model's terms can be held against them
GROUPS = {
    # FSDPMemTracker's names, and MemTracker's where no data-parallel dim wraps the model in FSDP2
    "states": (("Sharded Param", "OptState", "Sharded Grad", "Parameter", "Optstate", "Gradient"),
               ("params", "optimizer", "grads", "optimizer_step")),
    "gathered": (("Unsharded Param", "All Gather"), ("fsdp_unsharded",)),
    "grad buffers": (("Unsharded Grad", "Reduce Scatter"), ("unsharded_grads", "reduce_buffers")),
    "activations+temp": (("Activation", "Temp", "Inputs", "Buffer"),
                         ("activations", "recompute", "logits_loss", "moe_dispatch")),
}


def predicted(run: dict, tmp: Path):
    """meshlint.mesh.memory's peak for a saved run's config (no torch): its Peak."""
    sys.path.insert(0, str(ROOT))
    from meshlint.engine.check import analyse
    from meshlint.cli.settings import CliSettings, Planner
    from meshlint.estimate import cost

    path = tmp / "config.toml"
    path.write_text(run["config"])
    world = run["world"]
    options = Planner(CliSettings(world_size=world, gpus_per_node=8, isolated=True)).options_for(str(path))
    report = analyse(str(path), options)
    profile = cost.cluster({}, 8)
    model = cost.Model(cost.workload(report, options, profile), profile, world, 8, "block", 80)
    return model.memory_peak(run["degrees"])


def compare(saved: dict | None = None) -> list:
    """One row per saved run: measured and predicted peak (allocated bytes), error, phase, per group."""
    saved = saved or json.loads(SAVED.read_text())
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for run_id, run in saved["runs"].items():
            result = run["result"]
            if "peak_bytes" not in result:
                rows.append({"run": run_id, "error": result.get("error", "no result")})
                continue
            peak = predicted(run, Path(d))
            measured, model = result["peak_bytes"], peak.peak.allocated
            groups = {name: (sum(result["by_category"].get(c, 0) for c in cats) / GIB,
                             sum(peak.peak.terms.get(t, 0.0) for t in terms) / GIB)
                      for name, (cats, terms) in GROUPS.items()}
            rows.append({"run": run_id, "measured_gib": measured / GIB, "predicted_gib": model / GIB,
                         "error_pct": (model - measured) / measured * 100, "measured_phase": result["peak_phase"],
                         "predicted_phase": peak.peak.phase, "groups": groups,
                         "phases_measured": {k: v["Total"] / GIB for k, v in result["phases"].items()},
                         "phases_predicted": {k: v / GIB for k, v in (peak.peak.phases or {}).items()}})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", action="store_true", help="run the fake-tensor worker (needs torch)")
    parser.add_argument("--only", default="", help="layout ids, comma-separated")
    parser.add_argument("--json", action="store_true", help="the comparison as JSON")
    parser.add_argument("--markdown", action="store_true", help="the comparison as a markdown table")
    args = parser.parse_args()
    if args.measure:
        if not TREE.is_dir():
            raise SystemExit(f"{TREE} is not here")
        measure(set(filter(None, args.only.split(","))) or None)
        return
    rows = compare()
    if args.markdown:
        print("| layout | fake-tensor peak | model (allocated) | error | phase (fake / model) |")
        print("|---|---:|---:|---:|---|")
        for r in rows:
            if "error_pct" in r:
                print(f"| {r['run']} | {r['measured_gib']:.2f} | {r['predicted_gib']:.2f} | {r['error_pct']:+.1f} % "
                      f"| {r['measured_phase']} / {r['predicted_phase']} |")
        return
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'run':24} {'fake':>7} {'model':>7} {'error':>7}  {'phase (fake / model)':32} per group: fake/model GiB")
    for r in rows:
        if "error" in r:
            print(f"{r['run']:24} the fake run failed: {r['error']}")
            continue
        groups = "  ".join(f"{k} {m:.2f}/{p:.2f}" for k, (m, p) in r["groups"].items() if m or p)
        print(f"{r['run']:24} {r['measured_gib']:7.2f} {r['predicted_gib']:7.2f} {r['error_pct']:+6.1f}%  "
              f"{r['measured_phase'] + ' / ' + r['predicted_phase']:32} {groups}")
    errs = [abs(r["error_pct"]) for r in rows if "error_pct" in r]
    if errs:
        print(f"\nworst |error| {max(errs):.1f} %, mean {sum(errs) / len(errs):.1f} %, within 10 %: "
              f"{sum(e <= 10 for e in errs)}/{len(errs)}")


if __name__ == "__main__":
    main()
