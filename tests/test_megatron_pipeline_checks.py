"""ML982's checks replayed from the parsed options (``replay: pipeline`` in config_checks_0_16.json: validate_args
to its end, core_transformer_config_from_args, then __post_init__ up to the site) against the real thing.

With MEGATRON_LM_ROOT (a Megatron-LM checkout at core_v0.16.1), Megatron-LM's parser, validate_args and
core_transformer_config_from_args (TransformerConfig's __post_init__ runs in it) run in a subprocess
(tests/real_megatron_worker.py, mode ``build``) on seeded launch lines aimed at these checks; meshlint reads the
same launch line. Where the build refuses at a site meshlint models, meshlint reports that site and nothing the
build reaches before it; where it accepts, meshlint reports no ML982 finding. The tests below it need no checkout.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re

import pytest

from meshlint.frameworks.megatron import config_checks, flags, pyexpr, validate_checks
from tests.test_megatron_validate_checks import (NOT_VARIED, _entries, _literals, _reads, examples_gain_no,
                                                launches)
from tests.test_real_megatron import _absent_lm, _run

SEED = 20261129
N = 600
TRIES = 60
BASE = {"--num-layers": ["8"], "--hidden-size": ["256"], "--num-attention-heads": ["8"], "--seq-length": ["128"],
        "--max-position-embeddings": ["128"], "--micro-batch-size": ["1"], "--global-batch-size": ["16"]}
SITE = re.compile(r"\((megatron/[\w/]+\.py:\d+): `")


def _table() -> dict:
    return json.loads(config_checks.TABLE.read_text(encoding="utf-8"))


def _pipeline(table: dict) -> list:
    return [c for c in table["checks"] if c.get("replay") == config_checks.PIPELINE]


def _varied(table: dict) -> dict:
    """check site -> the parser's options its slice reads, that a case may set."""
    entries = _entries()
    converted, no_default = validate_checks.unmodelled()
    walk = table["replays"][config_checks.PIPELINE]
    out = {}
    for c in _pipeline(table):
        names = _reads(c["condition"]) + [r for g in c["needs_guards"] for r in _reads(walk["guards"][str(g)]["test"])]
        names += [r for s in c["needs_steps"] for r in _reads(walk["steps"][str(s)]["value"])]
        conv = _converters()  # words the table converts
        modelled = set(conv["lambdas"]) | set(conv["enums"]) | set(conv.get("patterns", ()))
        out[c["site"]] = sorted({n for n in names if n in entries and n not in NOT_VARIED and (
            n in modelled or (n not in converted and n not in no_default))})
    return out


def _converters() -> dict:
    return validate_checks.table()["converters"]


def _cases(n: int) -> list:
    """n seeded launch lines, most aimed at one pipeline check, then for each pipeline check meshlint has not
    seen refuse first among them, the first of up to TRIES more lines aimed at it that meshlint says it refuses
    (the real build then says whether that is right)."""
    rng = random.Random(SEED)
    varied, literals, extra = _pools()
    cases = launches(n, rng, varied, literals, BASE, 0.6, extra, every=4)
    seen = {first for first in map(_first, cases) if first}
    for site in sorted(set(varied) - seen):
        if not varied[site]:
            continue
        for _ in range(TRIES):
            case = launches(1, rng, {site: varied[site]}, literals, BASE, 0.6, extra, every=1)[0]
            if _first(case) == site:
                cases.append(case)
                break
    return cases


def _pattern_cases() -> list:
    """Lines at the per-layer pattern options' checks (:1966, :1975 no-RoPE; :1760 MoE layers and the mlp CUDA
    graph), which the seeded lines seldom reach first: ints, list expressions of right and wrong lengths, words
    the parser refuses."""
    base = ["--num-layers", "12", "--hidden-size", "256", "--num-attention-heads", "8", "--seq-length", "128",
            "--max-position-embeddings", "128", "--micro-batch-size", "1", "--no-rope-fusion"]
    rope = ["5", "4", "3", "0", "[1]+[0]*11", "[1]+[0]*10", "([0]*3+[1])*3", "([0]*3+[1])*2", "(1,0)*6", "[1] * 12"]
    moe = ["1", "2", "[1]*12", "[0]+[1]*11"]
    return [{"world": 8, "argv": base + ["--no-rope-freq", w]} for w in rope] + [
        {"world": 8, "argv": base + ["--num-experts", "4", "--moe-layer-freq", w, "--cuda-graph-impl", "local",
                                     "--cuda-graph-scope", "mlp"]} for w in moe]


def _first(case: dict) -> str | None:
    """The first ML982 site meshlint reports for the case where validate_args (ML983) refuses nothing."""
    from meshlint.engine.check import Options
    from meshlint.engine.units import analyse_launch
    from meshlint.inputs.launch import parse_launch_args

    launch = parse_launch_args(["torchrun", f"--nproc_per_node={case['world']}", "pretrain_gpt.py", *case["argv"]])
    spec = analyse_launch(launch, Options(rules=[])).spec
    if spec is None:
        return None
    e = spec.extra
    if validate_checks.refusals(e["parsed"], e["unknown"], e["given"], case["world"], e["entry"]):
        return None
    fired = config_checks.refusals(e["args"], e["unknown"], e["given"], e["parsed"], case["world"], e["entry"])
    order = _table()["order"]
    return min((r["site"] for r in fired), key=lambda s: order.get(s, 0), default=None)


def _pools() -> tuple:
    """(check site -> the options its slice reads, option -> literals worth trying, an extra for each line)."""
    table = _table()
    walk = table["replays"][config_checks.PIPELINE]
    varied = _varied(table)
    literals = _literals({"checks": _pipeline(table), "guards": walk["guards"]})
    conv = _converters()
    for dest, cls in [*conv["enums"].items(), *((d, next((c for c in conv["members"] if c in lam["body"]), None))
                                               for d, lam in conv["lambdas"].items())]:
        literals.setdefault(dest, set()).update(conv["members"].get(cls, ()))  # the enum's members by name

    for dest in conv.get("patterns", ()):  # per-layer patterns: an int, or a list expression of some length
        literals.setdefault(dest, set()).update({"2", "3", "4", "5", "[0,1]*4", "([0]*3+[1])*2", "[1]+[0]*7"})

    def no_rope_fusion(words, rng):
        if rng.random() < 0.7:  # the fused RoPE needs Transformer Engine, which this CPU run has not (:1550)
            words["--no-rope-fusion"] = []
    return varied, literals, no_rope_fusion


def _fired(case: dict, rules) -> tuple[list, list]:
    """(ML982's sites, ML983's sites) meshlint reports for the case's launch line."""
    from meshlint.engine.check import Options, run_checks
    from meshlint.engine.units import analyse_launch
    from meshlint.inputs.launch import parse_launch_args

    launch = parse_launch_args(["torchrun", f"--nproc_per_node={case['world']}", "pretrain_gpt.py", *case["argv"]])
    report = run_checks(analyse_launch(launch, Options(rules=rules)), Options(rules=rules))
    sites = {code: [m.group(1) for f in report.findings if f.code == code for m in [SITE.search(f.message)] if m]
             for code in ("ML982", "ML983")}
    return sites["ML982"], sites["ML983"]


def _statement(table: dict, where: str | None) -> str | None:
    """The modelled site whose statement holds a traceback's file:line, else that file:line."""
    if where is None:
        return None
    file, _, line = where.rpartition(":")
    for c in table["checks"]:
        f, _, first = c["site"].rpartition(":")
        if f == file and int(first) <= int(line) <= c["end_line"]:
            return c["site"]
    return where


def test_pipeline_verdicts_match_the_real_build():
    why = _absent_lm()
    if why:
        pytest.skip(why)
    from meshlint.engine.ruleset import load_rules

    rules = [r for r in load_rules() if r.code in ("ML982", "ML983")]
    table = _table()
    order, modelled = table["order"], {c["site"] for c in table["checks"]}
    pipelined = {c["site"] for c in _pipeline(table)}
    cases = _cases(N) + _pattern_cases()
    path = [os.environ["MEGATRON_LM_ROOT"]] + ([os.environ["MEGATRON_LM_DEPS"]] if os.environ.get("MEGATRON_LM_DEPS")
                                               else [])
    real = _run("build", cases, path)
    counts = {"parser": 0, "validate": 0, "accepted": 0, "same": 0, "other": 0}
    sites: dict = {}
    for case, got in zip(cases, real):
        if got["stage"] == "parser":
            counts["parser"] += 1
            continue
        if got["stage"] == "validate":  # validate_args refuses first: the config is never built (ML983's to match)
            counts["validate"] += 1
            continue
        fired, _ = _fired(case, rules)
        if got["stage"] is None:
            assert not fired, f"ML982 fires {fired} but the build accepts {case}"
            counts["accepted"] += 1
            continue
        where = _statement(table, got["site"])
        at = order.get(where)
        if at is not None:  # nothing the build passed before its refusal may fire
            early = [s for s in fired if order.get(s, 0) < at]
            assert not early, f"ML982 fires {early} before the build's refusal at {where} ({got['error']}): {case}"
        if where in modelled and got["error"].startswith(("AssertionError", "ValueError")):
            assert where in fired, f"the build refuses at {where} ({got['error']}) and ML982 says nothing: {case}"
            counts["same"] += 1
            sites[where] = sites.get(where, 0) + 1
        else:  # refused where meshlint models nothing (Transformer Engine missing, a crash on a value)
            counts["other"] += 1
    reached = sorted(set(sites) & pipelined)
    print(f"real build vs ML982 ({len(cases)} launch lines): {counts}; {len(reached)} of {len(pipelined)} "
          f"pipeline sites refused at the same site: {sites}")
    assert counts["same"] >= N // 10 and counts["accepted"] >= N // 20, counts
    assert len(reached) >= len(pipelined) // 3, sorted(pipelined - set(sites))


def test_megatron_lm_example_scripts_gain_no_ML982_finding():
    """Megatron-LM's own example launch scripts build their config: no ML982 finding."""
    examples_gain_no("ML982")


# ----------------------------------------------------------------------------- without the checkout

def _sites(world=8, **options) -> list:
    args = {**flags.defaults(), "num_layers": 8, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 128,
            "max_position_embeddings": 128, "micro_batch_size": 1, "apply_rope_fusion": False, **options}
    return [r["site"] for r in config_checks.refusals(args, (), options, args, world, "pretrain_gpt.py")]


def test_checks_see_the_options_as_validate_args_and_the_build_leave_them():
    tc = "megatron/core/transformer/transformer_config.py:"
    # --recompute-activations becomes --recompute-granularity selective (arguments.py:430-431): with
    # --distribute-saved-activations and sequence parallelism the config refuses (:1188)
    assert tc + "1188" in _sites(recompute_activations=True, distribute_saved_activations=True,
                                 sequence_parallel=True, tensor_model_parallel_size=2)
    assert tc + "1188" not in _sites(distribute_saved_activations=True, sequence_parallel=True,
                                     tensor_model_parallel_size=2)
    # --num-experts becomes num_moe_experts (arguments.py:1327): 0 is switched to None by validate_args first
    assert tc + "1052" not in _sites(num_experts=0)
    # --swiglu sets the activation to F.silu (arguments.py:1333), a token; --squared-relu with it is refused (:1339)
    assert "megatron/training/arguments.py:1339" in _sites(swiglu=True, squared_relu=True)
    assert "megatron/training/arguments.py:1339" not in _sites(squared_relu=True)


def test_nothing_is_guessed_where_the_walk_cannot_follow():
    args = {**flags.defaults(), "num_layers": 8, "hidden_size": 256, "num_attention_heads": 8,
            "swiglu": True, "squared_relu": True}
    site = "megatron/training/arguments.py:1339"
    assert site in [r["site"] for r in config_checks.refusals(args, (), args, args, 8, "pretrain_gpt.py")]
    # without the parsed options (a Megatron-Bridge recipe), an unknown option, or options from a checkpoint
    assert site not in [r["site"] for r in config_checks.refusals(args, (), args)]
    assert site not in [r["site"] for r in config_checks.refusals(args, ["swiglu"], args, args, 8, "pretrain_gpt.py")]
    loaded = {**args, "use_checkpoint_args": True, "load": "/ckpt"}
    assert site not in [r["site"] for r in config_checks.refusals(loaded, (), loaded, loaded, 8, "pretrain_gpt.py")]


def test_tokens_compare_by_identity():
    def ev(text, **values):
        return pyexpr.evaluate(ast.parse(text, mode="eval").body, lambda n: values[n.id])

    enum = "S__megatron__core__transformer__enums__CudaGraphScope"
    assert ev(f"{enum}__moe in [{enum}__attn, {enum}__moe]")
    assert not ev(f"{enum}__moe == 'moe'") and not ev(f"{enum}__moe in ['moe']")
    assert ev(f"isinstance(x, {enum})", x=pyexpr.Symbol(enum + "__mlp"))
    assert not ev(f"isinstance(x, {enum})", x="mlp") and not ev("isinstance(x, str)", x=pyexpr.Symbol(enum + "__mlp"))
    assert ev("S__torch__nn__functional__gelu != S__torch__nn__functional__silu")


def test_torch_dtypes_and_local_lambdas_are_followed():
    """--main-grads-dtype is mapped to a torch dtype by a local dict and lambda (arguments.py:645-650): the
    generator inlines the lambda, torch.float32 is a token, so ML983 decides :717."""
    args = {**flags.defaults(), "num_layers": 8, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 128,
            "max_position_embeddings": 128, "micro_batch_size": 1, "bf16": True,
            "accumulate_allreduce_grads_in_fp32": True}

    def sites(**options):
        a = {**args, **options}
        return [r["site"] for r in validate_checks.refusals(a, (), [*options, "bf16"], 8, "pretrain_gpt.py")]
    assert "megatron/training/arguments.py:717" in sites(main_grads_dtype="bf16")
    assert "megatron/training/arguments.py:717" not in sites(main_grads_dtype="fp32")
    args["accumulate_allreduce_grads_in_fp32"] = False
    assert "megatron/training/arguments.py:717" not in sites(main_grads_dtype="bf16")
    lookup = ast.parse("{'fp32': S__torch__dtype__float32}[x]", mode="eval").body
    assert pyexpr.evaluate(lookup, lambda n: "fp32") == pyexpr.Symbol("S__torch__dtype__float32")
    with pytest.raises(pyexpr.Undecided):  # a key the dict has not: the parser's choices refuse it first
        pyexpr.evaluate(lookup, lambda n: "fp64")


def test_per_layer_patterns_are_converted_as_the_parser_does():
    """--no-rope-freq and --moe-layer-freq go through arguments.py's _eval_pattern converters: an int, or a list
    expression (no eval here); a word the parser would refuse, or a tuple, leaves the checks undecided."""
    tc = "megatron/core/transformer/transformer_config.py:"
    assert validate_checks.convert("no_rope_freq", "4") == 4
    assert validate_checks.convert("no_rope_freq", "([0]*3+[1])*2") == [0, 0, 0, 1] * 2
    for word in ("(1,0)*4", "[1] * 8", "__import__('os')", "4_0", "x"):
        with pytest.raises(validate_checks.Undecided):
            validate_checks.convert("no_rope_freq", word)
    assert tc + "1966" in _sites(no_rope_freq="3")               # 8 layers, every 3rd: not divisible
    assert tc + "1966" not in _sites(no_rope_freq="4")
    assert tc + "1975" in _sites(no_rope_freq="[1]+[0]*6")        # 7 entries for 8 layers
    assert not {tc + "1966", tc + "1975"} & set(_sites(no_rope_freq="[1]+[0]*7"))
    assert not {tc + "1966", tc + "1975"} & set(_sites(no_rope_freq="[1] + [0]*6"))  # refused by the parser first
