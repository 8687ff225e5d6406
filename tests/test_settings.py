"""Unit tests of pytest_gpubench.settings: precedence, parsing and the messages of errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_gpubench.errors import ConfigError, GpubenchError
from pytest_gpubench.settings import (
    OPTIONS,
    TIMERS,
    Settings,
    check_marker_keywords,
    marker_keys,
    parse_fraction_or_percent,
)

ROOT = Path("/project")
ALLOWED = (
    "threshold, alpha, timer, budget_s, min_samples, max_samples, precision, group, bytes, flops"
)


def resolve(cli: dict[str, object] | None = None, ini: dict[str, object] | None = None) -> Settings:
    return Settings.resolve(cli or {}, ini or {}, ROOT)


def config_error(cli: dict[str, object] | None = None, ini: dict[str, object] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(cli, ini)
    return str(info.value)


# --- precedence -----------------------------------------------------------------------------


def test_defaults() -> None:
    assert resolve() == Settings(dir=ROOT / ".gpubench")
    settings = resolve()
    assert (settings.enabled, settings.save, settings.fail_on_improvement) == (False,) * 3
    assert (settings.threshold, settings.alpha, settings.timer) == (0.05, 0.01, "auto")
    assert settings.min_samples <= settings.max_samples
    assert settings.json is None and settings.markdown is None


def test_unset_values_as_the_plugin_hands_them_over_mean_defaults() -> None:
    # pytest gives None for options not on the command line, '' or False for unset ini keys.
    cli = {spec.field: None for spec in OPTIONS}
    ini = {spec.field: (False if spec.is_flag else "") for spec in OPTIONS}
    assert resolve(cli, ini) == resolve()


@pytest.mark.parametrize(
    "field, cli, ini, expected",
    [
        ("threshold", "7%", "3%", 0.07),
        ("threshold", None, "3%", 0.03),
        ("threshold", None, "", 0.05),
        ("alpha", "0.05", "0.001", 0.05),
        ("alpha", None, "0.001", 0.001),
        ("timer", "wall", "cuda-event", "wall"),
        ("timer", None, "cuda-event", "cuda-event"),
        ("budget_s", "0.2", "3", 0.2),
        ("budget_s", None, "3", 3.0),
        ("min_samples", "5", "7", 5),
        ("max_samples", None, "50", 50),
        ("precision", "1%", "2%", 0.01),
        ("enabled", True, False, True),
        ("enabled", None, True, True),
        ("fail_on_improvement", None, True, True),
        ("json", "/tmp/a.json", "/tmp/b.json", Path("/tmp/a.json")),
        ("markdown", None, "/tmp/b.md", Path("/tmp/b.md")),
    ],
)
def test_cli_beats_ini_beats_default(
    field: str, cli: object, ini: object, expected: object
) -> None:
    assert getattr(resolve({field: cli}, {field: ini}), field) == expected


def test_save_implies_enabled() -> None:
    settings = resolve({"save": True})
    assert settings.save and settings.enabled
    assert resolve(ini={"save": True}).enabled


def test_relative_dir_is_under_the_rootdir_and_absolute_dir_is_kept() -> None:
    assert resolve(ini={"dir": "perf/baselines"}).dir == ROOT / "perf" / "baselines"
    assert resolve({"dir": "/abs/dir"}, {"dir": "rel"}).dir == Path("/abs/dir")


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolve().threshold = 0.5  # type: ignore[misc]


# --- parsing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [("5%", 0.05), (" 12.5% ", 0.125), ("0.05", 0.05), (0.3, 0.3), ("99%", 0.99), ("1e-3", 0.001)],
)
def test_parse_fraction_or_percent(text: object, expected: float) -> None:
    assert parse_fraction_or_percent(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    "cli, message",
    [
        (
            {"threshold": "abc"},
            "invalid --gpubench-threshold 'abc': expected a percentage such as 5%",
        ),
        (
            {"threshold": "5"},
            "invalid --gpubench-threshold '5': expected a percentage such as 5% "
            "(a bare number must be a fraction < 1)",
        ),
        (
            {"threshold": "0%"},
            "invalid --gpubench-threshold '0%': "
            "expected a percentage between 0% and 100% such as 5%",
        ),
        (
            {"threshold": "100%"},
            "invalid --gpubench-threshold '100%': "
            "expected a percentage between 0% and 100% such as 5%",
        ),
        (
            {"precision": "-1%"},
            "invalid --gpubench-precision '-1%': "
            "expected a percentage between 0% and 100% such as 5%",
        ),
        (
            {"alpha": "2"},
            "invalid --gpubench-alpha '2': "
            "expected a significance level between 0 and 1 such as 0.01",
        ),
        (
            {"alpha": "often"},
            "invalid --gpubench-alpha 'often': expected a significance level such as 0.01",
        ),
        (
            {"timer": "gpu"},
            "invalid --gpubench-timer 'gpu': expected one of "
            "auto, cuda-graph, cuda-event, cuda-event-cold, wall",
        ),
        (
            {"budget_s": "0"},
            "invalid --gpubench-budget-s '0': expected a positive number of seconds such as 1.0",
        ),
        (
            {"budget_s": "nan"},
            "invalid --gpubench-budget-s 'nan': expected a positive number of seconds such as 1.0",
        ),
        (
            {"min_samples": "ten"},
            "invalid --gpubench-min-samples 'ten': expected a whole number such as 10",
        ),
        (
            {"max_samples": "1"},
            "invalid --gpubench-max-samples '1': expected a whole number of at least 2",
        ),
    ],
)
def test_invalid_cli_values_name_the_option_the_value_and_the_remedy(
    cli: dict[str, object], message: str
) -> None:
    assert config_error(cli) == message


def test_invalid_ini_values_name_the_ini_key() -> None:
    assert config_error(ini={"threshold": "abc"}) == (
        "invalid ini gpubench_threshold 'abc': expected a percentage such as 5%"
    )
    assert config_error(ini={"enabled": "maybe"}) == (
        "invalid ini gpubench_enabled 'maybe': expected true or false"
    )


def test_a_valid_cli_value_hides_an_invalid_ini_value() -> None:
    assert resolve({"threshold": "10%"}, {"threshold": "abc"}).threshold == 0.1


def test_min_samples_above_max_samples_is_refused() -> None:
    assert config_error({"min_samples": "50", "max_samples": "20"}) == (
        "invalid sample bounds: min_samples 50 exceeds max_samples 20: "
        "raise --gpubench-max-samples or lower --gpubench-min-samples"
    )


def test_config_errors_are_gpubench_errors() -> None:
    assert issubclass(ConfigError, GpubenchError)


# --- the marker -----------------------------------------------------------------------------


def test_with_marker_overrides_the_session_settings() -> None:
    session = resolve({"threshold": "5%", "timer": "wall"})
    marked = session.with_marker({"threshold": "30%", "min_samples": 3, "budget_s": 0.5})
    assert (marked.threshold, marked.min_samples, marked.budget_s) == (0.3, 3, 0.5)
    assert marked.timer == "wall"  # untouched by the marker
    assert session.threshold == 0.05  # the session's settings are not changed


def test_with_marker_ignores_annotations() -> None:
    session = resolve()
    assert session.with_marker({"group": "gemm", "bytes": 1e9, "flops": 2e12}) == session


def test_with_marker_refuses_invalid_values() -> None:
    with pytest.raises(ConfigError) as info:
        resolve().with_marker({"threshold": "abc"})
    assert str(info.value) == (
        "invalid @pytest.mark.gpubench(threshold=...) 'abc': expected a percentage such as 5%"
    )


def test_with_marker_checks_the_bounds_against_the_session_settings() -> None:
    session = resolve({"max_samples": "500"})
    assert session.with_marker({"min_samples": 300}).min_samples == 300
    with pytest.raises(ConfigError, match="min_samples 300 exceeds max_samples 200"):
        resolve().with_marker({"min_samples": 300})


def test_marker_keys_are_the_marker_settings_then_the_annotations() -> None:
    assert ", ".join(marker_keys()) == ALLOWED


@pytest.mark.parametrize("key", ["treshold", "save", "enabled", "dir", "json"])
def test_check_marker_keywords_refuses_unknown_keywords(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_marker_keywords({"threshold": "5%", key: 1}, "t.py::test_a")
    assert str(info.value) == (
        f"t.py::test_a: unknown keyword {key!r} in @pytest.mark.gpubench; expected one of {ALLOWED}"
    )


def test_check_marker_keywords_accepts_every_known_keyword() -> None:
    check_marker_keywords(
        {
            "threshold": "10%",
            "alpha": 0.05,
            "timer": "cuda-event",
            "budget_s": 0.5,
            "min_samples": 5,
            "max_samples": 50,
            "precision": "1%",
            "group": "gemm",
            "bytes": 1 << 20,
            "flops": 2e9,
        },
        "t.py::test_a",
    )


@pytest.mark.parametrize(
    "value", [-1, 0, True, "1GB", float("inf"), float("nan"), -float("inf"), 10**400]
)
def test_check_marker_keywords_refuses_invalid_work(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        check_marker_keywords({"bytes": value}, "t.py::test_a")
    assert str(info.value) == (
        f"invalid t.py::test_a: @pytest.mark.gpubench(bytes=...) {value!r:.60}: "
        "expected a positive finite number of bytes"
    )


@pytest.mark.parametrize("group", [123, 1.5, ["a"], b"gemm"])
def test_check_marker_keywords_refuses_a_group_that_is_not_a_string(group: object) -> None:
    with pytest.raises(ConfigError) as info:
        check_marker_keywords({"group": group}, "t.py::test_a")
    assert str(info.value) == (
        f"invalid t.py::test_a: @pytest.mark.gpubench(group=...) {group!r}: "
        "expected a string such as 'gemm'"
    )


def test_check_marker_keywords_refuses_invalid_setting_values() -> None:
    with pytest.raises(ConfigError, match=r"@pytest\.mark\.gpubench\(timer=\.\.\.\) 'gpu'"):
        check_marker_keywords({"timer": "gpu"}, "t.py::test_a")


def test_check_marker_keywords_names_the_test_of_an_invalid_value() -> None:
    with pytest.raises(ConfigError) as info:
        check_marker_keywords({"threshold": "abc"}, "t.py::test_a")
    assert "t.py::test_a" in str(info.value)


# --- the option table -----------------------------------------------------------------------


def test_options_follow_the_naming_rules() -> None:
    for spec in OPTIONS:
        assert spec.ini == spec.dest == "gpubench_" + spec.field
        assert spec.flag.startswith("--gpubench")
        assert "_" not in spec.flag
        assert spec.help[0].isupper(), spec.help
        assert not spec.help.endswith("."), spec.help
        assert spec.field in {f.name for f in dataclasses.fields(Settings)}
        assert spec.is_flag or spec.metavar, spec.field
    assert {s.flag for s in OPTIONS} >= {"--gpubench", "--gpubench-save", "--gpubench-budget-s"}


def test_option_defaults_match_the_dataclass_defaults() -> None:
    defaults = Settings()
    for spec in OPTIONS:
        if spec.field != "dir":
            assert getattr(defaults, spec.field) == spec.default, spec.field
    assert TIMERS[0] == "auto"
