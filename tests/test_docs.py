"""The documentation a new user follows: links resolve, it talks of this repository only, and
the numbers it copies (tables of what a command prints, the rule's prior) are what the
committed files and the code say."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from support import ROOT, bench_module

RESULTS = ROOT / "bench" / "results"
DOCS = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "example_suite" / "README.md"]
    + list((ROOT / "docs").glob("*.md"))
)
# [text](target) outside code spans; images too.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"```.*?```", re.S)
CODE = re.compile(r"`[^`\n]*`")


def links(path: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))
    return LINK.findall(text)


# The campaign logs beside their results and the bench index: their links resolve too.
NOTES = sorted(
    [ROOT / "bench" / "README.md"]
    + list((ROOT / "bench").glob("*/README.md"))
    + list(RESULTS.glob("*/README.md"))
)


@pytest.mark.parametrize("doc", DOCS + NOTES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in links(doc):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor in the same page
        file = (doc.parent / target.split("#", 1)[0]).resolve()
        if not file.exists() or ROOT not in file.parents:
            broken.append(target)
    assert broken == []


def test_the_readme_links_the_documentation() -> None:
    targets = set(links(ROOT / "README.md"))
    for page in ("docs/guide.md", "docs/method.md", "docs/verdict.md", "docs/ci.md"):
        assert page in targets


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_speak_of_this_repository_only(doc: Path) -> None:
    """No paths outside the repository, no words of the workshop it was built in."""
    text = doc.read_text(encoding="utf-8")
    assert "../shared" not in text
    assert "device machine" not in text
    assert "/work/" not in text  # a path of the checkout it was written in


@pytest.mark.parametrize("doc", DOCS + NOTES, ids=lambda p: str(p.relative_to(ROOT)))
def test_headings_can_be_cited(doc: Path) -> None:
    """No heading named by a run of zeros (docs/performance.md had 35), and no citation of
    one ("section" and zeros): a reader cites headings of words."""
    text = FENCE.sub("", doc.read_text(encoding="utf-8"))
    assert not re.findall(r"^#+ 0+[ab]?\. ", text, re.M)  # not a version: "## 0.3.0"
    assert not re.findall(r"\b[Ss]ections? 0+[ab]?\b(?!\.\d)", text)


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160


# --- measured numbers: one home, and the copies tested against it ----------------------------
#
# A table that says it is what a command prints is recomputed here from the committed files
# it names; a number the code holds (the rule's prior) is checked against the code.


def read(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def table_from(text: str, marker: str) -> list[list[str]]:
    """The first Markdown table from the first line that starts with ``marker`` on: its
    header and its rows, each a list of stripped cells (the separator row left out)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(marker))
    rows: list[list[str]] = []
    for line in lines[start:]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip()[1:-1].split("|")]
            if not all(cell and set(cell) <= {"-", ":"} for cell in cells):
                rows.append(cells)
        elif rows:
            break
    assert rows, f"no table after {marker!r}"
    return rows


def _bench(name: str):
    return bench_module(name)


def test_the_user_pages_speak_one_vocabulary() -> None:
    """Threshold, gate, interval; noise within a session, spread between sessions (issue 45:
    the README called a test "noisy" for its spread, beside a table whose noise column is
    within a session; it showed a gate of 80% where verdict.md says over 50% is not gated).
    The pages a user reads print no bar and no "noisy" verdict, and the README's and the
    guide's failure lines read as the plugin writes them."""
    from pytest_gpubench.report import summary

    pages = ["README.md", "docs/guide.md", "docs/ci.md", "example_suite/README.md"]
    for page in pages:
        text = read(page)
        assert "(noisy)" not in text and "can gate >=" not in text, page
        assert not re.search(r"\bbar [0-9-]", text), page
    readme = read("README.md")
    block = readme[readme.index("## What you get") :].split("```")[1]
    header, _, *rows = [re.split(r"\s{2,}", line.strip()) for line in block.strip().splitlines()]
    for row in rows:
        gate = row[header.index("gate")]
        assert float(gate.rstrip("%")) <= 50, row  # over 50% is `not gated`: no gate printed
    assert "`ok (gate > 5%)`" in readme
    assert "## Words" in read("docs/verdict.md")
    assert summary.COLUMNS[3:5] == ("noise", "spread")


def test_the_prior_table_of_verdict_md_is_the_fit() -> None:
    """docs/verdict.md, section "Prior", is what bench/fit_prior.py prints (the rule's table
    is checked against the same fit in tests/judge/test_rule.py)."""
    fit_prior = _bench("fit_prior")
    text = read("docs/verdict.md")
    for table in fit_prior.fit().values():  # the graph's, and the kernel time's
        for c in table:
            row = f"| {c['us']:.3g} | {c['tests']} | {c['sessions']} | {c['sigma']:.2%} |"
            assert row in text


def test_the_resampling_tables_of_verdict_md_are_the_recorded_run() -> None:
    """docs/verdict.md, section "On recorded sessions", is bench/results/resample.json
    (python bench/resample.py --json bench/results/resample.json) as the script prints it."""
    resample = _bench("resample")
    data = json.loads((RESULTS / "resample.json").read_text(encoding="utf-8"))
    text = read("docs/verdict.md")
    for line in resample.false_lines(data["false"]) + resample.power_lines(data["power"]):
        assert line in text, line


def test_method_md_cites_the_prior_instead_of_restating_it() -> None:
    text = read("docs/method.md")
    bullet = text[text.index("shrunk toward a prior") :]
    bullet = bullet[: bullet.index("\n- ")]
    assert "GRAPH_POINTS" in bullet and "verdict.md" in bullet
    assert "%" not in bullet


def test_what_the_committed_baselines_gate_is_what_the_script_says() -> None:
    """docs/performance.md, "What the committed baselines gate": per baseline file and class
    of duration, what
    ``gpubench show`` judges of the committed files (bench/baseline_classes.py), so the
    table follows the files and the rule."""
    script = _bench("baseline_classes")
    expected = [
        [cell.strip() for cell in line.strip()[1:-1].split("|")]
        for line in script.table().splitlines()
        if not set(line) <= {"|", "-"}
    ]
    stated = table_from(read("docs/performance.md"), "| baseline | sessions | time per call")
    assert stated == expected
    # every committed baseline is in it
    files = {str(p.relative_to(ROOT)) for p in ROOT.glob("**/.gpubench/*.json")}
    assert files == set(script.FILES)


def test_the_example_suites_gate_table_is_what_gpubench_show_prints() -> None:
    """example_suite/README.md's rows of ``gpubench show`` for the committed H200 baseline,
    recomputed as the command computes them."""
    from pytest_gpubench import cli
    from pytest_gpubench.report.baselines import show_rows, survey

    path = ROOT / "example_suite" / ".gpubench" / "sm90-nvidia-h200.json"
    baseline = cli.read_baseline(path)
    header, *shown = show_rows(survey(baseline, cli.DEFAULT_THRESHOLD, cli.DEFAULT_ALPHA))
    by_key = {row[0]: row for row in shown}
    stated_header, *stated = table_from(
        read("example_suite/README.md"), "### What `gpubench show` prints"
    )
    assert stated_header == header
    assert len(stated) >= 5
    for row in stated:
        assert row == by_key[row[0]], row[0]


def test_the_example_suites_aa_table_is_what_its_results_say() -> None:
    """Median, CV and median / CUPTI as bench/sessions_summary.py printed them over the nine
    A/A sessions; GB/s and % of peak from the session the README names."""
    campaign = RESULTS / "h200-2026-11-22"
    summary_header, *summary_rows = table_from((campaign / "aa-example.md").read_text("utf-8"), "|")
    summary = {row[0]: dict(zip(summary_header, row, strict=True)) for row in summary_rows}
    session = json.loads((campaign / "sessions" / "aa-example-2.json").read_text("utf-8"))
    results = {r["test"]: r for r in session["results"]}
    text = read("example_suite/README.md")
    assert "sessions/aa-example-2.json" in text
    header, *rows = table_from(text, "## Nine A/A sessions")
    assert len(rows) >= 5
    for row in rows:
        cells = dict(zip(header, row, strict=True))
        test = cells["test"]
        for column in ("median µs", "CV between sessions", "median / CUPTI"):
            assert cells[column] == summary[test][column], (test, column)
        assert cells["GB/s"] == f"{results[test]['gbs']:.0f}", test
        assert cells["% of peak"] == f"{results[test]['peak_share'] * 100:.0f}%", test
    peak = {round(r["peak_gbs"], -1) for r in results.values() if r.get("peak_gbs")}
    assert len(peak) == 1
    assert f"({peak.pop():.0f} GB/s" in text


@pytest.mark.slow
@pytest.mark.parametrize("machine", ["", "second"])
def test_the_library_suites_table_is_what_its_reports_say(machine: str) -> None:
    """bench/results/h200-2026-11-29b (and its second machine's folder): runs.md is
    bench/sessions_summary.py over the judged runs' reports in logs.tgz, and the README
    quotes it."""
    readme = RESULTS / "h200-2026-11-29b" / "README.md"
    campaign = readme.parent / machine
    with tarfile.open(campaign / "logs.tgz") as logs, tempfile.TemporaryDirectory() as tmp:
        names = sorted(n for n in logs.getnames() if Path(n).name.startswith("run-"))
        logs.extractall(tmp, members=[logs.getmember(n) for n in names], filter="data")
        reports = sorted(str(Path(tmp, n)) for n in names if n.endswith(".json"))
        assert len(reports) == 3
        printed = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "sessions_summary.py"), *reports],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    table = (campaign / "runs.md").read_text("utf-8")
    assert printed == table
    assert table in readme.read_text("utf-8")


def test_the_readmes_summary_rows_are_what_pytest_printed() -> None:
    """README.md's "What you get": rows of the summary table, rebuilt from the JSON reports
    it names with the plugin's own formatting (GB/s and % of peak left out)."""
    from pytest_gpubench.core.records import Result
    from pytest_gpubench.report import summary

    text = read("README.md")
    lines = text.splitlines()
    start = lines.index("```", lines.index("## What you get"))
    block = lines[start + 1 : lines.index("```", start + 1)]
    sources = [
        ("detect-0.05-1.json", "test_copy_blocks[67108864]"),
        ("aa-user-1.json", "test_item_sync"),
        ("aa-example-1.json", "test_softmax_manual[4096-4096]"),
    ]
    archive = RESULTS / "h200x2-2026-11-22" / "sessions" / "reports.tgz"
    assert f"`{archive.relative_to(ROOT).as_posix()}`" in text
    rows = []
    with tarfile.open(archive) as reports:
        for name, test in sources:
            assert f"`{name}`" in text
            report = reports.extractfile(name)
            assert report is not None
            item = next(r for r in json.load(report)["results"] if r["test"] == test)
            rows.append(summary.row(Result.from_dict(item))[:-2])
    assert block == summary.aligned([list(summary.COLUMNS[:-2]), *rows])


@pytest.mark.slow
def test_release_0_1s_h100_tables_are_as_quality_py_prints_them() -> None:
    """bench/results/h100-2026-11-21/README.md: "tables printed by python bench/quality.py
    tables <that file>"."""
    data = RESULTS / "sm90-nvidia-h100-80gb-hbm3-2026-11-21.json"
    printed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "quality.py"), "tables", str(data)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    tables = [block for block in printed.strip().split("\n\n") if block.startswith("|")]
    assert len(tables) >= 4
    text = read("bench/results/h100-2026-11-21/README.md")
    for block in tables:
        assert block in text, block.splitlines()[0]
    # docs/performance.md quotes the medians per size, the stability and the cost per estimate
    page = read("docs/performance.md")
    quoted = [block for block in tables if block in page]
    assert [block.splitlines()[0].split("|")[2].strip() for block in quoted] == [
        "median over kernels: gpubench",
        "cost per estimate, median s: gpubench",
        "kernel time (median)",
    ]


def test_the_ab_tally_counts_every_committed_plan() -> None:
    """bench/results/ab-tally.md is what bench/ab_summary.py --tally prints over the
    committed archives of bench/ab_checks.sh's plans."""
    script = _bench("ab_summary")
    archives = script.committed_archives()
    assert len(archives) >= 7
    assert script.tally(archives) in read("bench/results/ab-tally.md")


def test_a_kernel_librarys_planted_tests_are_its_archives() -> None:
    """The per-test table of the H100's fla plan is what ``bench/ab_summary.py --per-test``
    prints of its archive."""
    script = _bench("ab_summary")
    campaign = RESULTS / "h100-2026-12-05"
    printed = script.per_test(script.read_archive(campaign / "plan-0.tgz")[0])
    readme = (campaign / "README.md").read_text(encoding="utf-8")
    assert printed.count("\n") >= 10 and printed in readme


@pytest.mark.parametrize("model", ["h100", "h200"])
def test_performance_md_counts_each_gpu_models_plans(model: str) -> None:
    """docs/performance.md, "Against a revision": each row of a model's table is a row of
    what ``python bench/ab_summary.py --tally --folders MODEL`` prints over the committed
    archives of that model's folders."""
    script = _bench("ab_summary")
    printed = script.tally(script.committed_archives(model)).splitlines()
    marker = f"`python bench/ab_summary.py --tally --folders {model}`"
    text = read("docs/performance.md")
    assert marker in text
    header, *rows = table_from(text[text.index(marker) :], "| check | target | runs | result |")
    assert len(rows) >= 10
    printed_rows = [[cell.strip() for cell in line.strip()[1:-1].split("|")] for line in printed]
    for row in [header, *rows]:
        assert row in printed_rows, row


def test_the_bisect_table_of_verdict_md_is_the_recorded_run() -> None:
    """docs/verdict.md, "Bisect on recorded sessions", is bench/results/bisect-resample.json
    as bench/bisect_resample.py prints it."""
    script = _bench("bisect_resample")
    rows = json.loads((RESULTS / "bisect-resample.json").read_text(encoding="utf-8"))
    assert "\n".join(script.lines(rows)) in read("docs/verdict.md")


@pytest.mark.parametrize(
    ("campaign", "shown"),
    [
        ("h100x2-2026-11-27", "96 of 96"),
        ("h200x2-2026-11-28e", "96 of 96"),
        (
            "h200x2-2026-11-28f",
            "| 06-xdist-example-2-warm / 07-xdist-example-0-warm | warm | same |",
        ),
        ("h200x2-2026-11-28g", "less the waits, the busiest GPU timed 11.45 s (0.62 of"),
        ("h200-2026-11-28i", "| 04-xdist-example-2-warm | 2 | 96 | 3 | 0.214 s |"),
        ("h200x2-2026-11-28h", "| 07-xdist-example-0-warm | 0 | 96 | 1 | 0.142 s |"),
        ("h200-2026-11-29", "| 04-xdist-example-1-warm | 1 | 96 | 0 | 0.176 s |"),
    ],
)
def test_the_two_gpu_tables_are_what_the_script_prints(
    capsys: pytest.CaptureFixture[str], campaign: str, shown: str
) -> None:
    """A two-GPU campaign's tables (and docs/performance.md's, cited from there) are what
    bench/two_gpus.py prints over that plan's archive."""
    _bench("xdist_compare")
    script = _bench("two_gpus")
    folder = RESULTS / campaign
    with mock.patch.object(sys, "argv", ["two_gpus.py", str(folder / "plan.tgz")]):
        script.main()
    printed = capsys.readouterr().out
    assert shown in printed and printed in read(f"bench/results/{campaign}/README.md")
