"""pytest-benchmark's ``benchmark`` fixture, timed by gpubench: registered as a plugin only
with ``--gpubench-benchmark-fixture`` (or its ini key), and refused while pytest-benchmark
itself is active, whose own fixture it would shadow."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..core.errors import GpubenchError
from ..core.settings import BENCHMARK_MARKER_KEYS

if TYPE_CHECKING:
    from ..run.benchmark import Benchmark
    from ..run.fixture import GpuBench

# pytest-benchmark's marker, and the names it is registered under as a plugin.
BENCHMARK_MARKER = "benchmark"
PYTEST_BENCHMARK = ("benchmark", "pytest_benchmark.plugin")


def benchmark_plugin_active(config: pytest.Config) -> bool:
    return any(config.pluginmanager.hasplugin(name) for name in PYTEST_BENCHMARK)


def refuse_beside_pytest_benchmark(config: pytest.Config) -> None:
    if benchmark_plugin_active(config):
        raise pytest.UsageError(
            "--gpubench-benchmark-fixture provides the benchmark fixture and pytest-benchmark "
            "is active with its own: add -p no:benchmark (or uninstall pytest-benchmark) to "
            "time it with gpubench, or leave --gpubench-benchmark-fixture off"
        )


def marker_group(item: pytest.Item) -> str | None:
    """The group of the closest ``@pytest.mark.benchmark``; its other keywords are
    pytest-benchmark's sampling settings, accepted and not used. An unknown keyword, a
    positional argument or a group that is no string is refused, naming the test."""
    group: object = None
    for marker in reversed(list(item.iter_markers(BENCHMARK_MARKER))):  # closest last
        where = f"{item.nodeid}: @pytest.mark.benchmark"
        if marker.args:
            raise GpubenchError(f"{where} takes keywords only, got positional {marker.args!r:.60}")
        for key in marker.kwargs:
            if key not in BENCHMARK_MARKER_KEYS:
                raise GpubenchError(
                    f"{where}: unknown keyword {key!r}; expected one of "
                    f"{', '.join(BENCHMARK_MARKER_KEYS)}"
                )
        group = marker.kwargs.get("group", group)
    if group is not None and not isinstance(group, str):
        raise GpubenchError(
            f"invalid {item.nodeid}: @pytest.mark.benchmark(group=...) {group!r:.60}: expected "
            "a string such as 'gemm'"
        )
    return group


@pytest.fixture
def benchmark(gpubench: GpuBench) -> Benchmark:
    """pytest-benchmark's fixture, timed by gpubench: ``y = benchmark(fn, *args, **kwargs)``,
    ``benchmark.pedantic(...)``; see ``run.benchmark.Benchmark``."""
    from ..run.benchmark import Benchmark

    return Benchmark(gpubench, gpubench.context.spec.group)
