import pytest
import torch

pytestmark = pytest.mark.benchmark(group="reductions")


def make_input():
    torch.manual_seed(1)
    return (torch.randn(4096),), {}


def test_sum(benchmark):
    x = torch.arange(1000, dtype=torch.float64)
    assert benchmark(torch.sum, x) == 499500


def test_sort_fresh_input(benchmark):
    # setup gives every round fresh arguments, untimed
    values, indices = benchmark.pedantic(torch.sort, setup=make_input, rounds=5)
    assert (values[1:] >= values[:-1]).all()


@pytest.mark.benchmark(group="linalg")
def test_matmul(benchmark):
    a = torch.eye(32)
    b = torch.randn(32, 32)
    assert torch.equal(benchmark(torch.matmul, a, b), b)


class TestNorms:
    def test_norm(self, benchmark):
        x = torch.ones(100)
        assert benchmark(torch.linalg.vector_norm, x) == 10

    def test_cumsum_named_group(self, benchmark):
        benchmark.group = "scans"
        x = torch.ones(10)
        assert benchmark(torch.cumsum, x, dim=0)[-1] == 10


def test_reference_is_correct():
    # Not a benchmark: a correctness test beside them.
    assert torch.sum(torch.ones(3)) == 3
