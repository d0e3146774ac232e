"""memtrack.rms_norm_as_on_gpu: while measuring, torch's rms_norm saves what CUDA's fused kernel saves (its input
and an fp32 rstd per row), computes the same values and gradients, and leaves mismatched dtypes to torch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from meshlint.smoke import memtrack  # noqa: E402

F = torch.nn.functional


def _saved(fn) -> list:
    """(shape, dtype) of every tensor ``fn`` saves for its backward."""
    seen: list = []

    def pack(t):
        seen.append((tuple(t.shape), t.dtype))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, seen


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_saves_the_input_and_an_fp32_rstd(dtype):
    x = torch.randn(2, 5, 16, dtype=dtype, requires_grad=True)
    w = torch.randn(16, dtype=dtype, requires_grad=True)
    original = F.rms_norm
    with memtrack.rms_norm_as_on_gpu():
        assert F.rms_norm is not original
        out, saved = _saved(lambda: F.rms_norm(x, [16], w, 1e-6))
    assert out.dtype == dtype
    # the input in its own dtype, the weight (a parameter: no new memory) and one fp32 rstd per row
    assert sorted(saved, key=str) == sorted([((2, 5, 16), dtype), ((16,), dtype), ((2, 5, 1), torch.float32)],
                                            key=str)
    _, plain = _saved(lambda: F.rms_norm(x, [16], w, 1e-6))  # CPU's decomposition, outside the context
    assert ((2, 5, 16), torch.float32) in plain and len(plain) > len(saved)
    assert F.rms_norm is original  # put back on leaving


def test_values_and_gradients_are_the_norms():
    x = torch.randn(3, 4, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 4, 8, dtype=torch.float64)
    ref = F.rms_norm(x, [8], w, 1e-5)
    ref_x, ref_w = torch.autograd.grad(ref, (x, w), g)
    with memtrack.rms_norm_as_on_gpu():
        out = F.rms_norm(x, [8], w, 1e-5)
        got_x, got_w = torch.autograd.grad(out, (x, w), g)
        assert torch.autograd.gradcheck(lambda a, b: F.rms_norm(a, [8], b, 1e-5), (x[0].detach().requires_grad_(),
                                                                               w.detach().requires_grad_()))
        assert torch.autograd.gradcheck(lambda a: F.rms_norm(a, [2, 4], None, None), (x[0].detach().requires_grad_(),))
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(got_x, ref_x)
    torch.testing.assert_close(got_w, ref_w)


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")
def test_mismatched_dtypes_decompose_as_on_a_gpu():
    # a bf16 input with an fp32 weight (qwen3's q/k norms under autocast): CUDA decomposes too
    x = torch.randn(2, 3, 8, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(8, dtype=torch.float32, requires_grad=True)
    with memtrack.rms_norm_as_on_gpu():
        _, inside = _saved(lambda: F.rms_norm(x, [8], w, 1e-6))
    _, outside = _saved(lambda: F.rms_norm(x, [8], w, 1e-6))
    assert inside == outside
