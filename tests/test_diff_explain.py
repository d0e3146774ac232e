"""meshlint diff, check --diff-base and explain --rank: what an edit does to the ranks."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import FIXTURES, run_cli, run_cli_json

KF = FIXTURES / "kempnerforge"


def git(repo, *args):
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path):
    """A git repository with one committed config, tp = 4 on 8 nodes × 4."""
    git(tmp_path, "init", "-q")
    cfg = tmp_path / "configs" / "70b_32gpu.toml"
    cfg.parent.mkdir()
    cfg.write_text("# 8 nodes x 4 GPUs\n[model]\nn_heads = 64\n\n[distributed]\ntp = 4\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "tp 4")
    return tmp_path, cfg


def test_diff_two_files_reports_dims_groups_and_resharding():
    code, out = run_cli("diff", str(KF / "70b_32gpu_tp4.toml"), str(KF / "70b_32gpu_tp4_pp4.toml"), "--rank", "5")
    assert code == 1
    assert 'mesh device ("dp_shard", "tp") (8, 4) → ("pp", "dp_shard", "tp") (4, 2, 4)' in out
    assert "added     pp: - → 4" in out and "resized   dp_shard: 8 → 2" in out
    assert "rank 5: (dp_shard=1, tp=1) → (pp=0, dp_shard=1, tp=1)" in out
    assert "dp_shard {1, 5, 9, 13, 17, 21, 25, 29} → {1, 5}" in out
    assert "tp {4-7} → {4-7}" in out
    assert "sharding layout changed (pp 1 → 4, dp_shard 8 → 2)" in out


def test_diff_json_contract():
    code, doc = run_cli_json("diff", str(KF / "70b_32gpu_tp4.toml"), str(KF / "70b_32gpu_tp4_pp4.toml"))
    assert code == 1 and doc["version"] == 1 and doc["same"] is False
    assert doc["old"]["mesh"]["sizes"] == [8, 4] and doc["new"]["mesh"]["sizes"] == [4, 2, 4]
    kinds = {(c["kind"], c["dim"]) for c in doc["changes"]}
    assert {("added", "pp"), ("resized", "dp_shard"), ("placement", "dp_shard")} <= kinds
    assert [r["rank"] for r in doc["ranks"]] == [0, 17, 31]
    assert doc["ranks"][0]["new"]["groups"]["pp"]["members"] == [0, 8, 16, 24]
    assert {c["kind"] for c in doc["callouts"]} == {"resharding"}


def test_same_mesh_exits_0(write):
    a = write("[model]\ndim = 1024\n[distributed]\ntp = 4\n", "a_32gpu.toml")
    b = write("[model]\ndim = 2048\n[distributed]\ndp_shard = -1\ntp = 4\n", "b_32gpu.toml")
    code, out = run_cli("diff", str(a), str(b))
    assert code == 0 and "same mesh" in out


def test_tp_crossing_nodes_and_world_change_are_called_out(write):
    a = write("# 8 nodes x 4 GPUs\n[distributed]\ntp = 4\n", "a_32gpu.toml")
    b = write("# 16 nodes x 4 GPUs\n[distributed]\ntp = 8\n", "b_64gpu.toml")
    code, doc = run_cli_json("diff", str(a), str(b))
    assert {"kind": "world", "dim": None, "old": 32, "new": 64} in doc["changes"]
    messages = " ".join(c["message"] for c in doc["callouts"])
    assert "tp groups now cross node boundaries" in messages and "needs 64 ranks instead of 32" in messages


def test_ranks_falling_outside_the_mesh_are_called_out(write):
    a = write("[distributed]\ntp = 2\n", "a_8gpu.toml")
    b = write("[distributed]\ntp = 2\ncp = 2\n", "b_8gpu.toml")
    _, out = run_cli("diff", str(a), str(b), "--rank", "6")
    assert "ranks 4-7 (4 of 8) fall outside the mesh" in out
    assert "rank 6: (dp_shard=3, tp=0) → OUTSIDE the mesh" in out


def test_torchtitan_diff_covers_the_sparse_mesh(write):
    a = write("[parallelism]\ntensor_parallel_degree = 2\nexpert_parallel_degree = 2\n", "a_8gpu.toml")
    b = write("[parallelism]\ntensor_parallel_degree = 2\nexpert_parallel_degree = 4\n", "b_8gpu.toml")
    _, doc = run_cli_json("diff", str(a), str(b))
    assert {"kind": "resized", "mesh": "sparse", "dim": "ep", "old": 2, "new": 4} in doc["changes"]
    assert {"kind": "resized", "mesh": "sparse", "dim": "efsdp", "old": 4, "new": 2} in doc["changes"]


def test_diff_against_a_git_revision(repo):
    root, cfg = repo
    cfg.write_text("# 8 nodes x 4 GPUs\n[model]\nn_heads = 64\n\n[distributed]\ntp = 8\n")
    code, out = run_cli("diff", "--rev", "HEAD", str(cfg))
    assert code == 1
    assert f"--- {cfg}@HEAD" in out and 'mesh device ("dp_shard", "tp") (8, 4) → ("dp_shard", "tp") (4, 8)' in out
    assert "tp groups now cross node boundaries" in out


@pytest.mark.parametrize("args, message", [
    (["--rev", "HEAD"], "does not exist at HEAD"),
    (["--rev", "no-such-rev"], "cannot read"),
])
def test_diff_rev_errors_exit_2(repo, args, message):
    root, cfg = repo
    new = root / "configs" / "new_8gpu.toml"
    new.write_text("[distributed]\n")
    code, out = run_cli("diff", *args, str(new if "HEAD" == args[1] else cfg))
    assert code == 2 and message in out


def test_diff_usage(write):
    assert run_cli("diff", str(write("[distributed]\n")))[0] == 2
    assert run_cli("diff", "--rev", "HEAD", "a.toml", "b.toml")[0] == 2


def test_check_diff_base_carries_the_diff(repo):
    root, cfg = repo
    other = root / "configs" / "same_8gpu.toml"
    other.write_text("[distributed]\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "second")
    cfg.write_text("# 8 nodes x 4 GPUs\n[model]\nn_heads = 64\n[train]\ngrad_accum_steps = 4\n\n[distributed]\ntp = 4\npp = 2\n")
    code, out = run_cli("check", str(cfg), str(other), "--diff-base", "HEAD")
    assert code == 0
    assert f"{cfg}: resolved mesh changed since HEAD:" in out and "added     pp: - → 2" in out
    _, doc = run_cli_json("check", str(cfg), str(other), "--diff-base", "HEAD")
    assert doc["files"][0]["diff"]["base"] == "HEAD"
    assert ("added", "pp") in {(c["kind"], c["dim"]) for c in doc["files"][0]["diff"]["changes"]}
    assert doc["files"][1]["diff"] == {"base": "HEAD", "note": "unchanged since HEAD"}


# ---------------------------------------------------------------------------- explain --rank

def test_explain_rank_json():
    code, doc = run_cli_json("explain", str(KF / "70b_32gpu_tp4_pp4.toml"), "--rank", "13")
    info = doc["files"][0]["explain"]["ranks"][0]
    assert info["rank"] == 13 and info["coords"] == {"pp": 1, "dp_shard": 1, "tp": 1}
    assert info["groups"] == {"pp": [5, 13, 21, 29], "dp_shard": [9, 13], "tp": [12, 13, 14, 15]}
    assert info["placement"] == {"node": 3, "local_rank": 1}


def test_explain_reverse_coords_to_rank():
    code, doc = run_cli_json("explain", str(KF / "70b_32gpu_tp4_pp4.toml"), "--coords", "pp=3,dp_shard=1,tp=2")
    assert doc["files"][0]["explain"]["reverse"]["rank"] == 3 * 8 + 4 + 2
    code, out = run_cli("explain", str(KF / "70b_32gpu_tp4_pp4.toml"), "--coords", "pp=9,tp=1")
    assert code == 2 and "also needs dp_shard" in out
    code, out = run_cli("explain", str(KF / "70b_32gpu_tp4_pp4.toml"), "--coords", "pp1")
    assert code == 2 and "is not dim=index" in out


def test_explain_torchtitan_rank_across_meshes():
    _, doc = run_cli_json("explain", str(FIXTURES / "torchtitan" / "qwen3_moe_8gpu_pp2_ep2.toml"),
                          "--world-size", "8", "--rank", "5")
    info = doc["files"][0]["explain"]["ranks"][0]
    assert info["meshes"]["sparse"] == {"pp": 1, "dp_replicate": 0, "efsdp": 0, "ep": 1, "etp": 0}
    assert info["groups"]["loss"] == [5, 7] and info["groups"]["ep"] == [4, 5]


def test_explain_a_million_ranks_is_arithmetic(write):
    path = write("[distributed]\ntp = 8\npp = 4\n")
    code, doc = run_cli_json("explain", str(path), "--world-size", "1048576", "--gpus-per-node", "8",
                             "--rank", "1048575", "--coords", "pp=3,dp_shard=32767,tp=7")
    info = doc["files"][0]["explain"]["ranks"][0]
    assert info["coords"] == {"pp": 3, "dp_shard": 32767, "tp": 7}
    assert info["groups"]["tp"] == list(range(1048568, 1048576))
    assert len(info["groups"]["dp_shard"]) == 32768 and info["groups"]["dp_shard"][0] == 786439
    assert doc["files"][0]["explain"]["reverse"]["rank"] == 1048575


def test_explain_grid_for_small_worlds_only(write):
    _, out = run_cli("explain", str(KF / "70b_32gpu_tp4_pp4.toml"))
    assert "grid: node × local rank -> (pp, dp_shard, tp)" in out and "node 7    3,1,0 3,1,1 3,1,2 3,1,3" in out
    _, out = run_cli("explain", str(write("[distributed]\ntp = 8\n")), "--world-size", "1024", "--gpus-per-node", "8")
    assert "grid:" not in out


def test_explain_cyclic_placement(write):
    path = write("[distributed]\ntp = 4\n")
    _, out = run_cli("explain", str(path), "--world-size", "8", "--gpus-per-node", "4", "--placement", "cyclic")
    assert "CROSSES nodes" in out
    _, doc = run_cli_json("explain", str(path), "--world-size", "8", "--gpus-per-node", "4", "--placement", "cyclic",
                          "--rank", "3")
    assert doc["files"][0]["explain"]["ranks"][0]["placement"] == {"node": 1, "local_rank": 1}


def test_explain_rank_outside_the_world(write):
    code, out = run_cli("explain", str(KF / "70b_32gpu_tp4.toml"), "--rank", "32")
    assert code == 2 and "rank 32 is outside the world of 32 ranks" in out
