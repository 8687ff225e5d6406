import pytest
import torch
import torch.nn.functional as F


@pytest.fixture
def x():
    torch.manual_seed(0)
    return torch.randn(64, 64)


def test_relu(benchmark, x):
    y = benchmark(torch.relu, x)
    assert (y >= 0).all()


def test_gelu_tanh(benchmark, x):
    # A keyword argument reaches the function, as in pytest-benchmark.
    y = benchmark(F.gelu, x, approximate="tanh")
    assert torch.allclose(y, F.gelu(x, approximate="tanh"))


@pytest.mark.parametrize("dim", [0, 1])
def test_softmax(benchmark, x, dim):
    y = benchmark(torch.softmax, x, dim=dim)
    assert torch.allclose(y.sum(dim=dim), torch.ones(64))


@pytest.mark.benchmark(group="elementwise", min_rounds=10, warmup=True)
def test_add(benchmark, x):
    y = benchmark.pedantic(torch.add, args=(x, x), rounds=10, warmup_rounds=2)
    assert torch.equal(y, 2 * x)


def test_tanh_iterations(benchmark, x):
    y = benchmark.pedantic(torch.tanh, args=(x,), iterations=10, rounds=5)
    assert y.abs().max() <= 1


def test_scaled_with_extra_info(benchmark, x):
    benchmark.extra_info["elements"] = x.numel()
    benchmark.extra_info["dtype"] = str(x.dtype)
    y = benchmark(torch.mul, x, 0.5)
    assert torch.equal(y, x / 2)
