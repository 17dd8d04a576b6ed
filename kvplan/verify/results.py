"""What ``kvplan verify`` reports, check by check: the records ``VerifyResult`` holds (re-exported by
``kvplan.verify``), which the modules that run the checks fill in.
"""

from __future__ import annotations

from typing import Any

from kvplan.record import dataclass, field

DEFAULT_UTILIZATION = 0.9


@dataclass(frozen=True)
class ComponentCheck:
    name: str
    kind: str
    layers: int
    predicted_bytes: int
    measured_bytes: int
    """Bytes of the typed tensors these layers read, measured on the allocated tensors."""

    @property
    def error_bytes(self) -> int:
        return self.measured_bytes - self.predicted_bytes

    @property
    def error_pct(self) -> float | None:
        return _pct(self.error_bytes, self.predicted_bytes)


@dataclass(frozen=True)
class MaxBatchCheck:
    predicted: int | None
    """kvplan.max_batch's answer for the same budget (None where it could not be computed)."""
    measured: int
    """The largest batch whose cache really allocated within the budget."""
    budget_bytes: int
    probes: tuple[tuple[int, bool, int, bool], ...]
    from_estimate: int | None = None
    """The largest batch whose ``kvplan estimate`` bytes fit the budget (the steady-state cache)."""
    """(batch, fits, bytes taken or needed, allocated) per probe, in order."""

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None:
            return None
        return _pct(self.predicted - self.measured, self.measured)


@dataclass(frozen=True)
class DecodeStepCheck:
    """One checked step of decoding a shared workload (``--decode`` with sharing, vLLM)."""

    step: int
    """Output tokens generated (0: after the prefill)."""
    length: int
    """Tokens each sequence holds: prompt + step + speculative slots."""
    predicted_bytes: int
    """``kvplan estimate`` for the same requests at this length."""
    referenced_bytes: int
    """Distinct blocks the block tables (tensors) reference x their bytes in the pool's views."""
    blocks: int
    tokens_ok: bool
    """Every sequence read its own tokens back through its table (shared blocks hold the shared tokens)."""
    own_prompt_blocks: int
    """Blocks holding prompt tokens another sequence also has, each sequence's own (recomputed, e.g. the
    block with the prompt's last token for every child of n)."""

    @property
    def exact(self) -> bool:
        return self.referenced_bytes == self.predicted_bytes and self.tokens_ok


@dataclass(frozen=True)
class DecodeCheck:
    seconds: float
    bound_seconds: float | None
    """Cache bytes read / the GPU catalog's memory bandwidth (None without a catalog GPU)."""
    peak_workspace_bytes: int | None
    read_bytes: int
    repeats: int
    gpu: str | None
    steps: tuple[DecodeStepCheck, ...] = ()
    """With sharing: the checked steps of decoding from the prompt to the full length."""


@dataclass(frozen=True)
class BlockTableCheck:
    """One vLLM KV-cache group: its sequences' block tables, built as tensors, against its region."""

    layers: tuple[int, ...]
    sequences: int
    blocks: int
    """Blocks of the group's region of the pool (allocated)."""
    referenced_blocks: int
    """Distinct block ids the sequences' tables reference, counted on the tensors."""
    once: int
    per_request: int
    per_sequence: int
    referenced_bytes: int
    """Bytes of the group's views in the referenced blocks."""


@dataclass(frozen=True)
class SharingCheck:
    """The workload verify allocated: requests of prompt + output tokens, samples or beams, what is shared."""

    prompt_len: int
    output_len: int
    shared_prefix: int
    n: int
    beam_width: int
    sequences: int
    kv_bytes_plain: int
    """``kvplan estimate``'s plain figure: the same sequences with nothing stored once."""
    referenced_bytes: int | None
    """Bytes of the pool the block tables reference (paged engines; None for transformers' rows)."""
    block_tables: tuple[BlockTableCheck, ...] = ()
    speculative_method: str | None = None
    num_speculative_tokens: int | None = None
    extra_slots: int = 0
    """Slots each sequence holds beyond its context for speculative decoding."""
    draft: str | None = None


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
    """What torch's caching allocator makes of the buffers on an empty cache: the expected ``allocated``
    (``kvplan.verify.allocate.caching_allocator``: 512 B rounding, and whole segments where it does not split)."""
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
    allocator_rounded_bytes: int = 0
    """The buffers rounded up to 512 B: ``allocator_bytes`` less the blocks the allocator handed out whole."""
    unsplit_blocks: int = 0
    """Buffers the allocator handed a whole segment (less than 1 MiB left over): ``memory_allocated`` counts it."""

    @property
    def unsplit_bytes(self) -> int:
        """What ``memory_allocated`` counts beyond the rounded buffers: the allocator's, not the cache's."""
        return self.allocator_bytes - self.allocator_rounded_bytes

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
            "allocator": {"rounded_bytes": self.allocator_rounded_bytes, "segment_bytes": self.segment_bytes,
                          "buffers": self.buffers, "num_blocks": self.num_blocks,
                          "expected_allocated_bytes": self.allocator_bytes, "unsplit_blocks": self.unsplit_blocks,
                          "unsplit_bytes": self.unsplit_bytes},
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


def _pct(error: int, base: int) -> float | None:
    return round(100.0 * error / base, 6) if base else None
