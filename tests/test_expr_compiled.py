"""The built-in rules' expressions compiled to Python (meshlint/engine/rules_compiled/) behave exactly as interpreted.

Every built-in rule is run both ways, interpreter and compiled functions, over the facts of every fixture
(each as a check gives them to the rules, with and without a world size): the same values, the same
unknown facts, the same errors with the same messages, and the same budget left after each step. Random
expressions (hypothesis) over facts of every type are compared the same way, through the compiler itself.
"""

from __future__ import annotations

import copy
import functools
import os

import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshlint.engine import expr, prebuilt, rules, rules_compiled, ruleset
from meshlint.engine.expr import compiler, interp
from meshlint.engine.expr.expression import COMPILED
from meshlint.generate import rules_prebuilt as generate

MODES = ("interpreted", "compiled")


def test_the_package_lists_its_modules():
    here = os.path.dirname(expr.__file__)
    assert sorted(expr.MODULES) == sorted(f for f in os.listdir(here) if f.endswith(".py") and f != "__init__.py")


def _parts() -> dict:
    """Every module of rules_compiled/ by part name (common and one per dialect)."""
    import importlib

    return {part: importlib.import_module(f"meshlint.engine.rules_compiled.{part}")
            for part in ("common", *rules_compiled.DIALECTS)}


ALL_COMPILED = {source: hit for module in _parts().values() for source, hit in module.COMPILED.items()}


def test_the_compiled_modules_are_current_and_installed(monkeypatch):
    monkeypatch.setattr(prebuilt, "_bytecode_ready", lambda source: True)  # as installed (see the next test)
    assert generate._written(generate.OUT_COMPILED) == generate.compiled_sources(str(ROOT / "rules")), \
        "meshlint/engine/rules_compiled/ is stale: run python -m meshlint.generate.rules_prebuilt"
    assert prebuilt.load(rules.builtin_rules_dir()) is not None
    assert COMPILED == {}  # each part is installed when a run first meets its dialect
    expr.expression.compiled_for("kempnerforge")
    assert set(COMPILED) == set(_parts()["common"].COMPILED) | set(_parts()["kempnerforge"].COMPILED)
    expr.expression.compiled_for(None)
    assert COMPILED == ALL_COMPILED  # what a run evaluates with
    every = {e.source for rule in ruleset.load_rules() for e in generate.rule_expressions(rule)}
    assert every == set(ALL_COMPILED)  # every expression of every rule, none left to the interpreter
    assert sum(len(m.COMPILED) for m in _parts().values()) == len(ALL_COMPILED)  # each in one module


def test_a_dialect_brings_every_function_its_rules_evaluate():
    # each rule's expressions are in common or in the module of the one dialect the rule runs on
    common, parts = _parts()["common"].COMPILED, _parts()
    for rule in ruleset.load_rules():
        for dialect in rule.dialects or rules_compiled.DIALECTS:
            mine = parts[dialect].COMPILED if dialect in parts else {}
            assert all(e.source in common or e.source in mine for e in generate.rule_expressions(rule)), rule.code


def test_an_expression_met_before_its_dialect_installs_every_part(monkeypatch):
    # a layout search may evaluate rules before any check ran on that dialect: compiled all the same
    monkeypatch.setattr(prebuilt, "_bytecode_ready", lambda source: True)
    built = prebuilt.load(rules.builtin_rules_dir())
    megatron = next(r for r in built if r.dialects == ("megatron",))
    assert COMPILED == {}
    assert megatron.check._fn is None and expr.expression.compiled_expr(megatron.check.source) is not None
    assert COMPILED == ALL_COMPILED and not expr.expression._PENDING


def test_the_table_names_what_each_expression_reads():
    """The compiled table's free names are what the tree gives: let replay reads them from there and never
    builds a tree for a built-in rule."""
    for source, hit in ALL_COMPILED.items():
        assert set(hit[2]) == expr.parse(source).free_names(), source
    let = next(e for rule in ruleset.load_rules() for e in rule.lets.values())
    monkeypatched = expr.expression.COMPILED
    try:
        expr.expression.install_compiled(ALL_COMPILED)
        assert let.free_names() == set(ALL_COMPILED[let.source][2]) and let._root is None  # no tree built
    finally:
        expr.expression.install_compiled(monkeypatched)


def test_a_check_of_built_in_rules_never_imports_the_parser_or_the_tree(tmp_path):
    """A check whose rules are all compiled runs without the tokenizer, parser, node types or tree codec."""
    import subprocess
    import sys

    code = ("import sys\nfrom meshlint.cli.settings import CliSettings, Planner\nfrom meshlint.engine import check\n"
            "for path in sys.argv[1:]:\n"
            "    report = check.check_file(path, Planner(CliSettings()).options_for(path))\n"
            "    assert report.status == 'checked' and report.findings, (path, report.status)\n"
            "print(sorted(m for m in sys.modules if m.startswith(('meshlint.engine.expr.', "
            "'meshlint.engine.rules_prebuilt_extra'))))")
    configs = [ROOT / "fixtures" / "kempnerforge" / "7b_32gpu_fsdp.toml",
               ROOT / "fixtures" / "rules" / "ML820-kempnerforge-registry-name-unknown" / "bad_optimizer.toml"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), MESHLINT_CACHE_DIR=str(tmp_path))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: the compiled modules may be imported
    out = subprocess.run([sys.executable, "-c", code, *map(str, configs)], capture_output=True, text=True, env=env,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    loaded = {m.rsplit(".", 1)[1] for m in eval(out.stdout)}  # noqa: S307 - our own subprocess's list of names
    assert loaded.isdisjoint({"tokens", "parser", "nodes", "treecode", "interp", "compiler", "rules_prebuilt_extra"}), \
        loaded  # nor the rules' docs and trees (meshlint/engine/prebuilt.py: rules_prebuilt_extra)


def test_a_run_on_one_dialect_imports_only_its_part(tmp_path):
    import subprocess
    import sys

    code = ("import sys\nfrom meshlint.cli.settings import CliSettings, Planner\nfrom meshlint.engine import check\n"
            "path = sys.argv[1]\nreport = check.check_file(path, Planner(CliSettings()).options_for(path))\n"
            "assert report.status == 'checked', report.status\n"
            "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('meshlint.engine.rules_compiled.')))")
    config = ROOT / "fixtures" / "kempnerforge" / "7b_32gpu_fsdp.toml"
    env = dict(os.environ, PYTHONPATH=str(ROOT), MESHLINT_CACHE_DIR=str(tmp_path))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: the compiled modules may be imported
    out = subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["['common',", "'kempnerforge']"]


def test_it_is_installed_only_where_its_bytecode_is_cached_or_may_be_written(tmp_path, monkeypatch):
    import importlib.util
    import py_compile
    import sys

    source = tmp_path / "module.py"
    source.write_text("X = 1\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert prebuilt._bytecode_ready(str(source))  # the first import writes it
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert not prebuilt._bytecode_ready(str(source))  # every run would compile 1.5 MB of source
    py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)))
    assert prebuilt._bytecode_ready(str(source))  # installed: pip compiled it
    source.write_text("X = 22\n")
    assert not prebuilt._bytecode_ready(str(source))  # stale bytecode is compiled again by the import


def test_a_stale_compiled_module_is_not_installed(monkeypatch):
    monkeypatch.setattr(rules_compiled, "FINGERPRINT", ("stale",))
    monkeypatch.setattr(expr.expression, "COMPILED", {})
    prebuilt._install_compiled(prebuilt.fingerprint(rules.builtin_rules_dir(), "0"))
    expr.expression.compiled_for(None)
    assert expr.expression.COMPILED == {}


def test_a_stale_part_is_not_installed(monkeypatch):
    # a part left from another build (its fingerprint differs from the index's): its expressions are interpreted
    monkeypatch.setattr(prebuilt, "_bytecode_ready", lambda source: True)
    monkeypatch.setattr(_parts()["kempnerforge"], "FINGERPRINT", ("stale",))
    monkeypatch.setattr(expr.expression, "COMPILED", {})
    prebuilt._install_compiled(rules_compiled.FINGERPRINT)
    expr.expression.compiled_for("kempnerforge")
    assert set(expr.expression.COMPILED) == set(_parts()["common"].COMPILED)


@functools.lru_cache(maxsize=None)
def _expr(source: str, mode: str) -> expr.Expr:
    """One Expr per source and way (evaluating keeps no state in it but the function it runs)."""
    fresh = expr.parse(source)
    if mode == "compiled":
        fn, size, _ = ALL_COMPILED[source]
        assert size == fresh.size  # the budget charged up front is the interpreter's
        fresh._fn = fn
    else:
        fresh._fn = interp._compile(fresh.root)
    return fresh


def _template(template, mode: str):
    return expr.Template(template.source, tuple(p if isinstance(p, str) else _expr(p.source, mode)
                                                for p in template.parts))


def _outcome(thunk, env) -> tuple:
    try:
        value = ("value", repr(thunk()))
    except expr.NeedFact as need:
        value = ("needs", need.path)
    except expr.EvalError as exc:
        value = ("error", str(exc))
    budget = env.budget
    return value + (budget.left, budget.mem, budget.lets)


def run_rule(rule, facts: dict, mode: str) -> list:
    """Everything the engine evaluates of a rule (check, when, foreach, lets, messages, keys, help), in order."""
    lets = {name: _expr(e.source, mode) for name, e in rule.lets.items()}
    env = expr.Env({"params": rule.params}, lets, parent=expr.Env(facts, budget=0))
    out = []
    items = [None]
    if rule.foreach is not None:
        foreach = _expr(rule.foreach.source, mode)
        out.append(_outcome(lambda: foreach.evaluate(env), env))
        try:
            items = foreach.evaluate(expr.Env({"params": rule.params}, lets, parent=expr.Env(facts, budget=0)))
        except (expr.NeedFact, expr.EvalError):
            return out
        if not isinstance(items, list):
            return out
    parts = [("when", rule.when), ("check", rule.check)] + [("help if", c) for c, _ in rule.help]
    templates = [rule.message, rule.key] + [t for _, t in rule.help]
    for item in items[:20]:
        scope = env.child({"item": item}) if rule.foreach is not None else env
        for _, e in parts:
            if e is not None:
                compiled = _expr(e.source, mode)
                out.append(_outcome(lambda: compiled.evaluate(scope), scope))
        for t in templates:
            if t is not None:
                rendered = _template(t, mode)
                out.append(_outcome(lambda: rendered.render(scope), scope))
    return out


def _fixture_facts() -> list:
    """The facts each fixture gives the rules, as a check builds them (with and without a world size)."""
    from meshlint.cli.cli_settings import CliSettings
    from meshlint.cli.settings import Planner
    from meshlint.engine import check, run

    captured = []
    real = run.run_rules

    def capture(rule_list, facts, locate):
        captured.append(copy.deepcopy(facts))
        return real(rule_list, facts, locate)

    files = sorted(p for p in (ROOT / "fixtures").rglob("*") if p.is_file() and p.suffix in (".toml", ".yaml", ".py",
                                                                                             ".sh", ".json"))
    run.run_rules = capture
    try:
        for settings_, which in ((CliSettings(), files), (CliSettings(world_size=16, gpus_per_node=4),
                                                           [p for p in files if p.suffix == ".toml"])):
            planner = Planner(settings_)
            for path in which:
                try:
                    check.check_all(str(path), planner.options_for(str(path)))
                except Exception:  # noqa: BLE001 - a fixture of bad input: whatever facts it reached are kept
                    pass
    finally:
        run.run_rules = real
    return captured


@pytest.fixture(scope="module")
def fixture_facts():
    facts, seen = [], set()
    for f in _fixture_facts():
        key = repr(f)
        if key not in seen:
            seen.add(key)
            facts.append(f)
    assert len(facts) > 300
    return facts


def test_every_builtin_rule_is_the_same_both_ways_on_every_fixture(fixture_facts):
    compared = 0
    every = ruleset.load_rules()
    for facts in fixture_facts:
        for rule in every:
            if not rule.applies_to(facts["dialect"]):  # the engine never runs it there
                continue
            interpreted = run_rule(rule, facts, "interpreted")  # no expression changes a value it reads
            compiled = run_rule(rule, facts, "compiled")
            assert compiled == interpreted, (rule.code, facts.get("dialect"))
            compared += len(compiled)
    assert compared > 50_000


# ---------------------------------------------------------------------------------- random expressions

FACTS = {"n": 8, "z": 0, "neg": -3, "big": 2**255, "f": 2.5, "t": True, "s": "tp", "long": "x" * 300, "u": None,
         "xs": [1, 2, 4, 8], "strs": ["tp", "dp", "cp"], "nested": [[1, 2], [3], []], "nulls": [1, None],
         "d": {"a": 1, "b": None, "c": [1, 2], "s": "text"}, "ds": [{"a": 1}, {"a": None}, {"b": 2}], "e": []}
LEAVES = [*FACTS, "1", "0", "2", "-1", "3.5", "'tp'", "''", "true", "false", "null", "[]", "[1, 2]", "item", "k"]
BIN = ["+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "and", "or"]
CALLS = {name: (spec.min_args, spec.max_args) for name, spec in expr.FUNCTIONS.items()}


def _expressions():
    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(BIN), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["not ", "-", "+"]), inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(inner, st.sampled_from(["a", "b", "c", "s", "x"])).map(lambda t: f"({t[0]}).{t[1]}"),
            st.tuples(inner, inner).map(lambda t: f"({t[0]})[{t[1]}]"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
            st.tuples(inner, inner, st.sampled_from(["<", "==", "<="]), inner).map(
                lambda t: f"({t[0]} < {t[1]} {t[2]} {t[3]})"),
            st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
            st.tuples(inner, inner, st.booleans(), inner).map(
                lambda t: f"[{t[0]} for item in {t[1]}" + (f" if {t[3]}]" if t[2] else "]")),
            st.tuples(inner, inner, inner).map(lambda t: f"[{t[0]} for item in {t[1]} for k in {t[2]}]"),
            st.sampled_from(sorted(CALLS)).flatmap(lambda name: st.lists(
                inner, min_size=CALLS[name][0], max_size=min(CALLS[name][1], 3)).map(
                    lambda args: f"{name}({', '.join(args)})")),
        )
    return st.recursive(st.sampled_from(LEAVES), extend, max_leaves=12)


def _both_ways(source: str, lets: dict, compact: bool = False) -> list:
    try:
        parsed = expr.parse(source)
    except expr.ExprError:
        return []
    consts: list = []
    text = compiler.function_source("f", parsed.root, consts, compact)
    assert text is not None, source
    namespace: dict = {}
    exec(compiler.PRELUDE + "".join(f"K{i} = {c}\n" for i, c in enumerate(consts))  # noqa: S102 - the test's own
         + "".join(f"F_{f} = FUNCTIONS[{f!r}]\n" for f in expr.FUNCTIONS) + text, namespace)  # compiler output
    results = []
    for mode in MODES:
        e = expr.parse(source)
        e._fn = namespace["f"] if mode == "compiled" else interp._compile(e.root)
        let_exprs = {name: expr.parse(src) for name, src in lets.items()}
        env = expr.Env({"params": {"p": 2}}, let_exprs, budget=2_000, parent=expr.Env(copy.deepcopy(FACTS), budget=0))
        results.append(_outcome(lambda: e.evaluate(env), env))
    return results


@settings(max_examples=1500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_expressions())
def test_random_expressions_are_the_same_both_ways(source):
    for compact in (False, True):  # the fast paths inline, and without them (a finding's message, key and help)
        results = _both_ways(source, {"item": "xs[1]", "k": "n + 1"}, compact)
        if results:
            assert results[0] == results[1], (source, compact)


@pytest.mark.parametrize("source", [
    "1 == n", "n.x", "null == u", "u == 1", "t and u", "u or t", "[x for x in xs if x > 2 if x < 8]",
    "[[a, b] for a in xs for b in strs if b != s]", "[x for x in nested for x in x]", "big * 2", "big + big",
    "n / z", "n // 0", "2 ** 300", "-big - big", "xs < strs", "'a' in d", "xs in ds", "long == long",
    "1 < n < 10 <= big", "1 < z < undefined", "sum([x * 2 for x in range(n)])", "join(strs, s)",
    "[k for k in range(5000) for j in range(20)]", "d.b", "ds[1].a", "nulls[1] + 1", "coalesce(u, d.b, n)",
    "str(u) + s", "len(long) if t else undefined", "item + k", "e[0]",
])
@pytest.mark.parametrize("compact", [False, True])
def test_chosen_expressions_are_the_same_both_ways(source, compact):
    results = _both_ways(source, {"item": "xs[1]", "k": "n + 1"}, compact)
    assert len(results) == 2 and results[0] == results[1], source
