"""Cell text shared by the table and markdown renderers."""

from __future__ import annotations

from collections.abc import Iterable

from kvplan.estimate import EstimateRow, LayerRow
from kvplan.units import format_bytes


def dtype_label(row: EstimateRow) -> str:
    """'bfloat16', or 'auto (bfloat16)' when the user left the choice to the engine."""
    if row.kv_dtype_resolved and row.kv_dtype_resolved != row.kv_dtype:
        return f"{row.kv_dtype} ({row.kv_dtype_resolved})"
    return row.kv_dtype


def row_cells(row: EstimateRow) -> list[str]:
    return [str(row.batch), f"{row.context:,}", dtype_label(row), format_bytes(row.kv_bytes),
            f"{row.kv_bytes:,}", f"{row.bytes_per_token:,.1f}"]


def layer_ranges(layers: Iterable[LayerRow]) -> list[tuple[str, str, int, int, int]]:
    """Consecutive layers with the same kind, tokens and bytes merged: (span, kind, tokens, each, total)."""
    out: list[list] = []
    for layer in layers:
        if out and out[-1][1] == layer.kind and out[-1][2] == layer.tokens_held and out[-1][3] == layer.bytes \
                and out[-1][5] == layer.index - 1:
            out[-1][4] += layer.bytes
            out[-1][5] = layer.index
        else:
            out.append([layer.index, layer.kind, layer.tokens_held, layer.bytes, layer.bytes, layer.index])
    return [(f"{a}" if a == z else f"{a}-{z}", kind, tokens, each, total)
            for a, kind, tokens, each, total, z in out]
