"""meshlint's Megatron-Core 0.16.1 model against the release's own code, on seeded configs.

tests/real_megatron_worker.py runs, in a subprocess: ``initialize_model_parallel`` on torch's fake process
group and both RankGenerators it builds (every group of every kind), ``TransformerConfig`` +
``get_num_layers_to_build`` (the layer split), and Megatron-LM's parser + ``validate_args``. Each test
compares the verdict (refused or not) and every value with meshlint's arithmetic.

Setup: ``.ci/frameworks.sh`` installs megatron-core 0.16.1 (--no-deps) into
.frameworks/megatron-core-0.16.1; ``validate_args`` lives in Megatron-LM's megatron/training, which the
wheel does not ship: it runs where MEGATRON_LM_ROOT names a checkout at core_v0.16.1 (MEGATRON_LM_DEPS:
a folder with its pure-Python imports: six, regex, pydantic, triton), else that test skips, saying so.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from meshlint.frameworks.megatron import core_0_16, ranks

ROOT = Path(__file__).resolve().parent.parent
WHEEL = ROOT / ".frameworks" / "megatron-core-0.16.1"
WORKER = Path(__file__).resolve().parent / "real_megatron_worker.py"
SEED = 20261126


def _absent_core() -> str | None:
    if not (WHEEL / "megatron" / "core" / "parallel_state.py").is_file():
        failed = ROOT / ".frameworks" / "megatron-core-0.16.1.failed"
        why = failed.read_text().strip() if failed.is_file() else "run .ci/frameworks.sh"
        return f"megatron-core 0.16.1 is not installed in {WHEEL} ({why})"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed"
    return None


def _run(mode: str, cases: list, path: list) -> list:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in path)}
    proc = subprocess.run([sys.executable, str(WORKER)], input=json.dumps({"mode": mode, "cases": cases}) + "\n",
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- groups

def _group_cases(n: int) -> list:
    rng = random.Random(SEED)
    out = []
    while len(out) < n:
        tp, pp, cp, ep = (rng.choice([1, 1, 2, 2, 3, 4, 8]) for _ in range(4))
        etp = rng.choice([tp, tp, 1, 2, 4])
        model, expert = tp * pp * cp, etp * ep * pp
        if rng.random() < 0.7:   # a world both grids fit, else any world
            step = model * expert // __import__("math").gcd(model, expert)
            world = step * rng.choice([1, 1, 2, 3])
        else:
            world = rng.randint(1, 96)
        if world > 256:
            continue
        out.append({"tp": tp, "pp": pp, "cp": cp, "ep": ep, "etp": etp, "world": world,
                    "mapping": rng.random() < 0.3})
    return sorted(out, key=lambda c: c["world"])  # one fake process group per world size


def _meshlint_groups(case: dict) -> dict:
    spec = core_0_16.spec_from_degrees({"tp": case["tp"], "pp": case["pp"], "cp": case["cp"], "ep": case["ep"],
                                        "etp": case["etp"]}, use_tp_pp_dp_mapping=case["mapping"])
    res = core_0_16.resolve(spec, case["world"])
    if res.framework_error:
        return {"error": res.framework_error}
    dense, expert = spec.extra["grids"]
    out = {"error": None,
           "dense": {t: dense.all_groups(t) for t in ("tp", "cp", "dp", "dp-cp", "pp", "tp-pp", "tp-dp-cp", "tp-dp",
                                                       "tp-cp")},
           "expert": {t: expert.all_groups(t) for t in ("ep", "tp", "tp-ep", "tp-ep-pp", "dp")}}
    by_label = {label: (dense if g == "dense" else expert, token) for g, token, label, _ in ranks.GROUPS}
    out["rank0"] = {label: by_label[label][0].group(0, by_label[label][1])
                    for label in ("tp", "pp", "dp", "cp", "dp_cp", "mp", "ep", "etp", "edp", "tp_ep")}
    # the 1-D axes explain and the placement rules use agree with the groups wherever they exist
    for label, axis in res.axes.items():
        grid, token = by_label[label]
        for rank in (0, case["world"] - 1, case["world"] // 2):
            assert axis.members(rank) == grid.group(rank, token), (case, label)
    return out


@pytest.fixture(scope="module")
def real_groups():
    why = _absent_core()
    if why:
        pytest.skip(why)
    cases = _group_cases(200)
    return cases, _run("groups", cases, [WHEEL])


def test_groups_and_verdicts_match_initialize_model_parallel(real_groups):
    cases, real = real_groups
    refused = agreed = 0
    for case, got in zip(cases, real):
        mine = _meshlint_groups(case)
        assert (mine["error"] is None) == (got["error"] is None), (case, mine["error"], got["error"])
        if got["error"]:
            refused += 1
            if "arguments.py:317" in mine["error"]:  # validate_args asks first, on the same condition
                assert f"is not divisible by {case['tp'] * case['pp'] * case['cp']}" in got["error"], (case, got)
            else:
                assert mine["error"].split(":", 1)[0] == got["error"].split(":", 1)[0], (case, mine, got)
            continue
        assert mine["dense"] == got["dense"], case
        assert mine["expert"] == got["expert"], case
        assert mine["rank0"] == got["rank0"], case
        agreed += 1
    assert refused >= 30 and agreed >= 100, (refused, agreed)  # both verdicts are exercised


# ----------------------------------------------------------------------------- layer split

def _split_cases(n: int) -> list:
    rng = random.Random(SEED + 1)
    out = []
    for _ in range(n):
        pp = rng.choice([1, 2, 3, 4, 5, 6, 8, 16])
        vp = rng.choice([None, None, 2, 3, 4]) if pp > 1 else None
        # half the time a count that splits (the rest: anything, mostly refused)
        layers = pp * (vp or 1) * rng.randint(1, 6) if rng.random() < 0.5 else rng.randint(1, 100)
        uneven = rng.random() < 0.35
        first = rng.choice([None, rng.randint(0, 12)]) if uneven else None
        last = rng.choice([None, rng.randint(0, 12)]) if uneven else None
        emb, loss = (rng.random() < 0.2, rng.random() < 0.2) if not uneven or rng.random() < 0.2 else (False, False)
        out.append({"num_layers": layers, "pp": pp, "vp": vp, "first": first, "last": last, "emb": emb, "loss": loss})
    # the issues' configs: NVIDIA/Megatron-LM#468, #1304, #1778, #2718
    out += [{"num_layers": 80, "pp": 16, "vp": 2, "first": None, "last": None, "emb": False, "loss": False},
            {"num_layers": 30, "pp": 4, "vp": None, "first": None, "last": None, "emb": False, "loss": False},
            {"num_layers": 20, "pp": 1, "vp": None, "first": None, "last": 1, "emb": False, "loss": False},
            {"num_layers": 48, "pp": 2, "vp": None, "first": 11, "last": 13, "emb": False, "loss": False},
            # still silent in 0.16.1: one stage that is first and last builds the last count (3 of 8 layers)
            {"num_layers": 8, "pp": 1, "vp": None, "first": 2, "last": 3, "emb": False, "loss": False}]
    return out


def _meshlint_split(case: dict) -> dict:
    args = {"num_layers": case["num_layers"], "num_virtual_stages_per_pipeline_rank": case["vp"],
            "decoder_first_pipeline_num_layers": case["first"], "decoder_last_pipeline_num_layers": case["last"],
            "account_for_embedding_in_pipeline_split": case["emb"], "account_for_loss_in_pipeline_split": case["loss"]}
    return core_0_16.layer_split(args, case["pp"])


def test_layer_split_matches_get_num_layers_to_build():
    why = _absent_core()
    if why:
        pytest.skip(why)
    cases = _split_cases(300)
    real = _run("split", cases, [WHEEL])
    refused = 0
    silent = 0
    for case, got in zip(cases, real):
        mine = _meshlint_split(case)
        if mine.get("silent"):  # meshlint's error where Megatron builds the wrong number of layers without one
            assert got["error"] is None and mine["counts"] == got["counts"], (case, mine, got)
            assert sum(map(sum, got["counts"])) != case["num_layers"], (case, got)
            silent += 1
            continue
        assert (mine["error"] is None) == (got["error"] is None), (case, mine["error"], got["error"])
        if got["error"]:
            refused += 1
            continue
        assert mine["counts"] == got["counts"], case
        assert sum(map(sum, mine["counts"])) == case["num_layers"], case  # no layer is ever dropped
    assert 30 <= refused <= len(cases) - 100 and silent >= 1, (refused, silent)
    for case in cases[-5:]:  # every issue's config is refused by 0.16.1 or silently wrong, and an error to meshlint
        assert _meshlint_split(case)["error"], case


# ----------------------------------------------------------------------------- --pipeline-model-parallel-layout

def _layout_cases(n: int) -> list:
    """Seeded layout strings: mostly well formed (E first, L last, the layers spread over pp·vp stages), then broken
    one way or another (a character, a stage, a layer, E/L moved or doubled, MTP layers, a repeat)."""
    rng = random.Random(SEED + 3)
    out = []
    for _ in range(n):
        pp = rng.choice([1, 2, 3, 4, 8])
        vp = rng.choice([1, 1, 2, 3])
        layers = rng.randint(1, 24)
        mtp = rng.choice([None, None, None, 1, 2])
        cells = [[] for _ in range(pp * vp)]
        for i in range(layers):
            cells[min(len(cells) - 1, i * len(cells) // layers)].append("t")
        cells[0].insert(0, "E")
        cells[-1].extend(["m"] * (mtp or 0) + ["L"])
        stages = ["".join(c) for c in cells]
        text = "|".join(stages)
        broken = rng.random()
        if broken < 0.08:
            text = text.replace("t", "x", 1)
        elif broken < 0.16:
            text += "|t"
        elif broken < 0.24:
            text = text.replace("t", "", 1)
        elif broken < 0.30:
            text = "t" + text
        elif broken < 0.36:
            text = text.replace("L", "Lt") if rng.random() < 0.5 else "E" + text
        elif broken < 0.42:
            mtp = rng.choice([None, 1, 3]) if mtp else 1
        elif broken < 0.50 and len(stages) > 1 and stages[1] and set(stages[1]) == {"t"}:
            text = "|".join([stages[0], f"(t)*{len(stages[1])}"] + stages[2:])   # the same layout, written short
        elif broken < 0.55:
            text = text.replace("|", ",|", 1)                                  # a cosmetic comma
        if rng.random() < 0.05:
            text = f"({text})*2"                                               # a repeat over the whole layout
        first = rng.choice([None, 1]) if rng.random() < 0.05 else None
        out.append({"layout": text, "pp": pp, "num_layers": layers, "mtp": mtp, "first": first})
    out.append({"layout": "E|(tt|)*3,tt,L", "pp": 4, "num_layers": 8, "mtp": None, "first": None})  # vp 2: 2 empty
    out.append({"layout": "Ettt|(tt|)*29,m|L", "pp": 8, "num_layers": 61, "mtp": 1, "first": None})  # its docstring's
    return out


def _meshlint_layout(case: dict) -> dict:
    args = {"num_layers": case["num_layers"], "pipeline_model_parallel_layout": case["layout"],
            "mtp_num_layers": case["mtp"], "decoder_first_pipeline_num_layers": case["first"]}
    return core_0_16.layer_split(args, case["pp"])


def test_pipeline_layout_matches_pipeline_parallel_layer_layout():
    why = _absent_core()
    if why:
        pytest.skip(why)
    cases = _layout_cases(400)
    real = _run("layout", cases, [WHEEL])
    refused = 0
    for case, got in zip(cases, real):
        mine = _meshlint_layout(case)
        assert (mine["error"] is None) == (got["error"] is None), (case, mine["error"], got["error"])
        if got["error"]:
            refused += 1
            continue
        assert mine["counts"] == got["counts"] and mine["vp"] == got["vp"], (case, mine, got)
    assert 60 <= refused <= len(cases) - 150, refused  # both verdicts exercised


# ----------------------------------------------------------------------------- validate_args

def _absent_lm() -> str | None:
    root = os.environ.get("MEGATRON_LM_ROOT")
    if not root or not (Path(root) / "megatron" / "training" / "arguments.py").is_file():
        return ("validate_args is in Megatron-LM's megatron/training, not in the megatron-core wheel: set "
                "MEGATRON_LM_ROOT to a checkout at core_v0.16.1 (and MEGATRON_LM_DEPS to a folder holding six, "
                "regex, pydantic, triton) to run it")
    return _absent_core()


def _validate_cases(n: int) -> list:
    rng = random.Random(SEED + 2)
    out = []
    for _ in range(n):
        layers = rng.randint(1, 64)
        tp, pp, cp = rng.choice([1, 2, 4]), rng.choice([1, 2, 3, 4, 8]), rng.choice([1, 1, 2])
        heads = rng.choice([4, 8, 12])
        seq = rng.choice([128, 126, 256])
        argv = ["--num-layers", str(layers), "--hidden-size", str(heads * rng.choice([16, 15])),
                "--num-attention-heads", str(heads), "--seq-length", str(seq),
                "--max-position-embeddings", str(rng.choice([128, 256])), "--micro-batch-size", "1",
                "--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp),
                "--context-parallel-size", str(cp)]
        pick = rng.random()
        if pick < 0.25:
            argv += ["--num-layers-per-virtual-pipeline-stage", str(rng.choice([1, 2, 3]))]
        elif pick < 0.4:
            argv += ["--num-virtual-stages-per-pipeline-rank", str(rng.choice([2, 3]))]
        if rng.random() < 0.2:
            argv += ["--decoder-first-pipeline-num-layers", str(rng.randint(1, 8))]
        if rng.random() < 0.15:
            argv += ["--account-for-embedding-in-pipeline-split"]
        world = tp * pp * cp * rng.choice([1, 2]) if rng.random() < 0.8 else rng.randint(1, 32)
        out.append({"argv": argv, "world": world})
    return out


# what validate_args itself checks, of meshlint's rules (ML963 only where its failing check is validate_args')
VALIDATE_RULES = {"ML960", "ML967", "ML969", "ML970", "ML971", "ML972", "ML973", "ML974", "ML975", "ML976", "ML977"}


def _meshlint_validate(case: dict, rules) -> dict:
    from meshlint.engine.check import Options, run_checks
    from meshlint.inputs.launch import parse_launch_args
    from meshlint.engine.units import analyse_launch

    launch = parse_launch_args(["torchrun", f"--nproc_per_node={case['world']}", "pretrain_gpt.py", *case["argv"]])
    report = run_checks(analyse_launch(launch, Options(rules=rules)), Options(rules=rules))
    codes = {f.code for f in report.findings if f.severity == "error"}
    split = report.spec.extra.get("split") or {}
    refused = bool(codes & VALIDATE_RULES) or ("ML963" in codes and split.get("source", "").startswith("arguments.py"))
    return {"refused": refused, "dp": report.resolution.degrees.get("dp_shard"), "vp": split.get("vp"),
            "codes": sorted(codes)}


def test_verdicts_match_validate_args():
    why = _absent_lm()
    if why:
        pytest.skip(why)
    from meshlint.engine.ruleset import load_rules

    rules = [r for r in load_rules() if r.code in VALIDATE_RULES | {"ML963"}]  # none reads `choices`: no search
    cases = _validate_cases(80)
    path = [os.environ["MEGATRON_LM_ROOT"]] + ([os.environ["MEGATRON_LM_DEPS"]] if os.environ.get("MEGATRON_LM_DEPS")
                                               else [])
    real = _run("validate", cases, path)
    refused = 0
    for case, got in zip(cases, real):
        mine = _meshlint_validate(case, rules)
        assert mine["refused"] == (got["error"] is not None), (case, mine, got)
        if got["error"]:
            refused += 1
            continue
        assert (mine["dp"], mine["vp"]) == (got["dp"], got["vp"]), (case, mine, got)
    assert 20 <= refused <= len(cases) - 30, refused


# ----------------------------------------------------------------------------- the refusal inventory

def test_refusal_inventory_lists_exactly_the_sites_and_classifies_each():
    """docs/refusals-megatron.md is what meshlint/generate/megatron_refusals.py makes of the checkout."""
    root = os.environ.get("MEGATRON_LM_ROOT")
    if not root or not (Path(root) / "megatron" / "training" / "arguments.py").is_file():
        pytest.skip("the inventory reads megatron/training from a Megatron-LM checkout at core_v0.16.1: set "
                    "MEGATRON_LM_ROOT")
    from meshlint.generate import megatron_refusals as refusals

    rows = [(s, *refusals.classify(s)) for s in refusals.enumerate_sites(Path(root))]
    assert refusals.render(rows) == refusals.DOC.read_text(encoding="utf-8"), \
        "docs/refusals-megatron.md is stale: python -m meshlint.generate.megatron_refusals --write ROOT"


def test_first_step_functions_exist_and_each_site_has_a_hand_entry():
    """The first training step's functions (FIRST_STEP) are all in the checkout with at least one site between
    them per file, and each of their sites is classified by a FIRST_STEP_HAND entry naming it, not by a
    generic pattern (whose why would be a guess about code the patterns were not written for)."""
    root = os.environ.get("MEGATRON_LM_ROOT")
    if not root:
        pytest.skip("the inventory is checked against a Megatron-LM checkout at core_v0.16.1: set MEGATRON_LM_ROOT")
    import ast

    from meshlint.generate import megatron_refusals as refusals

    for rel, functions in refusals.FIRST_STEP.items():
        tree = ast.parse((Path(root) / rel).read_text(encoding="utf-8"))
        defined = set()

        def walk(node, scope):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defined.add(".".join(scope + [child.name]))
                    walk(child, scope + [child.name])
                else:
                    walk(child, scope)
        walk(tree, [])
        assert set(functions) <= defined, (rel, sorted(set(functions) - defined))
    sites = [s for s in refusals.enumerate_sites(Path(root)) if s.file in refusals.FIRST_STEP]
    assert {s.file for s in sites} == set(refusals.FIRST_STEP)
    hand = [r for r in refusals.FIRST_STEP_HAND]
    for site in sites:
        assert any(r.matches(site, refusals.VERSION) for r in hand), site.where
    # the two first-step refusals that were rules before the inventory reached them are classified as those rules
    verdicts = {s.where: refusals.classify(s)[0] for s in sites}
    assert verdicts["megatron/core/transformer/moe/moe_layer.py:380"] == "rule ML986"
    assert {verdicts[f"megatron/core/pipeline_parallel/schedules.py:{n}"] for n in (1003, 1015)} == {"rule ML988"}
    assert verdicts["megatron/core/transformer/moe/token_dispatcher.py:1346"] == "rule ML989"


def test_refusal_inventory_names_rules_that_exist():
    import re

    from meshlint.generate import megatron_refusals as refusals

    codes = {p.name.split("-")[0] for p in (ROOT / "rules").glob("ML*.toml")}
    text = refusals.DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"\| rule (ML\d{3}) \|", text))
    assert named and named <= codes, sorted(named - codes)
    for rule in refusals.HAND:
        assert rule.verdict.split()[0] in ("rule", "partial", "open", "runtime", "internal"), rule


# ----------------------------------------------------------------------------- initialize_model_parallel's option checks

# the assert statements (first line .. the line a traceback names) of the checks ML985 and argparse's choices answer
PSTATE_SITES = {718: range(718, 719), 720: range(720, 722), 724: range(724, 726), 941: range(941, 943),
                984: range(984, 985), 1107: range(1107, 1111)}
PSTATE_BASE = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--micro-batch-size", "1",
               "--seq-length", "64", "--max-position-embeddings", "64"]


def _pstate_cases(n: int) -> list:
    """Valid degrees (world = tp·pp·cp·dp, ep 1) with SHARP, hybrid and hierarchical CP and the PP backend mixed.
    --pipeline-model-parallel-comm-backend nccl and ucc are left out: this CPU torch has neither (a runtime
    refusal before the check at :1107), so the backend is the default or one argparse refuses."""
    rng = random.Random(SEED + 7)
    out = []
    for _ in range(n):
        tp, pp, cp, dp = rng.choice([1, 2]), rng.choice([1, 1, 2]), rng.choice([1, 2, 3, 4]), rng.choice([1, 2, 3])
        instances = rng.choice([1] + [d for d in range(2, dp * cp + 1) if dp * cp % d == 0])
        group = rng.choice([None, None, "dp", "dp_replica", "dp_replica"] + (["tp"] if rng.random() < 0.3 else []))
        hierarchical = None
        if rng.random() < 0.3:  # a factorisation of cp or, half the time, any short list
            hierarchical = rng.choice([[cp], [1, cp], [2, cp // 2]] if cp % 2 == 0 else [[cp], [cp, 1]]) \
                if rng.random() < 0.5 else [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 3))]
        out.append({"tp": tp, "pp": pp, "cp": cp, "world": tp * pp * cp * dp, "use_sharp": rng.random() < 0.5,
                    "sharp_enabled_group": group, "instances": instances, "hybrid": rng.random() < 0.35,
                    "hierarchical": hierarchical, "backend": rng.choice([None, None, None, "gloo"])})
    return sorted(out, key=lambda c: c["world"])  # one fake process group per world size


def _pstate_argv(c: dict) -> list:
    argv = [*PSTATE_BASE, "--tensor-model-parallel-size", str(c["tp"]), "--pipeline-model-parallel-size",
            str(c["pp"]), "--context-parallel-size", str(c["cp"]),
            "--num-distributed-optimizer-instances", str(c["instances"])]
    argv += ["--use-sharp"] if c["use_sharp"] else []
    argv += ["--sharp-enabled-group", c["sharp_enabled_group"]] if c["sharp_enabled_group"] else []
    argv += ["--hybrid-context-parallel"] if c["hybrid"] else []
    argv += ["--hierarchical-context-parallel-sizes", *map(str, c["hierarchical"])] if c["hierarchical"] else []
    argv += ["--pipeline-model-parallel-comm-backend", c["backend"]] if c["backend"] else []
    return argv


def test_initialize_model_parallel_option_checks_match_the_release():
    """ML985 (and argparse's choices, ML968) against the real initialize_model_parallel, options as
    Megatron-LM's initialize.py passes them: refused or not, and at the same line."""
    import re

    why = _absent_core()
    if why:
        pytest.skip(why)
    from meshlint.engine.check import Options, run_checks
    from meshlint.engine.ruleset import load_rules
    from meshlint.engine.units import analyse_launch
    from meshlint.inputs.launch import parse_launch_args

    rules = [r for r in load_rules() if r.code in ("ML985", "ML968")]
    cases = _pstate_cases(160)
    real = _run("pstate", cases, [WHEEL])
    seen: dict = {}
    for case, got in zip(cases, real):
        launch = parse_launch_args(["torchrun", f"--nproc_per_node={case['world']}", "pretrain_gpt.py",
                                    *_pstate_argv(case)])
        report = run_checks(analyse_launch(launch, Options(rules=rules)), Options(rules=rules))
        parser = [f.message for f in report.findings if f.code == "ML968"]
        mine = core_0_16.megatron_facts(report.spec, report.resolution)["pstate_refusals"]
        assert bool(mine) == any(f.code == "ML985" for f in report.findings), case
        site = next((s for s, lines in PSTATE_SITES.items() if got["line"] in lines), None)
        seen[site] = seen.get(site, 0) + 1
        refused_options = [o for o, bad in (("sharp-enabled-group", case["sharp_enabled_group"] == "tp"),
                                            ("pipeline-model-parallel-comm-backend", case["backend"] == "gloo")) if bad]
        if refused_options:  # argparse's choices refuse the value before initialize_model_parallel runs
            assert got["error"] and all(any(o in m for m in parser) for o in refused_options), (case, got, parser)
        elif site is not None:
            assert site not in (718, 1107) and mine and not parser, (case, got)
            assert re.findall(r"parallel_state\.py:(\d+)", mine[0]["site"]) == [str(site)], (case, got, mine)
        else:  # past every check (einops is imported by create_hierarchical_groups, after :984)
            assert got["error"] is None or "einops is not installed" in got["error"], (case, got)
            assert not mine and not parser, (case, got, mine, parser)
    # every check is exercised, each both ways
    assert all(seen.get(s, 0) >= 4 for s in (718, 720, 724, 941, 984)) and seen.get(None, 0) >= 30, seen


# ----------------------------------------------------------------------------- the interleaved schedule

def test_interleaved_microbatch_checks_match_the_schedule():
    """ML988's facts (core_0_16.microbatch_group_refusal) against forward_backward_pipelining_with_interleaving's
    own checks (schedules.py:995-1015), and every microbatch count its help proposes accepted by them."""
    why = _absent_core()
    if why:
        pytest.skip(why)
    cases = [{"pp": pp, "vp": vp, "group": group, "m": m} for pp in (2, 3, 4, 6) for vp in (2, 3)
             for group in (None, 1, 2, 3, 4, 6, 8) for m in range(1, 27)]
    mine = [core_0_16.microbatch_group_refusal({"microbatch_group_size_per_vp_stage": c["group"]}, c["pp"], c["vp"],
                                               c["m"], 2) for c in cases]
    proposed = [dict(c, m=m) for c, got in zip(cases, mine) if got for m in got["valid"]]
    real = _run("interleaved", cases + proposed, [WHEEL])
    refused = 0
    for case, got, want in zip(cases, mine, real):
        assert (got is None) == (want["error"] is None), (case, got, want)
        if got:
            refused += 1
            # the message as the release words it (meshlint keeps the RuntimeError's first sentence)
            assert want["error"].startswith(got["error"]), (case, got["error"], want["error"])
            assert got["batches"] == [2 * m for m in got["valid"]], got
    assert all(w["error"] is None for w in real[len(cases):]), [
        (p, w) for p, w in zip(proposed, real[len(cases):]) if w["error"]]
    assert refused > 100 and proposed


# ----------------------------------------------------------------------------- the flex token dispatcher

def _flex_cases(n: int) -> list:
    """Valid layouts (world = lcm of tp·pp and etp·ep·pp, times a dp factor), experts a multiple of ep."""
    import math

    rng = random.Random(SEED + 11)
    out = []
    while len(out) < n:
        tp, pp, ep, etp = rng.choice([1, 1, 2, 4]), rng.choice([1, 1, 2]), rng.choice([1, 1, 2, 4, 8]), \
            rng.choice([1, 1, 1, 2])
        world = math.lcm(tp * pp, etp * ep * pp) * rng.choice([1, 1, 2])
        if world > 64:
            continue
        out.append({"tp": tp, "pp": pp, "ep": ep, "etp": etp, "world": world,
                    "experts": ep * rng.choice([1, 2, 4]), "backend": rng.choice(["deepep", "hybridep"])})
    return sorted(out, key=lambda c: c["world"])  # one fake process group per world size


def test_flex_dispatcher_check_matches_the_release():
    """ML989 against the release's MoEFlexTokenDispatcher (token_dispatcher.py:1346), built on the process groups
    initialize_model_parallel makes: the rule fires exactly where the release refuses, and its help's ep values
    pass the check."""
    why = _absent_core()
    if why:
        pytest.skip(why)
    from meshlint.engine.check import Options, run_checks
    from meshlint.engine.ruleset import load_rules
    from meshlint.engine.units import analyse_launch
    from meshlint.inputs.launch import parse_launch_args

    rules = [r for r in load_rules() if r.code == "ML989"]
    cases = _flex_cases(60)
    real = _run("flex", cases, [WHEEL])
    refused, fixes = 0, []
    for case, got in zip(cases, real):
        argv = [*PSTATE_BASE, "--num-experts", str(case["experts"]), "--moe-router-topk", "2",
                "--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", case["backend"],
                "--disable-bias-linear", "--bf16", "--global-batch-size", str(case["world"]),
                "--tensor-model-parallel-size", str(case["tp"]), "--pipeline-model-parallel-size", str(case["pp"]),
                "--expert-model-parallel-size", str(case["ep"]), "--expert-tensor-parallel-size", str(case["etp"])]
        argv += ["--sequence-parallel"] if case["tp"] > 1 else []
        launch = parse_launch_args(["torchrun", f"--nproc_per_node={case['world']}", "pretrain_gpt.py", *argv])
        report = run_checks(analyse_launch(launch, Options(rules=rules)), Options(rules=rules))
        mine = [f for f in report.findings if f.code == "ML989"]
        assert got["line"] in (1346, 997, 1149), (case, got)  # the check, else a manager's "not installed"
        assert bool(mine) == (got["line"] == 1346), (case, got, [f.message for f in mine])
        if mine:
            refused += 1
            assert "token_dispatcher.py:1346" in mine[0].message
            found = re.findall(r"--expert-model-parallel-size to ([\d, ]+) \(", mine[0].help)
            assert found or "alltoall" in mine[0].help, mine[0].help  # no ep fits these ranks: another dispatcher
            fixes += [dict(case, ep=int(e)) for e in found[0].split(", ")] if found else []
    assert refused >= 10 and len(cases) - refused >= 10 and fixes, refused
    fixes.sort(key=lambda c: c["world"])
    fixed = _run("flex", fixes, [WHEEL])
    assert all(f["line"] in (997, 1149) for f in fixed), [(c, f) for c, f in zip(fixes, fixed) if f["line"] == 1346]


# ----------------------------------------------------------------------------- distributed-optimizer instances

def test_optimizer_instances_check_and_its_help_match_the_release():
    """ML978 against the real initialize_model_parallel on MoE layouts (NVIDIA/Megatron-LM#4342: ep 2 on one 4-GPU
    node with 2 instances): refused exactly where the release refuses (parallel_state.py:833/1263), and every expert
    degree its help proposes accepted."""
    import re

    why = _absent_core()
    if why:
        pytest.skip(why)
    from meshlint.engine.check import Options, run_checks
    from meshlint.engine.ruleset import load_rules
    from meshlint.engine.units import analyse_launch
    from meshlint.inputs.launch import parse_launch_args

    rules = [r for r in load_rules() if r.code == "ML978"]
    rng = random.Random(SEED + 13)
    cases = []
    while len(cases) < 80:
        tp, pp, ep, etp = rng.choice([1, 2]), rng.choice([1, 2]), rng.choice([1, 2, 4]), rng.choice([1, 2])
        world = tp * pp * rng.choice([1, 2, 4])
        if world % (etp * ep * pp) or world > 16:
            continue
        dp = world // (tp * pp)
        cases.append({"tp": tp, "pp": pp, "cp": 1, "ep": ep, "etp": etp, "world": world,
                      "instances": rng.choice([d for d in range(2, dp + 1) if dp % d == 0] or [1]),
                      "use_sharp": False, "sharp_enabled_group": None, "hybrid": False, "hierarchical": None,
                      "backend": None})
    cases.sort(key=lambda c: c["world"])
    real = _run("pstate", cases, [WHEEL])
    refused, proposals = 0, []
    for case, got in zip(cases, real):
        argv = [*PSTATE_BASE, "--num-experts", "8", "--tensor-model-parallel-size", str(case["tp"]),
                "--pipeline-model-parallel-size", str(case["pp"]), "--expert-model-parallel-size", str(case["ep"]),
                "--expert-tensor-parallel-size", str(case["etp"]),
                "--num-distributed-optimizer-instances", str(case["instances"])]
        launch = parse_launch_args(["torchrun", f"--nproc_per_node={case['world']}", "pretrain_gpt.py", *argv])
        report = run_checks(analyse_launch(launch, Options(rules=rules)), Options(rules=rules))
        mine = [f for f in report.findings if f.code == "ML978"]
        release = got["line"] in (833, 834, 1263, 1264)
        assert got["error"] is None or release or "einops" in got["error"], (case, got)
        assert bool(mine) == release, (case, got, [f.message for f in mine])
        if mine:
            refused += 1
            for flag, key in (("--expert-model-parallel-size", "ep"), ("--expert-tensor-parallel-size", "etp")):
                found = re.findall(re.escape(flag) + r" ([\d, ]+?)(?: or |$)", mine[0].help)
                proposals += [dict(case, **{key: int(v)}) for v in found[0].split(", ")] if found else []
    assert refused >= 10 and len(cases) - refused >= 10 and proposals, (refused, len(proposals))
    proposals.sort(key=lambda c: c["world"])
    fixed = _run("pstate", proposals, [WHEEL])
    assert all(f["error"] is None or "einops" in f["error"] for f in fixed), [
        (c, f) for c, f in zip(proposals, fixed) if f["error"] and "einops" not in f["error"]]


# ----------------------------------------------------------------------------- grouped-query attention

def test_query_groups_check_matches_the_release_attention():
    """ML990 against the release's SelfAttention.get_query_key_value_tensors on CPU (NVIDIA/Megatron-LM#5755):
    heads a multiple of tp, groups a multiple of tp (below tp the split all-gathers on the GPU, and a divisor of
    tp always divides the heads); the rule fires exactly where the release raises, at attention.py:1424, and the
    groups its help proposes are accepted."""
    import re

    why = _absent_core()
    if why:
        pytest.skip(why)
    from meshlint.engine.check import Options, run_checks
    from meshlint.engine.ruleset import load_rules
    from meshlint.engine.units import analyse_launch
    from meshlint.inputs.launch import parse_launch_args

    rules = [r for r in load_rules() if r.code == "ML990"]
    rng = random.Random(SEED + 17)
    cases = sorted(({"tp": tp, "heads": tp * rng.randint(1, 12), "groups": tp * rng.randint(1, 6)}
                    for tp in (1, 2, 4) for _ in range(20)), key=lambda c: c["tp"])
    real = _run("qkv", cases, [WHEEL])
    refused, proposals = 0, []
    for case, got in zip(cases, real):
        argv = ["--num-layers", "2", "--hidden-size", str(case["heads"] * 8), "--num-attention-heads",
                str(case["heads"]), "--group-query-attention", "--num-query-groups", str(case["groups"]),
                "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "1",
                "--tensor-model-parallel-size", str(case["tp"])]
        launch = parse_launch_args(["torchrun", f"--nproc_per_node={case['tp']}", "pretrain_gpt.py", *argv])
        report = run_checks(analyse_launch(launch, Options(rules=rules)), Options(rules=rules))
        mine = [f for f in report.findings if f.code == "ML990"]
        assert got["error"] is None or got["where"] == "megatron/core/transformer/attention.py:1424", (case, got)
        assert bool(mine) == (got["error"] is not None), (case, got, [f.message for f in mine])
        if mine:
            refused += 1
            groups = [int(v) for v in re.findall(r"--num-query-groups ([\d, ]+) \(", mine[0].help)[0].split(", ")]
            proposals += [dict(case, groups=v) for v in groups if v >= case["tp"]]
    assert refused >= 10 and len(cases) - refused >= 10 and proposals, refused
    proposals.sort(key=lambda c: c["tp"])
    assert all(f["error"] is None for f in _run("qkv", proposals, [WHEEL]))
