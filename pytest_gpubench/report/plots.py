"""Figures of baseline files, and one self-contained HTML page of them (``gpubench plot``;
what they draw: docs/guide.md, "Reports"). Drawn with matplotlib's Agg canvas, without
pyplot: no window, no global figure state. Only the ``gpubench`` command imports this module.
"""

from __future__ import annotations

import html
import io
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..core.errors import GpubenchError
from ..core.jsondata import printable
from ..core.records import SessionRecord, is_number, is_ratio
from ..core.samples import time_unit
from ..store import files as storage
from ..store.baseline import Baseline
from .baselines import SHOW_NOTE, EntryView, file_header, show_rows

if TYPE_CHECKING:  # matplotlib.typing is 3.8's; the plots need 3.6
    from matplotlib.typing import RcKeyType

# Panels per history figure, in rows of COLUMNS: more make each unreadable on a screen.
PANELS = 12
COLUMNS = 3
TITLE_CHARS = 48
# The rc settings of every figure. SVG text stays text (a browser draws it in its sans-serif):
# drawn as paths, each glyph had cost more than the rest of the figure. Titles at a fixed
# height: placed automatically, each panel measured all its y tick labels again on every save
# to dodge an offset text, which no y axis shows here (plain values, no offset).
STYLE: dict[RcKeyType, object] = {
    "svg.fonttype": "none",
    # SVG ids (clip paths, markers) hash their content with this salt, a random one per id
    # otherwise: the same baseline drew another file, and another page, every time. Fixed,
    # the page's figures share an id only where they share its definition.
    "svg.hashsalt": "gpubench",
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.titley": 1.0,
    "axes.formatter.useoffset": False,
}


@dataclass(frozen=True)
class Section:
    """One baseline file, with the rule's view of each of its entries."""

    baseline: Baseline
    views: list[EntryView]
    header: str  # device, sessions, dates


def history_figures(section: Section) -> list[Figure]:
    """Each test's session medians with the reference and the first look's band, ``PANELS``
    a figure."""
    views = section.views
    chunks = [views[i : i + PANELS] for i in range(0, len(views), PANELS)]
    # The file's header of the sessions the panels show (each test's latest binary).
    drawn = {r.session for v in views for r in v.entry.anchor + v.entry.history}
    header = file_header(section.baseline, drawn)
    figures = []
    # Every figure COLUMNS panels wide, however few it holds: one of a single panel cut its
    # title to the panel's width ("0 sessions drawn, ..., 13 tests: session" on the page).
    for number, chunk in enumerate(chunks, start=1):
        rows = math.ceil(len(chunk) / COLUMNS)
        width, height = PANEL_WIDTH * COLUMNS, PANEL_HEIGHT * rows + TITLE_HEIGHT
        figure = _figure((width, height))
        # Fixed margins, in inches: a layout engine measured every label of every panel
        # again per image format (most of the 20 s a 54-test file took).
        figure.subplots_adjust(
            left=0.62 / width,
            right=1 - 0.4 / width,
            bottom=0.62 / height,
            top=1 - TITLE_HEIGHT / height,
            wspace=0.62 / (PANEL_WIDTH - 0.62),
            hspace=0.95 / (PANEL_HEIGHT - 0.95),
        )
        grid = figure.add_gridspec(rows, COLUMNS)
        axes = [figure.add_subplot(grid[i // COLUMNS, i % COLUMNS]) for i in range(len(chunk))]
        for ax, view in zip(axes, chunk, strict=True):
            _history_panel(ax, view, section.baseline)
        part = f" ({number}/{len(chunks)})" if len(chunks) > 1 else ""
        figure.suptitle(
            f"{printable(header)}: session history and first look's band{part}", y=1 - 0.08 / height
        )
        # One legend a figure, in its title's strip: inside the first panel it hid that
        # panel's upper left, where its data can be, at a size a browser drew 8 px high.
        handles, labels = axes[0].get_legend_handles_labels()
        figure.legend(
            handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, 1 - 0.25 / height),
            ncols=len(labels),
            frameon=False,
            fontsize=7,
        )
        figures.append(figure)
    return figures


# The size of one history panel and of the figure's title, in inches.
PANEL_WIDTH = 4.2
PANEL_HEIGHT = 2.9
TITLE_HEIGHT = 0.75  # the title, and the legend under it
# Sessions labelled on a panel's x axis (its date and commit): more overlap.
X_LABELS = 4
# Room above and below what a panel draws (band edges, sessions), as a share of its span.
Y_MARGIN = 0.12


def _history_panel(ax: Axes, view: EntryView, baseline: Baseline) -> None:
    entry = view.entry
    records = _in_time_order(entry.anchor + entry.history, baseline)
    if is_ratio(entry.timer):  # a ratio to a reference function: no unit of time
        scale, unit = 1.0, "x, to the reference"
    else:
        unit, size = time_unit(entry.median_ms)  # the reference's unit, as tables show it
        scale = 1 / size
    low, high = view.band
    ax.axhspan(
        low * scale, high * scale, color="tab:green", alpha=0.15, lw=0, label="first look's band"
    )
    ax.axhline(entry.median_ms * scale, color="tab:green", lw=1, label="reference")
    x = list(range(len(records)))
    y = [r.median_ms * scale for r in records]
    ax.plot(x, y, "o-", ms=3, lw=1, label="session median")
    anchor = {r.session for r in entry.anchor}
    marked = [(i, v) for i, v, r in zip(x, y, records, strict=True) if r.session in anchor]
    ax.plot(
        [i for i, _ in marked],
        [v for _, v in marked],
        "s",
        ms=7,
        mfc="none",
        mec="tab:orange",
        label="anchor",
    )
    over = f" (gate > {view.threshold * 100:g}%)" if view.judgement.noisy else ""
    ax.set_title(_short(view.key) + over)
    ax.set_xlabel(f"session: date (UTC), commit ({entry.timer}; gate {view.gate:.1%})")
    ax.set_ylabel(f"median ({unit})")
    ax.set_xlim(-0.5, len(records) - 0.5)
    ticks = _labelled(len(records))
    ax.set_xticks(ticks, [_session_label(records[i], baseline) for i in ticks])
    bottom, top = _y_limits([low * scale, high * scale, *y])
    ax.set_ylim(bottom, top)
    # Only the ticks in view: the locator's two beyond the limits were made, formatted and
    # measured on every save, and never drawn.
    ax.set_yticks([t for t in MaxNLocator(5).tick_values(bottom, top) if bottom <= t <= top])
    ax.tick_params(labelsize=7)
    if high > low:
        # Each edge's own value, at the left (the latest session, right, may be out of the
        # band): the band is the first confirmed look's, wider than the gate in the x label.
        reference = entry.median_ms
        edges = (
            (high, f"+{high / reference - 1:.1%}", 1.0, "bottom"),
            (low, f"\N{MINUS SIGN}{1 - low / reference:.1%}", -1.0, "top"),
        )
        for edge, text, offset, va in edges:
            ax.annotate(
                text,
                (0, edge * scale),
                (3, offset),
                xycoords=("axes fraction", "data"),
                textcoords="offset points",
                va=va,
                fontsize=7,
                color="darkgreen",
            )


def _y_limits(values: Sequence[float]) -> tuple[float, float]:
    """Limits that hold ``values`` (the band's edges among them) with Y_MARGIN to spare:
    matplotlib's own limits had cut the band at the data, so its edges never showed."""
    low, high = min(values), max(values)
    span = high - low or abs(high) * 0.1 or 1.0
    return low - Y_MARGIN * span, high + Y_MARGIN * span


def _labelled(count: int) -> list[int]:
    """The sessions to label on the x axis: the first, the last, and evenly between, never
    two neighbours (of 6 sessions, the 3rd and 4th labels had run into each other)."""
    if count <= X_LABELS:
        return list(range(count))
    labels = min(X_LABELS, (count + 1) // 2)
    return sorted({round(i * (count - 1) / (labels - 1)) for i in range(labels)})


def _session_label(record: SessionRecord, baseline: Baseline) -> str:
    """``01-24 05:10`` over the short commit (``-`` where none was recorded)."""
    info = baseline.sessions.get(record.session)
    if info is None:
        return record.session[:13]
    when = info.date[5:16].replace("T", " ")
    return f"{when}\n{(info.commit or '-')[:7]}"


def _in_time_order(records: Sequence[SessionRecord], baseline: Baseline) -> list[SessionRecord]:
    """Distinct sessions (the anchor and the history overlap), oldest first."""

    def when(record: SessionRecord) -> tuple[str, str]:
        info = baseline.sessions.get(record.session)
        return (info.date if info else "", record.session)

    return sorted({r.session: r for r in records}.values(), key=when)


def peak_figure(section: Section) -> tuple[Figure | None, str]:
    """The % of peak copy bandwidth of each test that declares its bytes, grouped by
    kernel family; without one, None and why."""
    baseline = section.baseline
    peak = baseline.device.get("peak_copy_gbs")
    if not (is_number(peak) and peak > 0):
        return None, (
            f"no % of peak chart for {baseline.path}: its device's peak copy bandwidth was "
            "not measured (it is when a test declares bytes=)"
        )
    views = sorted(
        (v for v in section.views if v.entry.bytes),
        key=lambda v: (v.entry.group or "", v.key),
    )
    if not views:
        return None, f"no % of peak chart for {baseline.path}: no test declares bytes="
    named = [v.entry.group or "(no group)" for v in views]
    groups = list(dict.fromkeys(named))
    figure = _figure((8.0, 1.4 + 0.28 * len(views) + 0.2 * len(groups)), "constrained")
    ax = figure.subplots()
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    y = [0.0]
    for before, group in itertools.pairwise(named):
        y.append(y[-1] + 1 + (0.6 if group != before else 0))  # a gap between families
    # At the reference median: the bytes of a call over its time, a share of the peak.
    shares = [100 * (float(v.entry.bytes or 0) / (v.entry.median_ms * 1e6) / peak) for v in views]
    for group_index, group in enumerate(groups):
        members = [i for i, name in enumerate(named) if name == group]
        ax.barh(
            [y[i] for i in members],
            [shares[i] for i in members],
            color=colors[group_index % len(colors)],
            label=printable(group),
        )
    for position, share in zip(y, shares, strict=True):
        # Above the copy peak the data stayed in L2: the bar is no share of DRAM bandwidth.
        label = f"{share:.0f}%" + (" (L2-resident)" if share > 100 else "")
        # 3 points right of the bar: a leading space collapsed in a browser's SVG.
        ax.annotate(
            label,
            (share, position),
            (3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
            # the 100% line crossed the labels of bars near it ("98%")
            bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
        )
    ax.axvline(100, color="gray", lw=1, ls="--")
    ax.set_yticks(y, [_short(v.key) for v in views], fontsize=7)
    # Top down, half a bar to spare: the default margins left two bars' room empty each end.
    ax.set_ylim(y[-1] + 0.7, y[0] - 0.7)
    # Room right of the longest bar for its label (" 160% (L2-resident)" ran off the axes).
    ax.set_xlim(0, max(110.0, max(shares) * 1.3))
    ax.set_xlabel(f"% of peak copy bandwidth ({float(peak):g} GB/s), at the reference median")
    if len(groups) > 1:  # one entry, "(no group)", told nothing
        ax.legend(title="group", fontsize=7, loc="lower right")
    name = printable(str(baseline.device.get("name") or "unknown device"))
    figure.suptitle(f"{name}: share of peak copy bandwidth, {len(views)} tests that declare bytes")
    # Laid out once, then kept: with its layout engine, every save drew the figure twice
    # (once to measure, once to render), for each format.
    engine = figure.get_layout_engine()
    if engine is not None:
        engine.execute(figure)
        figure.set_layout_engine("none")
    return figure, ""


def _figure(size: tuple[float, float], layout: Literal["constrained"] | None = None) -> Figure:
    figure = Figure(figsize=size, layout=layout)
    FigureCanvasAgg(figure)
    return figure


def _short(key: str) -> str:
    """A test's key without its file: ``test_sum[large]#fwd``, cut to TITLE_CHARS."""
    name = printable(key.split("::", 1)[-1])
    return name if len(name) <= TITLE_CHARS else name[: TITLE_CHARS - 3] + "..."


def svg_file(figure: Figure) -> str:
    """The figure as an SVG file, without a creation date: the same baseline draws the same
    file."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


# The page's style. Figures keep their drawn size (text 7 to 8 points) and scroll sideways
# on a narrow screen: shrunk to a phone's width, their text was 3 pixels high. So does the
# table; its header stays in view while 96 rows scroll by.
PAGE_STYLE = (
    "body{font-family:sans-serif;margin:1.5em}"
    "h2{overflow-wrap:anywhere}"
    ".scroll{overflow-x:auto}"
    "table{border-collapse:collapse;font-size:90%}"
    "th,td{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}"
    "th:first-child,td:first-child,td:nth-child(2){text-align:left}"
    "thead th{position:sticky;top:0;background:#fff}"
    "td a{color:inherit}"
    "figure{margin:1em 0;overflow-x:auto}svg{height:auto}"
)


def html_page(sections: Sequence[Section], svgs: Sequence[Sequence[str]]) -> str:
    """One page, nothing outside it: per file its table and its figures (``svgs``, SVG
    files, the history figures first) inline. Each test in a table links to the figure
    that draws it; a page of several files opens with links to each."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>gpubench baselines</title><style>{PAGE_STYLE}</style></head><body>",
        "<h1>gpubench baselines</h1>",
    ]
    if len(sections) > 1:
        links = "".join(
            f'<li><a href="#file-{n}">{_e(str(s.baseline.path))}</a></li>'
            for n, s in enumerate(sections, 1)
        )
        parts.append(f"<nav><ul>{links}</ul></nav>")
    for n, (section, section_svgs) in enumerate(zip(sections, svgs, strict=True), 1):
        history = math.ceil(len(section.views) / PANELS)
        names = [f"history {i}" if history > 1 else "history" for i in range(1, history + 1)]
        names += ["% of peak"] * (len(section_svgs) - history)
        ids = [f"file-{n}-figure-{i}" for i in range(1, len(section_svgs) + 1)]
        parts.append(f'<section id="file-{n}"><h2>{_e(str(section.baseline.path))}</h2>')
        parts.append(f"<p>{_e(section.header)}</p>")
        if section_svgs:
            figures = ", ".join(
                f'<a href="#{i}">{_e(t)}</a>' for i, t in zip(ids, names, strict=True)
            )
            parts.append(f"<p>Figures: {figures}</p>")
        rows = show_rows(section.views)
        parts.append('<div class="scroll"><table><thead><tr>')
        parts.append("".join(f"<th>{_e(cell)}</th>" for cell in rows[0]))
        parts.append("</tr></thead><tbody>")
        for index, row in enumerate(rows[1:]):
            test, *rest = (_e(cell) for cell in row)
            if section_svgs:  # the panel of the index-th view is in figure index // PANELS
                test = f'<a href="#{ids[index // PANELS]}">{test}</a>'
            parts.append(f"<tr><td>{test}</td>" + "".join(f"<td>{c}</td>" for c in rest) + "</tr>")
        parts.append(f"</tbody></table></div><p><small>{_e(SHOW_NOTE)}</small></p>")
        for figure_id, svg in zip(ids, section_svgs, strict=True):
            element = svg[svg.index("<svg") :]  # no XML prolog inside HTML
            parts.append(f'<figure id="{figure_id}">{element}</figure>')
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _e(text: str) -> str:
    return html.escape(printable(text), quote=True)


def write(
    sections: Sequence[Section], *, out: Path | None, image_format: str, html: Path | None
) -> tuple[list[Path], list[str]]:
    """Draw every section; write the images into ``out`` and the page to ``html`` (each
    when given). Returns the paths written and notes on what was not drawn."""
    written: list[Path] = []
    notes: list[str] = []
    named: list[list[tuple[str, Figure]]] = []
    stems: set[str] = set()
    with matplotlib.rc_context(STYLE):
        for section in sections:
            stem = _unique(section.baseline.path.stem, stems)
            history = history_figures(section)
            if not history:
                notes.append(f"no history figure for {section.baseline.path}: it has no tests")
            numbered = len(history) > 1
            figures = [
                (f"{stem}-history{f'-{i}' if numbered else ''}", f)
                for i, f in enumerate(history, 1)
            ]
            peak, note = peak_figure(section)
            if peak is None:
                notes.append(note)
            else:
                figures.append((f"{stem}-peak", peak))
            named.append(figures)
        # Each figure's SVG, drawn once for its file (--format svg) and the page.
        svgs: dict[str, str] = {}
        if out is not None:
            storage.make_directory(out, "output directory", "choose another --out")
            for figures in named:
                for name, figure in figures:
                    path = out / f"{name}.{image_format}"
                    if image_format == "svg":
                        svgs[name] = svg_file(figure)
                        data = svgs[name].encode("utf-8")
                    else:
                        buffer = io.BytesIO()
                        figure.savefig(buffer, format=image_format)
                        data = buffer.getvalue()
                    try:
                        path.write_bytes(data)
                    except OSError as exc:
                        raise GpubenchError(
                            f"cannot write image {path}: {exc.strerror or exc}"
                        ) from None
                    written.append(path)
        if html is not None:
            page = html_page(
                sections,
                [[svgs.get(name) or svg_file(f) for name, f in figures] for figures in named],
            )
            storage.write_atomic(html, page, "HTML page")
            written.append(html)
    return written, notes


def _unique(stem: str, used: set[str]) -> str:
    """``stem``, or ``stem-2``, ... when two files of other directories share a name."""
    candidate, n = stem, 1
    while candidate in used:
        n += 1
        candidate = f"{stem}-{n}"
    used.add(candidate)
    return candidate
