"""Accelerate 1.15.0 configs: the YAML reader (positions, limits, refusals), the resolution on Accelerate's
own example and test configs, and the generated release facts."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from meshlint.engine.check import Options, analyse, check_file
from meshlint.errors import InputError
from meshlint.inputs.yaml_source import parse_yaml, read_yaml_source
from meshlint.engine.ruleset import load_rules

RULES = load_rules()
UPSTREAM = FIXTURES / "accelerate" / "upstream"
RELEASE = ROOT / ".frameworks" / "accelerate-1.15.0"
# Accelerate's own test of its unknown-key refusal: the one upstream file it refuses
REFUSED = {"tests_test_configs_invalid_keys.yaml": {"ML108"}}


def _write(tmp_path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- the YAML reader

def test_positions_and_values_as_safe_load_gives_them():
    data, keys = parse_yaml("a: 0x10\nb:\n  c: '4'\n  d: [1, {e: yes}]\n")
    assert data == {"a": 16, "b": {"c": "4", "d": [1, {"e": True}]}}
    assert keys[("b", "c")] == (3, 3) and keys[("b", "d", 1, "e")] == (4, 11)


@pytest.mark.parametrize("text, code, what", [
    ("a: !!python/object/apply:os.system [echo]\n", "ML009", "would build a Python object"),
    ("a: !!python/name:os.system\n", "ML009", "would build a Python object"),
    ("a: [1\n", "ML009", "invalid YAML"),
    ("a: 1\n---\nb: 2\n", "ML009", "single document"),
    ("<<: {a: 1}\n", "ML009", "merge key"),
    ("a:\n" + "".join("  " * i + "k:\n" for i in range(1, 80)), "ML007", "nested more than 64"),
    ("a: " + "[" * 100 + "]" * 100 + "\n", "ML007", "nested more than 64"),
    ("a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     "d: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n", "ML007", "aliases count"),
    ("a: " + "9" * 1200 + "\n", "ML007", "digits"),
])
def test_bad_yaml_is_a_clear_input_error(text, code, what):
    with pytest.raises(InputError) as info:
        parse_yaml(text)
    assert info.value.code == code and what in str(info.value)


def test_byte_order_mark_is_read_as_accelerate_reads_it(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xef\xbb\xbfdistributed_type: MULTI_GPU\nnum_processes: 2\n")
    assert read_yaml_source(str(path)).data == {"distributed_type": "MULTI_GPU", "num_processes": 2}


def test_a_yaml_file_that_is_not_an_accelerate_config_is_skipped(tmp_path):
    report = check_file(str(_write(tmp_path, "repos:\n  - repo: local\n")), Options(rules=RULES))
    assert report.status == "skipped" and "not an accelerate config" in report.note


# ----------------------------------------------------------------------------- resolution

@pytest.mark.parametrize("path", sorted(UPSTREAM.glob("*.y*ml")), ids=lambda p: p.name)
def test_accelerates_own_configs_raise_no_false_alarm(path):
    report = check_file(str(path), Options(rules=RULES))
    assert report.status in ("checked", "skipped"), report.error
    alarms = {f.code for f in report.findings if f.severity in ("error", "warning")}
    assert alarms == REFUSED.get(path.name, set()), [f.message for f in report.findings]


def test_tp_hsdp_example_mesh_as_accelerate_builds_it():
    report = analyse(str(UPSTREAM / "examples_torch_native_parallelism_configs_tp_hsdp.yaml"), Options(rules=RULES))
    res = report.resolution
    mesh = res.meshes["device_mesh"]
    assert (mesh.dims, mesh.sizes) == (("dp_replicate", "dp_shard", "tp"), (2, 2, 2))
    assert {n: (a.size, a.stride) for n, a in res.axes.items() if n in ("dp", "dp_shard_cp", "dp_cp")} == {
        "dp": (4, 2), "dp_shard_cp": (2, 2), "dp_cp": (4, 2)}
    assert report.topology.world_size == 8 and report.topology.gpus_per_node == 8


def test_values_go_through_str_then_int_as_the_launcher_passes_them(tmp_path):
    text = ("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\nnum_processes: 4\nparallelism_config:\n"
            "  parallelism_config_dp_shard_size: '4'\n  parallelism_config_tp_size: 1.0\n")
    report = check_file(str(_write(tmp_path, text)), Options(rules=RULES))
    found = {(f.code, f.line) for f in report.findings if f.severity == "error"}
    assert found == {("ML101", 7)}, [f.message for f in report.findings]
    assert "int()" in report.findings[0].message


def test_a_mistyped_parallelism_key_is_reported_not_lost(tmp_path):
    text = ("distributed_type: FSDP\nnum_processes: 4\nparallelism_config:\n  parallelism_config_tp: 4\n")
    report = check_file(str(_write(tmp_path, text)), Options(rules=RULES))
    ml108 = [f for f in report.findings if f.code == "ML108"]
    assert ml108 and ml108[0].line == 4 and "parallelism_config_tp_size" in ml108[0].message


def test_all_sizes_one_on_a_multi_gpu_launch_is_ddp_with_no_mesh(tmp_path):
    text = "distributed_type: MULTI_GPU\nnum_processes: 4\nparallelism_config:\n  parallelism_config_tp_size: 1\n"
    report = analyse(str(_write(tmp_path, text)), Options(rules=RULES))
    res = report.resolution
    assert res.framework_error is None and not res.meshes and res.degrees["dp_replicate"] == 4


# ----------------------------------------------------------------------------- generated facts

def test_generated_release_facts_are_current():
    if not (RELEASE / "accelerate" / "commands" / "launch.py").is_file():
        pytest.skip(f"{RELEASE} is not set up (run .ci/frameworks.sh)")
    from meshlint.generate.accelerate import out_path, render

    assert out_path("1.15.0").read_text() == render(RELEASE / "accelerate"), \
        "regenerate: python -m meshlint.generate.accelerate .frameworks/accelerate-1.15.0 --write"


# ----------------------------------------------------------------------------- accelerate launch

def test_launch_lines_in_a_script_merge_flags_over_the_config_file(tmp_path):
    (tmp_path / "tp_hsdp.yaml").write_text(
        (UPSTREAM / "examples_torch_native_parallelism_configs_tp_hsdp.yaml").read_text())
    script = _write(tmp_path, "#!/bin/bash\n"
                              "export PARALLELISM_CONFIG_TP_SIZE=8\n"
                              "accelerate launch --config_file tp_hsdp.yaml --num_processes 16 --num_machines 2 \\\n"
                              "    train.py\n"
                              "accelerate launch --use_parallelism_config --parallelism_config_tp_size 4 train.py\n"
                              "accelerate launch --use_fsdp --fsdp_version 2 --use_parallelism_config "
                              "--parallelism-config-tp-size=4 --num_processes 4 train.py\n", "run.sh")
    reports = [r for r in __import__("meshlint.engine.check", fromlist=["check_all"]).check_all(str(script),
                                                                                          Options(rules=RULES))]
    assert [r.status for r in reports] == ["checked"] * 3
    found = [{(f.code, f.file, f.line) for f in r.findings if f.severity == "error"} for r in reports]
    yaml_path = str(tmp_path / "tp_hsdp.yaml")
    # the export is overwritten by the launcher; the config's 8 do not fill 16 processes
    assert found[0] == {("ML922", yaml_path, 22)}
    # the launcher refuses --use_parallelism_config without --use_fsdp, before it reads any config
    assert found[1] == {("ML112", str(script), 5)}
    # tp 4 alone on FSDP2 leaves FSDP nothing to shard (accelerate#3798)
    assert found[2] == {("ML923", str(script), 6)}
    assert reports[2].resolution.framework_error.startswith("ValueError: FSDP is enabled")


def test_accelerate_launch_after_double_dash_on_the_command_line():
    from conftest import run_cli

    code, out = run_cli("check", "--", "accelerate", "launch", "--use_fsdp", "--fsdp_version", "2",
                        "--use_parallelism_config", "--num_processes", "8", "--parallelism_config_dp_shard_size", "4",
                        "train.py")
    assert code == 1 and "ML922" in out and "dp_shard(4) = 4, but accelerate launch starts 8 processes" in out


def test_heads_from_a_local_model_config(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"num_attention_heads": 12, "num_key_value_heads": 4, "hidden_size": 768}')
    script = _write(tmp_path, "accelerate launch --use_fsdp --fsdp_version 2 --use_parallelism_config "
                              "--num_processes 8 --parallelism_config_dp_shard_size 1 --parallelism_config_cp_size 1 "
                              "--parallelism_config_dp_shard_size 1 --parallelism_config_tp_size 8 "
                              "train.py --model_name_or_path model\n", "run.sh")
    report = check_file(str(script), Options(rules=RULES))
    codes = {f.code for f in report.findings}
    assert {"ML304", "ML305"} <= codes, [f.message for f in report.findings]
    assert "model/config.json" in report.spec.values["accelerate.model_config"]


def test_a_model_not_at_hand_is_said_so(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    script = _write(tmp_path, "accelerate launch --use_fsdp --use_parallelism_config --num_processes 8 "
                              "--parallelism_config_dp_shard_size 2 --parallelism_config_tp_size 4 "
                              "train.py --model_name_or_path org/model\n", "run.sh")
    report = check_file(str(script), Options(rules=RULES))
    assert "not in the local Hugging Face cache" in report.spec.values["accelerate.model_config"]
    assert not {"ML304", "ML305"} & {f.code for f in report.findings}


def test_other_yaml_a_hook_hands_over_is_skipped_even_when_meshlint_cannot_read_it(tmp_path):
    manifests = _write(tmp_path, "kind: Service\n---\nkind: Deployment\n", "k8s.yaml")
    template = _write(tmp_path, "name: {{ .Values.name }}\n  bad: [\n", "chart.yaml")
    for path in (manifests, template):
        assert check_file(str(path), Options(rules=RULES)).status == "skipped"
    broken = _write(tmp_path, "distributed_type: FSDP\nparallelism_config: [\n", "accelerate.yaml")
    report = check_file(str(broken), Options(rules=RULES))
    assert report.status == "error" and report.error.code == "ML009" and report.error.line == 3


def test_fix_writes_the_size_back_into_the_yaml(tmp_path):
    from meshlint.solve.fix import fix_path

    path = _write(tmp_path, "distributed_type: FSDP  # keep\nfsdp_config:\n  fsdp_version: 2\nnum_processes: 8\n"
                            "parallelism_config:\n  parallelism_config_dp_shard_size: 16   # was 16\n")
    fix_path(str(path), Options(rules=RULES))
    text = path.read_text()
    assert "parallelism_config_dp_shard_size: 8   # was 16" in text and "distributed_type: FSDP  # keep" in text
    assert not [f for f in check_file(str(path), Options(rules=RULES)).findings if f.severity == "error"]


def test_smoke_plan_builds_the_mesh_and_its_flattened_meshes_as_accelerate_does():
    from meshlint.smoke.plan import build

    report = analyse(str(UPSTREAM / "examples_torch_native_parallelism_configs_tp_hsdp.yaml"), Options(rules=RULES))
    plan = build(report, 8)
    assert plan["recipe"] == [
        {"op": "init", "mesh": "device_mesh", "dims": ["dp_replicate", "dp_shard", "tp"], "sizes": [2, 2, 2]},
        {"op": "flatten", "mesh": "dp", "of": "device_mesh", "dims": ["dp_replicate", "dp_shard"], "as": "dp"},
        {"op": "flatten", "mesh": "dp_shard_cp", "of": "device_mesh", "dims": ["dp_shard"], "as": "dp_shard_cp"},
        {"op": "flatten", "mesh": "dp_cp", "of": "device_mesh", "dims": ["dp_replicate", "dp_shard"], "as": "dp_cp"}]


def test_json_and_sarif_reports_of_accelerate_inputs_validate_against_their_schemas(tmp_path):
    import json

    import jsonschema
    from conftest import run_cli_json

    schema = json.loads((ROOT / "docs" / "report-v1.schema.json").read_text())
    paths = [str(p) for p in sorted(UPSTREAM.glob("*.y*ml"))]
    paths += [str(p) for p in sorted((FIXTURES / "rules").glob("ML92*/*.*"))]
    paths += [str(_write(tmp_path, "a: [1\n", "broken.yaml"))]
    _, doc = run_cli_json("check", *paths)
    jsonschema.Draft7Validator(schema).validate(doc)
    assert {f["dialect"] for f in doc["files"] if f["status"] == "checked"} == {"accelerate"}
