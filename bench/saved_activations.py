#!/usr/bin/env python3
"""What one transformer layer of torchtitan v0.2.2 keeps for its backward, per token, on this device (a script).

    python bench/saved_activations.py [--device cuda|cpu] [--mode autocast|bf16] [-k MODEL] [--out FILE]

The static memory model (meshlint/mesh/memory.py ``layer_bytes_per_token``) counts, per token and layer, the
tensors a layer saves for its backward with no activation checkpointing. This measures them: the model's own
code with 1 and 2 layers, one forward, every tensor autograd saves recorded by ``saved_tensors_hooks`` (each
storage once; parameters and buffers excluded). ``--mode autocast``: fp32 parameters under autocast to bf16, as
torchtitan runs without FSDP (one GPU, or dp_replicate alone: DDP); ``--mode bf16``: the parameters in bf16 and
no autocast, what FSDP2 computes with under torchtitan's MixedPrecisionPolicy(param_dtype=bfloat16).
the difference between 2 and 1 layers is one layer. Reported per model: bytes per token per layer, measured and
as the static model counts it, and the saved tensors of one layer by shape and dtype. On CPU the autocast
policy is CPU's, which the fake-tensor measurement also runs under; on a GPU it is CUDA's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TORCHTITAN = ROOT / ".frameworks" / "torchtitan-0.2.2"
MODELS = [("qwen3", "1.7B"), ("qwen3", "0.6B"), ("llama3", "debugmodel"), ("llama3", "8B")]
BATCH, SEQ = 1, 4096


def _saved(spec, flavor: str, layers: int, device: str, mode: str) -> tuple:
    import contextlib

    import torch

    args = spec.model_args[flavor]
    args.n_layers = layers
    if hasattr(args, "max_seq_len"):
        args.max_seq_len = max(args.max_seq_len, SEQ)
    with torch.device(device):
        model = spec.model_cls(args)
    if mode == "bf16":
        model = model.to(torch.bfloat16)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    buffers = {b.untyped_storage().data_ptr() for b in model.buffers()}
    tokens = torch.randint(0, args.vocab_size, (BATCH, SEQ), device=device)
    seen: dict = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params and ptr not in buffers and ptr not in seen and t.device.type != "meta":
            seen[ptr] = (tuple(t.shape), str(t.dtype).replace("torch.", ""), t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast(device, dtype=torch.bfloat16) if mode == "autocast" else contextlib.nullcontext():
            out = model(tokens)
    del out
    return seen, args


def _static(name: str, args, mode: str) -> float:
    from meshlint.mesh.memory import Shape, layer_bytes_per_token

    head_dim = getattr(args, "head_dim", None) or args.dim // args.n_heads
    hidden = getattr(args, "hidden_dim", None)
    if not hidden:  # llama3: SwiGLU's hidden from dim, multiple_of and the multiplier, as its model computes it
        h = int(2 * 4 * args.dim / 3)
        if getattr(args, "ffn_dim_multiplier", None):
            h = int(args.ffn_dim_multiplier * h)
        h = args.multiple_of * ((h + args.multiple_of - 1) // args.multiple_of)
        hidden = h
    extra = {"qk_norm": bool(getattr(args, "qk_norm", False))} if "qk_norm" in Shape._fields else {}
    s = Shape(framework="torchtitan", params=None, n_layers=args.n_layers, dim=args.dim, ffn_hidden=hidden,
              n_heads=args.n_heads, n_kv_heads=args.n_kv_heads or args.n_heads, head_dim=head_dim,
              vocab=args.vocab_size, tied=False, **extra)
    # the static model's regime for the mode (memory.precision); autocast's weight copies are per layer, not counted
    return layer_bytes_per_token(s, "none", 1, False, "autocast" if mode == "autocast" else "param")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--mode", choices=("autocast", "bf16"), default="autocast")
    parser.add_argument("-k", dest="pattern", help="only the models whose name contains this")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--torchtitan-root", type=Path, default=TORCHTITAN)
    opts = parser.parse_args()
    from meshlint.smoke.tt_import import import_torchtitan_v02

    imported = import_torchtitan_v02(str(opts.torchtitan_root))
    if isinstance(imported, str):
        print(imported, file=sys.stderr)
        return 2
    get_train_spec = imported[3]
    import torch

    results = {"device": opts.device, "mode": opts.mode, "torch": torch.__version__, "batch": BATCH, "seq": SEQ, "models": {}}
    for name, flavor in MODELS:
        if opts.pattern and opts.pattern not in f"{name} {flavor}":
            continue
        spec = get_train_spec(name)
        one, _ = _saved(spec, flavor, 1, opts.device, opts.mode)
        two, args = _saved(spec, flavor, 2, opts.device, opts.mode)
        per_layer = (sum(v[2] for v in two.values()) - sum(v[2] for v in one.values())) / (BATCH * SEQ)
        counted: dict = {}  # one layer's saved tensors: those of two layers less those of one, by shape and dtype
        for sign, saved in ((1, two), (-1, one)):
            for shape, dtype, nbytes in saved.values():
                key = f"{list(shape)} {dtype}"
                counted[key] = counted.get(key, 0) + sign
        counted = {k: n for k, n in sorted(counted.items(), key=lambda kv: -kv[1]) if n}
        static = _static(name, args, opts.mode)
        results["models"][f"{name} {flavor}"] = {"measured_bytes_per_token_layer": per_layer,
                                                 "static_bytes_per_token_layer": static,
                                                 "one_layer_saved": counted}
        print(f"{name} {flavor}: measured {per_layer:,.0f} B/token/layer, static model {static:,.0f} "
              f"({100 * (static - per_layer) / per_layer:+.1f} %)", flush=True)
        for key, n in counted.items():
            print(f"    {n} × {key}")
    if opts.out:
        opts.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
