"""smoke with the frameworks' own code: Megatron-Core's initialize_model_parallel builds the groups (issue 24), and
``--memory --fake`` measures torchtitan v0.2's and KempnerForge's own training step at full scale (issue 22).

Real processes on CPU (the fake process group, and one small gloo world), in the heavy slots and with the
process and TMPDIR checks of tests/test_smoke.py. The frameworks come from .frameworks (megatron-core 0.16.1,
torchtitan 0.2.2) and ../shared/frameworks (KempnerForge); a test skips where they are absent. The comparisons that need no torch run in process."""

from __future__ import annotations

import json
import os

import pytest
from conftest import FIXTURES, ROOT

pytest.importorskip("torch")
from test_smoke import _slots_dir, _valid, run, runs  # noqa: E402,F401 - the fixtures, shared

MEGATRON = ROOT / ".frameworks" / "megatron-core-0.16.1"
TORCHTITAN_022 = ROOT / ".frameworks" / "torchtitan-0.2.2"
KEMPNERFORGE = ROOT.parent / "shared" / "frameworks" / "KempnerForge-5666d0d"
SAVED = ROOT / "bench" / "memory_fake_torchtitan.json"
needs_megatron = pytest.mark.skipif(not MEGATRON.is_dir(), reason=f"{MEGATRON} is not here")
needs_torchtitan = pytest.mark.skipif(not TORCHTITAN_022.is_dir(), reason=f"{TORCHTITAN_022} is not here")
needs_kempnerforge = pytest.mark.skipif(not KEMPNERFORGE.is_dir(), reason=f"{KEMPNERFORGE} is not here")


def _megatron_env() -> dict:
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), str(MEGATRON), os.environ.get("PYTHONPATH")) if p)}


def _script(tmp_path, nodes: int, *flags: str) -> str:
    path = tmp_path / "pretrain.sh"
    path.write_text(f"torchrun --nproc-per-node 8 --nnodes {nodes} pretrain_gpt.py --num-layers 16 --hidden-size 1024 "
                    "--num-attention-heads 16 --micro-batch-size 1 --global-batch-size 1024 --seq-length 2048 "
                    "--max-position-embeddings 2048 " + " ".join(flags) + "\n")
    return str(path)


@needs_megatron
def test_megatron_groups_at_full_scale_are_meshlints(run, tmp_path):
    # 4,096 ranks, the pp-moving order, an expert grid (etp 2 · ep 4) unlike the dense one (tp 8): every group of both generators
    script = _script(tmp_path, 512, "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4",
                     "--expert-model-parallel-size 4 --expert-tensor-parallel-size 2 --num-experts 64",
                     "--use-tp-pp-dp-mapping")
    code, doc, _ = run.smoke(script, "--fake", "--rank", "0", "--rank", "1234", env=_megatron_env())
    assert code == 0 and doc["ok"] and doc["world_size"] == 4096 and doc["ranks_checked"] == [0, 1234], doc["failures"]
    rows = {(c["name"], c["axis"]): c for c in doc["checks"]}
    assert {axis for name, axis in rows if name == "world_groups"} == {
        "tp", "cp", "dp", "dp_cp", "pp", "mp", "tp_dp_cp", "tp_dp", "tp_cp", "ep", "etp", "tp_ep", "tp_ep_pp", "edp"}
    assert rows[("members", "edp")]["ranks"] == 2 and all(c["ok"] for c in doc["checks"])
    assert any("Megatron-Core 0.16.1's own initialize_model_parallel" in n for n in doc["notes"])
    assert doc["meshes"]["expert"]["sizes"] == [128, 4, 4, 1, 2]  # (edp, pp, ep, cp, etp): the pp-moving order
    _valid(doc)


@needs_megatron
def test_megatron_groups_on_gloo_ranks_and_a_refusal(runs, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    script = _script(real, 1, "--tensor-model-parallel-size 2 --expert-model-parallel-size 2 --num-experts 4")
    run = runs()
    code, doc, _ = run.smoke(script, "--world-size", "4", "-q", env=_megatron_env())
    assert code == 0 and doc["ok"] and doc["mode"] == "real", doc["failures"]
    names = {c["name"] for c in doc["checks"]}
    assert {"world_groups", "members", "all_gather", "all_reduce"} <= names
    assert doc["step"]["ran"] is False and "Megatron-LM" in doc["step"]["reason"]
    _valid(doc)
    # the pp-moving order with expert dp unlike dp: Megatron-Core itself refuses, and the smoke fails saying so
    script = _script(tmp_path, 1, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2",
                     "--expert-model-parallel-size 2 --num-experts 4 --use-tp-pp-dp-mapping")
    code, doc, _ = runs().smoke(script, "--fake", "--rank", "0", env=_megatron_env())
    assert code == 1 and not doc["ok"]
    assert any("data parallel size of the attention and moe layers" in f["message"] for f in doc["failures"])
    assert any(f["rule"] == "ML962" for f in doc["static_findings"])


def test_a_megatron_group_that_differs_is_a_failure_naming_its_ranks():
    # in process, no torch: what initialize_model_parallel recorded, with two ranks swapped between tp groups
    from meshlint.frameworks.megatron import ranks as mranks
    from meshlint.smoke import megatron
    from meshlint.smoke.progress import Progress

    op = {"op": "megatron", "world": 16, "tp": 2, "pp": 2, "cp": 1, "ep": 2, "etp": 1, "order": mranks.DEFAULT_ORDER,
          "distributed_optimizer_instances": 1}
    plan = {"recipe": [op]}
    dense, expert = megatron.grids(plan)
    created = [(glob.lstrip("_"), g) for grid_name, token, _, glob in mranks.GROUPS
               for g in (dense if grid_name == "dense" else expert).all_groups(token)]
    prog = Progress(None, 0, {})
    megatron.verify_world(plan, {"created": created}, prog)
    assert prog.state["failures"] == [] and len(prog.state["checks"]) == len(mranks.GROUPS)
    tp = [i for i, (desc, _) in enumerate(created) if desc == "TENSOR_MODEL_PARALLEL_GROUP"]
    created[tp[0]], created[tp[1]] = (created[tp[0]][0], [0, 2]), (created[tp[1]][0], [1, 3])
    prog = Progress(None, 0, {})
    megatron.verify_world(plan, {"created": created}, prog)
    [failure] = prog.state["failures"]
    assert failure["axis"] == "tp" and failure["ranks"] == [0, 1, 2, 3]
    assert "TENSOR_MODEL_PARALLEL_GROUP groups differ" in failure["message"] and "[0, 2]" in failure["message"]


def _measured(run, path, text: str, rank: int, *args: str) -> tuple:
    """``smoke PATH --fake --memory --rank RANK ARGS``, passed and valid: (the report, the rank's measurement)."""
    path.write_text(text)
    code, doc, _ = run.smoke(str(path), "--fake", "--memory", "--rank", str(rank), *args)
    assert code == 0 and doc["ok"], doc["failures"]
    [measured] = doc["memory"]["ranks"]
    assert measured["rank"] == rank and measured["ok"] and measured["stage"] == "done"
    _valid(doc)
    return doc, measured


@needs_torchtitan
def test_memory_measures_torchtitans_own_step_beside_the_estimate(run, tmp_path):
    """torchtitan's debug model at tp 2 · fsdp 4 with op-level SAC and loss parallel (the saved sweep's
    debug-tp2-op layout): the peak the bench measured, within 10 % of meshlint's allocated estimate."""
    doc, rank = _measured(run, tmp_path / "tt_8gpu.toml",
                          '[model]\nname = "llama3"\nflavor = "debugmodel"\n[training]\nlocal_batch_size = 8\n'
                          'seq_len = 2048\n[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "op"\n'
                          '[parallelism]\ndata_parallel_shard_degree = 4\ntensor_parallel_degree = 2\n',
                          5, "--torchtitan-root", str(TORCHTITAN_022))
    memory = doc["memory"]
    saved = json.loads(SAVED.read_text())["runs"]["debug-tp2-op"]["result"]
    import torch

    tolerance = 0.0011 if torch.__version__ == json.loads(SAVED.read_text())["torch"] else 0.02 * rank["peak_gib"]
    assert rank["peak_gib"] == pytest.approx(saved["peak_bytes"] / 2 ** 30, abs=tolerance)
    assert rank["peak_phase"] == saved["peak_phase"] and rank["by_category"]["activations"] > 0
    assert abs(rank["estimate_error_pct"]) <= 10 and memory["estimate"]["peak_gib"] > memory["estimate"]["allocated_gib"]
    assert "0.2.2" in memory["framework"] and memory["capacity_gib"] == 80


@needs_kempnerforge
def test_memory_measures_kempnerforges_own_step(run, tmp_path):
    """KempnerForge's own model, TP and FSDP2 with full activation checkpointing, bf16 parameters, two
    microbatches under its no_sync: within 10 % of meshlint's allocated estimate (measured here: -0.8 %)."""
    doc, rank = _measured(run, tmp_path / "kf_8gpu.toml",
                          "[model]\ndim = 512\nn_layers = 4\nn_heads = 8\nn_kv_heads = 4\nvocab_size = 32000\n"
                          "max_seq_len = 2048\n[train]\nbatch_size = 4\nseq_len = 2048\ngrad_accum_steps = 2\n"
                          "activation_checkpointing = \"full\"\n[distributed]\ntp = 2\n",
                          3, "--kempnerforge-root", str(KEMPNERFORGE))
    assert rank["peak_phase"] == "forward_backward"
    assert abs(rank["estimate_error_pct"]) <= 10 and rank["by_category"]["activations"] > 0.5
    assert doc["memory"]["framework"].startswith("KempnerForge") and "adamw" in doc["memory"]["optimizer"]


KF_MOE_TOML = "[model]\ndim = 256\nn_layers = 2\nn_heads = 4\nvocab_size = 1000\nnum_experts = 4\n[distributed]\ntp = 2\n"


@pytest.mark.parametrize("args, code, message", [
    ([str(FIXTURES / "torchtitan" / "qwen3_moe_8gpu_pp2_ep2.toml"), "--fake", "--memory"], 3,
     "does not measure pp 2, ep 2 yet"),
    ([str(FIXTURES / "native" / "hsdp_tp_64gpu.toml"), "--fake", "--memory"], 3,
     "measures torchtitan v0.2.x and KempnerForge TOML configs"),
    (["KF_MOE", "--fake", "--memory"], 3, "does not measure KempnerForge's MoE yet"),
    ([str(FIXTURES / "torchtitan" / "llama3_8b_8gpu_hsdp_tp.toml"), "--memory"], 2, "add --fake"),
    ([str(FIXTURES / "torchtitan" / "llama3_8b_8gpu_hsdp_tp.toml"), "--fake", "--gpu-memory-gib", "40"], 2,
     "add --memory"),
])
def test_memory_refusals(args, code, message, tmp_path):
    # in process: refused after the static check, before torch or the framework is imported
    from click.testing import CliRunner

    from meshlint.cli.commands import main

    if args[0] == "KF_MOE":
        (tmp_path / "kf_moe_8gpu.toml").write_text(KF_MOE_TOML)
        args = [str(tmp_path / "kf_moe_8gpu.toml"), *args[1:]]
    result = CliRunner().invoke(main, ["smoke", *args])
    assert result.exit_code == code and message in result.output, result.output


def test_a_peak_over_the_gpu_or_unmeasured_is_a_failure():
    from meshlint.smoke import memory

    section = {"capacity_gib": 40.0, "ranks": [
        {"rank": 0, "ok": False, "stage": "done", "peak_gib": 52.5, "peak_phase": "loss_backward"},
        {"rank": 3, "ok": False, "stage": "build_mesh", "error": "ValueError: world_size 8 != 6"},
        {"rank": 7, "ok": True, "stage": "done", "peak_gib": 12.0, "peak_phase": "forward"}]}
    over, failed = memory.failures(section)
    assert over["ranks"] == [0] and "52.5 GiB (loss_backward) is over the GPU's 40 GiB" in over["message"]
    assert failed["ranks"] == [3] and "failed at build_mesh: ValueError" in failed["message"]
