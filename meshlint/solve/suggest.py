"""``meshlint suggest``: the best valid layouts of a config on a target cluster, ranked by the cost model.

The search (``meshlint.solve``) lists every degree assignment of the framework
version for the target world in closed form, cuts it with the rules' own verdicts,
ranks the survivors by the documented cost model (``meshlint.estimate.cost``,
docs/cost-model.md) and verifies them with the full error rules in rank order until
the top N are found, so every layout shown passes ``meshlint check``. When none
fits it says why: which rules rejected the most layouts, and which values each
degree cannot take.
"""

from __future__ import annotations

import heapq
import time
from typing import NamedTuple

from meshlint.estimate import cost
from meshlint.solve import batch
from meshlint.engine.search.space import SolveError, Target
from meshlint.engine.search.valid import Solver, Verdict

SCHEMA_VERSION = 1
MAX_RANKED = 500_000     # layouts the ranking holds at once (~10 s); past it, narrow with --keep / --vary


class Alternative(NamedTuple):
    rank: int
    degrees: dict
    estimate: cost.Estimate
    changes: list          # [{degree, key, old, new}]; batch keys (degree None) with "what" they keep


class Suggestion:
    """What ``suggest`` found for one config."""

    def __init__(self, solver: Solver, model: cost.Model, work: cost.Workload, profile: cost.Cluster):
        self.solver = solver
        self.model = model
        self.work = work
        self.profile = profile
        self.alternatives: list = []
        self.current: dict | None = None
        self.current_estimate: cost.Estimate | None = None
        self.current_failures: tuple = ()
        self.stats: dict = {}
        self.diagnosis: dict | None = None
        self.independent = [r.code for r in solver.independent]
        self.recipe = None                # solve.batch.Recipe: the global batch every layout keeps
        self.keep_batch = True

    @property
    def report(self):
        return self.solver.report


def search(report, options, target: Target | None = None, top: int = 5, profile: cost.Cluster | None = None,
           diagnose: bool = True, keep_batch: bool = True) -> Suggestion:
    """Rank the valid layouts of ``report``'s config; the best ``top`` verified with the full rules. Every layout
    keeps the config's global batch (``solve.batch``) unless ``keep_batch`` is False, and none uses a parallelism
    the model cannot use (ep or etp on a dense model; cp in KempnerForge, which does not wire it)."""
    started = time.perf_counter()
    solver = Solver(report, options, target)
    t = solver.target
    profile = profile or cost.cluster(None, t.gpus_per_node)
    work = cost.workload(report, options, profile)
    model = cost.Model(work, profile, t.world_size, t.gpus_per_node, t.placement, options.gpu_memory_gib)
    out = Suggestion(solver, model, work, profile)
    space = solver.space
    declared = {n: solver.spec_value(n) for n in space.names}
    fill = space.fill
    native = space.framework == "native"
    out.recipe = shown = None if native else batch.recipe(report.spec, _own_dp(report, solver))
    if space.framework.startswith("megatron"):
        keep_batch = True  # --global-batch-size is written: a layout changes only the microbatch to keep it
    recipe = shown if keep_batch else None   # --allow-batch-change: each rank keeps its batch as written
    out.keep_batch = keep_batch
    unusable = _unusable(report, work)

    def changed(values: dict) -> int:
        return sum(1 for n in space.names if values[n] != declared[n] and not (n == fill and declared[n] == -1))

    # Ranked lazily: first by time per token with the config's own microbatch (no memory estimate), then each
    # layout popped is re-scored with the whole-peak memory and the microbatch that fits (``_plan``) and pushed
    # back; a layout is taken when it comes out re-scored. Layouts that do not fit sink below every one that does.
    heap: list = []
    plans: dict = {}
    first: dict = {}
    skipped = {"global_batch": 0, "unusable_parallelism": 0}
    for values in solver.candidates():
        if unusable(values):
            skipped["unusable_parallelism"] += 1
            continue
        degrees = _role_degrees(space, values) if native else values
        plan = _plan(None, recipe, degrees, first)
        if recipe is not None and plan is None and keep_batch:
            skipped["global_batch"] += 1
            continue
        _fits, speed = model.score(degrees, _batch_of(plan), memory=False)
        heap.append(((False, speed, changed(values), tuple(values.values())), 0, len(heap), values))
        if len(heap) > MAX_RANKED:
            raise SolveError(f"more than {MAX_RANKED:,} layouts survive the rules on {t.world_size:,} GPUs: narrow "
                             "the search with --keep or --vary")
    candidates = len(heap)
    searched = time.perf_counter()
    heapq.heapify(heap)
    verified = 0
    rejected: dict = {}
    while heap and len(out.alternatives) < top:
        key, rescored, order, values = heapq.heappop(heap)
        degrees = _role_degrees(space, values)
        if not rescored:
            fits_not, speed = model.score(degrees, _batch_of(_plan(model, recipe, degrees, plans)))
            heapq.heappush(heap, ((fits_not, speed) + key[2:], 1, order, values))
            continue
        verified += 1
        verdict = solver.verify(values)
        if not verdict.ok:
            for code in verdict.failed:
                rejected[code] = rejected.get(code, 0) + 1
            continue
        degrees = _role_degrees(space, values)
        plan = _plan(model, recipe, degrees, plans)
        est = model.estimate(degrees, _batch_of(plan), _global(shown, plan, degrees, work))
        out.alternatives.append(Alternative(len(out.alternatives) + 1, values, est,
                                            changes(solver, values) + (plan.changes if plan else [])))
    cur = solver.current
    if all(cur.get(n) is not None for n in space.names):
        out.current = dict(cur)
        degrees = _role_degrees(space, cur)
        out.current_estimate = model.estimate(degrees, None, _global(shown, None, degrees, work))
        out.current_failures = _current_failures(solver, cur, t.world_size)
    out.stats = {"layouts": _space_size(solver), "candidates": candidates, "verified": verified,
                 "skipped": skipped,
                 "rejected_by_full_rules": rejected, "rejected_by_arithmetic": dict(solver.pruner.rejected),
                 "search_s": round(searched - started, 4), "total_s": round(time.perf_counter() - started, 4)}
    if not out.alternatives and diagnose:
        out.diagnosis = solver.diagnose()
    return out


def _own_dp(report, solver: Solver) -> int | None:
    """The data-parallel degree of the config's own layout on its own world (its directive, name or launch line,
    not --world-size), else on the analysed world, else of its degrees on the target."""
    d = {}
    try:
        from meshlint.mesh.topology import topology_for
        from meshlint.mesh.topology import CliTopology

        opts = solver.options
        own = topology_for(report.source, report.spec, CliTopology(None, None, None, solver.target.placement),
                           opts.file_hint, opts.profile_hint)
        if own.world_size:
            d = solver.module.resolve(report.spec, own.world_size).degrees or {}
    except Exception:  # noqa: BLE001 - a source without a world of its own (a launch line): the analysed one
        d = {}
    if not all(isinstance(d.get(k), int) and d[k] > 0 for k in ("dp_replicate", "dp_shard")):
        d = (report.resolution.degrees if report.resolution is not None else None) or {}
    dr, ds = d.get("dp_replicate"), d.get("dp_shard")
    if isinstance(dr, int) and isinstance(ds, int) and dr > 0 and ds > 0:
        return dr * ds
    cur = solver.current
    dr, ds = cur.get("dp_replicate", 1), cur.get("dp_shard")
    return dr * ds if isinstance(dr, int) and isinstance(ds, int) and dr > 0 and ds > 0 else None


def _unusable(report, work: cost.Workload):
    """A predicate: does a layout use a parallelism the model cannot use (ep/etp on a dense model, rule ML502;
    cp > 1 in KempnerForge, which does not wire it, rules ML301 and ML321)?"""
    dense = bool(work.params) and not (work.shape is not None and work.shape.num_experts)
    kf = work.framework == "kempnerforge"

    def check(values: dict) -> bool:
        if dense and ((values.get("ep") or 1) > 1 or (values.get("etp") or 1) > 1):
            return True
        return kf and (values.get("cp") or 1) > 1

    return check


def _plan(model: cost.Model, recipe, degrees: dict, plans: dict):
    """The batch plan that keeps the recipe's global batch on this layout (memoised per dp, pp and the degrees
    memory depends on), the largest microbatch that fits preferred."""
    if recipe is None:
        return None
    dp = (degrees.get("dp_replicate") or 1) * (degrees.get("dp_shard") or 1)
    pp = degrees.get("pp") or 1
    if model is None:  # the config's own microbatch where it divides, memory unchecked: the first ranking
        key = (dp, pp)
        if key not in plans:
            plans[key] = batch.plan(recipe, dp, pp)
        return plans[key]
    key = tuple(degrees.get(n) or 1 for n in ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep", "etp"))
    if key in plans:
        return plans[key]

    def fits(mb_tokens: int, m: int) -> bool:
        peak = model.memory_peak(degrees, ((mb_tokens, m), (mb_tokens, m)), ends_only=True)
        return peak is None or peak.peak_gib <= model.memory

    plans[key] = p = batch.plan(recipe, dp, pp, fits)
    return p


def _batch_of(plan) -> tuple | None:
    return None if plan is None else (plan.piped, (plan.microbatch_tokens, plan.microbatches))


def _global(recipe, plan, degrees: dict, work: cost.Workload) -> dict | None:
    if plan is not None:
        return plan.global_batch
    dp = (degrees.get("dp_replicate") or 1) * (degrees.get("dp_shard") or 1)
    mb, m = work.batch[1]
    return batch.global_batch(recipe, dp, mb * (m or 1) if mb else None) if recipe is not None else None


def _current_failures(solver: Solver, values: dict, world: int) -> tuple:
    """Error rules that reject the config's own degrees on the target (all of them, not the first)."""
    return solver.all_failures(values)


def _role_degrees(space, values: dict) -> dict:
    if space.framework != "native":
        return values
    from meshlint.engine.search.space import role_values

    return {k: v for k, v in role_values(space, values).items() if v is not None}


def _space_size(solver: Solver) -> int | None:
    """Layouts before any rule: ordered factorizations of the world (times the borrowed degrees' choices,
    not counted here)."""
    from meshlint.engine.search.space import count_factorizations

    return count_factorizations(solver.world, len(solver.space.factors))


def changes(solver: Solver, values: dict) -> list:
    """The config keys a layout changes: [{degree, key, old, new}] (old None: not written, the default)."""
    out = []
    space = solver.space
    spec = solver.spec
    for name in space.names:
        old = solver.spec_value(name)
        new = values[name]
        if name == space.fill and old == -1:
            continue
        if old == new and not _dirty(solver, name):
            continue
        present = True if space.framework == "native" else spec.degree_present.get(name, False)
        out.append({"degree": name, "key": space.keys.get(name), "old": old if present else None,
                    "default": None if present else old, "new": new})
    if space.framework.startswith("megatron") and "etp" in values and not spec.degree_present.get("etp"):
        # not written, expert_tensor_parallel_size follows tp (arguments.py:410-411): written where it would not
        out = [c for c in out if c["degree"] != "etp"]
        if values["etp"] != values["tp"]:
            out.append({"degree": "etp", "key": space.keys["etp"], "old": None, "default": values["tp"],
                        "new": values["etp"]})
    return out


def _dirty(solver: Solver, name: str) -> bool:
    """A degree whose value is written wrongly (a string KempnerForge converts): fix rewrites it."""
    key = solver.space.keys.get(name)
    return any(p.get("key") == key for p in solver.spec.problems)


# ----------------------------------------------------------------------------- output

def degrees_text(space, values: dict) -> str:
    return " ".join(f"{n}={values[n]}" for n in space.names)



# ----------------------------------------------------------------------------- one alternative, in full

def alternative_report(s: Suggestion, k: int, options):
    """A FileReport of alternative ``k`` (1-based), rules run: what ``meshlint explain`` and ``check`` say of it."""
    if not 1 <= k <= len(s.alternatives):
        raise SolveError(f"there is no alternative {k} (there are {len(s.alternatives)})")
    return layout_report(s.solver, s.alternatives[k - 1].degrees, options, label=f"alternative {k}")


def layout_report(solver: Solver, values: dict, options, label: str):
    from meshlint.engine.check import FileReport, run_checks

    spec, res = solver.analyse(values)
    report = solver.report
    new = FileReport(f"{report.path} ({label}: {degrees_text(solver.space, values)})", "checked",
                     dialect=report.dialect, source=report.source, spec=spec, topology=solver.topo, resolution=res)
    return run_checks(new, options)


def target_from(report, world_size=None, nodes=None, gpus_per_node=None, placement=None, keep=(), vary=None,
                fixed=()) -> Target:
    """The search target: the flags, else the config's own world and node shape."""
    topo = report.topology
    gpn = gpus_per_node or (topo.gpus_per_node if topo else None)
    world = world_size or (nodes * gpn if nodes and gpn else None) or (topo.world_size if topo else None)
    if world is None:
        raise SolveError("the world size is unknown: pass --world-size N (or --nodes N --gpus-per-node G)")
    return Target(world, gpn, placement or (topo.placement if topo else "block"), tuple(keep),
                  tuple(vary) if vary else None, tuple(fixed))


__all__ = ["search", "alternative_report", "target_from", "Suggestion", "Verdict"]  # rendered by report/suggestion.py
