"""One rank's measured memory in a training step of KempnerForge's own code at full size, on one CPU. [torch]

KempnerForge's ``load_config`` and ``validate`` read the TOML; the DeviceMesh is built as its
``init_distributed`` builds it (``init_device_mesh`` of the dims above 1, from meshlint's plan) on the fake
process group at the full world; its ``build_parallel_model`` (TP, activation checkpointing, FSDP2, the
parameters in its ``param_dtype``) runs under FakeTensorMode; then scripts/train.py's text step, non-PP
branch: ``grad_accum_steps`` microbatches of ``batch_size`` × ``seq_len`` random tokens under its
``maybe_no_sync``, its loss, and an AdamW step, twice, under memtrack's trackers (the second step measured).
As a fake run must, it differs from the framework's step in what it cannot do and says so: the optimizer is
AdamW's for-loop (memtrack.for_loop_adamw; other optimizers are not measured), and the loss's guard
``(labels == -100).all()`` (training/loss.py, packed-sequence boundaries) is answered "no", which is what the
random labels give (``_labels_never_ignored``). MoE routing is data-dependent and not measured.

``python -m meshlint.smoke.memory_kempnerforge ROOT`` < job JSON {path, world, rank, dims, sizes}: one line of
JSON, the result (``peak_bytes``, ``peak_phase``, ``by_category``, ``phases``) or ``{"why"}``.
"""

from __future__ import annotations

import contextlib
import sys


def measure(root: str, job: dict) -> dict:
    result: dict = {"stage": "import"}
    try:
        _measure(root, job, result)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - report the stage and the error
        result["error"] = f"{type(exc).__name__}: {exc}"[:400]
    return result


def _measure(root: str, job: dict, result: dict) -> None:
    import logging

    sys.path.insert(0, root)
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from kempnerforge.config.loader import load_config
    from kempnerforge.distributed.parallel import build_parallel_model, default_mp_policy
    from kempnerforge.training import build_loss_fn, maybe_no_sync
    from meshlint.smoke import memtrack

    logging.disable(logging.WARNING)
    memtrack.meshes_outside_fake_mode()
    result["stage"] = "load_config"
    config = load_config(job["path"], cli_args=[])
    config.validate(job["world"])
    if config.optimizer.name != "adamw":
        result["unsupported"] = f"optimizer {config.optimizer.name!r}: only AdamW is measured yet"
        return
    tc, mc = config.train, config.model
    dist.init_process_group("fake", store=FakeStore(), rank=job["rank"], world_size=job["world"])
    try:
        result["stage"] = "init_device_mesh"
        mesh = (init_device_mesh("cpu", tuple(job["sizes"]), mesh_dim_names=tuple(job["dims"]))
                if job["dims"] else None)
        result["stage"] = "build_parallel_model"
        with FakeTensorMode(allow_non_fake_inputs=True), _params_converted_in_place():
            model = build_parallel_model(mc, torch.device("cpu"), mesh, ac_mode=tc.activation_checkpointing,
                                         mp_policy=default_mp_policy(tc.param_dtype), param_dtype=tc.param_dtype)
            opt = config.optimizer
            optimizer = memtrack.for_loop_adamw(model.parameters(), lr=opt.lr, weight_decay=opt.weight_decay,
                                                betas=tuple(opt.betas), eps=opt.eps)
            loss_fn = build_loss_fn(tc)
            ids = torch.randint(0, mc.vocab_size, (tc.batch_size, tc.seq_len))
            labels = torch.randint(0, mc.vocab_size, (tc.batch_size, tc.seq_len))
            result["stage"] = "step"

            def forward_backward(meter, tracker) -> str:
                for micro in range(tc.grad_accum_steps):  # scripts/train.py's standard step
                    if micro or meter is not None:
                        tracker.reset_mod_stats()  # the tracker refuses a module's second forward otherwise
                    with maybe_no_sync(model, micro, tc.grad_accum_steps):
                        logits = model(ids)
                        with _labels_never_ignored():
                            loss = loss_fn(logits, labels)
                        (loss / tc.grad_accum_steps).backward()
                return "forward_backward"

            result.update(memtrack.run_steps(model, optimizer, (ids, labels), forward_backward))
    finally:
        dist.destroy_process_group()
    result.update(stage="done", optimizer=f"AdamW for-loop (the framework: adamw, fused={opt.fused})")


@contextlib.contextmanager
def _params_converted_in_place():
    """Without TP KempnerForge builds the model and then ``.to(dtype=param_dtype)`` (parallel.py:582). module._apply
    always swaps a fake parameter for its converted copy (torch.utils.swap_tensors), and a tensor made under
    FakeTensorMode carries a weak reference (fake mode's own bookkeeping: even a bare nn.Embedding's), which the
    swap refuses ("Couldn't swap Embedding.weight"). For the build only, before the tracker starts, such a swap
    becomes what _apply does for plain tensors: ``param.data = converted``."""
    import torch

    swap = torch.utils.swap_tensors

    def swap_or_set(t1, t2):
        try:
            swap(t1, t2)
        except RuntimeError as exc:
            if "weakref" not in str(exc):
                raise
            t1.data = t2.data

    torch.utils.swap_tensors = swap_or_set
    try:
        yield
    finally:
        torch.utils.swap_tensors = swap


def _labels_never_ignored():
    """Answer the loss's data-dependent question (are all labels -100?) as the random labels do: no. A fake tensor
    has no values, so the branch must be decided; only inside the loss call."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    asked = (torch.ops.aten.is_nonzero.default, torch.ops.aten._local_scalar_dense.default)

    class Answer(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in asked:
                return False
            return func(*args, **(kwargs or {}))

    return Answer()


def main(argv: list) -> int:
    import json

    print(json.dumps(measure(argv[0], json.load(sys.stdin))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
