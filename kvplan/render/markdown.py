"""Markdown output of an estimate (for PR comments, step summaries and docs)."""

from __future__ import annotations

from kvplan.estimate import EstimateResult
from kvplan.render.common import layer_ranges, row_cells, sharing_cells, sharing_summary, sharing_term_lines
from kvplan.units import format_bytes


def estimate_markdown(result: EstimateResult, by_layer: bool, explain: bool) -> str:
    m = result.model
    lines = [f"### KV cache: {m.id} ({result.engine} {result.engine_version})", ""]
    shared = result.sharing is not None
    lines.append("| batch | context | kv dtype | KV cache | bytes | bytes/token |"
                 + (" sequences | plain | saving |" if shared else ""))
    lines.append("|---:|---:|---|---:|---:|---:|" + ("---:|---:|---:|" if shared else ""))
    for row in result.rows:
        lines.append("| " + " | ".join(row_cells(row) + sharing_cells(row)) + " |")
    if shared:
        lines += ["", sharing_summary(result)]
    if by_layer:
        for row in result.rows:
            lines += ["", f"**Per layer, batch {row.batch}, context {row.context:,}, {row.kv_dtype}**", "",
                      "| layers | kind | tokens held | bytes per layer | bytes |", "|---|---|---:|---:|---:|"]
            for span, kind, tokens, each, total in layer_ranges(row.layers or ()):
                lines.append(f"| {span} | {kind} | {tokens:,} | {each:,} | {format_bytes(total)} |")
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
    return "\n".join(lines) + "\n"
