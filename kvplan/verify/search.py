"""``--find-max-batch``: the largest batch whose cache really allocates within a byte budget.

Each probe plans the cache for a batch, allocates it for real, measures it, and frees it. A batch
fits when the allocation succeeds and what it took stays within the budget: the caching allocator's
reserved growth on CUDA (what the driver gave it), the tensors' storage bytes on CPU. The search
starts at max-batch's prediction and gallops then bisects, so a right prediction costs two probes.
With a shared prefix, samples, beams or speculative slots every probe allocates the shared layout
(shared blocks once, referenced by every sequence's block table), as a plain ``verify`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.engines import CacheLayout
from kvplan.engines.sharing import Workload
from kvplan.monotone import largest
from kvplan.spec import ModelSpec
from kvplan.verify.allocate import allocate, measure, segment_bytes
from kvplan.verify.errors import VerifyError
from kvplan.verify.shapes import plan_cache

LIMIT = 1 << 24


@dataclass(frozen=True)
class Probe:
    batch: int
    fits: bool
    bytes: int
    """Bytes it took (reserved on CUDA, storage on CPU), or would take when refused unallocated."""
    allocated: bool


@dataclass(frozen=True)
class SearchResult:
    budget_bytes: int
    measured: int
    probes: tuple[Probe, ...]


def find_max_batch(spec: ModelSpec, layout: CacheLayout, context: int, device: Any, budget: int,
                   guess: int, workload: Workload | None = None) -> SearchResult:
    """``batch`` counts requests: with a ``workload`` each probe allocates ``batch`` requests of its
    samples or beams, what the engine stores once allocated once (``plan_cache``)."""
    if budget <= 0:
        raise VerifyError(f"the budget is {budget:,} B: nothing can be allocated", field="find_max_batch")
    probes: list[Probe] = []
    cache: dict[int, bool] = {}

    def ok(batch: int) -> bool:
        if batch in cache:
            return cache[batch]
        plan = plan_cache(spec, layout, batch, context, workload)
        sizes = [b.nbytes for b in plan.buffers]
        need = segment_bytes(sizes) if device.type == "cuda" else plan.buffer_bytes
        if need > budget:
            probes.append(Probe(batch, False, need, False))
            cache[batch] = False
            return False
        try:
            alloc = allocate(plan, device)
        except VerifyError:
            probes.append(Probe(batch, False, need, False))
            cache[batch] = False
            return False
        try:
            m = measure(alloc)
        finally:
            alloc.release()
        took = m.reserved_bytes if m.reserved_bytes is not None else m.storage_bytes
        fits = took <= budget
        probes.append(Probe(batch, fits, took, True))
        cache[batch] = fits
        return fits

    best = largest(ok, guess, LIMIT)
    return SearchResult(budget, best, tuple(probes))
