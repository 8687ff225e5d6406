"""Liger-Kernel's Triton kernels, each checked against PyTorch, then timed with the README's
one-liner. Sizes of a 7B-parameter model's layers (hidden 4096, MLP 11008, vocabulary
32000), from a few to a few hundred microseconds on an H100 or H200."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction
from liger_kernel.ops.geglu import LigerGELUMulFunction
from liger_kernel.ops.layer_norm import LigerLayerNormFunction
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from liger_kernel.ops.rope import LigerRopeFunction
from liger_kernel.ops.softmax import LigerSoftmaxFunction
from liger_kernel.ops.swiglu import LigerSiLUMulFunction

HIDDEN, MLP, VOCAB = 4096, 11008, 32000
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}


def rows(n: int, width: int = HIDDEN, grad: bool = False) -> torch.Tensor:
    return torch.randn(n, width, device="cuda", requires_grad=grad)


def rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


@pytest.mark.parametrize("n", [1024, 8192])
def test_rms_norm(gpubench, n):
    x, w = rows(n), torch.randn(HIDDEN, device="cuda")
    y = gpubench(LigerRMSNormFunction.apply, x, w, 1e-6)
    torch.testing.assert_close(y, rms_norm(x, w), **TOLERANCE)


def test_rms_norm_backward(gpubench):
    """Forward and backward through autograd; the input's gradient accumulates, and the
    backward writes it over the incoming gradient (the library's default, in place)."""
    x, w, dy = rows(4096, grad=True), torch.randn(HIDDEN, device="cuda"), rows(4096)
    LigerRMSNormFunction.apply(x, w, 1e-6).backward(dy.clone())
    ours = x.grad.clone()
    x.grad = None
    rms_norm(x, w).backward(dy)
    torch.testing.assert_close(ours, x.grad, atol=1e-3, rtol=1e-3)

    def step():
        LigerRMSNormFunction.apply(x, w, 1e-6).backward(dy)

    gpubench(step)


def test_layer_norm(gpubench):
    x, w, b = rows(8192), torch.randn(HIDDEN, device="cuda"), torch.randn(HIDDEN, device="cuda")
    y = gpubench(LigerLayerNormFunction.apply, x, w, b, 1e-5)
    torch.testing.assert_close(y, F.layer_norm(x, (HIDDEN,), w, b, 1e-5), **TOLERANCE)


@pytest.mark.parametrize("n", [512, 4096])
def test_swiglu(gpubench, n):
    a, b = rows(n, MLP), rows(n, MLP)
    y = gpubench(LigerSiLUMulFunction.apply, a, b)
    torch.testing.assert_close(y, F.silu(a) * b, **TOLERANCE)


def test_swiglu_backward(gpubench):
    """Its backward recomputes into the tensors its forward saved: the inputs change from one
    call to the next (checked once, on copies, before timing)."""
    a, b, dc = rows(4096, MLP, grad=True), rows(4096, MLP, grad=True), rows(4096, MLP)
    a0, b0 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    LigerSiLUMulFunction.apply(a, b).backward(dc)
    (F.silu(a0) * b0).backward(dc)
    torch.testing.assert_close(a.grad, a0.grad, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(b.grad, b0.grad, atol=1e-3, rtol=1e-3)

    def step():
        LigerSiLUMulFunction.apply(a, b).backward(dc)

    gpubench(step)


def test_geglu(gpubench):
    a, b = rows(4096, MLP), rows(4096, MLP)
    y = gpubench(LigerGELUMulFunction.apply, a, b)
    torch.testing.assert_close(y, F.gelu(a, approximate="tanh") * b, **TOLERANCE)


def test_rope(gpubench):
    """q and k of 32 heads, as a Llama layer lays them out (sequence before heads)."""
    batch, seq, heads, dim = 4, 2048, 32, 128
    q = torch.randn(batch, seq, heads, dim, device="cuda").transpose(1, 2)
    k = torch.randn(batch, seq, heads, dim, device="cuda").transpose(1, 2)
    angles = torch.outer(torch.arange(seq, device="cuda"), torch.rand(dim // 2, device="cuda"))
    cos = torch.cat([angles.cos()] * 2, -1)[None]
    sin = torch.cat([angles.sin()] * 2, -1)[None]

    def rotate_half(t):
        return torch.cat([-t[..., dim // 2 :], t[..., : dim // 2]], -1)

    expected = [t * cos[:, None] + rotate_half(t) * sin[:, None] for t in (q, k)]
    got = gpubench(LigerRopeFunction.apply, q.clone(), k.clone(), cos, sin)
    for ours, theirs in zip(got, expected, strict=True):
        torch.testing.assert_close(ours, theirs, **TOLERANCE)


def test_softmax(gpubench):
    x = rows(4096, VOCAB // 4)
    y = gpubench(LigerSoftmaxFunction.apply, x)
    torch.testing.assert_close(y, torch.softmax(x, -1), **TOLERANCE)


def test_cross_entropy(gpubench):
    """A loss over the vocabulary that synchronizes (.item()) and, with a gradient asked, writes
    it into its input in the forward."""
    logits = rows(2048, VOCAB, grad=True)
    target = torch.randint(0, VOCAB, (2048,), device="cuda")
    fresh = logits.detach().clone().requires_grad_()
    torch.testing.assert_close(
        LigerCrossEntropyFunction.apply(fresh, target, None)[0],
        F.cross_entropy(logits.detach(), target),
        **TOLERANCE,
    )
    loss = gpubench(LigerCrossEntropyFunction.apply, logits, target, None)[0]
    assert torch.isfinite(loss)  # of logits that the calls before it overwrote


def test_fused_linear_cross_entropy(gpubench):
    """The last layer's matmul and the loss in chunks, gradients computed in the forward: cuBLAS
    and Triton launches, .item(), allocations."""
    hidden = torch.randn(4096, HIDDEN, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(VOCAB, HIDDEN, device="cuda", dtype=torch.bfloat16) / HIDDEN**0.5
    weight.requires_grad_()
    target = torch.randint(0, VOCAB, (4096,), device="cuda")
    loss = gpubench(LigerFusedLinearCrossEntropyFunction.apply, hidden, weight, target)[0]
    expected = F.cross_entropy((hidden.detach() @ weight.detach().T).float(), target)
    torch.testing.assert_close(loss.float(), expected, atol=2e-2, rtol=2e-2)
