"""The whole-peak memory model against torch's fake-tensor memory tracker on KempnerForge's own model code.

For each layout, a child process builds KempnerForge's Transformer (kempnerforge/model/transformer.py @ 5666d0d)
under FakeTensorMode on torch's fake process group (rank 0 of the world), applies KempnerForge's own
``apply_ac`` and ``apply_fsdp2`` with its ``default_mp_policy`` (bf16 params, fp32 reduce), runs two optimizer
steps of ``grad_accum_steps`` microbatches with ``set_requires_gradient_sync`` as ``maybe_no_sync`` does, under
``torch.distributed._tools.mem_tracker.MemTracker`` (FSDPMemTracker refuses several forwards per step), and
reports the tracked peak. The parent prices the same config with meshlint.mesh.memory (allocated bytes: the tracker
sees no allocator reserve or CUDA context). Needs torch and ../shared/frameworks/KempnerForge-5666d0d; a few
seconds to a minute per layout on CPU.

    PYTHONPATH=. python bench/memory_vs_fake.py [--layouts 8:full:2,8:none:2,...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KF = ROOT.parent / "shared" / "frameworks" / "KempnerForge-5666d0d"
MODEL = {"dim": 512, "n_layers": 4, "n_heads": 8, "n_kv_heads": 2, "vocab_size": 8192, "max_seq_len": 1024}
BATCH, SEQ = 2, 1024
DEFAULT = "8:none:2,8:full:2,8:full:1,4:selective:2,2:full:2,1:full:2,1:none:1,1:full:1"

CHILD = r"""
import json, sys
import torch, torch.distributed as dist
import torch.nn.functional as F
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed._tools.mem_tracker import MemTracker
from kempnerforge.model.transformer import Transformer
from kempnerforge.config.model import ModelConfig
from kempnerforge.config.training import ActivationCheckpointing
from kempnerforge.distributed.parallel import apply_ac, apply_fsdp2, default_mp_policy
world, ac, accum, model, batch, seq = json.loads(sys.argv[1])
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp_shard",))
with FakeTensorMode():
    torch.set_default_dtype(torch.bfloat16)   # scripts/train.py: model.to(dtype=param_dtype)
    net = Transformer(ModelConfig(**model))
    torch.set_default_dtype(torch.float32)
    apply_ac(net, ActivationCheckpointing(ac))
    if world > 1:   # scripts/train.py: one GPU has no device mesh, so no FSDP2 (has_dp_mesh)
        apply_fsdp2(net, mesh, mp_policy=default_mp_policy(torch.bfloat16))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=False, fused=False)
    x = torch.randint(0, model["vocab_size"], (batch, seq))
    y = torch.randint(0, model["vocab_size"], (batch, seq))
    tracker = MemTracker()
    tracker.track_external(net, opt)
    with tracker:
        for _step in range(2):
            for mb in range(accum):
                if world > 1:
                    net.set_requires_gradient_sync(mb == accum - 1)   # training/grad.py maybe_no_sync
                logits = net(x)
                # training/loss.py cross_entropy_loss without its data-dependent all-ignored check
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), ignore_index=-100)
                loss.backward()
                tracker.reset_mod_stats()   # module stats only; the peak is kept
            opt.step()
            opt.zero_grad()
    peak = tracker.get_tracker_snapshot("peak")
print("RESULT", json.dumps({str(dev): v["Total"] for dev, v in peak.items()}))
"""


def measured(world: int, ac: str, accum: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(KF)}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([world, ac, accum, MODEL, BATCH, SEQ])],
                          capture_output=True, text=True, env=env, timeout=600)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"the fake run failed:\n{proc.stderr[-3000:]}")
    return max(json.loads(line[7:]).values())


def predicted(world: int, ac: str, accum: int):
    sys.path.insert(0, str(ROOT))
    from meshlint.engine.check import analyse
    from meshlint.cli.settings import CliSettings, Planner
    from meshlint.estimate import cost

    text = "[model]\n" + "".join(f"{k} = {v}\n" for k, v in MODEL.items()) + (
        f"[train]\nbatch_size = {BATCH}\nseq_len = {SEQ}\ngrad_accum_steps = {accum}\n"
        f"activation_checkpointing = \"{ac}\"\n[distributed]\ndp_shard = {world}\n")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.toml"
        path.write_text(text)
        options = Planner(CliSettings(world_size=world, gpus_per_node=8, isolated=True)).options_for(str(path))
        report = analyse(str(path), options)
    profile = cost.cluster({}, 8)
    model = cost.Model(cost.workload(report, options, profile), profile, world, 8, "block", 80)
    return model.memory_peak({"dp_shard": world})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layouts", default=DEFAULT, help="world:ac:grad_accum_steps,... (dp_shard = world)")
    args = parser.parse_args()
    if not KF.is_dir():
        raise SystemExit(f"{KF} is not here")
    print(f"KempnerForge Transformer {MODEL}, batch {BATCH} x {SEQ}; MiB on rank 0")
    print(f"{'layout':28} {'fake peak':>9} {'model':>9} {'error':>7}  model terms (MiB)")
    for item in args.layouts.split(","):
        world, ac, accum = item.split(":")
        fake = measured(int(world), ac, int(accum)) / 2 ** 20
        peak = predicted(int(world), ac, int(accum))
        model = peak.peak.allocated / 2 ** 20
        terms = " ".join(f"{k}={v / 2 ** 20:.1f}" for k, v in peak.peak.terms.items()
                         if v and k not in ("allocator_reserve", "cuda_context"))
        print(f"dp_shard={world} ac={ac} accum={accum:<3} {fake:9.1f} {model:9.1f} {(model - fake) / fake:+7.1%}  "
              f"{terms}")


if __name__ == "__main__":
    main()
