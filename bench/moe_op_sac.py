#!/usr/bin/env python3
"""What one DeepSeek-V3 MoE block of torchtitan v0.2 keeps for its backward under op-level selective activation
checkpointing, per token, measured on CPU with the model's own code and torchtitan's own ``apply_ac``.

    python bench/moe_op_sac.py [--flavor 16B] [--seq 512] [--mode selective|none|full]

The model (torchtitan 9810191bb^, ../shared/frameworks/torchtitan-v0.2-9810191bb-parent) is built with its flavor's
shapes in bf16 (FSDP2's param_dtype) with 2 and with 3 layers (the first dense, the others MoE), wrapped by
``apply_ac`` with deepseek_v3's ``_op_sac_save_list`` (models/deepseek_v3/infra/parallelize.py:33-48), and run
forward once on one sequence; a TorchDispatchMode records every storage created and still referenced when the
forward returns (the parameters, buffers and the output excluded). The difference between 3 and 2 layers is one
MoE block: printed per token, with the static model's count (meshlint/mesh/memory.py ``_per_token``), and the
saved tensors of that block by shape and dtype. The experts run as the flavor says (grouped mm, on CPU too:
torch._grouped_mm), the attention as SDPA (FlexAttention has no CPU backward; its CPU kernel saved as the list saves flex attention). A script, not a test: a few minutes on CPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TREE = ROOT.parent / "shared" / "frameworks" / "torchtitan-v0.2-9810191bb-parent"


def live_after_forward(layers: int, flavor: str, seq: int, mode: str) -> tuple[int, dict]:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.weak import WeakIdKeyDictionary

    from torchtitan.config.job_config import ActivationCheckpoint
    from torchtitan.distributed.activation_checkpoint import apply_ac
    from torchtitan.models.deepseek_v3 import deepseekv3_args
    from torchtitan.models.deepseek_v3.infra.parallelize import _op_sac_save_list
    from torchtitan.models.deepseek_v3.model.model import DeepSeekV3Model

    import copy

    # the router counts tokens per expert with torch.histc on the integer expert ids, which CUDA supports and CPU
    # does not: count their float copy here (num_experts counts, nothing the block keeps)
    if not getattr(torch.histc, "_cpu_ints", False):
        histc = torch.histc

        def histc_ints(x, *a, **k):
            return histc(x.float(), *a, **k).to(x.dtype) if not x.is_floating_point() else histc(x, *a, **k)
        histc_ints._cpu_ints = True
        torch.histc = histc_ints
    args = copy.deepcopy(deepseekv3_args[flavor])
    args.n_layers = layers
    args.max_seq_len = max(args.max_seq_len, seq)
    # FlexAttention has no backward on CPU: SDPA instead, whose CPU kernel's output and logsumexp are saved as the
    # list saves flex attention's (and the GPU's flash/efficient/cudnn SDPA's) -- the CPU op is added below
    args.attn_type = "sdpa"
    args.moe_impl = "standard"  # update_from_config's parallelism.expert_parallel_comm_backend default
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = DeepSeekV3Model(args)
    with torch.no_grad():
        model.init_weights(buffer_device=torch.device("cpu"))
    for param in model.parameters():  # FSDP2's param_dtype: the parameters in bf16 (not the complex RoPE buffer)
        param.data = param.data.to(torch.bfloat16)
    if mode != "none":
        save = set(_op_sac_save_list) | {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}
        apply_ac(model, ActivationCheckpoint(mode=mode, selective_ac_option="op"), op_sac_save_list=save)
    owned = {t.untyped_storage() for t in list(model.parameters()) + list(model.buffers())}
    tokens = torch.randint(0, args.vocab_size, (1, seq))
    masks = None

    class Live(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live = WeakIdKeyDictionary()
            self.shapes = WeakIdKeyDictionary()

        def __torch_dispatch__(self, func, types, a=(), kw=None):
            out = func(*a, **(kw or {}))
            for t in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() != 0:
                    st = t.untyped_storage()
                    self.live[st] = st.nbytes()
                    self.shapes.setdefault(st, (str(func), tuple(t.shape), str(t.dtype)))
            return out

    with Live() as rec:
        out = model(tokens, attention_masks=masks)
    keep = {st: n for st, n in rec.live.items() if st not in owned and st is not out.untyped_storage()}
    shapes = {}
    for st in keep:
        key = rec.shapes.get(st)
        shapes[key] = shapes.get(key, 0) + keep[st]
    return sum(keep.values()), shapes


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--flavor", default="16B")
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--mode", default="selective")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--out", help="save the measurement as JSON (bench/moe_op_sac_cpu.json)")
    a = p.parse_args()
    from meshlint.smoke.tt_import import import_torchtitan_v02

    why = import_torchtitan_v02(str(TREE))
    if isinstance(why, str):
        sys.exit(why)
    two, s2 = live_after_forward(2, a.flavor, a.seq, a.mode)
    three, s3 = live_after_forward(3, a.flavor, a.seq, a.mode)
    block = (three - two) / a.seq
    print(f"DeepSeek-V3 {a.flavor}, {a.mode}: one MoE block keeps {block:.0f} bytes per token "
          f"(2 layers {two / a.seq:.0f}, 3 layers {three / a.seq:.0f})")
    extra = {k: v - s2.get(k, 0) for k, v in s3.items() if v != s2.get(k, 0)}
    for k, v in sorted(extra.items(), key=lambda kv: -kv[1]):
        print(f"  {v / a.seq:10.0f} B/token  {k}")
    # the GPU keeps flex attention's output and logsumexp (the save list's flex_attention HOP), which the CPU's
    # SDPA path here recomputes: n_heads · v_head_dim bf16 and one fp32 per head
    from torchtitan.models.deepseek_v3 import deepseekv3_args
    args = deepseekv3_args[a.flavor]
    attention_out = args.n_heads * args.v_head_dim * 2 + 4 * args.n_heads
    from meshlint.mesh import memory
    shape = memory.Shape(framework="torchtitan", params=1, n_layers=args.n_layers, dim=args.dim,
                         ffn_hidden=args.inter_dim, n_heads=args.n_heads, n_kv_heads=args.n_heads,
                         head_dim=args.qk_nope_head_dim + args.qk_rope_head_dim, vocab=args.vocab_size, tied=False,
                         num_experts=args.moe_args.num_experts, moe_layers=args.n_layers - args.n_dense_layers,
                         moe_hidden=args.moe_inter_dim, top_k=args.moe_args.top_k,
                         shared_experts=args.moe_args.num_shared_experts, ac="selective", ac_option="op")
    static = memory.layer_bytes_per_token(shape, "selective", 1, True)
    print(f"  + flex attention's output and logsumexp on a GPU: {attention_out} -> {block + attention_out:.0f}; "
          f"meshlint.mesh.memory: {static:.0f}")
    if a.out:
        import json
        import torch
        Path(a.out).write_text(json.dumps({
            "flavor": a.flavor, "mode": a.mode, "seq": a.seq, "torch": torch.__version__,
            "tree": "torchtitan 9810191bb^ (238fa9953e4a)", "command": " ".join(sys.argv),
            "moe_block_bytes_per_token_cpu": block, "gpu_attention_out_bytes_per_token": attention_out,
            "kept": {f"{k[0]} {list(k[1])} {k[2]}": v / a.seq for k, v in extra.items()}}, indent=1) + "\n")
    if a.verbose:
        for k, v in sorted(s3.items(), key=lambda kv: -kv[1]):
            print(f"  3 layers: {v / a.seq:10.0f} B/token  {k}")


if __name__ == "__main__":
    main()
