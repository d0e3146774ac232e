"""Megatron-Bridge recipes read statically (meshlint/inputs/bridge_recipe.py): our own recipe fixtures
(fixtures/megatron_bridge/), the generated provider table, overrides, and - where present - the Bridge checkout
at v0.3.1 (no false alarm) and Megatron-Core 0.16.1's own layer split and rank generators on the resolved values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from meshlint.frameworks.megatron import core_0_16
from meshlint.inputs import bridge_recipe as bridge

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "megatron_bridge"
RECIPES = str(FIX / "checkout/src/megatron/bridge/recipes/fixture_recipes.py")
SCRIPTS = FIX / "checkout"
BRIDGE_MIRROR = Path("/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo")


@pytest.fixture(autouse=True)
def _hf_cache(monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(FIX / "hf"))


def _check(target: str, *extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(FIX / "hf")}
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", target, "--format", "json", *extra],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _source(function: str, overrides=()):
    (source,) = bridge.recipe_sources(RECIPES, function, [(w, 1, 1) for w in overrides])
    return source


def _resolved(function: str, overrides=(), world=None):
    source = _source(function, overrides)
    spec = core_0_16.read(source)
    bridge.adjust(spec, source)
    res = core_0_16.resolve(spec, world)
    return source, spec, res


def test_provider_table_is_generated_with_the_commit():
    table = json.loads((ROOT / "meshlint/frameworks/megatron/bridge_providers_v0_3_1.json").read_text())
    assert table["megatron_bridge"]["tag"] == "v0.3.1" and table["megatron_bridge"]["commit"] == "9c9dd8489"
    llama = table["classes"]["Llama3ModelProvider70B"]["fields"]
    assert (llama["num_layers"], llama["hidden_size"], llama["num_attention_heads"], llama["num_query_groups"]) == \
        (80, 8192, 64, 8)
    assert table["classes"]["Qwen3MoEModelProvider235B_A22B"]["fields"]["num_moe_experts"] == 128


def test_recipe_values_become_megatron_dests():
    source = _source("llama3_8b_good_config")
    d = source.data
    assert (d["tensor_model_parallel_size"], d["pipeline_model_parallel_size"], d["num_layers"],
            d["num_query_groups"], d["micro_batch_size"], d["global_batch_size"]) == (2, 2, 32, 8, 1, 64)
    assert d["pipeline_dtype"] == "torch.bfloat16"
    # findings point at the line that sets the value in the recipe
    assert source.locate("pipeline_model_parallel_size")[0] == 15
    assert source.locate("global_batch_size")[0] == 17


def test_keyword_defaults_and_overrides():
    assert _source("llama3_8b_good_config").data["tensor_model_parallel_size"] == 2
    over = _source("llama3_8b_good_config", ["model.tensor_model_parallel_size=4", "train.micro_batch_size=2",
                                             "optimizer.lr=1e-4"])
    assert over.data["tensor_model_parallel_size"] == 4 and over.data["micro_batch_size"] == 2
    assert any("optimizer.lr" in n for n in over.parsed.notes)
    assert bridge.parse_override("model.sequence_parallel=true") == ("model", "sequence_parallel", True)
    assert bridge.parse_override("+train.global_batch_size=8") == ("train", "global_batch_size", 8)
    with pytest.raises(Exception):
        bridge.parse_override("tensor_model_parallel_size")


def test_pr5884_60_layers_on_pp8_is_an_error_and_its_fix_is_clean():
    _, spec, res = _resolved("qwen35_397b_pp8_config")
    split = core_0_16.layer_split(spec.extra["args"], res.degrees["pp"])
    assert "num_layers (60) should be divisible by pipeline_model_parallel_size (8)" in split["error"]
    _, spec, res = _resolved("qwen35_397b_pp8_fixed_config")
    split = core_0_16.layer_split(spec.extra["args"], res.degrees["pp"])
    assert split["error"] is None and [sum(r) for r in split["counts"]] == [4, 8, 8, 8, 8, 8, 8, 8]


def test_pr5893_vp12_for_40_layers_is_an_error():
    _, spec, res = _resolved("qwen35_35b_vp12_config")
    split = core_0_16.layer_split(spec.extra["args"], res.degrees["pp"])
    assert "num_layers_per_pipeline_rank 20 should be divisible by vp_size 12" in split["error"]
    _, spec, res = _resolved("qwen35_35b_vp10_config")
    assert core_0_16.layer_split(spec.extra["args"], res.degrees["pp"])["error"] is None


def test_check_reports_errors_at_the_recipe_lines():
    report = _check(RECIPES)
    errors = {(f["path"].rsplit("::", 1)[1], x["rule"], x["line"]) for f in report["files"]
              for x in f["findings"] if x["severity"] == "error"}
    assert errors == {("llama3_70b_vp_bad_config", "ML963", 28), ("qwen35_397b_pp8_config", "ML963", 49),
                      ("qwen35_35b_vp12_config", "ML963", 72), ("llama3_8b_tp_bad_config", "ML965", 34),
                      ("llama3_8b_tp_bad_config", "ML966", 34), ("llama3_8b_tp_bad_config", "ML304", 34)}


def test_unknown_model_is_said_not_guessed():
    report = _check(RECIPES + "::unknown_model_config")
    (f,) = report["files"]
    rules = {x["rule"]: x for x in f["findings"]}
    assert "ML969" not in rules and "ML963" not in rules      # sizes unknown: not "no experts", not a split error
    assert "not in the local Hugging Face cache" in rules["ML111"]["message"]


def test_run_recipe_launch_script_with_overrides():
    report = _check(str(SCRIPTS / "run_vp.sh"))
    (f,) = report["files"]
    assert f["path"].endswith("run_vp.sh:4::qwen35_35b_vp10_config") and f["world_size"] == 16
    (err,) = [x for x in f["findings"] if x["severity"] == "error"]
    # the override on the launch line is what breaks it: the finding points there
    assert err["rule"] == "ML963" and err["file"].endswith("run_vp.sh") and err["line"] == 6
    assert "model.num_layers_in_first_pipeline_stage" in err["help"]
    (f,) = _check(str(SCRIPTS / "run_ok.sh"))["files"]
    assert f["world_size"] == 16 and not [x for x in f["findings"] if x["severity"] == "error"]


def test_run_recipe_command_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(FIX / "hf")}
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", "--format", "json", "--", "torchrun",
                           "--nproc_per_node=4", "scripts/training/run_recipe.py", "--recipe", "llama3_8b_good_config",
                           "model.tensor_model_parallel_size=8"], capture_output=True, text=True, env=env,
                          cwd=SCRIPTS, timeout=300)
    (f,) = json.loads(proc.stdout)["files"]
    assert {x["rule"] for x in f["findings"] if x["severity"] == "error"} >= {"ML960"}
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", "--", "torchrun", "run_recipe.py",
                           "--recipe", "no_such_recipe"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
    assert "MEGATRON_BRIDGE_ROOT" in proc.stdout + proc.stderr


def test_registered_input_form():
    from meshlint.frameworks.registry import INPUT_FORMS, VERSIONS

    (form,) = [f for f in INPUT_FORMS if f.name == "bridge"]
    assert (form.framework, form.version) in {(v.framework, v.version) for v in VERSIONS}
    assert form.commit.startswith(json.loads((ROOT / "meshlint/frameworks/megatron/bridge_providers_v0_3_1.json")
                                             .read_text())["megatron_bridge"]["commit"])


def test_explain_shows_the_split_and_where_the_sizes_come_from():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(FIX / "hf")}
    proc = subprocess.run([sys.executable, "-m", "meshlint", "explain", RECIPES + "::qwen35_397b_pp8_fixed_config"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # in the model's order: rank 0's four chunks are stages 0, 8, 16 and 24, one layer each (4 first-stage layers)
    assert "interleaved_1f1b, 32 stages (4 per rank): layers 1, 2, 2, 2, 2, 2, 2, 2, 1, 2" in proc.stdout
    assert "Qwen/Qwen3.5-397B-A17B's config.json" in proc.stdout and "512 experts" in proc.stdout
    # the same first/last-stage split given to Megatron-LM (explain crashed on it before)
    proc = subprocess.run([sys.executable, "-m", "meshlint", "explain", "--", "torchrun", "--nproc_per_node", "8",
                           "pretrain_gpt.py", "--num-layers", "30", "--hidden-size", "1024", "--num-attention-heads",
                           "16", "--seq-length", "1024", "--max-position-embeddings", "1024", "--micro-batch-size", "1",
                           "--global-batch-size", "8", "--pipeline-model-parallel-size", "4",
                           "--decoder-first-pipeline-num-layers", "6"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert "layers 6, 8, 8, 8" in proc.stdout, proc.stderr[-2000:]


def test_inline_suppression_in_a_recipe(tmp_path):
    text = Path(RECIPES).read_text().replace(
        "    cfg.model.virtual_pipeline_model_parallel_size = 12\n",
        "    cfg.model.virtual_pipeline_model_parallel_size = 12  # meshlint: ignore[ML963] -- on purpose\n")
    assert "ignore[ML963]" in text
    p = tmp_path / "r.py"
    p.write_text(text)
    (f,) = _check(str(p) + "::qwen35_35b_vp12_config")["files"]
    assert not [x for x in f["findings"] if x["severity"] == "error"] and len(f["suppressed"]) == 1


def test_finalize_defaults_are_read_from_the_checkout(tmp_path):
    """Bridge v0.3.1's finalize() only runs Megatron-Core's __post_init__; later ones switch sequence parallelism
    off at tp 1 and default etp to 1 with ep > 1 first: what the checkout at hand does decides ML980 and etp."""
    models = tmp_path / "src" / "megatron" / "bridge" / "models"
    models.mkdir(parents=True)
    (models / "transformer_config.py").write_text(
        "def _etp(config):\n    if config.expert_tensor_parallel_size is None and config.expert_model_parallel_size > 1:\n"
        "        config.expert_tensor_parallel_size = 1\n\n\nclass TransformerConfig:\n    def finalize(self):\n"
        "        if self.sequence_parallel and self.tensor_model_parallel_size <= 1:\n"
        "            self.sequence_parallel = False\n        _etp(self)\n")
    assert bridge.finalize_defaults(str(tmp_path / "src")) == {"sp_off": True, "etp_one": True}
    assert bridge.finalize_defaults(str(tmp_path / "nowhere")) == {"sp_off": False, "etp_one": False}
    args = bridge.megatron_args({"expert_model_parallel_size": 8, "expert_tensor_parallel_size": None,
                                 "sequence_parallel": True}, {"sp_off": True, "etp_one": True})
    assert args["expert_tensor_parallel_size"] == 1 and args["bridge_sequence_parallel"] is False
    args = bridge.megatron_args({"expert_model_parallel_size": 8, "expert_tensor_parallel_size": None,
                                 "sequence_parallel": True})
    assert args["expert_tensor_parallel_size"] is None and args["bridge_sequence_parallel"] is True


def test_not_a_recipe_file_is_skipped(tmp_path):
    p = tmp_path / "helpers.py"
    p.write_text("from megatron.bridge.training.config import ConfigContainer\n\ndef _x():\n    return 1\n")
    (f,) = _check(str(p))["files"]
    assert f["status"] == "skipped"


# ----------------------------------------------------------------------------- Megatron-Core's own code

WHEEL = ROOT / ".frameworks" / "megatron-core-0.16.1"
WORKER = Path(__file__).resolve().parent / "real_megatron_worker.py"


def _worker(mode: str, cases: list) -> list:
    pytest.importorskip("torch")
    if not (WHEEL / "megatron" / "core" / "parallel_state.py").is_file():
        pytest.skip("megatron-core 0.16.1 is not installed under .frameworks")
    env = {**os.environ, "PYTHONPATH": str(WHEEL)}
    proc = subprocess.run([sys.executable, str(WORKER)], input=json.dumps({"mode": mode, "cases": cases}) + "\n",
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


FIXTURE_RECIPES = ("llama3_8b_good_config", "llama3_70b_vp_bad_config", "qwen35_397b_pp8_config",
                   "qwen35_397b_pp8_fixed_config", "qwen35_35b_vp12_config", "qwen35_35b_vp10_config")


def test_layer_split_of_recipes_matches_get_num_layers_to_build():
    cases, mine = [], []
    for name in FIXTURE_RECIPES:
        _, spec, res = _resolved(name)
        a = spec.extra["args"]
        cases.append({"num_layers": a["num_layers"], "pp": res.degrees["pp"],
                      "vp": a["num_virtual_stages_per_pipeline_rank"],
                      "first": a["decoder_first_pipeline_num_layers"], "last": a["decoder_last_pipeline_num_layers"],
                      "emb": False, "loss": False})
        mine.append(core_0_16.layer_split(a, res.degrees["pp"]))
    got = _worker("split", cases)
    for name, m, g in zip(FIXTURE_RECIPES, mine, got):
        assert (m["error"] is None) == (g["error"] is None), (name, m, g)
        if g["error"] is None:
            assert m["counts"] == g["counts"], name


def test_groups_of_recipes_match_rank_generator():
    from tests.test_real_megatron import _meshlint_groups

    cases = []
    for name in FIXTURE_RECIPES:
        _, spec, res = _resolved(name)
        d = res.degrees
        cases.append({"tp": d["tp"], "pp": d["pp"], "cp": d["cp"], "ep": d["ep"], "etp": d["etp"],
                      "world": res.world_used, "mapping": False})
    got = _worker("groups", cases)
    for case, g in zip(cases, got):
        assert _meshlint_groups(case) == {k: v for k, v in g.items() if k in _meshlint_groups(case)}, case


# ----------------------------------------------------------------------------- the real recipes (when fetched)

def _tree(ref: str, tmp_path) -> Path:
    if not BRIDGE_MIRROR.is_dir():
        pytest.skip("no Megatron-Bridge mirror")
    out = tmp_path / ref
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(BRIDGE_MIRROR), "archive", ref, "src"], capture_output=True,
                             timeout=300)
    if archive.returncode:
        pytest.skip(f"{ref} not in the mirror")
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True, timeout=300)
    return out / "src" / "megatron" / "bridge"


def _all(paths: list) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(FIX / "hf")}
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", *map(str, paths), "--format", "json"],
                          capture_output=True, text=True, env=env, timeout=600)
    return json.loads(proc.stdout)


def test_provider_table_regenerates_from_v0_3_1(tmp_path):
    src = _tree("v0.3.1", tmp_path)
    proc = subprocess.run([sys.executable, "-m", "meshlint.generate.bridge_providers", str(src.parents[2])],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    committed = json.loads((ROOT / "meshlint/frameworks/megatron/bridge_providers_v0_3_1.json").read_text())
    assert json.loads(proc.stdout)["classes"] == committed["classes"]


def test_shipped_recipes_at_v0_3_1_read_without_false_alarm(tmp_path):
    src = _tree("v0.3.1", tmp_path)
    files = sorted((src / "recipes").rglob("*.py"))
    report = _all(files)
    checked = [f for f in report["files"] if f["status"] == "checked"]
    assert len(checked) == 161 and not [f for f in report["files"] if f["status"] == "error"]
    bad = [(f["path"].split("/megatron/bridge/", 1)[1], x["rule"]) for f in checked for x in f["findings"]
           if x["severity"] in ("error", "warning")]
    # really broken at v0.3.1: sequence_parallel with tp 1 reaches ModelParallelConfig.__post_init__ (Bridge's
    # finalize() switches it off only from e5c7b8c28 on, not in v0.3.1); ML606: 4 microbatches for pp 4 x vp 2;
    # Qwen3-Next and Qwen3-VL 235B keep _pretrain_common's global batch 32 (micro 2): at their smallest world
    # (dp 8 and dp 8) that is 2 microbatches for pp 4 and pp 8 (read since apply_flex_dispatcher_backend no longer
    # makes the whole provider unknown: it writes three dispatcher fields only)
    assert sorted(bad) == [("recipes/glm/glm45.py::glm45_air_106b_pretrain_config", "ML980"),
                           ("recipes/glm_vl/glm_45v.py::glm_45v_finetune_config", "ML606"),
                           ("recipes/qwen/qwen3_next.py::qwen3_next_80b_a3b_pretrain_config", "ML606"),
                           ("recipes/qwen_vl/qwen3_vl.py::qwen3_vl_235b_a22b_pretrain_config", "ML606")]


def test_sequence_parallel_without_tp_is_refused_by_megatron_core():
    pytest.importorskip("torch")
    if not (WHEEL / "megatron" / "core" / "model_parallel_config.py").is_file():
        pytest.skip("megatron-core 0.16.1 is not installed under .frameworks")
    code = ("from megatron.core.model_parallel_config import ModelParallelConfig\n"
            "try:\n    ModelParallelConfig(tensor_model_parallel_size=1, sequence_parallel=True)\n"
            "except ValueError as e:\n    print('refused:', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(WHEEL)})
    assert "refused: Cannot use sequence parallelism without tensor parallelism" in proc.stdout, proc.stderr[-2000:]
    source = _source("llama3_8b_good_config", ["model.tensor_model_parallel_size=1", "model.sequence_parallel=true"])
    spec = core_0_16.read(source)
    assert spec.extra["args"]["bridge_sequence_parallel"] is True and spec.extra["args"]["sequence_parallel"] is False


# Megatron-Bridge at 067f987df (2026-08-22), before PR#5832, #5846, #5884 and #5893 (merged 2026-08-26..30):
# every error meshlint reports on its 741 recipe functions, each with the upstream fix that confirms it
BEFORE_FIXES = "067f987df03b8355b03192d88d70f1709fedf51a"
EXPECTED_AT_067F987DF = {
    # PR#5884: eight 397B perf recipes, 60 layers on pp 8 (get_num_layers_to_build)
    **{(f"perf_recipes/qwen_vl/{gpu}/qwen35_vl.py::qwen35_vl_397b_a17b_pretrain_{n}gpu_{gpu}_{p}_config", "ML963"): "5884"
       for gpu, n, ps in (("h100", 256, ("bf16", "fp8cs")), ("b200", 64, ("bf16", "fp8cs", "fp8mx")),
                          ("gb200", 64, ("bf16", "fp8cs", "fp8mx"))) for p in ps},
    # PR#5893: 40 layers, pp 2, vp 12
    ("perf_recipes/qwen_vl/h100/qwen35_vl.py::qwen35_vl_35b_a3b_pretrain_16gpu_h100_fp8cs_config", "ML963"): "5893",
    # PR#5846: pp 1 keeps the parent's first/last stage counts 17/23
    ("recipes/qwen_vl/gb200/qwen35_vl.py::qwen35_vl_35b_a3b_sft_8gpu_gb200_bf16_functional_config", "ML963"): "5846",
    # PR#5832: micro batch 4 makes the global batch indivisible at the encoded world
    **{(f"recipes/qwen_vl/h100/qwen35_vl.py::qwen35_vl_{m}_{k}_{n}gpu_h100_bf16_config", "ML964"): "5832"
       for m, k, n in (("122b_a10b", "sft", 48), ("122b_a10b", "peft", 8), ("397b_a17b", "sft", 128),
                       ("397b_a17b", "peft", 32))},
    # no upstream fix seen yet: the 397B base recipe, 60 layers on pp 16 (the same invariant as PR#5884)
    ("recipes/qwen_vl/h100/qwen35_vl.py::qwen35_vl_397b_a17b_pretrain_512gpu_h100_bf16_mock_config", "ML963"): None,
}


def test_recipes_before_the_fixes_are_errors_and_nothing_else(tmp_path):
    src = _tree(BEFORE_FIXES, tmp_path)
    files = sorted((src / "recipes").rglob("*.py")) + sorted((src / "perf_recipes").rglob("*.py"))
    report = _all(files)
    checked = [f for f in report["files"] if f["status"] == "checked"]
    assert len(checked) == 741 and not [f for f in report["files"] if f["status"] == "error"]
    errors = {(f["path"].split("/megatron/bridge/", 1)[1], x["rule"]) for f in checked for x in f["findings"]
              if x["severity"] == "error"}
    assert errors == set(EXPECTED_AT_067F987DF)


def test_megatron_core_refuses_the_split_of_each_recipe_before_the_fixes(tmp_path):
    """get_num_layers_to_build itself, on the values meshlint resolved from the real recipes (ML963 above)."""
    src = _tree(BEFORE_FIXES, tmp_path)
    names = sorted(k for k, rule in EXPECTED_AT_067F987DF if rule == "ML963")
    cases, mine = [], []
    for name in names:
        file, function = name.split("::")
        (source,) = bridge.recipe_sources(str(src / file), function)
        spec = core_0_16.read(source)
        bridge.adjust(spec, source)
        a, pp = spec.extra["args"], spec.degrees["pp"]
        cases.append({"num_layers": a["num_layers"], "pp": pp, "vp": a["num_virtual_stages_per_pipeline_rank"],
                      "first": a["decoder_first_pipeline_num_layers"], "last": a["decoder_last_pipeline_num_layers"],
                      "emb": False, "loss": False})
        mine.append(core_0_16.layer_split(a, pp))
    got = _worker("split", cases)
    for name, m, g in zip(names, mine, got):
        assert m["error"] and g["error"], (name, m, g)
        assert m["error"].split(":")[0].split(" ")[0] in g["error"], (name, m["error"], g["error"])
