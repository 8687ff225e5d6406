"""flash-linear-attention's Triton kernels (fla-core 0.6.0), each checked against PyTorch
or the library's own recurrent form, then timed with the README's one-liner. Sizes of a
1-2B-parameter linear-attention layer (hidden 2048, 16 heads of 128, 4096 tokens), from
tens to hundreds of microseconds on an H200; every kernel here is autotuned."""

from __future__ import annotations

import functools
import os

import pytest
import torch
import torch.nn.functional as F
from fla.modules.norm.l2norm import l2norm
from fla.modules.norm.layernorm import layer_norm, rms_norm
from fla.ops.delta_rule import chunk_delta_rule
from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
from fla.ops.simple_gla import chunk_simple_gla

# A slowdown planted in time on the working tree's side only (bench/ab_checks.sh's slowtime
# step writes it from bench/fla_plant.py): by test name, the GPU clock cycles a spin kernel
# adds after each timed library call. The library is not ours to slow, so the test's own
# call grows; empty: the library's functions themselves.
PLANTED: dict[str, int] = {}


def planted(fn):
    """``fn``, followed on its stream by PLANTED's spin for the test now running."""
    if not PLANTED:
        return fn

    @functools.wraps(fn)
    def slower(*args, **kwargs):
        out = fn(*args, **kwargs)
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit("::", 1)[-1].split(" ")[0]
        if PLANTED.get(test):
            torch.cuda._sleep(PLANTED[test])
        return out

    return slower


rms_norm, layer_norm, l2norm = map(planted, (rms_norm, layer_norm, l2norm))
chunk_gated_delta_rule, chunk_delta_rule, chunk_simple_gla = map(
    planted, (chunk_gated_delta_rule, chunk_delta_rule, chunk_simple_gla)
)

HIDDEN, HEADS, HEAD_DIM, TOKENS = 2048, 16, 128, 4096
BF16 = {"device": "cuda", "dtype": torch.bfloat16}


def heads(batch: int = 1, tokens: int = TOKENS, grad: bool = False) -> torch.Tensor:
    return torch.randn(batch, tokens, HEADS, HEAD_DIM, **BF16, requires_grad=grad)


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def gated_delta_inputs(grad: bool = False, tokens: int = TOKENS) -> list[torch.Tensor]:
    q, k, v = (heads(tokens=tokens) for _ in range(3))
    k = F.normalize(k.float(), dim=-1).to(torch.bfloat16)  # the rule wants unit keys
    g = F.logsigmoid(torch.randn(1, tokens, HEADS, device="cuda"))
    beta = torch.rand(1, tokens, HEADS, **BF16).sigmoid()
    return [t.requires_grad_(grad) for t in (q, k, v, g, beta)]


@pytest.mark.parametrize("rows", [4096, 16384])
def test_rms_norm(gpubench, rows):
    x, w = torch.randn(rows, HIDDEN, **BF16), torch.randn(HIDDEN, **BF16)
    y = gpubench(rms_norm, x, w, None, eps=1e-6)
    torch.testing.assert_close(y, F.rms_norm(x, (HIDDEN,), w, 1e-6), atol=5e-2, rtol=2e-2)


def test_layer_norm_residual(gpubench):
    """Pre-norm with a residual: two outputs, the normed sum and the sum."""
    x, r = torch.randn(16384, HIDDEN, **BF16), torch.randn(16384, HIDDEN, **BF16)
    w, b = torch.randn(HIDDEN, **BF16), torch.randn(HIDDEN, **BF16)
    y, res = gpubench(layer_norm, x, w, b, r, 1e-5, True, True)
    want = F.layer_norm((x.float() + r.float()), (HIDDEN,), w.float(), b.float(), 1e-5)
    torch.testing.assert_close(y.float(), want, atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(res.float(), x.float() + r.float(), atol=5e-2, rtol=2e-2)


def test_rms_norm_backward(gpubench):
    x = torch.randn(16384, HIDDEN, **BF16, requires_grad=True)
    w = torch.randn(HIDDEN, **BF16, requires_grad=True)
    dy = torch.randn(16384, HIDDEN, **BF16)

    def step():
        x.grad = w.grad = None
        rms_norm(x, w, None, eps=1e-6).backward(dy)

    gpubench(step)
    ours = x.grad.clone()
    x.grad = None
    F.rms_norm(x, (HIDDEN,), w, 1e-6).backward(dy)
    torch.testing.assert_close(ours.float(), x.grad.float(), atol=5e-2, rtol=5e-2)


def test_l2norm(gpubench):
    x = heads(batch=4)
    y = gpubench(l2norm, x)
    torch.testing.assert_close(y.float(), F.normalize(x.float(), dim=-1), atol=1e-2, rtol=1e-2)


def test_chunk_gated_delta_rule(gpubench):
    """The chunked form against the library's recurrent form (a different algorithm)."""
    q, k, v, g, beta = gated_delta_inputs()
    o, _ = gpubench(chunk_gated_delta_rule, q, k, v, g, beta)
    want, _ = fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta)
    assert relative_error(o, want) < 0.02


def test_chunk_delta_rule_backward(gpubench):
    """Forward and backward of the ungated rule: the library refuses the gated rule's
    backward on Hopper with Triton 3.4-3.7.0 (wrong results there, its issue 640)."""
    q, k, v, _, beta = gated_delta_inputs()
    inputs = [t.requires_grad_() for t in (q, k, v, beta)]
    do = heads()

    def step():
        for t in inputs:
            t.grad = None
        o, _ = chunk_delta_rule(q, k, v, beta)
        o.backward(do)

    gpubench(step)
    assert all(t.grad is not None and t.grad.isfinite().all() for t in inputs)


def test_chunk_simple_gla(gpubench):
    q, k, v = heads(), heads(), heads()
    g = F.logsigmoid(torch.randn(1, TOKENS, HEADS, device="cuda"))
    o, _ = gpubench(chunk_simple_gla, q, k, v, g)
    assert o.shape == q.shape and o.isfinite().all()
