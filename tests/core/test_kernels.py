"""The launch fingerprint: built from recorded trace events, stored, diffed."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_gpubench.core.kernels import (
    NAME_CHARS,
    Launch,
    binary_changes,
    describe,
    describe_configs,
    diff,
    fingerprint,
    from_trace,
    names,
    replay_problem,
    same_binary,
    same_work,
    short,
)

SOFTMAX = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>(float*)"


def kernel(name: str, dur: float, grid=(1024, 1, 1), block=(128, 1, 1), regs=18) -> dict:
    """A kernel event as torch.profiler's chrome trace writes it (recorded on an H200)."""
    return {
        "cat": "kernel",
        "name": name,
        "dur": dur,
        "args": {
            "registers per thread": regs,
            "shared memory": 0,
            "grid": list(grid),
            "block": list(block),
            "est. achieved occupancy %": 48,
        },
    }


EVENTS = [
    {"cat": "cpu_op", "name": "aten::softmax", "dur": 30.0},
    kernel("k", 2.0),
    kernel(SOFTMAX, 4.0, grid=(256, 1, 1), block=(32, 4, 1), regs=48),
    {"cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "dur": 2.0, "args": {}},
]


def test_from_trace_keeps_device_work_with_configuration_and_share() -> None:
    launches = from_trace(EVENTS)
    assert sorted(x.kind for x in launches) == ["kernel", "kernel", "memcpy"]
    first = launches[0]
    assert first.name == SOFTMAX and first.grid == (256, 1, 1) and first.block == (32, 4, 1)
    assert first.registers == 48 and first.shared_memory == 0
    assert first.share == pytest.approx(0.5)
    assert sum(x.share for x in launches) == pytest.approx(1.0)


def test_counts_are_per_call_over_several_profiled_calls() -> None:
    launches = from_trace(EVENTS[1:2] * 5 + EVENTS[2:3] * 10, calls=5)
    assert {short(x.name): x.count for x in launches} == {"k": 1, "softmax_warp_forward": 2}


def test_round_trip_through_dict() -> None:
    long_name = "void f<" + "x" * 400 + ">(int)"
    launches = from_trace([*EVENTS, kernel(long_name, 1.0)])
    again = tuple(Launch.from_dict(x.to_dict()) for x in launches)
    assert [x.to_dict() for x in again] == [x.to_dict() for x in launches]
    cut = next(x for x in again if x.name.startswith("void f<"))
    assert len(cut.name) == NAME_CHARS and cut.digest


def test_long_names_sharing_a_prefix_stay_distinct() -> None:
    a = "void f<" + "x" * 300 + "A>(int)"
    b = "void f<" + "x" * 300 + "B>(int)"
    assert not same_work(from_trace([kernel(a, 1.0)]), from_trace([kernel(b, 1.0)]))


@pytest.mark.parametrize(
    "bad",
    [
        {"name": 3},
        {"name": "k", "grid": [1, 2]},
        {"name": "k", "count": 1.5},
        {"name": "k", "grid": [float("inf"), 1, 1]},  # 1e999 in a file
        {"name": "k", "count": float("nan")},
        {"name": "k", "registers": float("-inf")},
    ],
)
def test_from_dict_refuses_malformed_entries(bad: dict) -> None:
    with pytest.raises(ValueError):
        Launch.from_dict(bad)


def test_diff_names_configuration_changes() -> None:
    old = from_trace([kernel("triton_per_fused_softmax_0", 3.0, grid=(64, 1, 1))])
    new = from_trace(
        [kernel("triton_per_fused_softmax_0", 3.0, grid=(32, 1, 1), block=(256, 1, 1))]
    )
    assert diff(old, new) == [
        "triton_per_fused_softmax_0 grid (64,1,1) -> (32,1,1)",
        "triton_per_fused_softmax_0 block (128,1,1) -> (256,1,1)",
    ]
    assert same_work(old, new)  # the same kernels: comparable, and the change is shown


def test_diff_names_added_removed_and_count_changes() -> None:
    old = from_trace([kernel("a", 1.0), kernel("b", 1.0)])
    new = from_trace([kernel("a", 1.0), kernel("a", 1.0), kernel("c", 1.0)])
    assert diff(old, new) == ["a runs 1x -> 2x", "1 kernel added: c", "1 kernel removed: b"]
    assert not same_work(old, new)
    assert diff(old, old) == []


def test_diff_caps_the_number_of_changes() -> None:
    old = from_trace([kernel(f"k{i}", 1.0, grid=(i + 1, 1, 1)) for i in range(8)])
    new = from_trace([kernel(f"k{i}", 1.0, grid=(i + 2, 1, 1)) for i in range(8)])
    changes = diff(old, new)
    assert len(changes) == 5 and changes[-1] == "4 more changes"


def test_names_count_the_work() -> None:
    launches = from_trace([kernel("a", 1.0), kernel("a", 1.0, grid=(2, 1, 1))])
    assert names(launches) == {"kernel:a": 2}


def test_describe_and_short_names() -> None:
    assert describe(()) == "no device work"
    assert describe(from_trace(EVENTS)) == (
        "3 launches (softmax_warp_forward 50%, Memcpy DtoD 25%, k 25%)"
    )
    assert short("void at::native::reduce_kernel<512, 1>(at::native::ReduceOp)") == "reduce_kernel"
    assert short("twice_kernel(float const*, float*, long)") == "twice_kernel"


# --- does a graph replay stand for eager calls? (what the cuda-graph timer decides) ---------

DROPOUT = "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float>(...)"
OFFSET = "void at::cuda::philox::unpack_offset_kernel(...)"  # per replay, not per call


def launches(*names_: str) -> tuple[Launch, ...]:
    return from_trace([kernel(name, 1.0) for name in names_])


def test_a_replay_of_the_eager_calls_work_stands_for_it() -> None:
    eager = launches("k", "k2")
    assert replay_problem(eager, launches("k", "k2")) == ""
    assert replay_problem(eager, launches("k", "k2"), launches(*["k", "k2"] * 10), 10) == ""


def test_a_replay_missing_the_eager_work_is_refused_naming_it() -> None:
    # A kernel<<<grid, block>>> on the legacy default stream ran during capture, not in it
    # (recorded on an H200: the graph had no node, the eager call one kernel).
    problem = replay_problem(launches("twice_kernel(float const*, float*, long)"), ())
    assert problem.startswith(
        "a graph replay runs no device work, an eager call 1 launch (twice_kernel 100%): "
        "work launched outside the capturing stream"
    )
    assert replay_problem(launches("a", "b"), launches("a")) != ""


def test_bookkeeping_a_replay_adds_once_is_allowed_but_not_per_call() -> None:
    eager = launches(DROPOUT)
    once = launches(DROPOUT, OFFSET, OFFSET)  # dropout's RNG offset update, per replay
    assert replay_problem(eager, once) == ""
    assert replay_problem(eager, once, launches(*[DROPOUT] * 10, OFFSET, OFFSET), 10) == ""
    scaling = launches(*[DROPOUT] * 10, *[OFFSET] * 20)  # extra work in every call
    assert "does not repeat its work" in replay_problem(eager, once, scaling, 10)


def test_a_replay_of_n_calls_must_run_n_times_the_work() -> None:
    eager = launches("k")
    assert replay_problem(eager, eager, launches(*["k"] * 9), 10) == (
        "a replay of 10 calls does not run 10 times the eager call's work (it differs in k): "
        "the function does not repeat its work"
    )


# --- the binary behind a call (issue 16) ----------------------------------------------------

GELU = Launch(
    "triton_poi_fused_gelu_0", grid=(32768, 1, 1), block=(256, 1, 1), registers=16, shared_memory=0
)


def test_the_fingerprint_of_a_binary_is_short_stable_and_ignores_the_time_shares() -> None:
    launches = from_trace(EVENTS)
    assert fingerprint(launches) == fingerprint(tuple(reversed(launches)))
    reshared = tuple(dataclasses.replace(x, share=0.1) for x in launches)
    assert fingerprint(reshared) == fingerprint(launches)
    assert len(fingerprint(launches)) == 8 and int(fingerprint(launches), 16) >= 0
    assert fingerprint(()) == ""  # nothing recorded
    # recorded once, it names the same binary in every process (a hash of the launches only)
    assert fingerprint((GELU,)) == "35ca099d"


@pytest.mark.parametrize(
    "other",
    [
        dataclasses.replace(GELU, registers=26),
        dataclasses.replace(GELU, grid=(16384, 1, 1)),
        dataclasses.replace(GELU, block=(128, 1, 1)),
        dataclasses.replace(GELU, shared_memory=4096),
        dataclasses.replace(GELU, count=2),
        dataclasses.replace(GELU, name="triton_poi_fused_gelu_1"),
    ],
    ids=["registers", "grid", "block", "shared-memory", "count", "name"],
)
def test_any_launch_field_but_the_share_makes_another_binary(other: Launch) -> None:
    assert fingerprint((other,)) != fingerprint((GELU,))
    assert not same_binary((GELU,), (other,)) and not same_binary((other,), (GELU,))


def test_a_field_one_side_did_not_record_matches_any_value() -> None:
    unrecorded = Launch(GELU.name, grid=GELU.grid, block=GELU.block)  # no registers, no smem
    assert same_binary((GELU,), (unrecorded,)) and same_binary((unrecorded,), (GELU,))
    assert not same_binary((dataclasses.replace(GELU, registers=26),), (GELU,))
    assert same_binary((GELU,), (GELU,)) and same_binary((), ())


def test_binary_changes_name_what_differs_even_in_a_second_configuration() -> None:
    assert binary_changes((GELU,), (dataclasses.replace(GELU, registers=26),)) == [
        "triton_poi_fused_gelu_0 registers 16 -> 26"
    ]
    # the same kernel launched with two grids: diff names the main one only
    small = dataclasses.replace(GELU, grid=(2, 1, 1), share=0.1)
    old = (dataclasses.replace(GELU, share=0.9), small)
    new = (old[0], dataclasses.replace(small, grid=(4, 1, 1)))
    assert diff(old, new) == []
    assert binary_changes(old, new) == [
        f"launch configurations {fingerprint(old)} -> {fingerprint(new)}"
    ]
    assert binary_changes(old, old) == []


def test_describe_configs_says_how_the_main_launches_ran() -> None:
    assert describe_configs((GELU,)) == (
        "triton_poi_fused_gelu_0 grid (32768,1,1) block (256,1,1) 16 registers 0 B shared"
    )
    launches = from_trace(EVENTS)
    assert describe_configs(launches, limit=1) == (
        "softmax_warp_forward grid (256,1,1) block (32,4,1) 48 registers 0 B shared; 2 more"
    )


def test_kernel_deltas_attribute_each_calls_time_by_share_largest_change_first() -> None:
    """Issue 18: which kernel got slower, from what each side launched."""
    from pytest_gpubench.core.kernels import kernel_deltas

    old = (
        Launch("gemm", grid=(64, 1, 1), block=(128, 1, 1), registers=32, share=0.75),
        Launch("bias", grid=(8, 1, 1), share=0.25),
    )
    new = (
        Launch("gemm", grid=(128, 1, 1), block=(128, 1, 1), registers=32, share=0.8),
        Launch("bias", grid=(8, 1, 1), share=0.1),
        Launch("copy", kind="memcpy", share=0.1),
    )
    deltas = kernel_deltas(old, 0.1, new, 0.2)
    assert [d.name for d in deltas] == ["gemm", "copy", "bias"]
    gemm = deltas[0]
    assert gemm.ms == pytest.approx((0.075, 0.16)) and gemm.change_ms == pytest.approx(0.085)
    assert gemm.config == (
        "grid (64,1,1) block (128,1,1) 32 regs",
        "grid (128,1,1) block (128,1,1) 32 regs",
    )
    assert deltas[1].count == (0, 1) and deltas[1].config == ("-", "memcpy")
    assert kernel_deltas((), 0.1, new, 0.2) == [] and kernel_deltas(old, 0.1, (), 0.2) == []
    # One kernel launched in two configurations: its launches and shares summed.
    [twice] = kernel_deltas(
        (Launch("k", share=1.0),), 1.0, (Launch("k", share=0.5), Launch("k", share=0.5)), 2.0
    )
    assert twice.count == (1, 2) and twice.ms == pytest.approx((1.0, 2.0))
