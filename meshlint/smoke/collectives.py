"""The autograd-aware collectives the training step's manual parallelisms need. [torch]

Megatron's conjugate pairs, for a group whose ranks hold the same activation:
``split`` (keep my chunk; backward all-gathers the gradient) with ``gather``
(all-gather the chunks; backward keeps my chunk), and ``copy`` (identity;
backward all-reduces) with ``reduce`` (all-reduce; backward identity).
``all_to_all`` is torch's functional all_to_all_single with autograd.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def _all_gather_rows(x: torch.Tensor, group) -> torch.Tensor:
    size = dist.get_world_size(group)
    parts = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts)


class _Split(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        return x.chunk(size)[rank].contiguous()

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_rows(grad, ctx.group), None


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _all_gather_rows(x, group)

    @staticmethod
    def backward(ctx, grad):
        size, rank = dist.get_world_size(ctx.group), dist.get_rank(ctx.group)
        return grad.chunk(size)[rank].contiguous(), None


class _Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        out = x.contiguous().clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def split(x, group):
    return _Split.apply(x, group)


def gather(x, group):
    return _Gather.apply(x, group)


def copy(x, group):
    return _Copy.apply(x, group)


def reduce(x, group):
    return _Reduce.apply(x, group)


def all_to_all(x: torch.Tensor, out_splits: list, in_splits: list, group) -> torch.Tensor:
    return funcol.all_to_all_single_autograd(x.contiguous(), out_splits, in_splits, group)


def exchange_counts(counts: torch.Tensor, group) -> torch.Tensor:
    """Each rank's per-destination counts, swapped: what every peer will send me (no autograd)."""
    out = torch.empty_like(counts)
    dist.all_to_all_single(out, counts.contiguous(), group=group)
    return out
