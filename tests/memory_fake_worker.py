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
the for-loop step's own temporaries are one parameter at a time, and are reported as such. And one thing a CPU
does differently from a GPU: SDPA runs the CPU flash kernel, which op-level SAC's save list does not name; it is
added to the list so the run saves what a GPU run saves (``_sdpa_saved_as_on_gpu``). And two things the tracker
gets wrong with DTensor (TP, loss parallel, the optimizer on sharded params) are corrected (``_tracker_class``).

Each job's result also gives ``phases``: the peak (by category) of the second step's forward (loss included, the
logits freed), the backward of the loss and the output projection (up to the gradient of the final norm's output),
the layers' backward, and the optimizer step; and ``peak_phase``, the one that holds the step's peak.

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
            _sdpa_saved_as_on_gpu()  # after the lookup: the model's parallelize module is imported
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
                from torch.distributed.fsdp import FSDPModule

                if isinstance(model, FSDPModule):
                    tracker = _tracker_class(FSDPMemTracker)(model, optimizer)
                    tracker.track_inputs((tokens, labels))
                else:  # no data-parallel dim: FSDPMemTracker refuses a module FSDP2 did not wrap
                    from torch.distributed._tools.mem_tracker import MemTracker

                    tracker = _tracker_class(MemTracker)()
                    tracker.track_external(model, optimizer, tokens, labels)
                result["stage"] = "step"
                phases: dict = {}

                def phase(name: str | None) -> None:
                    """Close the phase under way (its peak) and start the next: the tracker's peak restarts
                    from the bytes live now (private fields: the tracker has no reset of its peak)."""
                    if name is not None:
                        phases[name] = _categories(next(iter(tracker.get_tracker_snapshot("peak").values())))
                    tracker._peak_mem.clear()
                    tracker._peak_mem_snap.clear()

                marking = {"on": False}

                def loss_done(module, inputs, output):
                    # the gradient reaching the final norm's output: the loss and the output projection are done
                    if marking["on"] and isinstance(output, torch.Tensor) and output.requires_grad:
                        output.register_hook(lambda grad: phase("loss_backward"))

                if getattr(model, "norm", None) is not None:
                    model.norm.register_forward_hook(loss_done)
                with tracker:
                    for step in (1, 2):
                        marking["on"] = step == 2
                        if step == 2:  # the steady state: measure from here
                            if not isinstance(model, FSDPModule):
                                tracker.reset_mod_stats()  # MemTracker refuses a module's second call otherwise
                            phase(None)
                        with train_context():  # train.py's forward_backward_step, its non-PP branch
                            with amp:
                                pred = model(tokens)
                                loss = loss_fn(pred, labels) / tokens.numel()
                            del pred  # "need to free pred before bwd to avoid peaking memory" (train.py)
                            if step == 2:
                                phase("forward")
                            loss.backward()
                        if step == 2:
                            phase("layers_backward" if "loss_backward" in phases else "backward")
                        optimizer.step()
                        if step == 2:
                            phase("optimizer")
                        optimizer.zero_grad()
            worst = max(phases, key=lambda n: phases[n]["Total"])
            result.update(stage="done", peak_bytes=phases[worst]["Total"], peak_phase=worst,
                          by_category={k: v for k, v in phases[worst].items() if k != "Total"},
                          phases=phases,
                          optimizer="AdamW for-loop (the framework: " + jc.optimizer.implementation + ")")
        except BaseException as exc:  # noqa: BLE001 - report the stage and the error, go on with the next job
            if isinstance(exc, KeyboardInterrupt):
                raise
            result["error"] = f"{type(exc).__name__}: {exc}"[:400]
        out[job["id"]] = result
    print(json.dumps(out))


def _categories(snapshot: dict) -> dict:
    """The tracker's {category: bytes} with the categories' names as strings (Total included)."""
    return {str(getattr(k, "value", k)): int(v) for k, v in snapshot.items()}


def _sdpa_saved_as_on_gpu() -> None:
    """On CPU, SDPA dispatches to ``_scaled_dot_product_flash_attention_for_cpu``, which torchtitan's op-level SAC
    save list (models/llama3/infra/parallelize.py ``_op_sac_save_list``) does not name; on a GPU it is the cuDNN
    or flash kernel, which the list saves. Add the CPU kernel so the fake run saves what a GPU run saves (the
    attention output and its logsumexp); without it op SAC measures one attention output per layer too little."""
    import torch

    cpu_sdpa = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    for name, module in list(sys.modules.items()):
        if name.startswith("torchtitan.models.") and isinstance(getattr(module, "_op_sac_save_list", None), set):
            module._op_sac_save_list.add(cpu_sdpa)


_DTENSOR_STATE: dict = {"propagating": 0, "tracker": None}


def _tracker_class(base):
    """FSDPMemTracker with two corrections for DTensor (TP, the optimizer on sharded params), where the tracker
    otherwise sees what a GPU never allocates and misses what it does:

    - DTensor's sharding propagation runs each new op once on fake tensors of the *global* shape to learn the
      output's metadata (torch/distributed/tensor/_sharding_prop.py ``_propagate_tensor_meta_non_cached``); on a
      GPU those are fake tensors that allocate nothing, but here every tensor is fake and the tracker counted them
      (a loss-parallel backward showed the full vocabulary's fp32 logits twice as Temp at any tp). Ignored.
    - loss parallel's custom ops compute on the local shards inside DTensor's dispatch
      (torch/distributed/tensor/parallel/loss.py ``_log_softmax``, ``_nll_loss_and_log_softmax_backward``), below
      the tracker's mode, so their temporaries (the shifted logits and their exp forward; the one-hot gradient,
      exp and their sum backward, each the local logits in fp32) were invisible. The tracker is put back on the
      mode stack while they run, so it sees them as a GPU's allocator does."""
    from torch.distributed.tensor import _sharding_prop
    from torch.distributed.tensor.parallel import loss as loss_parallel
    from torch.utils._python_dispatch import _pop_mode, _push_mode

    state = _DTENSOR_STATE  # module-level: the patches below are installed once, for every job's tracker

    class Tracker(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            state["tracker"] = self

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if state["propagating"]:
                return func(*args, **(kwargs or {}))
            return super().__torch_dispatch__(func, types, args, kwargs)

    propagate = _sharding_prop.ShardingPropagator._propagate_tensor_meta_non_cached
    if not getattr(propagate, "_untracked", False):
        def untracked(self, *args, **kwargs):
            state["propagating"] += 1
            try:
                return propagate(self, *args, **kwargs)
            finally:
                state["propagating"] -= 1
        untracked._untracked = True
        _sharding_prop.ShardingPropagator._propagate_tensor_meta_non_cached = untracked

    def tracked(fn):
        def inner(*args, **kwargs):
            tracker = state["tracker"]
            if tracker is None or state["propagating"]:
                return fn(*args, **kwargs)
            _push_mode(tracker)
            try:
                return fn(*args, **kwargs)
            finally:
                _pop_mode()
        inner._tracked = True
        return inner

    for name in ("_log_softmax", "_nll_loss_and_log_softmax_backward"):
        if not getattr(getattr(loss_parallel, name), "_tracked", False):
            setattr(loss_parallel, name, tracked(getattr(loss_parallel, name)))
    return Tracker


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
