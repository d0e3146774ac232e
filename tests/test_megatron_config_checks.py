"""ML982's evaluator (meshlint/frameworks/megatron/config_checks.py) against Megatron-Core 0.16.1's own
ModelParallelConfig/TransformerConfig.__post_init__, on seeded option sets: no false alarm, no miss.

Each case starts from Megatron-LM's option defaults (flags_core_0_16.json) and a small valid model, then sets
a few of the options the generated checks read to values drawn from the checks' own literals, the defaults and
small numbers. The real class is built in a subprocess (tests/real_megatron_worker.py, mode ``config``) from
every option that has a config field of the same name, except the ones core_transformer_config_from_args sets
otherwise (those keep the class default, as the table assumes nothing of them).
"""

from __future__ import annotations

import ast
import json
import random

import pytest

from meshlint.frameworks.megatron import config_checks, flags
from tests.test_real_megatron import WHEEL, _absent_core, _run

SEED = 20261127
N = 800
BASE = {"num_layers": 8, "hidden_size": 256, "num_attention_heads": 8, "ffn_hidden_size": 1024,
        "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "context_parallel_size": 1,
        "apply_rope_fusion": False}  # the fused RoPE needs Transformer Engine, which the CPU test has not


def _table() -> dict:
    return json.loads(config_checks.TABLE.read_text(encoding="utf-8"))


def _options_only() -> dict:
    """The table less the checks replayed from the parsed options over validate_args and the build (those need
    Megatron-LM's parser and validate_args: tests/test_megatron_pipeline_checks.py)."""
    table = _table()
    return {**table, "checks": [c for c in table["checks"] if c.get("replay") != config_checks.PIPELINE]}


def _pools(checks: list) -> dict:
    """option -> values worth trying: the literals its checks compare it with, its default, and small ones."""
    literals: dict = {}
    for c in checks:
        for node in ast.walk(ast.parse(c["condition"], mode="eval")):
            if isinstance(node, ast.Compare):
                parts = [node.left, *node.comparators]
                names = [p.attr for p in parts if isinstance(p, ast.Attribute)]
                consts = [e.value for p in parts for e in ([p] if isinstance(p, ast.Constant) else
                                                          p.elts if isinstance(p, (ast.List, ast.Tuple)) else [])
                          if isinstance(e, ast.Constant)]
                for n in names:
                    literals.setdefault(c["args"].get(n, n), set()).update(
                        v for v in consts if v is not None and not isinstance(v, bool))
    defaults = flags.defaults()
    pools = {}
    for c in checks:
        for dest in c["args"].values():
            d = defaults.get(dest)
            if isinstance(d, bool):
                pools[dest] = [True, False]
            elif dest in ("offload_modules", "recompute_modules"):
                pools[dest] = [None, [], ["core_attn"], ["attn_proj"], ["attn_proj", "core_attn"]]
            else:
                pool = ({0, 1, 2, 4, -1} if isinstance(d, int) else {None, 0, 1, 2, 4, -1}) | literals.get(dest, set())
                if isinstance(d, str) or any(isinstance(v, str) for v in literals.get(dest, ())):
                    pool = {None, *literals.get(dest, set()), d}
                pools[dest] = sorted(pool, key=repr)
    return pools


def _cases(table: dict, n: int) -> list:
    rng = random.Random(SEED)
    defaults = flags.defaults()
    pools = _pools(table["checks"])
    names = sorted(pools)
    cases = []
    for i in range(n):
        args = {**defaults, **BASE, "pipeline_model_parallel_size": rng.choice([1, 2]),
                "tensor_model_parallel_size": rng.choice([1, 2])}
        # every other case aims at one check: every option it reads drawn from its pool
        target = table["checks"][(i // 2) % len(table["checks"])] if i % 2 else None
        aim = sorted(set(target["args"].values())) if target else []
        for dest in aim + rng.sample(names, rng.randint(0 if aim else 1, 3)):
            args[dest] = rng.choice(pools[dest])
        for _ in range(20 if target else 0):  # re-draw what an earlier check reads, so the target is reached
            fired = config_checks.refusals(args)
            if not fired or fired[0]["site"] == target["site"]:
                break
            earlier = next(c for c in table["checks"] if c["site"] == fired[0]["site"])
            free = sorted(set(earlier["args"].values()) - set(aim)) or sorted(set(earlier["args"].values()))
            dest = rng.choice(free)
            args[dest] = rng.choice(pools[dest])
        cases.append(args)
    return cases


def _kw(args: dict, fields: set) -> dict:
    return {k: v for k, v in args.items() if k in fields}


@pytest.fixture(scope="module")
def verdicts():
    why = _absent_core()
    if why:
        pytest.skip(why)
    table = _options_only()
    cases = _cases(table, N)
    fields = set(table["config_fields"]) - set(table["overridden"])
    real = _run("config", [{"kw": _kw(a, fields)} for a in cases], [WHEEL])
    return table, cases, real


def _where(site: str) -> tuple:
    file, _, line = site.rpartition(":")
    return file, int(line)


def _statement(table: dict, file: str | None, line: int | None) -> tuple | None:
    """The modelled site whose statement holds (file, line) of a traceback, else (file, line) itself."""
    for c in table["checks"]:
        f, first = _where(c["site"])
        if f == file and first <= line <= c["end_line"]:
            return f, first
    return None if file is None else (file, line)


def test_ml982_verdicts_equal_the_real_config_classes(verdicts):
    table, cases, real = verdicts
    modelled = {_where(c["site"]) for c in table["checks"]}
    fired = agreed_refused = agreed_clean = 0
    sites = set()
    for args, got in zip(cases, real):
        ours = config_checks.refusals(args)
        where = _statement(table, got["file"], got["line"]) if got["error"] else None
        if ours:  # no false alarm: the class refuses, at our first site or at an earlier check we do not model
            fired += 1
            assert got["error"], f"ML982 fires {ours[0]['site']} but TransformerConfig accepts {args}"
            first = _where(ours[0]["site"])
            assert where == first or where not in modelled, (ours[0], got)
            agreed_refused += where == first
            sites.add(where)
        elif where in modelled and got["error"].startswith(("ValueError", "AssertionError")):
            # no miss: a modelled site the class refuses at is one we report (a TypeError/ZeroDivisionError there
            # is the check crashing on a value, which the evaluator leaves undecided)
            pytest.fail(f"TransformerConfig raises at {where} ({got['error']}) and ML982 says nothing: {args}")
        else:
            agreed_clean += not got["error"]
    # the seeded cases exercise both sides, most of them decided on the same site
    assert agreed_refused >= N // 10 and agreed_clean >= N // 10, (fired, agreed_refused, agreed_clean)
    assert len(sites & modelled) >= len(modelled) // 2, sorted(modelled - sites)
    # the checks replayed over the slice of __post_init__ before them are among those agreed on
    replayed = {_where(c["site"]) for c in table["checks"] if c.get("replay")}
    assert len(sites & replayed) >= len(replayed) // 2, sorted(replayed - sites)


def test_every_site_the_table_decides_is_open_or_ml982_in_the_inventory():
    from meshlint.generate import megatron_refusals as refusals

    doc = refusals.DOC.read_text(encoding="utf-8")
    for c in _table()["checks"]:
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{c['site']}` |"))
        assert "| rule ML982 |" in row or "| partial ML982 |" in row, row


def test_evaluator_refuses_to_guess():
    from meshlint.frameworks.megatron.config_checks import Undecided, evaluate

    def field(name):
        if name == "unknown":
            raise Undecided(name)
        return {"a": 3, "b": None, "s": "flex", "l": ["x"]}[name]

    def ev(text):
        return evaluate(ast.parse(text, mode="eval").body, field)

    assert ev("self.a % 2 == 1 and self.b is None and 'x' in self.l and len(self.l) == 1")
    assert ev("self.s not in ['alltoall', 'flex']") is False
    assert ev("self.b is not None and self.unknown > 0") is False  # short circuit: never read
    assert ev("isinstance(self.l, list) and all(isinstance(x, str) for x in self.l)")
    for text in ("self.unknown", "self.a > self.b", "F.gelu == self.a", "isinstance(self.a, Fp8Recipe)",
                 "self.a / 0", "str(self.a)"):
        with pytest.raises(Undecided):
            ev(text)


def test_an_unknown_option_leaves_its_checks_undecided():
    args = {**flags.defaults(), **BASE, "defer_embedding_wgrad_compute": True}
    fired = [r["site"] for r in config_checks.refusals(args, given=["defer_embedding_wgrad_compute"])]
    assert fired == ["megatron/core/model_parallel_config.py:426"]
    assert config_checks.refusals(args, unknown=["pipeline_model_parallel_size"]) == []
    assert config_checks.refusals(args, given=["defer_embedding_wgrad_compute"])[0]["key"] == \
        "defer_embedding_wgrad_compute"


def test_the_generated_table_is_the_checkouts():
    import os
    from pathlib import Path

    from meshlint.generate import megatron_config_checks as generator

    root = os.environ.get("MEGATRON_LM_ROOT")
    if not root or not (Path(root) / generator.ARGS).is_file():
        pytest.skip("the table reads megatron/training of a checkout at core_v0.16.1 too: set MEGATRON_LM_ROOT")
    built, committed = json.loads(json.dumps(generator.build(Path(root)), default=repr)), _table()
    assert {**built, "commit": None} == {**committed, "commit": None}, \
        "config_checks_0_16.json is stale: python -m meshlint.generate.megatron_config_checks ROOT"
