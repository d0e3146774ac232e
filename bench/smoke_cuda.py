#!/usr/bin/env python3
"""``meshlint smoke --device cuda`` on the GPUs of this host, one run per framework (a script, not a test).

    python bench/smoke_cuda.py [--out DIR] [--device cuda|cpu] [-k NAME]

The CUDA path (nccl, one GPU per rank, spawned ranks, CUDA tensors in every collective, CUDA peak memory)
cannot run in CI, which has no GPU; this script is what a GPU host runs. Each framework's config is run at
the world this host holds (``torch.cuda.device_count()``): KempnerForge, torchtitan 0.2.x (TOML) and 0.3.0
(registry, when ``.frameworks/torchtitan-0.3.0`` is here), Megatron-LM (a launch line, with Megatron-Core's own
``initialize_model_parallel`` when ``.frameworks/megatron-core-0.16.1`` is here), Hugging Face Accelerate (a
config file), and, on two GPUs or more, a sabotaged step that must be caught (exit 1). Prints one Markdown row
per run (exit code, ok, device and backend the report names, the step's largest relative error against the
unsharded model, peak memory, wall time); ``--out DIR`` also writes each run's JSON report and stderr there.
``--device cpu`` runs the same list on one CPU process (to try the script without a GPU).
Exit 1 when any run did not end as expected.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from bench_smoke import run_smoke  # this folder is on the path when a script in it runs

ROOT = Path(__file__).resolve().parents[1]
MEGATRON = ROOT / ".frameworks" / "megatron-core-0.16.1"
V030 = ROOT / ".frameworks" / "torchtitan-0.3.0"


def _world(device: str) -> int:
    if device == "cpu":
        return 1
    import torch

    return torch.cuda.device_count()


def _cases(tmp: Path, world: int) -> list:
    """(name, smoke arguments, extra environment, expected ok)."""
    kf = tmp / "kf_dense.toml"
    kf.write_text("[model]\ndim = 512\nn_layers = 4\nn_heads = 8\nn_kv_heads = 4\nvocab_size = 32000\n"
                  "max_seq_len = 1024\n[train]\nbatch_size = 2\nseq_len = 1024\n[distributed]\ndp_shard = -1\n")
    tt = tmp / "tt_fsdp.toml"
    tt.write_text('[model]\nname = "llama3"\nflavor = "debugmodel"\n[training]\nlocal_batch_size = 2\n'
                  'seq_len = 1024\n[parallelism]\ndata_parallel_shard_degree = -1\n')
    mlm = tmp / "pretrain_gpt.sh"
    mlm.write_text(f"torchrun --nproc-per-node {world} pretrain_gpt.py --num-layers 4 --hidden-size 512 "
                   "--num-attention-heads 8 --micro-batch-size 1 --global-batch-size 8 --seq-length 1024 "
                   "--max-position-embeddings 1024 --bf16\n")
    acc = tmp / "accelerate_fsdp.yaml"
    acc.write_text(f"compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_machines: 1\n"
                   f"num_processes: {world}\nmixed_precision: bf16\nfsdp_config:\n  fsdp_version: 2\n"
                   "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  fsdp_reshard_after_forward: true\n")
    w = ["--world-size", str(world)]
    rows = [
        ("KempnerForge dense FSDP", [str(kf), *w], {}, True),
        ("torchtitan 0.2.x FSDP", [str(tt), *w], {}, True),
        ("Accelerate FSDP2 config", [str(acc), *w], {}, True),
    ]
    if world > 1:  # one rank reads the only shard there is: the sabotage needs two
        rows.append(("KempnerForge dense, sabotage=data (must fail)", [str(kf), *w],
                     {"MESHLINT_SMOKE_SABOTAGE": "data"}, False))
    if V030.is_dir():
        rows.append(("torchtitan 0.3.0 llama3_debugmodel",
                     [f"{V030}/torchtitan/models/llama3/config_registry.py::llama3_debugmodel", *w], {}, True))
    megatron_env = {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), str(MEGATRON), os.environ.get("PYTHONPATH"))
                                                  if p)} if MEGATRON.is_dir() else {}
    rows.append(("Megatron-LM pretrain_gpt.py" + (" (Megatron-Core's own groups)" if megatron_env else ""),
                 [str(mlm)], megatron_env, True))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", type=Path, help="write each run's JSON report and stderr here")
    parser.add_argument("-k", dest="pattern", help="only the runs whose name contains this")
    args = parser.parse_args()
    world = _world(args.device)
    if world < 1:
        print("no CUDA device here: run with --device cpu to try the script", file=sys.stderr)
        return 2
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    bad = 0
    print(f"world {world} on {args.device}")
    print("| run | exit | ok | device | backend | step | max rel. error | peak MB | seconds | as expected |")
    print("| --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory(prefix="mlb-cuda-") as tmp:
        for i, (name, smoke_args, env, expected) in enumerate(_cases(Path(tmp), world)):
            if args.pattern and args.pattern.lower() not in name.lower():
                continue
            proc, seconds, doc = run_smoke([*smoke_args, "--device", args.device, "-q", "--timeout", "240"], env,
                                           tmp, 600)
            if args.out:
                (args.out / f"run{i:02d}.json").write_text(proc.stdout)
                (args.out / f"run{i:02d}.stderr").write_text(proc.stderr)
            if doc is None:
                bad += 1
                print(f"| {name} | {proc.returncode} | no report | | | | | | {seconds:.1f} | NO: "
                      f"{proc.stderr.strip()[-300:]!r} |", flush=True)
                continue
            step = doc.get("step") or {}
            good = doc.get("ok") is expected and proc.returncode == (0 if expected else 1)
            bad += not good
            err = step.get("max_rel_error")
            peak = (step.get("peak_memory_mb") or {}).get("max")
            why = "; ".join(f.get("message", "")[:160] for f in doc.get("failures") or [])
            print(f"| {name} | {proc.returncode} | {doc.get('ok')} | {doc.get('device', '-')} | "
                  f"{doc.get('backend', '-')} | {'ran' if step.get('ran') else step.get('reason', 'not run')[:60]} | "
                  f"{'-' if err is None else f'{err:.1e}'} | {'-' if peak is None else peak} | {seconds:.1f} | "
                  f"{'yes' if good else 'NO'}{(': ' + why) if why and not good else ''} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
