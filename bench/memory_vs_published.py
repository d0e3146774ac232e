"""The whole-peak memory model (meshlint.mesh.memory) against the peaks the frameworks published.

KempnerForge benchmarks/mfu_scaling (mfu_bench.sh's launch lines on configs/train/debug.toml, @ 5666d0d):
"Mem/GPU" is torch.cuda.max_memory_allocated / 1024**3 (kempnerforge/metrics/memory.py:33), so it is held
against the model's allocated bytes. torchtitan benchmarks/llama3_h100_202412_torchtitan.md (torchtitan 9dec370,
each table's stated layout, batch and AC mode, with that commit's llama3 TOML defaults): torchtitan logs the
allocator's max reserved bytes, held against allocated + the allocator's reserve. Runs whose loss torchtitan compiled
(COMPILED_ROWS): a published H200 benchmark and a user's two measurements (pytorch/torchtitan#1789). Prints one row per run:
measured, predicted, error, the phase of the step the peak falls in and each term's GiB alive then; then the DeepSeek-V3 671B recipe's verdict.

    PYTHONPATH=. python bench/memory_vs_published.py [--json]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GIB = 2 ** 30
# mfu_bench.sh M7B / M13B / M70B
KF_MODELS = {
    "7B": "dim = 4096\nn_layers = 32\nn_heads = 32\nn_kv_heads = 8\nvocab_size = 128256\nffn_dim_multiplier = 1.3\n",
    "13B": "dim = 5120\nn_layers = 40\nn_heads = 40\nn_kv_heads = 8\nvocab_size = 128256\nffn_dim_multiplier = 1.3\n",
    "70B": "dim = 8192\nn_layers = 80\nn_heads = 64\nn_kv_heads = 8\nvocab_size = 128256\nffn_hidden_dim = 28672\n",
}
# mfu_scaling.md "Full Results Table": (row, model, GPUs, dp_shard, tp, batch_size, grad_accum_steps, compile, GiB)
KF_ROWS = [
    (1, "7B", 1, 1, 1, 2, 4, True, 80.7), (2, "7B", 2, 2, 1, 2, 4, True, 62.4),
    (3, "7B", 2, 1, 2, 4, 2, True, 57.8), (4, "7B", 4, 4, 1, 4, 2, True, 61.1),
    (5, "7B", 4, 1, 4, 4, 2, True, 39.4), (6, "7B", 4, 2, 2, 4, 2, True, 45.9),
    (7, "7B", 8, 2, 4, 4, 2, True, 32.7), (8, "13B", 8, 8, 1, 4, 4, False, 88.5),
    (9, "13B", 8, 2, 4, 4, 4, True, 45.1), (10, "7B", 16, 4, 4, 4, 2, True, 29.4),
    (11, "13B", 16, 4, 4, 4, 4, True, 39.2), (12, "7B", 32, 8, 4, 4, 2, True, 27.6),
    (13, "13B", 32, 8, 4, 4, 4, True, 36.3), (14, "70B", 32, 8, 4, 2, 4, True, 93.2),
]
# llama3_h100_202412_torchtitan.md: (table, label, flavor, GPUs, dp_shard, cp, tp, pp, schedule, local batch,
# sequences per pp microbatch (torchtitan 9dec370 cut the local batch into pp microbatches), seq_len, AC mode,
# compile/Float8 on, measured GiB). Tables 1 and 3: the rows without torch.compile or Float8.
TT_ROWS = [
    (1, "FSDP 8", "8B", 8, 8, 1, 1, 1, "1F1B", 2, 1, 8192, "selective", False, 82.4),
    (3, "FSDP 128", "8B", 128, 128, 1, 1, 1, "1F1B", 2, 1, 8192, "selective", False, 67.0),
    (2, "FSDP 8, CP 1", "8B", 8, 8, 1, 1, 1, "1F1B", 1, 1, 32768, "full", True, 83.9),
    (2, "FSDP 4, CP 2", "8B", 8, 4, 2, 1, 1, "1F1B", 1, 1, 65536, "full", True, 84.2),
    (2, "FSDP 2, CP 4", "8B", 8, 2, 4, 1, 1, "1F1B", 1, 1, 131072, "full", True, 84.0),
    (2, "FSDP 1, CP 8", "8B", 8, 1, 8, 1, 1, "1F1B", 1, 1, 262144, "full", True, 84.5),
    (4, "FSDP 32, TP 8", "70B", 256, 32, 1, 8, 1, "1F1B", 16, 1, 8192, "full", True, 71.9),
    (5, "1F1B", "405B", 512, 8, 1, 8, 8, "1F1B", 32, 4, 8192, "full", True, 82.5),
    (5, "Interleaved 1F1B", "405B", 512, 8, 1, 8, 8, "Interleaved1F1B", 32, 4, 8192, "full", True, 72.7),
    (6, "FSDP 8, CP 1", "405B", 512, 8, 1, 8, 8, "1F1B", 8, 1, 32768, "full", True, 75.3),
    (6, "FSDP 4, CP 2", "405B", 512, 4, 2, 8, 8, "1F1B", 8, 1, 65536, "full", True, 75.9),
    (6, "FSDP 2, CP 4", "405B", 512, 2, 4, 8, 8, "1F1B", 8, 1, 131072, "full", True, 77.1),
    (6, "FSDP 1, CP 8", "405B", 512, 1, 8, 8, 8, "1F1B", 8, 1, 262144, "full", True, 84.9),
]
# Runs whose loss torchtitan compiled (compile.enable with "loss" in compile.components, torchtitan after
# bbb1b616e, 2025-04): (label, where measured, GPUs, GPUs per node, the TOML, degrees, measured max reserved GiB).
# llama3-8b_h200_202506_trainy-whitefiber.md (torchtitan e7c0cae: --training.compile compiled model and loss, Float8
# with its FSDP all-gather, local batch 2, llama3_8b.toml's seq 8192 and selective op AC); pytorch/torchtitan#1789,
# a user's report on 8 H100 with v0.2's deepseek_v3_16b.toml (compile.components = ["loss"]): local batch 4 logged
# "memory: 73.32GiB(92.70%)", local batch 8 with ep 1 "runs ... at almost 96% memory usage" (0.96 x 79.1 GiB).
TRAINY = ("[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"quantize.linear.float8\"]\n"
          "[training]\nlocal_batch_size = 2\nseq_len = 8192\n[activation_checkpoint]\nmode = \"selective\"\n"
          "selective_ac_option = \"op\"\n[compile]\nenable = true\n[quantize.linear.float8]\n"
          "enable_fsdp_float8_all_gather = true\nprecompute_float8_dynamic_scale_for_fsdp = true\n"
          "[parallelism]\ndata_parallel_shard_degree = -1\n")
DSV3_16B = Path("/work/shared/frameworks/torchtitan-v0.2-9810191bb-parent/torchtitan/models/deepseek_v3/"
                "train_configs/deepseek_v3_16b.toml")
COMPILED_ROWS = [
    ("Trainy H200 8B FSDP 32 (compile, Float8)", 32, 8, lambda: TRAINY, {"dp_shard": 32}, 47.96),
    ("Trainy H200 8B FSDP 64 (compile, Float8)", 64, 8, lambda: TRAINY, {"dp_shard": 64}, 46.97),
    ("#1789 DSv3 16B lbs 4 ep 8 (loss compiled)", 8, 8, lambda: DSV3_16B.read_text(), {"dp_shard": 8, "ep": 8}, 73.32),
    ("#1789 DSv3 16B lbs 8 ep 1 (loss compiled)", 8, 8,
     lambda: DSV3_16B.read_text().replace("local_batch_size = 4", "local_batch_size = 8")
     .replace("expert_parallel_degree = 8", "expert_parallel_degree = 1"), {"dp_shard": 8}, 0.96 * 79.1),
]
SHOWN = ("params", "grads", "optimizer", "unsharded_grads", "fsdp_unsharded", "reduce_buffers", "activations",
         "recompute", "logits_loss", "allocator_reserve")


def peak_of(text: str, name: str, world: int, gpn: int, degrees: dict, tmp: Path):
    from meshlint.engine.check import analyse
    from meshlint.cli.settings import CliSettings, Planner
    from meshlint.estimate import cost

    path = tmp / name
    path.write_text(text)
    planner = Planner(CliSettings(world_size=world, gpus_per_node=gpn, isolated=True))
    options = planner.options_for(str(path))
    report = analyse(str(path), options)
    profile = cost.cluster({}, gpn)
    model = cost.Model(cost.workload(report, options, profile), profile, world, gpn, "block", 80.0)
    return model.memory_peak(degrees)


def kf_config(size, ds, tp, batch, accum, compile_) -> str:
    # debug.toml with mfu_bench.sh's $M, $TRAIN and the row's flags (the flags win over the file)
    return (f"[model]\n{KF_MODELS[size]}max_seq_len = 4096\nrope_theta = 500000.0\n"
            f"[train]\nbatch_size = {batch}\nseq_len = 4096\nmax_steps = 20\ngrad_accum_steps = {accum}\n"
            f"grad_clip_norm = 1.0\nseed = 42\ncompile_model = {str(compile_).lower()}\n"
            f"activation_checkpointing = \"full\"\n[optimizer]\nname = \"adamw\"\nlr = 3e-4\nfused = true\n"
            f"[distributed]\ndp_shard = {ds}\ntp = {tp}\n")


def tt_config(flavor, ds, cp, tp, pp, schedule, local, micro, seq, ac) -> str:
    option = "selective_ac_option = \"op\"\n" if ac == "selective" else ""
    return (f"[model]\nname = \"llama3\"\nflavor = \"{flavor}\"\n[training]\nlocal_batch_size = {local}\n"
            f"seq_len = {seq}\n[activation_checkpoint]\nmode = \"{ac}\"\n{option}[parallelism]\n"
            f"data_parallel_shard_degree = {ds}\ncontext_parallel_degree = {cp}\ntensor_parallel_degree = {tp}\n"
            f"pipeline_parallel_degree = {pp}\npipeline_parallel_schedule = \"{schedule}\"\n"
            f"pipeline_parallel_microbatch_size = {micro}\n")


def run() -> dict:
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for row, size, gpus, ds, tp, batch, accum, compile_, measured in KF_ROWS:
            peak = peak_of(kf_config(size, ds, tp, batch, accum, compile_), f"kf{row}.toml", gpus, min(4, gpus),
                           {"dp_shard": ds, "tp": tp}, tmp)
            predicted = peak.peak.allocated / GIB      # max_memory_allocated
            rows.append(_row(f"KF {row:>2} {size} {gpus} GPUs dp_shard={ds} tp={tp}", measured, predicted, peak,
                             reserve=False))
        for (table, label, flavor, gpus, ds, cp, tp, pp, schedule, local, micro, seq, ac, fast,
             measured) in TT_ROWS:
            text = tt_config(flavor, ds, cp, tp, pp, schedule, local, micro, seq, ac)
            peak = peak_of(text, f"tt{table}_{ds}_{cp}_{schedule}.toml", gpus, 8,
                           {"dp_shard": ds, "cp": cp, "tp": tp, "pp": pp}, tmp)
            predicted = (peak.peak.allocated + peak.peak.terms["allocator_reserve"]) / GIB  # max reserved
            rows.append(_row(f"TT T{table} {flavor} {label}" + (" (compile, Float8)" if fast else ""), measured,
                             predicted, peak, reserve=True))
        for label, gpus, gpn, text, degrees, measured in COMPILED_ROWS:
            if "DSv3" in label and not DSV3_16B.exists():
                continue
            peak = peak_of(text(), f"tt_compiled_{len(rows)}.toml", gpus, gpn, degrees, tmp)
            predicted = (peak.peak.allocated + peak.peak.terms["allocator_reserve"]) / GIB  # max reserved
            rows.append(_row(label, round(measured, 2), predicted, peak, reserve=True))
        deepseek = _deepseek(tmp)
    return {"rows": rows, "deepseek_v3_671b": deepseek}


def _row(name, measured, predicted, peak, reserve) -> dict:
    terms = {k: round(peak.peak.terms[k] / GIB, 1) for k in SHOWN if reserve or k != "allocator_reserve"}
    return {"run": name, "measured_gib": measured, "predicted_gib": round(predicted, 1),
            "error_pct": round((predicted - measured) / measured * 100, 1), "stage": peak.peak.index,
            "phase": peak.peak.phase,
            "terms_gib": terms}


def _deepseek(tmp: Path) -> dict:
    """torchtitan v0.2's shipped deepseek_v3_671b.toml (no pp), at 64 nodes of 8 H100 with ep = 8."""
    src = Path("/work/shared/frameworks/torchtitan-v0.2-9810191bb-parent/torchtitan/models/deepseek_v3/"
               "train_configs/deepseek_v3_671b.toml")
    if not src.exists():
        return {"skipped": f"{src} is not here"}
    text = src.read_text().replace("expert_parallel_degree = 1", "expert_parallel_degree = 8")
    world = 512
    peak = peak_of(text, "ds671.toml", world, 8, {"dp_shard": world, "ep": 8}, tmp)
    return {"world": world, "layout": "dp_shard=512 ep=8", "peak_gib": round(peak.peak_gib, 1),
            "activations_gib": round(peak.peak.terms["activations"] / GIB, 1), "fits_80gb": peak.peak_gib <= 74.5}


def main() -> None:
    out = run()
    if "--json" in sys.argv:
        print(json.dumps(out, indent=1))
        return
    head = f"{'run':58} {'measured':>8} {'predicted':>9} {'error':>7}  terms (GiB)"
    print(head)
    for r in out["rows"]:
        terms = " ".join(f"{k}={v}" for k, v in r["terms_gib"].items() if v)
        print(f"{r['run']:58} {r['measured_gib']:8.1f} {r['predicted_gib']:9.1f} {r['error_pct']:+6.1f}%  {terms}")
    errs = [abs(r["error_pct"]) for r in out["rows"]]
    print(f"\nworst |error| {max(errs):.1f} %, mean {sum(errs) / len(errs):.1f} %, "
          f"within 20 %: {sum(e <= 20 for e in errs)}/{len(errs)}")
    print("DeepSeek-V3 671B (torchtitan v0.2 recipe):", out["deepseek_v3_671b"])


if __name__ == "__main__":
    main()
