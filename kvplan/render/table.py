"""Estimate tables: through rich in a terminal, through the plain writer (render/plain.py) when piped or
longer than the terminal, the same bytes either way where rich is not in a terminal. The tables, lines and
notes are described once, here, for both (``Out``: ``RichOut`` or ``PlainOut``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import repeat

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any, Union

from kvplan.estimate import EstimateResult
from kvplan.render.common import (
    SHARING_COLUMNS,
    dtype_label,
    estimate_cells,
    layer_ranges,
    sharing_summary,
    sharing_term_lines,
)
from kvplan.render.plain import PlainOut, RichOut, Row, TableSpec
from kvplan.units import format_bytes

if TYPE_CHECKING:  # a type: no typing at run time
    Out = Union[RichOut, PlainOut]

_COLUMNS = (("batch", "right"), ("context", "right"), ("kv dtype", "left"), ("KV cache", "right"),
            ("bytes", "right"), ("bytes/token", "right"))
_LAYER_COLUMNS = (("layers", "left"), ("kind", "left"), ("tokens held", "right"), ("bytes per layer", "right"),
                  ("total", "right"))


def _engine_label(result: EstimateResult) -> str:
    block = f", block {result.block_size}" if result.block_size else ""
    return f"{result.engine} {result.engine_version}{block}"


def _caption(result: EstimateResult) -> str:
    m = result.model
    kinds = ", ".join(f"{n} {k}" for k, n in m.layer_kinds.items())
    return f"{m.num_layers} layers: {kinds}. GiB = 2^30 bytes."


def print_estimates(console: Any, results: Sequence[EstimateResult], by_layer: bool, explain: bool) -> None:
    """The tables through a rich console."""
    write_estimates(RichOut(console), results, by_layer, explain)


def table_lines(results: Sequence[EstimateResult], by_layer: bool) -> int:
    """About how many lines the tables take (to tell whether they fit the terminal)."""
    rows = sum(len(r.rows) for r in results)
    return 8 + rows * (8 if by_layer else 1)


def write_estimates(out: Out, results: Sequence[EstimateResult], by_layer: bool, explain: bool) -> None:
    """One engine: its table. Several (``-e vllm,sglang``): one table with an engine column, then each
    engine's per-layer tables, formulas and assumptions under its name."""
    if len(results) == 1:
        _write_estimate(out, results[0], by_layer, explain)
        return

    def rows() -> Iterator[Row]:
        for result in results:
            last = len(result.rows) - 1
            for i, cells in enumerate(estimate_cells(result, sharing=False)):
                yield [_engine_label(result) if i == 0 else "", *cells], i == last

    out.table(TableSpec(f"KV cache of {results[0].model.id} by engine", (("engine", "left"), *_COLUMNS), rows,
                        _caption(results[0])))
    shared = [a for a in results[0].assumptions if all(a in r.assumptions for r in results)]
    for result in results:
        own = tuple(a for a in result.assumptions if a not in shared)
        if by_layer or explain or own:
            out.line(_engine_label(result), bold=True)
            _write_details(out, result, by_layer, explain, own)
    _write_notes(out, shared, "Assumptions (every engine)")


def _write_estimate(out: Out, result: EstimateResult, by_layer: bool, explain: bool) -> None:
    columns = _COLUMNS + (tuple((name, "right") for name in SHARING_COLUMNS) if result.sharing is not None else ())

    def rows() -> Iterator[Row]:
        return zip(estimate_cells(result), repeat(False))

    out.table(TableSpec(f"KV cache of {result.model.id} on {_engine_label(result)}", columns, rows,
                        _caption(result)))
    if result.sharing is not None:
        out.line(sharing_summary(result))
    _write_details(out, result, by_layer, explain, result.assumptions)


def _write_notes(out: Out, notes: Sequence[str], title: str = "Assumptions") -> None:
    if notes:
        out.line(title, bold=True)
        for note in notes:
            out.line(f"  • {note}")


def _write_details(out: Out, result: EstimateResult, by_layer: bool, explain: bool, notes: Sequence[str]) -> None:
    if by_layer:
        for row in result.rows:
            ranges = [([span, kind, f"{tokens:,}", f"{each:,}", format_bytes(total)], False)
                      for span, kind, tokens, each, total in layer_ranges(row.layers or ())]
            out.table(TableSpec(f"per layer: batch {row.batch}, context {row.context:,}, {row.kv_dtype}",
                                _LAYER_COLUMNS, _given(ranges)))
    if explain:
        write_formulas(out, result)
    _write_notes(out, notes)


def _given(rows: list[Row]) -> Callable[[], list[Row]]:
    return lambda: rows


def write_formulas(out: Out, result: EstimateResult) -> None:
    out.line("How each number is made", bold=True)
    out.line("  kv_bytes = Σ layers × tokens held × bytes per token, + layers × batch × state bytes "
             "for recurrent layers")
    if result.sharing is not None:
        out.line("  with sharing, tokens per layer = stored once + batch × per request + sequences × per "
                 "sequence (docs/sharing.md)")
    for f in result.formulas:
        what = f"unused pool slot{'s' if f.count > 1 else ''}" if f.kind == "padding" else \
            f"{f.kind} layer{'s' if f.count > 1 else ''}"
        head = f"  [{f.kv_dtype}] {f.count} {what} ({f.layers}): "
        if f.state_formula:
            out.line(head + f"state {f.state_bytes:,} B per sequence = {f.state_formula}")
        else:
            out.line(head + f"{f.bytes_per_token:,} B per token = {f.token_formula}; "
                     f"tokens held per sequence = {f.tokens_held_formula}")
    for line in sharing_term_lines(result):
        out.line(f"  {line}")
    first = result.rows[0]
    if first.layers:
        terms: dict[tuple[int, int], int] = {}
        for layer in first.layers:
            key = (layer.tokens_held, layer.bytes)
            terms[key] = terms.get(key, 0) + 1
        sum_text = " + ".join(f"{n} × {b:,} B" for (_, b), n in terms.items())
        out.line(f"  batch {first.batch}, context {first.context:,}, {dtype_label(first)}: {sum_text} "
                 f"= {first.kv_bytes:,} B = {format_bytes(first.kv_bytes)}")
    else:
        out.line(f"  e.g. batch {first.batch}, context {first.context:,}, {dtype_label(first)}: "
                 f"{first.kv_bytes:,} B = {format_bytes(first.kv_bytes)}")
