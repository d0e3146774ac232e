"""One rank's measured memory in a training step of torchtitan v0.2's own code at full size, on one CPU. [torch]

The model is built under torch's FakeTensorMode (no storage, no compute), the meshes by torchtitan's own
``ParallelDims.build_mesh`` on the fake process group at the config's full world, then its ``parallelize_fn``
(TP, activation checkpointing, FSDP2), its loss and an AdamW step, all under FSDPMemTracker (MemTracker
without FSDP). Two steps run and the peak is of the second (the steady state: the optimizer's states live
through forward and backward). Besides memtrack's corrections, two things are done differently from a GPU
run, each named where it is: the optimizer step is AdamW's for-loop implementation (a fused or foreach step on
DTensors under fake mode allocates its temporaries at the parameters' global size, which a real fused step
never does; the for-loop's own temporaries are one parameter at a time); and SDPA's CPU kernel is added to
op-level SAC's save list (``_sdpa_saved_as_on_gpu``). torch.compile is turned off (the tracker measures eager).

``prepare(root)`` once per process, then ``measure(job)`` per job (jobs whose meshes are equal need a process
each: DTensor's caches keep the first job's meshes, whose process groups are gone; ``python -m`` this module
measures one job from stdin): {path (a v0.2 TOML), cli (overrides), world,
rank}. The result gives ``peak_bytes``, ``peak_phase``, ``by_category`` and ``phases``: the peak of the second
step's forward (loss included, the logits freed), the backward of the loss and the output projection (up to the
gradient of the final norm's output), the layers' backward, and the optimizer step.
"""

from __future__ import annotations

import sys

_ENV: dict = {}


def prepare(root: str, device: str = "fake") -> str | None:
    """Import torchtitan v0.2 from ``root`` (a checkout, or the folder holding the installed package) and install
    the corrections; returns why not, or None. ``device="cuda"``: for ``measure`` of jobs on this host's GPU (real
    tensors, a one-rank nccl world), which the fake-tensor measurement is checked against
    (bench/memory_vs_cuda.py)."""
    from meshlint.smoke.tt_import import import_torchtitan_v02

    imported = import_torchtitan_v02(root)
    if isinstance(imported, str):
        return imported
    import logging

    from meshlint.smoke import memtrack

    stood_in, pdm, config_manager, get_train_spec = imported
    logging.disable(logging.WARNING)
    pdm.device_type = "cuda" if device == "cuda" else "cpu"
    if device != "cuda":
        memtrack.meshes_outside_fake_mode()
    _ENV.update(device=device, stood_in=sorted(stood_in), pdm=pdm, ConfigManager=config_manager, get_train_spec=get_train_spec)
    return None


def measure(job: dict) -> dict:
    """One job's result: ``stage`` reached, and the peak (or ``error``)."""
    result: dict = {"stage": "config"}
    try:
        _measure(job, result)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - report the stage and the error (tyro exits on bad input)
        result["error"] = f"{type(exc).__name__}: {exc}"[:400]
    return result


def _measure(job: dict, result: dict) -> None:
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from meshlint.smoke import memtrack

    cuda = _ENV.get("device") == "cuda"
    pdm = _ENV["pdm"]
    jc = _ENV["ConfigManager"]().parse_args(["--job.config_file", job["path"], *job.get("cli", [])])
    jc.compile.enable = False
    p = jc.parallelism
    if dist.is_initialized():
        dist.destroy_process_group()
    if cuda:  # one real rank on this host's GPU: the world the job names must be 1
        if job["world"] != 1:
            raise ValueError(f"a CUDA measurement runs one rank on one GPU: world {job['world']} is not 1")
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    else:
        dist.init_process_group("fake", store=FakeStore(), rank=job.get("rank", 0), world_size=job["world"])
    try:
        dims = pdm.ParallelDims(dp_shard=p.data_parallel_shard_degree, dp_replicate=p.data_parallel_replicate_degree,
                                cp=p.context_parallel_degree, tp=p.tensor_parallel_degree,
                                pp=p.pipeline_parallel_degree, ep=p.expert_parallel_degree,
                                etp=p.expert_tensor_parallel_degree, world_size=job["world"])
        result["stage"] = "build_mesh"
        dims.build_mesh()  # outside fake mode: DTensor's meshes must be real objects
        spec = _ENV["get_train_spec"](jc.model.name)
        if not cuda:
            _sdpa_saved_as_on_gpu()  # after the lookup: the model's parallelize module is imported
        args = spec.model_args[jc.model.flavor]
        args.update_from_config(jc)
        result["stage"] = "build"
        with torch.device("cuda") if cuda else FakeTensorMode(allow_non_fake_inputs=True):
            model = spec.model_cls(args)
            result["stage"] = "parallelize_fn"
            model = spec.parallelize_fn(model, dims, jc) or model
            result["stage"] = "optimizer"
            adamw = dict(lr=jc.optimizer.lr, eps=jc.optimizer.eps, weight_decay=jc.optimizer.weight_decay,
                         betas=(jc.optimizer.beta1, jc.optimizer.beta2))
            fused = cuda and job.get("fused", False)  # on a GPU, the fused step the framework would run, if asked
            optimizer = torch.optim.AdamW(model.parameters(), fused=True, **adamw) if fused else \
                memtrack.for_loop_adamw(model.parameters(), **adamw)
            loss_fn = spec.build_loss_fn(jc)
            batch, seq = jc.training.local_batch_size, jc.training.seq_len
            tokens = torch.randint(0, args.vocab_size, (batch, seq))  # on the GPU under torch.device("cuda")
            labels = torch.randint(0, args.vocab_size, (batch, seq))
            from torchtitan.distributed import utils as dist_utils

            train_context = dist_utils.get_train_context(dims.tp_enabled and not p.disable_loss_parallel)
            amp = dist_utils.maybe_enable_amp(dims, jc.training.mixed_precision_param, "cuda" if cuda else "cpu")
            result["stage"] = "step"
            marking: dict = {"meter": None}

            def loss_done(module, inputs, output):
                # the gradient reaching the final norm's output: the loss and the output projection are done
                meter = marking["meter"]
                if meter is not None and isinstance(output, torch.Tensor) and output.requires_grad:
                    output.register_hook(lambda grad: meter.close("loss_backward"))

            if getattr(model, "norm", None) is not None:
                model.norm.register_forward_hook(loss_done)

            def forward_backward(meter, tracker) -> str:
                marking["meter"] = meter
                with train_context():  # train.py's forward_backward_step, its non-PP branch
                    with amp:
                        pred = model(tokens)
                        loss = loss_fn(pred, labels) / tokens.numel()
                    del pred  # "need to free pred before bwd to avoid peaking memory" (train.py)
                    if meter is not None:
                        meter.close("forward")
                    loss.backward()
                return "layers_backward" if meter is not None and "loss_backward" in meter.phases else "backward"

            if cuda:
                result.update(memtrack.run_steps_cuda(model, optimizer, forward_backward))
            else:
                result.update(memtrack.run_steps(model, optimizer, (tokens, labels), forward_backward))
    finally:
        dist.destroy_process_group()
    result.update(stage="done", optimizer=("AdamW fused" if fused else "AdamW for-loop") +
                  " (the framework: " + jc.optimizer.implementation + ")")



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


def main(argv: list) -> int:
    """``python -m meshlint.smoke.memory_torchtitan ROOT`` < job JSON: one line of JSON, the result or {"why"}.
    A job with ``"device": "cuda"`` is measured on this host's GPU."""
    import json

    job = json.load(sys.stdin)
    why = prepare(argv[0], job.get("device", "fake"))
    print(json.dumps({"why": why} if why else measure(job)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
