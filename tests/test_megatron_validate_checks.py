"""ML983 (validate_args' refusals, meshlint/frameworks/megatron/validate_checks.py) against Megatron-LM's own
validate_args at core_v0.16.1, on seeded option sets: no false alarm, no miss, the same site.

Each case is a small valid model on a launch line plus, for a few checks of the generated table, the options
they and the statements before them read, set to values drawn from the checks' own literals, the defaults and
small numbers. The real parser and validate_args run in a subprocess (tests/real_megatron_worker.py, mode
``vargs``); it reports the line of validate_args where it raised. ML983 must report nothing before that line,
report that line where it is one of its checks, and nothing at all where validate_args accepts the options.
validate_args is in Megatron-LM's megatron/training, which the megatron-core wheel does not ship: the
comparison runs where MEGATRON_LM_ROOT names a checkout at core_v0.16.1 (CI has none: it skips, saying so).
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
from pathlib import Path

import pytest

from meshlint.frameworks.megatron import flags, validate_checks
from tests.test_real_megatron import _absent_lm, _run

SEED = 20261128
N = 800
BASE = {"--num-layers": "8", "--hidden-size": "256", "--num-attention-heads": "8", "--seq-length": "128",
        "--max-position-embeddings": "128", "--micro-batch-size": "1", "--global-batch-size": "16"}
# options whose value makes validate_args read a file or leave validate_args (validate_yaml, a JSON config, exit()),
# or that initialize_megatron acts on first (a checkpoint's options: the worker runs validate_args alone)
NOT_VARIED = {"yaml_cfg", "heterogeneous_layers_config_path", "heterogeneous_layers_config_encoded_json",
              "result_rejected_tracker_filename", "world_size", "rank", "checkpoint_activations",
              "use_checkpoint_args"}
SITE = re.compile(r"\((megatron/training/arguments\.py):(\d+): `")


def _table() -> dict:
    return json.loads(validate_checks.TABLE.read_text(encoding="utf-8"))


def _reads(source: str | None) -> list:
    if not source:
        return []
    return [n.attr for n in ast.walk(ast.parse(source, mode="eval")) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "args"]


def _varied(table: dict) -> dict:
    """check site -> the options it and the statements it depends on read, that a case may set."""
    entries = _entries()
    converted, no_default = validate_checks.unmodelled()
    out = {}
    for c in table["checks"]:
        names = _reads(c["condition"]) + [r for g in c["needs_guards"] for r in _reads(table["guards"][str(g)]["test"])]
        names += [r for s in c["needs_steps"] for r in _reads(table["steps"][str(s)]["value"])]
        out[c["site"]] = sorted({n for n in names if n in entries and n not in NOT_VARIED and n not in converted
                                 and n not in no_default})
    return out


def _entries() -> dict:
    """dest -> [(flag, entry)] of the core parser."""
    out: dict = {}
    for flag, entry in flags.table()["flags"].items():
        if "extra" not in entry and flag.startswith("--"):
            out.setdefault(entry["dest"], []).append((flag, entry))
    return out


def _literals(table: dict) -> dict:
    """dest -> the constants its checks compare it with."""
    out: dict = {}
    sources = [c["condition"] for c in table["checks"]] + [g["test"] for g in table["guards"].values()]
    for source in sources:
        for node in ast.walk(ast.parse(source, mode="eval")):
            if isinstance(node, ast.Compare):
                parts = [node.left, *node.comparators]
                names = [p.attr for p in parts if isinstance(p, ast.Attribute) and isinstance(p.value, ast.Name)]
                consts = [p.value for p in parts if isinstance(p, ast.Constant)]
                consts += [e.value for p in parts if isinstance(p, (ast.List, ast.Tuple)) for e in p.elts
                           if isinstance(e, ast.Constant)]
                for n in names:
                    out.setdefault(n, set()).update(c for c in consts if c is not None)
    return out


def _words(dest: str, rng: random.Random, literals: dict, entries: dict, p_flag: float = 0.35) -> list:
    """The words of one option set to a random value (none: left at its default)."""
    options = entries[dest]
    kinds = {e["kind"]: (f, e) for f, e in options}
    for kind in ("store_true", "store_false"):
        if kind in kinds:
            return [kinds[kind][0]] if rng.random() < p_flag else []
    if "bool_optional" in kinds:
        flag, _ = kinds["bool_optional"]
        return [rng.choice([flag, "--no-" + flag[2:]])] if rng.random() < 0.7 else []
    flag, e = next(((f, e) for f, e in options if e["kind"] == "store"), (None, None))
    if flag is None or rng.random() < 0.25:
        return []
    kind = e["type"]
    lits = [v for v in literals.get(dest, ()) if not isinstance(v, bool)]
    if e["choices"]:
        pool = list(e["choices"])
    elif kind == "int":
        pool = [v for v in lits if isinstance(v, int)] + [0, 1, 2, 3, 4, 8, 256, -1]
    elif kind == "float":
        pool = [v for v in lits if isinstance(v, (int, float))] + [0.0, 0.5, 1.0, 2.0]
    else:
        pool = [v for v in lits if isinstance(v, str)] + ["x"]
    nargs = e["nargs"]
    count = nargs if isinstance(nargs, int) else rng.choice([1, 2]) if nargs in ("+", "*") else 1
    return [flag] + [str(rng.choice(pool)) for _ in range(count)]


def _cases(n: int) -> list:
    rng = random.Random(SEED)
    table = _table()
    return launches(n, rng, _varied(table), _literals(table), BASE)


def launches(n: int, rng: random.Random, varied: dict, literals: dict, base: dict, p_other: float = 0.7,
             extra=None, every: int = 2) -> list:
    """n launch lines (argv, world): a small valid model (``base``) on tp and pp, then for one check (all cases
    but every ``every``-th; all of them where ``every`` is 1) or a few, the options ``varied`` names for it, drawn by _words; ``extra(words, rng)``
    adds more."""
    entries = _entries()
    sites = [s for s, names in varied.items() if names]
    out = []
    while len(out) < n:
        tp, pp = rng.choice([1, 1, 2, 4]), rng.choice([1, 1, 2, 4])
        words: dict = {**base, "--tensor-model-parallel-size": [str(tp)], "--pipeline-model-parallel-size": [str(pp)]}
        words = {k: v if isinstance(v, list) else [v] for k, v in words.items()}
        if extra:
            extra(words, rng)
        focused = every == 1 or len(out) % every != 0  # a case aimed at one check: its flags mostly on, to reach it
        for site in rng.sample(sites, 1 if focused else rng.randint(1, 4)):
            for dest in varied[site]:
                if rng.random() < (0.9 if focused else p_other):
                    got = _words(dest, rng, literals, entries, 0.75 if focused else 0.35)
                    if got:
                        words[got[0]] = got[1:]
        argv = [w for flag, values in words.items() for w in (flag, *values)]
        out.append({"argv": argv, "world": tp * pp * rng.choice([1, 2])})
    return out


def _fired(case: dict, rules) -> list:
    from meshlint.engine.check import Options, run_checks
    from meshlint.engine.units import analyse_launch
    from meshlint.inputs.launch import parse_launch_args

    launch = parse_launch_args(["torchrun", f"--nproc_per_node={case['world']}", "pretrain_gpt.py", *case["argv"]])
    report = run_checks(analyse_launch(launch, Options(rules=rules)), Options(rules=rules))
    return sorted(int(m.group(2)) for f in report.findings if f.code == "ML983" for m in [SITE.search(f.message)] if m)


def test_verdicts_match_validate_args():
    why = _absent_lm()
    if why:
        pytest.skip(why)
    from meshlint.engine.ruleset import load_rules

    rules = [r for r in load_rules() if r.code == "ML983"]
    ends = {c["line"]: c["end_line"] for c in _table()["checks"]}
    cases = _cases(N)
    path = [os.environ["MEGATRON_LM_ROOT"]] + ([os.environ["MEGATRON_LM_DEPS"]] if os.environ.get("MEGATRON_LM_DEPS")
                                               else [])
    real = _run("vargs", cases, path)
    same = passed = other = 0
    sites: set = set()
    for case, got in zip(cases, real):
        if got["error"] == "parser":
            continue
        fired = _fired(case, rules)
        if got["error"] is None:
            assert not fired, f"ML983 fires {fired} but validate_args accepts {case}"
            passed += 1
            continue
        line = got["line"]
        assert line is not None, (case, got)
        early = [s for s in fired if ends[s] < line]
        assert not early, f"ML983 fires {early} before validate_args' refusal at line {line} ({got['error']}): {case}"
        site = next((s for s in ends if s <= line <= ends[s]), None)
        if site is None or not got["error"].startswith(("AssertionError", "ValueError", "RuntimeError")):
            # refused by a check ML983 does not hold (another rule's, the GPU's, a package's), or a crash while
            # evaluating a check (a ZeroDivisionError, a TypeError): not the check's refusal, which ML983 reports
            other += 1
            continue
        assert site in fired, f"validate_args refuses at line {site} ({got['error']}) and ML983 says nothing: {case}"
        same += 1
        sites.add(site)
    print(f"validate_args vs ML983: {same} refusals at the same site ({len(sites)} different sites), {passed} "
          f"accepted by both, {other} refused by a check ML983 does not hold")
    assert same >= N // 4 and passed >= N // 20, (same, passed, other)


def test_every_check_is_in_the_inventory_as_ML983():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "refusals-megatron.md").read_text(encoding="utf-8")
    for c in _table()["checks"]:
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{c['site']}` |"))
        assert "| rule ML983 |" in row, row


def examples_gain_no(code: str) -> None:
    """Megatron-LM's own example launch scripts (examples/ of the checkout) get no ``code`` finding."""
    root = os.environ.get("MEGATRON_LM_ROOT")
    if not root or not (Path(root) / "examples").is_dir():
        pytest.skip("Megatron-LM's examples are in the checkout, not in the wheel: set MEGATRON_LM_ROOT")
    from meshlint.engine.check import Options, check_file
    from meshlint.engine.ruleset import load_rules

    options = Options(rules=[r for r in load_rules() if r.code == code])
    checked = 0
    for path in sorted((Path(root) / "examples").rglob("*.sh")):
        report = check_file(str(path), options)
        checked += report.status == "checked"
        fired = [f"{f.line}: {f.message}" for f in report.findings if f.code == code]
        assert not fired, f"{path}: {fired}"
    assert checked >= 5, checked


def test_megatron_lm_example_scripts_gain_no_ML983_finding():
    """Megatron-LM's own example launch scripts pass validate_args' checks ML983 decides (none of them is
    refused by validate_args at a check ML983 holds)."""
    examples_gain_no("ML983")


def _sites(world=8, unknown=(), entry=None, **options) -> list:
    args = {**flags.defaults(), "num_layers": 8, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 128,
            "max_position_embeddings": 128, "micro_batch_size": 1, **options}
    return [int(r["site"].rsplit(":", 1)[1]) for r in validate_checks.refusals(args, unknown, options, world, entry)]


def test_checks_see_the_values_validate_args_has_set_by_their_line():
    # --recompute-activations becomes --recompute-granularity selective (arguments.py:430-431), which refuses
    # a recompute method at :900
    assert _sites(recompute_activations=True, recompute_method="uniform") == [900]
    assert _sites(recompute_method="uniform") == []
    # --enable-cuda-graph becomes --cuda-graph-impl local (:442-446): with ep > 1 that asks for padded experts (:1159)
    assert 1159 in _sites(enable_cuda_graph=True, expert_model_parallel_size=2, num_experts=4)
    assert 1159 not in _sites(expert_model_parallel_size=2, num_experts=4)
    # the global batch validate_args derives from micro batch x dp (:497-498) needs the world
    assert _sites(micro_batch_size=0, world=8) == [496, 500]
    assert _sites(micro_batch_size=0, world=None) == [496]


def test_what_cannot_be_known_is_never_guessed():
    assert _sites(save="/ckpt") == [838]
    assert _sites(save="/ckpt", unknown=["save_interval"]) == []
    assert _sites(save="/ckpt", yaml_cfg="run.yaml") == []   # validate_yaml runs instead (initialize.py:89-92)
    # --checkpoint-activations exits before every later check: those hold only where it is not given
    assert _sites(save="/ckpt", checkpoint_activations=True) == []
    # --no-load-optim is None unless given; an entry script's args_defaults may fill it (arguments.py:457-466):
    # pretrain_gpt.py passes only tokenizer_type, an entry meshlint does not know may pass it
    assert _sites(load_main_params_from_ckpt=True, no_load_optim=None, entry="pretrain_gpt.py") == [1136]
    assert _sites(load_main_params_from_ckpt=True, no_load_optim=None, entry="my_train.py") == []
    # --use-checkpoint-args loads options from the checkpoint before validate_args (initialize.py:76-83)
    assert _sites(save="/ckpt", use_checkpoint_args=True, load="/ckpt") == []


def test_the_generated_table_is_the_checkouts():
    root = os.environ.get("MEGATRON_LM_ROOT")
    if not root or not (Path(root) / "megatron" / "training" / "arguments.py").is_file():
        pytest.skip("the table is generated from megatron/training of a checkout at core_v0.16.1: set MEGATRON_LM_ROOT")
    from meshlint.generate import megatron_validate_checks as generator

    built = json.loads(json.dumps(generator.build(Path(root)), sort_keys=True))
    committed = _table()
    for table in (built, committed):
        table.pop("commit")  # a git checkout names its commit, an exported tree none
    assert built == committed, "validate_checks_0_16.json is stale: python -m meshlint.generate.megatron_validate_checks ROOT"


def test_a_negated_assert_not_reads_without_double_negation():
    # Megatron-LM#2164: `assert not args.use_distributed_optimizer` under `if 'muon' in args.optimizer`
    args = {**flags.defaults(), "num_layers": 8, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 128,
            "max_position_embeddings": 128, "micro_batch_size": 1, "optimizer": "dist_muon",
            "use_distributed_optimizer": True}
    found = [r for r in validate_checks.refusals(args, (), {"optimizer", "use_distributed_optimizer"}, 8)
             if r["site"].endswith(":1184")]
    assert [r["condition"] for r in found] == ["'muon' in args.optimizer and args.use_distributed_optimizer"]
    readable = validate_checks.readable
    assert readable("a and not (not (x or y))") == "a and (x or y)"
    assert readable("not (not x.y == 2) and not (not f(a, ')'))") == "x.y == 2 and f(a, ')')"
    # kept: what binds to what would change, a word that only ends in "not", a condition the inventory cut short
    assert readable("a and not (not x or y)") == "a and not (not x or y)"
    assert readable("cannot (not x)") == "cannot (not x)"
    assert readable("a and not (not x…") == "a and not (not x…"
    assert readable("a and not (not f('x)…") == "a and not (not f('x)…"
    # the word test skips strings and refuses a string left open
    assert validate_checks._no_top_level_words("f('a and b') == \"or\"")
    assert not validate_checks._no_top_level_words("x == 'abc")
