"""The block tables of a paged pool, built as tensors and measured: what the sequences reference.

vLLM's ``BlockTable`` rows as an int64 tensor ``[sequences, blocks]`` per KV-cache group; the distinct
block ids they reference (``torch.unique``) times the bytes one block holds in the group's views is
what the pool holds for the sequences, each shared block counted once.
"""

from __future__ import annotations

from typing import Any

from kvplan.verify.errors import VerifyError
from kvplan.verify.results import BlockTableCheck


def per_block_bytes(alloc: Any, layers: tuple[int, ...]) -> int:
    """Bytes one block holds in the views of these layers (every slot of a vLLM group)."""
    wanted, out = set(layers), 0
    for (layer, _), view in alloc.views.items():
        if layer in wanted and view.shape[0]:
            out += view[0].numel() * view.element_size()
    return out


def block_table_checks(torch: Any, alloc: Any, plan: Any) -> tuple[BlockTableCheck, ...]:
    """Every sequence's block table as an int64 tensor ``[sequences, blocks per sequence]`` (vLLM's
    ``BlockTable`` rows), then the distinct blocks they reference and those blocks' bytes in the
    group's views: what the pool holds for the sequences, each shared block counted once."""
    out = []
    for t in plan.block_tables:
        seqs, first = t.sequences, t.first_block
        once = torch.arange(first, first + t.once).expand(seqs, t.once)
        request = torch.arange(t.requests).repeat_interleave(t.samples)[:, None]
        shared = first + t.once + request * t.per_request + torch.arange(t.per_request)[None, :]
        own_start = first + t.once + t.requests * t.per_request
        own = own_start + torch.arange(seqs)[:, None] * t.per_sequence + torch.arange(t.per_sequence)[None, :]
        table = torch.cat([once, shared, own], dim=1)
        for r, s in {(0, 0), (t.requests - 1, t.samples - 1)}:  # the tensor is the plan's own tables
            if table[r * t.samples + s].tolist() != t.row(r, s):
                raise VerifyError(f"internal: block table row ({r}, {s}) differs from the plan")
        ids = torch.unique(table)
        count = int(ids.numel())
        if count and (int(ids.min()) < first or int(ids.max()) >= first + t.blocks):
            raise VerifyError("internal: a block table references a block outside its group's region")
        per_block = per_block_bytes(alloc, t.layers)
        out.append(BlockTableCheck(t.layers, seqs, t.blocks, count, t.once, t.per_request, t.per_sequence,
                                   count * per_block))
        del table, ids
    return tuple(out)
