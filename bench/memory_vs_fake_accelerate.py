"""The whole-peak memory model of an Accelerate run against a fake-tensor measurement of Accelerate 1.15.0's own FSDP2.

Transformers is not installed here, so the model is a torch module with the shapes and the ops of Transformers'
``LlamaForCausalLM`` (its RMSNorm upcast to fp32, RoPE, SDPA with GQA, gated MLP, the loss on the logits upcast to
fp32, ``_no_split_modules`` and ``get_input_embeddings``/``get_output_embeddings`` as Accelerate looks them up);
Accelerate's own ``fsdp2_prepare_model`` (utils/fsdp_utils.py: fp32 upcast, the decoder layers, the embedding and
the tail [norm, lm_head] as units, the root) and ``fsdp2_apply_ac`` shard and checkpoint it with a real
``FullyShardedDataParallelPlugin`` (bf16 mixed precision) on the fake process group at the full world, under
FakeTensorMode; two steps of the training loop of Accelerate's examples (``outputs = model(batch)``, the loss,
``backward``, AdamW) run under memtrack's FSDPMemTracker, the second measured. The measured peak is compared with
meshlint.mesh.memory's allocated bytes for the same run as ``check`` reads it from a launch line (no allocator
reserve or CUDA context: the fake run has neither).

    PYTHONPATH=. python bench/memory_vs_fake_accelerate.py [--only ID,...] [--json]
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
ACCELERATE = ROOT / ".frameworks" / "accelerate-1.15.0"
GIB = 2 ** 30
SAVED = ROOT / "bench" / "memory_fake_accelerate.json"


def llama(d: int, ffn: int, heads: int, kv: int, layers: int, vocab: int, tied: bool = False) -> dict:
    """A config.json of Transformers' LlamaConfig keys (bf16 weights)."""
    return {"model_type": "llama", "hidden_size": d, "intermediate_size": ffn, "num_attention_heads": heads,
            "num_key_value_heads": kv, "num_hidden_layers": layers, "vocab_size": vocab, "tie_word_embeddings": tied,
            "torch_dtype": "bfloat16"}


SHAPES = {"debug": llama(512, 1536, 8, 2, 4, 8192), "wide": llama(2048, 8192, 16, 4, 6, 2048),
          "1B": llama(2048, 8192, 32, 8, 16, 128256, tied=True), "8B": llama(4096, 14336, 32, 8, 32, 128256)}
# (id, shape, world, dp_replicate, activation checkpointing, per-device batch, sequence)
LAYOUTS = [
    ("debug-fsdp8-none", "debug", 8, 1, False, 4, 2048),
    ("debug-fsdp8-ac", "debug", 8, 1, True, 4, 2048),
    ("debug-hsdp2x4-none", "debug", 8, 2, False, 4, 2048),
    ("wide-fsdp8-none", "wide", 8, 1, False, 1, 4096),
    ("wide-fsdp8-ac", "wide", 8, 1, True, 1, 4096),
    ("1B-tied-fsdp8-none", "1B", 8, 1, False, 1, 4096),
    ("8B-fsdp8-none", "8B", 8, 1, False, 1, 4096),
    ("8B-fsdp8-ac", "8B", 8, 1, True, 1, 8192),
    ("8B-fsdp32-ac-b2", "8B", 32, 1, True, 2, 4096),
]


def predicted(layout: tuple, tmp: str) -> dict:
    """What ``meshlint check`` reads for the same run from its launch line: allocated GiB and the terms."""
    from meshlint.engine.check import Options, check_file
    from meshlint.engine.ruleset import load_rules

    lid, shape, world, dr, ac, batch, seq = layout
    model = os.path.join(tmp, lid)
    os.makedirs(model, exist_ok=True)
    with open(os.path.join(model, "config.json"), "w") as f:
        json.dump(SHAPES[shape], f)
    pc = (f"--use_parallelism_config --parallelism_config_dp_replicate_size {dr} "
          f"--parallelism_config_dp_shard_size {world // dr} ") if dr > 1 else ""
    script = os.path.join(tmp, f"{lid}.sh")
    with open(script, "w") as f:
        f.write(f"accelerate launch --use_fsdp --fsdp_version 2 --num_processes {world} --mixed_precision bf16 {pc}"
                f"--fsdp_activation_checkpointing {str(ac).lower()} train.py --model_name_or_path {lid} "
                f"--per_device_train_batch_size {batch} --max_seq_length {seq}\n")
    report = check_file(script, Options(rules=load_rules(), gpu_memory_gib=1e6))
    memory = report.memory or {}
    stage = (memory.get("stages") or [{}])[0]
    # of a layer's reduce buffers (its gradient, its reduce-scatter input, the previous unit's input: a + 2·a bytes a
    # parameter with bf16 reduce) a fake run never sees the last: its collectives complete at once
    layer = "layer" in (memory.get("peak_phase") or "")
    unseen = (memory.get("terms") or {}).get("reduce_buffers", 0) / 3 if layer else 0
    return {"allocated_gib": stage.get("allocated_gib"), "unseen_gib": round(unseen, 3), "phase": memory.get("peak_phase"),
            "terms": {k: v for k, v in (memory.get("terms") or {}).items()
                      if v and k not in ("allocator_reserve", "cuda_context")}}


def measure(layout: tuple) -> dict:
    """One fake-tensor run (in a fresh process: the fake process group and memtrack's patches are per process)."""
    out = subprocess.run([sys.executable, __file__, "--worker"], input=json.dumps(layout), capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ACCELERATE}"}, timeout=1800)
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"error": out.stderr[-600:]}


def worker(layout: tuple) -> dict:
    import types

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from accelerate.utils.dataclasses import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_apply_ac, fsdp2_prepare_model
    from meshlint.smoke import memtrack

    lid, shape, world, dr, ac, batch, seq = layout
    c = SHAPES[shape]
    d, heads, kv, V = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["vocab_size"]
    hd = d // heads

    class LlamaRMSNorm(nn.Module):  # Transformers' LlamaRMSNorm: fp32 statistics, the weight in the input's dtype
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            dtype = x.dtype
            x = x.to(torch.float32)
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
            return self.weight * x.to(dtype)

    def rotate_half(x):
        return torch.cat((-x[..., hd // 2:], x[..., : hd // 2]), dim=-1)

    class LlamaAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj = nn.Linear(d, heads * hd, bias=False), nn.Linear(d, kv * hd, bias=False)
            self.v_proj, self.o_proj = nn.Linear(d, kv * hd, bias=False), nn.Linear(heads * hd, d, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, heads, hd).transpose(1, 2)
            k = self.k_proj(x).view(b, s, kv, hd).transpose(1, 2)
            v = self.v_proj(x).view(b, s, kv, hd).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            return self.o_proj(o.transpose(1, 2).reshape(b, s, heads * hd))

    class LlamaMLP(nn.Module):
        def __init__(self):
            super().__init__()
            f = c["intermediate_size"]
            self.gate_proj, self.up_proj = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
            self.down_proj = nn.Linear(f, d, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class LlamaDecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn, self.mlp = LlamaAttention(), LlamaMLP()
            self.input_layernorm, self.post_attention_layernorm = LlamaRMSNorm(), LlamaRMSNorm()

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))

    class LlamaModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, d)
            self.layers = nn.ModuleList(LlamaDecoderLayer() for _ in range(c["num_hidden_layers"]))
            self.norm = LlamaRMSNorm()

        def forward(self, ids):
            x = self.embed_tokens(ids)
            pos = torch.arange(ids.shape[1], dtype=torch.float32)
            freqs = torch.outer(pos, 1.0 / (500000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)))
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
            for layer in self.layers:
                x = layer(x, cos, sin)
            return self.norm(x)

    class LlamaForCausalLM(nn.Module):
        _no_split_modules = ["LlamaDecoderLayer"]
        base_model_prefix = "model"

        def __init__(self):
            super().__init__()
            self.model = LlamaModel()
            self.lm_head = nn.Linear(d, V, bias=False)
            if c["tie_word_embeddings"]:
                self.lm_head.weight = self.model.embed_tokens.weight

        def get_input_embeddings(self):
            return self.model.embed_tokens

        def get_output_embeddings(self):
            return self.lm_head

        def forward(self, ids):
            return self.lm_head(self.model(ids))

    def loss_fn(logits, labels):  # Transformers' ForCausalLMLoss: the logits upcast, the labels shifted
        logits = logits.float()
        labels = F.pad(labels, (0, 1), value=-100)[..., 1:]
        return F.cross_entropy(logits.view(-1, V), labels.reshape(-1), ignore_index=-100)

    memtrack.meshes_outside_fake_mode()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        names = ("dp_replicate", "dp_shard_cp") if dr > 1 else ("dp_shard_cp",)
        sizes = (dr, world // dr) if dr > 1 else (world,)
        mesh = init_device_mesh("cpu", sizes, mesh_dim_names=names)
        plugin = FullyShardedDataParallelPlugin(fsdp_version=2, auto_wrap_policy="transformer_based_wrap",
                                                activation_checkpointing=ac, reshard_after_forward=True)
        plugin.set_mixed_precision("bf16")
        accelerator = types.SimpleNamespace(
            state=types.SimpleNamespace(fsdp_plugin=plugin), torch_device_mesh=mesh, mixed_precision="bf16",
            parallelism_config=types.SimpleNamespace(fsdp_dim_names=list(names)), is_main_process=False,
            device=torch.device("cpu"))
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = LlamaForCausalLM()
            plugin.set_auto_wrap_policy(model)
            if ac:
                model = fsdp2_apply_ac(accelerator, model)
            model = fsdp2_prepare_model(accelerator, model)
            optimizer = memtrack.for_loop_adamw(model.parameters(), lr=1e-4)
            ids = torch.randint(0, V, (batch, seq))

            def forward_backward(meter, tracker) -> str:
                logits = model(ids)  # outputs.logits stays alive through the backward, as in Accelerate's examples
                loss_fn(logits, ids).backward()
                return "forward_backward"

            return memtrack.run_steps(model, optimizer, (ids,), forward_backward)
    finally:
        dist.destroy_process_group()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--save", action="store_true", help=f"write the rows to {SAVED.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    if args.worker:
        try:
            result = worker(tuple(json.load(sys.stdin)))
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            result = {"error": f"{type(exc).__name__}: {exc}"[:600]}
        print(json.dumps(result))
        return 0
    only = set(args.only.split(",")) if args.only else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layout in LAYOUTS:
            if only and layout[0] not in only:
                continue
            got, want = measure(layout), predicted(layout, tmp)
            row = {"id": layout[0], "predicted_gib": want["allocated_gib"], "unseen_gib": want["unseen_gib"],
                   "phase": want["phase"],
                   "terms": want["terms"]}
            if "peak_bytes" in got:
                row.update(measured_gib=round(got["peak_bytes"] / GIB, 3), measured_phase=got["peak_phase"],
                           by_category={k: round(v / GIB, 3) for k, v in got["by_category"].items() if v})
                row["error"] = round(want["allocated_gib"] / row["measured_gib"] - 1, 3)
                row["error_seen"] = round((want["allocated_gib"] - want["unseen_gib"]) / row["measured_gib"] - 1, 3)
            else:
                row["failed"] = got.get("error")
            rows.append(row)
            if not args.json:
                print(json.dumps(row))
    if args.json:
        print(json.dumps(rows, indent=1))
    if args.save:
        import torch

        kept = json.loads(SAVED.read_text())["rows"] if SAVED.exists() else []  # --only: the other rows stay
        ran = {r["id"] for r in rows}
        rows = [r for r in kept if r["id"] not in ran] + rows
        order = [layout[0] for layout in LAYOUTS]
        rows.sort(key=lambda r: order.index(r["id"]) if r["id"] in order else len(order))
        SAVED.write_text(json.dumps({"torch": torch.__version__, "accelerate": "1.15.0", "command":
                                     "PYTHONPATH=. python bench/memory_vs_fake_accelerate.py --save", "rows": rows},
                                    indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
