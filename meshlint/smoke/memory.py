"""``meshlint smoke CONFIG --memory --fake``: one rank's measured peak at the config's full scale, next to the estimate.

On CPU, with no GPU and no peer: the framework's own model at full size under torch's fake tensors, its
meshes on the fake process group at the config's whole world, one step under torch's memory trackers
(``memory_torchtitan``, ``memory_kempnerforge``), for each chosen rank; the measured peak is set beside meshlint's static estimate of
the same layout (``check``'s ``files[].memory``). What it measures is what the caching allocator is asked
for (no allocator reserve, no CUDA context): it is compared with the estimate's ``allocated_gib``, and a
measured peak over the GPU's memory is a failure. Where the measurement does not work yet it refuses with
exit code 3, saying why (``Unsupported``). No torch is imported here until the measurement runs.
"""

from __future__ import annotations

import importlib.util
import os
import time

from meshlint.errors import MeshlintError

GIB = 2 ** 30
UNSUPPORTED_EXIT = 3
_LABELS = {"Parameter": "parameters", "Gradient": "gradients", "Optstate": "optimizer states",
           "OptState": "optimizer states", "Activation": "activations", "Temp": "temporaries", "Buffer": "buffers",
           "Inputs": "inputs", "Other": "other", "Sharded Param": "sharded parameters",
           "Unsharded Param": "unsharded parameters", "Sharded Grad": "sharded gradients",
           "Unsharded Grad": "unsharded gradients", "All Gather": "all-gather buffers",
           "Reduce Scatter": "reduce-scatter buffers"}  # torch.distributed._tools' categories


class Unsupported(MeshlintError):
    """The measurement does not work for this config yet (exit 3)."""


class NoFramework(MeshlintError):
    """The framework's code is not here to build its model (a usage error: exit 2)."""


def refusal(report) -> str | None:
    """Why ``--memory`` cannot measure this config yet, or None."""
    framework = (getattr(report.spec, "framework", None) or {})
    version = framework.get("version")
    torchtitan = report.dialect == "torchtitan" and version == "0.2.x"
    if not (torchtitan or report.dialect == "kempnerforge"):
        what = f"{report.dialect} {version}" if version else report.dialect
        return (f"--memory measures torchtitan v0.2.x and KempnerForge TOML configs (their own model, parallelization "
                f"and train step run under fake tensors); this is {what}: not yet (torchtitan 0.3.0/main registries, "
                "Accelerate, Megatron-LM, native meshes)")
    if not str(report.path).endswith(".toml") or not os.path.isfile(report.path):
        return "--memory needs the TOML file itself (a launch line's overrides are not measured yet)"
    d = report.resolution.degrees or {}
    not_yet = [f"{name} {d.get(name)}" for name in ("pp", "ep", "cp") if (d.get(name) or 1) > 1]
    if not_yet:
        return (f"--memory does not measure {', '.join(not_yet)} yet: the step it runs is train.py's non-PP "
                "branch, and expert and context parallelism have not been run under the fake tensors and trackers "
                "yet; the static estimate (meshlint check --format json: files[].memory) covers them")
    if report.dialect == "kempnerforge" and (report.spec.values.get("model.num_experts") or 0) > 0:
        return ("--memory does not measure KempnerForge's MoE yet: its routing is data-dependent (tokens per expert), "
                "which fake tensors cannot decide; the static estimate covers it")
    return None


def framework_root(report, options, opts) -> str:
    """The tree whose framework builds the model: the --torchtitan-root / --kempnerforge-root given, else the
    installed package's folder."""
    package = "torchtitan" if report.dialect == "torchtitan" else "kempnerforge"
    root = (getattr(options, "torchtitan_root", None) if package == "torchtitan"
            else getattr(opts, "kempnerforge_root", None))
    if root:
        if not os.path.isfile(os.path.join(root, package, "__init__.py")):
            raise NoFramework(f"--{package}-root {root} holds no {package}/__init__.py")
        return os.path.abspath(root)
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        how = "pip install torchtitan==0.2.2, or pass --torchtitan-root DIR (a v0.2 checkout)" \
            if package == "torchtitan" else "pass --kempnerforge-root DIR (a KempnerForge checkout)"
        raise NoFramework(f"--memory builds {package}'s own model: {how}")
    return os.path.dirname(os.path.abspath(list(spec.submodule_search_locations)[0]))


def measure(report, plan: dict, options, opts, ranks: list) -> dict:
    """The report's ``memory`` section: each rank measured (a process each, at most ``--timeout`` s), beside the
    static estimate."""
    root = framework_root(report, options, opts)
    world = report.topology.world_size
    estimate = report.memory or None
    capacity = getattr(options, "gpu_memory_gib", None)
    if report.dialect == "torchtitan":
        module, job = "meshlint.smoke.memory_torchtitan", {}
        from meshlint.smoke.tt_import import framework_version

        name = f"torchtitan {framework_version(root) or '0.2.x'}"
    else:
        init = next((op for op in plan["recipe"] if op["op"] == "init"), None)
        module, job = "meshlint.smoke.memory_kempnerforge", {"dims": init["dims"] if init else [],
                                                             "sizes": init["sizes"] if init else []}
        name = "KempnerForge"
    given = getattr(options, "torchtitan_root", None) if report.dialect == "torchtitan" else opts.kempnerforge_root
    measured = []
    for rank in ranks:
        start = time.perf_counter()
        got = _measure_rank(module, root, dict(job, path=report.path, cli=[], world=world, rank=rank), opts.timeout)
        measured.append(_rank_entry(rank, got, estimate, capacity, time.perf_counter() - start))
    return {
        "mode": "fake", "framework": f"{name} ({given or root})",
        "measures": "bytes the caching allocator is asked for in one rank's second training step (no allocator "
                    "reserve, no CUDA context)",
        "optimizer": next((m["optimizer"] for m in measured if m.get("optimizer")), None),
        "capacity_gib": capacity, "ranks": measured,
        "estimate": None if estimate is None else {
            "allocated_gib": _allocated(estimate), "peak_gib": estimate.get("peak_gib"),
            "peak_phase": estimate.get("peak_phase"), "terms": estimate.get("terms")},
        "ok": all(m["ok"] for m in measured),
    }


def _measure_rank(module: str, root: str, job: dict, timeout: float) -> dict:
    """One rank in a process of its own (``module``'s main): its result, or why it could not run."""
    import json
    import subprocess
    import sys

    try:
        proc = subprocess.run([sys.executable, "-m", module, root], input=json.dumps(job),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"stage": "timeout", "error": f"not done after --timeout {timeout:g} s"}
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    try:
        got = json.loads(last)
    except ValueError:
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return {"stage": "start", "error": f"the measuring process failed ({proc.returncode}): {tail}"[:400]}
    if got.get("why"):
        raise NoFramework(got["why"])
    if got.get("unsupported"):
        raise Unsupported(f"{job['path']}: --memory {got['unsupported']}")
    return got


def _by_label(by_category: dict) -> dict:
    """The tracker's categories in words, GiB, largest first (two spellings of one category summed)."""
    out: dict = {}
    for key, value in by_category.items():
        label = _LABELS.get(key, key)
        out[label] = out.get(label, 0) + value
    return {k: round(v / GIB, 3) for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v}


def _allocated(estimate: dict) -> float | None:
    stages = estimate.get("stages") or []
    stage = next((s for s in stages if s.get("stage") == estimate.get("peak_stage")), stages[0] if stages else None)
    return stage.get("allocated_gib") if stage else None


def _rank_entry(rank: int, got: dict, estimate: dict | None, capacity, seconds: float) -> dict:
    entry = {"rank": rank, "seconds": round(seconds, 2), "stage": got.get("stage")}
    if "peak_bytes" not in got:
        return dict(entry, ok=False, error=got.get("error") or "no peak measured")
    peak = got["peak_bytes"] / GIB
    allocated = _allocated(estimate) if estimate else None
    entry.update(
        ok=capacity is None or peak <= capacity, peak_gib=round(peak, 3), peak_phase=got["peak_phase"],
        by_category=_by_label(got["by_category"]),
        phases={name: round(v["Total"] / GIB, 3) for name, v in got["phases"].items()},
        optimizer=got.get("optimizer"),
        estimate_error_pct=None if not allocated else round(100 * (allocated - peak) / peak, 1))
    return entry


def failures(section: dict) -> list:
    """The report's failures from the measurement: a rank that could not be measured, a peak over the GPU."""
    out = []
    for m in section["ranks"]:
        if m.get("error"):
            out.append({"phase": "memory", "check": "memory", "ranks": [m["rank"]],
                        "message": f"rank {m['rank']}: the memory measurement failed at {m['stage']}: {m['error']}"})
        elif not m["ok"]:
            out.append({"phase": "memory", "check": "memory", "ranks": [m["rank"]],
                        "message": f"rank {m['rank']}: the measured peak {m['peak_gib']:.1f} GiB ({m['peak_phase']}) "
                                   f"is over the GPU's {section['capacity_gib']:g} GiB before any allocator reserve "
                                   "or CUDA context: it cannot fit (set --gpu-memory-gib for another GPU)"})
    return out


def text_rows(section: dict) -> list:
    """(label, text) rows for the text report."""
    rows = [("memory", f"measured on fake tensors at full scale: {section['framework']}")]
    est = section.get("estimate")
    for m in section["ranks"]:
        if m.get("error"):
            rows.append(("memory", f"rank {m['rank']}: not measured ({m['stage']}): {m['error']}"))
            continue
        text = f"rank {m['rank']}: peak {m['peak_gib']:.2f} GiB allocated ({m['peak_phase']})"
        if est and est.get("allocated_gib") is not None:
            text += (f"; meshlint estimates {est['allocated_gib']:.2f} GiB allocated ({m['estimate_error_pct']:+.1f} %), "
                     f"{est['peak_gib']:.2f} GiB with the allocator reserve and CUDA context")
        else:
            text += "; no static estimate for this config"
        if section.get("capacity_gib") is not None:
            text += f"; GPU {section['capacity_gib']:g} GiB"
        rows.append(("memory", text + f" [{m['seconds']:.1f} s]"))
        rows.append(("", "  " + ", ".join(f"{k} {v:.2f}" for k, v in m["by_category"].items() if v >= 0.005)))
    return rows
