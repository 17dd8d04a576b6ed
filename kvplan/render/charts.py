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
from kvplan.record import dataclass, field
from pathlib import Path
from typing import Any

from kvplan.errors import UsageError

GIB = 1 << 30
FORMATS = (".png", ".svg")
# Colours of distinct lightness (they stay apart in grey), with hatches and line styles for print.
COLOURS = ("#08306b", "#d95f02", "#9ecae1", "#b2182b", "#fdd835", "#2166ac", "#7fbc41", "#566573")
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")
STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LEGEND_COLUMNS = 3


@dataclass(frozen=True)
class Series:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]


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
    """A horizontal line (label, y): the GPU's memory on an estimate chart."""
    data: dict[str, Any] = field(default_factory=dict)
    """The numbers drawn, in the units of ``-f json``, embedded in the file."""


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
    fig, ax = plt.subplots(figsize=(8.0, 4.8 if chart.kind == "lines" else 1.6 + 0.55 * len(chart.categories)),
                           dpi=150)
    try:
        {"lines": _lines, "stacked": _stacked, "bars": _bars}[chart.kind](ax, chart)
        entries = len(chart.series) if chart.kind != "bars" or len(chart.series) > 1 else 0
        ax.set_title(chart.title, fontsize=12, loc="left", pad=6 + 11 * -(-entries // LEGEND_COLUMNS))
        ax.set_xlabel(chart.x_label)
        ax.set_ylabel(chart.y_label)
        ax.grid(True, which="major", axis="y" if chart.kind == "lines" else "x", color="#cccccc", linewidth=0.6)
        ax.set_axisbelow(True)
        fig.text(0.01, 0.005, chart.caption, fontsize=7, color="#333333", ha="left", va="bottom", wrap=True)
        fig.tight_layout(rect=(0, 0.05, 1, 1))
        described = json.dumps(chart.data, separators=(",", ":"), sort_keys=True)
        meta = ({"Title": chart.title, "Description": described, "Date": None} if fmt == "svg"
                else {"Title": chart.title, "Description": described, "Software": "kvplan"})
        fig.savefig(stream, format=fmt, metadata=meta)
    finally:
        plt.close(fig)


def _lines(ax: Any, chart: Chart) -> None:
    for i, s in enumerate(chart.series):
        ax.plot(s.x, s.y, label=s.label, color=COLOURS[i % len(COLOURS)], linestyle=STYLES[i % len(STYLES)],
                marker=MARKERS[i % len(MARKERS)], markersize=4, linewidth=1.6)
    if chart.reference is not None:
        label, y = chart.reference
        ax.axhline(y, color="#000000", linewidth=1.0, linestyle=(0, (6, 3)))
        ax.annotate(label, xy=(0.99, y), xycoords=("axes fraction", "data"), xytext=(0, 3),
                    textcoords="offset points", fontsize=8, ha="right")
    if chart.log_x:
        ax.set_xscale("log", base=2)
    ys = [y for s in chart.series for y in s.y if y > 0]
    if chart.log_x and ys and max(ys) / min(ys) >= 64:  # a doubling sweep: log-log keeps every line readable
        ax.set_yscale("log", base=2)
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        ax.set_ylim(bottom=0)
    xs = sorted({x for s in chart.series for x in s.x})
    if xs and len(xs) <= 16:
        ax.set_xticks(xs, [_count(x) for x in xs], fontsize=8, rotation=0 if len(xs) <= 10 else 45)
    _legend_above(ax, len(chart.series))


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


def _legend_above(ax: Any, n: int) -> None:
    """Between the title and the bars: never over the data."""
    ax.legend(fontsize=7, frameon=False, ncol=min(n, LEGEND_COLUMNS), loc="lower left", bbox_to_anchor=(0, 1.0),
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


def budget_chart(plans: Sequence[Any]) -> Chart:
    """The GPU divided as each engine divides it: one stacked bar per plan (per GPU), outside-the-budget last."""
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
    data = {"model": first.model_id, "plans": [
        {"engine": p.engine, "gpu": p.gpu_name, "tp": p.tp, "pp": p.pp, "gpu_total_bytes": p.gpu_total_bytes,
         **{name: r[k] for k, (name, _) in enumerate(BUDGET_PARTS)}, "left_over": r[-1]}
        for p, r in zip(plans, rows)]}
    return Chart("stacked", f"One GPU's memory: {first.model_id}, {first.kv_dtype} KV",
                 _caption(first.kvplan_version, first.model_id, f"max model len {first.max_model_len:,}"),
                 "memory per GPU (GiB)", "", series, categories=tuple(cats), data=data)


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
