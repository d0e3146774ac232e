"""The built-in rules parsed ahead of time (meshlint/engine/rules_prebuilt.py): current, identical to parsing, never stale."""

from __future__ import annotations

import shutil

import pytest
from conftest import ROOT

from meshlint.engine import prebuilt, rule_cache, rules, ruleset
from meshlint.generate import rules_prebuilt as generate


def _encoded(rule_list):
    return [rule_cache._encode_rule(r) for r in rule_list]


def test_the_prebuilt_module_is_current():
    # regenerated from rules/*.toml and the loader as they are now: a rule edited without
    # `python -m meshlint.generate.rules_prebuilt` fails here (and, at run time, is parsed instead)
    assert generate.OUT.read_text(encoding="utf-8") == generate.module_source(str(ROOT / "rules")), \
        "meshlint/engine/rules_prebuilt.py is stale: run python -m meshlint.generate.rules_prebuilt"


def test_prebuilt_rules_are_the_parsed_rules():
    directory = rules.builtin_rules_dir()
    built = prebuilt.load(directory)
    assert built is not None
    parsed = [rules.load_rule_file(f"{directory}/{name}", "builtin", validate=False)
              for name in prebuilt.rule_files(directory)]
    assert _encoded(built) == _encoded(parsed)
    assert [r.path for r in built] == [r.path for r in parsed]
    assert _encoded(ruleset.load_rules()) == _encoded(built)  # what a run gets


@pytest.fixture
def copy(tmp_path):
    target = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", target)
    return target


def test_an_unchanged_copy_is_used_with_its_own_paths(copy):
    built = prebuilt.load(str(copy))
    assert built is not None and all(r.path.startswith(str(copy)) for r in built)


@pytest.mark.parametrize("change", [
    lambda d: (d / "ML101-invalid-value.toml").write_text(
        (d / "ML101-invalid-value.toml").read_text().replace("severity = \"error\"", "severity = \"warning\"")),
    lambda d: (d / "ML101-invalid-value.toml").write_bytes(  # the same size, one byte changed
        (d / "ML101-invalid-value.toml").read_bytes().replace(b"error", b"errox", 1)),
    lambda d: (d / "ML999-new.toml").write_text("code = 'ML999'\n"),
    lambda d: (d / "ML101-invalid-value.toml").unlink(),
])
def test_a_changed_rule_file_is_never_answered_from_the_prebuilt_module(copy, change):
    change(copy)
    assert prebuilt.load(str(copy)) is None  # the loader parses the files instead


def test_a_changed_parser_or_version_is_never_answered_from_it(monkeypatch):
    from meshlint.engine import rules_prebuilt

    directory = rules.builtin_rules_dir()
    version, builders, files = rules_prebuilt.FINGERPRINT
    changed = ((builders[0][0], builders[0][1] + 1) + builders[0][2:],) + builders[1:]
    monkeypatch.setattr(rules_prebuilt, "FINGERPRINT", (version, changed, files))
    assert prebuilt.load(directory) is None
    monkeypatch.setattr(rules_prebuilt, "FINGERPRINT", ("0.0.0", builders, files))
    assert prebuilt.load(directory) is None


def test_a_damaged_module_falls_back_to_parsing(monkeypatch):
    from meshlint.engine import rules_prebuilt

    monkeypatch.setattr(rules_prebuilt, "RULES", [{"check": ["expr", "not a pair"]}])
    assert prebuilt.load(rules.builtin_rules_dir()) is None
    assert len(ruleset.load_rules()) == len(prebuilt.rule_files(rules.builtin_rules_dir()))
