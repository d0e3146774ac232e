"""How each framework splits a model into pipeline stages and feeds the schedule.

Mirrors the frameworks' own code, so the rules can say what will happen:
* KempnerForge (``compute_layer_assignment``, ``build_pipeline_schedule`` and
  ``scripts/train.py``): one stage per rank, layers split evenly with the
  earlier stages taking one extra; ``pp > n_layers`` raises; the schedule gets
  ``n_microbatches = grad_accum_steps``; ``interleaved_1f1b`` raises because
  train.py passes a single stage.
* torchtitan (``pipeline_llm``, ``generate_llm_fqn_per_model_part``,
  ``build_pipeline_schedule``): virtual stages from
  ``pipeline_parallel_layers_per_stage`` or 1 (single-stage schedules) / 2
  (looped ones) per rank; the embedding and output count as
  ``first/last_stage_less_layers`` layers when splitting;
  ``n_microbatches = local_batch_size // pipeline_parallel_microbatch_size``.
* torch.distributed.pipelining (2.13): ``Schedule1F1B`` and ``ScheduleDualPipeV``
  refuse fewer microbatches than stages; the interleaved schedules need the
  microbatches to be a multiple of ``max(1, m // pp)``; V schedules exactly 2
  stages per rank.
"""

from __future__ import annotations

from meshlint.limits import MAX_PIPELINE_STAGES

# torch's get_schedule_class names (matched case-insensitively), with how many stages each rank holds
SCHEDULES = {"1f1b": ("1F1B", "single"), "gpipe": ("GPipe", "single"),
             "interleaved1f1b": ("Interleaved1F1B", "loop"), "loopedbfs": ("LoopedBFS", "loop"),
             "interleavedzerobubble": ("InterleavedZeroBubble", "loop"), "zbvzerobubble": ("ZBVZeroBubble", "v"),
             "dualpipev": ("DualPipeV", "v"), "pipelineschedulesingle": ("PipelineScheduleSingle", "single"),
             "pipelineschedulemulti": ("PipelineScheduleMulti", "loop")}
KF_SCHEDULES = {"1f1b": "1F1B", "gpipe": "GPipe", "interleaved_1f1b": "Interleaved1F1B"}


def empty(**known) -> dict:
    plan = {"schedule": None, "style": None, "stages": None, "stages_per_rank": None, "layer_counts": None,
            "effective_counts": None, "n_microbatches": None, "microbatch_size": None, "split_error": None,
            "schedule_error": None, "unknown_schedule": False, "bubble": None}
    plan.update(known)
    return plan


def kempnerforge(pp, n_layers, schedule, grad_accum_steps, batch_size) -> dict:
    name = KF_SCHEDULES.get(schedule) if schedule else None
    plan = empty(schedule=name, style="single", stages=pp, stages_per_rank=1, n_microbatches=grad_accum_steps,
                 microbatch_size=batch_size)
    if pp is None or n_layers is None or pp < 1:
        return plan
    if pp > n_layers:
        plan["split_error"] = f"ValueError: pp_size ({pp}) cannot exceed n_layers ({n_layers})"
    elif pp <= MAX_PIPELINE_STAGES:  # one count per stage: listed for pipelines of a sane length only
        base, extra = divmod(n_layers, pp)
        plan["layer_counts"] = [base + (1 if s < extra else 0) for s in range(pp)]
        plan["effective_counts"] = plan["layer_counts"]
    if name == "Interleaved1F1B":
        plan["schedule_error"] = ("ValueError: interleaved_1f1b schedule requires a list of PipelineStage objects "
                                  "(multiple stages per rank for virtual pipeline stages)")
    _schedule_checks(plan, pp)
    return plan


def torchtitan(pp, n_layers, schedule, layers_per_stage, first_less, last_less, local_batch, microbatch) -> dict:
    known = SCHEDULES.get((schedule or "").lower())
    plan = empty(schedule=known[0] if known else schedule, style=known[1] if known else None,
                 microbatch_size=microbatch)
    if known is None:
        plan["unknown_schedule"] = True
        plan["schedule_error"] = (f"ValueError: Unknown schedule name '{schedule}'. The valid options are "
                                  f"{[v[0] for v in SCHEDULES.values()]}")
        return plan
    if None in (pp, local_batch, microbatch):
        return plan
    single = known[1] == "single"
    if microbatch == 0:  # torchtitan's own `batch_size % microbatch_size` raises
        plan["schedule_error"] = "ZeroDivisionError: integer modulo by zero (pipeline_parallel_microbatch_size = 0)"
    elif local_batch % microbatch == 0:
        plan["n_microbatches"] = local_batch // microbatch
    if n_layers is None or first_less is None or last_less is None:
        plan["stages_per_rank"] = None if layers_per_stage else (1 if single else 2)
        plan["stages"] = plan["stages_per_rank"] and pp * plan["stages_per_rank"]
        _schedule_checks(plan, pp)
        return plan
    if layers_per_stage is not None:
        if layers_per_stage == 0:  # torchtitan's math.ceil(... / layers_per_stage) raises
            plan["split_error"] = "ZeroDivisionError: division by zero (pipeline_parallel_layers_per_stage = 0)"
            return plan
        # math.ceil(a / b) without the float (exact, and no OverflowError on huge values)
        stages = -(-(n_layers + first_less + last_less) // layers_per_stage)
        info = (f"Model has {n_layers} layers with pipeline_parallel_layers_per_stage={layers_per_stage}, "
                f"resulting in num_virtual_stages={stages} across {pp} PP ranks")
        if stages % pp:
            plan["split_error"] = (f"ValueError: Number of virtual stages ({stages}) must be divisible by pipeline "
                                   f"parallel size ({pp}). {info}")
            return plan
        per_rank = stages // pp
        if single and per_rank != 1:
            plan["split_error"] = ("ValueError: Single stage schedule requires exactly 1 stage per rank, but got "
                                   f"{per_rank} stages per rank. {info}")
            return plan
        if not single and per_rank < 2:
            plan["split_error"] = ("ValueError: Multi-stage schedule requires at least 2 stages per rank, but got "
                                   f"{per_rank} stages per rank. {info}")
            return plan
    else:
        per_rank = 1 if single else 2
        stages = pp * per_rank
    plan.update(stages=stages, stages_per_rank=per_rank)
    if known[1] == "v" and per_rank != 2:
        plan["split_error"] = f"AssertionError: v schedules assume 2 stages per rank, got {per_rank}"
        return plan
    counts, effective, error = _torchtitan_split(stages, n_layers, first_less, last_less)
    plan.update(layer_counts=counts, effective_counts=effective, split_error=error)
    _schedule_checks(plan, pp)
    return plan


def _torchtitan_split(stages, n_layers, in_w, out_w) -> tuple:
    """``generate_llm_fqn_per_model_part``: transformer layers and effective layers per stage."""
    if stages == 1:
        return [n_layers], [n_layers + in_w + out_w], None
    effective = n_layers + in_w + out_w
    if stages > effective:
        return None, None, f"ValueError: Number of stages ({stages}) cannot be greater than effective layers ({effective})"
    if stages < 1:
        return None, None, None  # stages_per_rank checks have said what is wrong
    per, extra = divmod(effective, stages)
    if in_w > per:
        return None, None, f"ValueError: input_weight ({in_w}) exceeds minimum layers per stage ({per})."
    if out_w > per:
        return None, None, f"ValueError: output_weight ({out_w}) exceeds minimum layers per stage ({per})."
    if stages > MAX_PIPELINE_STAGES:
        return None, None, None  # splits, but too many stages to list one by one
    counts, eff, current = [], [], 0
    for s in range(stages):
        share = per + (1 if s < extra else 0)
        wanted = share - (in_w if s == 0 else out_w if s == stages - 1 else 0)
        took = max(0, min(wanted, n_layers - current))
        current += took
        counts.append(took)
        eff.append(share)
    return counts, eff, None


def _schedule_checks(plan: dict, pp) -> None:
    """What torch.distributed.pipelining (2.13) itself refuses, and the bubble."""
    m, stages, name = plan["n_microbatches"], plan["stages"], plan["schedule"]
    if m is None or not stages or pp is None or plan["schedule_error"]:
        return
    if name == "1F1B" and m < pp:
        plan["schedule_error"] = (f"ValueError: Number of microbatches ({m}) must be greater than or equal to the "
                                  f"number of stages ({pp}).")
    elif name == "DualPipeV" and m < stages:
        plan["schedule_error"] = ("ValueError: DualPipeV requires at least as many microbatches as stages, but got "
                                  f"{m} microbatches and {stages} stages.")
    elif name in ("Interleaved1F1B", "InterleavedZeroBubble"):
        rounds = max(1, m // pp)
        if m % rounds:
            what = "Interleaved 1F1B" if name == "Interleaved1F1B" else "Zero bubble"
            plan["schedule_error"] = (f"ValueError: {what} requires the number of microbatches to be a multiple of "
                                      f"the number of rounds ({rounds}), but got {m}.")
    if pp > 1 and m >= 1:  # a schedule without microbatches has no bubble to speak of (and m + pp - 1 may be 0)
        plan["bubble"] = (pp - 1) / (m + pp - 1)
