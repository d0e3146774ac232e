"""The generated schema applied to torchtitan 0.3.0 / main registry configs and their launch overrides:
refused exactly where Python (a keyword or attribute the config class lacks) or tyro (an option the class
lacks, a value it cannot parse) refuses, at the line that writes it; kept values are not errors.

In-process and fast: one small fixture registry read once, no framework imported. The sweep over the
real registries (thousands of typo edits, the false-alarm count) is bench/registry_typos.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from meshlint.frameworks import schema_data
from meshlint.frameworks import schema_check
from meshlint.frameworks.torchtitan import main_b5bcd76c6 as torchtitan_main, v0_3_0 as torchtitan_v030
from meshlint.errors import InputError
from meshlint.inputs import launch, pyregistry

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "torchtitan_registry" / "schema" / "config_registry.py"
VERSIONS = {"main": torchtitan_main, "0.3.0": torchtitan_v030}


@pytest.fixture(scope="module")
def registry():
    reg = pyregistry.read_registry(str(FIXTURE))
    assert reg.error is None
    return reg.functions


def _line_of(mark: str) -> int:
    for n, line in enumerate(FIXTURE.read_text().splitlines(), start=1):
        if mark in line:
            return n
    raise AssertionError(mark)


@pytest.mark.parametrize("version", sorted(VERSIONS))
@pytest.mark.parametrize("function,key,suggestion,error", [
    ("typo_keyword", "checkpoint.intervall", "interval",
     "TypeError: CheckpointManager.Config.__init__() got an unexpected keyword argument 'intervall'"),
    ("typo_attribute", "training.stpes", "steps", "AttributeError: 'TrainingConfig' object has no attribute 'stpes'"),
    ("typo_unread_value", "training.stepz", "steps", "unexpected keyword argument 'stepz'"),
    ("typo_top_level", "dump_foldr", "dump_folder", "Trainer.Config.__init__() got an unexpected keyword argument"),
    ("typo_nested_loss", "loss.loss_fn.num_chunk", None, "CrossEntropyLoss.Config.__init__() got an unexpected"),
])
def test_unknown_keyword_or_attribute_is_refused_at_its_line(registry, version, function, key, suggestion, error):
    source = registry[function]
    spec = VERSIONS[version].read(source)
    assert [u["key"] for u in spec.unknown_keys] == [key]
    found = spec.unknown_keys[0]
    assert found["suggestion"] == suggestion and error in found["framework"]
    assert source.locate(key)[0] == _line_of(f"{key.rsplit('.', 1)[-1]}")


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_clean_and_unknowable_configs_have_no_findings(registry, version):
    for function in ("good", "own_subclass"):  # own_subclass: a class the schema does not know is not guessed
        spec = VERSIONS[version].read(registry[function])
        assert not spec.unknown_keys and not spec.problems and not spec.extra.get("refusals"), function


def test_renamed_key_is_refused_by_main_with_its_new_name(registry):
    spec = torchtitan_main.read(registry["renamed_key"])
    assert [(u["key"], u["suggestion"]) for u in spec.unknown_keys] == [
        ("training.local_batch_size", "num_tokens_per_microbatch_per_dp_rank")]
    assert not torchtitan_v030.read(registry["renamed_key"]).unknown_keys  # 0.3.0 still has it


def test_subclass_fields_are_known_and_python_keeps_a_wrong_literal(registry):
    # GraphTrainerCompileConfig adds `mode`: known. "aot" is outside its Literal: Python and tyro keep it
    # (tyro only warns), so it is reported as kept, never as an error.
    spec = torchtitan_main.read(registry["graph_trainer_compile"])
    assert not spec.unknown_keys and not spec.problems
    assert [k["key"] for k in spec.extra["kept_values"]] == ["compile.mode"]
    assert "keeps it" in spec.extra["kept_values"][0]["framework"]


def test_wrong_types_only_refused_where_the_framework_refuses(registry):
    main = torchtitan_main.read(registry["wrong_types"])
    v030 = torchtitan_v030.read(registry["wrong_types"])
    # hf_assets_path is used as a string by the config manager at load: refused by both
    for spec in (main, v030):
        assert any(p["key"] == "hf_assets_path" and "refuses the config at load" in p["note"] for p in spec.problems)
    # log_freq = "10": main's MetricsProcessor.Config.__post_init__ compares it with 0 and raises TypeError;
    # 0.3.0 has no such check, so it keeps the string
    assert any(p["key"] == "metrics.log_freq" and "TypeError" in p["note"] for p in main.problems)
    assert not any(p["key"] == "metrics.log_freq" for p in v030.problems)
    assert [k["key"] for k in v030.extra["kept_values"]] == ["metrics.log_freq"]


def test_unknown_root_class_still_checks_its_known_sections(registry):
    source = registry["typo_keyword"]
    source.types = {**source.types, "": "PolicyTrainer.Config"}  # an RL trainer: not in the schema
    source.nested_under = "trainer"
    try:
        spec = torchtitan_main.read(source)
    finally:
        source.types[""] = "Trainer.Config"
        source.nested_under = None
    assert [u["key"] for u in spec.unknown_keys] == ["checkpoint.intervall"]


def test_ml108_finding_points_at_the_line():
    from meshlint.engine.check import Options, check_file
    from meshlint.engine.ruleset import load_rules

    report = check_file(f"{FIXTURE}::typo_keyword", Options(rules=load_rules(), torchtitan_version="main@b5bcd76c6"))
    found = [(f.code, f.line) for f in report.findings if f.code == "ML108"]
    assert found == [("ML108", _line_of("intervall"))]
    assert "did you mean interval" in next(f.message for f in report.findings if f.code == "ML108")


# ----------------------------------------------------------------------------- launch overrides

def _override(registry, *argv, version="main@b5bcd76c6"):
    source = registry["good"]  # apply_overrides works on private copies of what it changes
    launch.apply_overrides(source, launch.parse_overrides(list(argv), version=version), version)
    return source


def test_override_of_a_field_the_class_lacks_is_refused_like_tyro(registry):
    with pytest.raises(InputError) as err:
        _override(registry, "--checkpoint.intervall", "5")
    assert "CheckpointManager.Config has no field 'intervall'" in err.value.message
    assert err.value.help == "did you mean --checkpoint.interval?"


@pytest.mark.parametrize("argv,fragment", [
    (["--metrics.log_freq", "x"], "invalid literal for int()"),
    (["--checkpoint.async_mode", "bogus"], "invalid choice 'bogus'"),
    (["--dataloader.shuffle"], "is tyro.conf.Suppress"),  # GrainDataLoader.Config: Annotated[bool, Suppress]
    (["--dataloader.shufle"], "GrainDataLoader.Config has no field 'shufle'"),
])
def test_override_value_tyro_cannot_parse_is_refused(registry, argv, fragment):
    with pytest.raises(InputError) as err:
        _override(registry, *argv)
    assert fragment in err.value.message


def test_override_values_are_typed_by_the_schema(registry):
    source = _override(registry, "--metrics.log_freq", "7", "--checkpoint.async_mode", "async")
    assert source.data["metrics"]["log_freq"] == 7 and source.data["checkpoint"]["async_mode"] == "async"
    # the kinds the schema gives the options meshlint's own tables do not list
    assert schema_check.override_field("main@b5bcd76c6", "activation_checkpoint", "debug", "SelectiveAC.Config") == (
        "field", "bool", "SelectiveAC.Config")
    assert schema_check.override_field("0.3.0", "checkpoint", "async_mode", None)[1] == \
        "lit:disabled,async,async_with_pinned_mem"


def test_override_on_a_class_the_schema_does_not_know_is_not_guessed():
    assert schema_check.override_field("main@b5bcd76c6", "compile", "mode", "MyCompileConfig") is None
    assert schema_check.override_field("0.2.x", "checkpoint", "interval", None) is None
    what, kind, cls = schema_check.override_field("main@b5bcd76c6", "checkpoint", "interval", None)
    assert (what, kind, cls) == ("field", "int", "CheckpointManager.Config")  # the default Trainer.Config builds


# ----------------------------------------------------------------------------- the schema's own facts

@pytest.mark.parametrize("version", ["0.3.0", "main@b5bcd76c6"])
def test_every_registry_config_class_has_slots(version):
    # the AttributeError claim: an attribute a config class lacks cannot be assigned (configurable.py:168)
    s = schema_data.load("torchtitan", version)
    assert [c["name"] for c in s.data["classes"].values() if not c.get("slots")] == []


def test_fast_type_tests_never_pass_what_the_full_verdict_flags():
    from meshlint.frameworks.schema_data import _Context, _fast_test, _judge

    values = [0, 1, -1, 2 ** 60, 1.0, 0.5, True, False, "", "4", "bf16", None, [], [1], {}, (1,)]
    for framework, version in (("kempnerforge", "5666d0d"), ("torchtitan", "main@b5bcd76c6")):
        s = schema_data.load(framework, version)
        ctx = _Context(s, "file", {})
        for cls in s.data["classes"].values():
            for name, key in cls["keys"].items():
                test = _fast_test(key["type"], s.loader["types"]["model"])
                for v in values if test is not None else ():
                    if test(v):
                        assert _judge(ctx, key, name, name, v) is None, (cls["name"], name, v)


def test_recursive_tables_name_the_table_they_repeat():
    s = schema_data.load("torchtitan", "main@b5bcd76c6")
    assert s.data["tables"]["loss.loss_fn.loss_fn"]["same_as"] == "loss"
    data = {"loss": {"loss_fn": {"loss_fn": {"ratio_clip_low": 0.2}}}}
    assert not s.check(data)  # a DAPO loss wrapped twice: its field is known there too
    assert [p["key"] for p in s.check({"loss": {"loss_fn": {"loss_fn": {"nope": 1}}}})] == ["loss.loss_fn.loss_fn.nope"]
