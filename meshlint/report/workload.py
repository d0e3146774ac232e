"""The model and the pipeline a config trains, as the JSON report and ``explain`` show them."""

from __future__ import annotations

from meshlint.engine.check import FileReport

MODEL_FIELDS = ("name", "flavor", "known", "source", "n_layers", "n_heads", "n_kv_heads", "dim", "vocab_size",
                "num_experts", "params")
PIPELINE_FIELDS = ("schedule", "stages", "stages_per_rank", "layer_counts", "effective_counts", "n_microbatches",
                   "microbatch_size", "bubble", "split_error", "schedule_error")


def model_json(report: FileReport) -> dict | None:
    """Model facts the rules used; null for dialects without a model (native)."""
    values = report.spec.values
    if report.dialect == "native" or "model.known" not in values:
        return None
    return {f: values.get(f"model.{f}") for f in MODEL_FIELDS}


def pipeline_json(report: FileReport) -> dict | None:
    """How the framework cuts the model into stages and feeds its schedule; null without pp > 1."""
    from meshlint.frameworks.dialects import module_of

    module = module_of(report.spec)
    pp = report.resolution.degrees.get("pp")
    if not hasattr(module, "pipeline_plan") or pp is None or pp <= 1:
        return None
    plan = module.pipeline_plan(report.spec, report.resolution)
    return {f: plan.get(f) for f in PIPELINE_FIELDS}


def model_line(model: dict) -> str:
    source = model.get("source")
    bridge = isinstance(source, str) and source.startswith("Megatron-Bridge")  # inputs/bridge_recipe.py
    name = (f"{model['name']} {model['flavor']}" if model.get("name")
            else "from the launch's flags" if source == "flags" else f"from {source}" if bridge else "from [model]")
    if not model.get("known"):
        return f"{name}: " + ("sizes not known (model-aware rules skipped; ML111 says why)" if bridge
                              else "not in the model table (model-aware rules skipped)")
    parts = [f"{model['n_layers']} layers", f"{model['n_heads']} heads / {model['n_kv_heads']} KV heads",
             f"dim {model['dim']}"]
    if model.get("vocab_size"):
        parts.append(f"vocab {model['vocab_size']}")
    if model.get("num_experts"):
        parts.append(f"{model['num_experts']} experts")
    if model.get("params"):
        parts.append(f"{model['params'] / 1e9:.2f}B parameters")
    return f"{name}: " + ", ".join(parts)


def pipeline_line(plan: dict) -> str:
    error = plan["split_error"] or plan["schedule_error"]
    stages = plan["stages"]
    head = f"{plan['schedule'] or 'schedule unknown'}"
    if stages:
        per = plan["stages_per_rank"]
        head += f", {stages} stages" + (f" ({per} per rank)" if per and per > 1 else "")
    if plan["layer_counts"]:
        head += f": layers {', '.join(map(str, plan['layer_counts']))}"
        if plan["effective_counts"] and plan["effective_counts"] != plan["layer_counts"]:
            head += f" (with embedding/output {', '.join(map(str, plan['effective_counts']))})"
    if plan["n_microbatches"] is not None:
        size = f" of {plan['microbatch_size']}" if plan["microbatch_size"] else ""
        m = plan["n_microbatches"]
        head += f"; {m} microbatch{'' if m == 1 else 'es'}{size}"
        if plan["bubble"] is not None:
            head += f", bubble {plan['bubble']:.0%}"
    return head + (f"; FAILS: {error}" if error else "")
