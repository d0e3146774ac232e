"""What ``meshlint suggest`` prints: the ranked layouts of a Suggestion (meshlint/solve/suggest.py) as text, as
its JSON document (``SCHEMA_VERSION``, docs/suggest-v1.schema.json) and as a side-by-side SVG of two layouts.
The search and its arithmetic live in the solve layer; this is only their rendering."""

from __future__ import annotations

from meshlint.estimate import cost
from meshlint.engine.search.space import SolveError
from meshlint.solve.suggest import SCHEMA_VERSION, Suggestion, alternative_report, degrees_text
from meshlint.engine.search.valid import Solver

LINK_WORDS = {"intra": "NVLink", "inter": "network"}


def _s(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds == 0:
        return "0 s"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"



def _gib(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"



def _breakdown(est: cost.Estimate) -> str:
    parts = [f"compute {_s(est.compute)}"]
    for kind in ("tp", "cp", "ep", "pp"):
        if kind in est.comm:
            parts.append(f"{kind} {_s(est.comm[kind])} ({LINK_WORDS[est.links[kind]]})")
    dp_raw = sum(est.raw.get(k, 0.0) for k in ("fsdp", "efsdp", "dp_replicate"))
    if dp_raw:
        kinds = "/".join(k for k in ("fsdp", "efsdp", "dp_replicate") if k in est.raw)
        where = {LINK_WORDS[est.links[k]] for k in ("fsdp", "efsdp", "dp_replicate") if k in est.links}
        parts.append(f"{kinds} {_s(est.comm.get('dp', 0.0))} exposed of {_s(dp_raw)} ({', '.join(sorted(where))})")
    if est.bubble_fraction:
        parts.append(f"bubble {_s(est.bubble)} ({est.bubble_fraction:.0%})")
    return " · ".join(parts)



def _memory(est: cost.Estimate, gib: float) -> str:
    if est.peak is None:
        return "memory: unknown (no model sizes)"
    verdict = "fits" if est.fits else "DOES NOT FIT"
    terms = est.peak.peak.terms
    states = (terms["params"] + terms["grads"] + terms["optimizer"]) / cost.GIB
    rest = sorted(((v, k) for k, v in terms.items() if k not in ("params", "grads", "optimizer") and v), reverse=True)
    parts = [f"states {states:.1f}"] + [f"{k.replace('_', ' ')} {v / cost.GIB:.1f}" for v, k in rest[:3]]
    stage = f" (stage {est.peak.peak.index})" if len(est.peak.stages) > 1 else ""
    return f"memory {est.peak.peak_gib:.1f} GiB of {gib:g}{stage} ({verdict}): " + " + ".join(parts)



def _batch_text(est: cost.Estimate) -> str | None:
    g = est.global_batch
    return None if not g else f"global batch {g['sequences']:,} sequences ({g['tokens']:,} tokens) per step"



def _headline(est: cost.Estimate) -> str:
    if est.time is None or est.per_token is None:
        return "time not estimated (the batch size or the model's size is unknown)"
    mfu = f" · MFU {est.mfu:.0%}" if est.mfu else ""
    return f"{_s(est.time)}/iteration · {_s(est.per_token * 1e6)} per 1M tokens{mfu}"



def _change_text(c: dict) -> str:
    old = c["old"] if c["old"] is not None else f"{c['default']} (default)"
    return f"{c['key']} {old} -> {c['new']}" + (f" ({c['what']})" if c.get("what") else "")



def render_text(s: Suggestion) -> str:
    from meshlint.report.terminal import safe

    solver, t = s.solver, s.solver.target
    space = solver.space
    gpn = t.gpus_per_node
    shape = f"{-(-t.world_size // gpn)} nodes × {gpn} GPUs" if gpn else "GPUs per node unknown"
    lines = [f"{s.report.path}: {space.framework} on {t.world_size:,} GPUs ({shape}, {t.placement} placement; "
             f"cost model: {s.profile.node} on {s.profile.fabric})"]
    keep = [n for n in space.names if n in solver.fixed_values()]
    if keep:
        lines.append(f"  kept: {', '.join(f'{n}={solver.fixed_values()[n]}' for n in keep)}")
    if s.current is not None:
        state = "valid" if not s.current_failures else "INVALID here: " + ", ".join(
            _rule_words(solver, c) for c in s.current_failures)
        lines.append(f"  current: {degrees_text(space, s.current)} ({state})")
        if s.current_estimate is not None and not s.current_failures:
            lines.append(f"           {_headline(s.current_estimate)}")
    st = s.stats
    borrowed = (f" ({'·'.join(space.borrowed)} borrow{'s' if len(space.borrowed) == 1 else ''} from "
                f"dp_shard·cp·tp)") if space.borrowed else ""
    lines.append(f"  searched {st['candidates']:,} layouts that pass the rules' arithmetic, from {st['layouts']:,} "
                 f"ordered factorizations of {t.world_size:,} into {'·'.join(space.factors)}{borrowed}; "
                 f"verified {st['verified']:,}")
    if s.independent:
        lines.append("  note: meshlint check still reports " + ", ".join(_rule_words(solver, c) for c in s.independent)
                     + ": no choice of degrees changes that")
    for note in s.work.notes:
        lines.append(f"  note: {note}")
    lines += _recipe_lines(s)
    if not s.alternatives:
        lines.append("")
        lines += _why_none(s)
        return safe("\n".join(lines), newlines=True)
    for alt in s.alternatives:
        est = alt.estimate
        lines.append("")
        lines.append(f"  {alt.rank}. {degrees_text(space, alt.degrees)}")
        lines.append(f"     {_headline(est)}")
        lines.append(f"     {_breakdown(est)}")
        lines.append(f"     {_memory(est, s.model.memory)}")
        if _batch_text(est):
            lines.append(f"     {_batch_text(est)}" + (" (kept)" if s.recipe is not None and s.keep_batch else ""))
        if alt.changes:
            lines.append("     change: " + "; ".join(_change_text(c) for c in alt.changes))
        else:
            lines.append("     change: nothing (the config already has this layout)")
    lines.append("")
    lines.append(f"  apply one: meshlint fix {s.report.path} --pick K (--diff to preview)")
    return safe("\n".join(lines), newlines=True)



def _recipe_lines(s: Suggestion) -> list:
    r, skipped = s.recipe, s.stats.get("skipped") or {}
    out = []
    if r is None and s.report.spec is not None and s.report.spec.dialect == "accelerate":
        out.append("  note: the global batch is the training script's (its per-device batch and gradient accumulation "
                   "are script arguments meshlint does not rewrite): layouts keep each rank's batch, so the global "
                   "batch changes with the data-parallel degree")
    elif r is None:
        out.append("  note: the global batch is unknown (no batch size or sequence length): layouts keep each rank's "
                   "batch as written, so the global batch changes with the data-parallel degree")
    elif s.keep_batch:
        seqs = r.sequences if r.sequences else r.tokens // r.seq_len
        out.append(f"  keeps the global batch: {seqs:,} sequences ({r.tokens:,} tokens) per step; layouts change the "
                   f"microbatch and gradient accumulation to keep it"
                   + (f"; {skipped['global_batch']:,} layouts cannot (the batch does not split over their "
                      f"data-parallel ranks; --allow-batch-change lists them)" if skipped.get("global_batch") else ""))
    else:
        out.append("  --allow-batch-change: every data-parallel rank keeps its batch as written, so the global batch "
                   "changes with the data-parallel degree (shown per layout)")
    if skipped.get("unusable_parallelism"):
        out.append(f"  {skipped['unusable_parallelism']:,} layouts use a parallelism this model cannot use (ep or etp "
                   "on a dense model, cp in KempnerForge): not proposed")
    return out



def _rule_words(solver: Solver, code: str) -> str:
    rule = next((r for r in solver.options.rules if r.code == code), None)
    return f"{code} {rule.name}" if rule else code



def _why_none(s: Suggestion) -> list:
    solver = s.solver
    d = s.diagnosis or {}
    lines = ["  no layout passes every error rule on this target."]
    by = d.get("rejected_by") or {}
    if by:
        total = d.get("layouts", 0)
        scope = f"{total:,} layouts" + (" (the first ones)" if d.get("truncated") else "")
        lines.append(f"  binding constraints (rules rejecting the most of {scope}):")
        for code, n in list(by.items())[:5]:
            lines.append(f"    {_rule_words(solver, code)}: rejects {n:,}")
    ruled = d.get("values_ruled_out") or {}
    if ruled:
        lines.append("  values each degree cannot take on this world (by single-degree rules):")
        for name, why in ruled.items():
            allowed = sorted(solver.allowed.get(name, ()))
            groups: dict = {}
            for value, code in sorted(why.items()):
                groups.setdefault(code, []).append(value)
            text = "; ".join(f"{_list(v)} by {code}" for code, v in groups.items())
            lines.append(f"    {name}: allowed {_list(allowed) or 'none'}; ruled out {text}")
    if solver.fixed_values():
        lines.append("  (degrees fixed by --keep/--vary: " + ", ".join(f"{k}={v}" for k, v in
                                                                     solver.fixed_values().items()) + ")")
    return lines



def _list(values: list) -> str:
    values = list(values)
    if len(values) > 12:
        return "{" + ", ".join(map(str, values[:10])) + f", ... ({len(values)} values)" + "}"
    return "{" + ", ".join(map(str, values)) + "}"



def to_json(s: Suggestion) -> dict:
    solver, t = s.solver, s.solver.target
    space = solver.space
    p = s.profile
    return {
        "version": SCHEMA_VERSION,
        "file": s.report.path,
        "framework": space.framework,
        "degrees": list(space.names),
        "target": {"world_size": t.world_size, "gpus_per_node": t.gpus_per_node, "placement": t.placement,
                   "fixed": solver.fixed_values()},
        "cluster": {"node": p.node, "fabric": p.fabric, "gpus_per_node": p.gpus_per_node,
                    "gpu_tflops": p.gpu_tflops, "gpu_memory_gib": s.model.memory,
                    "intra_node": {"bandwidth_gb_s": p.intra.bandwidth, "latency_us": p.intra.latency_us},
                    "inter_node": {"bandwidth_gb_s": p.inter.bandwidth, "latency_us": p.inter.latency_us},
                    "compute_efficiency": p.compute_efficiency, "activation_checkpointing": s.work.ac,
                    "activation_checkpointing_from": s.work.ac_from},
        "current": None if s.current is None else {
            "degrees": s.current, "valid": not s.current_failures, "failing_rules": list(s.current_failures),
            "estimate": s.current_estimate.to_json() if s.current_estimate else None},
        "independent_errors": list(s.independent),
        "global_batch": None if s.recipe is None else {
            "sequences": s.recipe.sequences if s.recipe.sequences else s.recipe.tokens // s.recipe.seq_len,
            "tokens": s.recipe.tokens, "kept": s.keep_batch},
        "alternatives": [{"rank": a.rank, "degrees": a.degrees, "estimate": a.estimate.to_json(),
                          "changes": a.changes} for a in s.alternatives],
        "stats": s.stats,
        "diagnosis": s.diagnosis,
        "notes": list(s.work.notes),
    }



def svg_pair(s: Suggestion, k: int, options) -> str:
    """The current layout (when it resolves on the target) next to alternative ``k``, as one SVG."""
    import re

    from meshlint.report.svg import render_svg

    solver = s.solver
    gpn = solver.target.gpus_per_node
    if not gpn:
        raise SolveError("--svg needs the node size: pass --gpus-per-node")
    panels = []
    chosen = alternative_report(s, k, options)
    if s.current is not None and not any(c in ("ML103", "ML104") for c in s.current_failures):
        spec, res = solver.analyse(s.current)
        if res.axes and res.world_used:
            mesh = res.mesh or next((m for m in res.meshes.values() if m), None)
            panels.append(render_svg(f"current: {degrees_text(solver.space, s.current)}", res.axes, res.world_used,
                                     gpn, solver.target.placement, covered=mesh.size if mesh else None))
    res = chosen.resolution
    if not res.axes or not res.world_used:
        raise SolveError("the chosen layout builds no mesh to draw (a one-process world?)")
    mesh = res.mesh or next((m for m in res.meshes.values() if m), None)
    panels.append(render_svg(f"alternative {k}: {degrees_text(solver.space, s.alternatives[k - 1].degrees)}",
                             res.axes, res.world_used, gpn, solver.target.placement,
                             covered=mesh.size if mesh else None))
    sizes = []
    for svg in panels:
        m = re.search(r'viewBox="0 0 ([0-9.]+) ([0-9.]+)"', svg)
        sizes.append((float(m.group(1)), float(m.group(2))) if m else (800.0, 600.0))
    gap = 40.0
    width = sum(w for w, _ in sizes) + gap * (len(sizes) - 1)
    height = max(h for _, h in sizes)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
           f'height="{height:.0f}">', '<rect width="100%" height="100%" fill="#ffffff"/>']
    x = 0.0
    for svg, (w, h) in zip(panels, sizes):
        inner = svg.strip()
        inner = re.sub(r"^<svg ", f'<svg x="{x:.0f}" y="0" ', inner, count=1)
        out.append(inner)
        x += w + gap
    out.append("</svg>")
    return "\n".join(out) + "\n"
