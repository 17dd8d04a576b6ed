"""Markdown output of an estimate and of a capacity plan (for PR comments, step summaries and docs)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

import io
from collections.abc import Iterable

from kvplan.estimate import EstimateResult, EstimateRow
from kvplan.render.common import (estimate_cells, interval_note, layer_ranges, ranged, sharing_summary,
                                  sharing_term_lines)
from kvplan.units import format_bytes

if TYPE_CHECKING:
    from typing import IO

    from kvplan.plan import CapacityPlan


def estimate_markdown(result: EstimateResult, by_layer: bool, explain: bool) -> str:
    out = io.StringIO()
    write_estimate_markdown(out, result, by_layer, explain)
    return out.getvalue()


def write_estimate_markdown(stream: IO[str], result: EstimateResult, by_layer: bool, explain: bool) -> None:
    """``estimate_markdown`` written to ``stream`` a block of lines at a time: memory stays flat however long
    the sweep (the rows may be a lazy ``RowSweep``, read once for the table and once per layer tables)."""
    m = result.model
    shared = result.sharing is not None
    _write_lines(stream, [f"### KV cache: {m.id} ({result.engine} {result.engine_version})", "",
                          "| batch | context | kv dtype | KV cache | bytes | bytes/token |"
                          + (" sequences | plain | saving |" if shared else ""),
                          "|---:|---:|---|---:|---:|---:|" + ("---:|---:|---:|" if shared else "")])
    _write_lines(stream, ("| " + " | ".join(cells) + " |" for cells in estimate_cells(result)))
    lines: list[str] = []
    if shared:
        lines += ["", sharing_summary(result)]
    _write_lines(stream, lines)
    if by_layer:
        _write_lines(stream, (line for row in result.rows for line in _layer_lines(row)))
    lines = []
    if explain:
        lines += ["", "**Formulas**", ""]
        for f in result.formulas:
            state = f"; state {f.state_bytes:,} B = {f.state_formula}" if f.state_formula else ""
            what = "unused pool slots" if f.kind == "padding" else f"{f.kind} layers"
            lines.append(f"- `{f.kv_dtype}` {f.count} {what} ({f.layers}): "
                         f"{f.bytes_per_token:,} B/token = {f.token_formula}; tokens held = {f.tokens_held_formula}{state}")
    if explain and shared:
        lines += [f"- {line}" for line in sharing_term_lines(result)]
    if result.assumptions:
        lines += ["", "**Assumptions**", ""] + [f"- {a}" for a in result.assumptions]
    _write_lines(stream, lines)


def _layer_lines(row: EstimateRow) -> list[str]:
    lines = ["", f"**Per layer, batch {row.batch}, context {row.context:,}, {row.kv_dtype}**", "",
             "| layers | kind | tokens held | bytes per layer | bytes |", "|---|---|---:|---:|---:|"]
    for span, kind, tokens, each, total in layer_ranges(row.layers or ()):
        lines.append(f"| {span} | {kind} | {tokens:,} | {each:,} | {format_bytes(total)} |")
    return lines


_CHUNK = 1024
"""Lines gathered before each write to the stream."""


def _write_lines(stream: IO[str], lines: Iterable[str]) -> None:
    """Each line and its line break, ``_CHUNK`` lines to a write."""
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == _CHUNK:
            stream.write("\n".join(chunk) + "\n")
            chunk.clear()
    if chunk:
        stream.write("\n".join(chunk) + "\n")


def _cell(text: str) -> str:
    """Table cell text: a '|' in a note must not split the cell, a newline not end the row."""
    return " ".join(text.split()).replace("|", "\\|")


def plan_markdown(plan: CapacityPlan) -> str:
    """``kvplan max-batch --format markdown``: the memory per GPU and the capacity, as the table format shows
    them (render/plan_table.py), then the engine settings and assumptions."""
    par = f"tp {plan.tp} x pp {plan.pp} x dp {plan.dp}"
    lines = [f"### Capacity: {_cell(plan.model_id)} on {plan.gpu_count} x {_cell(plan.gpu_name)} ({par}), "
             f"{plan.engine} {_cell(plan.engine_version)}, KV {plan.kv_dtype}", "",
             f"One GPU: {format_bytes(plan.gpu_total_bytes)} ({plan.gpu_total_bytes:,} B)", "",
             "| memory | size | bytes | how | why |", "|---|---:|---:|---|---|"]
    for item in plan.items:
        lines.append(f"| {item.name} | {format_bytes(item.bytes)} | {item.bytes:,} | {_cell(item.tag)} | "
                     f"{_cell(item.note)} |")
    rows: list[tuple[str, str]] = []
    if plan.block_size:
        rows.append(("block size (tokens)", f"{plan.block_size:,}"))
    if plan.num_blocks is not None:
        rows.append(("KV blocks per GPU", f"{plan.num_blocks:,}"))
    tokens = ranged(plan, "kv_cache_tokens", f"{plan.kv_cache_tokens:,}")
    rows.append(("KV cache tokens (as the engine logs them)", tokens))
    if plan.state_slots is not None:  # SGLang sizes a hybrid's recurrent-state slots apart
        rows.append(("recurrent-state slots (max_mamba_cache_size)", f"{plan.state_slots:,}"))
    rows.append((f"max concurrency at {plan.max_model_len:,} tokens",
                 ranged(plan, "max_concurrency", f"{plan.max_concurrency:.2f}x", lambda v: f"{v:.2f}x")))
    if plan.max_batch_plain is not None:
        what = f"requests of {plan.samples} x " if plan.samples > 1 else ""
        shared = f", {plan.shared_prefix:,} shared" if plan.shared_prefix else ""
        rows.append((f"max batch at {what}{plan.context:,} tokens{shared}", f"{plan.max_batch:,}"))
        rows.append(("with nothing shared", f"{plan.max_batch_plain:,}"))
    else:
        rows.append((f"max batch at {plan.context:,} tokens", ranged(plan, "max_batch", f"{plan.max_batch:,}")))
    rows.append((f"max context at batch {plan.batch}", f"{plan.max_context:,}"))
    if plan.decode_step_seconds_min is not None and plan.decode_tokens_per_second_max is not None:
        rows.append(("decode step, lower bound", f"{plan.decode_step_seconds_min * 1000:.2f} ms"))
        rows.append(("decode tokens/s, upper bound", f"{plan.decode_tokens_per_second_max:,.0f}"))
    rows.append(("fits", "yes" if plan.fits else "**no**"))
    lines += ["", "| capacity | value |", "|---|---:|"] + [f"| {what} | {value} |" for what, value in rows]
    if not plan.fits and plan.message:
        lines += ["", f"Does not fit: {_cell(plan.message)}"]
    if plan.engine_defaults:
        shown = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in plan.engine_defaults.items())
        lines += ["", f"Engine settings used: {_cell(shown)}"]
    notes = [*plan.assumptions, *([interval_note(plan)] if plan.interval else [])]
    if notes:
        lines += ["", "**Assumptions**", ""] + [f"- {_cell(a)}" for a in notes]
    return "\n".join(lines) + "\n"
