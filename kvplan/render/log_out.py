"""``kvplan log``'s outputs: the start-up log's waterfall as a table or as its stable JSON form."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

if TYPE_CHECKING:  # pathlib costs kvplan log's start-up some 10 ms
    from pathlib import Path
    from typing import IO, Any


def to_json(log: Any, comparison: Any, save: Path | None) -> dict[str, Any]:
    """The stable JSON form (docs/output.md, 'kvplan log'): fields are added, never renamed."""
    from kvplan._version import __version__
    from kvplan.logs.compare import extras, rows

    return {
        "kvplan_version": __version__, "engine": log.engine, "format": log.format, "complete": log.complete,
        "cut": log.cut, "bytes_read": log.bytes_read, "lines_read": log.lines_read, "ranks": list(log.ranks),
        "settings": log.settings.to_dict(),
        "waterfall": [r.to_dict() for r in rows(log, comparison.plan if comparison else None)],
        "also_logged": [{k: v for k, v in r.to_dict().items() if k in ("item", "logged", "step", "text", "line")}
                        for r in extras(log)],
        "counts_logged": [{"item": k, "value": v, "line": log.lines.get(k)} for k, v in log.counts.items()],
        "per_device": [{"device": r.device, "item": r.item, "logged": r.value.bytes, "step": r.value.step_bytes,
                        "text": r.value.text, "line": r.line} for r in log.per_device],
        "per_rank": [{"rank": r.device, "item": r.item, "logged": r.value.bytes, "step": r.value.step_bytes,
                      "text": r.value.text, "line": r.line} for r in log.per_rank],
        "compare": None if comparison is None else {
            "model": comparison.model, "gpu": comparison.gpu, "engine_version": comparison.engine_version,
            "biggest_difference": comparison.biggest_item, "explanation": comparison.biggest,
            "assumptions": [*comparison.assumptions, *comparison.plan.assumptions],
        },
        "saved": str(save) if save else None,
        "notes": list(log.notes),
    }


def _value(row: Any, which: str) -> str:
    from kvplan.units import format_bytes

    value = getattr(row, which)
    if value is None:
        return "unknown" if which == "logged" else "-"
    if row.unit == "bytes":
        return format_bytes(value)
    if row.unit == "x":
        return f"{value:.2f}x"
    return f"{value:,}"


def print_log(log: Any, comparison: Any, save: Path | None, stream: IO[str] | None = None) -> None:
    """The waterfall as rich's default console prints it on ``stream`` (the terminal's width, or 80 columns):
    through rich in a terminal, written plainly when piped (``render/grid.py``, the same bytes)."""
    import sys

    from kvplan.logs.compare import COMPARED_COUNTS, EXTRA_LABELS, LABELS, extras, rows
    from kvplan.logs.model import COUNT_ITEMS
    from kvplan.render.grid import Grid, GridOut
    from kvplan.units import format_bytes

    out = GridOut(sys.stdout if stream is None else stream, wide=False)
    s = log.settings
    if log.engine is None:
        out.line("Not a start-up log kvplan reads.")
        for note in log.notes:
            out.line(f"  • {note}")
        return
    said = [f"{k.replace('_', ' ')} {v}" for k, v in s.to_dict().items() if v is not None]
    title = f"{log.engine} log ({log.format})" + (f": {', '.join(said)}" if said else "")
    columns = [("item", "left"), ("logged", "right")]
    if comparison is not None:
        columns += [("kvplan", "right"), ("difference", "right")]
    columns.append(("as printed", "left"))
    cells: list[tuple[str | tuple[str, str], ...]] = []
    for row in rows(log, comparison.plan if comparison else None):
        label = LABELS[row.item] + (" (derived)" if row.derived else "")
        shown = [label, _value(row, "logged")]
        if comparison is not None:
            diff = row.difference
            shown += [_value(row, "kvplan"),
                      "" if diff is None else (f"{diff / 2**30:+.2f} GiB" if row.unit == "bytes"
                                               else f"{diff:+.2f}x" if row.unit == "x" else f"{diff:+,}")]
        # the line the item was read from; escaped for rich, which would read "[line N]" as a markup tag and drop it
        printed = (row.text or "") + ("  " if row.line else "")
        cells.append((*shown, (printed + f"[line {row.line}]", printed + f"\\[line {row.line}]") if row.line
                      else printed))
    out.grid(Grid(title, tuple(columns), tuple(cells), fold=False))
    also = [f"{EXTRA_LABELS[r.item]} {format_bytes(r.logged or 0)} ({r.text})" for r in extras(log)]
    also += [f"{COUNT_ITEMS[k]} {v:,}" for k, v in log.counts.items() if k not in COMPARED_COUNTS]  # in the table
    if also:
        out.line("Also logged: " + "; ".join(also))
    if shown_per_device(log):
        out.line("Per device: " + per_device_text(log))
    if log.per_rank:
        out.line("Per pipeline rank: " + per_rank_text(log))
    if comparison is not None:
        out.line(f"kvplan: {comparison.model} on {comparison.gpu}, {log.engine} {comparison.engine_version}")
        if comparison.biggest:
            out.line(comparison.biggest[0].upper() + comparison.biggest[1:])
    notes = list(log.notes) + (list(comparison.assumptions) if comparison else [])
    if notes:
        out.line("Notes", bold=True)
        for note in notes:
            out.line(f"  • {note}")
    if save is not None:
        out.line(f"Calibration written to {save}")


def shown_per_device(log: Any) -> bool:
    """Whether the table shows the per-device buffers: where they say more than the waterfall's sums (several
    devices, or one device's item that is not the whole item: a KV cache split with host memory)."""
    devices = {r.device for r in log.per_device}
    if len(devices) > 1:
        return True
    sums: dict[str, int] = {}
    for r in log.per_device:
        sums[r.item] = sums.get(r.item, 0) + r.value.bytes
    return any(item in log.memory and log.memory[item].bytes != total for item, total in sums.items())


def per_device_text(log: Any) -> str:
    """'CUDA0 weights 104.91 MiB, KV cache 208.00 MiB; CUDA1 ...' in the order the log printed them."""
    from kvplan.logs.model import DEVICE_ITEMS

    by_device: dict[str, list[str]] = {}
    for r in log.per_device:
        by_device.setdefault(r.device, []).append(f"{DEVICE_ITEMS[r.item]} {r.value.text}")
    return "; ".join(f"{device} " + ", ".join(items) for device, items in by_device.items())


def per_rank_text(log: Any) -> str:
    """'rank 0 weights 10.8 GiB (line 4), ..., KV cache 14.52 GiB (line 4); worker ...' in the order printed."""
    labels = {"weights": "weights", "non_torch": "non-torch", "activation": "activation peak", "kv_cache": "KV cache"}
    by_rank: dict[str, list[str]] = {}
    for r in log.per_rank:
        by_rank.setdefault(r.device, []).append(f"{labels.get(r.item, r.item)} {r.value.text} (line {r.line})")
    return "; ".join(f"{rank} " + ", ".join(items) for rank, items in by_rank.items())
