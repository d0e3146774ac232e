"""Every rule has a failing and a passing fixture, and its documented examples behave as documented.

Bad fixtures carry ``# expect: CODE[, CODE]`` on the line each finding must
point at; the errors and warnings found must be exactly those. Good
fixtures must be free of errors and warnings, and the rule they belong to
must actually have run on them (not skipped for lack of a fact).

Fixtures are TOML configs, Accelerate config files (``.yaml``), launch scripts (``.sh``: Accelerate,
Megatron-LM) or torchtitan registry files (``.py``). A registry fixture is
checked as every registry-era torchtitan version its rule applies to, or only as the one its
name tags (``bad_main_*.py``: main@b5bcd76c6, ``bad_v030_*.py``: 0.3.0).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from meshlint.engine.check import Options, check_file
from meshlint.engine.ruleset import load_rules

RULE_FIXTURES = FIXTURES / "rules"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)")
RULES = load_rules()
BY_CODE = {r.code: r for r in RULES}
# Fixtures run with unused-suppression reporting on: good ones must not carry stale suppressions either.
OPTIONS = Options(rules=RULES, report_unused=True)


def expectations(path: Path) -> set[tuple[str, int]]:
    out = set()
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            out |= {(code.strip(), lineno) for code in match.group(1).split(",")}
    return out


FIXTURE_SUFFIXES = (".toml", ".py", ".yaml", ".sh")  # .yaml and .sh: accelerate configs and launch scripts


def fixture_dir(rule) -> Path:
    return RULE_FIXTURES / f"{rule.code}-{rule.name}"


REGISTRY_VERSIONS = {"main": "main@b5bcd76c6", "v030": "0.3.0"}


def registry_versions(rule, path: Path) -> list:
    """The torchtitan versions a registry fixture is checked as."""
    tag = path.stem.split("_")[1] if "_" in path.stem else ""
    if tag in REGISTRY_VERSIONS:
        return [REGISTRY_VERSIONS[tag]]
    limit = [f.split("@", 1)[1] for f in (rule.frameworks or ()) if f.startswith("torchtitan@")]
    return [v for v in REGISTRY_VERSIONS.values() if not limit or v in limit]


def cases(kind: str):
    for rule in RULES:
        directory = fixture_dir(rule)
        for path in sorted(p for s in (".toml", ".yaml", ".sh") for p in directory.glob(f"{kind}*{s}")):
            yield pytest.param(rule.code, path, None, id=f"{rule.code}/{path.name}")
        for path in sorted(directory.glob(f"{kind}*.py")):
            for version in registry_versions(rule, path):
                yield pytest.param(rule.code, path, version, id=f"{rule.code}/{path.name}@{version}")


# The whole-peak memory rules judge every config with a known model; the other rules' fixtures are snippets with
# the frameworks' default batches, so they run on a GPU without a memory limit (the memory rules' own fixtures do not).
MEMORY_RULES = ("ML504", "ML505")


def options_for(version, code=None):
    options = OPTIONS if code in MEMORY_RULES else OPTIONS._replace(gpu_memory_gib=1e9)
    return options if version is None else options._replace(torchtitan_version=version)


@pytest.mark.parametrize("code", [r.code for r in RULES])
def test_every_rule_has_a_failing_and_a_passing_fixture(code):
    directory = fixture_dir(BY_CODE[code])
    assert [p for p in directory.glob("bad*") if p.suffix in FIXTURE_SUFFIXES], f"no failing fixture in {directory}"
    assert [p for p in directory.glob("good*") if p.suffix in FIXTURE_SUFFIXES], f"no passing fixture in {directory}"


def test_no_fixture_directory_without_a_rule():
    expected = {fixture_dir(r).name for r in RULES}
    assert {p.name for p in RULE_FIXTURES.iterdir()} <= expected


@pytest.mark.parametrize("code, path, version", list(cases("bad")))
def test_bad_fixture_reports_exactly_the_expected_findings(code, path, version):
    expected = expectations(path)
    assert any(c == code for c, _ in expected), f"{path} must expect {code}"
    report = check_file(str(path), options_for(version, code))
    assert report.status == "checked", report.error
    expected_codes = {c for c, _ in expected}
    found = {(f.code, f.line) for f in report.findings
             if f.severity in ("error", "warning") or f.code in expected_codes}
    assert found == expected, "\n".join(f"{f.line}: {f.code} {f.message}" for f in report.findings)
    for f in report.findings:
        assert f.message and "<error:" not in f.message and "<error:" not in (f.help or "")


@pytest.mark.parametrize("code, path, version", list(cases("good")))
def test_good_fixture_is_clean_and_the_rule_ran(code, path, version):
    report = check_file(str(path), options_for(version, code))
    assert report.status == "checked", report.error
    noisy = [f for f in report.findings if f.severity in ("error", "warning")]
    assert not noisy, "\n".join(f"{f.line}: {f.code} {f.message}" for f in noisy)
    rule = BY_CODE[code]
    assert rule.applies_to(report.dialect)
    skipped = [s for s in report.skips if s.code == code]
    assert not skipped, f"{code} was skipped (needs {skipped[0].needs}): the fixture does not exercise it"


@pytest.mark.parametrize("code", [r.code for r in RULES])
def test_documented_examples_behave_as_documented(code, tmp_path):
    rule = BY_CODE[code]
    for field in ("what", "why", "bad", "good", "fix"):
        assert rule.doc.get(field), f"{code}: doc.{field} is missing"
    python = "def " in rule.doc["bad"]  # a registry example
    accelerate = rule.dialects == ("accelerate",)  # an accelerate config file
    shell = rule.doc["bad"].lstrip().startswith("#!")  # a launch script (Megatron-LM)
    launch = shell or (accelerate and "accelerate launch" in rule.doc["bad"])  # or an accelerate launch script
    suffix = ".py" if python else ".sh" if launch else ".yaml" if accelerate else ".toml"
    versions = registry_versions(rule, Path("doc.py")) if python else [None]
    assert versions, f"{code}: no registry-era version to check its example with"
    stand_in = fixture_dir(rule) / "torchtitan"
    if stand_in.is_dir():  # a rule about the checkout's own code: its examples are read inside the stand-in checkout
        shutil.copytree(stand_in, tmp_path / "torchtitan")
    for version in versions:
        options = options_for(version, code)
        bad = tmp_path / f"bad{suffix}"
        bad.write_text(rule.doc["bad"])
        assert code in [f.code for f in check_file(str(bad), options).findings], \
            f"doc.bad does not trigger the rule ({version or 'TOML'})"
        good = tmp_path / f"good{suffix}"
        good.write_text(rule.doc["good"])
        report = check_file(str(good), options)
        assert code not in [f.code for f in report.findings], f"doc.good triggers the rule ({version or 'TOML'})"
        assert code not in [s.code for s in report.skips], f"doc.good does not exercise the rule ({version or 'TOML'})"
