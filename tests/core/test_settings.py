"""Unit tests of core/settings.py: precedence, parsing and the messages of errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_gpubench.core.errors import ConfigError, GpubenchError
from pytest_gpubench.core.settings import (
    MEASURE_FIELDS,
    OPTIONS,
    TIMERS,
    MarkerSpec,
    MeasureSettings,
    Settings,
    check_marker_keywords,
    marker_keys,
    parse_fraction_or_percent,
)

ROOT = Path("/project")
ALLOWED = (
    "accept, threshold, memory_threshold, memory_slack, alpha, timer, budget_s, min_samples, "
    "max_samples, precision, group, bytes, flops"
)


def resolve(cli: dict[str, object] | None = None, ini: dict[str, object] | None = None) -> Settings:
    return Settings.resolve(cli or {}, ini or {}, ROOT)


def value(settings: Settings, field: str) -> object:
    """A setting by its option's field: the session's, or its measurements' defaults."""
    return getattr(settings.measure if field in MEASURE_FIELDS else settings, field)


def config_error(cli: dict[str, object] | None = None, ini: dict[str, object] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(cli, ini)
    return str(info.value)


# --- precedence -----------------------------------------------------------------------------


def test_defaults() -> None:
    assert resolve() == Settings(dir=ROOT / ".gpubench", evidence=ROOT / "gpubench-evidence")
    settings = resolve()
    assert (settings.enabled, settings.save, settings.fail_on_improvement) == (False,) * 3
    assert settings.allow_incomparable is False
    assert (settings.confirm, settings.sessions) == (6, 1)
    measure = settings.measure
    assert measure == MeasureSettings()
    assert (measure.threshold, measure.alpha, measure.timer) == (0.05, 0.01, "auto")
    assert measure.min_samples <= measure.max_samples
    assert settings.json is None and settings.markdown is None
    assert settings.benchmark_json is None and settings.child is None
    assert settings.reports == ()


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
        ("allow_incomparable", None, True, True),
        ("confirm", "0", "5", 0),
        ("confirm", None, "5", 5),
        ("confirm", None, "", 6),
        ("json", "/tmp/a.json", "/tmp/b.json", Path("/tmp/a.json")),
        ("markdown", None, "/tmp/b.md", Path("/tmp/b.md")),
        ("benchmark_json", "/tmp/a.json", "/tmp/b.json", Path("/tmp/a.json")),
        ("benchmark_json", None, "/tmp/b.json", Path("/tmp/b.json")),
    ],
)
def test_cli_beats_ini_beats_default(
    field: str, cli: object, ini: object, expected: object
) -> None:
    assert value(resolve({field: cli}, {field: ini}), field) == expected


@pytest.mark.parametrize("cli, ini, expected", [("3", "5", 3), (None, "5", 5), (None, "", 1)])
def test_sessions_cli_beats_ini_beats_default(cli: object, ini: object, expected: int) -> None:
    assert resolve({"save": True, "sessions": cli}, {"sessions": ini}).sessions == expected


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_sessions_without_save_is_refused(where: str) -> None:
    values = {"sessions": "3"}
    message = config_error(values if where == "cli" else None, values if where == "ini" else None)
    assert message == (
        "--gpubench-sessions 3 records sessions into the baseline: use it with --gpubench-save"
    )
    assert resolve({"sessions": "1"}).sessions == 1  # one session is what any run records


@pytest.mark.parametrize(
    "cli, ini, expected", [(True, False, True), (None, "true", True), (None, "", False)]
)
def test_accept_cli_beats_ini_beats_default(cli: object, ini: object, expected: bool) -> None:
    """What a save accepts is a measurement setting: the session's default of every test."""
    settings = resolve({"save": True, "accept": cli}, {"accept": ini})
    assert settings.measure.accept is expected


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_accept_without_save_is_refused(where: str) -> None:
    values = {"accept": True}
    message = config_error(values if where == "cli" else None, values if where == "ini" else None)
    assert message == (
        "--gpubench-accept takes confirmed changes into the baseline: use it with --gpubench-save"
    )


def test_a_fresh_process_that_confirms_takes_the_users_accept_without_a_save() -> None:
    """A child confirming a verdict gets the user's options, --gpubench-accept included, and
    never saves: not an error there (its gate accepts nothing)."""
    settings = Settings.resolve({"accept": True}, {}, ROOT, Path("/tmp/c.json"))
    assert settings.measure.accept and not settings.save and settings.confirming


def test_a_child_writes_its_results_file_and_no_report_of_the_users() -> None:
    """The file a fresh process writes its results to comes from the plugin (an environment
    variable), never from an option or an ini key; it enables timing."""
    assert "child" not in {spec.field for spec in OPTIONS}
    settings = Settings.resolve(
        {"json": "/tmp/r.json", "markdown": "/tmp/r.md"}, {}, Path("/root"), Path("/tmp/c.json")
    )
    assert settings.child == Path("/tmp/c.json") and settings.enabled
    assert settings.reports == ()


def test_a_child_that_saves_records_a_session_and_one_that_does_not_confirms() -> None:
    child = Path("/tmp/c.json")
    assert Settings.resolve({}, {}, Path("/root"), child).confirming
    assert not Settings.resolve({"save": True}, {}, Path("/root"), child).confirming
    assert not Settings.resolve({}, {}, Path("/root")).confirming  # the user's own run


def test_reports_are_the_files_asked_for_with_what_each_is() -> None:
    settings = resolve({"json": "/r/a.json", "markdown": "/r/b.md", "benchmark_json": "/r/c.json"})
    assert settings.reports == (
        (Path("/r/a.json"), "JSON report"),
        (Path("/r/b.md"), "Markdown report"),
        (Path("/r/c.json"), "pytest-benchmark JSON report"),
    )
    assert resolve({"markdown": "/r/b.md"}).reports == ((Path("/r/b.md"), "Markdown report"),)


def test_save_implies_enabled() -> None:
    settings = resolve({"save": True})
    assert settings.save and settings.enabled
    assert resolve(ini={"save": True}).enabled


def test_disable_turns_timing_off_whatever_enables_it() -> None:
    assert not resolve({"enabled": True, "disable": True}).enabled
    assert not resolve({"enabled": True}, {"disable": "true"}).enabled
    assert resolve({"enabled": True}).enabled


@pytest.mark.parametrize(
    ("values", "culprit"),
    [({"save": True}, "--gpubench-save"), ({"against": "main"}, "--gpubench-against main")],
)
def test_disable_with_a_run_that_measures_is_refused(
    values: dict[str, object], culprit: str
) -> None:
    assert config_error({**values, "disable": True}) == (
        f"--gpubench-disable runs each function once, untimed, and {culprit} measures: "
        "leave out one of the two"
    )


def test_only_and_skip_together_are_refused() -> None:
    assert config_error({"only": True}, {"skip": "true"}) == (
        "--gpubench-only runs only the tests that benchmark and --gpubench-skip skips them: "
        "give one of the two"
    )


def test_relative_dir_is_under_the_rootdir_and_absolute_dir_is_kept() -> None:
    assert resolve(ini={"dir": "perf/baselines"}).dir == ROOT / "perf" / "baselines"
    assert resolve({"dir": "/abs/dir"}, {"dir": "rel"}).dir == Path("/abs/dir")


def test_settings_are_frozen() -> None:
    settings = resolve()
    assert settings.confirm == 6 and settings.measure.threshold == 0.05
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.confirm = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.measure.threshold = 0.5  # type: ignore[misc]


def test_measure_and_session_settings_are_disjoint_and_cover_every_option() -> None:
    session = {f.name for f in dataclasses.fields(Settings)} - {"measure", "child", "least_family"}
    assert MEASURE_FIELDS == {f.name for f in dataclasses.fields(MeasureSettings)}
    assert not session & MEASURE_FIELDS
    assert {spec.field for spec in OPTIONS} == session | MEASURE_FIELDS
    # A marker may change a measurement's settings, and only those.
    assert {spec.field for spec in OPTIONS if spec.in_marker} == MEASURE_FIELDS


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
            "auto, cuda-graph, cupti-graph, cupti, cuda-event, cuda-event-cold, wall",
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
        (
            {"confirm": "two"},
            "invalid --gpubench-confirm 'two': expected a whole number such as 2 "
            "(0 turns confirmation off)",
        ),
        (
            {"confirm": "-1"},
            "invalid --gpubench-confirm '-1': expected a whole number from 0 to 20 such as 2",
        ),
        (
            {"confirm": "21"},
            "invalid --gpubench-confirm '21': expected a whole number from 0 to 20 such as 2",
        ),
        (
            {"save": True, "sessions": "0"},
            "invalid --gpubench-sessions '0': "
            "expected a whole number of sessions from 1 to 50 such as 5",
        ),
        (
            {"save": True, "sessions": "many"},
            "invalid --gpubench-sessions 'many': expected a whole number of sessions such as 5",
        ),
        (
            {"allow_incomparable": "perhaps"},
            "invalid --gpubench-allow-incomparable 'perhaps': expected true or false",
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
    assert resolve({"threshold": "10%"}, {"threshold": "abc"}).measure.threshold == 0.1


def test_min_samples_above_max_samples_is_refused() -> None:
    assert config_error({"min_samples": "50", "max_samples": "20"}) == (
        "invalid sample bounds: min_samples 50 exceeds max_samples 20: "
        "raise --gpubench-max-samples or lower --gpubench-min-samples"
    )


def test_config_errors_are_gpubench_errors() -> None:
    assert issubclass(ConfigError, GpubenchError)


# --- the marker -----------------------------------------------------------------------------


def test_with_marker_overrides_the_session_settings() -> None:
    session = resolve({"threshold": "5%", "timer": "wall"}).measure
    marked = session.with_marker({"threshold": "30%", "min_samples": 3, "budget_s": 0.5})
    assert (marked.threshold, marked.min_samples, marked.budget_s) == (0.3, 3, 0.5)
    assert marked.timer == "wall"  # untouched by the marker
    assert session.threshold == 0.05  # the session's settings are not changed


def test_a_marker_accepts_the_changes_of_its_test_or_refuses_them() -> None:
    """``accept=True`` on one test's marker; ``accept=False`` keeps a change of that test out
    of a save run with --gpubench-accept."""
    assert resolve({"save": True}).measure.with_marker({"accept": True}).accept is True
    accepting = resolve({"save": True, "accept": True}).measure
    assert accepting.with_marker({"accept": False}).accept is False
    with pytest.raises(ConfigError) as info:
        accepting.with_marker({"accept": "maybe"})
    assert str(info.value) == (
        "invalid @pytest.mark.gpubench(accept=...) 'maybe': expected true or false"
    )


def test_with_marker_ignores_annotations() -> None:
    session = resolve().measure
    assert session.with_marker({"group": "gemm", "bytes": 1e9, "flops": 2e12}) == session


def test_with_marker_refuses_invalid_values() -> None:
    with pytest.raises(ConfigError) as info:
        resolve().measure.with_marker({"threshold": "abc"})
    assert str(info.value) == (
        "invalid @pytest.mark.gpubench(threshold=...) 'abc': expected a percentage such as 5%"
    )


def test_with_marker_checks_the_bounds_against_the_session_settings() -> None:
    session = resolve({"max_samples": "500"}).measure
    assert session.with_marker({"min_samples": 300}).min_samples == 300
    with pytest.raises(ConfigError, match="min_samples 300 exceeds max_samples 200"):
        resolve().measure.with_marker({"min_samples": 300})


def test_check_marker_keywords_resolves_settings_and_annotations_over_the_session() -> None:
    session = resolve({"threshold": "7%", "timer": "wall"})
    spec = check_marker_keywords(
        {"threshold": "10%", "group": "gemm", "bytes": 1 << 20, "flops": 3}, "t.py::test_a", session
    )
    assert spec == MarkerSpec(
        dataclasses.replace(session.measure, threshold=0.1),
        group="gemm",
        bytes=float(1 << 20),
        flops=3.0,
    )
    assert isinstance(spec.bytes, float) and isinstance(spec.flops, float)
    # Without a marker: the session's settings, no annotations; without a session: defaults.
    assert check_marker_keywords({}, "t.py::test_a", session) == MarkerSpec(session.measure)
    assert check_marker_keywords({}, "t.py::test_a") == MarkerSpec(MeasureSettings())


def test_check_marker_keywords_checks_the_bounds_against_the_session_and_names_the_test() -> None:
    session = resolve({"max_samples": "500"})
    spec = check_marker_keywords({"min_samples": 300}, "t.py::test_a", session)
    assert (spec.measure.min_samples, spec.measure.max_samples) == (300, 500)
    with pytest.raises(ConfigError) as info:
        check_marker_keywords({"min_samples": 300}, "t.py::test_a")
    assert str(info.value) == (
        "t.py::test_a: invalid sample bounds: min_samples 300 exceeds max_samples 200: "
        "raise --gpubench-max-samples or lower --gpubench-min-samples"
    )


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
    fields = {f.name for f in dataclasses.fields(Settings)} | MEASURE_FIELDS
    for spec in OPTIONS:
        assert spec.ini == spec.dest == "gpubench_" + spec.field
        assert spec.flag.startswith("--gpubench")
        assert "_" not in spec.flag
        assert spec.field in fields
        assert spec.is_flag or spec.metavar, spec.field
        assert spec.help[0].isupper(), spec.help
        assert not spec.help.endswith("."), spec.help
    assert {s.flag for s in OPTIONS} >= {
        "--gpubench",
        "--gpubench-save",
        "--gpubench-budget-s",
        "--gpubench-confirm",
        "--gpubench-sessions",
        "--gpubench-allow-incomparable",
        "--gpubench-benchmark-json",
    }


def test_a_flag_turns_on_what_is_off_by_default() -> None:
    # An option's default is its dataclass field's alone; a flag (given without a value)
    # can only switch its setting on.
    defaults = Settings()
    for spec in OPTIONS:
        if spec.is_flag:
            assert value(defaults, spec.field) is False, spec.field
    assert TIMERS[0] == "auto"
    assert set(TIMERS) == {
        "auto", "cuda-graph", "cupti-graph", "cupti", "cuda-event", "cuda-event-cold", "wall"
    }  # fmt: skip
