"""Settings: the session's (built once from CLI and ini) and each measurement's.

Two frozen objects. ``Settings`` holds what the whole session shares (enabled, save, paths,
confirmations, sessions to record, what fails); its ``measure`` field holds the defaults of
``MeasureSettings`` (threshold, alpha, timer, budget, sample bounds, precision, whether a
save accepts a change), the only settings a ``@pytest.mark.gpubench(...)`` marker may change
for one test.

Precedence, highest first: marker keywords (closest marker first), command-line options,
ini keys, built-in defaults. This module does not import pytest: the plugin hands it plain
mappings, so every rule here is testable on its own.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

# The report files a session may write, named as errors name them.
JSON_REPORT = "JSON report"
MARKDOWN_REPORT = "Markdown report"
BENCHMARK_REPORT = "pytest-benchmark JSON report"

TIMERS = ("auto", "cuda-graph", "cupti-graph", "cupti", "cuda-event", "cuda-event-cold", "wall")


def _percent(raw: str, example: str) -> float:
    """'5%' -> 0.05; a bare number as it is, if under 1 (a bare 5 is ambiguous)."""
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"expected a percentage such as {example}") from None
    if not raw.endswith("%") and value >= 1:
        raise ValueError(
            f"expected a percentage such as {example} (a bare number must be a fraction < 1)"
        )
    return value


def parse_fraction_or_percent(text: object) -> float:
    """'5%' -> 0.05; 0.05 -> 0.05. A bare number of 1 or more is ambiguous and refused."""
    value = _percent(str(text).strip(), "5%")
    if not 0 < value < 1:
        raise ValueError("expected a percentage between 0% and 100% such as 5%")
    return value


def parse_memory_threshold(text: object) -> float:
    """'10%' -> 0.1, any percentage from 0%; 'off' -> infinity (peak memory never fails)."""
    raw = str(text).strip()
    if raw.lower() == "off":
        return math.inf
    value = _percent(raw, "10%, or off")
    if not 0 <= value < math.inf:
        raise ValueError("expected a percentage of 0% or more such as 10%, or off")
    return value


# Units of a size in bytes, as --gpubench-memory-slack takes them.
BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9}
BYTE_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30})


def parse_bytes(text: object) -> int:
    """'64MiB' -> 67108864, '1 GB' -> 10**9, 4096 -> 4096: a size in bytes, 0 or more."""
    raw = str(text).strip().lower().replace(" ", "")
    number = raw.rstrip("kmgib")
    unit = raw[len(number) :]
    try:
        value = float(number) * BYTE_UNITS[unit]
    except (ValueError, KeyError):
        raise ValueError("expected a size such as 1MiB, 64MiB or 4096 (bytes)") from None
    if not 0 <= value < math.inf:
        raise ValueError("expected a size of 0 bytes or more such as 1MiB")
    return int(value)


def parse_alpha(text: object) -> float:
    try:
        value = float(str(text))
    except ValueError:
        raise ValueError("expected a significance level such as 0.01") from None
    if not 0 < value < 1:
        raise ValueError("expected a significance level between 0 and 1 such as 0.01")
    return value


def parse_positive_float(text: object) -> float:
    try:
        value = float(str(text))
    except ValueError:
        value = math.nan
    if not value > 0:
        raise ValueError("expected a positive number of seconds such as 1.0")
    return value


def _whole(
    low: int, high: int | None, example: int, of: str = "", note: str = ""
) -> Callable[[object], int]:
    """A parser of a whole number from ``low`` to ``high`` (None: no bound), whose ValueError
    says so in the option's words: a whole number ``of`` (" of runs"), ``example``, ``note``."""
    unreadable = f"expected a whole number{of} such as {example}{note}"
    outside = f"expected a whole number{of} from {low} to {high} such as {example}"
    if high is None:
        outside = f"expected a whole number{of} of at least {low}"

    def parse(text: object) -> int:
        try:
            value = int(str(text))
        except ValueError:
            raise ValueError(unreadable) from None
        if value < low or (high is not None and value > high):
            raise ValueError(outside)
        return value

    return parse


def _text(expected: str, choices: tuple[str, ...] | None = None) -> Callable[[object], str]:
    """A parser of any text but blanks, or of one of ``choices``; its ValueError says
    ``expected``."""

    def parse(text: object) -> str:
        value = str(text).strip()
        if not value or (choices is not None and value not in choices):
            raise ValueError(expected)
        return value

    return parse


parse_timer = _text(f"expected one of {', '.join(TIMERS)}", TIMERS)
parse_count = _whole(2, None, 10)
parse_confirmations = _whole(0, 20, 2, note=" (0 turns confirmation off)")
parse_sessions = _whole(1, 50, 5, " of sessions")
parse_keep_runs = _whole(0, 10000, 20, " of runs", " (0: keep none)")
parse_pairs = _whole(1, 20, 3, " of pairs")


def parse_revision(text: object) -> str:
    value = str(text).strip()
    if not value or value.startswith("-") or any(c.isspace() or ord(c) < 32 for c in value):
        raise ValueError("expected a git revision such as main, v1.2 or a commit")
    return value


parse_command = _text("expected a shell command such as 'pip install -e .'")
# A -k style expression, as text (the plugin layer compiles it with pytest's parser).
parse_expression = _text("expected a -k style expression such as 'softmax and not fp16'")

CHANGED_ACTIONS = ("work", "fail", "warn")
parse_changed = _text("expected work, fail or warn", CHANGED_ACTIONS)

# How the two sides of --gpubench-against are timed: both in one process where it can,
# alternately (versus/lockstep.py), else in duos; or a fresh process each (versus/ab.py). The
# default since the example suite's A/A run at 2% cost 1.45-1.65 times a plain run in lockstep
# on an H200 with no false verdict (docs/performance.md), where processes cost 8 times.
PAIRINGS = ("lockstep", "processes")
parse_pairing = _text("expected lockstep or processes", PAIRINGS)


def parse_bool(text: object) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected true or false")


def parse_path(text: object) -> Path:
    return Path(str(text))


@dataclass(frozen=True)
class OptionSpec:
    """One setting: its CLI flag, ini key and parser. Its default is its field's in
    ``Settings`` or ``MeasureSettings``; a marker may set the latter's."""

    field: str
    help: str
    parse: Callable[[object], Any]
    metavar: str | None = None

    @property
    def is_flag(self) -> bool:
        """A switch given without a value (``--gpubench-save``)."""
        return self.parse is parse_bool

    @property
    def in_marker(self) -> bool:
        return self.field in MEASURE_FIELDS

    @property
    def flag(self) -> str:
        if self.field == "enabled":
            return "--gpubench"
        return "--gpubench-" + self.field.replace("_", "-")

    @property
    def ini(self) -> str:
        return "gpubench_" + self.field

    dest = ini  # argparse's attribute of the option: the ini key's name


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "enabled",
        "Time gpubench tests and judge them against the stored baselines",
        parse_bool,
    ),
    OptionSpec(
        "save",
        "Measure and add this session to the baselines of this GPU for the tests that ran "
        "(implies --gpubench)",
        parse_bool,
    ),
    OptionSpec(
        "accept",
        "With --gpubench-save: take each test's session into the baselines whatever it judged: "
        "a confirmed change (regressed, improved, incomparable) as a new epoch, an unstable "
        "session, one that would widen its test's gate beyond its threshold; without it these "
        "are left out of the save, and a change or a widened gate fails its test",
        parse_bool,
    ),
    OptionSpec(
        "accept_only",
        "With --gpubench-save: accept (as --gpubench-accept) only in the tests that this "
        "expression matches, as -k matches them, such as 'softmax and not fp16'; the other "
        "tests are saved as without --gpubench-accept",
        parse_expression,
        metavar="EXPR",
    ),
    OptionSpec(
        "dir",
        "Directory of the baseline files (default: .gpubench under the rootdir)",
        parse_path,
        metavar="DIR",
    ),
    OptionSpec(
        "keep_runs",
        "Keep the result files of this many latest runs in the runs folder of the baseline "
        "directory, for gpubench compare last~1 last (default 20; 0: keep none)",
        parse_keep_runs,
        metavar="N",
    ),
    OptionSpec(
        "threshold",
        "Smallest slowdown that fails a test, such as 5% (default 5%)",
        parse_fraction_or_percent,
        metavar="PERCENT",
    ),
    OptionSpec(
        "memory_threshold",
        "Smallest growth of a call's peak GPU memory that fails its test, such as 10% "
        "(default 5%; it must also exceed --gpubench-memory-slack); off: never",
        parse_memory_threshold,
        metavar="PERCENT",
    ),
    OptionSpec(
        "memory_slack",
        "Growth of a call's peak GPU memory that never fails, however large a share, such as "
        "64MiB, or 4096 for bytes (default 1MiB)",
        parse_bytes,
        metavar="SIZE",
    ),
    OptionSpec(
        "alpha",
        "Significance level of the whole run: the chance it may take of failing a test whose "
        "code did not change, divided among the measurements judged (default 0.01)",
        parse_alpha,
        metavar="LEVEL",
    ),
    OptionSpec(
        "timer",
        f"Timer: {', '.join(TIMERS)} (default auto: a validated CUDA graph, its kernel "
        "time where launch gaps are a large share of it, else the kernel time from CUPTI; "
        "wall on a machine without a GPU)",
        parse_timer,
        metavar="NAME",
    ),
    OptionSpec(
        "budget_s",
        "Time budget of one measurement in seconds, calibration and warmup included (default 1.0)",
        parse_positive_float,
        metavar="SECONDS",
    ),
    OptionSpec(
        "min_samples",
        "Fewest samples per measurement, unless the budget runs out first (default 20)",
        parse_count,
        metavar="N",
    ),
    OptionSpec(
        "max_samples",
        "Most samples per measurement (default 200)",
        parse_count,
        metavar="N",
    ),
    OptionSpec(
        "precision",
        "Stop sampling once the 95% confidence interval of the median is "
        "within this of it, such as 0.5% (default 0.5%)",
        parse_fraction_or_percent,
        metavar="PERCENT",
    ),
    OptionSpec(
        "fail_on_improvement",
        "Fail tests that got significantly faster, so stale baselines get refreshed",
        parse_bool,
    ),
    OptionSpec(
        "confirm",
        "Time a flagged or borderline test again in up to this many fresh processes, two at "
        "a time, judging all its sessions after each pair (default 6; 0: the first "
        "session's verdict is final)",
        parse_confirmations,
        metavar="N",
    ),
    OptionSpec(
        "sessions",
        "With --gpubench-save: record this many sessions, each in a fresh process (default 1)",
        parse_sessions,
        metavar="N",
    ),
    OptionSpec(
        "allow_incomparable",
        "Pass tests whose baseline was taken by another timer (reported as incomparable; they "
        "fail by default); implies --gpubench-changed=warn",
        parse_bool,
    ),
    OptionSpec(
        "changed",
        "What a test whose launches match no binary of its baseline does (another binary): "
        "work (default) fails when its kernels differ and warns when only their "
        "configuration does (grid, block, registers, shared memory: an autotuner's choice), "
        "fail fails on both, warn on neither",
        parse_changed,
        metavar="work|fail|warn",
    ),
    OptionSpec(
        "against",
        "Judge each gpubench test against this git revision (a branch, tag or commit; in CI "
        "the merge-base with the target branch), measured in the same job: both sides in "
        "alternating fresh processes on this GPU, no stored baseline needed",
        parse_revision,
        metavar="REF",
    ),
    OptionSpec(
        "build",
        "With --gpubench-against: a shell command run in the revision's checkout before it "
        "is measured (build CUDA extensions and anything else that must be compiled)",
        parse_command,
        metavar="CMD",
    ),
    OptionSpec(
        "pairing",
        "With --gpubench-against: lockstep (default) times both sides of a test in this "
        "process, alternately, where one process can hold both (else in duos: a fresh "
        "process per side at once); processes gives each side its own fresh processes",
        parse_pairing,
        metavar="lockstep|processes",
    ),
    OptionSpec(
        "pairs",
        "With --gpubench-against: pairs before the first verdict (default in lockstep 1, "
        "from this process, and 2 duos; with processes 3 pairs of fresh processes, one per "
        "side); the tests still unsure get more (in lockstep 4 from this process, 6 duos; "
        "with processes 7), none with --gpubench-confirm 0",
        parse_pairs,
        metavar="N",
    ),
    OptionSpec(
        "json",
        "Write every result, samples included, to this JSON file",
        parse_path,
        metavar="PATH",
    ),
    OptionSpec(
        "markdown",
        "Write the summary table to this Markdown file",
        parse_path,
        metavar="PATH",
    ),
    OptionSpec(
        "evidence",
        "Directory of the evidence of failed tests (a profiler trace of one call, Chrome/"
        "Perfetto JSON), for a CI artifact (default: gpubench-evidence under the rootdir)",
        parse_path,
        metavar="DIR",
    ),
    OptionSpec(
        "profile",
        "Keep a profiler trace of one call of every measurement in the evidence directory, "
        "not only of those that fail",
        parse_bool,
    ),
    OptionSpec(
        "ncu",
        "Add Nsight Compute's basic metrics (DRAM and SM throughput, achieved occupancy) of "
        "one call of a failing test's kernels to its evidence (each side's against a "
        "revision): a fresh process under ncu, which must be on PATH, once per failing test",
        parse_bool,
    ),
    OptionSpec(
        "energy",
        "Measure the energy of a call (NVML's energy counter over about 1 s of calls, "
        "where the GPU reports it): shown, never judged",
        parse_bool,
    ),
    OptionSpec(
        "only",
        "Run only the tests that use the gpubench fixture (or the benchmark fixture of "
        "--gpubench-benchmark-fixture); skip the rest",
        parse_bool,
    ),
    OptionSpec(
        "skip",
        "Skip the tests that use the gpubench fixture (or the benchmark fixture of "
        "--gpubench-benchmark-fixture)",
        parse_bool,
    ),
    OptionSpec(
        "disable",
        "Run each benchmarked function once, untimed, as without --gpubench, even where "
        "--gpubench is given (pytest-benchmark's --benchmark-disable)",
        parse_bool,
    ),
    OptionSpec(
        "benchmark_fixture",
        "Provide pytest-benchmark's benchmark fixture, timed by gpubench, for suites written "
        "for pytest-benchmark (with pytest-benchmark itself not active: -p no:benchmark)",
        parse_bool,
    ),
    OptionSpec(
        "record_host",
        "Record this host's name in each session saved to the baselines and as machine_info.node "
        "of pytest-benchmark's JSON (by default neither holds it: baselines are committed)",
        parse_bool,
    ),
    OptionSpec(
        "benchmark_json",
        "Write the results in pytest-benchmark's JSON format to this file (for "
        "github-action-benchmark, Bencher and pytest-benchmark compare)",
        parse_path,
        metavar="PATH",
    ),
)

# Marker keywords that describe the test rather than change how it is measured.
ANNOTATION_KEYS = ("group", "bytes", "flops")

# The keywords of pytest-benchmark's @pytest.mark.benchmark, as its plugin checks them: with
# --gpubench-benchmark-fixture, group= names the test's group and the others are accepted
# and not used (gpubench's own settings decide how it samples: docs/guide.md).
BENCHMARK_MARKER_KEYS = (
    "max_time",
    "min_rounds",
    "min_time",
    "timer",
    "group",
    "disable_gc",
    "warmup",
    "warmup_iterations",
    "calibration_precision",
    "cprofile",
)


@dataclass(frozen=True)
class MeasureSettings:
    """How one measurement is taken and judged, and whether a save accepts its change; a
    marker may change these for its test."""

    threshold: float = 0.05
    # Peak memory fails when it grew by more than both (settings.OPTIONS): inf, never.
    memory_threshold: float = 0.05
    memory_slack: int = 1 << 20
    alpha: float = 0.01
    timer: str = "auto"
    budget_s: float = 1.0
    min_samples: int = 20
    max_samples: int = 200
    precision: float = 0.005
    accept: bool = False  # a save takes a confirmed change into the history (a new epoch)

    def with_marker(self, keywords: Mapping[str, object]) -> MeasureSettings:
        """Apply the setting keywords of ``@pytest.mark.gpubench``; annotations are ignored."""
        specs = {spec.field: spec for spec in OPTIONS if spec.in_marker}
        changes = {
            key: _parse(specs[key], value, f"@pytest.mark.gpubench({key}=...)")
            for key, value in keywords.items()
            if key in specs
        }
        settings = dataclasses.replace(self, **changes)
        settings.check()
        return settings

    def check(self) -> None:
        if self.min_samples > self.max_samples:
            raise ConfigError(
                f"invalid sample bounds: min_samples {self.min_samples} exceeds max_samples "
                f"{self.max_samples}: raise --gpubench-max-samples or lower --gpubench-min-samples"
            )


MEASURE_FIELDS = frozenset(f.name for f in dataclasses.fields(MeasureSettings))


@dataclass(frozen=True)
class Settings:
    """The session's settings; ``measure`` holds the defaults of every measurement."""

    enabled: bool = False
    save: bool = False
    dir: Path = Path(".gpubench")
    keep_runs: int = 20  # the runs kept under dir/runs (store/runs.py)
    confirm: int = 6
    sessions: int = 1
    fail_on_improvement: bool = False
    allow_incomparable: bool = False
    # Accept only in the tests this -k style expression matches (plugin.measuring).
    accept_only: str | None = None
    changed: str = "work"  # what a changed binary does (CHANGED_ACTIONS)
    against: str | None = None  # a git revision measured in the same job (versus/ab.py)
    build: str | None = None  # a shell command run in that revision's checkout
    # Pairs before the first verdict against it; None: the pairing's own (versus.ab.design_of)
    pairs: int | None = None
    pairing: str = "lockstep"  # how the sides are timed against it (PAIRINGS)
    json: Path | None = None
    markdown: Path | None = None
    benchmark_json: Path | None = None
    evidence: Path = Path("gpubench-evidence")
    profile: bool = False  # keep every measurement's trace, not only those that fail
    ncu: bool = False  # Nsight Compute's metrics in a failure's evidence (run/ncu.py)
    energy: bool = False  # measure each call's energy (timing.energy), informational
    only: bool = False  # run only the tests that benchmark, skip the rest
    skip: bool = False  # skip the tests that benchmark
    disable: bool = False  # benchmarked functions run once, untimed, whatever enables timing
    benchmark_fixture: bool = False  # provide pytest-benchmark's benchmark fixture
    record_host: bool = False  # the host's name in saved sessions and pytest-benchmark's JSON
    child: Path | None = None
    # The least family a run against a revision judges in: a bisect step's, BAD's
    # (run.children.FAMILY_VARIABLE).
    least_family: int = 1
    measure: MeasureSettings = MeasureSettings()

    @classmethod
    def resolve(
        cls,
        cli: Mapping[str, object],
        ini: Mapping[str, object],
        rootdir: Path,
        child: Path | None = None,
    ) -> Settings:
        """Build settings from CLI values (None when not given) and ini values ('' when unset).

        ``child``: this process was started by the plugin (to confirm a verdict or record a
        session) and writes what it measured to this file, and no report of the user's."""
        values: dict[str, Any] = {}
        for spec in OPTIONS:
            raw, origin = cli.get(spec.field), spec.flag
            if raw is None or raw is False:
                raw, origin = ini.get(spec.field), f"ini {spec.ini}"
            if raw is None or raw == "" or raw == [] or raw is False:
                continue
            values[spec.field] = _parse(spec, raw, origin)
        measure = MeasureSettings(**{k: v for k, v in values.items() if k in MEASURE_FIELDS})
        measure.check()
        session = {k: v for k, v in values.items() if k not in MEASURE_FIELDS}
        settings = cls(**session, child=child, measure=measure)
        if settings.only and settings.skip:
            raise ConfigError(
                "--gpubench-only runs only the tests that benchmark and --gpubench-skip skips "
                "them: give one of the two"
            )
        if settings.disable and (settings.save or settings.against is not None):
            measuring = (
                "--gpubench-save" if settings.save else f"--gpubench-against {settings.against}"
            )
            raise ConfigError(
                f"--gpubench-disable runs each function once, untimed, and {measuring} "
                "measures: leave out one of the two"
            )
        enabled = not settings.disable and (
            settings.enabled
            or settings.save
            or settings.child is not None
            or settings.against is not None
        )
        directory = rootdir / settings.dir  # an absolute path stays as it is
        evidence = rootdir / settings.evidence
        settings = dataclasses.replace(settings, dir=directory, evidence=evidence, enabled=enabled)
        if child is not None:  # a side of a comparison measures; its parent compares
            settings = dataclasses.replace(settings, against=None, build=None)
        if settings.sessions > 1 and not settings.save:
            raise ConfigError(
                f"--gpubench-sessions {settings.sessions} records sessions into the baseline: "
                "use it with --gpubench-save"
            )
        if settings.against is not None and settings.save:  # (a child's against is None)
            raise ConfigError(
                f"--gpubench-against {settings.against} judges against a revision measured in "
                "the same job and --gpubench-save records a stored history: run them separately"
            )
        if settings.ncu and enabled and child is None and shutil.which("ncu") is None:
            raise ConfigError(
                "--gpubench-ncu runs failing tests under Nsight Compute, and no ncu is on PATH: "
                "install Nsight Compute (or add its folder to PATH), or leave out --gpubench-ncu"
            )
        if settings.build is not None and settings.against is None:
            raise ConfigError(
                "--gpubench-build builds the revision of --gpubench-against: name the revision"
            )
        # A fresh process confirming a verdict gets the user's options but saves nothing.
        if settings.measure.accept and not settings.save and child is None:
            raise ConfigError(
                "--gpubench-accept takes confirmed changes into the baseline: use it with "
                "--gpubench-save"
            )
        if settings.accept_only is not None and not settings.save and child is None:
            raise ConfigError(
                f"--gpubench-accept-only {settings.accept_only!r} takes the sessions of the tests "
                "it matches into the baseline: use it with --gpubench-save"
            )
        return settings

    @property
    def confirming(self) -> bool:
        """This process is a child started to confirm a verdict, not one recording a session:
        it confirms nothing itself, holds the device from its first test to its last, and
        skips the copy-bandwidth and matmul probes (its parent uses its samples only) unless
        its parent asks for them (a side of a comparison: run.session's measures_floors)."""
        return self.child is not None and not self.save

    @property
    def reports(self) -> tuple[tuple[Path, str], ...]:
        """The report files the user asked for, with what each is (none in a child)."""
        if self.child is not None:
            return ()
        named = (
            (self.json, JSON_REPORT),
            (self.markdown, MARKDOWN_REPORT),
            (self.benchmark_json, BENCHMARK_REPORT),
        )
        return tuple((path, what) for path, what in named if path is not None)


@dataclass(frozen=True)
class MarkerSpec:
    """What a test's ``@pytest.mark.gpubench`` markers say, resolved once per test."""

    measure: MeasureSettings
    group: str | None = None
    bytes: float | None = None
    flops: float | None = None


def marker_keys() -> tuple[str, ...]:
    return tuple(spec.field for spec in OPTIONS if spec.in_marker) + ANNOTATION_KEYS


def check_marker_keywords(
    keywords: Mapping[str, object], where: str, settings: Settings | None = None
) -> MarkerSpec:
    """The measurement settings and annotations of a test marked with ``keywords`` (merged,
    closest marker first) over the session's ``settings``.

    Refuses unknown keywords and invalid values, naming the test (``where``)."""
    allowed = marker_keys()
    for key in keywords:
        if key not in allowed:
            raise ConfigError(
                f"{where}: unknown keyword {key!r} in @pytest.mark.gpubench; "
                f"expected one of {', '.join(allowed)}"
            )
    work = {
        key: check_work(key, keywords.get(key), f"{where}: @pytest.mark.gpubench({key}=...)")
        for key in ("bytes", "flops")
    }
    group = keywords.get("group")
    if group is not None and not isinstance(group, str):
        raise ConfigError(
            f"invalid {where}: @pytest.mark.gpubench(group=...) {group!r:.60}: expected a "
            "string such as 'gemm'"
        )
    try:
        measure = (settings or Settings()).measure.with_marker(keywords)
        return MarkerSpec(measure, group, work["bytes"], work["flops"])
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def check_work(key: str, value: object, where: str) -> float | None:
    """``bytes`` or ``flops`` of one call as a float; refuses what is not a positive finite
    number (a bool, a string, NaN, infinity) naming ``where`` it came from."""
    if value is None:
        return None
    number = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value) if abs(value) < 1e300 else math.inf  # 10**400 overflows float()
    if not (math.isfinite(number) and number > 0):
        raise ConfigError(
            f"invalid {where} {value!r:.60}: expected a positive finite number of {key}"
        )
    return number


def _parse(spec: OptionSpec, raw: object, origin: str) -> Any:
    try:
        return spec.parse(raw)
    except ValueError as exc:
        raise ConfigError(f"invalid {origin} {raw!r}: {exc}") from None
