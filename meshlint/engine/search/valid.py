"""The layouts a config may take on a target world: every degree assignment that passes every error rule.

``Solver`` puts a config's degrees through the search: ``space`` enumerates the
assignments in closed form, ``prune`` cuts them with the partial rules' verdicts,
and ``verify`` gives the final verdict on each survivor by substituting its degrees
into a copy of the analysed config's Spec, resolving it with the framework
version's own dialect module and running the error rules that read the resolution
on its facts -- the same rules, evaluated the same way, as ``meshlint check``, so a
layout found here never fails ``meshlint check`` on an error (apart from the
*independent* errors the config has whatever its degrees, which ``suggest`` lists).

"Error rules" are the rules ``meshlint check`` would report as errors for this
config: selected by the project's configuration and the flags, after severity
overrides, minus findings an inline ``# meshlint: ignore[...]`` suppresses.

Public API:
    valid_layouts(report, options, target=None) -> iterator of {degree: value}
    degree_choices(report, options, target=None) -> {degree: [values in some valid layout]}
"""

from __future__ import annotations


import copy
from typing import Iterator, NamedTuple

from meshlint.inputs import suppress
from meshlint.frameworks.base import DEGREES, Resolution, degree_items
from meshlint.frameworks.dialects import module_of
from meshlint.engine.facts import ROLE_OF, _mesh_fact, _valid_worlds_text, build_facts
from meshlint.engine.rulelist import rules_for
from meshlint.mesh.devmesh import place
from meshlint.engine.search import prune
from meshlint.engine.search.space import SolveError, Target, assignments, current, divisors, role_values, space_for
from meshlint.mesh.topology import CliTopology

MAX_DIAGNOSE = 20_000   # layouts tallied when explaining why none fits


class Verdict(NamedTuple):
    ok: bool
    failed: tuple          # codes of the error rules that reject the layout
    report: object = None  # (with keep=True) the FileReport-like analysis of the layout


def memory_rule(rule) -> bool:
    """A rule on the whole-peak memory estimate of the config's own layout (reads memory.peak_gib)."""
    return "memory" in prune.reads(rule)


def effective_severity(rule, severity: dict) -> str:
    return severity.get(rule.code) or severity.get(rule.name) or rule.severity


def target_of(report, target: Target | None) -> Target:
    topo = report.topology
    if target is None:
        if topo is None or topo.world_size is None:
            raise SolveError("the world size is unknown: pass --world-size N (or --nodes N --gpus-per-node G)")
        return Target(topo.world_size, topo.gpus_per_node, topo.placement)
    return target


class Solver:
    """One config's layout search on one target."""

    def __init__(self, report, options, target: Target | None = None, strict: bool = False):
        if report.status != "checked" or report.spec is None:
            why = report.error.message if report.error is not None else (report.note or report.status)
            raise SolveError(f"{report.path}: cannot search its layouts: {why}")
        self.report = report
        self.options = options
        self.target = target_of(report, target)
        self.strict = strict              # verify with every dependent rule (tests), not only the full ones
        self._place_memo: dict = {}
        self._mesh_memo: dict = {}
        self._intern: dict = {}
        self.stable_ids: set = set()   # ids of fact items this solver keeps alive (memoised axes)
        self.spec = report.spec
        self.source = report.source
        self.space = space_for(self.spec)
        self.module = module_of(self.spec)
        self.world = self.target.world_size
        self.topo = self._topology()
        self.current = current(report, self.space)
        self._check_target()
        dialect = self.spec.dialect
        facts_id = _framework_id(self.spec)
        # a rule limited to other framework versions has its limit folded into its `when`: it never reports
        # the whole-peak memory rules (ML504) are not judged here: the cost model prices each layout's peak and says
        # whether it fits (suggest ranks and filters on it); their facts describe the config's own layout only
        rules = [r for r in rules_for(options.rules, dialect)
                 if r.applies_to(dialect, facts_id) and effective_severity(r, options.severity) == "error"
                 and not _late(r) and not memory_rule(r) and r.code not in getattr(self.module, "BATCH_RULES", ())]
        self.suppressions = suppress.parse(self.source) if "meshlint" in (self.source.text or "") else []
        self.maybe_suppressed = {r.code for r in rules if self._maybe_suppressed(r)}
        groups = prune.classify(rules, dialect)
        self.static = groups.static
        # a rule an inline suppression may silence is judged on the whole layout (its finding's line decides)
        partial = [(r, d) for r, d in groups.partial if r.code not in self.maybe_suppressed]
        full = list(groups.full) + [r for r, _d in groups.partial if r.code in self.maybe_suppressed]
        self.full = full
        self.judges = [prune.Judge(r, self.stable_ids) for r in full]
        self.all_dependent = [r for r, _d in partial] + full
        self.degree_keys = self._degree_key_paths()
        self.clean_problems = [p for p in self.spec.problems if p.get("key") not in self.degree_keys]
        base_values = {n: (self.current.get(n) or 1) for n in self.space.names}
        if self.space.fill and self.space.fill in base_values and self.current.get(self.space.fill) is None:
            base_values[self.space.fill] = 1
        self.base_values = base_values
        self._pp_facts: dict = {}
        self._fast = True
        self._checked_fast = 0
        searched = frozenset(role_values(self.space, {n: 1 for n in self.space.names}))
        if self.space.framework != "native":
            searched = frozenset(self.space.names)
        self.pruner = prune.Pruner(partial, self._facts_for_pp, lambda v: role_values(self.space, v), searched)
        base = self._facts_for_pp(None)
        self.independent = [r for r in self.static if prune.fails(r, dict(base))]
        self.independent += [partial[i][0] for i in self.pruner.unchecked() if not self.pruner.verdict(i, {})]
        self.allowed, self.why_not = self._allowed()
        if self.space.framework != "native":
            self.pruner.drop_single()  # their verdicts are in the allowed values now

    # ------------------------------------------------------------------ setup
    def _topology(self):
        from meshlint.mesh.topology import topology_for

        topo = self.report.topology
        t = self.target
        if topo is not None and topo.world_size == t.world_size and topo.gpus_per_node == t.gpus_per_node \
                and topo.placement == t.placement:
            return topo
        cli = CliTopology(t.world_size, None, t.gpus_per_node, t.placement)
        new = topology_for(self.source, self.spec, cli, self.options.file_hint, self.options.profile_hint)
        new.gpu_memory_gib = self.options.gpu_memory_gib
        return new

    def _check_target(self) -> None:
        t = self.target
        names = set(self.space.names)
        for name in tuple(t.keep) + tuple(t.vary or ()) + tuple(n for n, _ in t.fixed):
            if name not in names:
                raise SolveError(f"{self.space.framework} has no degree {name!r} (it has {', '.join(self.space.names)})")
        for name in t.keep:
            if self.current.get(name) is None and name != self.space.fill:
                raise SolveError(f"cannot keep {name}: its current value is unknown")

    def _maybe_suppressed(self, rule) -> bool:
        return any(not s.selectors or rule.code in s.selectors or rule.name in s.selectors
                   for s in self.suppressions)

    def _degree_key_paths(self) -> set:
        if self.space.framework == "native":
            return {f"mesh.dims[{d['index']}].size" for d in self.spec.extra.get("dims", [])}
        return {path for name, path in self.spec.degree_keys.items() if name in self.space.names}

    def fixed_values(self) -> dict:
        """Degrees the target pins: kept at their current value, or not among --vary, or given."""
        t = self.target
        fixed = {}
        for name in self.space.names:
            pinned = name in t.keep or (t.vary is not None and name not in t.vary)
            if pinned:
                if name == self.space.fill and self.spec_value(name) == -1:
                    continue  # an inferred degree stays inferred: any value
                value = self.current.get(name)
                if value is None:
                    if name in t.keep:
                        raise SolveError(f"cannot keep {name}: its current value is unknown")
                    continue
                fixed[name] = value
        fixed.update(dict(t.fixed))
        return fixed

    def spec_value(self, name: str):
        if self.space.framework == "native":
            dim = next((d for d in self.spec.extra.get("dims", []) if d["name"] == name), None)
            return dim["size"] if dim else None
        return self.spec.degrees.get(name)

    def _allowed(self) -> tuple[dict, dict]:
        fixed = self.fixed_values()
        world_divs = divisors(self.world)
        allowed, why = {}, {}
        refused = getattr(self.module, "refused_degree", None)  # a framework's verdict on one degree alone
        for name in self.space.names:
            values = [fixed[name]] if name in fixed else world_divs
            if self.space.framework != "native":
                values, rejected = self.pruner.allowed_values(name, values)
                why[name] = rejected
            if refused is not None:
                codes = {v: refused(self.spec, name, v) for v in values}
                why.setdefault(name, {}).update({v: c for v, c in codes.items() if c})
                values = [v for v in values if not codes[v]]
            allowed[name] = set(values)
        return allowed, why

    # ------------------------------------------------------------------ enumeration
    def candidates(self) -> Iterator[dict]:
        """Assignments that pass the partial rules (the survivors of pruning), in enumeration order."""
        check = self.pruner.check
        if self.space.framework == "native":
            roles = self.space.roles

            def check(name, values):  # noqa: F811 - a native dim checks the rules of its role
                return self.pruner.check(name, values, roles.get(name))
        yield from assignments(self.space, self.world, self.allowed, check)

    def layouts(self) -> Iterator[dict]:
        """Every valid assignment."""
        for values in self.candidates():
            if self.verify(values).ok:
                yield values

    # ------------------------------------------------------------------ the verdict
    def materialize(self, values: dict, keep_fill: bool = True):
        """A copy of the config's Spec with these degrees, as ``meshlint fix`` would write them (a degree
        written -1 stays -1: the framework infers the same value; ``keep_fill=False`` writes it out)."""
        spec = copy.copy(self.spec)
        spec.problems = self.clean_problems
        spec.load_error = None
        spec.degree_present = dict(self.spec.degree_present)
        spec.extra = dict(self.spec.extra)
        if self.space.framework == "native":
            dims, degrees = [], {}
            for dim in self.spec.extra.get("dims", []):
                size = dim["size"] if dim["size"] == -1 and keep_fill else values[dim["name"]]
                dims.append({**dim, "size": size})
            for role in DEGREES:
                sizes = [d["size"] for d in dims if d["role"] == role]
                degrees[role] = -1 if -1 in sizes else _prod(sizes)
            spec.extra["dims"] = dims
            spec.degrees = degrees
            return spec
        degrees = dict(self.spec.degrees)
        for name in self.space.names:
            if name == self.space.fill and degrees.get(name) == -1 and keep_fill:
                continue
            value = values[name]
            if degrees.get(name) != value:
                spec.degree_present[name] = True
            degrees[name] = value
        derive = getattr(self.module, "derive_degrees", None)
        if derive is not None:  # degrees a framework derives from others (Megatron's etp from tp where not written)
            degrees = derive(spec, degrees, frozenset(self.space.names))
        spec.degrees = degrees
        if spec.extra.get("unread_degrees"):
            spec.extra["unread_degrees"] = []
        return spec

    def analyse(self, values: dict, keep_fill: bool = True):
        """(materialized spec, resolution) of one layout."""
        spec = self.materialize(values, keep_fill)
        return spec, self.module.resolve(spec, self.world)

    def facts(self, spec, res) -> dict:
        """The facts of one layout: computed from the config's static facts and the layout's resolution,
        checked against ``build_facts`` on the first layouts (any difference and it falls back to it)."""
        if not self._fast:
            return build_facts(spec, self.topo, res)
        fast = self._fast_facts(spec, res)
        if self._checked_fast < 3:
            self._checked_fast += 1
            real = build_facts(spec, self.topo, res)
            if _comparable(real) != _comparable(fast):
                self._fast = False
                return real
        return fast

    def verify(self, values: dict, keep: bool = False) -> Verdict:
        """The verdict of the error rules that read the resolution (``strict``: of every dependent rule)."""
        spec, res = self.analyse(values)
        facts = self.facts(spec, res)
        failed = []
        if self.strict:
            for rule in self.all_dependent:
                if prune.fails(rule, facts) and not self._suppressed(rule, facts):
                    failed.append(rule.code)
        else:
            for judge in self.judges:
                if judge.fails(facts) and not self._suppressed(judge.rule, facts):
                    failed.append(judge.rule.code)
        return Verdict(not failed, tuple(failed), (spec, res, facts) if keep else None)

    def all_failures(self, values: dict) -> tuple:
        """Every dependent error rule that rejects this layout (for diagnostics)."""
        spec, res = self.analyse(values)
        facts = self.facts(spec, res)
        return tuple(r.code for r in self.all_dependent if prune.fails(r, facts) and not self._suppressed(r, facts))

    def _suppressed(self, rule, facts: dict) -> bool:
        if rule.code not in self.maybe_suppressed:
            return False
        from meshlint.engine.run import _finding

        scope = prune.failing_scope(rule, facts)
        if scope is None:
            return False
        try:
            finding = _finding(rule, scope, self.source.locate)
        except Exception:  # noqa: BLE001 - a key that cannot be rendered: not suppressed by a line comment
            return False
        kept, _suppressed, _used = suppress.apply(self.suppressions, [finding])
        return not kept

    # ------------------------------------------------------------------ facts
    def _facts_for_pp(self, pp):
        """The config's facts with ``pp`` (None: the base layout), on a bare resolution: static facts and
        the pipeline plan are right, the resolution-derived ones are not (nothing that reads them uses it)."""
        hit = self._pp_facts.get(pp)
        if hit is None:
            values = dict(self.base_values)
            if pp is not None:
                if self.space.framework == "native":
                    values = dict(values)  # native: pipeline plans are not modelled (no pipeline_plan)
                else:
                    values["pp"] = pp
            spec = self.materialize(values)
            degrees = dict(spec.degrees)
            if self.space.framework != "native":
                degrees.update(values)
            hit = self._pp_facts[pp] = build_facts(spec, self.topo, Resolution(degrees=degrees))
        return hit

    def _fast_facts(self, spec, res) -> dict:
        base = self._facts_for_pp(None)
        f = dict(base)
        deg = res.degrees
        pp = deg.get("pp")
        if self.space.framework != "native" and isinstance(pp, int) and pp >= 1:
            f["pipeline"] = self._facts_for_pp(pp)["pipeline"] if pp != self.base_values.get("pp") \
                else base["pipeline"]
        f["declared"] = {n: spec.degrees.get(n) for n in DEGREES}
        f["dp_shard_inferred"] = spec.degrees.get("dp_shard") == -1
        f["world_factors"] = self._interned(("wf",) + tuple(res.world_factors),
                                            lambda: [{"name": n, "value": v, "inferred": i}
                                                     for n, v, i in res.world_factors])
        f["framework_error"] = res.framework_error
        f["error_stage"] = res.error_stage
        if spec.dialect == "native":
            f["degree_values"] = degree_items(spec)
        else:  # base.degree_items, one dict per distinct (degree, value, present), kept
            keys, present = spec.degree_keys, spec.degree_present
            f["degree_values"] = [self._interned(("dv", n, spec.degrees.get(n), present.get(n, False)),
                                                 lambda n=n: {"name": n, "key": keys[n], "value": spec.degrees.get(n),
                                                              "present": present.get(n, False)})
                                  for n in DEGREES if n in keys]
        for name in DEGREES + ("batch", "fsdp", "efsdp"):
            f[name] = deg.get(name)
        kind, n = res.valid_worlds or (None, None)
        f["valid_world_kind"], f["valid_world_n"] = kind, n
        f["valid_worlds"] = _valid_worlds_text(res.valid_worlds)
        mesh = res.mesh
        f["mesh"] = self._mesh_fact(mesh)
        f["meshes"] = {name: self._mesh_fact(m) for name, m in res.meshes.items()}
        f["mesh_ranks"] = mesh.size if mesh else None
        f["outside"] = ({"first": res.outside[0], "last": res.outside[1],
                         "count": res.outside[1] - res.outside[0] + 1} if res.outside else None)
        f["axes"] = self._axes(res, spec)
        if self.space.framework == "native":
            native = dict(base["native"])
            native["dims"] = spec.extra.get("dims", [])
            native["duplicates"] = spec.extra.get("duplicates", [])
            f["native"] = native
        f["skipped"] = []
        return f

    def _axes(self, res, spec) -> list:
        """facts.py's ``_axes``, each item built once per distinct axis and kept (a rule memoised per item
        then knows it by identity: ``prune.Judge``)."""
        roles = {}
        if spec.dialect == "native":
            roles = {d["name"]: d["role"] for d in spec.extra.get("dims", [])}
        out = []
        gpn, world, placement = self.topo.gpus_per_node, res.world_used, self.topo.placement
        memo = self._place_memo
        for name, axis in res.axes.items():
            role = roles.get(name, ROLE_OF.get(name))
            key = (axis, role, world)
            item = memo.get(key)
            if item is None:
                item = {"name": name, "role": role, "mesh": axis.mesh, "size": axis.size, "stride": axis.stride,
                        "groups": axis.groups, "intra_node": None, "max_nodes": None, "crossing_groups": None,
                        "example": None}
                if gpn and world:
                    p = place(axis, gpn, world, placement)
                    item.update(intra_node=p.intra_node, max_nodes=p.max_nodes, crossing_groups=p.crossing_groups,
                                example=list(p.example) if p.example else None)
                memo[key] = item
                self.stable_ids.add(id(item))
            out.append(item)
        return out

    def _interned(self, key, make):
        """One object per distinct value, kept alive (so rules memoised on it know it by identity)."""
        hit = self._intern.get(key)
        if hit is None:
            hit = self._intern[key] = make()
            self.stable_ids.add(id(hit))
            if isinstance(hit, list):
                self.stable_ids.update(id(x) for x in hit)
        return hit

    def _mesh_fact(self, mesh):
        if mesh is None:
            return None
        hit = self._mesh_memo.get(mesh)
        if hit is None:
            hit = self._mesh_memo[mesh] = _mesh_fact(mesh)
        return hit

    # ------------------------------------------------------------------ explaining
    def diagnose(self, limit: int = MAX_DIAGNOSE) -> dict:
        """Why layouts fail: per rule, how many product-exact layouts (within --keep/--vary) it rejects,
        and per degree, which values the single-degree rules rule out."""
        fixed = self.fixed_values()
        allowed = {n: ({fixed[n]} if n in fixed else None) for n in self.space.names}
        tally: dict = {}
        seen = 0
        truncated = False
        for values in assignments(self.space, self.world, allowed):
            if seen >= limit:
                truncated = True
                break
            seen += 1
            codes = []
            degree_facts = role_values(self.space, values)
            for index, (rule, _degrees) in enumerate(self.pruner.partial):
                mine = self.pruner.assigned[index]
                if mine and not self.pruner.verdict(index, degree_facts):
                    codes.append(rule.code)
            if not codes:
                codes = list(self.verify(values).failed)
            for code in codes:
                tally[code] = tally.get(code, 0) + 1
        return {"layouts": seen, "truncated": truncated, "rejected_by": dict(sorted(tally.items(),
                                                                                   key=lambda kv: -kv[1])),
                "values_ruled_out": {n: w for n, w in self.why_not.items() if w}}


# ---------------------------------------------------------------------------- public API

def valid_layouts(report, options, target: Target | None = None) -> Iterator[dict]:
    """Every degree assignment of ``report``'s config that passes every error rule on ``target``
    (default: the config's own world and node shape), as ``{degree: value}`` with every degree explicit."""
    yield from Solver(report, options, target).layouts()


def degree_choices(report, options, target: Target | None = None, budget: tuple | None = None) -> dict | None:
    """``{degree: sorted values}``: the values of each degree that appear in some fully valid layout,
    the other degrees free (within ``target``'s --keep/--vary). The one computation every help line
    that proposes degrees should draw on, so no two findings of a config contradict each other.
    A degree with no valid value anywhere maps to []; the config's world unknown raises SolveError.
    With ``budget`` = (candidates, verifications) it gives up, returning None, once either count is spent: a
    count of work, not a clock, so the answer never depends on how loaded the machine is."""
    solver = Solver(report, options, target)
    names = solver.space.names
    allowed = solver.allowed  # each degree's values that survive the single-degree rules (a superset)
    covered: dict = {n: set() for n in names}
    candidates, verifications = budget or (None, None)
    for values in solver.candidates():
        if candidates is not None:
            candidates -= 1
            if candidates < 0:
                return None  # over budget: the caller falls back to what it knows without the search
        if all(values[n] in covered[n] for n in names):
            continue
        if verifications is not None:
            verifications -= 1
            if verifications < 0:
                return None
        if solver.verify(values).ok:
            for n in names:
                covered[n].add(values[n])
            if all(len(covered[n]) == len(allowed[n]) for n in names):
                break  # every value the single-degree rules leave is in some valid layout: nothing more to find
    return {n: sorted(covered[n]) for n in names}


def _framework_id(spec) -> str:
    """The ``framework.id`` fact of a spec (what a rule's ``frameworks`` field matches)."""
    from meshlint.frameworks.versions import TOML_VERSION

    fw = getattr(spec, "framework", None) or {}
    version = fw.get("version") or TOML_VERSION.get(spec.dialect)
    name = fw.get("name") or spec.dialect
    return f"{name}@{version}" if version else spec.dialect


def _late(rule) -> bool:
    # the source text first, as check._split_late does: free_names() builds the tree
    return (rule.foreach is not None and "unused_suppressions" in rule.foreach.source
            and "unused_suppressions" in rule.foreach.free_names())


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _comparable(facts: dict) -> dict:
    return {k: v for k, v in facts.items() if k != "skipped"}


__all__ = ["Solver", "Target", "Verdict", "valid_layouts", "degree_choices"]
