"""The layout search (meshlint/solve): exact against brute force with the real checks, and its pieces.

The brute force does not use the solver's enumeration, pruning, fast facts or memoised rules:
for every tuple it builds the layout's report (the config's Spec with the tuple's degrees,
resolved by the dialect module) and runs ``check.run_checks`` -- the ``meshlint check`` path --
then compares the set of tuples with no error finding with ``valid_layouts``.
"""

from __future__ import annotations

import os
import random
from math import prod
from pathlib import Path

import pytest

from meshlint.engine.check import FileReport, analyse, run_checks
from meshlint.engine.facts import FACT_DOCS, build_facts
from meshlint.cli.settings import CliSettings, Planner
from meshlint.engine.search import prune
from meshlint.engine.search.space import Target, assignments, count_factorizations, divisors, space_for
from meshlint.engine.search.valid import Solver, degree_choices, valid_layouts

ROOT = Path(__file__).resolve().parent.parent
SUGGEST = ROOT / "fixtures" / "suggest"
REG = SUGGEST / "registry" / "torchtitan" / "models"
LLAMA = f"{REG / 'llama3' / 'config_registry.py'}::llama3_8b_tp"
DEEPSEEK = f"{REG / 'deepseek_v3' / 'config_registry.py'}::deepseek_v3_16b"
LLAMA_V030 = f"{REG / 'llama3' / 'config_registry.py'}::llama3_8b_v030"
DEEPSEEK_V030 = f"{REG / 'deepseek_v3' / 'config_registry.py'}::deepseek_v3_16b_v030"

# (config, torchtitan version, GPUs per node): one per framework version, brute-forced on PRIMARY_WORLDS
PRIMARY = [
    (str(SUGGEST / "kf_moe.toml"), None, 8),
    (str(SUGGEST / "tt02_llama_etp.toml"), None, 8),
    (DEEPSEEK, "main@b5bcd76c6", 8),
    (LLAMA_V030, "0.3.0", 4),
    (str(SUGGEST / "native_pp_tp.toml"), None, 4),
]
# more configs of each dialect, on SECONDARY_WORLDS
SECONDARY = [
    (str(SUGGEST / "kf_dense_tp.toml"), None, 4),
    (str(SUGGEST / "kf_bad_tp.toml"), None, 8),
    (str(SUGGEST / "tt02_llama8b.toml"), None, 8),
    (str(ROOT / "fixtures" / "torchtitan" / "qwen3_moe_8gpu_pp2_ep2.toml"), None, 8),
    (LLAMA, "main@b5bcd76c6", 8),
    (DEEPSEEK_V030, "0.3.0", 4),
    (str(ROOT / "fixtures" / "kempnerforge" / "70b_32gpu_tp4_pp4.toml"), None, 4),
    (str(ROOT / "fixtures" / "torchtitan" / "deepseek_v3_64gpu_ep8.toml"), None, 8),
    (str(ROOT / "fixtures" / "native" / "pp_cp_tp_32gpu.toml"), None, 8),
    (str(ROOT / "fixtures" / "native" / "hsdp_tp_64gpu.toml"), None, 8),
]


def _setup(path: str, version: str | None, gpn: int, world: int | None = None):
    planner = Planner(CliSettings(world_size=world, gpus_per_node=gpn, torchtitan_version=version))
    options = planner.options_for(path)
    return analyse(path, options), options


def _error_options(options, report=None):
    """The check's options with only the error rules that can report on this config (a warning cannot make
    a layout invalid; a rule limited to other framework versions never reports): the same verdicts, faster."""
    from meshlint.engine.search.valid import _framework_id, memory_rule

    fid = _framework_id(report.spec) if report is not None and report.spec is not None else None
    rules = [r for r in options.rules if (options.severity.get(r.code) or r.severity) == "error"
             and (fid is None or r.applies_to(report.spec.dialect, fid)) and not memory_rule(r)]
    return options._replace(rules=rules)


def real_valid(solver: Solver, values: dict, options) -> bool:
    """``meshlint check`` on the layout: no error finding."""
    spec, res = solver.analyse(values, keep_fill=False)  # every degree written out
    report = FileReport(solver.report.path, "checked", dialect=solver.report.dialect, source=solver.report.source,
                        spec=spec, topology=solver.topo, resolution=res)
    run_checks(report, options)
    return not any(f.severity == "error" for f in report.findings)


def _tuples(space, world: int, exact: bool):
    """Every tuple of the factors with values 1..world and product == world (exact) or < world."""
    names = space.factors

    def rec(i, left, acc):
        if i == len(names):
            if (left == 1) == exact:
                yield dict(acc)
            return
        for v in range(1, left + 1):
            if exact and left % v:
                continue
            acc[names[i]] = v
            yield from rec(i + 1, left // v if exact else left // v, acc)
        acc.pop(names[i], None)

    if exact:
        yield from rec(0, world, {})
        return
    # product < world: bounded by world // product so far
    def rec2(i, prodsofar, acc):
        if i == len(names):
            if prodsofar < world:
                yield dict(acc)
            return
        for v in range(1, world // prodsofar + 1):
            acc[names[i]] = v
            yield from rec2(i + 1, prodsofar * v, acc)
        acc.pop(names[i], None)

    yield from rec2(0, 1, {})


# The exhaustive run is a long job, not the suite's: MESHLINT_BRUTE_WORLDS=64 (or MESHLINT_LONG=1) runs
# every config on every world up to 64 (tens of minutes). By default the primary configs (one per
# framework version) run on worlds 1..10 and 16, the others on 1..5, 7 and 16, and ep/etp take every
# value only up to world 8 (12 in the long run): worlds with many divisors (8, 12, 24, 32) cost a
# v0.2.x config with etp tens of seconds to minutes each.
ALL_WORLDS = int(os.environ.get("MESHLINT_BRUTE_WORLDS", "0") or 0) or (
    64 if os.environ.get("MESHLINT_LONG", "") not in ("", "0") else 0)
PRIMARY_WORLDS = range(1, ALL_WORLDS + 1) if ALL_WORLDS else [*range(1, 11), 16]
SECONDARY_WORLDS = range(1, ALL_WORLDS + 1) if ALL_WORLDS else [1, 2, 3, 4, 5, 7, 16]
LONG = os.environ.get("MESHLINT_LONG", "") not in ("", "0")
# Up to this world, ep (and etp) take every value 1..world; past it, the divisors of dp_shard·cp·tp
# (what the framework accepts: test_layouts_off_the_enumeration_are_invalid).
FULL_BORROWED = 12 if ALL_WORLDS or LONG else 8


def _borrowed(space, values: dict, world: int):
    """ep (torchtitan) and etp (v0.2.x) for a tuple of the factors."""
    if not space.borrowed:
        yield dict(values)
        return
    region = values["dp_shard"] * values["cp"] * values["tp"]
    eps = range(1, world + 1) if world <= FULL_BORROWED else [e for e in divisors(region)]
    for ep in eps:
        if space.has_etp:
            etps = range(1, world // ep + 1) if world <= FULL_BORROWED else [
                e for e in divisors(region) if region % (e * ep) == 0]
            for etp in etps:
                yield {**values, "ep": ep, "etp": etp}
        else:
            yield {**values, "ep": ep}


def brute_force(solver: Solver, options, world: int) -> set:
    """Every layout ``meshlint check`` accepts, one per class of equivalent layouts: torchtitan 0.2.x without
    ep shards no expert over etp, so etp > 1 with ep = 1 is the layout with etp = 1 (which is always valid
    where it is: test_etp_without_ep_is_one_layout) and the enumeration lists that one."""
    space = solver.space
    found = set()
    for values in _tuples(space, world, exact=True):
        for full in _borrowed(space, values, world):
            if real_valid(solver, full, options):
                if space.has_etp and full["ep"] == 1:
                    full = {**full, "etp": 1}
                found.add(tuple(full[n] for n in space.names))
    return found


def test_etp_without_ep_is_one_layout():
    """A v0.2.x layout with ep = 1 and etp > 1 that check accepts is accepted with etp = 1 too, and the
    estimates (time, memory) do not depend on that etp."""
    from meshlint.estimate import cost

    path, version, gpn = next(p for p in PRIMARY if "etp" in p[0])
    report, options = _setup(path, version, gpn)
    errors_only = _error_options(options, report)
    checked = 0
    for world in (4, 8, 16):
        solver = Solver(report, options, Target(world, gpn))
        profile = cost.cluster(None, gpn)
        model = cost.Model(cost.workload(report, options, profile), profile, world, gpn, "block", 80.0)
        for values in _tuples(solver.space, world, exact=True):
            for full in _borrowed(solver.space, values, world):
                if full["ep"] != 1 or full["etp"] == 1 or not real_valid(solver, full, errors_only):
                    continue
                one = {**full, "etp": 1}
                assert real_valid(solver, one, errors_only), full
                a, b = model.estimate(full), model.estimate(one)
                assert (a.time, a.memory_gib) == (b.time, b.memory_gib), full
                checked += 1
    assert checked > 0


def _compare(path, version, gpn, worlds):
    report, options = _setup(path, version, gpn)
    errors_only = _error_options(options, report)
    totals = {"worlds": 0, "tuples": 0, "valid": 0}
    for world in worlds:
        solver = Solver(report, options, Target(world, gpn))
        assert not solver.independent  # the brute force counts every error
        mine = {tuple(v[n] for n in solver.space.names) for v in solver.layouts()}
        theirs = brute_force(solver, errors_only, world)
        assert mine == theirs, (path, world, sorted(mine ^ theirs)[:5])
        totals["worlds"] += 1
        totals["valid"] += len(mine)
    return totals


@pytest.mark.parametrize("path,version,gpn", PRIMARY, ids=[Path(p.split("::")[0]).stem + (f"@{v}" if v else "")
                                                          for p, v, _ in PRIMARY])
def test_no_valid_layout_missed_primary(path, version, gpn):
    totals = _compare(path, version, gpn, PRIMARY_WORLDS)
    assert totals["valid"] > 0


@pytest.mark.parametrize("path,version,gpn", SECONDARY, ids=[Path(p.split("::")[0]).stem + (f"@{v}" if v else "")
                                                            for p, v, _ in SECONDARY])
def test_no_valid_layout_missed_more_configs(path, version, gpn):
    _compare(path, version, gpn, SECONDARY_WORLDS)


@pytest.mark.parametrize("path,version,gpn", PRIMARY[:4], ids=["kf", "tt02", "main", "v030"])
def test_layouts_off_the_enumeration_are_invalid(path, version, gpn):
    """What the enumeration never lists fails ``meshlint check``: a product other than the world
    (every such tuple on small worlds), borrowed degrees that do not divide dp_shard·cp·tp."""
    report, options = _setup(path, version, gpn)
    errors_only = _error_options(options, report)
    rng = random.Random(13)
    for world in range(1, 13 if LONG else 9):
        solver = Solver(report, options, Target(world, gpn))
        space = solver.space
        for values in _tuples(space, world, exact=False):
            full = {**values, **({"ep": 1} if "ep" in space.borrowed else {}),
                    **({"etp": 1} if space.has_etp else {})}
            assert not real_valid(solver, full, errors_only), (world, full)
    for world in (16, 32, 64) if LONG else (16,):
        solver = Solver(report, options, Target(world, gpn))
        space = solver.space
        if not space.borrowed:
            continue
        exact = list(_tuples(space, world, exact=True))
        for values in rng.sample(exact, min(12, len(exact))):
            region = values["dp_shard"] * values["cp"] * values["tp"]
            for ep in range(1, world + 1):
                etps = sorted({1, values["tp"], rng.randint(1, max(1, world // ep))}) if space.has_etp else [None]
                for etp in etps:
                    full = {**values, "ep": ep, **({"etp": etp} if etp else {})}
                    borrowed = ep * (etp or 1)
                    off = region % borrowed != 0 or (space.has_etp and ep > 1 and etp not in (1, values["tp"]))
                    if off:
                        assert not real_valid(solver, full, errors_only), (world, full)


def test_enumeration_counts_are_closed_form():
    report, options = _setup(str(SUGGEST / "kf_moe.toml"), None, 8)
    space = space_for(report.spec)
    for world in (1, 2, 12, 64, 360, 4096):
        listed = sum(1 for _ in assignments(space, world, {}))
        assert listed == count_factorizations(world, len(space.factors))
    assert divisors(4096) == [2 ** i for i in range(13)]
    assert divisors(1) == [1]


def test_fast_facts_equal_build_facts():
    """The solver's facts (static part reused, axes memoised) are build_facts' facts, layout by layout."""
    for path, version, gpn in PRIMARY + SECONDARY[:3]:
        report, options = _setup(path, version, gpn)
        for world in (8, 24, 64):
            solver = Solver(report, options, Target(world, gpn))
            space = solver.space
            rng = random.Random(world)
            pool = list(assignments(space, world, {}))
            for values in rng.sample(pool, min(40, len(pool))):
                spec, res = solver.analyse(values)
                fast = solver._fast_facts(spec, res)
                real = build_facts(spec, solver.topo, res)
                fast.pop("skipped"), real.pop("skipped")
                assert fast == real, (path, world, values)


def test_materialize_is_what_the_edited_file_reads_as():
    """A layout's Spec equals the Spec of the config file with those degrees written (fix's read-back)."""
    from meshlint.solve.fix import plan

    for path, version, gpn in PRIMARY:
        report, options = _setup(path, version, gpn)
        solver = Solver(report, options)
        for values in list(solver.layouts())[:6]:
            edit = plan(solver, values, options)  # raises if the edited text reads back differently
            assert edit.new != edit.old or not edit.edits


def test_every_fact_is_classified():
    """A new fact must be classed static (prune.STATIC) or dependent on the degrees here, so the pruning
    never treats a fact that varies with the layout as fixed."""
    dynamic = {"pp", "dp_replicate", "dp_shard", "cp", "tp", "ep", "etp", "batch", "fsdp", "efsdp", "world_factors",
               "axes", "mesh", "meshes", "mesh_ranks", "outside", "framework_error", "error_stage", "valid_worlds",
               "valid_world_kind", "valid_world_n", "declared", "dp_shard_inferred", "degree_values", "pipeline",
               "native", "megatron", "skipped", "unused_suppressions"}
    unclassified = set(FACT_DOCS) - prune.STATIC - dynamic
    assert not unclassified, f"classify these facts in meshlint/engine/search/prune.py STATIC or here: {unclassified}"
    assert not (prune.STATIC & dynamic)


def test_rule_classes():
    report, options = _setup(DEEPSEEK, "main@b5bcd76c6", 8, 64)
    solver = Solver(report, options)
    partial = {r.code: d for r, d in solver.pruner.partial}
    assert partial["ML304"] == frozenset({"tp"})
    assert partial["ML601"] == frozenset({"pp"})          # through the pipeline plan
    assert partial["ML701"] == frozenset({"cp", "dp_shard", "ep", "tp"})
    full = {r.code for r in solver.full}
    assert {"ML103", "ML202"} <= full                      # world_factors, axes
    assert not solver.independent


def test_independent_errors_do_not_hide_layouts(write):
    """An error no degree fixes (an unknown key) is reported as independent; the layouts are still found."""
    path = write("# meshlint: world_size=8 gpus_per_node=8\n[distributed]\ntp = 2\nbogus = 1\n"
                 "[model]\nn_heads = 8\nn_kv_heads = 8\n", "kf.toml")
    report, options = _setup(str(path), None, 8)
    solver = Solver(report, options)
    assert [r.code for r in solver.independent] == ["ML108"]
    assert any(True for _ in solver.layouts())


def test_suppressed_rule_is_judged_per_finding(write):
    """An inline suppression of a rule the pruning would use: the rule is judged on each layout's finding."""
    text = ("# meshlint: world_size=8 gpus_per_node=8\n[model]\ndim = 768\nn_heads = 6\nn_kv_heads = 6\n"
            "[distributed]\ntp = 4  # meshlint: ignore[ML304, ML305]\n")
    path = write(text, "kf.toml")
    report, options = _setup(str(path), None, 8)
    solver = Solver(report, options)
    assert {"ML304", "ML305"} <= solver.maybe_suppressed
    tps = {v["tp"] for v in solver.layouts()}
    assert 4 in tps  # suppressed on the tp line, as meshlint check would
    assert real_valid(solver, {**solver.current, "tp": 4, "dp_shard": 2}, _error_options(options))


def test_degree_choices_agree_with_every_rule():
    """8 KV heads and tp = 3: the shared choices never offer a tp that some rule rejects (issue 12, part 4)."""
    report, options = _setup(str(SUGGEST / "kf_bad_tp.toml"), None, 8)
    choices = degree_choices(report, options)
    assert choices["tp"] == [1, 2, 4, 8]
    valid = list(valid_layouts(report, options))
    for name, values in choices.items():
        assert set(values) == {v[name] for v in valid}


def test_degree_choices_respect_keep():
    report, options = _setup(str(SUGGEST / "kf_moe.toml"), None, 8)
    kept = degree_choices(report, options, Target(32, 8, keep=("tp",)))
    assert kept["tp"] == [4]
    free = degree_choices(report, options)
    assert set(free["tp"]) > {4}


def test_big_moe_top_layouts_pass_the_real_check():
    """deepseek_v3 671B on 4,096 GPUs: the best layouts the search returns pass meshlint check (no timing
    here: bench/bench_suggest.py measures it)."""
    from meshlint.solve.suggest import search

    path = f"{REG / 'deepseek_v3' / 'config_registry.py'}::deepseek_v3_671b"
    report, options = _setup(path, "main@b5bcd76c6", 8, 4096)
    result = search(report, options, top=5)
    assert len(result.alternatives) == 5
    errors_only = _error_options(options, report)
    for alt in result.alternatives:
        assert prod(alt.degrees[n] for n in result.solver.space.factors) == 4096
        assert real_valid(result.solver, alt.degrees, errors_only)
