"""The whole-peak memory of a checked config's own layout, as facts for the memory rules (ML504, ML505) and as the
JSON report's ``files[].memory``."""

from __future__ import annotations

from meshlint.mesh.memory import GIB

# ML505 warns when the peak is within this fraction of the GPU's memory: against the published peaks
# (bench/memory_vs_published.py) the model is within 4 % on torchtitan's runs without pp and within 7 % on
# KempnerForge's with FSDP; its worst underestimates (17-19 %) are KempnerForge's runs without FSDP, unexplained.
MARGIN = 0.15
_LABELS = {"params": "parameters", "grads": "gradients", "optimizer": "AdamW moments",
           "unsharded_grads": "unsharded fp32 gradients (no-sync)", "main_params": "fp32 main parameters", "fsdp_unsharded": "gathered FSDP parameters",
           "reduce_buffers": "reduce-scatter buffers", "activations": "activations", "recompute": "recomputed layer",
           "logits_loss": "logits and loss", "moe_dispatch": "MoE dispatch", "optimizer_step": "optimizer step",
           "allocator_reserve": "allocator reserve", "cuda_context": "CUDA context"}


def file_memory(report, options) -> dict | None:
    """``{peak_gib, peak_stage, stages, terms, capacity_gib, capacity_source, fits, margin, summary, largest}`` for
    the report's resolved layout, or None where the model's size is unknown or the layout did not resolve."""
    res = getattr(report, "resolution", None)
    if report.spec is not None and res is not None and report.spec.dialect == "megatron":
        return _megatron(report, res, options)
    if report.spec is not None and res is not None and report.spec.dialect == "accelerate":
        from meshlint.estimate import memory_accelerate

        return memory_accelerate.file_memory(report, res, options, _finish)
    if report.spec is None or res is None or report.spec.dialect not in ("kempnerforge", "torchtitan"):
        return None
    data = getattr(report.source, "data", None)
    if report.spec.dialect == "kempnerforge" and isinstance(data, dict) and not isinstance(data.get("model"), dict):
        return None  # no [model]: KempnerForge's default 6.7B is not a model the user chose to size
    raw = res.degrees or {}
    if any(not (isinstance(raw.get(k), int) and raw[k] > 0) for k in ("dp_shard", "tp", "pp")):
        return None  # a degree the world decides (dp_shard = -1) with the world unknown: no layout to size
    degrees = {k: v for k, v in raw.items() if isinstance(v, int) and v > 0}
    try:
        from meshlint.estimate import cost

        topo = report.topology
        gpn = getattr(topo, "gpus_per_node", None)
        profile = cost.cluster({}, gpn)
        work = cost.workload(report, options, profile)
        model = cost.Model(work, profile, getattr(topo, "world_size", None) or 1, gpn, "block",
                           options.gpu_memory_gib)
        peak = model.memory_peak(degrees)
    except (ArithmeticError, TypeError, ValueError):  # a config too broken to size: the other rules say why
        return None
    if peak is None:
        return None
    return _finish(peak, options, work.shape.ac if work.shape else None)


def _finish(peak, options, ac: str | None) -> dict:
    out = peak.to_json(options.gpu_memory_gib, options.gpu_memory_source)
    out["margin"] = MARGIN
    terms = sorted(((v, k) for k, v in out["terms"].items() if v >= 0.05), reverse=True)
    out["summary"] = ", ".join(f"{_LABELS[k]} {v:.1f}" for v, k in terms[:5])
    out["largest"] = _LABELS[terms[0][1]] if terms else None
    out["activation_checkpointing"] = ac
    return out


def _megatron(report, res, options) -> dict | None:
    """A Megatron-LM launch's peak (meshlint/mesh/memory_megatron.py) for its resolved layout and layer split;
    None where the world is not known, the layout does not resolve, or the split is refused (other rules say so)."""
    from meshlint.frameworks.megatron.core_0_16 import layer_split
    from meshlint.mesh import memory_megatron

    spec = report.spec
    a = spec.extra.get("args") or {}
    d = res.degrees or {}
    why = a.get("bridge_memory_unknown") or ("a Mamba hybrid model's layers are not modelled" if a.get(
        "bridge.mamba") else "a T5 model is not modelled" if a.get("bridge.t5") else
        "PEFT's frozen base weights are not modelled" if a.get("bridge.peft") else None)
    if a.get("bridge_recipe") and why:
        # a Megatron-Bridge recipe whose precision, optimizer or recomputation is not known: Megatron-Core's
        # defaults in its place (no distributed optimizer, fp32) would overstate the peak
        return _bridge_unsized(res, why)
    if a.get("bridge_recipe") and not isinstance(a.get("num_layers"), int):
        # a recipe's model not known: why (a Hugging Face config not cached ...), not which flags to add
        sizes = next((u["reason"] for u in spec.unreadable if u.get("key") == "num_layers"),
                     "the model's sizes are not read")
        return _bridge_unsized(res, sizes)
    if res.framework_error or res.world_implied or any(
            not (isinstance(d.get(k), int) and d[k] > 0) for k in ("tp", "pp", "cp", "ep", "etp", "dp_shard")):
        return None
    split = spec.extra.get("split") or layer_split(a, d["pp"])
    if split.get("error") or not split.get("counts"):
        return None
    mbs, gbs = a.get("micro_batch_size"), a.get("global_batch_size")
    micro = gbs // (mbs * d["dp_shard"]) if isinstance(gbs, int) and isinstance(mbs, int) and mbs > 0 else None
    try:
        peak, notes = memory_megatron.estimate(a, d, split, micro)
    except (ArithmeticError, TypeError, ValueError):
        return None
    if peak is None:
        return _bridge_unsized(res, notes[0]) if a.get("bridge_recipe") and notes else None
    ac = a.get("recompute_granularity") or "none"
    if ac == "full":
        ac = f"full, {a.get('recompute_method') or 'uniform'} every {a.get('recompute_num_layers') or 1} layer(s)"
    elif ac == "selective":
        ac = f"selective: {', '.join(a.get('recompute_modules') or ['core_attn'])}"
    out = _finish(peak, options, ac)
    out["notes"] = notes
    out["lower_bound"] = memory_megatron.vocabulary(a, d["tp"]) is None
    if out["lower_bound"]:
        out["summary"] += " (without the embedding and logits: the vocabulary is the tokenizer's)"
    return out


def _bridge_unsized(res, why: str) -> None:
    """Say in the notes why a Megatron-Bridge recipe's peak is not estimated (a recipe has no flags to add)."""
    note = f"memory: not estimated for this Megatron-Bridge recipe ({why})"
    if note not in res.notes:
        res.notes.append(note)
    return None


def rule_facts(memory: dict | None) -> dict:
    """What the rules read under ``memory`` (None values: the rule is skipped)."""
    m = memory or {}
    return {"peak_gib": m.get("peak_gib"), "peak_stage": m.get("peak_stage"), "capacity_source": m.get(
        "capacity_source"), "margin": m.get("margin"), "summary": m.get("summary"), "largest": m.get("largest"),
        "stages": len(m.get("stages") or ()) or None, "ac": m.get("activation_checkpointing")}


__all__ = ["file_memory", "rule_facts", "GIB", "MARGIN"]
