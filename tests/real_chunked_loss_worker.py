"""Child process of tests/test_chunked_loss_real.py: torchtitan's own ChunkedLossWrapper on the tensors a rank holds.

    python tests/real_chunked_loss_worker.py TORCHTITAN_ROOT CASES.json OUT.json

Each case is {era: "main" | "0.3.0", tokens (main: num_tokens_per_microbatch_per_dp_rank; 0.3.0: seq_len), batch
(0.3.0: the microbatch's rows), cp, chunks}. The inputs, labels and positions are built as the version's
dataloader gives them (main: one flat [T] row, components/data/collators.py; 0.3.0: [batch, seq_len]), sharded by
the version's own ``prepare_context_parallel_input`` on a cp mesh of the fake process group (rank 0 of cp ranks:
the head-tail load balancer's shard), embedded into hidden states [..., dim] (the root norm's output is
replicated on tp, so tp does not change the shape), and passed with the labels to the version's
``ChunkedLossWrapper`` with a plain lm_head, forward and backward, as the first training step does. Written per
case: ok, or the error's type and message, and the local token count the wrapper saw. The torchtitan tree is the
package ``torchtitan`` here, one version per process.
"""

from __future__ import annotations

import json
import sys


def run(case: dict) -> dict:
    import torch
    from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
    from torchtitan.distributed.context_parallel import prepare_context_parallel_input

    torch.manual_seed(case.get("seed", 0))
    vocab, dim = 64, 8
    shape = (case["tokens"],) if case["era"] == "main" else (case["batch"], case["tokens"])
    inputs = torch.randint(0, vocab, shape)
    labels = torch.randint(0, vocab, shape)
    positions = torch.arange(case["tokens"]).expand(shape).contiguous()
    extra = {"positions": positions}
    if case["cp"] > 1:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (case["cp"],), mesh_dim_names=("cp",))
        inputs, labels, extra = prepare_context_parallel_input(inputs, labels, extra, mesh, torch.device("cpu"))
    seq_dim = 0 if case["era"] == "main" else 1
    local = int(inputs.shape[seq_dim])
    embed = torch.nn.Embedding(vocab, dim)
    hidden = embed(inputs)  # requires grad, as the decoder's output does
    lm_head = torch.nn.Linear(dim, vocab, bias=False)
    loss_fn = ChunkedLossWrapper(ChunkedLossWrapper.Config(num_chunks=case["chunks"],
                                                           loss_fn=CrossEntropyLoss.Config()))
    loss_fn.set_lm_head(lm_head)
    try:
        loss, _ = loss_fn(hidden, labels, torch.tensor(float(labels.numel())), positions=extra["positions"])
        loss.backward()
    except Exception as exc:  # noqa: BLE001  (the verdict is the framework's exception, whatever it is)
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                "local": local}
    return {"ok": True, "error": None, "local": local}


def _triton_stand_in(root: str) -> None:
    """An inert ``triton`` for the checkout's own imports (the MoE dispatch kernels its package imports; nothing here
    runs them). torch's probes look past it: it answers only imports made from files under ``root``."""
    import importlib.abc
    import importlib.machinery
    import types

    class Anything:
        def __init__(self, *args, **kwargs):
            pass

        def __call__(self, *args, **kwargs):
            return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else Anything()

        def __getattr__(self, name):
            return Anything()

        def __getitem__(self, item):
            return Anything()

    class Module(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Anything()

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            if fullname.split(".")[0] != "triton":
                return None
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
                frame = frame.f_back
            if frame is None or not frame.f_code.co_filename.startswith(root):
                return None
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

        def create_module(self, spec):
            module = Module(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.append(Finder())


def main() -> None:
    root, cases_path, out_path = sys.argv[1:4]
    sys.path.insert(0, root)
    try:
        import triton  # noqa: F401
    except ImportError:
        _triton_stand_in(root)
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    cases = json.loads(open(cases_path).read())
    out = []
    # one fake process group per cp size: rank 0 of cp ranks
    for cp in sorted({c["cp"] for c in cases}):
        if cp > 1:
            dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=cp)
        for i, case in enumerate(cases):
            if case["cp"] == cp:
                out.append((i, run(case)))
        if cp > 1:
            dist.destroy_process_group()
    with open(out_path, "w") as f:
        json.dump([r for _, r in sorted(out, key=lambda x: x[0])], f)


if __name__ == "__main__":
    main()
