#!/usr/bin/env python3
"""The peak of torchtitan's ChunkedLossWrapper (main b5bcd76c6, its own code), measured on CPU, against the memory model.

    python bench/chunked_loss.py [--tokens 2048] [--dim 128] [--vocab 16000] [--chunks 8]

Runs main's ``ChunkedLossWrapper`` (lm_head and ``CrossEntropyLoss`` per chunk of tokens, each chunk's backward at
once, the hidden states' gradient gathered in a ``GradAccumulator``) on bf16 hidden states with a bf16 lm_head, on
one CPU process without FSDP, and records the bytes of every live tensor at each allocation (a
TorchDispatchMode over the call: the peak of the storages alive, less what was alive before the call: the hidden
states, the lm_head weight and its gradient). The memory model (meshlint/mesh/memory.py) counts the loss's
backward as the eager loss's ``3·U/N`` (U the chunk's fp32 logits bytes times N), the chunk's bf16 logits the loop
keeps bound, and the ``T·d`` fp32 gathering buffer. Here the lm_head is a plain parameter (no FSDP), so its gradient
is autograd's: one bf16 ``V·d`` after the first chunk, and a second while a later chunk's is added to it; added to the
model's side below (with FSDP the model counts the unsharded fp32 accumulation instead, and the plain gradient
among the states). Compared also: ChunkedLossWrapper with one chunk against the model's eager ``3·U``. A script, not a test: it needs torch and the torchtitan tree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

TREE = Path(__file__).resolve().parents[2] / "shared" / "frameworks" / "torchtitan-b5bcd76c6"


class LiveBytes(TorchDispatchMode):
    """The peak bytes of the tensors created under the mode and still referenced, sampled after every op."""

    def __init__(self):
        super().__init__()
        self.live = WeakIdKeyDictionary()
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() != 0:
                st = t.untyped_storage()
                self.live[st] = st.nbytes()
        self.peak = max(self.peak, sum(self.live.values()))
        return out


def measure(tokens: int, dim: int, vocab: int, chunks: int) -> int:
    sys.path.insert(0, str(TREE))
    from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss

    torch.manual_seed(0)
    lm_head = torch.nn.Linear(dim, vocab, bias=False, dtype=torch.bfloat16)
    loss = ChunkedLossWrapper(ChunkedLossWrapper.Config(num_chunks=chunks, loss_fn=CrossEntropyLoss.Config()))
    loss.set_lm_head(lm_head)
    hidden = torch.randn(tokens, dim, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,))
    with LiveBytes() as mode:
        out, _ = loss(hidden, labels)
        out.backward()
    return mode.peak


def model(tokens: int, dim: int, vocab: int, chunks: int) -> float:
    u = tokens * vocab * 4
    plain_grad = vocab * dim * 2 * (1 if chunks == 1 else 2)  # autograd's gradient of the lm_head (see above)
    return 3 * u / chunks + tokens * dim * 4 + tokens * vocab * 2 / chunks + plain_grad


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=16000)
    parser.add_argument("--chunks", type=int, default=8)
    a = parser.parse_args()
    for chunks in (1, a.chunks):
        got = measure(a.tokens, a.dim, a.vocab, chunks)
        want = model(a.tokens, a.dim, a.vocab, chunks)
        print(f"{chunks} chunk(s): measured {got / 2**20:8.1f} MiB, model {want / 2**20:8.1f} MiB "
              f"({(want - got) / got * 100:+.1f} %)")


if __name__ == "__main__":
    main()
