"""``kvplan.verify``: allocate the caches an engine would hold, on a real device, and compare with the prediction.

    import kvplan.verify
    result = kvplan.verify.verify("gpt2", batch=2, context=1024, device="cpu")
    result.measured_storage_bytes == result.predicted_bytes

The tensors come from the same ``CacheLayout`` ``kvplan estimate`` reads (``kvplan.verify.shapes``);
torch is imported only when ``verify`` runs (``pip install 'kvplan[verify]'``). See docs/verification.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.engines import DEFAULT_ENGINE
from kvplan.verify.errors import VerifyError
from kvplan.verify.results import DEFAULT_UTILIZATION  # noqa: F401 - kvplan.verify.DEFAULT_UTILIZATION, as before
from kvplan.verify.results import (BlockTableCheck, ComponentCheck, DecodeCheck, DecodeStepCheck, MaxBatchCheck,
                                   SharingCheck, _pct)

__all__ = ["verify", "VerifyResult", "ComponentCheck", "MaxBatchCheck", "DecodeCheck", "DecodeStepCheck",
           "SharingCheck",
           "BlockTableCheck", "VerifyError"]

@dataclass(frozen=True)
class VerifyResult:
    kvplan_version: str
    model_id: str
    device: str
    device_name: str
    device_total_bytes: int | None
    engine: str
    engine_version: str
    block_size: int | None
    batch: int
    context: int
    kv_dtype: str
    predicted_bytes: int
    """What ``kvplan.estimate`` says for this engine, batch, context and dtype."""
    measured_storage_bytes: int
    """Bytes of the allocated tensors' storage."""
    allocated_bytes: int
    """torch.cuda.memory_allocated growth (the storage bytes on CPU)."""
    reserved_bytes: int | None
    driver_bytes: int | None
    peak_allocated_bytes: int | None
    allocator_bytes: int
    """What the caching allocator's 512 B rounding makes of the buffers: the expected ``allocated``."""
    segment_bytes: int
    """What its segment sizes make of them on an empty cache: the expected ``reserved``."""
    buffers: int
    num_blocks: int | None
    components: tuple[ComponentCheck, ...]
    released: bool
    """Every tensor freed at the end (memory_allocated back at its start value on CUDA)."""
    max_batch: MaxBatchCheck | None = None
    decode: DecodeCheck | None = None
    notes: tuple[str, ...] = field(default=())
    sharing: SharingCheck | None = None
    """The shared-prefix / samples / beams / speculative workload, where one was asked."""

    @property
    def error_bytes(self) -> int:
        return self.allocated_bytes - self.predicted_bytes

    @property
    def error_pct(self) -> float | None:
        return _pct(self.error_bytes, self.predicted_bytes)

    @property
    def exact(self) -> bool:
        """The tensors hold exactly the predicted bytes (and the block tables reference every one of them)."""
        referenced = self.sharing.referenced_bytes if self.sharing is not None else None
        steps = self.decode.steps if self.decode is not None else ()
        return self.measured_storage_bytes == self.predicted_bytes and referenced in (None, self.predicted_bytes) \
            and all(step.exact for step in steps)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (fields are added over time, never renamed)."""
        out: dict[str, Any] = {
            "kvplan_version": self.kvplan_version,
            "model": self.model_id,
            "device": {"name": self.device_name, "total_bytes": self.device_total_bytes, "device": self.device},
            "engine": self.engine,
            "engine_version": self.engine_version,
            "block_size": self.block_size,
            "batch": self.batch,
            "context": self.context,
            "kv_dtype": self.kv_dtype,
            "predicted_bytes": self.predicted_bytes,
            "measured": {
                "allocated_bytes": self.allocated_bytes, "reserved_bytes": self.reserved_bytes,
                "driver_bytes": self.driver_bytes, "storage_bytes": self.measured_storage_bytes,
                "peak_allocated_bytes": self.peak_allocated_bytes,
            },
            "error_bytes": self.error_bytes,
            "error_pct": self.error_pct,
            "exact": self.exact,
            "allocator": {"rounded_bytes": self.allocator_bytes, "segment_bytes": self.segment_bytes,
                          "buffers": self.buffers, "num_blocks": self.num_blocks},
            "components": [
                {"name": c.name, "kind": c.kind, "layers": c.layers, "predicted_bytes": c.predicted_bytes,
                 "measured_bytes": c.measured_bytes, "error_bytes": c.error_bytes, "error_pct": c.error_pct}
                for c in self.components
            ],
            "released": self.released,
            "notes": list(self.notes),
        }
        if self.max_batch is not None:
            mb = self.max_batch
            out["max_batch"] = {"predicted": mb.predicted, "measured": mb.measured, "budget_bytes": mb.budget_bytes,
                                "error_pct": mb.error_pct, "from_estimate": mb.from_estimate,
                                "probes": [{"batch": b, "fits": f, "bytes": n, "allocated": a}
                                           for b, f, n, a in mb.probes]}
        if self.sharing is not None:
            sh = self.sharing
            out["sharing"] = {
                "prompt_len": sh.prompt_len, "output_len": sh.output_len, "shared_prefix": sh.shared_prefix,
                "n": sh.n, "beam_width": sh.beam_width, "sequences": sh.sequences,
                "kv_bytes_plain": sh.kv_bytes_plain, "referenced_bytes": sh.referenced_bytes,
                "speculative_method": sh.speculative_method, "num_speculative_tokens": sh.num_speculative_tokens,
                "extra_slots": sh.extra_slots, "draft": sh.draft,
                "block_tables": [{"layers": list(t.layers), "sequences": t.sequences, "blocks": t.blocks,
                                  "referenced_blocks": t.referenced_blocks, "once": t.once,
                                  "per_request": t.per_request, "per_sequence": t.per_sequence,
                                  "referenced_bytes": t.referenced_bytes} for t in sh.block_tables],
            }
        if self.decode is not None:
            d = self.decode
            out["decode"] = {"seconds": d.seconds, "bound_seconds": d.bound_seconds,
                             "peak_workspace_bytes": d.peak_workspace_bytes, "read_bytes": d.read_bytes,
                             "repeats": d.repeats, "gpu": d.gpu,
                             "steps": [{"step": t.step, "length": t.length, "predicted_bytes": t.predicted_bytes,
                                        "referenced_bytes": t.referenced_bytes, "blocks": t.blocks,
                                        "tokens_ok": t.tokens_ok, "own_prompt_blocks": t.own_prompt_blocks,
                                        "exact": t.exact} for t in d.steps]}
        return out


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
    from kvplan._version import __version__
    from kvplan.estimate import estimate
    from kvplan.spec import ModelSpec
    from kvplan.verify import allocate as al
    from kvplan.verify.shapes import plan_cache, resolve_layout

    from kvplan.verify.shapes import resolve_workload
    from kvplan.verify.tables import block_table_checks

    spec = model if isinstance(model, ModelSpec) else _load(model)
    if context is not None and context <= 0:
        raise VerifyError(f"{context} must be positive", field="context")
    work = resolve_workload(spec, engine, context, prompt_len=prompt_len, output_len=output_len,
                            shared_prefix=shared_prefix, n=n, beam_width=beam_width,
                            speculative_method=speculative_method, num_speculative_tokens=num_speculative_tokens,
                            speculative_model=speculative_model)
    target, context, spec = spec, work.context, work.spec  # spec: the layers the cache holds (+ draft)
    if batch is not None and batch <= 0:
        raise VerifyError(f"{batch} must be positive", field="batch")
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise VerifyError(f"{gpu_memory_utilization} must be in (0, 1]", field="gpu_memory_utilization")
    from kvplan.verify.decode import check_repeats

    check_repeats(repeats)  # bounded before anything is allocated (99,999,999 steps ran for hours)
    layout = resolve_layout(spec, engine, engine_version, kv_dtype, block_size)
    plan_cache(spec, layout, 1, work.alloc_context, work.workload)  # refuse unsupported layouts before touching torch
    torch = al.import_torch()
    dev = al.resolve_device(device)
    info = al.device_info(dev)
    if find_max_batch and dev.type == "cpu" and memory_budget is None:
        raise VerifyError("needed to find the max batch on the CPU (e.g. 2GiB): the CPU has no "
                          "GPU memory utilization rule", field="memory_budget")
    notes: list[str] = list(layout.assumptions)
    start = al.snapshot(dev)
    weights: list[Any] = []
    search = None
    predicted_max = None
    decoded: tuple[DecodeStepCheck, ...] = ()
    try:
        if with_weights:
            if spec.weights_bytes is None:
                raise VerifyError(f"{spec.id} has no known weights size", field="with_weights")
            weights = al.allocate_weights(spec.weights_bytes, spec.num_layers, dev)
            notes.append(f"--with-weights: {len(weights)} buffers of the checkpoint's {spec.weights_bytes:,} B "
                         "allocated first")
        if find_max_batch:
            from kvplan.verify.search import find_max_batch as search_max, predicted_max_batch, search_budget

            budget = search_budget(torch, dev, memory_budget, gpu_memory_utilization, notes)
            predicted_max, mb_notes = predicted_max_batch(target, layout, work, budget, info.total_bytes, engine,
                                                          engine_version, block_size)
            notes.extend(mb_notes)
            search = search_max(spec, layout, work.alloc_context, dev, budget, predicted_max or 1, work.workload)
            short = [p.batch for p in search.probes if not p.allocated and p.bytes <= budget]
            if short:  # the device's free memory, not the budget, refused these: say which bound the answer is
                notes.append(f"--find-max-batch: batch {min(short):,} is within the budget but the device could "
                             "not allocate it (its free memory changed during the search): the batch found is "
                             "bounded by the free memory, not by the budget")
            if search.measured == 0:
                each = work.workload.samples if work.workload is not None else 1
                what = "sequence" if each == 1 else f"request of {each} sequences"
                raise VerifyError(f"not one {what} of {context:,} tokens fits in {_fmt(budget)}",
                                  field="find_max_batch")
            if batch is None:
                batch = search.measured
        batch = batch or 1
        plan = plan_cache(spec, layout, batch, work.alloc_context, work.workload)
        row = estimate(target, contexts=[context], batches=[batch], kv_dtypes=[kv_dtype], engine=engine,
                       engine_version=engine_version, block_size=block_size, **work.estimate_kwargs).rows[0]
        predicted = row.kv_bytes
        if predicted != plan.predicted_bytes:
            raise VerifyError(f"internal: estimate says {predicted:,} B, the layout {plan.predicted_bytes:,} B")
        notes.extend(work.notes)
        notes.extend(plan.notes)
        odd = {info.layout for info in plan.layers} - {"bhtd", "paged"}
        if decode and odd:  # a layout the step cannot read in place (TensorRT-LLM's [heads, tokens, dim] blocks)
            from kvplan.engines import get_engine

            raise VerifyError(f"the decode step reads [batch, heads, tokens, dim] and [blocks, block, heads, dim] "
                              f"caches; {get_engine(plan.engine).title}'s '{min(odd)}' layout needs its own kernels",
                              field="decode")
        if decode and work.workload is not None and plan.block_tables:
            from kvplan.verify.paging import check_bounded

            check_bounded(plan.block_tables, work.workload)  # before anything is allocated
        alloc = al.allocate(plan, dev, fill=decode)
        try:
            m = al.measure(alloc)
            tables = block_table_checks(torch, alloc, plan) if work.workload or work.speculation else ()
            timing = None
            if decode:
                from kvplan.verify.decode import decode_step

                paged = None
                if work.workload is not None and plan.block_tables:
                    from kvplan.verify.decode_shared import decode_shared

                    # the pool decoded from the prompt to the full length, measured at the checked steps
                    decoded, paged = decode_shared(alloc, plan, layout, work, batch)
                    if work.workload.output_len == work.extra:
                        notes.append("--decode with sharing: no output tokens to generate (give --prompt-len and "
                                     "--output-len): only the prefill was stepped")
                timing = decode_step(alloc, spec, repeats, paged)
        finally:
            alloc.release()
            del alloc
    finally:
        weights.clear()
        if dev.type == "cuda":
            import gc

            gc.collect()
            torch.cuda.empty_cache()
    end = al.snapshot(dev)
    released = al.live_tensors() == 0 and (start.allocated is None or end.allocated == start.allocated)

    components = []
    for comp in plan.components:
        components.append(ComponentCheck(comp.name, comp.kind, comp.layers, comp.predicted_bytes,
                                         m.component_bytes.get(comp.name, 0)))
    unused = m.storage_bytes - sum(m.component_bytes.values())
    if unused:  # bytes no component's views cover: a layout the planner does not know
        components.append(ComponentCheck("unaccounted", "unaccounted", 0, 0, unused))
    decode_check = None
    if timing is not None:
        decode_check = _decode_check(timing, dev, info.name, gpu, notes, decoded)
        if decoded:
            notes.append("--decode with sharing: every sequence grows from its prompt one token a step; shared "
                         "blocks stay referenced, sliding layers drop what left their window, a sequence appends "
                         "only into blocks it alone references; the timed step gathers each sequence's blocks "
                         "through its table (shared blocks read by every sequence, as vLLM's paged kernels do)")
    max_check = None
    if search is not None:
        from kvplan.monotone import largest

        budget_bytes = search.budget_bytes
        from kvplan.verify.shapes import predicted_bytes

        steady = largest(lambda b: predicted_bytes(layout, b, work.alloc_context, work.workload) <= budget_bytes,
                         search.measured)
        max_check = MaxBatchCheck(predicted_max, search.measured, budget_bytes,
                                  tuple((p.batch, p.fits, p.bytes, p.allocated) for p in search.probes), steady)
    if dev.type == "cpu":
        notes.append("on the CPU torch keeps no allocator statistics: measured = the tensors' storage bytes; "
                     "reserved and driver views exist on CUDA only")
    return VerifyResult(
        kvplan_version=__version__, model_id=spec.id, device=al._where(dev), device_name=info.name,
        device_total_bytes=info.total_bytes, engine=layout.engine, engine_version=layout.engine_version,
        block_size=layout.block_size, batch=batch, context=context, kv_dtype=layout.kv_dtype.name,
        predicted_bytes=plan.predicted_bytes, measured_storage_bytes=m.storage_bytes,
        allocated_bytes=m.allocated_bytes, reserved_bytes=m.reserved_bytes, driver_bytes=m.driver_bytes,
        peak_allocated_bytes=m.peak_allocated_bytes, allocator_bytes=m.allocator_bytes,
        segment_bytes=m.segment_bytes, buffers=len(plan.buffers), num_blocks=plan.num_blocks,
        components=tuple(components), released=released, max_batch=max_check, decode=decode_check,
        notes=tuple(dict.fromkeys(notes)), sharing=_sharing_check(work, row, batch, tables),
    )


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
