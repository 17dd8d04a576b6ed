"""What ``kvplan verify`` reports, check by check: the records ``VerifyResult`` holds (re-exported by
``kvplan.verify``), which the modules that run the checks fill in.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def _pct(error: int, base: int) -> float | None:
    return round(100.0 * error / base, 6) if base else None
