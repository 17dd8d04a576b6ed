"""Rich tables for the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from collections.abc import Sequence

from kvplan.estimate import EstimateResult
from kvplan.render.common import (
    SHARING_COLUMNS,
    dtype_label,
    layer_ranges,
    row_cells,
    sharing_cells,
    sharing_summary,
    sharing_term_lines,
)
from kvplan.render.console import never_cut
from kvplan.units import format_bytes

_COLUMNS = (("batch", "right"), ("context", "right"), ("kv dtype", "left"), ("KV cache", "right"),
            ("bytes", "right"), ("bytes/token", "right"))


def _engine_label(result: EstimateResult) -> str:
    block = f", block {result.block_size}" if result.block_size else ""
    return f"{result.engine} {result.engine_version}{block}"


def _caption(result: EstimateResult) -> str:
    m = result.model
    kinds = ", ".join(f"{n} {k}" for k, n in m.layer_kinds.items())
    return f"{m.num_layers} layers: {kinds}. GiB = 2^30 bytes."


def print_estimates(console: Console, results: Sequence[EstimateResult], by_layer: bool, explain: bool) -> None:
    """One engine: its table. Several (``-e vllm,sglang``): one table with an engine column, then each
    engine's per-layer tables, formulas and assumptions under its name."""
    if len(results) == 1:
        print_estimate(console, results[0], by_layer, explain)
        return
    table = Table(title=f"KV cache of {results[0].model.id} by engine", caption=_caption(results[0]),
                  title_justify="left")
    table.add_column("engine", justify="left")
    for name, justify in _COLUMNS:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for result in results:
        for i, row in enumerate(result.rows):
            last = i == len(result.rows) - 1
            table.add_row(_engine_label(result) if i == 0 else "", *row_cells(row), end_section=last)
    console.print(never_cut(table))
    shared = [a for a in results[0].assumptions if all(a in r.assumptions for r in results)]
    for result in results:
        own = tuple(a for a in result.assumptions if a not in shared)
        if by_layer or explain or own:
            console.print(_engine_label(result), style="bold", markup=False, highlight=False)
            _print_details(console, result, by_layer, explain, own)
    _print_notes(console, shared, "Assumptions (every engine)")


def print_estimate(console: Console, result: EstimateResult, by_layer: bool, explain: bool) -> None:
    table = Table(title=f"KV cache of {result.model.id} on {_engine_label(result)}", caption=_caption(result),
                  title_justify="left")
    for name, justify in _COLUMNS:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    if result.sharing is not None:
        for name in SHARING_COLUMNS:
            table.add_column(name, justify="right")
    for row in result.rows:
        table.add_row(*row_cells(row), *sharing_cells(row))
    console.print(never_cut(table))
    if result.sharing is not None:
        console.print(sharing_summary(result), highlight=False, markup=False)
    _print_details(console, result, by_layer, explain, result.assumptions)


def _print_notes(console: Console, notes: Sequence[str], title: str = "Assumptions") -> None:
    if notes:
        console.print(title, style="bold", markup=False, highlight=False)
        for note in notes:
            console.print(f"  • {note}", highlight=False, markup=False)


def _print_details(console: Console, result: EstimateResult, by_layer: bool, explain: bool,
                   notes: Sequence[str]) -> None:
    if by_layer:
        for row in result.rows:
            lt = Table(title=f"per layer: batch {row.batch}, context {row.context:,}, {row.kv_dtype}",
                       title_justify="left")
            for name in ("layers", "kind", "tokens held", "bytes per layer", "total"):
                lt.add_column(name, justify="left" if name in ("layers", "kind") else "right")
            for span, kind, tokens, each, total in layer_ranges(row.layers or ()):
                lt.add_row(span, kind, f"{tokens:,}", f"{each:,}", format_bytes(total))
            console.print(never_cut(lt))
    if explain:
        print_formulas(console, result)
    _print_notes(console, notes)


def print_formulas(console: Console, result: EstimateResult) -> None:
    console.print("[bold]How each number is made[/bold]")
    console.print("  kv_bytes = Σ layers × tokens held × bytes per token, + layers × batch × state bytes "
                  "for recurrent layers", highlight=False, markup=False)
    if result.sharing is not None:
        console.print("  with sharing, tokens per layer = stored once + batch × per request + sequences × per "
                      "sequence (docs/sharing.md)", highlight=False, markup=False)
    for f in result.formulas:
        what = f"unused pool slot{'s' if f.count > 1 else ''}" if f.kind == "padding" else \
            f"{f.kind} layer{'s' if f.count > 1 else ''}"
        head = f"  [{f.kv_dtype}] {f.count} {what} ({f.layers}): "
        if f.state_formula:
            console.print(head + f"state {f.state_bytes:,} B per sequence = {f.state_formula}",
                          highlight=False, markup=False)
        else:
            console.print(head + f"{f.bytes_per_token:,} B per token = {f.token_formula}; "
                          f"tokens held per sequence = {f.tokens_held_formula}", highlight=False, markup=False)
    for line in sharing_term_lines(result):
        console.print(f"  {line}", highlight=False, markup=False)
    first = result.rows[0]
    if first.layers:
        terms = {}
        for layer in first.layers:
            key = (layer.tokens_held, layer.bytes)
            terms[key] = terms.get(key, 0) + 1
        sum_text = " + ".join(f"{n} × {b:,} B" for (_, b), n in terms.items())
        console.print(f"  batch {first.batch}, context {first.context:,}, {dtype_label(first)}: {sum_text} "
                      f"= {first.kv_bytes:,} B = {format_bytes(first.kv_bytes)}", highlight=False, markup=False)
    else:
        console.print(f"  e.g. batch {first.batch}, context {first.context:,}, {dtype_label(first)}: "
                      f"{first.kv_bytes:,} B = {format_bytes(first.kv_bytes)}", highlight=False, markup=False)
