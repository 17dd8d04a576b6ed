"""``verify --decode`` with a shared prefix, ``n`` or beams: the pool decoded step by step, measured.

``kvplan.verify.paging`` steps the block tables (no torch); here every step's writes go into the real
pool -- each token's tag into the first 8 bytes of its slot in one layer's view per group (K, or the
MLA latent) -- and at every checked step:

- the tables are built as int64 tensors and the distinct blocks they reference, times the bytes of
  the group's views in one block, are the measured bytes, against ``kvplan estimate`` for the same
  requests at that length (prompt + tokens generated + speculative slots);
- every sequence reads its tokens back through its table (a gather over the pool): a shared block
  must hold the common prefix or the request's prompt, a sequence's own block its own tokens. A block
  two sequences wrote differently, or a table that points at another sequence's block, fails here.

The last step's tables are what the timed attention step reads (``decode.decode_step``).
"""

from __future__ import annotations

from typing import Any

from kvplan.engines.sharing import Workload
from kvplan.verify.allocate import Allocation, import_torch
from kvplan.verify.paging import COMMON, REQUEST, SEQUENCE, steps, tag
from kvplan.verify.results import DecodeStepCheck
from kvplan.verify.shapes import CachePlan, predicted_bytes
from kvplan.verify.tables import per_block_bytes


def _tag_plane(torch: Any, alloc: Allocation, plan: CachePlan, layers: tuple[int, ...]) -> Any | None:
    """An int64 view ``[blocks, block_size, w]`` of one attention layer's K (or latent) in this group,
    whose ``[..., 0]`` is the first 8 bytes of each slot; None where the group has none."""
    kinds = {info.index: info.kind for info in plan.layers}
    for layer in layers:
        if kinds.get(layer) in ("full", "sliding", "chunked", "mla"):
            view = alloc.views.get((layer, "K"), alloc.views.get((layer, "latent")))
            if view is None or view.dim() < 3:
                continue
            flat = view.reshape(view.shape[0], view.shape[1], -1)
            if flat.shape[-1] * flat.element_size() % 8 or flat.stride(-1) != 1:
                continue
            return flat.view(torch.uint8).view(torch.int64)
    return None


def decode_shared(alloc: Allocation, plan: CachePlan, layout: Any, work: Any, batch: int,
                  sharing: Any = None) -> tuple[tuple[DecodeStepCheck, ...], dict[int, Any]]:
    """Decode ``work.workload`` over ``alloc``'s pool; the checked steps and the last step's tables
    (layer -> int64 ``[sequences, blocks]`` of block ids within the layer's view). ``sharing``: the
    engine's rule bound to ``layout`` unless given (tests give a wrong one to see it caught)."""
    from kvplan.engines import get_engine

    torch = import_torch()
    workload: Workload = work.workload
    sharing = sharing if sharing is not None else get_engine(layout.engine).sharing.bind(layout)
    tables = plan.block_tables
    planes = [_tag_plane(torch, alloc, plan, t.layers) for t in tables]
    block_bytes = [per_block_bytes(alloc, t.layers) for t in tables]
    samples, prompt, prefix = workload.samples, workload.prompt_len, workload.shared_prefix
    out: list[DecodeStepCheck] = []
    last: dict[int, Any] = {}
    pending: list[list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]] = [[] for _ in tables]

    def flush() -> None:  # the writes of the steps so far, in order (one indexed copy per group)
        for index, chunks in enumerate(pending):
            plane = planes[index]
            if chunks and plane is not None:
                ids = torch.tensor([i for c in chunks for i in c[0]], dtype=torch.int64) - tables[index].first_block
                offsets = torch.tensor([o for c in chunks for o in c[1]], dtype=torch.int64)
                plane[ids, offsets, 0] = torch.tensor([x for c in chunks for x in c[2]], dtype=torch.int64)
            chunks.clear()

    for step in steps(layout, tables, workload, work.extra, sharing):
        if step.freed:  # a freed block may be written again this step: what it held first
            flush()
        for index, ids, offsets, tags in step.writes:
            pending[index].append((ids, offsets, tags))
        if not step.checked:
            continue
        flush()
        referenced = blocks = own = 0
        ok = True
        for state in step.groups:
            t = tables[state.table_index]
            table = torch.tensor(state.rows, dtype=torch.int64).reshape(t.sequences, -1) - t.first_block
            count = int(torch.unique(table).numel())
            blocks += count
            referenced += count * block_bytes[state.table_index]
            own += state.own_prompt_blocks
            plane = planes[state.table_index]
            if plane is not None and table.shape[1]:
                ok = ok and _tokens_ok(torch, plane, table, state.lo, step.length, samples, prompt, prefix)
            if step.step == steps_last(work):
                for layer in t.layers:
                    last[layer] = table
        now = Workload(prompt, step.step + work.extra, prefix, workload.n, workload.beam_width, workload.proposer)
        out.append(DecodeStepCheck(step.step, step.length, predicted_bytes(layout, batch, step.length, now), referenced,
                               blocks, ok, own))
    return tuple(out), last


def steps_last(work: Any) -> int:
    """The last step: every output token generated."""
    return int(work.workload.output_len - work.extra)


def _tokens_ok(torch: Any, plane: Any, table: Any, lo: int, length: int, samples: int, prompt: int,
               prefix: int) -> bool:
    """Every sequence reads, through its table, the tokens it holds: the common prefix's, its request's
    prompt, then its own."""
    seqs, held = table.shape
    block = plane.shape[1]
    got = plane[table][..., 0].reshape(seqs, held * block)  # gather: [seqs, held blocks, block] slot tags
    position = lo * block + torch.arange(held * block, dtype=torch.int64)[None, :]
    seq = torch.arange(seqs, dtype=torch.int64)[:, None]
    want = torch.where(position < prefix, tag(COMMON, 0, 0) + position,
                       torch.where(position < prompt, tag(REQUEST, 0, 0) + ((seq // samples) << 32) + position,
                                   tag(SEQUENCE, 0, 0) + (seq << 32) + position))
    filled = (position < length).expand(seqs, -1)
    return bool(torch.equal(got[filled], want.expand(seqs, -1)[filled]))
