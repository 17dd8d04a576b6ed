"""transformers' settings as kvplan plans them (``HF.settings``): its QuantizedCache and eviction budgets
(docs/quantized-eviction.md). The command line is generated from this table."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.engines.settings import Setting, lower, plain_float, whole


def _evict(text: str, field: str) -> Any:
    from kvplan.engines.hf.eviction import parse_evict

    return parse_evict(text)


SETTINGS: tuple[Setting, ...] = (
    Setting("kv_cache", ("--kv-cache",), "quantized: transformers' QuantizedCache.", "options", convert=lower,
            estimate=True),
    Setting("backend", ("--backend",), "QuantizedCache backend: quanto (default), hqq, fp8.", "options",
            convert=lower, estimate=True),
    Setting("nbits", ("--nbits",), "Quantized bits: quanto 2 or 4 (default 4), hqq 1, 2, 3, 4 or 8.", "options",
            convert=whole, estimate=True),
    Setting("residual_length", ("--residual-length",),
            "Decoded tokens kept in full precision until re-quantization (default 128).", "options", convert=whole,
            estimate=True),
    Setting("q_group_size", ("--q-group-size",), "Elements per scale and zero point (default 64).", "options",
            convert=whole, estimate=True),
    Setting("axis_key", ("--axis-key",), "Grouping axis for keys (quanto 0 or -1, hqq 0 or 1; default 0).",
            "options", convert=whole, estimate=True),
    Setting("axis_value", ("--axis-value",), "Grouping axis for values (default 0).", "options", convert=whole,
            estimate=True),
    Setting("evict", ("--evict",), "Token budget per full-attention layer: sink=4,window=4092 (StreamingLLM) or "
            "heavy=H,recent=R (H2O).", "options", convert=_evict, estimate=True),
    Setting("press", ("--press",), "NVIDIA kvpress press at prefill: snapkv, knorm, pyramidkv, adakv, ...",
            "options", estimate=True),
    Setting("compression_ratio", ("--compression-ratio",), "The press's fraction of prompt tokens removed.",
            "options", convert=plain_float, estimate=True),
)
