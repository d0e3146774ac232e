"""Rule files: the shipped ones validate against the public schema; bad ones are rejected by file and field."""

from __future__ import annotations

import json
import sys

import jsonschema
import pytest
from conftest import ROOT, run_cli

from meshlint.errors import RuleFileError
from meshlint.engine.rules import SCHEMA_PATH, load_rule_file
from meshlint.engine.ruleset import load_rules

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SCHEMA = json.loads(open(SCHEMA_PATH, encoding="utf-8").read())
VALID = '''
code = "TEAM001"
name = "tp-at-most-four"
severity = "warning"
summary = "Our cluster policy: tp <= 4"
check = "tp <= 4"
key = "{keys.tp}"
message = "tp = {tp} exceeds the team limit of 4"
'''


@pytest.mark.parametrize("path", sorted((ROOT / "rules").glob("*.toml")), ids=lambda p: p.name)
def test_shipped_rules_validate_against_the_schema(path):
    data = tomllib.loads(path.read_text())
    jsonschema.Draft7Validator(SCHEMA).validate(data)
    assert path.name.startswith(f"{data['code']}-{data['name']}.toml"[:len(path.name)]), "file name is CODE-name.toml"


def test_the_schema_documents_every_field():
    for name, prop in SCHEMA["properties"].items():
        assert prop.get("title"), f"field {name} has no title"


def test_user_rule_pack_is_loaded_and_runs(tmp_path, write):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "TEAM001.toml").write_text(VALID)
    config = write("# meshlint: world_size=16 gpus_per_node=8\n[distributed]\ntp = 8\n")
    code, out = run_cli("check", str(config), "--rules", str(pack), "--fail-on", "warning")
    assert code == 1 and "TEAM001 [warning] tp = 8 exceeds the team limit of 4" in out
    assert "TEAM001" in run_cli("rules", "--rules", str(pack))[1]


@pytest.mark.parametrize("mutation, field, fragment", [
    (("check", None, "chek"), "chek", "unknown field (did you mean 'check'?)"),
    (("severity", '"fatal"', None), "severity", "'fatal' is not one of 'error', 'warning', 'info'"),
    (("check", '"tp <="', None), "check", "invalid expression: unexpected end of expression"),
    (("check", '"tp <= wrld_size"', None), "check", "unknown name 'wrld_size' (did you mean 'world_size'?)"),
    (("check", '"model.n_heds > 0"', None), "check", "unknown fact 'model.n_heds' (did you mean 'model.n_heads'?)"),
    (("message", '"tp {tp"', None), "message", "invalid template"),
    (("code", '"team1"', None), "code", "does not match"),
    (("message", None, None), "message", "required field is missing"),
    (("check", '"__import__(1)"', None), "check", "unknown function '__import__'"),
])
def test_invalid_rule_files_name_the_file_and_the_field(tmp_path, mutation, field, fragment):
    key, value, rename = mutation
    lines = []
    for line in VALID.strip().splitlines():
        k = line.split(" = ")[0]
        if k == key:
            if rename:
                line = line.replace(k, rename, 1)
            elif value is None:
                continue
            else:
                line = f"{k} = {value}"
        lines.append(line)
    path = tmp_path / "bad.toml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RuleFileError) as info:
        load_rule_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: field '{field}'"), message
    assert fragment in message, message


def test_cli_reports_an_invalid_rule_pack_with_exit_2(tmp_path, write):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "bad.toml").write_text(VALID.replace("severity", "sevrity"))
    code, out = run_cli("check", str(write("[distributed]\n")), "--rules", str(pack))
    assert code == 2
    assert "field 'sevrity': unknown field (did you mean 'severity'?)" in out
    assert "Traceback" not in out


def test_duplicate_codes_across_packs_are_rejected(tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "dup.toml").write_text(VALID.replace("TEAM001", "ML103"))
    with pytest.raises(RuleFileError, match="code 'ML103' is already used"):
        load_rules((str(pack),))


def test_a_hostile_rule_cannot_hang_the_run(tmp_path, write):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "slow.toml").write_text(VALID.replace('check = "tp <= 4"',
                                    'check = "len([x for x in range(100000) for y in range(100000)]) > 0"'))
    code, out = run_cli("check", str(write("[distributed]\n")), "--rules", str(pack))
    assert code == 1 and "TEAM001 [error] rule could not be evaluated: step budget exceeded" in out
