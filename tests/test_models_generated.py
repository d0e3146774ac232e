"""The generated model tables: current with torchtitan's source, cited line by line, and sized like the real models.

``meshlint/data/models-*.toml`` (and ``models.toml``, the v0.2.x table) are generated from
torchtitan's own source by ``python -m meshlint.generate.models``; these tests regenerate each
from the pinned tree and demand the committed file, byte for byte, so a stale table fails CI.
The trees: main from ../shared/frameworks/, 0.3.0 unpacked by ``.ci/frameworks.sh`` into
.frameworks/; a test whose tree is absent skips, saying why. Parameter counts are checked against
the sizes the model makers published.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from meshlint.frameworks import models
from meshlint.generate import models as gen

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "frameworks"
TREES = {
    "main@b5bcd76c6": SHARED / "torchtitan-b5bcd76c6",
    "0.3.0": ROOT / ".frameworks" / "torchtitan-0.3.0",
    "0.2.x": SHARED / "torchtitan-v0.2-9810191bb-parent",
}
GENERATED = [v for v in models.VERSIONS if v in gen.PINNED]


def _tree(version: str) -> Path:
    root = TREES[version]
    if not (root / "torchtitan" / "models").is_dir():
        how = "run .ci/frameworks.sh" if ".frameworks" in str(root) else "the shared folder ../shared is missing"
        pytest.skip(f"torchtitan {version} sources are not at {root} ({how})")
    return root


def _data(version: str) -> Path:
    return Path(models.DATA) / models.VERSIONS[version]


def _entries(version: str):
    """(name, flavor, entry) of a table, each entry once (aliases skipped)."""
    table = models.load_builtin_file(str(_data(version)))
    seen = set()
    for (name, flavor), entry in table.items():
        if id(entry) not in seen:
            seen.add(id(entry))
            yield name, flavor, entry


# ---------------------------------------------------------------------------- current with the source

@pytest.mark.parametrize("version", GENERATED)
def test_the_committed_table_is_what_the_generator_makes_of_the_pinned_tree(version):
    root = _tree(version)
    text = gen.generate(str(root), version)
    committed = _data(version).read_text(encoding="utf-8")
    assert text == committed, (f"meshlint/data/{models.VERSIONS[version]} is stale: regenerate it with "
                               f"python -m meshlint.generate.models --version {version} --source {root} --write")


def test_every_pinned_version_has_a_table_and_every_table_a_header():
    assert set(gen.PINNED) == set(models.VERSIONS)
    for version in models.VERSIONS:
        assert _data(version).is_file(), version
        header = models.generated_header(version)
        if version in GENERATED:
            assert header["version"] == version
            assert "python -m meshlint.generate.models" in header["command"]


# ---------------------------------------------------------------------------- what the tables say

@pytest.mark.parametrize("version", ["main@b5bcd76c6", "0.3.0"])
def test_heads_models_and_flavors_are_all_there(version):
    table = models.builtin_for(version)
    wanted = {
        "llama3": {"debugmodel", "1B", "3B", "8B", "70B", "405B"},
        "deepseek_v3": {"debugmodel", "16B", "236B", "671B"},
        "qwen3": {"0.6B", "1.7B", "4B", "8B", "14B", "32B", "30B-A3B", "235B-A22B"},
        "qwen3_5": {"0.8B", "2B", "4B", "9B", "27B", "35B-A3B", "122B-A10B", "397B-A17B"},
        "gpt_oss": {"debugmodel", "20b", "120b"},
        "kimi_k2_7": {"debugmodel", "moonlight-16B-A3B", "Kimi-VL-A3B", "Kimi-K2.5"},
        "muse_glimmer": {"debugmodel", "30B", "debugmodel_mm", "30B_mm"},
        "flux": {"flux-dev", "flux-schnell", "flux-debug"},
    }
    for name, flavors in wanted.items():
        for flavor in flavors:
            assert (name, flavor) in table, (name, flavor)


@pytest.mark.parametrize("version", list(models.VERSIONS))
def test_every_entry_and_every_number_has_a_source(version):
    for name, flavor, entry in _entries(version):
        assert re.search(r":\d+ @ ", entry["source"]), (name, flavor)
        sources = entry.get("sources", {})
        for fact, value in entry.items():
            if fact in ("source", "sources", "note", "spec_name", "module"):
                continue
            assert fact in sources, f"{name} {flavor}: {fact} = {value!r} has no source"
            assert " @ " in sources[fact] or "counted from" in sources[fact], (name, flavor, fact)


def test_cited_lines_hold_the_literal_numbers():
    """A fact read straight off one literal cites the line where that literal is written."""
    root = _tree("main@b5bcd76c6")
    checked = 0
    for name, flavor, entry in _entries("main@b5bcd76c6"):
        for fact in ("n_layers", "n_heads", "dim", "vocab_size", "num_experts"):
            cite = entry.get("sources", {}).get(fact, "")
            match = re.fullmatch(r"([\w/.]+\.py):(\d+) @ b5bcd76c6", cite)
            if not match:
                continue
            line = (root / match[1]).read_text(encoding="utf-8").splitlines()[int(match[2]) - 1]
            digits = re.sub(r"[_\s]", "", line)
            assert str(entry[fact]) in digits, f"{name} {flavor} {fact}={entry[fact]}: {cite}: {line.strip()}"
            checked += 1
    assert checked > 150


@pytest.mark.parametrize("version", ["main@b5bcd76c6", "0.3.0"])
def test_trainer_facts_pipelining_and_refusals(version):
    table = models.builtin_for(version)
    for flavor in ("flux-dev", "flux-schnell", "flux-debug"):
        entry = table[("flux", flavor)]
        assert entry["pipelining"] is False
        assert "torchtitan/models/flux/__init__.py:" in models.sources_of(version, "flux", flavor)["pipelining"]
    for name in ("llama3", "deepseek_v3", "qwen3", "qwen3_5", "gpt_oss", "kimi_k2_7", "muse_glimmer"):
        assert all(e["pipelining"] for (n, _), e in table.items() if n == name), name
    kimi = table[("kimi_k2_7", "Kimi-K2.5")]
    cites = models.sources_of(version, "kimi_k2_5", "Kimi-K2.5")  # by the ModelSpec's name too
    assert kimi["tp1_only"] is True
    assert "torchtitan/models/kimi_k2_7/config_registry.py:" in cites["tp1_only"]
    assert kimi["refuses_cp"] is True and "parallelize.py" in cites["refuses_cp"]
    assert kimi.get("pp1_only", False) is (version == "0.3.0")  # 0.3.0's DistMuon also refused pp > 1
    assert table[("qwen3_5", "9B")]["refuses_cp"] is True
    assert not any(e.get("tp1_only") for (n, _), e in table.items() if n != "kimi_k2_7" and "kimi" not in n)


def test_facts_of_the_main_table():
    table = models.builtin_for("main")
    ds = table[("deepseek_v3", "671B")]
    assert (ds["attention"], ds["n_heads"], ds["n_kv_heads"], ds["head_dim"], ds["q_lora_rank"], ds["kv_lora_rank"],
            ds["v_head_dim"]) == ("mla", 128, 128, 192, 1536, 512, 128)
    assert (ds["num_experts"], ds["top_k"], ds["shared_experts"], ds["moe_hidden_dim"], ds["moe_layers"],
            ds["moe_layer_ids"]) == (256, 8, 1, 2048, 58, "3-60")
    q = table[("qwen3", "30B-A3B")]
    assert (q["num_experts"], q["top_k"], q["shared_experts"], q["moe_layers"], q["n_kv_heads"]) == (128, 8, 0, 48, 4)
    assert "ffn_hidden_dim" not in q and "ffn_hidden_dim: no dense feed-forward layer" in q["note"]
    assert table[("llama3", "1B")]["tied"] is True and table[("qwen3", "0.6B")]["tied"] is True
    hybrid = table[("qwen3_5", "27B")]
    assert hybrid["attention"] == "gqa+gated_deltanet" and hybrid["linear_attention_layers"] == 48
    assert table[("kimi_k2_7", "Kimi-K2.5")]["vision_n_heads"] == 16
    hf = table[("transformers_modeling_backend", "debugmodel")]
    assert hf["n_heads"] == 16 and "vocab_size" not in hf and "Hugging Face" in hf["note"]
    assert table[("flux", "flux-dev")]["n_layers"] == 57 and "vocab_size" not in table[("flux", "flux-dev")]


# ---------------------------------------------------------------------------- parameter counts

# (name, flavor): published total parameters in billions, and who published them
PUBLISHED = {
    ("llama3", "8B"): (8.03, "Meta Llama 3 8B"),
    ("llama3", "70B"): (70.55, "Meta Llama 3 70B"),
    ("llama3", "405B"): (405.85, "Meta Llama 3.1 405B"),
    ("qwen3", "0.6B"): (0.6, "Qwen3-0.6B"), ("qwen3", "1.7B"): (1.7, "Qwen3-1.7B"),
    ("qwen3", "4B"): (4.0, "Qwen3-4B"), ("qwen3", "8B"): (8.2, "Qwen3-8B"), ("qwen3", "14B"): (14.8, "Qwen3-14B"),
    ("qwen3", "32B"): (32.8, "Qwen3-32B"), ("qwen3", "30B-A3B"): (30.5, "Qwen3-30B-A3B"),
    ("qwen3", "235B-A22B"): (235.0, "Qwen3-235B-A22B"),
    ("deepseek_v3", "16B"): (15.7, "DeepSeek-V2-Lite (the 16B flavor's shape)"),
    ("deepseek_v3", "671B"): (671.0, "DeepSeek-V3 (without the MTP module)"),
    ("gpt_oss", "20b"): (20.91, "gpt-oss-20b model card"), ("gpt_oss", "120b"): (116.83, "gpt-oss-120b model card"),
    ("kimi_k2_7", "Kimi-K2.5"): (1040.0, "Kimi K2 report: 1.04T total (K2.5 adds a 0.4B vision tower)"),
    ("kimi_k2_7", "moonlight-16B-A3B"): (16.0, "Moonlight-16B-A3B"),
    ("qwen3_5", "27B"): (27.0, "Qwen3.5-27B"), ("qwen3_5", "35B-A3B"): (35.0, "Qwen3.5-35B-A3B"),
    ("qwen3_5", "122B-A10B"): (122.0, "Qwen3.5-122B-A10B"), ("qwen3_5", "397B-A17B"): (397.0, "Qwen3.5-397B-A17B"),
    ("flux", "flux-dev"): (12.0, "FLUX.1 [dev]: a 12B flow transformer"),
}


@pytest.mark.parametrize("version", ["main@b5bcd76c6", "0.3.0"])
@pytest.mark.parametrize("key", sorted(PUBLISHED))
def test_parameter_counts_are_within_two_percent_of_the_published_sizes(version, key):
    entry = models.builtin_for(version)[key]
    published, who = PUBLISHED[key]
    assert models.param_count(entry) / 1e9 == pytest.approx(published, rel=0.02), who


def test_the_counts_match_the_architecture_formula_for_plain_decoders():
    """The counted tree agrees with meshlint's closed formula where the formula applies (GQA, SwiGLU)."""
    table = models.builtin_for("main")
    for key in [("llama3", f) for f in ("8B", "70B", "405B")] + [("qwen3", f) for f in ("8B", "32B", "235B-A22B")]:
        entry = dict(table[key])
        counted = entry.pop("params")
        formula = models.param_count(entry)
        norms = entry["n_layers"] * 2 * entry["head_dim"] if key[0] == "qwen3" else 0  # qk_norm, not in the formula
        assert counted == formula + norms, key


# ---------------------------------------------------------------------------- the API

def test_versions_resolve_by_their_usual_spellings():
    assert models.resolve_version("main") == "main@b5bcd76c6"
    assert models.resolve_version("b5bcd76c6") == models.resolve_version("b5bcd76") == "main@b5bcd76c6"
    assert models.resolve_version("main@b5bcd76c6") == "main@b5bcd76c6"
    assert models.resolve_version("0.3.0") == "0.3.0"
    assert models.resolve_version("0.2.2") == models.resolve_version("v0.2.0") == "0.2.x"
    with pytest.raises(models.ModelTableError, match="no model table for torchtitan version '0.4.0'"):
        models.resolve_version("0.4.0")


def test_builtin_keeps_its_meaning_and_builtin_for_gives_each_version():
    assert models.builtin() is models.builtin_for("0.2.x") is models.builtin("0.2.2")
    assert models.builtin("main") is models.builtin_for("main@b5bcd76c6")
    main = models.builtin_for("main@b5bcd76c6")
    entry = models.lookup(main, "kimi_k2_7", "Kimi-K2.5")
    assert models.lookup(main, "kimi_k2_5", "Kimi-K2.5") is entry  # the ModelSpec's own name
    assert models.lookup(main, "torchtitan.models.kimi_k2_7", "Kimi-K2.5") is entry
    assert models.lookup(main, "llama3", "9B") is None
    merged = models.table_for((), {("llama3", "9B"): {"n_layers": 1}}, version="0.3.0")
    assert merged[("llama3", "9B")] == {"n_layers": 1} and ("qwen3_5", "9B") in merged


def test_a_table_is_parsed_once_then_read_from_the_cache(tmp_path, monkeypatch):
    # The load time is bench/bench_torchtitan.py's to measure; here: the second load parses no TOML.
    monkeypatch.setenv("MESHLINT_CACHE_DIR", str(tmp_path))
    for version in models.VERSIONS:
        models._VERSION_TABLES.clear()
        models._BUILTIN_TABLE = None
        first = models.builtin_for(version)  # parses and stores the cache
        models._VERSION_TABLES.clear()
        models._BUILTIN_TABLE = None
        with monkeypatch.context() as m:
            m.setattr(models, "load_builtin_file", lambda *a, **k: pytest.fail("parsed the TOML again"))
            assert models.builtin_for(version) == first
    models._VERSION_TABLES.clear()
    models._BUILTIN_TABLE = None


def test_the_generator_never_imports_torch_or_torchtitan(tmp_path):
    import subprocess
    import sys

    root = _toy_tree(tmp_path)  # imports torch and torchtitan modules, as the real trees do
    code = ("import sys; from meshlint.generate import models as g; "
            f"g.generate({str(root)!r}, 'main@abc1234'); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'torchtitan')]; print(bad); "
            "sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------------------- v0.2.x: the hand-typed table

# The table meshlint shipped before it was generated (typed by hand from several torchtitan commits),
# fact for fact. The generated v0.2.x table must keep every value, except the differences below.
HAND_TYPED_V02 = {
    ("llama3", "debugmodel"): {"n_layers": 6, "n_heads": 16, "n_kv_heads": 16, "dim": 256, "head_dim": 16,
                               "vocab_size": 2048, "ffn_hidden_dim": 768, "tied": False},
    ("llama3", "8B"): {"n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "dim": 4096, "head_dim": 128,
                       "vocab_size": 128256, "ffn_hidden_dim": 14336, "tied": False},
    ("llama3", "70B"): {"n_layers": 80, "n_heads": 64, "n_kv_heads": 8, "dim": 8192, "head_dim": 128,
                        "vocab_size": 128256, "ffn_hidden_dim": 28672, "tied": False},
    ("llama3", "405B"): {"n_layers": 126, "n_heads": 128, "n_kv_heads": 8, "dim": 16384, "head_dim": 128,
                         "vocab_size": 128256, "ffn_hidden_dim": 53248, "tied": False},
    ("llama4", "debugmodel"): {"n_layers": 6, "n_heads": 16, "n_kv_heads": 16, "dim": 256, "head_dim": 16,
                               "vocab_size": 2048, "ffn_hidden_dim": 768, "tied": False, "num_experts": 8,
                               "top_k": 1, "shared_experts": 1, "moe_hidden_dim": 512, "moe_layers": 3},
    ("llama4", "17bx16e"): {"n_layers": 48, "n_heads": 40, "n_kv_heads": 8, "dim": 5120, "head_dim": 128,
                            "vocab_size": 202048, "ffn_hidden_dim": 16384, "tied": False, "num_experts": 16,
                            "top_k": 1, "shared_experts": 1, "moe_hidden_dim": 8192, "moe_layers": 48},
    ("llama4", "17bx128e"): {"n_layers": 48, "n_heads": 40, "n_kv_heads": 8, "dim": 5120, "head_dim": 128,
                             "vocab_size": 202048, "ffn_hidden_dim": 16384, "tied": False, "num_experts": 128,
                             "top_k": 1, "shared_experts": 1, "moe_hidden_dim": 8192, "moe_layers": 24},
    ("deepseek_v3", "debugmodel"): {"n_layers": 6, "n_heads": 16, "n_kv_heads": 16, "dim": 256, "head_dim": 192,
                                    "vocab_size": 2048, "ffn_hidden_dim": 1024, "tied": False, "num_experts": 8,
                                    "top_k": 3, "shared_experts": 2, "moe_hidden_dim": 256, "moe_layers": 5,
                                    "attention": "mla"},
    ("deepseek_v3", "16B"): {"n_layers": 27, "n_heads": 16, "n_kv_heads": 16, "dim": 2048, "head_dim": 192,
                             "vocab_size": 102400, "ffn_hidden_dim": 10944, "tied": False, "num_experts": 64,
                             "top_k": 6, "shared_experts": 2, "moe_hidden_dim": 1408, "moe_layers": 26,
                             "attention": "mla", "params": 16_000_000_000},
    ("deepseek_v3", "671B"): {"n_layers": 61, "n_heads": 128, "n_kv_heads": 128, "dim": 7168, "head_dim": 192,
                              "vocab_size": 129280, "ffn_hidden_dim": 18432, "tied": False, "num_experts": 256,
                              "top_k": 8, "shared_experts": 1, "moe_hidden_dim": 2048, "moe_layers": 58,
                              "attention": "mla", "params": 671_000_000_000},
    ("qwen3", "debugmodel"): {"n_layers": 8, "n_heads": 16, "n_kv_heads": 8, "dim": 256, "head_dim": 128,
                              "vocab_size": 2048, "ffn_hidden_dim": 3072, "tied": True},
    ("qwen3", "0.6B"): {"n_layers": 28, "n_heads": 16, "n_kv_heads": 8, "dim": 1024, "head_dim": 128,
                        "vocab_size": 151936, "ffn_hidden_dim": 3072, "tied": True},
    ("qwen3", "1.7B"): {"n_layers": 28, "n_heads": 16, "n_kv_heads": 8, "dim": 2048, "head_dim": 128,
                        "vocab_size": 151936, "ffn_hidden_dim": 6144, "tied": True},
    ("qwen3", "4B"): {"n_layers": 36, "n_heads": 32, "n_kv_heads": 8, "dim": 2560, "head_dim": 128,
                      "vocab_size": 151936, "ffn_hidden_dim": 9728, "tied": True},
    ("qwen3", "8B"): {"n_layers": 36, "n_heads": 32, "n_kv_heads": 8, "dim": 4096, "head_dim": 128,
                      "vocab_size": 151936, "ffn_hidden_dim": 12288, "tied": False},
    ("qwen3", "14B"): {"n_layers": 40, "n_heads": 40, "n_kv_heads": 8, "dim": 5120, "head_dim": 128,
                       "vocab_size": 151936, "ffn_hidden_dim": 17408, "tied": False},
    ("qwen3", "32B"): {"n_layers": 64, "n_heads": 64, "n_kv_heads": 8, "dim": 5120, "head_dim": 128,
                       "vocab_size": 151936, "ffn_hidden_dim": 25600, "tied": False},
    ("qwen3", "debugmodel_moe"): {"n_layers": 8, "n_heads": 16, "n_kv_heads": 8, "dim": 256, "head_dim": 128,
                                  "vocab_size": 2048, "ffn_hidden_dim": 3072, "tied": True, "num_experts": 64,
                                  "top_k": 8, "shared_experts": 0, "moe_hidden_dim": 768, "moe_layers": 8},
    ("qwen3", "30B-A3B"): {"n_layers": 48, "n_heads": 32, "n_kv_heads": 4, "dim": 2048, "head_dim": 128,
                           "vocab_size": 151936, "ffn_hidden_dim": 6144, "tied": False, "num_experts": 128,
                           "top_k": 8, "shared_experts": 0, "moe_hidden_dim": 768, "moe_layers": 48},
    ("qwen3", "235B-A22B"): {"n_layers": 94, "n_heads": 64, "n_kv_heads": 4, "dim": 4096, "head_dim": 128,
                             "vocab_size": 151936, "ffn_hidden_dim": 12288, "tied": False, "num_experts": 128,
                             "top_k": 8, "shared_experts": 0, "moe_hidden_dim": 1536, "moe_layers": 94},
}

_UNUSED_FFN = ("every layer is MoE, so the model builds no dense FFN: the hand table carried the flavor's "
               "unused width, the generated table states no width it does not build")
# (name, flavor, fact): (generated value, why it differs from the hand-typed one)
V02_DIFFERENCES = {
    ("llama4", "17bx16e", "ffn_hidden_dim"): (None, _UNUSED_FFN),
    ("qwen3", "30B-A3B", "ffn_hidden_dim"): (None, _UNUSED_FFN),
    ("qwen3", "235B-A22B", "ffn_hidden_dim"): (None, _UNUSED_FFN),
    ("qwen3", "debugmodel_moe", "ffn_hidden_dim"): (None, _UNUSED_FFN),
    ("qwen3", "debugmodel_moe", "tied"): (False, "at 9810191bb^ this flavor does not set enable_weight_tying "
                                                 "(default False, qwen3/model/args.py); the hand table copied "
                                                 "the tying of the dense debugmodel"),
    ("deepseek_v3", "16B", "params"): (15_706_484_224, "the hand table gave the nominal size (MLA was not "
                                                       "derived); the generated one counts the module tree"),
    ("deepseek_v3", "671B", "params"): (671_026_404_352, "nominal size replaced by the counted one, as above"),
}


def test_the_generated_v02_table_keeps_the_hand_typed_values_or_explains_each_difference():
    table = models.builtin_for("0.2.x")
    seen = set()
    for (name, flavor), facts in HAND_TYPED_V02.items():
        entry = table[(name, flavor)]
        for fact, old in facts.items():
            got = entry.get(fact)
            if (name, flavor, fact) in V02_DIFFERENCES:
                expected, why = V02_DIFFERENCES[(name, flavor, fact)]
                assert got == expected and why, (name, flavor, fact)
                seen.add((name, flavor, fact))
            else:
                assert got == old, f"{name} {flavor} {fact}: hand-typed {old}, generated {got}"
        # a dropped FFN width is said in the entry itself
        if (name, flavor, "ffn_hidden_dim") in V02_DIFFERENCES:
            assert "ffn_hidden_dim: no dense feed-forward layer" in entry["note"]
    assert seen == set(V02_DIFFERENCES)


def test_the_v02_table_knows_which_models_cannot_be_pipelined():
    """At 9810191bb^ qwen3, gpt_oss and flux register no pipelining function (issue 12's miss)."""
    table = models.builtin_for("0.2.x")
    for name in ("qwen3", "gpt_oss", "flux"):
        assert not any(e.get("pipelining") for (n, _), e in table.items() if n == name), name
    for name in ("llama3", "llama4", "deepseek_v3"):
        assert all(e.get("pipelining") for (n, _), e in table.items() if n == name), name
    assert models.sources_of("0.2.2", "qwen3", "8B")["pipelining"].startswith("torchtitan/models/qwen3/__init__.py:")
    assert "sources" not in table[("qwen3", "8B")]  # kept out of the check path's table


V02_PUBLISHED = {("llama4", "17bx16e"): 109.0, ("llama4", "17bx128e"): 400.0, ("gpt_oss", "20b"): 20.91,
                 ("gpt_oss", "120b"): 116.83, ("deepseek_v3", "671B"): 671.0, ("deepseek_v3", "16B"): 15.7,
                 ("qwen3", "235B-A22B"): 235.0, ("llama3", "405B"): 405.85, ("flux", "flux-dev"): 12.0}


@pytest.mark.parametrize("key", sorted(V02_PUBLISHED))
def test_v02_parameter_counts_are_within_two_percent_of_the_published_sizes(key):
    assert models.param_count(models.builtin_for("0.2.x")[key]) / 1e9 == pytest.approx(V02_PUBLISHED[key], rel=0.02)


# ---------------------------------------------------------------------------- the generator on a toy tree

TOY_COMMON = '''
from dataclasses import dataclass


class Module:
    @dataclass(kw_only=True)
    class Config:
        param_init: dict | None = None


class Linear(Module):
    @dataclass(kw_only=True)
    class Config(Module.Config):
        in_features: int
        out_features: int
        bias: bool = False


class Embedding(Module):
    @dataclass(kw_only=True)
    class Config(Module.Config):
        num_embeddings: int
        embedding_dim: int


class Attention(Module):
    @dataclass(kw_only=True)
    class Config(Module.Config):
        n_heads: int
        n_kv_heads: int | None = None
        head_dim: int | None = None
        wq: Linear.Config


class Block(Module):
    @dataclass(kw_only=True)
    class Config(Module.Config):
        attention: Attention.Config
        feed_forward: Module.Config | None = None
        moe: Module.Config | None = None


class FeedForward(Module):
    @dataclass(kw_only=True)
    class Config(Module.Config):
        w1: Linear.Config


class Decoder(Module):
    @dataclass(kw_only=True)
    class Config(Module.Config):
        dim: int
        vocab_size: int
        layers: list
        tok_embeddings: Embedding.Config
        lm_head: Linear.Config
        enable_weight_tying: bool = False


@dataclass
class ModelSpec:
    name: str
    flavor: str
    model: object
    parallelize_fn: object
    pipelining_fn: object
'''

TOY_MODEL = '''
import torch
from torchtitan.models.common import Attention, Block, Decoder, Embedding, FeedForward, Linear, ModelSpec


def hidden(dim, multiple_of=256):
    h = int(2 * 4 * dim / 3)
    return multiple_of * ((h + multiple_of - 1) // multiple_of)


def _layers(n_layers, dim, n_heads):
    layers = []
    for _ in range(n_layers):
        layers.append(Block.Config(
            attention=Attention.Config(n_heads=n_heads, n_kv_heads=2,
                                       wq=Linear.Config(in_features=dim, out_features=dim)),
            feed_forward=FeedForward.Config(w1=Linear.Config(in_features=dim, out_features=hidden(dim)))))
    return layers


def _small():
    dim = 256
    vocab = 1000
    return Decoder.Config(dim=dim, vocab_size=vocab, layers=_layers(4, dim, 8),
                          tok_embeddings=Embedding.Config(num_embeddings=vocab, embedding_dim=dim),
                          lm_head=Linear.Config(in_features=dim, out_features=vocab))


def _from_checkpoint():
    dim = 512
    vocab = torch.load("vocab.pt")  # only known at run time
    return Decoder.Config(dim=dim, vocab_size=vocab, layers=_layers(2, dim, 4),
                          tok_embeddings=Embedding.Config(num_embeddings=1, embedding_dim=dim),
                          lm_head=Linear.Config(in_features=dim, out_features=1))


def _runtime_layers():
    n = torch.cuda.device_count()
    return Decoder.Config(dim=64, vocab_size=10, layers=_layers(n, 64, 4),
                          tok_embeddings=Embedding.Config(num_embeddings=10, embedding_dim=64),
                          lm_head=Linear.Config(in_features=64, out_features=10))


toy_configs = {"small": _small, "from_checkpoint": _from_checkpoint, "runtime_layers": _runtime_layers}


def parallelize_toy(model, parallel_dims):
    if parallel_dims.cp_enabled:
        raise NotImplementedError("no context parallelism for toy")
    return model


def model_registry(flavor: str) -> ModelSpec:
    return ModelSpec(name="toy", flavor=flavor, model=toy_configs[flavor](), parallelize_fn=parallelize_toy,
                     pipelining_fn=None)
'''


def _toy_tree(tmp_path) -> Path:
    (tmp_path / "torchtitan" / "models" / "common").mkdir(parents=True)
    (tmp_path / "torchtitan" / "models" / "toy").mkdir()
    (tmp_path / "torchtitan" / "__init__.py").write_text("")
    (tmp_path / "torchtitan" / "models" / "__init__.py").write_text("")
    (tmp_path / "torchtitan" / "models" / "common" / "__init__.py").write_text(TOY_COMMON)
    (tmp_path / "torchtitan" / "models" / "toy" / "__init__.py").write_text(TOY_MODEL)
    return tmp_path


def test_the_generator_reads_literals_through_helpers_and_cites_them(tmp_path):
    text = gen.generate(str(_toy_tree(tmp_path)), "main@abc1234")
    out = tomllib.loads(text)
    small = out["toy"]["small"]
    assert (small["n_layers"], small["n_heads"], small["n_kv_heads"], small["dim"], small["vocab_size"],
            small["ffn_hidden_dim"], small["tied"]) == (4, 8, 2, 256, 1000, 768, False)
    # embeddings + lm_head + per layer wq and w1
    assert small["params"] == 1000 * 256 * 2 + 4 * (256 * 256 + 256 * 768)
    lines = TOY_MODEL.splitlines()
    src = "torchtitan/models/toy/__init__.py"
    assert small["sources"]["dim"] == f"{src}:{lines.index('    dim = 256') + 1} @ abc1234"
    assert small["sources"]["vocab_size"] == f"{src}:{lines.index('    vocab = 1000') + 1} @ abc1234"
    # the FFN width cites the dim it is computed from and the helper's literals
    cited = {int(x) for x in re.search(rf"{src}:([\d,]+)", small["sources"]["ffn_hidden_dim"])[1].split(",")}
    assert {lines.index("    dim = 256") + 1, lines.index("    h = int(2 * 4 * dim / 3)") + 1} <= cited
    assert small["pipelining"] is False and small["refuses_cp"] is True


def test_what_is_not_literal_is_left_out_with_a_note_never_guessed(tmp_path):
    out = tomllib.loads(gen.generate(str(_toy_tree(tmp_path)), "main@abc1234"))
    ckpt = out["toy"]["from_checkpoint"]
    assert "vocab_size" not in ckpt and ckpt["dim"] == 512 and ckpt["n_layers"] == 2
    assert "vocab_size: torch.load(...) is outside the source tree" in ckpt["note"]
    assert "runtime_layers" not in out["toy"]  # its layer count depends on the machine
    unreadable = " ".join(out["_generated"]["unreadable"])
    assert "flavor runtime_layers" in unreadable and "torch.cuda.device_count(...)" in unreadable
