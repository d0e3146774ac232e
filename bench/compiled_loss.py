#!/usr/bin/env python3
"""What torch.compile (inductor) keeps of torchtitan's cross-entropy loss, read from the compiled graphs on CPU.

    python bench/compiled_loss.py

torchtitan compiles its loss when compile.enable and "loss" in compile.components (components/loss.py). The memory
model (meshlint/mesh/memory.py, Shape.compiled_loss) then counts the logits through the forward and the logits
with one gradient of their dtype in the backward, where the eager loss keeps an fp32 copy and the log-softmax
(2.5 and 3 fp32 copies of the logits). This prints what backs that: the tensors the partitioned forward saves for
the backward and every buffer inductor's generated code allocates, forward and backward, for torchtitan's own
``cross_entropy_loss`` (v0.2: pred.flatten(0, 1).float(), sum reduction, ignore_index -100) on bf16 logits. The
buffers are the scheduler's, the same on CUDA (Triton) as on CPU (C++) up to split reductions' [tokens, k] partials.
A script, not a test: it compiles (a C++ compiler, ~1 min); torch pinned as in the README.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

TOKENS, VOCAB = 256, 4096


def cross_entropy_loss(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:  # torchtitan v0.2's
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1), reduction="sum", ignore_index=-100)


def main() -> None:
    torch._dynamo.reset()
    pred = torch.randn(1, TOKENS, VOCAB, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, VOCAB, (1, TOKENS))
    compiled = torch.compile(cross_entropy_loss, backend="inductor")

    def step():
        compiled(pred, labels).backward()

    _, sources = run_and_get_code(step)
    logits = TOKENS * VOCAB * pred.element_size()
    for name, code in zip(("forward", "backward"), sources):
        body = code[code.index("def call(self, args)"):]
        buffers = re.findall(r"empty_strided_cpu\(\(([^)]*)\), \([^)]*\), torch\.(\w+)\)", body)
        total = 0
        for shape, dtype in buffers:
            n = 1
            for d in shape.split(","):
                if d.strip():
                    n *= int(d)
            total += n * torch.empty((), dtype=getattr(torch, dtype)).element_size()
        saved = re.search(r"return \((.*)\)", body).group(1) if name == "forward" else ""
        print(f"{name}: buffers {[f'{d}[{s}]' for s, d in buffers]} = {total / logits:.3f} x the logits' bytes"
              + (f"; returns (the loss, then what the backward keeps): {saved}" if saved else ""))
    eager = 2.5 * 2, 3 * 2  # in the logits' (bf16) bytes: memory.py's eager forward 2.5u and backward 3u, u = fp32
    print(f"eager (memory.py): forward {eager[0]} x, backward {eager[1]} x the logits' bytes; compiled: forward "
          "1 x (the logits), backward 2 x (the logits and their gradient)")


if __name__ == "__main__":
    main()
