"""The command line as users run it: formats, exit codes, bad input, ``python -m``."""

from __future__ import annotations

import json
import re

import pytest
from conftest import FIXTURES, ROOT, run_cli, run_cli_json, run_subprocess

GOOD_KF = "# meshlint: world_size=32 gpus_per_node=4\n[distributed]\ntp = 4\n"
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>ML\d{3}) \[(?P<sev>error|warning|info)\] (?P<msg>.+)$")


def test_clean_file_exits_0(write):
    code, out = run_cli("check", str(write(GOOD_KF)))
    assert code == 0
    assert out.strip().endswith("1 file checked: no findings.")


def test_text_format_points_at_the_key_with_a_help_line(write):
    path = write("# meshlint: world_size=32 gpus_per_node=4\n[model]\nn_heads = 32\n\n[distributed]\ndp_shard = 4\ntp = 4\npp = 4\n"
                 "\n[train]\ngrad_accum_steps = 8\n")
    code, out = run_cli("check", str(path))
    assert code == 1
    first, help_line, summary = out.strip().splitlines()
    m = LINE.match(first)
    assert m and m["path"] == str(path) and (m["line"], m["col"], m["code"], m["sev"]) == ("6", "1", "ML103", "error")
    assert "dp_replicate(1) × dp_shard(4) × tp(4) × pp(4) × cp(1) × ep(1) = 64" in m["msg"]
    assert help_line == "  help: set distributed.dp_shard = 2, or -1 to infer it from the world size"
    assert summary == "1 file checked: 1 error, 0 warnings, 0 info in 1 file."


def test_defaulted_key_points_at_its_section_header(write):
    path = write("[model]\nn_heads = 32\n\n[distributed]\ntp = 4\n", "m_30gpu.toml")
    _, out = run_cli("check", str(path))
    assert f"{path}:4:1: ML104 [error] dp_shard = -1 cannot be inferred" in out


@pytest.mark.parametrize("fail_on, expected", [("error", 0), ("warning", 1), ("info", 1), ("never", 0)])
def test_fail_on(write, fail_on, expected):
    path = write("[distributed]\ncp = 2\n", "x_2gpu.toml")  # ML301 warning only (the flat fallback)
    code, _ = run_cli("check", str(path), "--fail-on", fail_on)
    assert code == expected


def test_every_finding_of_every_file_in_one_run(write):
    a = write("[distributed]\ntp = 0\ndp_shard = -5\n", "a.toml")
    b = write("[model]\nnum_experts = 6\n[distributed]\npp = 2\nep = 4\n", "b_16gpu.toml")
    code, doc = run_cli_json("check", str(a), str(b))
    assert code == 1
    assert [f["rule"] for f in doc["files"][0]["findings"] if f["severity"] == "error"] == ["ML102", "ML102"]
    assert {f["rule"] for f in doc["files"][1]["findings"]} >= {"ML307", "ML309", "ML312"}


def test_json_contract(write):
    path = write("# meshlint: gpus_per_node=8\n[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 2\n"
                 "tensor_parallel_degree = 2\n", "tt_8gpu.toml")
    code, doc = run_cli_json("check", str(path))
    assert code == 0 and doc["version"] == 1
    f = doc["files"][0]
    assert f["dialect"] == "torchtitan" and f["world_size"] == 8 and f["world_size_source"] == 'file name "tt_8gpu.toml"'
    assert f["degrees"] == {"pp": 1, "dp_replicate": 2, "dp_shard": 2, "cp": 1, "tp": 2, "ep": 1, "etp": 1}
    assert f["mesh"]["dims"] == ["pp", "dp_replicate", "fsdp", "tp"] and f["mesh"]["sizes"] == [1, 2, 2, 2]
    assert set(f["meshes"]) == {"dataloading", "dense", "sparse"}
    assert f["meshes"]["sparse"] == {"dims": ["pp", "dp_replicate", "efsdp", "ep", "etp"], "sizes": [1, 2, 4, 1, 1],
                                     "strides": [8, 4, 1, 1, 1], "ranks": 8}
    assert f["axes"] == {"pp": 1, "batch": 4, "loss": 4, "dp_replicate": 2, "fsdp": 2, "cp": 1, "tp": 2,
                         "ep": 1, "efsdp": 4, "etp": 1}
    assert doc["summary"]["findings"] == {"error": 0, "warning": 0, "info": 0}


def test_json_report_validates_against_its_published_schema(write):
    import jsonschema

    schema = json.loads((ROOT / "docs" / "report-v1.schema.json").read_text())
    paths = [str(p) for d in ("kempnerforge", "torchtitan", "native") for p in sorted((FIXTURES / d).glob("*.toml"))]
    paths += [str(p) for p in sorted((FIXTURES / "rules").glob("ML6*/*.toml"))]
    paths += [str(write("x = 1\n", "not_a_config.toml")), str(write(b"\x00\x01", "binary.toml"))]
    _, doc = run_cli_json("check", *paths)
    jsonschema.Draft7Validator(schema).validate(doc)


def test_unknown_world_gives_one_info_with_the_valid_worlds(write):
    code, doc = run_cli_json("check", str(write("[train]\ngrad_accum_steps = 4\n[distributed]\ntp = 4\npp = 2\n")))
    infos = [f for f in doc["files"][0]["findings"] if f["severity"] == "info"]
    assert code == 0 and len(infos) == 1 and infos[0]["rule"] == "ML105"
    assert "valid on any multiple of 8 GPUs" in infos[0]["message"]
    assert doc["files"][0]["mesh"] is None
    # the whole-peak memory rules (ML504, ML505) need the layout, which the unknown world leaves open
    assert {s["needs"] for s in doc["files"][0]["skipped_rules"]} == {"world_size", "gpus_per_node", "memory"}
    assert doc["files"][0]["memory"] is None


def test_world_size_from_the_command_line(write):
    path = write("[distributed]\ntp = 4\npp = 2\n", "c_16gpu.toml")
    _, doc = run_cli_json("check", str(path), "--nodes", "4", "--gpus-per-node", "8")
    f = doc["files"][0]
    assert (f["world_size"], f["gpus_per_node"], f["nodes"]) == (32, 8, 4)
    assert f["world_size_source"] == "--nodes 4 --gpus-per-node 8"
    # the file name says 16: only a note (ML113), since the command line settles it (issue 12)
    assert "ML113" in [x["rule"] for x in f["findings"]] and "ML106" not in [x["rule"] for x in f["findings"]]


@pytest.mark.parametrize("args, message", [
    (["--nodes", "4"], "--nodes needs --gpus-per-node"),
    (["--world-size", "8", "--nodes", "2", "--gpus-per-node", "8"], "disagrees with --nodes 2"),
    (["--world-size", "0"], "0 is not in the range"),
    (["--format", "xml"], "'xml' is not one of"),
])
def test_usage_errors_exit_2(write, args, message):
    code, out = run_cli("check", str(write(GOOD_KF)), *args)
    assert code == 2 and message in out


def test_dialect_forcing(write):
    path = write("[model]\nn_heads = 32\n", "fragment.toml")
    code, out = run_cli("check", str(path))
    assert code == 0 and "skipped: no [distributed], [parallelism] or [mesh] section" in out
    code, doc = run_cli_json("check", str(path), "--dialect", "kempnerforge", "--world-size", "8")
    assert doc["files"][0]["mesh"] == {"dims": ["dp_shard"], "sizes": [8], "strides": [1], "ranks": 8}


def test_directories_are_searched_for_toml(tmp_path):
    (tmp_path / "configs" / "sub").mkdir(parents=True)
    (tmp_path / "configs" / "a_8gpu.toml").write_text("[distributed]\n")
    (tmp_path / "configs" / "sub" / "b_8gpu.toml").write_text("[parallelism]\n")
    (tmp_path / "configs" / "notes.txt").write_text("x")
    code, doc = run_cli_json("check", str(tmp_path / "configs"))
    assert code == 0 and [f["dialect"] for f in doc["files"]] == ["kempnerforge", "torchtitan"]


# ---------------------------------------------------------------------------- bad input (point 10)

BAD_INPUTS = [
    # name, content, expected exit, code, line, fragment
    ("missing.toml", None, 2, "ML001", 1, "no such file"),
    ("invalid.toml", "[distributed\ntp = 2\n", 2, "ML003", 1, "invalid TOML"),
    ("binary.toml", b"\x7fELF\x00\x00\x01", 2, "ML002", 1, "binary file"),
    ("latin1.toml", b"[model]\nname = \"\xe9t\xe9\"\n", 2, "ML002", 2, "not UTF-8"),
    ("both.toml", "[distributed]\ntp = 1\n[parallelism]\n", 2, "ML004", 1, "both [distributed] (kempnerforge) and [parallelism] (torchtitan)"),
    ("dupkey.toml", "[distributed]\ntp = 1\npp = 2\ntp = 4\n", 2, "ML003", 4, "duplicate key 'distributed.tp'"),
    ("string_8gpu.toml", '[distributed]\ntp = "two"\n', 1, "ML101", 2, 'got string "two": KempnerForge refuses the whole config'),
    ("float_8gpu.toml", "[distributed]\ntp = 2.5\n", 0, "ML114", 2, "silently truncates it to 2"),  # KF runs it
    ("bool_8gpu.toml", "[parallelism]\ntensor_parallel_degree = true\n", 1, "ML101", 2, "got bool true"),
    ("list_8gpu.toml", "[distributed]\npp = [2]\n", 1, "ML101", 2, "got array"),
    ("negative_8gpu.toml", "[distributed]\nep = -2\n", 1, "ML102", 2, "ep = -2: a degree must be at least 1"),
    ("zero_8gpu.toml", "[parallelism]\npipeline_parallel_degree = 0\n", 1, "ML102", 2, "pp = 0"),
    ("huge_8gpu.toml", "[distributed]\ndp_shard = 99999999999999999999999\n", 1, "ML102", 2, "larger than any cluster"),
    ("notatable_8gpu.toml", "distributed = 4\n", 1, "ML101", 1, "distributed must be a table, got int"),
]


@pytest.mark.parametrize("name, content, exit_code, code, line, fragment", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_reported_and_the_other_files_still_checked(write, tmp_path, name, content, exit_code, code,
                                                                 line, fragment):
    path = tmp_path / name if content is None else write(content, name)
    before, after = write(GOOD_KF, "before.toml"), write(GOOD_KF, "after.toml")
    got, out = run_cli("check", str(before), str(path), str(after))
    assert got == exit_code, out
    assert "Traceback" not in out
    assert f"{path}:{line}:" in out and code in out and fragment in out, out
    _, doc = run_cli_json("check", str(before), str(path), str(after))
    assert [f["status"] for f in doc["files"]][0::2] == ["checked", "checked"]


def test_empty_file_just_gets_the_skip_note(write):
    code, out = run_cli("check", str(write("", "empty.toml")))
    assert code == 0 and "empty.toml: skipped:" in out


def test_nothing_the_user_owns_is_modified(tmp_path):
    import shutil

    shutil.copytree(FIXTURES, tmp_path / "fixtures")
    before = {p: p.read_bytes() for p in (tmp_path / "fixtures").rglob("*") if p.is_file()}
    run_cli("check", str(tmp_path / "fixtures"))
    run_cli("explain", str(tmp_path / "fixtures" / "kempnerforge"))
    after = {p: p.read_bytes() for p in (tmp_path / "fixtures").rglob("*") if p.is_file()}
    assert before == after


# ---------------------------------------------------------------------------- explain and rules

def test_explain_prints_the_resolved_mesh():
    code, out = run_cli("explain", str(FIXTURES / "kempnerforge" / "70b_32gpu_tp4_pp4.toml"))
    assert code == 0
    assert 'init_device_mesh("cuda", (4, 2, 4), mesh_dim_names=("pp", "dp_shard", "tp"))' in out
    assert re.search(r"tp\s+device\s+4\s+1\s+8\s+inside one node", out)
    assert re.search(r"pp\s+device\s+4\s+8\s+8\s+CROSSES nodes", out)
    assert "size-1 dims dropped from the mesh: dp_replicate, ep" in out


def test_explain_shows_declared_vs_resolved_and_outside_ranks():
    _, out = run_cli("explain", str(FIXTURES / "kempnerforge" / "cp2_8gpu.toml"), "--world-size", "8")
    assert "dp_shard = -1 resolves to 8 / 4 = 2" in out
    assert "ranks 4-7 are OUTSIDE the mesh" in out


def test_explain_torchtitan_json_lists_every_named_submesh():
    code, doc = run_cli_json("explain", str(FIXTURES / "torchtitan" / "qwen3_moe_8gpu_pp2_ep2.toml"),
                             "--world-size", "8")
    calls = [s["call"] for s in doc["files"][0]["explain"]["submeshes"]]
    assert calls == [f'get_optional_mesh("{n}")' for n in
                     ("pp", "batch", "loss", "dp_replicate", "fsdp", "cp", "tp", "ep", "efsdp", "etp")]
    assert doc["files"][0]["meshes"]["sparse"]["sizes"] == [2, 1, 2, 2, 1]


def test_rules_lists_every_rule_and_the_input_errors():
    code, out = run_cli("rules")
    assert code == 0
    for rule_file in (ROOT / "rules").glob("*.toml"):
        assert rule_file.name.split("-")[0] in out
    assert "ML003  invalid-toml" in out
    code, out = run_cli("rules", "--format", "json")
    assert json.loads(out)["version"] == 1


def test_python_dash_m_works_like_the_command():
    proc = run_subprocess("check", str(FIXTURES / "kempnerforge" / "dense_8gpu_tp2_pp2.toml"))
    assert proc.returncode == 0, proc.stderr
    assert "1 file checked: no findings." in proc.stdout
    proc = run_subprocess("--version")
    assert proc.stdout.startswith("meshlint, version ")


def test_committed_rule_docs_are_up_to_date():
    code, out = run_cli("rules", "--format", "markdown")
    committed = (ROOT / "docs" / "rules.md").read_text()
    assert out == committed, "docs/rules.md is stale: run `meshlint rules --format markdown > docs/rules.md`"


TT_KEYS = {"tp": "tensor_parallel_degree", "pp": "pipeline_parallel_degree", "ep": "expert_parallel_degree",
           "cp": "context_parallel_degree", "dp_replicate": "data_parallel_replicate_degree",
           "dp_shard": "data_parallel_shard_degree"}


@pytest.mark.parametrize("value", [0, -2])
@pytest.mark.parametrize("degree", sorted(TT_KEYS))
@pytest.mark.parametrize("dialect", ["kempnerforge", "torchtitan", "native"])
def test_invalid_degrees_never_break_a_rule(write, dialect, degree, value):
    if dialect == "kempnerforge":
        text = f"# meshlint: world_size=8\n[distributed]\n{degree} = {value}\n"
    elif dialect == "torchtitan":
        text = f"# meshlint: world_size=8\n[parallelism]\n{TT_KEYS[degree]} = {value}\n"
    else:
        text = (f'[mesh]\nworld_size = 8\ndims = [{{ name = "{degree}", size = {value} }}, '
                f'{{ name = "rest", size = -1, role = "dp_shard" }}]\n')
    _, doc = run_cli_json("check", str(write(text)))
    messages = [f["message"] for f in doc["files"][0]["findings"]]
    assert not any("could not be evaluated" in m for m in messages), messages
    assert any(f["rule"] in ("ML101", "ML102") for f in doc["files"][0]["findings"]), messages


def test_cyclic_placement_gets_advice_that_can_work():
    code, out = run_cli("check", str(FIXTURES / "kempnerforge" / "70b_32gpu_tp4.toml"), "--placement", "cyclic")
    assert code == 1 and "ML202" in out
    assert "launch with block placement" in out and "choose tp = a divisor" not in out


def test_overriding_the_cluster_profile_is_not_a_disagreement(tmp_path):
    (tmp_path / "meshlint.toml").write_text("gpus_per_node = 4\n")
    cfg = tmp_path / "a_16gpu.toml"
    cfg.write_text("[train]\ngrad_accum_steps = 4\n[distributed]\ntp = 8\n")
    _, doc = run_cli_json("check", str(cfg), "--gpus-per-node", "8")
    f = doc["files"][0]
    assert f["gpus_per_node"] == 8 and "ML106" not in [x["rule"] for x in f["findings"]]
