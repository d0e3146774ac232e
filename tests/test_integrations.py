"""meshlint in the tools people use: project configuration, suppressions, SARIF, GitHub
annotations, colours, JSON Schema for editors, and the documented GitHub workflow."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, run_cli, run_cli_json

BAD_TP = "# meshlint: world_size=32 gpus_per_node=4\n[model]\nn_heads = 64\n\n[distributed]\ntp = 8\n"


def tool(name: str) -> str:
    path = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(path).exists():
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return path


# ---------------------------------------------------------------------------- project configuration

def test_pyproject_configuration_is_found_by_walking_up(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.meshlint]\ngpus_per_node = 4\n')
    cfg = tmp_path / "configs" / "deep" / "a_32gpu.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[model]\nn_heads = 64\n[distributed]\ntp = 8\n")
    code, doc = run_cli_json("check", str(cfg))
    f = doc["files"][0]
    assert (f["gpus_per_node"], f["gpus_per_node_source"]) == (4, f"{tmp_path / 'pyproject.toml'} cluster profile")
    assert "ML201" in [x["rule"] for x in f["findings"]]


def test_meshlint_toml_per_file_and_lint_settings(tmp_path):
    (tmp_path / "meshlint.toml").write_text(
        'gpus_per_node = 8\n\n[lint]\nignore = ["ML105", "partial-last-node"]\nseverity = { ML203 = "error" }\n'
        'fail-on = "warning"\n\n[per-file."configs/wide*.toml"]\nworld_size = 16\n')
    (tmp_path / "configs").mkdir()
    wide = tmp_path / "configs" / "wide_a.toml"
    wide.write_text("[model]\nnum_experts = 8\n[train]\ncompile_model = false\n[distributed]\ntp = 4\nep = 4\n")
    code, doc = run_cli_json("check", str(wide))
    f = doc["files"][0]
    assert f["world_size"] == 16 and "per-file settings" in f["world_size_source"]
    ep = [x for x in f["findings"] if x["rule"] == "ML203"]
    assert ep and ep[0]["severity"] == "error"   # severity override
    assert code == 1


def test_select_extend_select_and_ignore_by_code_prefix_and_name(write):
    path = write("[model]\nnum_experts = 6\n[distributed]\npp = 2\nep = 4\n", "m_16gpu.toml")
    _, doc = run_cli_json("check", str(path), "--isolated")
    assert {"ML307", "ML309", "ML312"} <= {x["rule"] for x in doc["files"][0]["findings"]}
    _, doc = run_cli_json("check", str(path), "--isolated", "--select", "ML30", "--ignore", "moe-with-pp")
    assert {x["rule"] for x in doc["files"][0]["findings"]} == {"ML309"}
    _, doc = run_cli_json("check", str(path), "--isolated", "--select", "ML309", "--extend-select", "ML312")
    assert {x["rule"] for x in doc["files"][0]["findings"]} == {"ML309", "ML312"}


def test_command_line_overrides_the_configuration(tmp_path):
    (tmp_path / "meshlint.toml").write_text('world_size = 64\n[lint]\nfail-on = "info"\n')
    cfg = tmp_path / "c.toml"
    cfg.write_text("[distributed]\ntp = 4\n")
    code, doc = run_cli_json("check", str(cfg), "--world-size", "32", "--fail-on", "error")
    assert doc["files"][0]["world_size"] == 32 and code == 0
    code, _ = run_cli("check", str(cfg))  # the configured fail-on = info makes the ML109 info fail the run
    assert code == 1


@pytest.mark.parametrize("content, message", [
    ("[tool.meshlint]\ngpus_per_nod = 4\n", "tool.meshlint.gpus_per_nod: unknown key (did you mean 'gpus_per_node'?)"),
    ("[tool.meshlint.lint]\nfail_on = 'warning'\n", "did you mean 'fail-on'?"),
    ("[tool.meshlint]\nplacement = 'round-robin'\n", "'round-robin' is not one of block, cyclic"),
    ("[tool.meshlint.lint]\nseverity = { ML203 = 'fatal' }\n", "'fatal' is not one of error, warning, info"),
    ("[tool.meshlint]\nworld_size = 0\n", "must be a whole number"),
    ("[tool.meshlint.lint]\nselect = ['ML9999']\n", "unknown rule code or name 'ML9999'"),
])
def test_invalid_configuration_is_an_error_naming_file_line_and_key(tmp_path, content, message):
    (tmp_path / "pyproject.toml").write_text(content)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[distributed]\n")
    code, out = run_cli("check", str(cfg))
    assert code == 2 and message in out and "Traceback" not in out
    assert str(tmp_path / "pyproject.toml") in out


def test_configured_rule_directories(tmp_path):
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "TEAM001.toml").write_text(
        'code = "TEAM001"\nname = "no-pp"\nseverity = "warning"\nsummary = "no pp"\ncheck = "pp == 1"\n'
        'message = "pp = {pp} is not allowed here"\n')
    (tmp_path / "meshlint.toml").write_text('rules = ["team"]\n')
    cfg = tmp_path / "c_8gpu.toml"
    cfg.write_text("[distributed]\npp = 2\n")
    _, doc = run_cli_json("check", str(cfg))
    assert "TEAM001" in [x["rule"] for x in doc["files"][0]["findings"]]


# ---------------------------------------------------------------------------- inline suppressions

def test_suppression_on_the_line_and_on_the_line_above(write):
    base = "# meshlint: world_size=32 gpus_per_node=4\n[model]\nn_heads = 64\n\n[distributed]\n"
    assert run_cli_json("check", str(write(base + "tp = 8\n")))[0] == 1
    code, doc = run_cli_json("check", str(write(base + "tp = 8   # meshlint: ignore[ML201] -- on purpose\n", "b.toml")))
    assert code == 0 and [f["rule"] for f in doc["files"][0]["findings"]] == []
    code, _ = run_cli_json("check", str(write(base + "# meshlint: ignore[tp-larger-than-node]\ntp = 8\n", "c.toml")))
    assert code == 0
    code, _ = run_cli_json("check", str(write(base + "# meshlint: ignore[ML201]\n\ntp = 8\n", "d.toml")))
    assert code == 1  # a blank line in between: the comment no longer covers tp


def test_file_level_and_bare_suppressions(write):
    code, _ = run_cli("check", str(write("# meshlint: ignore-file[ML201, ML109]\n" + BAD_TP)))
    assert code == 0
    code, out = run_cli("check", str(write(BAD_TP.replace("tp = 8", "tp = 8  # meshlint: ignore"), "b.toml")))
    assert code == 0 and "(1 suppressed)" in out


def test_unused_suppressions_are_reported_when_asked(write):
    path = write("# meshlint: world_size=32 gpus_per_node=8\n[distributed]\ntp = 4  # meshlint: ignore[ML201]\n"
                 "pp = 2  # meshlint: ignore[ML777]\n[train]\ngrad_accum_steps = 2\n")
    assert run_cli("check", str(path))[0] == 0
    code, out = run_cli("check", str(path), "--report-unused-suppressions")
    assert code == 0  # warnings; --fail-on error
    assert f"{path}:3:1: ML901 [warning] unused suppression of ML201: suppresses nothing" in out
    assert f"{path}:4:1: ML901 [warning] unused suppression of ML777: is not a known rule code or name" in out


def test_suppressed_findings_are_listed_in_json(write):
    _, doc = run_cli_json("check", str(write(BAD_TP.replace("tp = 8", "tp = 8  # meshlint: ignore[ML201]"))))
    assert [f["rule"] for f in doc["files"][0]["suppressed"]] == ["ML201"]


# ---------------------------------------------------------------------------- formats

def test_sarif_is_read_by_a_real_consumer(tmp_path):
    sarif_tool = tool("sarif")
    code, out = run_cli("check", str(FIXTURES / "kempnerforge"), "--format", "sarif")
    doc = json.loads(out)
    run = doc["runs"][0]
    assert doc["version"] == "2.1.0" and run["tool"]["driver"]["name"] == "meshlint"
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert {"id", "name", "shortDescription", "fullDescription", "help"} <= set(rules["ML103"])
    assert "```toml" in rules["ML103"]["help"]["markdown"]
    result = next(r for r in run["results"] if r["ruleId"] == "ML104")
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "fixtures/kempnerforge/13b_30gpu_tp4.toml"
    assert location["region"] == {"startLine": 16, "startColumn": 1}
    assert result["level"] == "error" and rules[result["ruleId"]] is run["tool"]["driver"]["rules"][result["ruleIndex"]]
    assert result["partialFingerprints"]
    path = tmp_path / "meshlint.sarif"
    path.write_text(out)
    proc = subprocess.run([sarif_tool, "summary", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "error" in proc.stdout.lower() and str(sum(r["level"] == "error" for r in run["results"])) in proc.stdout
    proc = subprocess.run([sarif_tool, "ls", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_github_annotations_with_toolkit_escaping(write):
    path = write("[distributed]\ndp_shards = 2\n", "we,ird:name_8gpu.toml")
    code, out = run_cli("check", str(path), "--format", "github")
    line = next(l for l in out.splitlines() if "ML108" in l)
    assert line.startswith("::error file=") and "we%2Cird%3Aname_8gpu.toml,line=2,col=1,title=ML108 unknown-key::" in line
    assert "%0Ahelp: rename it to dp_shard" in line and "\n" not in line
    assert any(l.startswith("::notice ") for l in out.splitlines())  # info findings are notices


def test_colour_honours_no_color_force_color_and_tty(write, monkeypatch):
    from meshlint.report.text import want_color

    class Tty:
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert want_color("auto", Tty()) and not want_color("auto", object())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not want_color("auto", Tty()) and want_color("always", Tty())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert want_color("auto", object())
    _, out = run_cli("check", str(write(BAD_TP)), "--color", "always")
    assert "\x1b[1;31m[error]\x1b[0m" in out
    _, out = run_cli("check", str(write(BAD_TP)), "--color", "never")
    assert "\x1b[" not in out


# ---------------------------------------------------------------------------- JSON Schema for editors

@pytest.mark.parametrize("dialect, good, bad", [
    ("kempnerforge", FIXTURES / "kempnerforge" / "moe_ep_32gpu.toml", '[distributed]\ntp = "4"\n'),
    ("torchtitan", FIXTURES / "torchtitan" / "llama3_8b_8gpu_hsdp_tp.toml",
     "[parallelism]\ntensor_parallel_degre = 2\n"),
    ("native", FIXTURES / "native" / "hsdp_tp_64gpu.toml", '[mesh]\ndims = [{ name = "tp", size = 0 }]\n'),
])
def test_exported_schema_accepts_real_configs_and_rejects_wrong_types(tmp_path, dialect, good, bad):
    import jsonschema

    code, out = run_cli("schema", "--dialect", dialect)
    schema = json.loads(out)
    assert code == 0 and schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    jsonschema.Draft4Validator.check_schema(schema)
    schema_path = tmp_path / f"{dialect}.schema.json"
    schema_path.write_text(out)
    bad_path = tmp_path / "bad.toml"
    bad_path.write_text(bad)
    taplo = tool("taplo")
    ok = subprocess.run([taplo, "lint", "--schema", schema_path.as_uri(), str(good)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    fail = subprocess.run([taplo, "lint", "--schema", schema_path.as_uri(), str(bad_path)], capture_output=True,
                          text=True)
    assert fail.returncode != 0 and ("not of type" in fail.stderr or "not allowed" in fail.stderr
                                     or "is not valid" in fail.stderr or "is less than" in fail.stderr), fail.stderr


def test_schema_directive_in_the_file_is_honoured_by_taplo(tmp_path):
    _, out = run_cli("schema", "--dialect", "kempnerforge")
    (tmp_path / "kf.schema.json").write_text(out)
    cfg = tmp_path / "c.toml"
    cfg.write_text("#:schema ./kf.schema.json\n[distributed]\npp = 1.5\n")
    proc = subprocess.run([tool("taplo"), "lint", str(cfg)], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode != 0 and "integer" in proc.stderr


# ---------------------------------------------------------------------------- the documented workflow

def test_documented_github_workflow_is_valid():
    workflow = ROOT / "docs" / "workflows" / "meshlint.yml"
    proc = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = workflow.read_text()
    assert "--format sarif" in text and "upload-sarif" in text and "--format github" in text


def test_absolute_paths_become_repository_relative_for_github_and_sarif(monkeypatch):
    import json as _json

    from conftest import FIXTURES, ROOT, run_cli

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(ROOT))
    path = str((FIXTURES / "kempnerforge" / "cp2_8gpu.toml").resolve())
    _, out = run_cli("check", path, "--format", "github")
    assert "file=fixtures/kempnerforge/cp2_8gpu.toml," in out
    _, out = run_cli("check", path, "--format", "sarif")
    loc = _json.loads(out)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": "fixtures/kempnerforge/cp2_8gpu.toml", "uriBaseId": "%SRCROOT%"}
