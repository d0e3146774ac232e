"""The ``config`` fact (meshlint/frameworks/config_values.py): written values, schema defaults, null for what cannot be read."""

from __future__ import annotations

import pytest

from meshlint.engine import expr
from meshlint.frameworks import config_values
from meshlint.frameworks import schema_data
from meshlint.engine.check import Options, analyse
from meshlint.engine.facts import FACT_DOCS, GROUP_FIELDS, build_facts
from meshlint.mesh.topology import CliTopology


def schema(framework: str, version: str):
    try:
        return schema_data.load(framework, version)
    except schema_data.SchemaError:
        pytest.skip(f"no generated schema for {framework} {version}")


def test_written_values_then_literal_defaults_kempnerforge():
    config = config_values.build(None, {"optimizer": {"name": "lion"}, "train": {"seq_len": 2048}},
                                 schema("kempnerforge", "5666d0d"))
    assert config["optimizer"]["name"] == "lion"        # written
    assert config["optimizer"]["lr"] == 3e-4            # the dataclass default
    assert config["train"]["seq_len"] == 2048
    assert config["model"]["model_type"] == "transformer"
    assert config["optimizer"]["class"] == "OptimizerConfig"
    assert config["vlm"] is None                        # an optional section left out
    assert "nonsense" not in config["optimizer"]        # only keys the framework defines


def test_unknown_keys_are_not_copied_and_wrong_types_are_kept():
    config = config_values.build(None, {"checkpoint": {"intervall": 5, "interval": "often"}},
                                 schema("kempnerforge", "5666d0d"))
    assert "intervall" not in config["checkpoint"]
    assert config["checkpoint"]["interval"] == "often"  # the schema check reports it; the value is what was written


def test_dispatch_picks_the_variant_class():
    config = config_values.build(None, {"vlm": {"arch": "moma"}, "vision_encoder": {}},
                                 schema("kempnerforge", "5666d0d"))
    assert config["vlm"]["class"] == "MoMaConfig"
    assert config["vlm"]["arch"] == "moma"


def test_nested_and_array_tables_torchtitan_02():
    config = config_values.build(None, {"training": {"dataloader": {"num_workers": 2}}},
                                 schema("torchtitan", "0.2.x"))
    assert config["training"]["dataloader"]["num_workers"] == 2
    assert config["training"]["dataloader"]["persistent_workers"] is False
    assert config["optimizer"]["name"] == "AdamW"


def test_registry_class_as_written_and_unknown_values_are_null():
    s = schema("torchtitan", "main@b5bcd76c6")
    data = {"activation_checkpoint": {"memory_budget": 0.5}, "checkpoint": {"interval": 10},
            "optimizer": {"param_groups": [{"pattern": ".*", "optimizer_name": "AdamW"}, {"pattern": "x"}]}}
    types = {"": "Trainer.Config", "activation_checkpoint": "MemoryBudgetAC.Config"}
    unknown = {"checkpoint.folder": object(), "optimizer.param_groups[1]": object(), "debug": object()}
    config = config_values.build(None, data, s, types=types, unknown=unknown)
    assert config["activation_checkpoint"]["class"] == "MemoryBudgetAC.Config"
    assert config["activation_checkpoint"]["memory_budget"] == 0.5
    assert config["checkpoint"]["interval"] == 10
    assert config["checkpoint"]["folder"] is None            # could not be read: never the default
    assert config["checkpoint"]["enable"] is False           # not set: the default
    assert config["optimizer"]["param_groups"][0]["optimizer_name"] == "AdamW"
    assert config["optimizer"]["param_groups"][1] is None
    assert config["debug"] is None
    assert config["class"] == "Trainer.Config"


def test_a_class_the_schema_does_not_know_defaults_nothing():
    s = schema("torchtitan", "main@b5bcd76c6")
    config = config_values.build(None, {"checkpoint": {"interval": 10}}, s,
                                 types={"checkpoint": "MyOwnCheckpointer.Config"})
    assert config["checkpoint"]["class"] is None
    assert config["checkpoint"]["interval"] == 10
    assert config["checkpoint"].get("enable") is None


def test_the_whole_config_unreadable():
    s = schema("torchtitan", "main@b5bcd76c6")
    config = config_values.build(None, {}, s, types={"": "Trainer.Config"}, unknown={"": object()})
    assert config["checkpoint"] is None and config["class"] is None


def test_lazy_tables_behave_as_dicts():
    s = schema("kempnerforge", "5666d0d")
    a = config_values.build(None, {"train": {"seq_len": 8}}, s)
    b = config_values.build(None, {"train": {"seq_len": 8}}, s)
    assert isinstance(a["train"], dict)
    assert a["train"] == b["train"] and a == b
    assert len(a["train"]) == len(dict(a["train"])) > 5
    assert sorted(a["train"]) == sorted(a["train"].keys())
    assert {**a["train"]}["seq_len"] == 8
    import copy
    assert copy.deepcopy(a["train"]) == a["train"]


def test_expressions_read_it_and_skip_on_null():
    s = schema("torchtitan", "main@b5bcd76c6")
    config = config_values.build(None, {"checkpoint": {"keep_latest_k": 1}}, s, types={}, unknown={"debug": object()})
    env = expr.Env({"config": config})
    assert expr.parse("config.checkpoint.keep_latest_k == 1").evaluate(env) is True
    assert expr.parse("config.checkpoint['class']").evaluate(env) == "CheckpointManager.Config"
    with pytest.raises(expr.NeedFact):
        expr.parse("config.debug.batch_invariant == true").evaluate(env)


def test_fact_documented_and_no_group_fields():
    assert "config" in FACT_DOCS and "config" not in GROUP_FIELDS
    assert "backend" in GROUP_FIELDS["compile"]
    assert {"pipeline_parallel_schedule_csv", "context_parallel_ptrr_mask_key"} <= set(GROUP_FIELDS["parallelism"])


def test_check_path_stores_it(tmp_path):
    path = tmp_path / "kf.toml"
    path.write_text("[model]\ndim = 256\nn_heads = 4\n[distributed]\ndp_shard = 4\n[optimizer]\nname = 'lion'\n")
    report = analyse(str(path), Options(rules=[], topology=CliTopology(world_size=4, gpus_per_node=4)))
    facts = build_facts(report.spec, report.topology, report.resolution)
    assert facts["config"]["optimizer"]["name"] == "lion"
    assert facts["config"]["distributed"]["dp_shard"] == 4


def test_native_dialect_has_a_null_config(tmp_path):
    path = tmp_path / "native.toml"
    path.write_text("[mesh]\ndims = [{name = 'dp', size = 8}]\n")
    report = analyse(str(path), Options(rules=[], topology=CliTopology(world_size=8, gpus_per_node=8)))
    assert report.status == "checked"
    facts = build_facts(report.spec, report.topology, report.resolution)
    assert facts["config"] is None


def test_keys_of_another_class_of_the_table_are_null():
    s = schema("torchtitan", "main@b5bcd76c6")
    base = config_values.build(None, {"dataloader": {}}, s, types={"dataloader": "BaseDataLoader.Config"})
    grain = config_values.build(None, {"dataloader": {}}, s, types={"dataloader": "GrainDataLoader.Config"})
    assert base["dataloader"]["repeat"] is None       # BaseDataLoader.Config has no `repeat`
    assert grain["dataloader"]["repeat"] is True      # GrainDataLoader.Config's default
