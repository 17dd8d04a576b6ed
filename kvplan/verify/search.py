"""``--find-max-batch``: the largest batch whose cache really allocates within a byte budget.

Each probe plans the cache for a batch, allocates it for real, measures it, and frees it. A batch
fits when the allocation succeeds and what it took stays within the budget: the caching allocator's
reserved growth on CUDA (what the driver gave it), the tensors' storage bytes on CPU. The search
starts at max-batch's prediction and gallops then bisects, so a right prediction costs two probes.
With a shared prefix, samples, beams or speculative slots every probe allocates the shared layout
(shared blocks once, referenced by every sequence's block table), as a plain ``verify`` does.
"""

from __future__ import annotations

from typing import Any

from kvplan.engines import CacheLayout
from kvplan.engines.sharing import Workload
from kvplan.monotone import largest
from kvplan.record import dataclass
from kvplan.spec import ModelSpec
from kvplan.verify.allocate import (
    allocate,
    cpu_available_bytes,
    free_bytes,
    measure,
    segment_bytes,
)
from kvplan.verify.errors import VerifyError
from kvplan.verify.results import DEFAULT_UTILIZATION
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


def search_budget(torch: Any, dev: Any, memory_budget: int | None, util: float | None, notes: list[str]) -> int:
    """The bytes the search may take: ``memory_budget``, or (CUDA) ``util`` x total less what is in use.

    A ``memory_budget`` larger than what the device can allocate now is refused: every probe past the
    free memory would fail to allocate, and the search would report the free memory's batch as the
    budget's."""
    if dev.type == "cpu":
        assert memory_budget is not None
        free = cpu_available_bytes()
        _within(memory_budget, free, "cpu", "what the host, its container (cgroup) and ulimit leave")
        if free is None:
            notes.append("--find-max-batch: kvplan cannot read this host's free memory: the budget is taken as "
                         "given, and a probe the host cannot allocate counts as not fitting")
        notes.append(f"--find-max-batch budget: --memory-budget {memory_budget:,} B of tensor storage")
        return memory_budget
    torch.cuda.synchronize(dev)
    free, total = torch.cuda.mem_get_info(dev)
    in_use = int(total - free)
    if memory_budget is not None:
        _within(memory_budget, free_bytes(dev), f"cuda:{dev.index}", f"of {int(total):,} B total, "
                f"{in_use:,} B in use")
        notes.append(f"--find-max-batch budget: --memory-budget {memory_budget:,} B")
        return memory_budget
    share = util if util is not None else DEFAULT_UTILIZATION
    budget = int(total * share) - in_use
    notes.append(f"--find-max-batch budget: {share:g} x {int(total):,} B total - {in_use:,} B already in use "
                 f"= {budget:,} B (reserved growth must stay within it)")
    return budget


def _within(budget: int, free: int | None, where: str, what: str) -> None:
    """Refuse a budget above what ``where`` can allocate now (``free``; None: unknown, taken as given)."""
    if free is not None and budget > free:
        raise VerifyError(f"{budget:,} B ({_fmt(budget)}) is more than the {free:,} B ({_fmt(free)}) {where} can "
                          f"allocate now ({what}): the search would measure that, not the budget; give at most "
                          f"{_fmt(free)}", field="memory_budget")


def _fmt(n: int) -> str:
    from kvplan.units import format_bytes

    return format_bytes(n)


def predicted_max_batch(target: Any, layout: Any, work: Any, budget: int, total: int | None, engine: str,
                   engine_version: str | None, block_size: int | None) -> tuple[int | None, list[str]]:
    """kvplan.max_batch for the same budget, given as the KV memory (--kv-cache-memory), with the same
    shared prefix, samples or beams and speculation where max_batch takes them."""
    from kvplan.budgets import Settings
    from kvplan.errors import KvplanError
    from kvplan.plan import max_batch

    w, sp = work.workload, work.speculation
    kwargs: dict[str, Any] = {}
    notes: list[str] = []
    if sp is not None:
        kwargs.update(speculative_method=sp.method, num_speculative_tokens=sp.num_speculative_tokens,
                      speculative_model=sp.draft)
    if w is not None:
        kwargs.update(shared_prefix=w.shared_prefix, n=w.n, beam_width=w.beam_width, prompt_len=w.prompt_len)
    try:
        # max_model_len = the tokens a sequence holds (context + speculative slots): vLLM caps the slots
        # at max_model_len (KVCacheManager.allocate_slots), verify allocates them all
        plan = max_batch(target, gpu_memory=str(max(budget, total or 0)), engine=engine,
                         engine_version=engine_version, kv_dtype=layout.kv_dtype.name,
                         max_model_len=work.alloc_context, context=work.context, block_size=block_size,
                         settings=Settings(kv_cache_memory_bytes=budget, weights_bytes=target.weights_bytes or 1),
                         **kwargs)
    except KvplanError as exc:
        return None, [f"max-batch could not predict for this budget: {exc}"]
    if plan.admission_note:
        notes.append(f"max-batch follows the engine's admission rule ({plan.admission_note}); verify allocates "
                     "what a sequence holds once its context is computed")
    return plan.max_batch, notes
