"""Output a user can act on (issue 19, point 4): skip notes folded into one line, `meshlint versions`,
help lines that fit the input (a registry function is not told to rename itself like a TOML file)."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_cli, run_cli_json, run_subprocess

TT_MAIN = ROOT.parent / "shared" / "frameworks" / "torchtitan-b5bcd76c6"
NO_WORLD = "[distributed]\ntp = 2\n"  # no world size: ML105, a skip note
NO_NODE = "# meshlint: world_size=8\n[distributed]\ntp = 2\n"  # no node size: ML109


def test_skip_notes_fold_into_one_line_in_text(write):
    code, out = run_cli("check", str(write(NO_WORLD)), str(write(NO_NODE, "b.toml")), str(write(NO_WORLD, "c.toml")))
    assert code == 0
    assert "ML105" not in out.split("note:")[0] and "ML109" not in out.split("note:")[0]
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1
    assert "3 skip notes not shown" in notes[0] and "world-size-unknown (ML105) 2" in notes[0]
    assert "gpus-per-node-unknown (ML109) 1" in notes[0]
    assert "--show-skips" in notes[0] and "--world-size" in notes[0]
    assert out.rstrip().endswith("3 files checked: 0 errors, 0 warnings, 3 info in 3 files.")


@pytest.mark.parametrize("flag", ["--show-skips", "--verbose"])
def test_show_skips_lists_each_note(write, flag):
    code, out = run_cli("check", flag, str(write(NO_WORLD)), str(write(NO_NODE, "b.toml")))
    assert code == 0 and "ML105 [info] world size unknown" in out and "ML109 [info]" in out
    assert "skip notes not shown" not in out


def test_json_and_sarif_keep_every_skip_note_marked(write):
    paths = [str(write(NO_WORLD)), str(write(NO_NODE, "b.toml"))]
    _, doc = run_cli_json("check", *paths)
    found = {f["rule"]: f for file in doc["files"] for f in file["findings"]}
    assert found["ML105"]["skip_note"] is True and found["ML109"]["skip_note"] is True
    code, out = run_cli("check", "--format", "sarif", *paths)
    assert {r["ruleId"] for r in json.loads(out)["runs"][0]["results"]} >= {"ML105", "ML109"}


def test_github_format_folds_skip_notes_into_one_notice(write):
    _, out = run_cli("check", "--format", "github", str(write(NO_WORLD)))
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("::notice title=meshlint skip notes::")


def test_errors_and_warnings_are_never_folded(write):
    _, out = run_cli("check", str(write("[distributed]\ntp = 3\npp = 0\n")))
    assert "ML102 [error]" in out


def test_fail_on_info_still_counts_folded_notes(write):
    code, out = run_cli("check", "--fail-on", "info", str(write(NO_WORLD)))
    assert code == 1 and "1 skip note not shown" in out


def test_the_plain_fast_path_folds_the_same_way(write):
    path = str(write(NO_WORLD))
    plain = run_subprocess("check", path)
    _, through_click = run_cli("check", "--color", "never", path)
    assert plain.stdout.rstrip() == through_click.rstrip()


@pytest.mark.skipif(not TT_MAIN.is_dir(), reason="../shared/frameworks/torchtitan-b5bcd76c6 is absent")
def test_a_registry_tree_shows_its_errors_not_its_skips():
    _, out = run_cli("check", "--no-cache", str(TT_MAIN))
    lines = out.strip().splitlines()
    assert sum("[info]" in line and ("ML105" in line or "ML111" in line) for line in lines) == 0
    assert sum("[error]" in line for line in lines) >= 5 and len(lines) < 40
    assert any("skip notes not shown" in line for line in lines[-3:])


def test_world_size_help_fits_a_registry_function(write):
    registry = write("from torchtitan.config import ParallelismConfig\nfrom torchtitan.trainer import Trainer\n\n\n"
                     "def run():\n    return Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2))\n",
                     "config_registry.py")
    _, doc = run_cli_json("check", str(registry))
    help_text = next(f["help"] for f in doc["files"][0]["findings"] if f["rule"] == "ML105")
    assert ".toml" not in help_text and "--world-size" in help_text
    _, doc = run_cli_json("check", str(write(NO_WORLD)))
    assert "_<N>gpu_" in next(f["help"] for f in doc["files"][0]["findings"] if f["rule"] == "ML105")


def test_versions_lists_every_modelled_version():
    from meshlint.frameworks.versions import VERSIONS

    code, out = run_cli("versions", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and [r["id"] for r in doc["versions"]] == [f"{e.framework}@{e.version}" for e in VERSIONS]
    code, text = run_cli("versions")
    assert code == 0 and all(f"{e.framework}@{e.version}" in text for e in VERSIONS)


@pytest.mark.skipif(not TT_MAIN.is_dir(), reason="../shared/frameworks/torchtitan-b5bcd76c6 is absent")
def test_versions_identifies_a_checkout():
    code, out = run_cli("versions", "--torchtitan-root", str(TT_MAIN), "--format", "json")
    found = json.loads(out)["torchtitan_root"]
    assert code == 0 and found["version"] == "main@b5bcd76c6" and "spmd_backend" in found["decided_by"]


def test_every_help_reference_to_a_command_exists():
    """`--help` and the rule schema point at `meshlint versions`: it must be a command."""
    from meshlint.cli.commands import main

    assert "versions" in main.commands


def test_a_loop_check_points_at_the_item_that_fails(write):
    """KempnerForge checks its degrees in one loop (distributed.py:70-78): with tp = "4" (converted, runs) and
    cp = 0 (refused), the error is cp's, on cp's line; tp is only the conversion warning."""
    _, doc = run_cli_json("check", "--isolated", "--world-size", "8",
                          str(write("[model]\ndim = 256\nn_heads = 4\nn_kv_heads = 4\n\n[distributed]\n"
                                    "tp = \"4\"\ncp = 0\n")))
    by_line = {}
    for f in doc["files"][0]["findings"]:
        by_line.setdefault(f["line"], []).append((f["rule"], f["severity"]))
    assert by_line[7] == [("ML114", "warning")]
    assert any(sev == "error" for _, sev in by_line[8])
    assert not any("cp must be" in f["message"] and f["line"] == 7 for f in doc["files"][0]["findings"])


@pytest.mark.parametrize("written, meant", [("pp_degree", "pp"), ("tensor_parallel_size", "tp"),
                                            ("pipeline_model_parallel_size", "pp"), ("fsdp_size", "dp_shard"),
                                            ("data_parallel_replicate_degree", "dp_replicate"), ("ep_degree", "ep"),
                                            ("context_parallel_degree", "cp")])
def test_a_degree_under_another_frameworks_name_gets_a_did_you_mean(write, written, meant):
    _, doc = run_cli_json("check", "--isolated", "--world-size", "8", str(write(f"[distributed]\n{written} = 2\n")))
    unknown = next(f for f in doc["files"][0]["findings"] if f["rule"] == "ML108")
    assert f"did you mean {meant}?" in unknown["message"] and meant in (unknown["help"] or "")


def test_degree_words_name_no_degree_where_none_is_meant():
    from meshlint.frameworks.schema_data import degree_word, same_degree

    assert degree_word("nccl_timeout_sec") is None and degree_word("model_dim") is None
    assert same_degree("pp_degree", ["pp", "tp"]) == ["pp"] and same_degree("pp_degree", ["tp"]) == []


def test_help_never_reshapes_a_published_architecture(write):
    """llama3 8B's ffn_hidden_dim (14336) is fixed: tp = 3 gets 'use tp in 2', never 'round it up to 14337'."""
    path = write("# meshlint: world_size=6 gpus_per_node=6\n[model]\nname = \"llama3\"\nflavor = \"8B\"\n"
                 "[parallelism]\ntensor_parallel_degree = 3\n")
    _, doc = run_cli_json("check", "--isolated", str(path))
    uneven = next(f for f in doc["files"][0]["findings"] if f["rule"] == "ML503")
    assert "14337" not in uneven["help"] and "round" not in uneven["help"] and "use tp in 2" in uneven["help"]
    own = write("# meshlint: world_size=6 gpus_per_node=6\n[model]\ndim = 768\nn_heads = 6\nn_kv_heads = 6\n"
                "vocab_size = 32000\nffn_hidden_dim = 2050\n[distributed]\ntp = 3\n", "own.toml")
    _, doc = run_cli_json("check", "--isolated", str(own))
    uneven = next(f for f in doc["files"][0]["findings"] if f["rule"] == "ML503")
    assert "round ffn_hidden_dim up to 2052" in uneven["help"]  # a model the config defines is the user's to change


@pytest.mark.parametrize("text, line, col", [
    ("[a]\nx = 1\ny = tru\n", 3, 5), ("[a]\nx=1\nx=2\n", 3, 1), ("x = [1,\n2\n", 3, 1), ("[a]\n[a]\n", 2, 1),
    ("[a]\nx = \"abc\n", 2, 5),
])
def test_invalid_toml_is_located_in_every_command(write, text, line, col):
    """Never 1:1 for an error elsewhere: check (every format), explain, diff, suggest and smoke name the place."""
    path = str(write(text))
    _, doc = run_cli_json("check", path)
    f = doc["files"][0]["findings"][0]
    assert f["rule"] == "ML003" and f["line"] == line and f["column"] >= col
    place = f"{path}:{line}:{f['column']}"
    for args in (("check", path), ("explain", path), ("check", "--format", "github", path)):
        code, out = run_cli(*args)
        assert code == 2 and (place in out or f"line={line},col={f['column']}" in out), (args, out)
    code, out = run_cli("diff", path, path)
    assert code == 2 and f"at line {line}, column {f['column']}" in out
    for command in ("suggest", "smoke"):
        proc = run_subprocess(command, path, "--world-size", "8")
        assert proc.returncode == 2 and place in proc.stderr, (command, proc.stderr)
