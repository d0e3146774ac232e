"""The static per-layer bytes (meshlint.mesh.memory) against what one layer saved for its backward on an H100.

bench/saved_activations.py listed, on the GPU, every tensor one layer of torchtitan v0.2.2 saves for its backward
(by shape and dtype), with the parameters in bf16 (what FSDP2 computes with) and as fp32 parameters under autocast
(one GPU, DDP); bench/saved_activations_h100_{bf16,autocast}.json keep the listings. The measured bytes per token
and layer are recomputed here from the listings, and the static model, built from the shipped model table, must
give them within 1 %: the layer's activations, plus under autocast the bf16 copies of the layer's weights.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from meshlint.frameworks import models
from meshlint.mesh import memory
from meshlint.mesh.memory import Shape

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"bfloat16": 2, "float32": 4, "int64": 8}
PRECISION = {"bf16": "param", "autocast": "autocast"}  # the listing's mode -> memory.precision's regime


def _listing(mode: str) -> dict:
    return json.loads((ROOT / "bench" / f"saved_activations_h100_{mode}.json").read_text())


def _measured(saved: dict, tokens: int) -> float:
    """Bytes per token of one layer's saved tensors: {"[shape] dtype": count} (storages, once each)."""
    total = 0
    for key, count in saved.items():
        shape, dtype = key.rsplit(" ", 1)
        total += count * math.prod(json.loads(shape)) * SIZES[dtype]
    return total / tokens


def _shape(name: str, flavor: str) -> tuple:
    e = models.builtin("0.2.x")[(name, flavor)]
    s = Shape(framework="torchtitan", params=e["params"], n_layers=e["n_layers"], dim=e["dim"],
              ffn_hidden=e["ffn_hidden_dim"], n_heads=e["n_heads"], n_kv_heads=e.get("n_kv_heads"),
              head_dim=e.get("head_dim"), vocab=e["vocab_size"], tied=e.get("tied", False),
              qk_norm=e.get("qk_norm", False))
    return s, e


def _with(s: Shape, **changes) -> Shape:
    return dataclasses.replace(s, **changes) if dataclasses.is_dataclass(s) else s._replace(**changes)


CASES = [(mode, model) for mode in PRECISION for model in _listing(mode)["models"]]


@pytest.mark.parametrize("mode,model", CASES, ids=[f"{m}-{k.replace(' ', '-')}" for m, k in CASES])
def test_layer_bytes_match_the_gpu(mode, model):
    data = _listing(mode)
    assert data["device"] == "cuda" and data["mode"] == mode
    tokens = data["batch"] * data["seq"]
    row = data["models"][model]
    measured = _measured(row["one_layer_saved"], tokens)
    assert measured == pytest.approx(row["measured_bytes_per_token_layer"], rel=1e-9)  # the listing is complete
    s, e = _shape(*model.split(" ", 1))
    static = memory.layer_bytes_per_token(s, "none", 1, False, PRECISION[mode])
    if mode == "autocast":
        # the bf16 copies autocast makes of the layer's weights, per layer (not per token): estimate's ``copies``
        embed = s.vocab * s.dim
        per_layer = (s.params - embed - (0 if s.tied else embed)) / s.n_layers
        static += per_layer * s.compute_bytes / tokens
    assert static == pytest.approx(measured, rel=0.01), (static, measured)


def test_norms_and_casts_are_what_changes():
    """The two regimes differ where the listings say: the residual stream (fp32 under autocast), the projections'
    own casts, and qwen3's q/k norms (decomposed under autocast: a bf16 input with an fp32 weight)."""
    s, _ = _shape("llama3", "debugmodel")
    d = s.dim
    param = memory.layer_bytes_per_token(s, "none", 1, False, "param")
    autocast = memory.layer_bytes_per_token(s, "none", 1, False, "autocast")
    # two norms: input 2 -> 4 bytes; three more casts of the attention norm's output, one more of the MLP norm's
    assert autocast - param == pytest.approx(2 * 2 * d + 3 * 2 * d)
    q, _ = _shape("qwen3", "1.7B")
    assert q.qk_norm
    plain = _with(q, qk_norm=False)
    hq, kv = q.n_heads * q.head_dim, q.n_kv_heads * q.head_dim
    rows = 4 * (q.n_heads + q.n_kv_heads)
    assert memory.layer_bytes_per_token(q, "none", 1, False, "param") - \
        memory.layer_bytes_per_token(plain, "none", 1, False, "param") == pytest.approx(2 * (hq + kv) + rows)
    assert memory.layer_bytes_per_token(q, "none", 1, False, "autocast") - \
        memory.layer_bytes_per_token(plain, "none", 1, False, "autocast") == pytest.approx(8 * (hq + kv) + rows)


def test_precision_regimes():
    """torchtitan 0.2.x without FSDP2 autocasts (one GPU, DDP), without FSDP2 but with tp or pp computes in fp32;
    the registry versions always apply FSDP2; KempnerForge computes in its parameters' dtype."""
    s, _ = _shape("llama3", "debugmodel")
    tt02 = _with(s, ddp_replicate=True)
    assert memory.precision(tt02, False, 1, 1) == "autocast"
    assert memory.precision(tt02, False, 2, 1) == "fp32"
    assert memory.precision(tt02, False, 1, 2) == "fp32"
    assert memory.precision(tt02, True, 2, 2) == "param"
    assert memory.precision(_with(tt02, compute_bytes=4), False, 1, 1) == "fp32"  # autocast to fp32 casts nothing
    assert memory.precision(s, False, 1, 1) == "param"            # registry versions: FSDP2 at any degree
    assert memory.precision(_with(s, framework="kempnerforge"), False, 1, 1) == "param"


def test_whole_peaks_within_3_percent_of_the_gpu(tmp_path):
    """torchtitan 0.2.2's own step at one rank on the H100 (bench/memory_vs_cuda.py --cuda: autocast with fp32
    parameters, every activation-checkpointing mode): ``check``'s allocated estimate within 3 % of the allocator's
    peak (bench/memory_cuda_h100.json)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("memory_vs_cuda", ROOT / "bench" / "memory_vs_cuda.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cuda = json.loads((ROOT / "bench" / "memory_cuda_h100.json").read_text())
    assert len(bench.JOBS) == len(cuda["runs"]) == 6
    for job_id, text, _ in bench.JOBS:
        path = tmp_path / f"{job_id}.toml"
        path.write_text(text)
        gpu = cuda["runs"][job_id]["peak_bytes"] / memory.GIB
        estimate = bench._estimate(path)["allocated_gib"]
        assert estimate == pytest.approx(gpu, rel=0.03), job_id
