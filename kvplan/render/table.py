"""Rich tables for the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

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
from kvplan.units import format_bytes


def print_estimate(console: Console, result: EstimateResult, by_layer: bool, explain: bool) -> None:
    m = result.model
    kinds = ", ".join(f"{n} {k}" for k, n in m.layer_kinds.items())
    block = f", block {result.block_size}" if result.block_size else ""
    table = Table(title=f"KV cache of {m.id} on {result.engine} {result.engine_version}{block}",
                  caption=f"{m.num_layers} layers: {kinds}. GiB = 2^30 bytes.", title_justify="left")
    for name, justify in (("batch", "right"), ("context", "right"), ("kv dtype", "left"),
                          ("KV cache", "right"), ("bytes", "right"), ("bytes/token", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    if result.sharing is not None:
        for name in SHARING_COLUMNS:
            table.add_column(name, justify="right")
    for row in result.rows:
        table.add_row(*row_cells(row), *sharing_cells(row))
    console.print(table)
    if result.sharing is not None:
        console.print(sharing_summary(result), highlight=False)
    if by_layer:
        for row in result.rows:
            lt = Table(title=f"per layer: batch {row.batch}, context {row.context:,}, {row.kv_dtype}",
                       title_justify="left")
            for name in ("layers", "kind", "tokens held", "bytes per layer", "total"):
                lt.add_column(name, justify="left" if name in ("layers", "kind") else "right")
            for span, kind, tokens, each, total in layer_ranges(row.layers or ()):
                lt.add_row(span, kind, f"{tokens:,}", f"{each:,}", format_bytes(total))
            console.print(lt)
    if explain:
        print_formulas(console, result)
    if result.assumptions:
        console.print("[bold]Assumptions[/bold]")
        for note in result.assumptions:
            console.print(f"  • {note}", highlight=False)


def print_formulas(console: Console, result: EstimateResult) -> None:
    console.print("[bold]How each number is made[/bold]")
    console.print("  kv_bytes = Σ layers × tokens held × bytes per token, + layers × batch × state bytes "
                  "for recurrent layers", highlight=False)
    if result.sharing is not None:
        console.print("  with sharing, tokens per layer = stored once + batch × per request + sequences × per "
                      "sequence (docs/sharing.md)", highlight=False)
    for f in result.formulas:
        what = f"unused pool slot{'s' if f.count > 1 else ''}" if f.kind == "padding" else \
            f"{f.kind} layer{'s' if f.count > 1 else ''}"
        head = f"  [{f.kv_dtype}] {f.count} {what} ({f.layers}): "
        if f.state_formula:
            console.print(head + f"state {f.state_bytes:,} B per sequence = {f.state_formula}", highlight=False)
        else:
            console.print(head + f"{f.bytes_per_token:,} B per token = {f.token_formula}; "
                          f"tokens held per sequence = {f.tokens_held_formula}", highlight=False)
    for line in sharing_term_lines(result):
        console.print(f"  {line}", highlight=False)
    first = result.rows[0]
    if first.layers:
        terms = {}
        for layer in first.layers:
            key = (layer.tokens_held, layer.bytes)
            terms[key] = terms.get(key, 0) + 1
        sum_text = " + ".join(f"{n} × {b:,} B" for (_, b), n in terms.items())
        console.print(f"  batch {first.batch}, context {first.context:,}, {dtype_label(first)}: {sum_text} "
                      f"= {first.kv_bytes:,} B = {format_bytes(first.kv_bytes)}", highlight=False)
    else:
        console.print(f"  e.g. batch {first.batch}, context {first.context:,}, {dtype_label(first)}: "
                      f"{first.kv_bytes:,} B = {format_bytes(first.kv_bytes)}", highlight=False)
