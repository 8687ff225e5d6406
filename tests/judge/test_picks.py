"""How far another pick may move a test's time (judge/picks.py), checked against the recorded
sessions where binaries changed (bench/binary_spread.py)."""

from __future__ import annotations

import math
import re

import pytest
from scipy import stats
from support import bench_output

from pytest_gpubench.core.baseline import Binary
from pytest_gpubench.core.kernels import Launch
from pytest_gpubench.core.records import SessionRecord
from pytest_gpubench.judge import picks


@pytest.fixture(scope="module")
def spread_report() -> str:
    """What bench/binary_spread.py prints from every committed session (about 4 s)."""
    return bench_output("binary_spread.py")


@pytest.mark.slow
def test_the_priors_are_the_student_t_fitted_to_the_recorded_picks(spread_report: str) -> None:
    fitted = {
        who: (float(df), float(scale) / 100)
        for who, df, scale in re.findall(
            r"^\| H200 \| (autotuner|inductor) \|.*\| ([\d.]+), ([\d.]+)% \|$",
            spread_report,
            re.MULTILINE,
        )
    }
    assert fitted == {"autotuner": picks.AUTOTUNER, "inductor": picks.INDUCTOR}


@pytest.mark.slow
def test_no_recorded_pick_held_out_exceeds_its_allowance(spread_report: str) -> None:
    """Every binary of a test with three or more, taken as a pick its history has not seen:
    its offset stays within the allowance the gate gives it (no false failure)."""
    [(total, beyond)] = re.findall(r"^held out: (\d+) picks, (\d+) beyond", spread_report, re.M)
    assert int(total) >= 30 and int(beyond) == 0


AXPY = Launch("_axpy_kernel", grid=(65536, 1, 1), block=(128, 1, 1))


def binary(grid: int, median: float, sessions: int = 5) -> Binary:
    history = tuple(SessionRecord(f"{grid}-{i}", median, 50, 0.0005) for i in range(sessions))
    return Binary((Launch(AXPY.name, grid=(grid, 1, 1), block=AXPY.block),), "e", history, history)


def test_a_history_of_one_binary_knows_only_the_prior() -> None:
    got = picks.pick_spread([binary(65536, 1.0)], (AXPY,))
    assert got is not None
    assert (got.df, got.scale, got.binaries, got.picker) == (*picks.AUTOTUNER, 1, "autotuner")
    # A Cauchy at a suite's level: no gate
    assert got.allowance(1e-4) > math.log1p(0.5)


def test_the_tests_own_picks_tell_its_spread_and_the_longest_history_is_the_reference() -> None:
    binaries = [binary(16384, 1.002, 3), binary(65536, 1.0, 8), binary(4096, 0.997, 5)]
    got = picks.pick_spread(binaries, (AXPY,))
    assert got is not None and got.reference is binaries[1]
    offsets = [math.log(1.002), math.log(0.997)]
    assert got.df == pytest.approx(picks.AUTOTUNER[0] + 2)  # nu0 + k - 1
    nu0, s0 = picks.AUTOTUNER
    assert got.scale == pytest.approx(
        math.sqrt((nu0 * s0**2 + sum(o * o for o in offsets)) / (nu0 + 2))
    )
    quantile = stats.t.ppf(0.99, nu0 + 2)  # 4.54 for t_3
    assert got.allowance(0.01) == pytest.approx(got.scale * quantile, rel=1e-3)


def test_only_binaries_of_the_same_work_with_a_history_count() -> None:
    other = Binary((Launch("k2"),), "e", binary(1, 1.0).history, binary(1, 1.0).history)
    assert picks.pick_spread([other], (AXPY,)) is None
    empty = Binary((AXPY,), "e", (), ())
    assert picks.pick_spread([empty], (AXPY,)) is None


@pytest.mark.parametrize(
    "name, who",
    [
        ("triton_poi_fused_add_mul_tanh_0", "inductor"),
        ("triton_per_fused_div_exp_prepare_softmax_online_sub_0", "inductor"),
        ("triton_red_fused_sum_0", "inductor"),
        ("layer_norm_fwd_kernel_row", "autotuner"),
        ("triton_matmul_kernel", "autotuner"),  # a user's kernel named triton_...
    ],
)
def test_who_picks_is_told_by_inductors_kernel_names(name: str, who: str) -> None:
    assert picks.picker((Launch(name),)) == who
