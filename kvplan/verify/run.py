"""One ``kvplan verify`` run, step by step: check what is asked before torch is touched, allocate (weights
first where asked, the max-batch search where asked), allocate the cache and measure it, free everything,
then compare with the prediction.
"""

from __future__ import annotations

from typing import Any

from kvplan.engines import DEFAULT_ENGINE
from kvplan.engines.layout import CacheLayout
from kvplan.record import dataclass
from kvplan.verify.errors import VerifyError
from kvplan.verify.results import (
    BlockTableCheck,
    ComponentCheck,
    DecodeCheck,
    DecodeStepCheck,
    MaxBatchCheck,
    SharingCheck,
    VerifyResult,
)


@dataclass(frozen=True)
class Asked:
    """``verify``'s arguments beyond the model, batch and context, as its steps read them."""

    engine: str
    engine_version: str | None
    kv_dtype: str
    block_size: int | None
    device: str | None
    find_max_batch: bool
    gpu_memory_utilization: float | None
    memory_budget: int | None
    with_weights: bool
    decode: bool
    repeats: int
    gpu: str | None
    workload: dict[str, Any]
    """``resolve_workload``'s keywords: the prompt, output, sharing and speculative arguments."""


@dataclass(frozen=True)
class Ran:
    """What the allocation step found; every tensor is freed by then."""

    batch: int
    plan: Any
    """The ``CachePlan`` allocated."""
    row: Any
    """``kvplan.estimate``'s row for the same batch and context."""
    measured: Any
    tables: tuple[BlockTableCheck, ...]
    timing: Any
    decoded: tuple[DecodeStepCheck, ...]
    search: Any
    predicted_max: int | None


def verify(
    model: Any,
    *,
    batch: int | None = None,
    context: int | None = None,
    engine: str = DEFAULT_ENGINE,
    engine_version: str | None = None,
    kv_dtype: str = "auto",
    block_size: int | None = None,
    device: str | None = None,
    find_max_batch: bool = False,
    gpu_memory_utilization: float | None = None,
    memory_budget: int | None = None,
    with_weights: bool = False,
    decode: bool = False,
    repeats: int = 5,
    gpu: str | None = None,
    prompt_len: int | None = None,
    output_len: int | None = None,
    shared_prefix: int = 0,
    n: int = 1,
    beam_width: int = 1,
    speculative_method: str | None = None,
    num_speculative_tokens: int | None = None,
    speculative_model: Any = None,
) -> VerifyResult:
    """Allocate ``engine``'s cache for ``batch`` sequences of ``context`` tokens on ``device`` and measure it.

    ``device`` is 'cuda:N' (default cuda:0) or 'cpu'. ``find_max_batch`` searches the largest batch
    that really allocates within ``memory_budget`` bytes (CPU: required; CUDA: default
    ``gpu_memory_utilization`` x total less what is in use) and reports it as ``batch``. ``decode``
    times one decode step of attention over the cache. Every tensor is freed before returning.

    ``context`` defaults to 8,192, or to ``prompt_len + output_len``. With ``shared_prefix``, ``n``,
    ``beam_width`` or speculative decoding (the arguments of ``kvplan.estimate``, docs/sharing.md),
    ``batch`` requests are allocated as the engine stores them: vLLM's shared blocks once in the pool,
    referenced by every sequence's block table; the draft's layers in the pool and each sequence's
    extra slots; transformers' batch x samples rows.
    """
    from kvplan.spec import ModelSpec
    from kvplan.verify import allocate as al

    asked = Asked(engine, engine_version, kv_dtype, block_size, device, find_max_batch, gpu_memory_utilization,
                  memory_budget, with_weights, decode, repeats, gpu,
                  dict(prompt_len=prompt_len, output_len=output_len, shared_prefix=shared_prefix, n=n,
                       beam_width=beam_width, speculative_method=speculative_method,
                       num_speculative_tokens=num_speculative_tokens, speculative_model=speculative_model))
    target = model if isinstance(model, ModelSpec) else _load(model)
    work, layout = checked_request(target, asked, batch, context)
    torch = al.import_torch()
    dev = al.resolve_device(device)
    info = al.device_info(dev)
    if find_max_batch and dev.type == "cpu" and memory_budget is None:
        raise VerifyError("needed to find the max batch on the CPU (e.g. 2GiB): the CPU has no "
                          "GPU memory utilization rule", field="memory_budget")
    notes: list[str] = list(layout.assumptions)
    start = al.snapshot(dev)
    ran = allocate_and_measure(torch, dev, info, target, work, layout, asked, batch, notes)
    end = al.snapshot(dev)
    released = al.live_tensors() == 0 and (start.allocated is None or end.allocated == start.allocated)
    return result(dev, info, work, layout, asked, ran, released, notes)


def checked_request(target: Any, asked: Asked, batch: int | None, context: int | None) -> tuple[Any, CacheLayout]:
    """The workload and the layout asked for, every argument checked before torch is imported."""
    from kvplan.verify.decode import check_repeats
    from kvplan.verify.shapes import plan_cache, resolve_layout, resolve_workload

    if context is not None and context <= 0:
        raise VerifyError(f"{context} must be positive", field="context")
    work = resolve_workload(target, asked.engine, context, **asked.workload)  # work.spec: the layers held (+ draft)
    if batch is not None and batch <= 0:
        raise VerifyError(f"{batch} must be positive", field="batch")
    if asked.gpu_memory_utilization is not None and not 0 < asked.gpu_memory_utilization <= 1:
        raise VerifyError(f"{asked.gpu_memory_utilization} must be in (0, 1]", field="gpu_memory_utilization")
    check_repeats(asked.repeats)  # bounded before anything is allocated (99,999,999 steps ran for hours)
    layout = resolve_layout(work.spec, asked.engine, asked.engine_version, asked.kv_dtype, asked.block_size)
    plan_cache(work.spec, layout, 1, work.alloc_context, work.workload)  # refuse unsupported layouts before torch
    return work, layout


def allocate_and_measure(torch: Any, dev: Any, info: Any, target: Any, work: Any, layout: CacheLayout, asked: Asked,
                         batch: int | None, notes: list[str]) -> Ran:
    """The weights (where asked), the max-batch search (where asked), then the cache, measured; freed on return."""
    weights: list[Any] = []
    search, predicted_max = None, None
    try:
        if asked.with_weights:
            weights = allocate_weights(work.spec, dev, notes)
        if asked.find_max_batch:
            search, predicted_max = search_max_batch(torch, dev, info, target, work, layout, asked, notes)
            if batch is None:
                batch = search.measured
        batch = batch or 1
        plan, row = predicted(target, work, layout, asked, batch, notes)
        measured, tables, timing, decoded = allocate_cache(torch, dev, plan, work, layout, asked, batch, notes)
    finally:
        weights.clear()
        if dev.type == "cuda":
            import gc

            gc.collect()
            torch.cuda.empty_cache()
    return Ran(batch, plan, row, measured, tables, timing, decoded, search, predicted_max)


def allocate_weights(spec: Any, dev: Any, notes: list[str]) -> list[Any]:
    from kvplan.verify import allocate as al

    if spec.weights_bytes is None:
        raise VerifyError(f"{spec.id} has no known weights size", field="with_weights")
    weights = al.allocate_weights(spec.weights_bytes, spec.num_layers, dev)
    notes.append(f"--with-weights: {len(weights)} buffers of the checkpoint's {spec.weights_bytes:,} B "
                 "allocated first")
    return weights


def search_max_batch(torch: Any, dev: Any, info: Any, target: Any, work: Any, layout: CacheLayout, asked: Asked,
                     notes: list[str]) -> tuple[Any, int | None]:
    """The largest batch that really allocates within the budget, and the one kvplan predicts."""
    from kvplan.verify.search import find_max_batch as search_max
    from kvplan.verify.search import predicted_max_batch, search_budget

    budget = search_budget(torch, dev, asked.memory_budget, asked.gpu_memory_utilization, notes)
    predicted_max, mb_notes = predicted_max_batch(target, layout, work, budget, info.total_bytes, asked.engine,
                                                  asked.engine_version, asked.block_size)
    notes.extend(mb_notes)
    search = search_max(work.spec, layout, work.alloc_context, dev, budget, predicted_max or 1, work.workload)
    short = [p.batch for p in search.probes if not p.allocated and p.bytes <= budget]
    if short:  # the device's free memory, not the budget, refused these: say which bound the answer is
        notes.append(f"--find-max-batch: batch {min(short):,} is within the budget but the device could "
                     "not allocate it (its free memory changed during the search): the batch found is "
                     "bounded by the free memory, not by the budget")
    if search.measured == 0:
        each = work.workload.samples if work.workload is not None else 1
        what = "sequence" if each == 1 else f"request of {each} sequences"
        raise VerifyError(f"not one {what} of {work.context:,} tokens fits in {_fmt(budget)}",
                          field="find_max_batch")
    return search, predicted_max


def predicted(target: Any, work: Any, layout: CacheLayout, asked: Asked, batch: int,
              notes: list[str]) -> tuple[Any, Any]:
    """The tensors to allocate and ``kvplan.estimate``'s row, which must agree; refused where the decode step
    cannot run, before anything is allocated."""
    from kvplan.estimate import estimate
    from kvplan.verify.shapes import plan_cache

    plan = plan_cache(work.spec, layout, batch, work.alloc_context, work.workload)
    row = estimate(target, contexts=[work.context], batches=[batch], kv_dtypes=[asked.kv_dtype], engine=asked.engine,
                   engine_version=asked.engine_version, block_size=asked.block_size, **work.estimate_kwargs).rows[0]
    if row.kv_bytes != plan.predicted_bytes:
        raise VerifyError(f"internal: estimate says {row.kv_bytes:,} B, the layout {plan.predicted_bytes:,} B")
    notes.extend(work.notes)
    notes.extend(plan.notes)
    if asked.decode:
        check_decodable(plan, work)
    return plan, row


def check_decodable(plan: Any, work: Any) -> None:
    odd = {info.layout for info in plan.layers} - {"bhtd", "paged"}
    if odd:  # a layout the step cannot read in place (TensorRT-LLM's [heads, tokens, dim] blocks)
        from kvplan.engines import get_engine

        raise VerifyError(f"the decode step reads [batch, heads, tokens, dim] and [blocks, block, heads, dim] "
                          f"caches; {get_engine(plan.engine).title}'s '{min(odd)}' layout needs its own kernels",
                          field="decode")
    if work.workload is not None and plan.block_tables:
        from kvplan.verify.paging import check_bounded

        check_bounded(plan.block_tables, work.workload)  # before anything is allocated


def allocate_cache(torch: Any, dev: Any, plan: Any, work: Any, layout: CacheLayout, asked: Asked, batch: int,
                   notes: list[str]) -> tuple[Any, tuple[BlockTableCheck, ...], Any, tuple[DecodeStepCheck, ...]]:
    """(measurement, block-table checks, decode timing, decoded steps) of the cache, freed on return."""
    from kvplan.verify import allocate as al
    from kvplan.verify.tables import block_table_checks

    alloc = al.allocate(plan, dev, fill=asked.decode)
    timing: Any = None
    decoded: tuple[DecodeStepCheck, ...] = ()
    try:
        measured = al.measure(alloc)
        tables = block_table_checks(torch, alloc, plan) if work.workload or work.speculation else ()
        if asked.decode:
            timing, decoded = decode_steps(alloc, plan, layout, work, batch, asked.repeats, notes)
    finally:
        alloc.release()
        del alloc
    return measured, tables, timing, decoded


def decode_steps(alloc: Any, plan: Any, layout: CacheLayout, work: Any, batch: int, repeats: int,
                 notes: list[str]) -> tuple[Any, tuple[DecodeStepCheck, ...]]:
    """The timed decode step; with a shared workload, the pool decoded from the prompt to the full length first."""
    from kvplan.verify.decode import decode_step

    paged: Any = None
    decoded: tuple[DecodeStepCheck, ...] = ()
    if work.workload is not None and plan.block_tables:
        from kvplan.verify.decode_shared import decode_shared

        # the pool decoded from the prompt to the full length, measured at the checked steps
        decoded, paged = decode_shared(alloc, plan, layout, work, batch)
        if work.workload.output_len == work.extra:
            notes.append("--decode with sharing: no output tokens to generate (give --prompt-len and "
                         "--output-len): only the prefill was stepped")
    return decode_step(alloc, work.spec, repeats, paged), decoded


def result(dev: Any, info: Any, work: Any, layout: CacheLayout, asked: Asked, ran: Ran, released: bool,
           notes: list[str]) -> VerifyResult:
    from kvplan._version import __version__
    from kvplan.verify import allocate as al

    m, plan = ran.measured, ran.plan
    decode_check = None
    if ran.timing is not None:
        decode_check = _decode_check(ran.timing, dev, info.name, asked.gpu, notes, ran.decoded)
        if ran.decoded:
            notes.append("--decode with sharing: every sequence grows from its prompt one token a step; shared "
                         "blocks stay referenced, sliding layers drop what left their window, a sequence appends "
                         "only into blocks it alone references; the timed step gathers each sequence's blocks "
                         "through its table (shared blocks read by every sequence, as vLLM's paged kernels do)")
    if dev.type == "cpu":
        notes.append("on the CPU torch keeps no allocator statistics: measured = the tensors' storage bytes; "
                     "reserved and driver views exist on CUDA only")
    else:
        notes.extend(al.allocator_notes(m, plan.predicted_bytes, len(plan.buffers)))
    return VerifyResult(
        kvplan_version=__version__, model_id=work.spec.id, device=al._where(dev), device_name=info.name,
        device_total_bytes=info.total_bytes, engine=layout.engine, engine_version=layout.engine_version,
        block_size=layout.block_size, batch=ran.batch, context=work.context, kv_dtype=layout.kv_dtype.name,
        predicted_bytes=plan.predicted_bytes, measured_storage_bytes=m.storage_bytes,
        allocated_bytes=m.allocated_bytes, reserved_bytes=m.reserved_bytes, driver_bytes=m.driver_bytes,
        peak_allocated_bytes=m.peak_allocated_bytes, allocator_bytes=m.allocator_bytes,
        segment_bytes=m.segment_bytes, buffers=len(plan.buffers), num_blocks=plan.num_blocks,
        components=component_checks(plan, m), released=released, max_batch=max_batch_check(ran, layout, work),
        decode=decode_check, notes=tuple(dict.fromkeys(notes)),
        sharing=_sharing_check(work, ran.row, ran.batch, ran.tables),
        allocator_rounded_bytes=m.rounded_bytes, unsplit_blocks=m.unsplit_blocks,
    )


def component_checks(plan: Any, m: Any) -> tuple[ComponentCheck, ...]:
    components = [ComponentCheck(comp.name, comp.kind, comp.layers, comp.predicted_bytes,
                                 m.component_bytes.get(comp.name, 0)) for comp in plan.components]
    unused = m.storage_bytes - sum(m.component_bytes.values())
    if unused:  # bytes no component's views cover: a layout the planner does not know
        components.append(ComponentCheck("unaccounted", "unaccounted", 0, 0, unused))
    return tuple(components)


def max_batch_check(ran: Ran, layout: CacheLayout, work: Any) -> MaxBatchCheck | None:
    if ran.search is None:
        return None
    from kvplan.monotone import largest
    from kvplan.verify.shapes import predicted_bytes

    search = ran.search
    budget_bytes = search.budget_bytes
    steady = largest(lambda b: predicted_bytes(layout, b, work.alloc_context, work.workload) <= budget_bytes,
                     search.measured)
    return MaxBatchCheck(ran.predicted_max, search.measured, budget_bytes,
                         tuple((p.batch, p.fits, p.bytes, p.allocated) for p in search.probes), steady)


def _sharing_check(work: Any, row: Any, batch: int, tables: tuple[BlockTableCheck, ...]) -> SharingCheck | None:
    if work.workload is None and work.speculation is None:
        return None
    w, sp = work.workload, work.speculation
    plain = row.sharing.kv_bytes_plain if row.sharing is not None else row.kv_bytes
    referenced = sum(t.referenced_bytes for t in tables) if tables else None
    return SharingCheck(
        prompt_len=w.prompt_len if w is not None else work.context,
        output_len=w.output_len - work.extra if w is not None else 0,
        shared_prefix=w.shared_prefix if w is not None else 0, n=w.n if w is not None else 1,
        beam_width=w.beam_width if w is not None else 1, sequences=batch * (w.samples if w is not None else 1),
        kv_bytes_plain=plain, referenced_bytes=referenced, block_tables=tables,
        speculative_method=sp.method if sp is not None else None,
        num_speculative_tokens=sp.num_speculative_tokens if sp is not None else None, extra_slots=work.extra,
        draft=sp.draft.id if sp is not None and sp.draft is not None else None)


def _load(model: str) -> Any:
    from kvplan.sources.resolve import load_model

    return load_model(model)


def _fmt(n: int) -> str:
    from kvplan.units import format_bytes

    return format_bytes(n)


def _decode_check(timing: Any, dev: Any, device_name: str, gpu: str | None, notes: list[str],
                  steps: tuple[DecodeStepCheck, ...] = ()) -> DecodeCheck:
    from kvplan.errors import KvplanError
    from kvplan.hardware import find_gpu, load_catalog

    hw = None
    name = gpu or (device_name if dev.type == "cuda" else None)
    if name is not None:
        try:
            hw = find_gpu(name, load_catalog())
        except KvplanError:
            if gpu is not None:
                raise
            notes.append(f"--decode: '{device_name}' is not in the GPU catalog: no bandwidth bound (pass --gpu)")
    bandwidth = hw.bandwidth if hw is not None else None
    bound = timing.read_bytes / bandwidth if bandwidth else None
    if hw is not None and bandwidth:  # bound is not None
        notes.append(f"--decode bound: {timing.read_bytes:,} B of cache read at {bandwidth / 1e12:.2f} TB/s "
                     f"({hw.name}): a lower bound on the step")
    return DecodeCheck(timing.seconds, bound, timing.peak_workspace_bytes, timing.read_bytes, timing.repeats,
                       hw.name if hw is not None else None, steps)
