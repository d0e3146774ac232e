"""torch.distributed._tools' memory trackers made to measure on fake tensors what a GPU allocates. [torch]

``smoke --memory`` (and the tests' sweep) run a framework's real training step under FakeTensorMode and the
fake process group, where nothing is stored or computed; the trackers (MemTracker, FSDPMemTracker) count
every tensor's bytes as the caching allocator would see them. Five things differ from a GPU run and are
corrected here, each where it is done: DeviceMeshes built outside fake mode (``meshes_outside_fake_mode``);
DTensor's sharding propagation and loss parallel's kernels (``tracker_class``); torch's rms_norm, fused on a GPU
and decomposed on CPU (``rms_norm_as_on_gpu``); and phases, as the trackers have no reset of their peak
(``PhaseMeter``).
"""

from __future__ import annotations

import contextlib
import functools

_DTENSOR_STATE: dict = {"propagating": 0, "tracker": None}


def categories(snapshot: dict) -> dict:
    """The tracker's {category: bytes} with the categories' names as strings (Total included)."""
    return {str(getattr(k, "value", k)): int(v) for k, v in snapshot.items()}


def make_tracker(model, optimizer, inputs: tuple):
    """FSDPMemTracker for a model FSDP2 wrapped, MemTracker otherwise (FSDPMemTracker refuses a module FSDP2 did
    not wrap), both with the DTensor corrections; started with ``with``."""
    from torch.distributed.fsdp import FSDPModule

    if isinstance(model, FSDPModule):
        from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

        tracker = tracker_class(FSDPMemTracker)(model, optimizer)
        tracker.track_inputs(inputs)
    else:
        from torch.distributed._tools.mem_tracker import MemTracker

        tracker = tracker_class(MemTracker)()
        tracker.track_external(model, optimizer, *inputs)
    return tracker


class PhaseMeter:
    """The peak of each phase of a step, by category: ``close(name)`` ends the phase under way and starts the next,
    from the bytes live now (the tracker's private peak fields: it has no reset of its peak)."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.phases: dict = {}

    def close(self, name: str | None) -> None:
        if name is not None:
            self.phases[name] = categories(next(iter(self.tracker.get_tracker_snapshot("peak").values())))
        self.tracker._peak_mem.clear()
        self.tracker._peak_mem_snap.clear()

    def worst(self) -> str:
        return max(self.phases, key=lambda n: self.phases[n]["Total"])


def run_steps(model, optimizer, inputs: tuple, forward_backward) -> dict:
    """Two training steps under the tracker, the second measured (the steady state: the optimizer's states live
    through forward and backward); returns the result's ``peak_bytes``, ``peak_phase``, ``by_category``, ``phases``.

    ``forward_backward(meter, tracker)`` runs one step's forward and backward (``meter`` is None in the first,
    unmeasured step; it may close phases of its own) and returns the name of the phase it leaves open;
    the optimizer step is the last phase."""
    from torch.distributed.fsdp import FSDPModule

    tracker = make_tracker(model, optimizer, inputs)
    # MemTracker refuses a module's second call unless its module stats are reset; FSDPMemTracker resets its own
    reset = None if isinstance(model, FSDPModule) else tracker.reset_mod_stats
    with tracker, rms_norm_as_on_gpu():
        return _two_steps(PhaseMeter(tracker), optimizer, forward_backward, tracker, reset)


def _two_steps(meter, optimizer, forward_backward, tracker=None, before_measured=None) -> dict:
    """The two steps of ``run_steps`` (and ``run_steps_cuda``), the second measured phase by phase by ``meter``."""
    for step in (1, 2):
        measuring = meter if step == 2 else None
        if measuring is not None:
            if before_measured is not None:
                before_measured()
            meter.close(None)
        last = forward_backward(measuring, tracker)
        if measuring is not None:
            meter.close(last)
        optimizer.step()
        if measuring is not None:
            meter.close("optimizer")
        optimizer.zero_grad()
    worst = meter.worst()
    return {"peak_bytes": meter.phases[worst]["Total"], "peak_phase": worst,
            "by_category": {k: v for k, v in meter.phases[worst].items() if k != "Total"}, "phases": meter.phases}


class CudaMeter:
    """PhaseMeter's measure on a real GPU: the caching allocator's own peak (``max_memory_allocated``) of each
    phase, its peak statistic reset at each boundary. Only totals: the allocator keeps no categories."""

    def __init__(self):
        import torch

        self.cuda = torch.cuda
        self.phases: dict = {}

    def close(self, name: str | None) -> None:
        self.cuda.synchronize()
        if name is not None:
            self.phases[name] = {"Total": int(self.cuda.max_memory_allocated())}
        self.cuda.reset_peak_memory_stats()

    def worst(self) -> str:
        return max(self.phases, key=lambda n: self.phases[n]["Total"])


def run_steps_cuda(model, optimizer, forward_backward) -> dict:
    """``run_steps`` on a real GPU: the same two steps, the second measured by the allocator itself, phase by
    phase (what the fake-tensor measurement and the static estimate are checked against)."""
    return _two_steps(CudaMeter(), optimizer, forward_backward)


def for_loop_adamw(params, **options):
    """AdamW's for-loop implementation: a fused or foreach step on DTensors under fake mode allocates its
    temporaries at the parameters' global size, which a real (CUDA, fused) step never does; the for-loop's own
    temporaries are one parameter at a time."""
    import torch

    return torch.optim.AdamW(params, foreach=False, **options)


def tracker_class(base):
    """``base`` (a tracker class) with two corrections for DTensor (TP, the optimizer on sharded params), where the
    tracker otherwise sees what a GPU never allocates and misses what it does:

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

    state = _DTENSOR_STATE  # module-level: the patches below are installed once, for every tracker

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


def meshes_outside_fake_mode() -> None:
    """Build every DeviceMesh for real even while fake mode is on: a mesh's coordinates come from nonzero(),
    whose output size a fake tensor cannot know (FSDP2 concatenates the dp and tp meshes of a TP param).
    Installed once per process."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.distributed.device_mesh import DeviceMesh

    if getattr(DeviceMesh.__init__, "_outside_fake", False):
        return

    def real(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with unset_fake_temporarily():
                return fn(*args, **kwargs)
        inner._outside_fake = True
        return inner

    DeviceMesh.__init__ = real(DeviceMesh.__init__)
    DeviceMesh._concatenate = staticmethod(real(DeviceMesh._concatenate))


@contextlib.contextmanager
def rms_norm_as_on_gpu():
    """While measuring, torch's ``F.rms_norm`` (nn.RMSNorm's) saves for its backward what it saves on a GPU.

    On CUDA, rms_norm with the input and the weight of one dtype runs the fused kernel, which keeps its input in
    its own dtype and an fp32 rstd per row; on CPU the same call decomposes and keeps the fp32 input and the fp32
    normalised tensor (8 bytes an element, measured on an H100 against CPU: bench/saved_activations.py). With the
    dtypes matching, the call here is ``_FusedRMSNorm``, which saves what the fused kernel saves; with them
    mismatched (a bf16 input and an fp32 weight under autocast) CUDA decomposes too, so the call is left alone."""
    import torch.nn.functional as F

    original = F.rms_norm
    fused = _fused_rms_norm_class()

    def rms_norm(input, normalized_shape, weight=None, eps=None):
        if weight is not None and weight.dtype != input.dtype:
            return original(input, normalized_shape, weight, eps)
        dims = tuple(range(-len(normalized_shape), 0))
        return fused.apply(input, weight, dims, _eps(input, eps))

    F.rms_norm = rms_norm
    try:
        yield
    finally:
        F.rms_norm = original


def _eps(input, eps):
    import torch

    return torch.finfo(input.dtype).eps if eps is None else eps


@functools.lru_cache(maxsize=1)
def _fused_rms_norm_class():
    """An autograd Function computing rms_norm as CUDA's fused kernel does: fp32 arithmetic (fp64 for fp64), the
    output in the input's dtype, the input and the rstd saved; its backward is the norm's gradient from them."""
    import torch

    class _FusedRMSNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, dims, eps):
            acc = torch.promote_types(x.dtype, torch.float32)  # the kernel's accumulation type
            rstd = torch.rsqrt(x.to(acc).pow(2).mean(dims, keepdim=True) + eps)
            out = x.to(acc) * rstd
            if weight is not None:
                out = out * weight.to(acc)
            ctx.dims = dims
            ctx.save_for_backward(x, weight, rstd)
            return out.to(x.dtype)

        @staticmethod
        def backward(ctx, grad):
            x, weight, rstd = ctx.saved_tensors
            normed = x.to(rstd.dtype) * rstd
            g = grad.to(rstd.dtype)
            gw = g * weight.to(rstd.dtype) if weight is not None else g
            # d/dx of x·rstd·w: rstd·(g·w − x̂·mean(g·w·x̂)) over the normalised dims
            dx = rstd * (gw - normed * (gw * normed).mean(ctx.dims, keepdim=True))
            dw = None
            if weight is not None and ctx.needs_input_grad[1]:
                lead = tuple(range(x.dim() - weight.dim()))
                dw = ((g * normed).sum(lead) if lead else g * normed).to(weight.dtype)
            return dx.to(x.dtype), dw, None, None

    return _FusedRMSNorm

