"""Measure what one rank allocates in one training step of torchtitan v0.2's own model code at full size,
on one CPU: the model built under torch's FakeTensorMode (no storage, no compute), the meshes on the fake
process group, torchtitan's own ``parallelize_fn`` (TP, activation checkpointing, FSDP2), its loss, an AdamW
step, all under torch.distributed._tools' FSDPMemTracker. Prints {job id: {peak_bytes, by category,
optimizer, stage}} as JSON. Jobs (a JSON list on stdin): {id, path (a v0.2 TOML), cli (overrides), world}.

Two steps run under the tracker and the peak is of the second (the steady state: the optimizer's states live
through forward and backward). Two things fake tensors cannot do are worked around, each named where it is:
a DeviceMesh made while fake mode is on (FSDP2 over TP params concatenates meshes) is built outside it, and
the optimizer step runs as AdamW's for-loop implementation, because a fused or foreach step on DTensors under
fake mode allocates its temporaries at the parameters' global size, which a real (CUDA, fused) step never does;
the for-loop step's own temporaries are one parameter at a time, and are reported as such.

Run by tests/test_memory_measured.py and bench/memory_vs_fake.py; it needs torch and the v0.2 tree."""

from __future__ import annotations

import json
import sys


def measure(root: str) -> None:
    from tt_v02_env import import_torchtitan_v02

    imported = import_torchtitan_v02(root)
    if isinstance(imported, str):
        print(f"SKIP: {imported}")
        return
    _, pdm, ConfigManager, get_train_spec = imported
    import logging

    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.testing._internal.distributed.fake_pg import FakeStore

    logging.disable(logging.WARNING)
    pdm.device_type = "cpu"
    _meshes_outside_fake_mode()
    out = {}
    for job in json.load(sys.stdin):
        result: dict = {"stage": "config"}
        try:
            jc = ConfigManager().parse_args(["--job.config_file", job["path"], *job.get("cli", [])])
            p = jc.parallelism
            if dist.is_initialized():
                dist.destroy_process_group()
            dist.init_process_group("fake", store=FakeStore(), rank=job.get("rank", 0), world_size=job["world"])
            dims = pdm.ParallelDims(dp_shard=p.data_parallel_shard_degree, dp_replicate=p.data_parallel_replicate_degree,
                                    cp=p.context_parallel_degree, tp=p.tensor_parallel_degree,
                                    pp=p.pipeline_parallel_degree, ep=p.expert_parallel_degree,
                                    etp=p.expert_tensor_parallel_degree, world_size=job["world"])
            dims.build_mesh()  # outside fake mode: DTensor's meshes must be real objects
            spec = get_train_spec(jc.model.name)
            args = spec.model_args[jc.model.flavor]
            args.update_from_config(jc)
            result["stage"] = "build"
            with FakeTensorMode(allow_non_fake_inputs=True):
                model = spec.model_cls(args)
                result["stage"] = "parallelize_fn"
                model = spec.parallelize_fn(model, dims, jc) or model
                result["stage"] = "optimizer"
                optimizer = torch.optim.AdamW(model.parameters(), lr=jc.optimizer.lr, eps=jc.optimizer.eps,
                                              weight_decay=jc.optimizer.weight_decay, foreach=False,
                                              betas=(jc.optimizer.beta1, jc.optimizer.beta2))
                loss_fn = spec.build_loss_fn(jc)
                batch, seq = jc.training.local_batch_size, jc.training.seq_len
                tokens = torch.randint(0, args.vocab_size, (batch, seq))
                labels = torch.randint(0, args.vocab_size, (batch, seq))
                from torchtitan.distributed import utils as dist_utils

                train_context = dist_utils.get_train_context(dims.tp_enabled and not p.disable_loss_parallel)
                amp = dist_utils.maybe_enable_amp(dims, jc.training.mixed_precision_param, "cpu")
                tracker = FSDPMemTracker(model, optimizer)
                tracker.track_inputs((tokens, labels))
                result["stage"] = "step"
                with tracker:
                    for step in (1, 2):
                        if step == 2:  # the steady state: measure from here (private fields, see above)
                            tracker._peak_mem.clear()
                            tracker._peak_mem_snap.clear()
                        with train_context():  # train.py's forward_backward_step, its non-PP branch
                            with amp:
                                pred = model(tokens)
                                loss = loss_fn(pred, labels) / tokens.numel()
                            del pred  # "need to free pred before bwd to avoid peaking memory" (train.py)
                            loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                peak = tracker.get_tracker_snapshot("peak")
            per_device = next(iter(peak.values()))
            result.update(stage="done", peak_bytes=int(per_device["Total"]),
                          by_category={str(getattr(k, "value", k)): int(v) for k, v in per_device.items()
                                       if str(getattr(k, "value", k)) != "Total"},
                          optimizer="AdamW for-loop (the framework: " + jc.optimizer.implementation + ")")
        except BaseException as exc:  # noqa: BLE001 - report the stage and the error, go on with the next job
            if isinstance(exc, KeyboardInterrupt):
                raise
            result["error"] = f"{type(exc).__name__}: {exc}"[:400]
        out[job["id"]] = result
    print(json.dumps(out))


def _meshes_outside_fake_mode() -> None:
    """Build every DeviceMesh for real even while fake mode is on: a mesh's coordinates come from nonzero(),
    whose output size a fake tensor cannot know (FSDP2 concatenates the dp and tp meshes of a TP param)."""
    import functools

    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.distributed.device_mesh import DeviceMesh

    def real(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with unset_fake_temporarily():
                return fn(*args, **kwargs)
        return inner

    DeviceMesh.__init__ = real(DeviceMesh.__init__)
    DeviceMesh._concatenate = staticmethod(real(DeviceMesh._concatenate))


if __name__ == "__main__":
    measure(sys.argv[1])
