"""A let read again in a loop's scope at each item is replayed, not evaluated again, only where that changes nothing.

Each item of a comprehension empties its scope's let cache (a let may read the loop variable), so a let that
reads no loop variable was evaluated again at every item. values.Env replays what its first evaluation did
(value, lets cached on the way, steps and memory charged) where the let cannot read the scope's variable and
the budget covers the whole charge. Everything here is evaluated twice, replay on and off (then every let is
evaluated as before), and must agree: values, unknown facts, errors and their messages, and the budget left.
"""

from __future__ import annotations

import copy

import pytest

from meshlint.engine import expr, ruleset
from meshlint.engine.expr import interp, values

REPLAYED = values._replayed  # the real one: each evaluation below sets it on or off

FACTS = {"n": 8, "xs": [1, 2, 4, 8], "strs": ["tp", "dp", "cp"], "u": None, "d": {"a": 1, "b": None},
         "long": "x" * 300, "nested": [[1, 2], [3], []]}
LETS = {
    "k": "n + 1",                                   # reads no loop variable: replayed
    "ys": "[x * 2 for x in xs]",                    # a list built, charged to memory
    "both": "ys + [k]",                             # a let of lets
    "uses_x": "x + 1",                              # reads the loop variable x: never replayed
    "unknown": "u + 1",                             # needs a fact that is unknown
    "words": "join(strs, long)",                    # a long string: memory
    "bad": "n / 0",                                 # an error
}
SOURCES = [
    "[k for x in xs]", "[k + x for x in xs]", "[both for x in xs]", "[uses_x for x in xs]",
    "[len(ys) + k for x in xs for y in strs]", "[x for x in xs if k > x]", "[unknown for x in xs]",
    "[words for s in strs]", "[bad for x in xs]", "[[k, uses_x] for x in xs]", "[uses_x for y in xs]",
    "sum([len(both) for x in range(50)])", "[len(words) for x in range(30)]", "[[k for y in ys] for x in xs]",
    "[ys for x in nested]", "[both[i] for i in range(len(both))]",
    "[[uses_x for y in ys] for x in xs]", "[[uses_x + k for y in strs] for x in xs]",  # x bound a scope up
    "[[k + y for y in ys] for x in xs] + [k]", "[[len(both) for y in range(x)] for x in xs]",
    "[k for y in xs] + [k for n in xs]", "[[k for n in xs] for y in xs]",  # a loop variable n hides the fact k reads
]


def _outcome(source: str, budget: int, replay: bool, compiled: bool, monkeypatch) -> tuple:
    monkeypatch.setattr(values, "_replayed", REPLAYED if replay else lambda env, done: False)
    e = expr.parse(source)
    if compiled:
        from meshlint.engine.expr import compiler

        consts: list = []
        text = compiler.function_source("f", e.root, consts)
        namespace: dict = {}
        exec(compiler.PRELUDE + "".join(f"K{i} = {c}\n" for i, c in enumerate(consts))  # noqa: S102 - the test's
             + "".join(f"F_{f} = FUNCTIONS[{f!r}]\n" for f in expr.FUNCTIONS) + text, namespace)  # own compiler output
        e._fn = namespace["f"]
    else:
        e._fn = interp._compile(e.root)
    env = expr.Env({"params": {}}, {name: expr.parse(s) for name, s in LETS.items()}, budget=budget,
                   parent=expr.Env(copy.deepcopy(FACTS), budget=0))
    try:
        value = ("value", repr(e.evaluate(env)))
    except expr.NeedFact as need:
        value = ("needs", need.path)
    except expr.EvalError as exc:
        value = ("error", str(exc))
    return value + (env.budget.left, env.budget.mem, env.budget.lets)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("source", SOURCES)
def test_a_replayed_let_is_what_evaluating_it_again_gives(source, compiled, monkeypatch):
    # every budget that runs out before, during or after the loop: some replay meets a budget too small for it
    for budget in (10_000, *range(1, 400)):
        on = _outcome(source, budget, True, compiled, monkeypatch)
        off = _outcome(source, budget, False, compiled, monkeypatch)
        assert on == off, (source, budget)


def test_an_invariant_let_is_replayed_and_one_reading_the_loop_variable_is_not(monkeypatch):
    replays = []
    monkeypatch.setattr(values, "_replayed", lambda env, done: replays.append(done[0]) or REPLAYED(env, done))
    env = expr.Env({}, {name: expr.parse(s) for name, s in LETS.items()}, budget=10_000,
                   parent=expr.Env(copy.deepcopy(FACTS), budget=0))
    assert expr.parse("[k + uses_x for x in xs]").evaluate(env) == [11, 12, 14, 18]
    assert replays == [9, 9, 9]  # k at the 2nd, 3rd and 4th item; uses_x (reads x) is never recorded


def test_every_builtin_rule_is_the_same_with_and_without_replay(monkeypatch):
    # the rules of KempnerForge's [vlm] and [data] checks read lets in loops (ML855, ML859): the fixtures' facts
    from test_expr_compiled import _fixture_facts, run_rule

    every = ruleset.load_rules()
    facts_list = [f for f in _fixture_facts() if f.get("dialect") == "kempnerforge"]
    assert len(facts_list) > 40
    compared = 0
    for facts in facts_list:
        for rule in every:
            if not rule.applies_to("kempnerforge") or not rule.lets:
                continue
            outcomes = []
            for replay in (True, False):
                monkeypatch.setattr(values, "_replayed", REPLAYED if replay else lambda env, done: False)
                outcomes.append(run_rule(rule, facts, "compiled"))
            assert outcomes[0] == outcomes[1], rule.code
            compared += len(outcomes[0])
    assert compared > 1000
