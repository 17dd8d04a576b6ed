"""CSV output of an estimate (one line per row, or per row and layer with ``--by-layer``) and of a capacity
plan (``kvplan max-batch``: one line per plan)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

import csv
import io
from collections.abc import Sequence

from kvplan.estimate import EstimateResult, row_blocks

if TYPE_CHECKING:
    from typing import IO

    from kvplan.plan import CapacityPlan

ROW_COLUMNS = ["model", "engine", "batch", "context", "kv_dtype", "kv_bytes", "bytes_per_token"]
LAYER_COLUMNS = ["layer", "kind", "tokens_held", "layer_bytes"]
SHARING_COLUMNS = ["prompt_len", "output_len", "sequences", "kv_bytes_plain"]


def estimate_csv(result: EstimateResult, by_layer: bool, *, header: bool = True) -> str:
    """The rows of one result (the ``engine`` column tells results apart; ``header`` for the first)."""
    out = io.StringIO()
    write_estimate_csv(out, result, by_layer, header=header)
    return out.getvalue()


def write_estimate_csv(stream: IO[str], result: EstimateResult, by_layer: bool, *, header: bool = True) -> None:
    """``estimate_csv`` written to ``stream`` a block of rows at a time: memory stays flat however long the
    sweep (the rows may be a lazy ``RowSweep``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    shared = result.sharing is not None
    if header:
        writer.writerow(ROW_COLUMNS + (SHARING_COLUMNS if shared else []) + (LAYER_COLUMNS if by_layer else []))
    model, engine = result.model.id, result.engine
    blocks = row_blocks(result.rows, admission=False)
    if blocks is not None:  # plain rows: one %-template per dtype, the text cells quoted once by the writer
        stream.write(out.getvalue())
        lead = (_cell(model) + "," + _cell(engine)).replace("%", "%%") + ",%d,%d,"
        templates: dict[str, str] = {}
        for block in blocks:
            template = templates.get(block.kv_dtype)
            if template is None:
                template = templates[block.kv_dtype] = lead + _cell(block.kv_dtype).replace("%", "%%") + ",%d,%.6g\n"
            stream.write("".join([template % row for row in zip(block.batches, block.contexts, block.kv_bytes,
                                                                  block.bytes_per_token)]))
        return
    for row in result.rows:
        base = [model, engine, row.batch, row.context, row.kv_dtype, row.kv_bytes, f"{row.bytes_per_token:.6g}"]
        if row.sharing is not None:
            base += [row.sharing.prompt_len, row.sharing.output_len, row.sharing.sequences,
                     row.sharing.kv_bytes_plain]
        if by_layer and row.layers:
            writer.writerows(base + [layer.index, layer.kind, layer.tokens_held, layer.bytes] for layer in row.layers)
        else:
            writer.writerow(base)
        if out.tell() >= _CHUNK:
            stream.write(out.getvalue())
            out.seek(0)
            out.truncate()
    stream.write(out.getvalue())


def _cell(text: str) -> str:
    """``text`` as the csv writer writes it as one field of several (quoted where it must be)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow([text, ""])
    return out.getvalue()[:-2]


_CHUNK = 1 << 17
"""Characters gathered before each write to the stream (a block of rows, fewer with --by-layer)."""


PLAN_COLUMNS = ["model", "engine", "engine_version", "gpu", "gpu_count", "tp", "pp", "dp", "kv_dtype",
                "max_model_len", "context", "batch", "kv_cache_bytes_per_gpu", "block_size", "num_blocks",
                "kv_cache_tokens", "max_concurrency", "max_batch", "max_batch_plain", "max_context", "fits"]
"""``kvplan max-batch --format csv``: one line per plan (per engine with ``-e vllm,sglang``)."""


def plan_csv(plans: Sequence[CapacityPlan], *, header: bool = True) -> str:
    """One line per plan under one header; ``max_batch_plain`` is empty unless something is shared, as in JSON;
    the integers are exact (bytes, tokens), ``max_concurrency`` has JSON's four decimals."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(PLAN_COLUMNS)
    for p in plans:
        shared = p.shared_prefix or p.samples > 1
        writer.writerow([p.model_id, p.engine, p.engine_version, p.gpu_name, p.gpu_count, p.tp, p.pp, p.dp,
                         p.kv_dtype, p.max_model_len, p.context, p.batch, p.per_gpu.kv_cache_bytes,
                         "" if p.block_size is None else p.block_size, "" if p.num_blocks is None else p.num_blocks,
                         p.kv_cache_tokens, f"{p.max_concurrency:.4f}", p.max_batch,
                         p.max_batch_plain if shared and p.max_batch_plain is not None else "", p.max_context,
                         "yes" if p.fits else "no"])
    return out.getvalue()
