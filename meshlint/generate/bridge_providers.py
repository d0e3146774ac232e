"""Generate the model sizes of Megatron-Bridge's provider classes (bridge_providers_v0_3_1.json) from a checkout.

Every ``*Provider`` class under ``src/megatron/bridge/models/`` is read with meshlint/generate/pyeval.py (never
imported): each size field's default as its class hierarchy leaves it, with the file:line that sets it. A recipe
that builds ``Llama3ModelProvider8B(...)`` gets the sizes the rules check from this table (meshlint/inputs/bridge_recipe.py).

    python -m meshlint.generate.bridge_providers --write /path/to/Megatron-Bridge   (tag v0.3.1)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

TAG = "v0.3.1"
COMMIT = "9c9dd8489"    # v0.3.1: pins 3rdparty/Megatron-LM at 55ac70825 (core_v0.16.1)
TABLE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "frameworks", "megatron", "bridge_providers_v0_3_1.json")
# the TransformerConfig / GPTModelProvider fields the rules and the layer split read
FIELDS = ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size", "kv_channels",
          "num_moe_experts", "moe_ffn_hidden_size", "moe_router_topk", "vocab_size", "seq_length",
          "share_embeddings_and_output_weights", "gated_linear_unit", "mtp_num_layers",
          "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
          "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
          # what the whole-peak memory estimate reads (meshlint/mesh/memory_megatron.py)
          "normalization", "add_bias_linear", "add_qkv_bias", "make_vocab_size_divisible_by", "should_pad_vocab",
          "position_embedding_type", "moe_shared_expert_intermediate_size", "moe_layer_freq", "hidden_dropout",
          "attention_dropout", "bf16", "fp16", "recompute_granularity", "recompute_method", "recompute_num_layers",
          "recompute_modules", "distribute_saved_activations",
          # multi-latent attention's shapes (MLATransformerConfig) and the q/k norms
          "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
          "qk_layernorm")


def provider_modules(src: str) -> list:
    """Dotted names of the modules under megatron/bridge/models that define provider classes."""
    base = os.path.join(src, "megatron", "bridge", "models")
    out = []
    for folder, dirs, files in os.walk(base):
        dirs.sort()
        for name in sorted(files):
            if name.endswith("provider.py"):
                rel = os.path.relpath(os.path.join(folder, name), src)[:-3]
                out.append(rel.replace(os.sep, "."))
    return out


def generate(src: str) -> dict:
    """{class name: {file, line, fields: {name: value}, origins: {name: "file:line"}, unreadable: [...]}}."""
    from meshlint.generate import pyeval as E

    interp = E.Interp(src)
    classes: dict = {}
    for dotted in provider_modules(src):
        try:
            mod = interp.module(dotted)
        except E.EvalError:
            continue
        if mod is None:
            continue
        for name, value in mod.globals.items():
            cref = getattr(value, "v", None)
            if not isinstance(cref, E.CRef) or cref.info.mod is not mod or not name.endswith("Provider") \
                    and "Provider" not in name:
                continue
            info = cref.info
            fields, origins, unreadable = {}, {}, []
            for field in FIELDS:
                owner, entry = interp.class_member(info, field)
                if entry is None or entry[0] != "field":
                    continue
                try:
                    val = interp.class_default(owner, entry, info)
                except E.EvalError:
                    unreadable.append(field)
                    continue
                plain = val.v
                if isinstance(plain, E.Lst):   # moe_layer_freq's per-layer list (a default_factory)
                    items = [getattr(x, "v", x) for x in plain.items]
                    plain = items if all(isinstance(x, int) for x in items) else object()
                if isinstance(plain, (bool, int, float, str, list)) or plain is None:
                    fields[field] = plain
                    origins[field] = f"{owner.mod.rel}:{entry[2]}"
                else:
                    unreadable.append(field)
            classes[name] = {"file": mod.rel.replace(os.sep, "/"), "line": info.node.lineno,
                             "bases": [b.node.name for b in interp.bases(info) if isinstance(b, E.ClassInfo)],
                             "fields": fields, "origins": origins, "unreadable": unreadable}
    return classes


def _commit_of(root: str) -> str:
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "--short=9", "HEAD"], capture_output=True,
                             text=True, timeout=30)
        return out.stdout.strip() or COMMIT
    except (OSError, subprocess.SubprocessError):
        return COMMIT


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="a Megatron-Bridge checkout (the directory holding src/megatron/bridge)")
    parser.add_argument("--write", action="store_true", help=f"write {os.path.basename(TABLE)}")
    args = parser.parse_args(argv)
    src = os.path.join(args.root, "src")
    if not os.path.isdir(os.path.join(src, "megatron", "bridge", "models")):
        print(f"{args.root} has no src/megatron/bridge/models", file=sys.stderr)
        return 2
    table = {"generated_by": "python -m meshlint.generate.bridge_providers --write ROOT",
             "megatron_bridge": {"tag": TAG, "commit": COMMIT, "megatron_core": "0.16.1 (core_v0.16.1, 55ac70825)"},
             "fields": list(FIELDS), "classes": generate(src)}
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    if args.write:
        with open(TABLE, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {TABLE}: {len(table['classes'])} provider classes")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
