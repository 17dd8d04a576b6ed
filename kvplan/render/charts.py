"""Charts a person puts in a document: PNG or SVG files of estimate, max-batch and fit results.

matplotlib draws them (the field's standard for static figures: one API for PNG and SVG, no browser or
JavaScript, SVG text kept as text so the numbers stay searchable); it is an optional extra
(``pip install "kvplan[plot]"``), imported only when a file is asked for. Each chart carries the numbers it
draws as JSON in the file's own metadata (SVG ``<dc:description>``, PNG ``Description`` text chunk), so a
reader (and the tests) can check them against ``-f json``. Sizes are binary (GiB), as the tables print them;
series differ by line style, marker and hatch as well as colour, so a black-and-white print keeps them apart.

Builders turn a result into a ``Chart`` (plain data, no matplotlib); ``save`` draws it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvplan.errors import UsageError
from kvplan.record import dataclass, field

GIB = 1 << 30
FORMATS = (".png", ".svg")
# Colours of distinct lightness (they stay apart in grey), with hatches and line styles for print.
COLOURS = ("#08306b", "#d95f02", "#9ecae1", "#b2182b", "#fdd835", "#2166ac", "#7fbc41", "#566573")
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")
# Lines take the darker colours first: a thin light line fades on white paper.
LINE_COLOURS = tuple(COLOURS[i] for i in (0, 1, 6, 3, 5, 7, 2, 4))
STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LEGEND_COLUMNS = 3
CAPTION_INCHES = 0.4
"""Room kept under a two-panel figure for its caption."""


@dataclass(frozen=True)
class Series:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    band: tuple[tuple[float, ...], ...] | None = None
    """(x, low, high): a shaded range under the line (the engine's own error interval)."""
    band_label: str = ""
    none: tuple[float, ...] = ()
    """x where the value is 0 (not one sequence fits): marked on the axis, not drawn on a log scale."""


@dataclass(frozen=True)
class Chart:
    """What to draw: ``kind`` lines (series over x), stacked (one bar per category, segments stacked) or bars."""

    kind: str
    title: str
    caption: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    categories: tuple[str, ...] = ()
    log_x: bool = False
    reference: tuple[str, float] | None = None
    """A horizontal line (label, y): the GPU's memory on an estimate chart, the concurrency asked."""
    vertical: tuple[str, float] | None = None
    """A vertical line (label, x): the context asked."""
    log_y: bool | None = None
    """Lines: a log y axis (None: only where a log x axis spans a 64-fold range of y)."""
    y_floor: float | None = None
    """Lines on a log y axis: its foot (where 0 would be), below the least value drawn."""
    data: dict[str, Any] = field(default_factory=dict)
    """The numbers drawn, in the units of ``-f json``, embedded in the file."""
    below: Chart | None = None
    """A second panel drawn under this one in the same figure (its data is in this chart's ``data``)."""


def check_path(path: str | Path) -> Path:
    """A chart file name: its suffix picks the format. Refused before any work is done."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise UsageError(f"'{path}': a chart file ends in .png or .svg", field="plot")
    if p.parent != Path("") and not p.parent.is_dir():
        raise UsageError(f"'{path}': no directory {p.parent}", field="plot")
    return p


def require_matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise UsageError('charts need matplotlib: pip install "kvplan[plot]"', field="plot") from None
    matplotlib.use("Agg")  # files only: never a window
    import matplotlib.pyplot as plt

    return plt


def save(chart: Chart, path: str | Path) -> Path:
    """Draw ``chart`` into ``path`` (PNG or SVG by suffix), the numbers embedded as JSON."""
    p = check_path(path)
    with open(p, "wb") as out:
        save_to(chart, out, p.suffix[1:].lower())
    return p


def save_to(chart: Chart, stream: Any, fmt: str) -> None:
    """Draw ``chart`` as ``fmt`` (png or svg) into a binary or (for svg) text stream."""
    plt = require_matplotlib()
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: searchable numbers
    plt.rcParams["svg.hashsalt"] = "kvplan"  # the same chart, the same file
    if chart.below is None:
        fig, ax = plt.subplots(figsize=(8.0, _height(chart)), dpi=150)
    else:  # two panels, each laid out on its own: the bars' long labels do not narrow the lines below
        heights = (_height(chart), _height(chart.below, below=True))
        total = sum(heights) + CAPTION_INCHES
        fig = plt.figure(figsize=(8.0, total), dpi=150, layout="constrained")
        fig.get_layout_engine().set(rect=(0, CAPTION_INCHES / total, 1, 1 - CAPTION_INCHES / total), hspace=0.04)
        upper, lower = fig.subfigures(2, 1, height_ratios=heights)
    try:
        if chart.below is None:
            _panel(ax, chart)
        else:
            _panel(upper.subplots(), chart)
            _panel(lower.subplots(), chart.below)
        fig.text(0.01, 0.005, chart.caption, fontsize=7, color="#333333", ha="left", va="bottom", wrap=True)
        if chart.below is None:
            fig.tight_layout(rect=(0, 0.05, 1, 1))
        described = json.dumps(chart.data, separators=(",", ":"), sort_keys=True)
        meta = ({"Title": chart.title, "Description": described, "Date": None} if fmt == "svg"
                else {"Title": chart.title, "Description": described, "Software": "kvplan"})
        fig.savefig(stream, format=fmt, metadata=meta)
    finally:
        plt.close(fig)


def _height(chart: Chart, below: bool = False) -> float:
    """Inches of figure one panel takes at 8 inches wide: lines a fixed plot (lower as a second panel), bars by
    their number."""
    if chart.kind == "lines":
        return 4.0 if below else 4.8
    return 1.6 + 0.55 * len(chart.categories)


def _panel(ax: Any, chart: Chart) -> None:
    {"lines": _lines, "stacked": _stacked, "bars": _bars}[chart.kind](ax, chart)
    entries = _entries(chart) if chart.kind != "bars" or len(chart.series) > 1 else 0
    ax.set_title(chart.title, fontsize=12, loc="left", pad=6 + 11 * -(-entries // _columns(chart)))
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    ax.grid(True, which="major", axis="y" if chart.kind == "lines" else "x", color="#cccccc", linewidth=0.6)
    ax.set_axisbelow(True)


def _entries(chart: Chart) -> int:
    return len(chart.series) + sum(1 for s in chart.series if s.band is not None and s.band_label)


def _lines(ax: Any, chart: Chart) -> None:
    for i, s in enumerate(chart.series):
        colour = LINE_COLOURS[i % len(LINE_COLOURS)]
        ax.plot(s.x, s.y, label=s.label, color=colour, linestyle=STYLES[i % len(STYLES)],
                marker=MARKERS[i % len(MARKERS)], markersize=4, linewidth=1.6, zorder=3)
        if s.band is not None:  # the range, hatched as well as tinted: it stays a range in grey
            ax.fill_between(*s.band, facecolor=colour, alpha=0.16, edgecolor=colour, hatch="////",
                            linewidth=0, label=s.band_label or None, zorder=2)
        if s.none:  # where not one fits: crosses along the foot of the plot (a log axis has no 0)
            ax.plot(s.none, [0.03 + 0.035 * i] * len(s.none), transform=ax.get_xaxis_transform(), color=colour,
                    marker="x", markersize=5, linestyle="none", clip_on=False, zorder=3)
    # falling lines leave the lower left free: the marks' labels go there, rising ones' to the right
    falling = all(s.y[0] >= s.y[-1] for s in chart.series if len(s.y) >= 2)
    if chart.reference is not None:
        label, y = chart.reference
        ax.axhline(y, color="#000000", linewidth=1.0, linestyle=(0, (6, 3)))
        ax.annotate(label, xy=(0.01 if falling else 0.99, y), xycoords=("axes fraction", "data"), xytext=(0, 3),
                    textcoords="offset points", fontsize=8, ha="left" if falling else "right")
    if chart.vertical is not None:
        label, x = chart.vertical
        ax.axvline(x, color="#000000", linewidth=1.0, linestyle=(0, (1, 2)))
        # beside falling lines the room is above them right of the middle, below them left of it
        top = not falling or _share(chart, x) >= 0.5
        ax.annotate(label, xy=(x, 0.98 if top else 0.15), xycoords=("data", "axes fraction"), xytext=(-3, 0),
                    textcoords="offset points", fontsize=8, ha="right", va="top" if top else "bottom",
                    rotation=90)
    if chart.log_x:
        ax.set_xscale("log", base=2)
    ys = [y for s in chart.series for y in s.y if y > 0]
    wide = chart.log_x and ys and max(ys) / min(ys) >= 64  # a doubling sweep: log-log keeps every line readable
    if chart.log_y if chart.log_y is not None else wide:
        ax.set_yscale("log", base=2)
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}" if chart.y_floor is None or v >= 1 else ""))
        if chart.y_floor is not None:
            ax.set_ylim(bottom=chart.y_floor)
    else:
        ax.set_ylim(bottom=0)
    xs = sorted({x for s in chart.series for x in (*s.x, *s.none)})
    if xs and len(xs) <= 16:
        ax.set_xticks(xs, [_count(x) for x in xs], fontsize=8, rotation=0 if len(xs) <= 10 else 45)
    _legend_above(ax, _entries(chart), _columns(chart))


def _share(chart: Chart, x: float) -> float:
    """How far along the x axis ``x`` lies (0 at the least x drawn, 1 at the greatest; on a log axis, by ratio)."""
    import math

    xs = [v for s in chart.series for v in (*s.x, *s.none) if v > 0] or [x]
    lo, hi = min(xs), max(xs)
    if hi <= lo:
        return 1.0
    return math.log(x / lo) / math.log(hi / lo) if chart.log_x else (x - lo) / (hi - lo)


def _stacked(ax: Any, chart: Chart) -> None:
    y = list(range(len(chart.categories)))
    left = [0.0] * len(chart.categories)
    total = max((sum(s.y[i] for s in chart.series) for i in y), default=1.0) or 1.0
    for k, s in enumerate(chart.series):
        bars = ax.barh(y, s.y, left=left, label=s.label, color=COLOURS[k % len(COLOURS)],
                       hatch=HATCHES[k % len(HATCHES)], edgecolor="#222222", linewidth=0.5)
        for i, bar in enumerate(bars):
            if s.y[i] >= 0.06 * total:  # a label where the segment has room for it
                dark = k in (0, 3, 5)
                ax.text(left[i] + s.y[i] / 2, bar.get_y() + bar.get_height() / 2, f"{s.y[i]:.1f}",
                        ha="center", va="center", fontsize=7, color="white" if dark else "black")
        left = [a + b for a, b in zip(left, s.y)]
    ax.set_yticks(y, chart.categories, fontsize=8)
    ax.invert_yaxis()
    _legend_above(ax, len(chart.series))


def _bars(ax: Any, chart: Chart) -> None:
    n = len(chart.series)
    height = 0.8 / max(n, 1)
    for k, s in enumerate(chart.series):
        pos = [i - 0.4 + height * (k + 0.5) for i in range(len(chart.categories))]
        bars = ax.barh(pos, s.y, height=height, label=s.label, color=COLOURS[k % len(COLOURS)],
                       hatch=HATCHES[k % len(HATCHES)], edgecolor="#222222", linewidth=0.5)
        for bar, value in zip(bars, s.y):
            if value > 0:
                ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {_short(value)}", va="center",
                        fontsize=7)
    ax.set_yticks(range(len(chart.categories)), chart.categories, fontsize=8)
    ax.invert_yaxis()
    if n > 1:
        _legend_above(ax, n)


def _columns(chart: Chart) -> int:
    """Legend columns: three, fewer where long labels would run past the plot's width."""
    longest = max((len(s.label) for s in chart.series), default=0)
    return LEGEND_COLUMNS if longest <= 30 else 2 if longest <= 48 else 1


def _legend_above(ax: Any, n: int, columns: int = LEGEND_COLUMNS) -> None:
    """Between the title and the bars: never over the data."""
    ax.legend(fontsize=7, frameon=False, ncol=max(min(n, columns), 1), loc="lower left", bbox_to_anchor=(0, 1.0),
              borderaxespad=0.3)


def _count(x: float) -> str:
    n = int(x)
    for unit, size in (("M", 1 << 20), ("k", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n:,}"


def _short(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 or float(value).is_integer() else f"{value:,.2f}"


def _caption(kvplan_version: str, *parts: str) -> str:
    return " · ".join(p for p in (*parts, f"kvplan {kvplan_version}") if p)


# ---------------------------------------------------------------- builders


def estimate_chart(results: Sequence[Any], gpu: Any = None) -> Chart:
    """KV memory against context, one line per batch x KV dtype x engine; the GPU's memory drawn across."""
    series = []
    points: list[dict[str, Any]] = []
    for res in results:
        lines: dict[tuple[int, str], list[tuple[int, int]]] = {}
        for row in res.rows:
            shown = row.kv_dtype if row.kv_dtype != "auto" or not row.kv_dtype_resolved else \
                f"auto ({row.kv_dtype_resolved})"
            lines.setdefault((row.batch, shown), []).append((row.context, row.kv_bytes))
        for (batch, dtype), pts in lines.items():
            pts.sort()
            label = f"batch {batch}, {dtype}" + (f", {res.engine}" if len(results) > 1 else "")
            series.append(Series(label, tuple(float(c) for c, _ in pts), tuple(b / GIB for _, b in pts)))
            points += [{"engine": res.engine, "batch": batch, "kv_dtype": dtype, "context": c, "kv_bytes": b}
                       for c, b in pts]
    contexts = sorted({p["context"] for p in points})
    doubling = len(contexts) >= 3 and all(b == 2 * a for a, b in zip(contexts, contexts[1:]))
    first = results[0]
    reference = (f"{gpu.name}: {gpu.memory_bytes / GIB:.1f} GiB", gpu.memory_bytes / GIB) if gpu is not None else None
    engines = ", ".join(dict.fromkeys(f"{r.engine} {r.engine_version}" for r in results))
    return Chart("lines", f"KV cache of {first.model.id}", _caption(first.kvplan_version, first.model.id, engines,
                                                                    f"model dtype {first.model.dtype}"),
                 "context (tokens)", "KV cache (GiB)", tuple(series), log_x=doubling or (
                     len(contexts) >= 2 and contexts[-1] / max(contexts[0], 1) >= 64),
                 reference=reference,
                 data={"model": first.model.id, "points": points,
                       "gpu": None if gpu is None else {"name": gpu.name, "memory_bytes": gpu.memory_bytes}})


BUDGET_PARTS = (("weights", "weights"), ("activation", "activation peak"), ("non_torch", "non-torch"),
                ("cudagraph", "CUDA graphs"), ("kv_cache", "KV cache"))


def budget_chart(plans: Sequence[Any], concurrency: int | None = None) -> Chart:
    """The GPU divided as each engine divides it: one stacked bar per plan (per GPU), outside-the-budget last;
    below it, where the plans came from ``max_batch``, the sequences that fit against context (``concurrency``:
    the workload's, to mark where the plans do not say it, as ``fit``'s)."""
    cats, rows = [], []
    for p in plans:
        items = {i.name: i.bytes for i in p.items}
        values = [max(items.get(name, 0), 0) for name, _ in BUDGET_PARTS]
        outside = max(p.gpu_total_bytes - sum(values), 0)
        rows.append([*values, outside])
        cats.append(f"{p.engine} {p.engine_version}, {p.gpu_name}, tp {p.tp} x pp {p.pp}")
    labels = [label for _, label in BUDGET_PARTS] + ["left over"]
    series = tuple(Series(label, tuple(float(i) for i in range(len(rows))), tuple(r[k] / GIB for r in rows))
                   for k, label in enumerate(labels))
    first = plans[0]
    data: dict[str, Any] = {"model": first.model_id, "plans": [
        {"engine": p.engine, "gpu": p.gpu_name, "tp": p.tp, "pp": p.pp, "gpu_total_bytes": p.gpu_total_bytes,
         **{name: r[k] for k, (name, _) in enumerate(BUDGET_PARTS)}, "left_over": r[-1]}
        for p, r in zip(plans, rows)]}
    below = concurrency_chart(plans, concurrency) if all(p.asked is not None for p in plans) else None
    if below is not None:
        data["curves"] = below.data["curves"]
    engines = ", ".join(dict.fromkeys(f"{p.engine} {p.engine_version}" for p in plans))
    dtypes = ", ".join(dict.fromkeys(p.kv_dtype for p in plans))
    return Chart("stacked", f"One GPU's memory: {first.model_id}, {dtypes} KV",
                 _caption(first.kvplan_version, first.model_id, engines, f"{dtypes} KV",
                          f"max model len {first.max_model_len:,}", below.caption if below is not None else ""),
                 "memory per GPU (GiB)", "", series, categories=tuple(cats), data=data, below=below)


def _size(plan: Any) -> str:
    """tp x pp x dp, the sizes of 1 left out: tp 4, tp 8 x pp 2, tp 1 x dp 2."""
    parts = [f"{name} {value}" for name, value in (("pp", plan.pp), ("dp", plan.dp)) if value > 1]
    return " x ".join([f"tp {plan.tp}", *parts])


def sweep(max_model_len: int, asked: int | None = None) -> list[int]:
    """Contexts to plan a deployment at: doubling from 1,024 (lower for a short max-model-len) up to
    ``max_model_len``, which is always the last point, with the context asked for among them."""
    start = 1024
    while start > 64 and start * 8 > max_model_len:
        start //= 2
    points, c = [], start
    while c < max_model_len:
        points.append(c)
        c *= 2
    return sorted({*points, max_model_len, *([asked] if asked else [])})


def concurrency_chart(plans: Sequence[Any], concurrency: int | None = None) -> Chart:
    """How many sequences (requests of n) each deployment holds at each context up to its max-model-len: each
    point is ``plan.at_context(c)``, the plan ``max_batch(..., context=c)`` returns; the engine's error interval
    shaded where the plan has one; the context and concurrency asked for marked."""
    differ = {key: len({get(p) for p in plans}) > 1 for key, get in (
        ("dtype", lambda p: p.kv_dtype), ("gpu", lambda p: p.gpu_name), ("size", lambda p: (p.tp, p.pp, p.dp)))}
    curves = []
    for p in plans:
        curves.append({"engine": p.engine, "engine_version": p.engine_version, "gpu": p.gpu_name, "tp": p.tp,
                       "pp": p.pp, "dp": p.dp, "kv_dtype": p.kv_dtype, "max_model_len": p.max_model_len,
                       "batch": p.batch, "n": p.n, "beam_width": p.beam_width, "context_asked": p.asked.context,
                       "concurrency_asked": concurrency or p.asked.concurrency, "points": _points(p)})
    ys = [float(q["max_batch"]) for c in curves for q in c["points"] if q["max_batch"] > 0]
    lows = [float(q["max_batch_interval"][0]) for c in curves for q in c["points"]
            if q["max_batch"] > 0 and q["max_batch_interval"] and q["max_batch_interval"][0] > 0]
    floor = min(ys + lows, default=1.0) / 2  # the foot of the log axis: a range's low end of 0 reaches down to it
    series, foot = [], False  # foot: something drawn at the foot (a range down to 0, a context where none fits)
    for p, curve in zip(plans, curves):
        label = ", ".join(part for part in (
            f"{p.engine} {p.engine_version}", p.kv_dtype if differ["dtype"] else "",
            p.gpu_name if differ["gpu"] else "", _size(p) if differ["size"] else "") if part)
        drawn = [q for q in curve["points"] if q["max_batch"] > 0]  # a log axis has no 0: marked on the foot
        ranged = [(float(q["context"]), max(float(q["max_batch_interval"][0]), floor),
                   max(float(q["max_batch_interval"][1]), floor)) for q in drawn if q["max_batch_interval"]]
        foot = foot or any(q["max_batch"] <= 0 or (q["max_batch_interval"] or [1])[0] <= 0 for q in curve["points"])
        band = tuple(zip(*ranged)) if len(ranged) >= 2 else None
        series.append(Series(
            label, tuple(float(q["context"]) for q in drawn), tuple(float(q["max_batch"]) for q in drawn), band=band,
            band_label="shaded: likely range" if band and not any(s.band for s in series) else "",
            none=tuple(float(q["context"]) for q in curve["points"] if q["max_batch"] <= 0)))
    first = plans[0]
    asked_context = first.asked.context if len({p.asked.context for p in plans}) == 1 else None
    asked_concurrency = concurrency or (first.asked.concurrency if len({p.asked.concurrency for p in plans}) == 1
                                        else None)
    what = "requests" if any(p.samples > 1 for p in plans) else "sequences"
    where = "" if differ["gpu"] or differ["size"] else f" on {first.gpu_name}, {_size(first)}"
    banded = " and ".join(dict.fromkeys(f"{p.engine}'s" for p, s in zip(plans, series) if s.band is not None))
    notes = [f"shaded: the {what} that fit where {banded} KV memory lies for ~90% of deployments" if banded else "",
             f"x on the axis: not one {what[:-1]} fits" if any(s.none for s in series) else ""]
    return Chart("lines", f"Concurrent {what} against context{where}", " · ".join(n for n in notes if n),
                 "context (tokens)", f"concurrent {what} (max batch)", tuple(series), log_x=True,
                 log_y=bool(ys) and (max(ys) / min(ys) >= 8 or foot), y_floor=floor if foot else None,
                 reference=(f"concurrency asked: {asked_concurrency:,}", float(asked_concurrency))
                 if asked_concurrency else None,
                 vertical=(f"context asked: {_count(asked_context)}", float(asked_context)) if asked_context else None,
                 data={"model": first.model_id, "curves": curves})


def _points(plan: Any) -> list[dict[str, Any]]:
    """The plan again at each context of its sweep: max batch, concurrency, and the engine's range of max batch."""
    points = []
    for c in sweep(plan.max_model_len, plan.asked.context):
        try:
            at = plan.at_context(c)
        except UsageError:  # a context the workload cannot have (shorter than its prompt or shared prefix)
            continue
        interval = at.interval
        points.append({"context": c, "max_batch": at.max_batch, "max_concurrency": round(at.max_concurrency, 4),
                       "fits": at.fits,
                       "max_batch_interval": list(interval["max_batch"]) if interval is not None else None})
    return points


def fit_chart(result: Any) -> Chart:
    """GPUs needed (or $/hour with prices) per GPU type, one bar per engine x KV dtype."""
    priced = result.currency is not None
    cats = tuple(dict.fromkeys(r.gpu for r in result.rows))
    keys = tuple(dict.fromkeys((r.engine, r.kv_dtype) for r in result.rows))
    series = []
    for engine, dtype in keys:
        by_gpu = {r.gpu: r for r in result.rows if (r.engine, r.kv_dtype) == (engine, dtype)}
        ys = tuple(float((by_gpu[g].usd_per_hour if priced else by_gpu[g].gpus) or 0) if g in by_gpu else 0.0
                   for g in cats)
        series.append(Series(f"{engine}, {dtype}", tuple(float(i) for i in range(len(cats))), ys))
    what = f"{result.currency}/hour" if priced else "GPUs"
    data = {"model": result.model_id, "rows": [
        {"gpu": r.gpu, "engine": r.engine, "kv_dtype": r.kv_dtype, "gpus": r.gpus, "usd_per_hour": r.usd_per_hour}
        for r in result.rows]}
    return Chart("bars", f"{what} to serve {result.concurrency:,} x {result.context:,} tokens: {result.model_id}",
                 _caption(result.kvplan_version, result.model_id, "smallest deployment per GPU type"),
                 what, "", tuple(series), categories=cats, data=data)


def read_data(path: str | Path) -> dict[str, Any]:
    """The numbers a chart file carries (the JSON ``save`` embedded), from an SVG or PNG."""
    p = Path(path)
    if p.suffix.lower() == ".svg":
        import xml.etree.ElementTree as ET

        root = ET.parse(p).getroot()
        for el in root.iter():
            if el.tag.endswith("description") and el.text:
                return json.loads(el.text)
        raise ValueError(f"{p}: no description")
    from PIL import Image

    with Image.open(p) as img:
        return json.loads(img.text["Description"])  # type: ignore[attr-defined]
