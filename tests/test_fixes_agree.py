"""Fixes that agree (issue 12): no two findings of one config propose contradictory degrees.

Every help line that proposes a degree value ("use tp in 2, 4, 8", "use tp = 4", "pp in {2, 4}")
draws on one shared search of the layouts that pass every error rule at once
(meshlint.solve.degree_choices). Checked on every rule fixture, the shipped example configs and
edits of the frameworks' real configs: each proposed value appears in some fully valid layout,
and two findings never propose disjoint sets for the same degree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from meshlint.engine.check import Options, check_file, degree_choices
from meshlint.engine.ruleset import load_rules

RULES = load_rules()
OPTIONS = Options(rules=RULES)
DEGREES = "dp_replicate|dp_shard|tp|pp|cp|ep|etp"
SET = re.compile(rf"\b({DEGREES}) in \{{?([0-9][0-9, ]*)\}}?")
ONE = re.compile(rf"\buse ({DEGREES}) = ([0-9]+)\b")
KF_CONFIGS = ROOT.parent / "shared" / "frameworks" / "KempnerForge-5666d0d" / "configs" / "train"


def proposals(findings) -> dict:
    """{degree: [(code, set of values)]} from the help lines of the findings."""
    out: dict = {}
    for f in findings:
        for line in (f.help or "").splitlines():
            for name, values in SET.findall(line):
                out.setdefault(name, []).append((f.code, {int(v) for v in values.replace(" ", "").split(",") if v}))
            for name, value in ONE.findall(line):
                out.setdefault(name, []).append((f.code, {int(value)}))
    return out


def corpus() -> list:
    paths = sorted(FIXTURES.glob("rules/*/bad*.toml"))
    paths += sorted(p for d in ("kempnerforge", "torchtitan", "native") for p in (FIXTURES / d).glob("*.toml"))
    return [pytest.param(p, None, id=str(p.relative_to(FIXTURES))) for p in paths]


def real_edits() -> list:
    """KempnerForge's own configs with a degree edited to a value the model or the world refuses."""
    if not KF_CONFIGS.is_dir():
        return []
    out = []
    for path in sorted(KF_CONFIGS.glob("*.toml"))[:12]:
        for key, value in (("tp", 3), ("tp", 16), ("pp", 3), ("ep", 3)):
            out.append(pytest.param(path, (key, value), id=f"{path.name}:{key}={value}"))
    return out


def _edited(path: Path, edit, tmp_path: Path) -> Path:
    if edit is None:
        return path
    key, value = edit
    text = path.read_text()
    line = f"{key} = {value}"
    if re.search(rf"^{key}\s*=", text, flags=re.M):
        text = re.sub(rf"^{key}\s*=.*$", line, text, count=1, flags=re.M)
    else:
        text = text.replace("[distributed]", f"[distributed]\n{line}", 1)
    out = tmp_path / path.name  # keep the name: KempnerForge's _<N>gpu convention gives the world
    out.write_text(text)
    return out


@pytest.mark.parametrize("path, edit", corpus() + real_edits())
def test_help_lines_never_propose_contradictory_degrees(path, edit, tmp_path):
    target = _edited(path, edit, tmp_path)
    report = check_file(str(target), OPTIONS)
    if report.status != "checked":
        pytest.skip(f"not a checked config: {report.status}")
    offered = proposals(report.findings)
    if not offered:
        return
    choices = degree_choices(report, OPTIONS) if any(f.severity == "error" for f in report.findings) else None
    for name, sets in offered.items():
        if choices is not None and name in choices:
            for code, values in sets:
                outside = values - set(choices[name])
                assert not outside, (f"{code} proposes {name} in {sorted(values)}, but {sorted(outside)} is in no "
                                     f"layout that passes every error rule ({name} can be {choices[name]})")
        for i, (code_a, a) in enumerate(sets):
            for code_b, b in sets[i + 1:]:
                assert a & b, f"{code_a} proposes {name} in {sorted(a)} but {code_b} proposes {sorted(b)}"


def test_the_issue_example_agrees(tmp_path):
    """8 KV heads and tp = 3 on 16 GPUs: ML103 used to offer tp in {1, 2, 4, 8, 16, 32}, ML305 only 2 or 4."""
    config = tmp_path / "llama_16gpu.toml"
    config.write_text("# meshlint: gpus_per_node=8\n[model]\nn_heads = 32\nn_kv_heads = 8\n\n"
                      "[distributed]\ndp_shard = 2\ntp = 3\n")
    report = check_file(str(config), OPTIONS)
    offered = proposals(report.findings)
    codes = {code for code, _ in offered["tp"]}
    assert {"ML103", "ML304", "ML305"} <= codes
    for _code, values in offered["tp"]:
        assert values <= {1, 2, 4, 8}


def test_the_search_is_bounded_by_work_not_by_time():
    """check's help lines must not depend on the machine's load: the search stops after a count of layouts, and
    the same count gives the same answer however slow the machine."""
    from meshlint.engine.search.valid import degree_choices as search

    report = check_file(str(ROOT / "fixtures/rules/ML309-experts-not-divisible-by-ep/bad_torchtitan_24gpu.toml"),
                        OPTIONS)
    errors = OPTIONS._replace(rules=[r for r in RULES if r.severity == "error"])
    whole = search(report, errors)
    assert whole and search(report, errors, budget=(10 ** 6, 10 ** 6)) == whole
    assert search(report, errors, budget=(3, 10 ** 6)) is None    # too few layouts enumerated
    assert search(report, errors, budget=(10 ** 6, 1)) is None    # too few verified
    assert degree_choices(report, OPTIONS) == whole               # check's own budget covers the fixtures' searches
