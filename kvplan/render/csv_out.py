"""CSV output of an estimate: one line per row, or per row and layer with ``--by-layer``."""

from __future__ import annotations

import csv
import io

from kvplan.estimate import EstimateResult

ROW_COLUMNS = ["model", "engine", "batch", "context", "kv_dtype", "kv_bytes", "bytes_per_token"]
LAYER_COLUMNS = ["layer", "kind", "tokens_held", "layer_bytes"]
SHARING_COLUMNS = ["prompt_len", "output_len", "sequences", "kv_bytes_plain"]


def estimate_csv(result: EstimateResult, by_layer: bool, *, header: bool = True) -> str:
    """The rows of one result (the ``engine`` column tells results apart; ``header`` for the first)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    shared = result.sharing is not None
    if header:
        writer.writerow(ROW_COLUMNS + (SHARING_COLUMNS if shared else []) + (LAYER_COLUMNS if by_layer else []))
    for row in result.rows:
        base = [result.model.id, result.engine, row.batch, row.context, row.kv_dtype, row.kv_bytes,
                f"{row.bytes_per_token:.6g}"]
        if row.sharing is not None:
            base += [row.sharing.prompt_len, row.sharing.output_len, row.sharing.sequences,
                     row.sharing.kv_bytes_plain]
        if by_layer and row.layers:
            for layer in row.layers:
                writer.writerow(base + [layer.index, layer.kind, layer.tokens_held, layer.bytes])
        else:
            writer.writerow(base)
    return out.getvalue()
