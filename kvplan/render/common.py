"""Cell text shared by the table and markdown renderers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, repeat

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.units import format_bytes, format_bytes_many

if TYPE_CHECKING:  # kvplan.estimate is imported where an estimate is printed, not by a capacity plan's table
    from kvplan.estimate import EstimateResult, EstimateRow, LayerRow, RowBlock


def dtype_label(row: EstimateRow | RowBlock) -> str:
    """'bfloat16', or 'auto (bfloat16)' when the user left the choice to the engine."""
    if row.kv_dtype_resolved and row.kv_dtype_resolved != row.kv_dtype:
        return f"{row.kv_dtype} ({row.kv_dtype_resolved})"
    return row.kv_dtype


def row_cells(row: EstimateRow) -> list[str]:
    return [str(row.batch), f"{row.context:,}", dtype_label(row), format_bytes(row.kv_bytes),
            f"{row.kv_bytes:,}", f"{row.bytes_per_token:,.1f}"]


def block_cells(block: RowBlock) -> list[tuple[str, ...]]:
    """``row_cells`` of every row of ``block``, a column at a time (one format call per cell, no row object)."""
    grouped = "{:,}".format
    kv = block.kv_bytes
    distinct = list(dict.fromkeys(kv))
    if 2 * len(distinct) <= len(kv):  # paged sweeps repeat each figure a page of contexts long: format it once
        sizes, exact = dict(zip(distinct, format_bytes_many(distinct))), dict(zip(distinct, map(grouped, distinct)))
        size_cells, byte_cells = map(sizes.__getitem__, kv), map(exact.__getitem__, kv)
    else:
        size_cells, byte_cells = iter(format_bytes_many(kv)), map(grouped, kv)
    batches = {b: str(b) for b in dict.fromkeys(block.batches)}
    return list(zip(map(batches.__getitem__, block.batches), map(grouped, block.contexts), repeat(dtype_label(block)),
                    size_cells, byte_cells, map("{:,.1f}".format, block.bytes_per_token)))


def estimate_cells(result: EstimateResult, sharing: bool = True) -> Iterable[Sequence[str]]:
    """``row_cells`` (+ ``sharing_cells`` with ``sharing``) of each row of ``result``, in order: a block at a time
    where the rows come in blocks (a plain sweep), row by row otherwise."""
    from kvplan.estimate import row_blocks

    blocks = row_blocks(result.rows, admission=False)
    if blocks is not None:
        return chain.from_iterable(map(block_cells, blocks))  # no generator step per row
    return _row_cells(result, sharing)


def _row_cells(result: EstimateResult, sharing: bool) -> Iterator[Sequence[str]]:
    if result.sharing is None or not sharing:
        for row in result.rows:
            yield row_cells(row)
    else:
        for row in result.rows:
            yield row_cells(row) + sharing_cells(row)


SHARING_COLUMNS = ("sequences", "plain", "saving")


def sharing_cells(row: EstimateRow) -> list[str]:
    """The plain figure beside the shared one: sequences held, bytes with nothing shared, the saving."""
    sh = row.sharing
    if sh is None:
        return []
    saving = sh.kv_bytes_plain - row.kv_bytes
    fraction = saving / sh.kv_bytes_plain if sh.kv_bytes_plain else 0.0
    return [f"{sh.sequences:,}", format_bytes(sh.kv_bytes_plain), f"{format_bytes(saving)} (-{fraction:.0%})"]


def sharing_summary(result: EstimateResult) -> str:
    """One line: what is shared ('shared prefix: 2,048 tokens stored once ...')."""
    w = result.sharing
    if w is None:
        return ""
    parts = [f"prompt {w.prompt_len:,} + output {w.output_len:,} tokens" if len(result.rows) == 1 or
             _one_context(result.rows) else "prompt + output per row"]
    if w.shared_prefix:
        parts.append(f"shared prefix: {w.shared_prefix:,} tokens common to every request")
    if w.n > 1:
        parts.append(f"n = {w.n} parallel samples per request")
    if w.beam_width > 1:
        parts.append(f"beam width {w.beam_width}")
    return "; ".join(parts)


def _one_context(rows: Iterable[EstimateRow]) -> bool:
    """Whether every row has the first row's context (none: False); stops at the first other, holds nothing."""
    first = None
    for row in rows:
        if first is None:
            first = row.context
        elif row.context != first:
            return False
    return first is not None


def sharing_term_lines(result: EstimateResult) -> list[str]:
    """``--explain``: tokens per layer = once + batch x per request + sequences x own, for the first row."""
    if result.sharing is None:
        return []
    first = result.rows[0]
    seqs = first.sharing.sequences if first.sharing else first.batch
    lines = []
    for t in result.sharing_terms:
        lines.append(f"[{t.kv_dtype}] {t.count} {t.kind} layer{'s' if t.count > 1 else ''}: {t.once_tokens:,} "
                     f"tokens once + {first.batch} x {t.per_request_tokens:,} per request + {seqs} x "
                     f"{t.per_sequence_tokens:,} per sequence = {t.tokens:,} tokens per layer "
                     f"(plain {t.plain_tokens:,})")
    return lines


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


def ranged(plan: Any, key: str, text: str, shown: Any = None) -> str:
    """A budget-resting figure with the range the engine's own figure may take (``CapacityPlan.interval``):
    ``395,776 (366,368 to 411,168)``; the figure alone where kvplan has no range or both ends agree."""
    interval = getattr(plan, "interval", None)
    if not interval or key not in interval:
        return text
    low, high = interval[key]
    if low == high:
        return text
    form = shown or (lambda v: f"{v:,}")
    return f"{text} ({form(low)} to {form(high)})"


def interval_note(plan: Any) -> str:
    """What the ranges in a plan's table mean, or ''."""
    interval = getattr(plan, "interval", None)
    if not interval:
        return ""
    low, high = interval["error_fraction"]
    if interval.get("few_logs"):  # too few logs for a 90 % band: the spread of the few there are
        return (f"ranges in brackets: the engine's own figure if kvplan errs as it does on the few real start-up "
                f"logs it has for this engine ({low * 100:+.2f} % to {high * 100:+.2f} % of the GPU's memory; "
                f"{interval['basis']})")
    return (f"ranges in brackets: the engine's own figure for about 9 in 10 deployments, from kvplan's error on real "
            f"start-up logs it was not fitted to ({low * 100:+.2f} % to {high * 100:+.2f} % of the GPU's memory; "
            f"{interval['basis']})")
