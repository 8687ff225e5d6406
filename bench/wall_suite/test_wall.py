"""CPU work of four kinds, each at eight sizes from about 10 µs to 10 ms on one core: what
the `wall` timer times for users without a GPU. Deterministic work (fixed inputs), so that
what moves between sessions is the host, not the work."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

SIZES = [2**k for k in range(7, 21, 2)] + [2**21]  # 128 .. 2M elements


def _floats(n: int) -> list[float]:
    rng = random.Random(n)
    return [rng.random() for _ in range(n)]


@pytest.mark.parametrize("n", SIZES)
def test_python_sum(gpubench, n):
    assert gpubench(sum, range(n // 2)) == (n // 2) * (n // 2 - 1) // 2


@pytest.mark.parametrize("n", SIZES)
def test_sorted(gpubench, n):
    xs = _floats(n // 32)
    assert gpubench(sorted, xs)[0] == min(xs)


@pytest.mark.parametrize("n", SIZES)
def test_numpy_cumsum(gpubench, n):
    x = np.random.default_rng(n).random(n)
    assert gpubench(np.cumsum, x)[-1] == pytest.approx(x.sum())


@pytest.mark.parametrize("n", SIZES)
def test_json_dumps(gpubench, n):
    doc = {str(i): i * 0.5 for i in range(n // 64)}
    assert json.loads(gpubench(json.dumps, doc)) == doc
