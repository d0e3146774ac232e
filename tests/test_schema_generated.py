"""The generated framework schemas (meshlint/data/schema/*.json) and schema_data.check, against the frameworks.

* Each schema regenerates from its source to the committed file: KempnerForge and torchtitan
  main from ../shared/frameworks/, torchtitan v0.2.x from the last TOML-era tree there and
  from 0.2.2 as the package index ships it, 0.1.0 and 0.3.0 from the package index (``.ci/frameworks.sh``
  unpacks both into .frameworks/). A missing source skips, saying which.
* Facts read off the frameworks by hand hold in the generated data.
* Every key meshlint's dialects read (their KEYS) exists in the schema of their version with the
  same default, type and choices: the differences known today are listed in KNOWN_KEY_MISMATCHES
  (bugs in the hand tables, for the integrator); a new one or a fixed one fails this test.
* schema_data.check agrees with the real loaders (KempnerForge's load_config, torchtitan v0.2's
  ConfigManager, the 0.3.0/main config classes) on seeded single-key edits: typos in every table,
  wrong types, values outside an enum. Run in subprocesses; skipped where torch/tyro/a source is absent.
* docs/refusals.md lists exactly the raise/assert sites meshlint/generate/refusals.py enumerates.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from meshlint.frameworks import schema_data
from meshlint.generate import schema as gen

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "frameworks"
LOCAL = ROOT / ".frameworks"
SOURCES = {  # schema id -> [(source tree, commit it is at, exact: the committed file byte for byte)]
    ("kempnerforge", "5666d0d"): [(SHARED / "KempnerForge-5666d0d", "5666d0d", True)],
    # the 0.1.0 wheel holds the same torchtitan/ as tag v0.1.0 (f7084fc78), less the TOML train configs
    ("torchtitan", "0.1.0"): [(LOCAL / "torchtitan-0.1.0", "f7084fc78", True)],
    ("torchtitan", "0.2.x"): [(SHARED / "torchtitan-v0.2-9810191bb-parent", "9810191bb^", True),
                              (LOCAL / "torchtitan-0.2.2", "0.2.2", False)],
    ("torchtitan", "0.3.0"): [(LOCAL / "torchtitan-0.3.0", "0.3.0", True)],
    ("torchtitan", "main@b5bcd76c6"): [(SHARED / "torchtitan-b5bcd76c6", "b5bcd76c6", True)],
}
PACKAGE = {"kempnerforge": "kempnerforge", "torchtitan": "torchtitan", "accelerate": "accelerate"}


def _source(framework: str, root: Path) -> Path:
    if not (root / PACKAGE[framework]).is_dir():
        pytest.skip(f"{root} is absent (../shared/frameworks, or .ci/frameworks.sh for the package-index releases)")
    return root


# ----------------------------------------------------------------------------- regenerating

@pytest.mark.parametrize("ident,source", [(i, s) for i, sources in SOURCES.items() for s in sources],
                         ids=lambda x: x[1] if isinstance(x, tuple) and len(x) == 2 else str(x[0].name))
def test_schema_regenerates_from_source(ident, source):
    framework, version = ident
    root, commit, exact = source
    _source(framework, root)
    fresh = gen.generate(framework, root, version, commit)
    committed_path = gen.out_path(framework, version)
    committed = json.loads(committed_path.read_text(encoding="utf-8"))
    if exact:
        assert gen.dumps(fresh) == committed_path.read_text(encoding="utf-8"), (
            f"{committed_path.name} is stale: run python -m meshlint.generate.schema --framework {framework} "
            f"--source {root} --version {version} --commit {commit}")
    else:  # the same release from another place: the same schema, only the provenance differs
        for field in ("commit", "generated_by"):
            fresh.pop(field), committed.pop(field)
        assert fresh == committed


def test_generator_cli_check_mode(tmp_path):
    root = _source("kempnerforge", SHARED / "KempnerForge-5666d0d")
    out = tmp_path / "kf.json"
    args = ["--framework", "kempnerforge", "--source", str(root), "--version", "5666d0d", "--commit", "5666d0d",
            "--out", str(out)]
    assert gen.main(args) == 0 and out.is_file()
    assert gen.main(args + ["--check"]) == 0
    out.write_text("{}")
    assert gen.main(args + ["--check"]) == 1


def test_generator_refuses_a_tree_that_is_not_the_framework(tmp_path, capsys):
    assert gen.main(["--framework", "torchtitan", "--source", str(tmp_path), "--version", "x", "--commit", "x"]) == 2
    assert "no torchtitan/ package" in capsys.readouterr().err


# ----------------------------------------------------------------------------- facts in the data

def _schema(framework, version):
    return schema_data.load(framework, version)


def test_known_facts_kempnerforge():
    s = _schema("kempnerforge", "5666d0d")
    assert s.default("distributed.dp_shard") == (True, -1)
    assert s.default("distributed.pp_schedule") == (True, "1f1b")
    assert s.key("distributed.pp_schedule")["enum"] == ["1f1b", "gpipe", "interleaved_1f1b"]
    assert s.key("train.mixed_precision")["enum"] == ["bf16", "fp16", "fp32", "fp8"]
    assert s.key("model.n_kv_heads")["type"] == {"kind": "optional", "of": {"kind": "int"}}
    assert s.key("model.sdpa_backend")["enum"] == ["auto", "flash", "efficient", "cudnn", "math"]
    assert s.key("model.sdpa_backend")["enum_from"].startswith("kempnerforge/config/model.py:")
    assert s.key("model.moe_bias_schedule")["enum_check"]["when"] == ["self.num_experts > 0"]
    assert s.key("adapter.type")["enum_check"]["registry"]["category"] == "adapter"
    assert "mlp_2layer" in s.key("adapter.type")["enum"]
    assert s.key("checkpoint.dyn_ckpt_window")["table"] == "checkpoint.dyn_ckpt_window"
    assert s.key("data.datasets")["table"] == "data.datasets[]"
    assert s.key("data.datasets[].weight")["default"] == 1.0
    vlm = s.data["tables"]["vlm"]["dispatch"]
    assert vlm["key"] == "arch" and vlm["default"] == "joint_decoder"
    assert set(vlm["map"]) == {"joint_decoder", "cross_attention", "mot", "moma"}
    # default_factory=lambda: {**{k: list(v) for k, v in DEFAULT_MODULE_PATTERNS.items()}, "moma": [...]}: the copy
    # idiom over a module constant, merged with the arch's own alias, is a literal (ML860 reads its keys)
    patterns = s.data["classes"]["kempnerforge.config.vlm.MoMaConfig"]["keys"]["module_patterns"]
    assert list(patterns["default"]) == ["transformer", "vision_encoder", "adapter", "moma"]
    assert patterns["default"]["vision_encoder"] == ["vision_encoder", "vision_encoder.*"]
    assert set(s.sections()) == {"model", "train", "optimizer", "scheduler", "data", "eval", "distributed",
                                 "checkpoint", "metrics", "profiling", "vision_encoder", "adapter", "vlm", "video"}
    assert s.loader["unknown_keys"]["source"][0].startswith("kempnerforge/config/loader.py:")


def test_known_facts_torchtitan():
    v02 = _schema("torchtitan", "0.2.x")
    assert v02.default("parallelism.data_parallel_shard_degree") == (True, -1)
    assert v02.key("parallelism.fsdp_reshard_after_forward")["enum"] == ["default", "always", "never"]
    assert v02.default("parallelism.pipeline_parallel_schedule") == (True, "1F1B")
    assert v02.default("training.local_batch_size") == (True, 8)
    assert v02.key("training.dataloader.num_workers")["default"] == 0
    assert v02.key("parallelism.expert_tensor_parallel_degree") is not None
    assert v02.key("parallelism.full_dtensor") is None  # not a v0.2 key (0.3.0's spmd_backend)
    assert v02.loader["era"] == "toml"
    v030 = _schema("torchtitan", "0.3.0")
    assert v030.key("parallelism.spmd_backend")["enum"] == ["partial_dtensor", "full_dtensor", "spmd_types"]
    assert v030.key("parallelism.expert_tensor_parallel_degree") is None
    assert v030.default("training.local_batch_size") == (True, 8)
    main = _schema("torchtitan", "main@b5bcd76c6")
    assert main.key("parallelism.spmd_backend")["enum"] == ["partial_dtensor", "spmd_types"]
    assert main.default("training.num_tokens_per_microbatch_per_dp_rank") == (True, 16384)
    assert main.default("parallelism.num_pp_microbatches") == (True, 1)
    assert main.key("training.local_batch_size") is None
    assert main.key("model_spec")["cli"] is False
    ac = main.data["tables"]["activation_checkpoint"]
    assert ac["optional"] and len(ac["classes"]) == 3  # selective, full, memory budget (or None)
    assert main.loader["era"] == "registry"
    for s in (v02, v030, main):
        assert s.default("parallelism.fsdp_reshard_after_forward") == (True, "default")


def test_every_entry_cites_a_line_of_its_source():
    for framework, version in schema_data.available():
        s = _schema(framework, version)
        for qn, cls in s.data["classes"].items():
            assert ":" in cls["source"], qn
            for name, key in cls["keys"].items():
                path, _, line = key["source"].rpartition(":")
                assert path.endswith(".py") and line.isdigit(), (qn, name)
                assert any(k in key for k in ("default", "default_factory", "default_expr", "required")), (qn, name)


def test_load_is_lazy_and_cached():
    # How fast a load is, is measured by bench/bench_torchtitan.py, never by a timed test: here only
    # that load reads nothing until asked, and that a second load is the same object, read once.
    for framework, version in schema_data.available():
        schema_data._SCHEMAS.clear()
        s = schema_data.load(framework, version)
        assert s._data is None  # lazy: nothing read yet
        assert isinstance(s.data, dict) and s._data is not None
        assert schema_data.load(framework, version) is s and s.data is s._data


def test_a_prewritten_module_without_data_reads_the_schema_file(monkeypatch):
    """DATA is the schema file's content ahead of time; a module without it (or none at all) reads the file."""
    framework, version = "kempnerforge", "5666d0d"
    module = importlib.import_module(schema_data.compiled_module(framework, version))
    expected = json.loads(Path(schema_data.load(framework, version).path).read_text(encoding="utf-8"))
    for missing in ("DATA", "module"):
        schema_data._SCHEMAS.clear()
        if missing == "DATA":
            monkeypatch.delattr(module, "DATA")
        else:
            monkeypatch.setattr(schema_data, "_prewritten", lambda *a: None)
        assert schema_data.load(framework, version).data == expected
        monkeypatch.undo()
    schema_data._SCHEMAS.clear()


def test_prewritten_conditions_are_current_and_translate_alike():
    # meshlint/schema_compiled/ holds each schema's texts compiled ahead of time: each module is what the
    # generator writes from the committed schema now, covers every text, and each function is the run-time
    # translation of its text (same source, same constants)
    from meshlint.generate import schema_compiled

    for path, text in schema_compiled.outputs().items():
        assert path.is_file() and path.read_text(encoding="utf-8") == text, \
            f"{path.name} is stale: run python -m meshlint.generate.schema_compiled"
    for framework, version in schema_data.available():
        module = importlib.import_module(schema_data.compiled_module(framework, version))
        data = json.loads(Path(schema_data.load(framework, version).path).read_text(encoding="utf-8"))
        assert json.dumps(module.DATA) == json.dumps(data)  # the file's content, keys in the file's order
        texts = schema_compiled.texts(data)
        # a schema without checks (torchtitan 0.1.0's dataclasses have no __post_init__) has no texts
        has_checks = any(c.get("checks") for c in data["classes"].values())
        assert (bool(texts) or not has_checks) and set(texts) >= set(module.COMPILED)
        missing = [t for t in texts if t not in module.COMPILED]
        assert not missing, missing  # every constant of these schemas writes as a literal
        for text, fn in module.COMPILED.items():
            translated = schema_data.translated_source(text)
            assert (fn is None) == (translated is None), text
            if fn is not None:
                assert fn.__defaults__ == (translated[1],), text


def test_no_condition_is_compiled_at_run_time_on_the_frameworks_own_configs(monkeypatch):
    # with the prewritten modules, checking the shipped configs translates no text at run time
    import tomllib

    compiled = []
    real = schema_data.translated_source
    monkeypatch.setattr(schema_data, "translated_source", lambda text: compiled.append(text) or real(text))
    monkeypatch.setattr(schema_data, "_COMPILED", {})
    monkeypatch.setattr(schema_data, "_CONDS", {})
    monkeypatch.setattr(schema_data, "_SCHEMAS", {})
    checked = 0
    for framework, version, root, pattern in (
            ("kempnerforge", "5666d0d", SHARED / "KempnerForge-5666d0d", "configs/**/*.toml"),
            ("torchtitan", "0.2.x", SHARED / "torchtitan-v0.2-9810191bb-parent", "torchtitan/models/*/train_configs/*.toml")):
        s = schema_data.load(framework, version)
        for path in sorted(root.glob(pattern)):
            s.check(tomllib.loads(path.read_text(encoding="utf-8")))
            checked += 1
    if not checked:
        pytest.skip("the frameworks' configs are not in ../shared/frameworks")
    assert compiled == []


def test_unknown_version_is_a_typed_error():
    with pytest.raises(schema_data.SchemaError, match="generated: .*kempnerforge 5666d0d"):
        schema_data.load("torchtitan", "9.9")
    assert schema_data.load("torchtitan", "0.2.2").version == "0.2.x"
    assert schema_data.load("torchtitan", "main").version == "main@b5bcd76c6"


# ----------------------------------------------------------------------------- meshlint's own key tables

# (version, key path, what differs): known today. Each is a bug in meshlint's hand tables (or in the
# generator): fix it there and remove it here. A mismatch not listed, or listed but gone, fails.
KNOWN_KEY_MISMATCHES = {
    ("0.2.x", "model.name", "default"),
    ("0.2.x", "model.flavor", "default"),
}
_TYPE_KINDS = {"int": ("int",), "str": ("str", "literal", "enum"), "bool": ("bool",), "float": ("float",),
               "array": ("list", "tuple"), "table": ("dataclass",)}


def _kinds(typ: dict) -> set:
    if typ["kind"] == "optional":
        return _kinds(typ["of"])
    if typ["kind"] == "union":
        return {k for t in typ["of"] for k in _kinds(t)}
    return {typ["kind"]}


def _key_mismatches():
    from meshlint.frameworks.versions import VERSIONS

    out = {}
    schema_dir = Path(importlib.util.find_spec("meshlint").origin).parent / "data" / "schema"
    with_schemas = {f.name.split("-")[0] for f in schema_dir.glob("*.json")}
    for entry in VERSIONS:
        if entry.framework not in with_schemas:  # Accelerate and Megatron keep their facts in their own packages,
            continue                            # compared with the real releases by their own tests
        try:
            s = schema_data.load(entry.framework, entry.version)
        except schema_data.SchemaError:
            out[(entry.version, "*", "no schema")] = f"no generated schema for {entry.framework} {entry.version}"
            continue
        module = importlib.import_module(entry.module)
        pseudo = s.loader.get("pseudo_sections", {})
        for k in module.KEYS:
            if k.path.split(".")[0] in pseudo:
                continue  # meshlint's record of model_spec=model_registry(...), not a config field
            key = s.key(k.path)
            if key is None:
                out[(entry.version, k.path, "missing")] = "not a key of this version: the framework refuses it"
                continue
            table = s.data["tables"].get(k.path.rpartition(".")[0], {})
            dispatch = table.get("dispatch")
            has, default = (True, dispatch["default"]) if dispatch and dispatch["key"] == k.leaf else s.default(k.path)
            if not has:
                default = key.get("default_expr", "<built by a factory>" if "default_factory" in key else "<required>")
            if default != k.default:
                out[(entry.version, k.path, "default")] = f"meshlint {k.default!r}, framework {default!r} ({key['source']})"
            if not _kinds(key["type"]) & set(_TYPE_KINDS.get(k.type.rstrip("?"), (k.type.rstrip("?"),))):
                out[(entry.version, k.path, "type")] = f"meshlint {k.type}, framework {key['annotation']}"
            if tuple(k.choices or ()) != tuple(key.get("enum") or ()):
                out[(entry.version, k.path, "choices")] = (f"meshlint {k.choices!r}, framework {key.get('enum')!r} "
                                                           f"({key.get('enum_from')})")
    return out


def test_meshlint_key_tables_agree_with_the_schemas():
    found = _key_mismatches()
    new = {k: v for k, v in found.items() if k not in KNOWN_KEY_MISMATCHES}
    gone = KNOWN_KEY_MISMATCHES - set(found)
    assert not new, "meshlint's KEYS differ from the framework:\n" + "\n".join(f"  {k}: {v}" for k, v in new.items())
    assert not gone, f"fixed (remove from KNOWN_KEY_MISMATCHES): {sorted(gone)}"


def test_kempnerforge_n_kv_heads_default_comes_from_the_default_instance():
    # A [model] that leaves n_kv_heads out keeps the default JobConfig()'s 32 (its __post_init__ set it
    # from the default n_heads), not its own n_heads: loader.py rebuilds sections from the default instance.
    s = _schema("kempnerforge", "5666d0d")
    refused = s.check({"model": {"n_heads": 16, "dim": 2048}})
    assert [p["refused"] for p in refused] == [True]
    assert "n_heads (16) must be divisible by n_kv_heads (32)" in refused[0]["message"]
    assert s.check({"model": {"n_heads": 64, "dim": 4096}}) == []  # silently GQA 64:32, not MHA
    assert s.check({"model": {"n_heads": 16, "n_kv_heads": 16, "dim": 2048}}) == []


# ----------------------------------------------------------------------------- check(), by hand

def _messages(problems):
    return [(p["kind"], p["key"], p["level"], p["refused"]) for p in problems]


def test_unknown_keys_in_every_section_are_refused_with_did_you_mean():
    kf = _schema("kempnerforge", "5666d0d")
    [p] = kf.check({"checkpoint": {"intervall": 500}})
    assert (p["kind"], p["key"], p["suggestion"], p["refused"]) == ("unknown-key", "checkpoint.intervall", "interval", True)
    assert "Unknown config keys in CheckpointConfig: ['intervall']" in p["message"]
    [p] = kf.check({"train": {"local_batch_sze": 1}})
    assert p["refused"] and p["section"] == "train"
    [p] = kf.check({"checkpointt": {"interval": 5}})
    assert p["suggestion"] == "checkpoint" and p["section"] == ""
    [p] = kf.check({"model": {"seq_len": 4096}})
    assert p["elsewhere"] == ["train"] and "seq_len is a key of [train]" in p["message"]
    [p] = kf.check({"data": {"datasets": [{"path": "x"}, {"path": "y", "weigth": 2}]}})
    assert p["key"] == "data.datasets[1].weigth" and p["suggestion"] == "weight"
    [p] = kf.check({"checkpoint": {"dyn_ckpt_window": {"strt": 1}}})
    assert "DynamicCheckpointWindow" in p["framework"]
    tt = _schema("torchtitan", "0.2.x")
    [p] = tt.check({"checkpoint": {"intervall": 500}})
    assert p["refused"] and "Invalid field names in <class 'torchtitan.config.job_config.Checkpoint'>" in p["message"]
    [p] = tt.check({"training": {"dataloader": {"num_wokers": 2}}})
    assert p["key"] == "training.dataloader.num_wokers" and p["suggestion"] == "num_workers"
    [p] = tt.check({"parallelism": {"full_dtensor": True}})
    assert p["refused"]  # meshlint's dialect still lists it: see KNOWN_KEY_MISMATCHES
    [p] = tt.check({"job": {"custom_config_module": "my.ext"}, "parallelism": {"my_degree": 2}})
    assert p["level"] == "warning" and not p["refused"]  # the custom JobConfig may define it
    [p] = tt.check({"hf_transformers": {"model": "x"}}, custom_module="my.ext")  # given on the launch line
    assert p["level"] == "warning" and "my.ext" in p["message"]
    main = _schema("torchtitan", "main@b5bcd76c6")
    [p] = main.check({"training": {"local_batch_size": 8}, "model": {"name": "llama3", "flavor": "8B"}})
    assert p["other_versions"] == ["0.1.0", "0.2.x", "0.3.0"] and "unexpected keyword argument 'local_batch_size'" \
        in p["message"]
    [p] = main.check({"parallelism": {"tensor_paralel_degree": 2}}, origin="cli")
    assert "Unrecognized options: --parallelism.tensor_paralel_degree" in p["message"]


def test_types_and_enums_say_what_the_framework_does():
    kf = _schema("kempnerforge", "5666d0d")
    by = {p["key"]: p for p in kf.check({"distributed": {"tp": "2", "pp": 2.7, "dp_replicate": True,
                                                          "pp_schedule": "1F1B", "backend": 5},
                                         "train": {"compile_model": "no", "mixed_precision": "bf8"},
                                         "optimizer": {"lr": 1}})}
    assert (by["distributed.tp"]["level"], by["distributed.tp"]["effective"]) == ("warning", 2)
    assert by["distributed.pp"]["effective"] == 2 and "truncates" in by["distributed.pp"]["framework"]
    assert "counts as 1" in by["distributed.dp_replicate"]["framework"]
    assert by["distributed.pp_schedule"]["refused"] and "is not a valid PipelineSchedule" in by["distributed.pp_schedule"]["framework"]
    assert by["distributed.backend"]["level"] == "error" and not by["distributed.backend"]["refused"]
    assert by["train.compile_model"]["effective"] is False
    assert by["train.mixed_precision"]["refused"]
    assert "optimizer.lr" not in by  # int 1 for a float: converted exactly
    tt = _schema("torchtitan", "0.2.x")
    [p] = tt.check({"parallelism": {"fsdp_reshard_after_forward": "sometimes"}})
    assert (p["kind"], p["level"], p["refused"]) == ("invalid-value", "error", False)
    assert "tyro only warns" in p["framework"]
    [p] = tt.check({"parallelism": {"fsdp_reshard_after_forward": "sometimes"}}, origin="cli")
    assert p["refused"] and "invalid choice" in p["framework"]
    [p] = tt.check({"parallelism": {"tensor_parallel_degree": "2"}})
    assert p["kind"] == "wrong-type" and not p["refused"]
    assert tt.check({"parallelism": {"tensor_parallel_degree": "2"}}, origin="cli") == []
    main = _schema("torchtitan", "main")
    [p] = main.check({"parallelism": {"spmd_backend": "full_dtensor"}})
    assert p["refused"] and "must be either 'partial_dtensor' or 'spmd_types'" in p["framework"]


def test_section_checks_and_cross_section_presence():
    kf = _schema("kempnerforge", "5666d0d")
    [p] = kf.check({"distributed": {"tp": 0}})
    assert p["refused"] and "tp must be >= 1" in p["message"]
    [p] = kf.check({"vlm": {}})
    assert p["refused"] and "[vision_encoder] is missing" in p["message"]
    [p] = kf.check({"video": {}})
    assert "[vlm] is missing" in p["message"]
    assert kf.check({"vlm": {"arch": "cross_attention", "cross_attention_every_n_layers": 2}, "vision_encoder": {}}) == []
    [p] = kf.check({"vlm": {"cross_attention_every_n_layers": 2}, "vision_encoder": {}})
    assert "JointDecoderConfig" in p["message"]  # arch defaults to joint_decoder, which has no such key
    [p] = kf.check({"vlm": {"arch": "crossattn"}, "vision_encoder": {}})
    assert p["kind"] == "unknown-variant" and p["refused"]
    assert kf.check({"model": {"moe_bias_schedule": "x"}}) == []  # only checked for MoE models
    [p] = kf.check({"model": {"moe_bias_schedule": "x", "num_experts": 8}})
    assert p["refused"] and "Unknown moe_bias_schedule: 'x'" in p["message"]
    [p] = kf.check({"adapter": {"type": "mlp"}, "vlm": {}, "vision_encoder": {}})
    assert (p["kind"], p["refused"]) == ("invalid-value", True) and "Unknown adapter.type: mlp" in p["message"]
    assert "mlp_2layer" in p["expected"] and "your own code registers" in p["message"]
    tt = _schema("torchtitan", "0.2.x")
    [p] = tt.check({"validation": {"steps": 0}})
    assert p["refused"] and "AssertionError" in p["message"]


def test_the_frameworks_own_configs_pass():
    # every shipped training config loads in its framework: the schema check must not refuse any of them
    import tomllib

    for framework, version, root, pattern in (
            ("kempnerforge", "5666d0d", SHARED / "KempnerForge-5666d0d", "configs/train/*.toml"),
            ("torchtitan", "0.2.x", SHARED / "torchtitan-v0.2-9810191bb-parent", "torchtitan/models/*/train_configs/*.toml")):
        if not root.is_dir():
            continue
        s = _schema(framework, version)
        files = sorted(root.glob(pattern))
        assert files
        for path in files:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            refused = [p["message"] for p in s.check(data) if p["refused"]]
            assert not refused, (path, refused)


def test_check_never_raises_on_odd_input():
    weird = [None, 5, [], {"": {}}, {"model": None}, {"model": {"n_heads": {"a": 1}}}, {"distributed": [1, 2]},
             {"train": {"seq_len": float("nan")}}, {"data": {"datasets": [1, {"x": 1}]}}, {1: 2},
             {"vlm": {"arch": None}}, {"optimizer": {"betas": "x"}}, {"model": {"dim": 10 ** 400}}]
    for framework, version in schema_data.available():
        s = _schema(framework, version)
        for data in weird:
            for origin in ("file", "cli"):
                problems = s.check(data, origin=origin)
                assert isinstance(problems, list)
                for p in problems:
                    assert p["message"] and p["level"] in ("error", "warning", "info"), p


# ----------------------------------------------------------------------------- against the real loaders

_WORKER = r'''
import contextlib, io, json, logging, sys, types, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
mode, root, listfile = sys.argv[1:4]
sys.path.insert(0, root)
if mode != "kempnerforge":
    pkg = types.ModuleType("torchtitan"); pkg.__path__ = [root + "/torchtitan"]; sys.modules["torchtitan"] = pkg
if mode == "kempnerforge":
    from kempnerforge.config.loader import load_config
    load = lambda case: load_config(case["path"], cli_args=[])
elif mode == "toml":
    from torchtitan.config.manager import ConfigManager
    load = lambda case: ConfigManager().parse_args(["--job.config_file", case["path"]])
else:
    import torchtitan.config.configs as configs
    def load(case):
        ((section, values),) = case["data"].items()
        return types.SimpleNamespace(**{section: getattr(configs, case["cls"])(**values)})
def plain(v):
    if isinstance(v, (str, int, float, bool)) or v is None: return v
    if isinstance(v, (list, tuple)): return [plain(x) for x in v]
    if isinstance(v, dict): return {str(k): plain(x) for k, x in v.items()}
    return repr(v)
for line in open(listfile):
    case = json.loads(line)
    out = {"id": case["id"]}
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            node = load(case)
        for part in case["key"].split("."):
            node = getattr(node, part)
        out["value"] = plain(node)
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    print(json.dumps(out), flush=True)
'''

_VALUES = {"int": ["2", 2.5, 2.0, True, [1], "abc", 0, -3], "float": [1, "0.5", True, "x", [1.0]],
           "bool": ["yes", "no", 0, 2, "maybe", 1.5], "str": [5, True, ["a"], 1.5], "list": ["x", 3, {"a": 1}],
           "dict": [3, "x"], "tuple": ["x", [0.1, 0.2, 0.3]]}
# sections the framework needs beside the one edited (KempnerForge: [vlm] needs [vision_encoder], ...)
_CONTEXT = {"vlm": {"vision_encoder": {}}, "video": {"vision_encoder": {}, "vlm": {}},
            "adapter": {"vision_encoder": {}, "vlm": {}}}
# keys the harness itself sets (the path of the file) or whose only effect is on the machine
_SKIP = {"job.config_file"}


def _edits(s, tables, seed: int, n: int, default_class: bool = False):
    """Seeded single-key edits: a typo in each table, wrong types and out-of-enum values for each key."""
    rnd = random.Random(seed)
    out = []
    for table in tables:
        keys = s.keys(table, s.data["tables"][table]["default_class"] if default_class else None)
        names = [k for k, v in keys.items() if "table" not in v]
        if names:
            name = rnd.choice(names)
            i = rnd.randrange(len(name))
            out.append((table, name[:i] + name[i + 1:] if len(name) > 3 else name + "x", 1))
        for name, key in keys.items():
            if "table" in key or key.get("init") is False or key.get("cli") is False or f"{table}.{name}" in _SKIP:
                continue
            kinds = _kinds(key["type"])
            values = [v for kind in kinds for v in _VALUES.get(kind, [])][:8]
            if key.get("enum"):
                first = key["enum"][0]
                values += ["bogus", first.upper() if isinstance(first, str) else "X"]
            out += [(table, name, v) for v in values]
    typos = [e for e in out if e[2] == 1 and e[1] not in s.keys(e[0])]
    rest = [e for e in out if e not in typos]
    rnd.shuffle(rest)
    return typos + rest[: max(0, n - len(typos))]


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(x) for x in value) + "]"
    return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"


def _write_toml(path: Path, data: dict) -> None:
    lines = []

    def emit(prefix, table):
        if prefix:
            lines.append(f"[{prefix}]")
        for k, v in table.items():
            if not isinstance(v, dict):
                lines.append(f"{k} = {_toml(v)}")
        for k, v in table.items():
            if isinstance(v, dict):
                emit(f"{prefix}.{k}" if prefix else k, v)

    emit("", data)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _needs(*modules):
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed: the real loader cannot run")


def _run_real(mode: str, root: Path, cases: list, tmp_path: Path) -> dict:
    listing = tmp_path / "cases.jsonl"
    listing.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    proc = _run_worker(tmp_path, _WORKER, [mode, str(root), str(listing)], timeout=900)
    results = {}
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        results[row["id"]] = row
    if len(results) != len(cases):
        pytest.fail(f"the real loader worker stopped: {proc.stderr[-2000:]}")
    return results


def _compare(s, cases: list, real: dict, sections_only: bool = False) -> list:
    wrong = []
    for case in cases:
        got = real[case["id"]]
        problems = s.check(case["data"])
        if sections_only:  # the worker builds the section's class alone, not Trainer.Config around it
            problems = [p for p in problems if p["section"]]
        refused = any(p["refused"] for p in problems)
        if refused != ("error" in got):
            wrong.append((case["key"], case["value"], got.get("error") or f"loaded {got.get('value')!r}",
                          [p["message"] for p in problems]))
            continue
        if refused:
            continue
        mine = [p for p in problems if p["key"] == case["key"] and "effective" in p]
        expect = mine[0]["effective"] if mine else case["value"]
        if got.get("value") != expect and not (isinstance(expect, list) and got.get("value") == list(expect)):
            wrong.append((case["key"], case["value"], f"loaded {got.get('value')!r}, meshlint says {expect!r}",
                          [p["message"] for p in problems]))
    return wrong


def _toml_cases(s, tmp_path: Path, seed: int, n: int) -> list:
    tables = [t for t in s.tables() if t and "[]" not in t]
    cases = []
    for i, (table, name, value) in enumerate(_edits(s, tables, seed, n)):
        data = {k: dict(v) for k, v in _CONTEXT.get(table.split(".")[0], {}).items()} if s.framework == "kempnerforge" else {}
        node = data
        for part in table.split("."):
            node = node.setdefault(part, {})
        node[name] = value
        path = tmp_path / f"edit{i}.toml"
        _write_toml(path, data)
        cases.append({"id": i, "path": str(path), "key": f"{table}.{name}", "data": data, "value": value})
    return cases


def test_check_agrees_with_kempnerforge_load_config(tmp_path):
    root = _source("kempnerforge", SHARED / "KempnerForge-5666d0d")
    _needs("torch")
    s = _schema("kempnerforge", "5666d0d")
    cases = _toml_cases(s, tmp_path, seed=12, n=400)
    wrong = _compare(s, cases, _run_real("kempnerforge", root, cases, tmp_path))
    assert not wrong, f"{len(wrong)} of {len(cases)} edits disagree:\n" + "\n".join(map(str, wrong[:20]))


@pytest.mark.parametrize("root", [SHARED / "torchtitan-v0.2-9810191bb-parent", LOCAL / "torchtitan-0.2.2"],
                         ids=["9810191bb^", "0.2.2"])
def test_check_agrees_with_torchtitan_v02_config_manager(tmp_path, root):
    root = _source("torchtitan", root)
    _needs("torch", "tyro")
    s = _schema("torchtitan", "0.2.x")
    cases = _toml_cases(s, tmp_path, seed=2, n=60)  # the ConfigManager takes ~0.25 s a file
    wrong = _compare(s, cases, _run_real("toml", root, cases, tmp_path))
    assert not wrong, f"{len(wrong)} of {len(cases)} edits disagree:\n" + "\n".join(map(str, wrong[:20]))


# the two registry versions, each with the torchtitan source the real-code tests import
REGISTRY_VERSIONS = pytest.mark.parametrize("version,root", [("0.3.0", LOCAL / "torchtitan-0.3.0"),
                                                             ("main@b5bcd76c6", SHARED / "torchtitan-b5bcd76c6")])


@REGISTRY_VERSIONS
def test_check_agrees_with_registry_config_classes(tmp_path, version, root):
    root = _source("torchtitan", root)
    _needs("torch")
    s = _schema("torchtitan", version)
    tables = [t for t in ("training", "parallelism", "compile", "comm", "debug")]
    cases = []
    for i, (table, name, value) in enumerate(_edits(s, tables, seed=3, n=250, default_class=True)):
        qn = s.data["tables"][table]["default_class"]
        if name == "enable_fsdp_symm_mem" and value:
            continue  # its check asks torch.cuda, which this machine does not answer like a GPU node
        cases.append({"id": i, "cls": qn.rsplit(".", 1)[-1], "key": f"{table}.{name}", "data": {table: {name: value}},
                      "value": value})
    wrong = _compare(s, cases, _run_real("registry", root, cases, tmp_path), sections_only=True)
    assert not wrong, f"{len(wrong)} of {len(cases)} edits disagree:\n" + "\n".join(map(str, wrong[:20]))


# checkpoint keys have rules of their own (ML816-ML819, ML828) that skip a value of the wrong type: the class's
# __post_init__ then decides (a TypeError from `"500" < 1`, an AttributeError from `5 .strip()`) or keeps it
_CHECKPOINT_EDITS = [("interval", "500"), ("interval", 0), ("interval", 2.5), ("folder", 5), ("folder", "  "),
                     ("folder", None), ("keep_latest_k", "3"), ("keep_latest_k", 1), ("keep_latest_k", -1),
                     ("async_mode", 3), ("async_mode", "ASYNC"), ("async_mode", "sometimes"),
                     ("initial_load_in_hf", "yes"), ("last_save_in_hf", 1), ("exclude_from_loading", ["model"]),
                     ("exclude_from_loading", ["optimizer"]), ("initial_load_path", "relative/dir"), ("initial_load_path", " "),
                     ("initial_load_path", " /abs/dir ")]
_CHECKPOINT_WORKER = r'''
import contextlib, io, json, logging, sys, types, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
root = sys.argv[1]
sys.path.insert(0, root)
pkg = types.ModuleType("torchtitan"); pkg.__path__ = [root + "/torchtitan"]; sys.modules["torchtitan"] = pkg
from torchtitan.components.checkpointer.dcp import CheckpointManager
for kw in json.loads(sys.argv[2]):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            CheckpointManager.Config(**kw)
        print(json.dumps(None))
    except Exception as e:
        print(json.dumps(f"{type(e).__name__}: {e}"))
'''


def _registry_check(tmp_path, lines: list, version: str) -> dict:
    """``meshlint check`` (JSON, no cache, world 8) of a registry file holding ``lines``: function -> its report."""
    registry = tmp_path / "config_registry.py"
    registry.write_text("\n".join(lines), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", "--format", "json", "--no-cache",
                           "--torchtitan-version", version, "--world-size", "8", "--gpus-per-node", "8", str(registry)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    return {config["path"].rsplit("::", 1)[-1]: config for config in json.loads(proc.stdout)["files"]}


def _registry_findings(tmp_path, lines: list, version: str) -> dict:
    """function -> its findings (:func:`_registry_check`)."""
    return {name: config["findings"] for name, config in _registry_check(tmp_path, lines, version).items()}


def _run_worker(tmp_path, source: str, args: list, timeout: int) -> subprocess.CompletedProcess:
    """A real-code worker (``source``) run on ``args`` in its own process, in ``tmp_path``."""
    worker = tmp_path / "worker.py"
    worker.write_text(source, encoding="utf-8")
    return subprocess.run([sys.executable, str(worker), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path)


@REGISTRY_VERSIONS
def test_checkpoint_values_refused_exactly_where_the_class_refuses_them(tmp_path, version, root):
    root = _source("torchtitan", root)
    _needs("torch")
    lines = ["from torchtitan.components.checkpointer.dcp import CheckpointManager",
             "from torchtitan.trainer import Trainer", ""]
    for i, (key, value) in enumerate(_CHECKPOINT_EDITS):
        lines += [f"def edit_{i}():", f"    return Trainer.Config(checkpoint=CheckpointManager.Config({key}={value!r}))", ""]
    errors = {name: [f"{f['rule']} {f['message']}" for f in fs if f["severity"] == "error"]
              for name, fs in _registry_findings(tmp_path, lines, version).items()}
    errors = {name: found for name, found in errors.items() if found}
    real = _run_worker(tmp_path, _CHECKPOINT_WORKER, [str(root), json.dumps([{k: v} for k, v in _CHECKPOINT_EDITS])],
                       timeout=300)
    verdicts = [json.loads(line) for line in real.stdout.splitlines()]
    assert len(verdicts) == len(_CHECKPOINT_EDITS), real.stderr[-2000:]
    wrong = [(edit, verdict, errors.get(f"edit_{i}")) for i, (edit, verdict) in enumerate(zip(_CHECKPOINT_EDITS, verdicts))
             if (verdict is not None) != (f"edit_{i}" in errors)]
    assert not wrong, "meshlint and the real CheckpointManager.Config disagree:\n" + "\n".join(map(str, wrong))
    assert sum(v is not None for v in verdicts) >= 10  # the edits do exercise refusals


# model_registry(converters=[...]) refusals (ML910 LoRA rank, ML911 order, ML912 MoE quantization's dispatcher):
# (model, flavor, moe_comm_backend or None, converters as (kind, kwargs)); kinds: lora, f8 (Float8LinearConverter),
# f8_moe (Float8GroupedExpertsConverter)
_CONVERTER_EDITS = [
    ("llama3", "debugmodel", None, [("lora", {"rank": 0})]),
    ("llama3", "debugmodel", None, [("lora", {"rank": -4, "alpha": 8.0})]),
    ("llama3", "debugmodel", None, [("lora", {"rank": 8})]),
    ("llama3", "debugmodel", None, [("lora", {"rank": 1, "target_modules": ["wo"]})]),
    ("llama3", "debugmodel", None, [("lora", {}), ("f8", {"emulate": True, "model_compile_enabled": False})]),
    ("llama3", "debugmodel", None, [("lora", {}), ("lora", {"rank": 4}), ("f8", {"model_compile_enabled": False})]),
    ("qwen3", "debugmodel", None, [("lora", {"rank": 0}), ("f8", {"model_compile_enabled": False})]),
    ("deepseek_v3", "debugmodel", "deepep", [("f8_moe", {"model_compile_enabled": False})]),
    ("deepseek_v3", "debugmodel", "minimal_async_ep", [("f8_moe", {"model_compile_enabled": False})]),
    ("deepseek_v3", "debugmodel", "hybridep", [("f8_moe", {"model_compile_enabled": False})]),
    ("deepseek_v3", "debugmodel", "standard", [("f8_moe", {"model_compile_enabled": False})]),
    ("qwen3", "debugmodel_moe", "deepep", [("f8_moe", {"model_compile_enabled": False})]),
]
_CONVERTER_CLASSES = {"lora": ("torchtitan.components.lora", "LoRAConverter"),
                      "f8": ("torchtitan.components.quantization", "Float8LinearConverter"),
                      "f8_moe": ("torchtitan.components.quantization", "Float8GroupedExpertsConverter")}
# A torchtitan tree imported from its source, with MinimalAsyncEP's triton kernels module stood in for
# (imported by the token dispatchers, never run here): the preamble of the real-code workers below.
_TORCHTITAN_STANDINS = r"""
pkg = types.ModuleType("torchtitan"); pkg.__path__ = [root + "/torchtitan"]; sys.modules["torchtitan"] = pkg
class _Any:
    def __call__(self, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) and not k else _Any()
    def __getattr__(self, name):
        return _Any()
kernels = types.ModuleType("torchtitan.distributed.minimal_async_ep.kernels"); kernels.__file__ = __file__
def _attr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Any()
kernels.__getattr__ = _attr
sys.modules[kernels.__name__] = kernels
"""

# The real side: the model's own model_registry with the converters, as a registry function calls it. A
# converter's build() that needs torchao or a GPU (float8) raises ImportError / a capability error on this
# machine, so for MoE quantization the worker applies exactly the step that refuses -- swap_token_dispatcher
# on every GroupedExperts.Config of the flavor built with that moe_comm_backend (Float8GroupedExpertsConverter
# .convert's first statement). Only ValueErrors of the three refusals count as refusals.
_CONVERTER_WORKER = r"""
import contextlib, importlib, io, json, logging, re, sys, types, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
root = sys.argv[1]
sys.path.insert(0, root)
""" + _TORCHTITAN_STANDINS + r"""
from torchtitan.components.quantization.utils import swap_token_dispatcher
from torchtitan.models.common.moe import GroupedExperts
REFUSAL = re.compile(r"LoRA rank must be positive|must be applied before LoRAConverter|supports padding")
classes = json.loads(sys.argv[3])
for model, flavor, backend, convs in json.loads(sys.argv[2]):
    registry = importlib.import_module(f"torchtitan.models.{model}").model_registry
    kw = {} if backend is None else {"moe_comm_backend": backend}
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            built = [getattr(importlib.import_module(classes[k][0]), classes[k][1]).Config(**a) for k, a in convs]
            if any(k == "f8_moe" for k, _ in convs):
                spec = registry(flavor, **kw)
                for _fqn, _cfg, parent, _attr_name in spec.model.traverse(GroupedExperts.Config):
                    swap_token_dispatcher(parent, 16)
            else:
                registry(flavor, converters=built, **kw)
        print(json.dumps(None))
    except ValueError as e:
        print(json.dumps(str(e) if REFUSAL.search(str(e)) else None))
    except Exception as e:  # torchao / GPU checks of a converter's build(): not one of these refusals
        print(json.dumps(None))
"""


@REGISTRY_VERSIONS
def test_converter_refusals_agree_with_the_real_model_registry(tmp_path, version, root):
    """ML910-ML912 report an edit exactly where torchtitan's own model_registry (or the converter step that
    refuses) raises the refusal, on both registry versions."""
    root = _source("torchtitan", root)
    _needs("torch")
    lines = ["from torchtitan.components.lora import LoRAConverter",
             "from torchtitan.components.quantization import Float8LinearConverter, Float8GroupedExpertsConverter",
             "from torchtitan.config import ParallelismConfig, TrainingConfig",
             "from torchtitan.trainer import Trainer", ""]
    for i, (model, flavor, backend, convs) in enumerate(_CONVERTER_EDITS):
        items = ", ".join(f"{_CONVERTER_CLASSES[k][1]}.Config({', '.join(f'{n}={v!r}' for n, v in a.items())})"
                          for k, a in convs)
        backend_kw = f", moe_comm_backend={backend!r}" if backend else ""
        lines += [f"def edit_{i}():", f"    from torchtitan.models.{model} import model_registry",
                  f"    return Trainer.Config(model_spec=model_registry({flavor!r}{backend_kw}, converters=[{items}]),",
                  "                          parallelism=ParallelismConfig(expert_parallel_degree=8),",
                  "                          training=TrainingConfig(disable_cuda_graphs=True))", ""]
    found = {name: rules for name, fs in _registry_findings(tmp_path, lines, version).items()
             if (rules := [f["rule"] for f in fs if f["rule"] in ("ML910", "ML911", "ML912")])}
    real = _run_worker(tmp_path, _CONVERTER_WORKER,
                       [str(root), json.dumps(_CONVERTER_EDITS), json.dumps(_CONVERTER_CLASSES)], timeout=300)
    verdicts = [json.loads(line) for line in real.stdout.splitlines()]
    assert len(verdicts) == len(_CONVERTER_EDITS), real.stderr[-2000:]
    wrong = [(edit, verdict, found.get(f"edit_{i}")) for i, (edit, verdict) in enumerate(zip(_CONVERTER_EDITS, verdicts))
             if (verdict is not None) != (f"edit_{i}" in found)]
    assert not wrong, "meshlint and the real model_registry disagree:\n" + "\n".join(map(str, wrong))
    assert sum(v is not None for v in verdicts) >= 6  # the edits do exercise the refusals


# ML913: the ptrr load balancer and the masks a model builds: (model, flavor, context_parallel_ptrr_mask_key)
_PTRR_EDITS = [("gpt_oss", "debugmodel", None), ("gpt_oss", "debugmodel", "sliding_mask"),
               ("gpt_oss", "debugmodel", "basic_mask"), ("gpt_oss", "debugmodel", "sliding_window_mask"),
               ("llama3", "debugmodel", None), ("llama3", "debugmodel", "basic_mask")]
# The real side: the flavor built with attn_backend="flex" on the CPU, its own get_attention_masks, and the real
# cp_shard with load_balancer_type="ptrr" (a stand-in CP mesh of 2 ranks: the checks compared here come before
# any sharding, which the stand-in cannot do).
_PTRR_WORKER = r"""
import contextlib, importlib, io, json, logging, re, sys, types, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
root, version = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
""" + _TORCHTITAN_STANDINS + r"""
import torch
from torchtitan.distributed.context_parallel import cp_shard
class Mesh:  # cp_shard reads the CP world size first; the sharding itself is past the checks compared here
    device_type = "cpu"
    def size(self, dim=0):
        return 2
REFUSAL = re.compile(r"PTRRLoadBalancer|ptrr_mask_key|is not a key in attention_masks")
L = 256
masks_of = {}
for model, flavor, key in json.loads(sys.argv[3]):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if (model, flavor) not in masks_of:
                spec = importlib.import_module(f"torchtitan.models.{model}").model_registry(flavor, attn_backend="flex")
                with torch.device("cpu"):
                    m = spec.model.build()
                pos = torch.arange(L) if version == "main" else torch.arange(L).unsqueeze(0)
                masks_of[(model, flavor)] = m.get_attention_masks(positions=pos)
            masks = masks_of[(model, flavor)]
            tokens = torch.zeros(L, dtype=torch.long) if version == "main" else torch.zeros(1, L, dtype=torch.long)
            cp_shard(Mesh(), (tokens,), masks, load_balancer_type="ptrr", ptrr_mask_key=key)
        print(json.dumps(None))
    except ValueError as e:
        print(json.dumps(str(e) if REFUSAL.search(str(e)) else None))
    except Exception as e:
        # past the ptrr checks, the stand-in mesh cannot shard: accepted; anything else is a setup failure
        print(json.dumps(None if "'Mesh' object" in str(e) else f"SETUP {type(e).__name__}: {e}"))
"""


@REGISTRY_VERSIONS
def test_ptrr_mask_key_refusals_agree_with_the_real_cp_shard(tmp_path, version, root):
    """ML913 reports a ptrr edit exactly where torchtitan's cp_shard refuses the masks the model builds."""
    root = _source("torchtitan", root)
    _needs("torch")
    training = "TrainingConfig(disable_cuda_graphs=True)" if version != "0.3.0" else \
        "TrainingConfig(seq_len=8192, disable_cuda_graphs=True)"
    lines = ["from torchtitan.config import ParallelismConfig, TrainingConfig",
             "from torchtitan.trainer import Trainer", ""]
    for i, (model, flavor, key) in enumerate(_PTRR_EDITS):
        lines += [f"def edit_{i}():", f"    from torchtitan.models.{model} import model_registry",
                  f"    return Trainer.Config(model_spec=model_registry({flavor!r}, attn_backend='flex'),",
                  "                          parallelism=ParallelismConfig(context_parallel_degree=2, "
                  f"context_parallel_load_balancer='ptrr', context_parallel_ptrr_mask_key={key!r}),",
                  f"                          training={training})", ""]
    findings = _registry_findings(tmp_path, lines, version)
    errors = {name: rules for name, fs in findings.items() if (rules := [f["rule"] for f in fs if f["severity"] == "error"])}
    found = {name: rules for name, fs in findings.items() if (rules := [f["rule"] for f in fs if f["rule"] == "ML913"])}
    real = _run_worker(tmp_path, _PTRR_WORKER,
                       [str(root), "v030" if version == "0.3.0" else "main", json.dumps(_PTRR_EDITS)], timeout=600)
    verdicts = [json.loads(line) for line in real.stdout.splitlines()]
    assert len(verdicts) == len(_PTRR_EDITS), real.stderr[-2000:]
    assert not [v for v in verdicts if isinstance(v, str) and v.startswith("SETUP")], verdicts
    wrong = [(edit, verdict, found.get(f"edit_{i}")) for i, (edit, verdict) in enumerate(zip(_PTRR_EDITS, verdicts))
             if (verdict is not None) != (f"edit_{i}" in found)]
    assert not wrong, "meshlint and the real cp_shard disagree:\n" + "\n".join(map(str, wrong))
    assert sum(v is not None for v in verdicts) == 2  # no key, and a key the dict lacks
    assert not errors.get("edit_2") and not errors.get("edit_3") and not errors.get("edit_4"), errors


# ML914 (0.2.x): the ptrr balancer on llama3 flavors. The real side: the flavor's own model args (llama3_args),
# the trainer's rule for building masks (flex or varlen attention only, train.py:457-464@9810191bb^; a causal
# BlockMask stands in for the flex mask) and the real cp_shard with "ptrr" on a stand-in CP mesh of 2 ranks.
# Packages the llama3 package imports for data, tokenizers, logging and MoE kernels are inert stand-ins.
_PTRR02_FLAVORS = ["8B", "8B_flex", "debugmodel", "debugmodel_flex_attn", "70B"]
_PTRR02_WORKER = r"""
import contextlib, io, json, logging, sys, types, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
root = sys.argv[1]
sys.path.insert(0, root)
class _Any:
    def __call__(self, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) and not k else _Any()
    def __getattr__(self, name):
        return _Any()
def _attr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name[:1].isupper():  # a class the importing code may subclass
        return type(name, (), {"__init__": lambda self, *a, **k: None})
    return _Any()
import importlib.abc, importlib.machinery, importlib.util
STAND_INS = ("tokenizers", "torchdata", "datasets", "tensorboard", "wandb", "tiktoken", "blobfile",
             "sentencepiece", "fsspec", "safetensors")  # data/tokenizer packages the model package imports

class _Stub(importlib.abc.Loader, importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in STAND_INS and importlib.machinery.PathFinder.find_spec(name.split(".")[0]) is None:
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None
    def create_module(self, spec):
        m = types.ModuleType(spec.name); m.__file__ = __file__; m.__path__ = []; m.__getattr__ = _attr
        return m
    def exec_module(self, module):
        pass

sys.meta_path.insert(0, _Stub())
for _name in ("torch.utils.tensorboard", "torchtitan.models.moe.kernels"):  # a logger, MoE triton kernels
    _m = types.ModuleType(_name); _m.__file__ = __file__; _m.__getattr__ = _attr; sys.modules[_name] = _m
pkg = types.ModuleType("torchtitan"); pkg.__path__ = [root + "/torchtitan"]; sys.modules["torchtitan"] = pkg
import torch
from torch.nn.attention.flex_attention import create_block_mask
from torchtitan.distributed.context_parallel import cp_shard
from torchtitan.models.llama3 import llama3_args
class Mesh:
    device_type = "cpu"
    def size(self, dim=0):
        return 2
L = 256
out = []
for flavor in json.loads(sys.argv[2]):
    args = llama3_args[flavor]
    # the trainer's rule (train.py:457-464): masks only for flex/varlen attention
    attn_type = getattr(args, "attn_type", "sdpa")
    masks = (create_block_mask(lambda b, h, q, kv: q >= kv, 1, None, L, L, device="cpu")
             if attn_type == "flex" else None)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            cp_shard(Mesh(), (torch.zeros(1, L, dtype=torch.long),), masks, "ptrr")
        out.append([attn_type, None])
    except ValueError as e:
        out.append([attn_type, str(e) if "PTRRLoadBalancer" in str(e) else None])
    except Exception as e:
        out.append([attn_type, None if "'Mesh' object" in str(e) else f"SETUP {type(e).__name__}: {e}"])
print(json.dumps(out))
"""


def test_ptrr_refusal_v02_agrees_with_the_real_cp_shard(tmp_path):
    """ML914 reports ptrr exactly on the llama3 flavors whose masks torchtitan 0.2.x's cp_shard refuses."""
    root = _source("torchtitan", SHARED / "torchtitan-v0.2-9810191bb-parent")
    _needs("torch")
    paths = []
    for flavor in _PTRR02_FLAVORS:
        path = tmp_path / f"ptrr_{flavor}.toml"
        path.write_text(f'[model]\nname = "llama3"\nflavor = "{flavor}"\n\n[training]\nseq_len = 8192\n\n'
                        '[parallelism]\ndata_parallel_shard_degree = -1\ncontext_parallel_degree = 2\n'
                        'context_parallel_load_balancer = "ptrr"\n', encoding="utf-8")
        paths.append(str(path))
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", "--format", "json", "--no-cache",
                           "--world-size", "8", "--gpus-per-node", "8", *paths],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    found = {Path(c["path"]).stem.split("_", 1)[1] for c in json.loads(proc.stdout)["files"]
             for f in c["findings"] if f["rule"] == "ML914"}
    real = _run_worker(tmp_path, _PTRR02_WORKER, [str(root), json.dumps(_PTRR02_FLAVORS)], timeout=300)
    assert real.returncode == 0, real.stderr[-2000:]
    verdicts = json.loads(real.stdout.splitlines()[-1])
    assert not [v for _t, v in verdicts if isinstance(v, str) and v.startswith("SETUP")], verdicts
    refused = {flavor for flavor, (_t, v) in zip(_PTRR02_FLAVORS, verdicts) if v is not None}
    assert refused == found, (refused, found, verdicts)
    assert refused == {"8B", "debugmodel", "70B"}  # the sdpa flavors


# ML915, ML916: torchtitan's NVFP4 converter. (model, flavor, how the converter's fqns are given, value): "fqns" a
# literal list, "all" no fqns (every Linear), "tail" fqns = nvfp4_bf16_tail_fqns(len(<the flavor's layers>), value)
# as the shipped registries write it.
_NVFP4_EDITS = [
    ("llama3", "debugmodel", "fqns", ["layers"]), ("llama3", "debugmodel", "all", None),
    ("llama3", "debugmodel", "tail", 0.15), ("llama3", "debugmodel", "tail", 1.0),
    ("llama3", "debugmodel", "tail", 0.99), ("llama3", "debugmodel", "tail", 0.8),
    ("llama3", "8B", "tail", 0.97), ("llama3", "8B", "tail", 0.15),
    ("qwen3", "debugmodel", "all", None), ("qwen3", "debugmodel", "tail", 0.5),
    ("qwen3", "debugmodel_moe", "fqns", ["layers"]), ("qwen3", "debugmodel_moe", "fqns", ["attention"]),
    ("qwen3", "debugmodel_moe", "fqns", ["layers.3.moe"]), ("qwen3", "debugmodel_moe", "tail", 0.15),
    ("deepseek_v3", "debugmodel", "fqns", ["attention"]), ("deepseek_v3", "debugmodel", "fqns", ["wkv_b", "wq"]),
    ("deepseek_v3", "debugmodel", "fqns", ["feed_forward", "shared_experts"]),
    ("deepseek_v3", "debugmodel", "fqns", ["layers.1."]), ("deepseek_v3", "debugmodel", "tail", 0.15),
    ("gpt_oss", "debugmodel", "all", None), ("gpt_oss", "debugmodel", "fqns", ["layers"]),
]
# torchtitan imported from its source (the preamble above); torchao from .frameworks/torchao-0.18.0 (.ci/frameworks.sh)
# when it is there: its NVFP4 prototype imports on a CPU torch without triton. Without it, the worker stands in for the
# few torchao names torchtitan's nvfp4.py imports (an nn.Linear subclass and inert functions; the stand-in is said in the
# worker's first line of output), so that torchtitan's own NVFP4Linear.Config.__post_init__, convert and
# nvfp4_bf16_tail_fqns run. NVFP4LinearConverter.__init__'s runtime check for an SM100 GPU is answered yes
# (has_cuda_capability): the rules describe what the target Blackwell machine refuses.
_TORCHAO_STANDIN = r"""
import torch
def _module(name, **attrs):
    m = types.ModuleType(name); m.__dict__.update(attrs); sys.modules[name] = m
    return m
class _MM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *a):
        raise NotImplementedError("stand-in")
class _TorchAONVFP4Linear(torch.nn.Linear):
    pass
for _n in ("torchao", "torchao.prototype", "torchao.prototype.moe_training",
           "torchao.prototype.moe_training.nvfp4_training"):
    _module(_n).__path__ = []
_module("torchao.prototype.moe_training.nvfp4_training.nvfp4_linear", nvfp4_linear=lambda *a, **k: None,
        nvfp4_mm_triton=_MM)
_module("torchao.prototype.moe_training.nvfp4_training.nvfp4_training", _make_rht_sign_vector=lambda *a, **k: None,
        _rht_sign_vector_to_tuple=lambda v: tuple(v), NVFP4Linear=_TorchAONVFP4Linear)
"""
_NVFP4_WORKER = r"""
import contextlib, importlib, io, json, logging, os, re, sys, types, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
root, torchao_dir = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
""" + _TORCHTITAN_STANDINS + r"""
if os.path.isdir(torchao_dir):
    sys.path.insert(0, torchao_dir)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import torchao.prototype.moe_training.nvfp4_training.nvfp4_training
    print(json.dumps("torchao " + __import__("torchao").__version__))
else:
""" + "\n".join("    " + line for line in _TORCHAO_STANDIN.strip().splitlines()) + r"""
    print(json.dumps("torchao stand-in"))
from torchtitan.components.quantization import nvfp4
assert nvfp4.NVFP4Linear is not None
nvfp4.has_cuda_capability = lambda *a, **k: True  # the target machine: SM100 or later
REFUSAL = re.compile(r"NVFP4 requires|keeps all .* layers in bf16")
for model, flavor, how, value in json.loads(sys.argv[3]):
    registry = importlib.import_module(f"torchtitan.models.{model}").model_registry
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if how == "tail":
                fqns = nvfp4.nvfp4_bf16_tail_fqns(len(registry(flavor).model.layers), value)
            else:
                fqns = value if how == "fqns" else []
            registry(flavor, converters=[nvfp4.NVFP4LinearConverter.Config(fqns=fqns, model_compile_enabled=False)])
        print(json.dumps(None))
    except ValueError as e:
        print(json.dumps(str(e) if REFUSAL.search(str(e)) else f"OTHER {e}"))
"""


@REGISTRY_VERSIONS
def test_nvfp4_refusals_agree_with_the_real_converter(tmp_path, version, root):
    """ML915 (a converted Linear's features not divisible by 128) and ML916 (a bf16 tail that keeps every layer)
    report an edit exactly where torchtitan's own NVFP4 code refuses it: nvfp4_bf16_tail_fqns on the flavor's
    layer count, then model_registry with the converter (NVFP4Linear.Config.__post_init__ in its convert)."""
    root = _source("torchtitan", root)
    _needs("torch")
    lines = ["from torchtitan.components.quantization import NVFP4LinearConverter",
             "from torchtitan.components.quantization.nvfp4 import nvfp4_bf16_tail_fqns",
             "from torchtitan.config import ParallelismConfig, TrainingConfig",
             "from torchtitan.trainer import Trainer", ""]
    for i, (model, flavor, how, value) in enumerate(_NVFP4_EDITS):
        fqns = "" if how == "all" else "fqns=fqns, " if how == "tail" else f"fqns={value!r}, "
        lines += [f"def edit_{i}():", f"    from torchtitan.models.{model} import model_registry",
                  f"    config = Trainer.Config(model_spec=model_registry({flavor!r}),",
                  "                            parallelism=ParallelismConfig(spmd_backend='spmd_types'))"]
        if how == "tail":
            lines.append(f"    fqns = nvfp4_bf16_tail_fqns(len(config.model_spec.model.layers), {value!r})")
        lines += [f"    config.model_spec = model_registry({flavor!r}, converters=[NVFP4LinearConverter.Config("
                  f"{fqns}model_compile_enabled=False)])", "    return config", ""]
    configs = _registry_check(tmp_path, lines, version)
    findings = {name: c["findings"] for name, c in configs.items()}
    found = {name: rules for name, fs in findings.items() if (rules := [f["rule"] for f in fs
                                                                        if f["rule"] in ("ML915", "ML916")])}
    # decided on every edit, never skipped for an unknown value
    skipped = {name: s for name, c in configs.items() if (s := [r for r in c["skipped_rules"]
                                                               if r["rule"] in ("ML915", "ML916")])}
    assert not skipped, skipped
    real = _run_worker(tmp_path, _NVFP4_WORKER, [str(root), str(LOCAL / "torchao-0.18.0"), json.dumps(_NVFP4_EDITS)],
                       timeout=600)
    out = [json.loads(line) for line in real.stdout.splitlines() if line.startswith(("null", '"'))]
    assert len(out) == len(_NVFP4_EDITS) + 1, real.stderr[-2000:]
    torchao, verdicts = out[0], out[1:]
    print(f"torchtitan {version} with {torchao}: {sum(v is not None for v in verdicts)} of {len(verdicts)} edits refused")
    assert not [v for v in verdicts if isinstance(v, str) and v.startswith("OTHER")], verdicts
    kinds = {"NVFP4 requires": "ML915", "layers in bf16": "ML916"}
    expected = {f"edit_{i}": [code for text, code in kinds.items() if text in v]
                for i, v in enumerate(verdicts) if v is not None}
    wrong = [(edit, verdict, found.get(f"edit_{i}")) for i, (edit, verdict) in enumerate(zip(_NVFP4_EDITS, verdicts))
             if expected.get(f"edit_{i}") != found.get(f"edit_{i}")]
    assert not wrong, "meshlint and torchtitan's NVFP4 code disagree:\n" + "\n".join(map(str, wrong))
    # each message quotes the error torchtitan raises, word for word (the same Linear, the same numbers)
    for i, verdict in enumerate(verdicts):
        if verdict is not None:
            message = next(f["message"] for f in findings[f"edit_{i}"] if f["rule"] in ("ML915", "ML916"))
            assert verdict in message, (verdict, message)
    assert sum(v is not None for v in verdicts) >= 8 and sum(v is None for v in verdicts) >= 8, verdicts


# The Linears of each flavor in meshlint's generated model table, expanded, against torchtitan's own
# model_registry(flavor).model.traverse(Linear.Config): the same names, features and order. Packages some model
# packages import and this machine lacks (data loaders, tokenizers, kernels of linear attention) are inert
# stand-ins: only config trees are built here.
_LINEARS_WORKER = r"""
import contextlib, importlib, io, json, logging, sys, types, warnings
import importlib.abc, importlib.machinery, importlib.util
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
root = sys.argv[1]
sys.path.insert(0, root)
""" + _TORCHTITAN_STANDINS + r"""
STAND_INS = ("einops", "grain", "fla", "safetensors", "datasets", "torchdata", "tokenizers", "tiktoken", "blobfile",
             "sentencepiece", "fsspec", "wandb", "tensorboard", "transformers")
class _Stub(importlib.abc.Loader, importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in STAND_INS and importlib.machinery.PathFinder.find_spec(name.split(".")[0]) is None:
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None
    def create_module(self, spec):
        m = types.ModuleType(spec.name); m.__file__ = __file__; m.__path__ = []
        def ga(name):
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (), {"__init__": lambda self, *a, **k: None}) if name[:1].isupper() else _Any()
        m.__getattr__ = ga
        return m
    def exec_module(self, module):
        pass
sys.meta_path.insert(0, _Stub())
_tb = types.ModuleType("torch.utils.tensorboard"); _tb.__file__ = __file__; _tb.__getattr__ = _attr
sys.modules[_tb.__name__] = _tb
from torchtitan.models.common.linear import Linear
out = {}
for module, flavor in json.loads(sys.argv[2]):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            spec = importlib.import_module(module).model_registry(flavor)
        out[f"{module}:{flavor}"] = [[f, c.in_features, c.out_features] for f, c, _p, _a in
                                     spec.model.traverse(Linear.Config)]
    except Exception as e:  # a model package that needs what is not here (Hugging Face transformers)
        out[f"{module}:{flavor}"] = f"SKIP {type(e).__name__}: {e}"[:200]
print(json.dumps(out))
"""


@REGISTRY_VERSIONS
def test_generated_linears_are_what_torchtitan_traverses(tmp_path, version, root):
    from meshlint.frameworks import models

    root = _source("torchtitan", root)
    _needs("torch")
    table = models.load_builtin_file(str(Path(models.DATA) / models.VERSIONS[version]), aliases=False)
    flavors = [(entry["module"], flavor) for (name, flavor), entry in table.items() if "linears" in entry]
    real = _run_worker(tmp_path, _LINEARS_WORKER, [str(root), json.dumps(flavors)], timeout=600)
    assert real.returncode == 0, real.stderr[-2000:]
    got = json.loads(real.stdout.splitlines()[-1])
    by_module = {(e["module"], f): e for (n, f), e in table.items() if "linears" in e}
    compared, skipped, wrong = [], [], []
    for (module, flavor), entry in by_module.items():
        traversed = got[f"{module}:{flavor}"]
        if isinstance(traversed, str):
            skipped.append((module, flavor, traversed))
            continue
        mine = [[x["fqn"], x["in_features"], x["out_features"]] for x in models.expand_linears(entry["linears"])]
        (compared if mine == traversed else wrong).append((module, flavor))
    print(f"torchtitan {version}: {len(compared)} flavors compared, {len(skipped)} skipped: {skipped[:3]}")
    assert not wrong, wrong
    names = {m.rsplit(".", 1)[-1] for m, _f in compared}
    assert {"llama3", "qwen3", "deepseek_v3"} <= names, names
    assert {f for m, f in compared if m.endswith(".qwen3")} >= {"debugmodel", "debugmodel_moe", "8B", "235B-A22B"}
    # only the Hugging Face backed models (they need transformers) may be left out
    assert all("transformers_modeling_backend" in m for m, _f, _why in skipped), skipped


# ----------------------------------------------------------------------------- the refusal inventory

from meshlint.generate import refusals  # noqa: E402

REFUSAL_SOURCES = {"kempnerforge": SHARED / "KempnerForge-5666d0d",
                   "torchtitan-0.2.x": SHARED / "torchtitan-v0.2-9810191bb-parent",
                   "torchtitan-0.3.0": LOCAL / "torchtitan-0.3.0",
                   "torchtitan-main": SHARED / "torchtitan-b5bcd76c6",
                   "accelerate-1.15.0": LOCAL / "accelerate-1.15.0"}
REFUSAL_FRAMEWORK = {"kempnerforge": "kempnerforge", "accelerate-1.15.0": "accelerate"}


@pytest.mark.parametrize("version", list(REFUSAL_SOURCES))
def test_refusal_doc_lists_exactly_the_sites_in_the_source(version):
    root = REFUSAL_SOURCES[version]
    _source(REFUSAL_FRAMEWORK.get(version, "torchtitan"), root)
    text = refusals.DOC.read_text(encoding="utf-8")
    listed = refusals.doc_sites(text, version)
    found = sorted((s.where for s in refusals.enumerate_sites(root, version)), key=refusals._where_key)
    missing, extra = sorted(set(found) - set(listed)), sorted(set(listed) - set(found))
    assert listed == found, (f"docs/refusals.md is stale for {version}: not listed {missing[:10]}, gone {extra[:10]}; "
                             "regenerate it (python -m meshlint.generate.refusals --write ...)")


@pytest.mark.parametrize("version", list(REFUSAL_SOURCES))
def test_every_refusal_site_is_classified(version):
    root = REFUSAL_SOURCES[version]
    _source(REFUSAL_FRAMEWORK.get(version, "torchtitan"), root)
    rows = refusals.inventory({version: root})[version]
    unreviewed = [s.where for s, verdict, _, _ in rows if verdict == "unreviewed"]
    assert not unreviewed, f"classify these in meshlint/generate/refusals.py: {unreviewed}"


def test_refusal_doc_is_up_to_date():
    for version, root in REFUSAL_SOURCES.items():
        _source(REFUSAL_FRAMEWORK.get(version, "torchtitan"), root)
    text = refusals.render(refusals.inventory(REFUSAL_SOURCES))
    assert text == refusals.DOC.read_text(encoding="utf-8"), "docs/refusals.md is stale: regenerate it"


def test_refusal_rules_named_exist():
    codes = {p.name.split("-")[0] for p in (ROOT / "rules").glob("ML*.toml")}
    named = {c for rule in refusals.HAND for c in re.findall(r"ML\d{3}", rule.verdict)}
    assert named <= codes, f"verdicts name rules that do not exist: {sorted(named - codes)}"
    for rule in refusals.HAND + refusals.PATTERNS:
        assert rule.verdict.split()[0] in refusals.VERDICTS, rule


def test_keywords_are_pythons():
    """schema_data keeps Python's keywords as a set instead of importing ``keyword``: the same words."""
    import keyword

    assert schema_data.KEYWORDS == frozenset(keyword.kwlist)
    assert not schema_data._plain_name("lambda") and schema_data._plain_name("match")
