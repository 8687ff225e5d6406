"""The object behind pytest-benchmark's ``benchmark`` fixture, timed by gpubench
(``--gpubench-benchmark-fixture``): a suite written for pytest-benchmark runs unchanged.

Its calls are pytest-benchmark's; what they time, and how, is gpubench's (``GpuBench``): the
first call is untimed, the timer and the number of samples are gpubench's, and the
measurement is judged against this GPU's baseline. docs/guide.md ("Coming from
pytest-benchmark") says which of pytest-benchmark's arguments are honoured and which are
only accepted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..core.errors import GpubenchError
from .fixture import GpuBench


class Benchmark:
    """``benchmark(fn, *args, **kwargs)`` and ``benchmark.pedantic(target, args=, kwargs=,
    setup=, rounds=, warmup_rounds=, iterations=)``, as pytest-benchmark calls them; each
    returns the function's result. Every keyword of a call reaches the function.

    One use per test, as in pytest-benchmark: a second call is an error (the ``gpubench``
    fixture takes several measurements per test, each with its own ``name=``)."""

    def __init__(self, bench: GpuBench, group: str | None) -> None:
        self._bench = bench
        self._mode: str | None = None
        self.group = group  # the marker's; the test may set another before it calls

    @property
    def name(self) -> str:
        return self._bench.context.name

    @property
    def fullname(self) -> str:
        return self._bench.context.nodeid

    @property
    def extra_info(self) -> dict[str, Any]:
        """Stored with the measurement, as the ``gpubench`` fixture's ``extra_info``."""
        return self._bench.extra_info

    @extra_info.setter
    def extra_info(self, value: dict[str, Any]) -> None:
        self._bench.extra_info = value

    @property
    def enabled(self) -> bool:
        """Whether this run times (``--gpubench``) or only runs the function once."""
        return self._bench.enabled

    @property
    def disabled(self) -> bool:
        return not self._bench.enabled

    def __call__(self, function_to_benchmark: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._use("benchmark(...)")
        return self._bench.pedantic(function_to_benchmark, args, kwargs)

    def pedantic(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        setup: Callable[[], Any] | None = None,
        teardown: Callable[..., Any] | None = None,
        rounds: int = 1,
        warmup_rounds: int = 0,
        iterations: int = 1,
    ) -> Any:
        """``rounds`` of 2 or more fix the timed samples, ``warmup_rounds`` of 1 or more the
        warmup samples; pytest-benchmark's defaults (1 and 0) leave gpubench's adaptive
        rules, since one sample cannot be judged. ``iterations``: checked, not used (see
        ``GpuBench.pedantic``). ``teardown`` is refused: gpubench has no step after a
        sample."""
        self._use("benchmark.pedantic(...)")
        where = f"benchmark.pedantic in {self.name}"
        if teardown is not None:
            raise GpubenchError(
                f"{where}: teardown= is not supported by gpubench; release what setup made "
                "in the test after the call"
            )
        for label, value, least in (("rounds", rounds, 1), ("warmup_rounds", warmup_rounds, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise GpubenchError(
                    f"invalid {where} {label}={value!r}: expected a whole number of at least "
                    f"{least}"
                )
        if setup is not None and (args or kwargs) and callable(setup):
            made = setup

            def setup_without_arguments() -> None:
                if made() is not None:
                    raise GpubenchError(
                        f"{where}: setup returned arguments and args= or kwargs= were given "
                        "too; give the arguments one way"
                    )

            setup = setup_without_arguments
        return self._bench.pedantic(
            target,
            tuple(args),
            kwargs,
            setup,
            warmup=warmup_rounds if warmup_rounds > 0 else None,
            rounds=rounds if rounds > 1 else None,
            iterations=iterations,
        )

    def _use(self, mode: str) -> None:
        if self._mode is not None:
            raise GpubenchError(
                f"benchmark was used twice in {self.name} (first by {self._mode}): it times one "
                "function per test, as in pytest-benchmark; for several, use the gpubench "
                "fixture with name=, e.g. gpubench(fn, x, name='fp16')"
            )
        self._mode = mode
        bench = self._bench
        if self.group != bench.context.spec.group:
            if self.group is not None and not isinstance(self.group, str):
                raise GpubenchError(
                    f"invalid benchmark.group {self.group!r:.60} in {self.name}: expected a "
                    "string such as 'gemm'"
                )
            spec = dataclasses.replace(bench.context.spec, group=self.group)
            bench.context = dataclasses.replace(bench.context, spec=spec)
