"""A terminal chart of KV-cache size against context, one series per kv dtype."""

from __future__ import annotations

import math

from kvplan.estimate import EstimateResult
from kvplan.units import format_bytes, format_count

_MARKS = "●▲■◆x+o*"


def estimate_plot(result: EstimateResult, width: int = 60, height: int = 14) -> str:
    batch = result.rows[0].batch
    series: dict[str, list[tuple[int, int]]] = {}
    for row in result.rows:
        if row.batch == batch:
            series.setdefault(row.kv_dtype, []).append((row.context, row.kv_bytes))
    contexts = sorted({c for points in series.values() for c, _ in points})
    if len(contexts) < 2:
        return "(--plot needs at least two context lengths)\n"
    top = max(b for points in series.values() for _, b in points) or 1
    log_x = contexts[-1] / contexts[0] >= 16

    def col(c: int) -> int:
        lo, hi = contexts[0], contexts[-1]
        frac = (math.log(c / lo) / math.log(hi / lo)) if log_x else (c - lo) / (hi - lo)
        return round(frac * (width - 1))

    grid = [[" "] * width for _ in range(height)]
    for mark, (_, points) in zip(_MARKS, series.items()):
        for c, b in points:
            r = height - 1 - round(b / top * (height - 1))
            grid[r][col(c)] = mark
    label_w = len(format_bytes(top))
    lines = [f"KV cache vs context, batch {batch} ({'log' if log_x else 'linear'} context axis)"]
    for r, cells in enumerate(grid):
        value = top * (height - 1 - r) / (height - 1)
        label = format_bytes(value) if r % 4 == 0 or r == height - 1 else ""
        lines.append(f"{label:>{label_w}} ┤{''.join(cells)}")
    lines.append(" " * label_w + " └" + "─" * width)
    ticks = [" "] * (width + 8)
    for c in (contexts[0], contexts[len(contexts) // 2], contexts[-1]):
        text = format_count(c)
        start = min(col(c), width - len(text))
        ticks[start:start + len(text)] = text
    lines.append(" " * (label_w + 2) + "".join(ticks).rstrip())
    legend = "   ".join(f"{mark} {name}" for mark, name in zip(_MARKS, series))
    lines.append(" " * (label_w + 2) + legend)
    return "\n".join(lines) + "\n"
