"""The waterfall of a parsed log, and kvplan's prediction for the same settings beside each item.

This module lays the items side by side and plans nothing: ``kvplan.calibrate.compare`` plans the log's
settings (``kvplan.max_batch``) and hands the plan here; only ``CapacityPlan`` fields are read of it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

import re

from kvplan.logs.model import ParsedLog
from kvplan.logs.reader import log_reader
from kvplan.record import dataclass

if TYPE_CHECKING:
    from typing import Any

WATERFALL = ("total", "budget", "weights", "activation", "non_torch", "cudagraph", "kv_cache",
             "num_gpu_blocks", "kv_cache_tokens", "max_concurrency")
LABELS = {"total": "total GPU memory", "budget": "x utilization (the engine's share)", "weights": "- weights",
          "activation": "- activation peak", "non_torch": "- non-torch memory", "cudagraph": "- CUDA graphs",
          "kv_cache": "= KV cache memory", "num_gpu_blocks": "KV blocks", "kv_cache_tokens": "KV tokens (as logged)",
          "max_concurrency": "max concurrency", "mamba_cache_slots": "recurrent-state slots"}
UNITS = {"num_gpu_blocks": "blocks", "kv_cache_tokens": "tokens", "max_concurrency": "x", "mamba_cache_slots": "slots"}
# counts compared where the log prints them (a hybrid model's state slots: SGLang's max_mamba_cache_size)
COMPARED_COUNTS = ("mamba_cache_slots",)
_MEMORY = ("total", "budget", "weights", "activation", "non_torch", "cudagraph", "kv_cache")
# Why an item differs, per item: what kvplan assumes against what the engine measured.
_WHY = {
    "weights": "kvplan counts the checkpoint's parameter bytes split over the ranks; the engine measured what "
               "it loaded (quantized or partly offloaded checkpoints, vision towers and tied embeddings differ)",
    "activation": "kvplan's activation peak is a model of the widest tensors of one forward pass (vLLM: over "
                  "max_num_batched_tokens); the engine measured its own (profiled peak, compute buffers)",
    "non_torch": "non-torch memory (CUDA context, cuBLAS, NCCL, custom all-reduce) is kvplan's fixed assumption",
    "cudagraph": "CUDA-graph memory is kvplan's fixed assumption and counts only where the engine subtracts it "
                 "(vLLM >= 0.21)",
    "budget": "the engine's share of the GPU: a different utilization or total memory",
    "total": "the GPU's total memory differs from kvplan's catalog (another board or driver reservation)",
}


@dataclass(frozen=True)
class Row:
    item: str
    unit: str
    logged: float | int | None
    step: int | None
    text: str | None
    derived: bool
    line: int | None
    kvplan: float | int | None

    @property
    def difference(self) -> float | int | None:
        if self.logged is None or self.kvplan is None:
            return None
        return self.kvplan - self.logged

    def to_dict(self) -> dict[str, Any]:
        diff = self.difference
        return {"item": self.item, "unit": self.unit, "logged": self.logged, "step": self.step, "text": self.text,
                "derived": self.derived, "line": self.line, "kvplan": self.kvplan,
                "difference": round(diff, 4) if isinstance(diff, float) else diff}


@dataclass(frozen=True)
class Comparison:
    model: str
    gpu: str
    engine_version: str
    plan: Any
    """The kvplan.CapacityPlan for the log's settings."""
    assumptions: tuple[str, ...]
    biggest: str | None
    """The one line explaining the biggest difference."""
    biggest_item: str | None = None


def clean_version(text: str | None) -> str | None:
    """'0.10.1.dev101+gbda9d0535' -> '0.10.1'; 'b4689' (llama.cpp builds) -> None."""
    if not text:
        return None
    m = re.match(r"^v?(\d+(?:\.\d+){0,2})", text.strip())
    return m.group(1) if m else None


EXTRA_LABELS = {"peak_torch": "torch peak (weights + activation)", "free_before_weights": "free before the weights",
                "free_after_weights": "free after the weights", "free_before_kv": "free when the KV pool is sized",
                "free_after_kv": "free after the KV pool",
                "free_after_graphs": "free after CUDA graphs", "kv_cache_needed": "KV memory one request needs",
                "cudagraph_estimate": "CUDA-graph estimate", "cudagraph_capture": "CUDA graphs captured",
                "k_size": "K cache", "v_size": "V cache", "free_before_graphs": "free before CUDA graphs",
                "free_at_start": "free at start-up", "weights_non_torch": "weights + non-torch",
                "free_at_load": "free when the model loads", "weights_host": "weights in host memory",
                "kv_host": "KV cache in host memory", "compute_host": "compute buffer in host memory",
                "output_host": "output buffer in host memory",
                "free_at_init": "free before the model", "non_torch_at_init": "non-torch before the model",
                "non_kv": "all but the KV cache", "kv_cache_to_fit": "KV memory that fits the share",
                "kv_cache_full": "KV memory that fills the GPU",
                "cudagraph_piecewise_first": "piecewise CUDA graphs, first capture",
                "cudagraph_piecewise_each": "piecewise CUDA graphs, each further",
                "cudagraph_full_first": "full CUDA graphs, first capture",
                "cudagraph_full_each": "full CUDA graphs, each further",
                "recurrent_state": "recurrent state", "engine_size": "compiled engine loaded (weights)",
                "execution_context": "execution context (activations)", "runtime_buffers": "runtime buffers",
                "decoder": "decoder buffers", "weights_profile": "weights as the memory profile printed them",
                "weights_summary": "weights as the start-up summary printed them",
                "kv_cache_available": "KV memory as the profile printed it",
                "used_before_profile": "in use before the profile run",
                "used_after_profile": "in use after the profile run",
                "cudagraph_pool": "CUDA-graph pool (actual)", "cudagraph_piecewise": "piecewise CUDA graphs",
                "cudagraph_prefill": "prefill CUDA graphs", "cudagraph_decode": "decode CUDA graphs",
                "free_after_capture": "free after the CUDA-graph capture",
                "init_distributed": "torch distributed init", "mamba_conv_state": "Mamba conv state",
                "mamba_ssm_state": "Mamba SSM state", "kv_cache_estimation": "KV cache of the estimation dry run",
                "build_weights": "engine build: total weights", "build_activation": "engine build: total activation",
                "trt_managed": "TensorRT-managed after the execution context"}
_SAME_AS = {"weights_profile": "weights", "weights_summary": "weights"}
"""A reprint of a waterfall item (to fewer digits): shown only where it is not the item shown."""


def extras(log: ParsedLog) -> list[Row]:
    """Memory readings the log prints besides the waterfall's items (free memory at each step, ...)."""
    out = []
    for name in EXTRA_LABELS:
        value = log.memory.get(name)
        shown = log.memory.get("cudagraph")
        same = log.memory.get(_SAME_AS.get(name, ""))
        if value is not None and not (name.startswith("cudagraph") and shown and shown.bytes == value.bytes) \
                and not (same is not None and same.text == value.text):
            out.append(Row(name, "bytes", value.bytes, value.step_bytes, value.text, False, log.lines.get(name), None))
    return out


def version_of(log: ParsedLog) -> tuple[str | None, str | None]:
    """(the engine version the log names or its format implies, the note saying how it was inferred)."""
    version = clean_version(log.settings.engine_version)
    reader = log_reader(log.engine)
    if version is None and reader is not None:
        implied = reader.implied_version(log.format)
        if implied is not None:
            return implied
    return version, None


def rows(log: ParsedLog, plan: Any = None) -> list[Row]:
    out = []
    predicted = _predicted(plan) if plan is not None else {}
    for item in WATERFALL:
        if item in _MEMORY:
            value = log.memory.get(item)
            out.append(Row(item, "bytes", value.bytes if value else None, value.step_bytes if value else None,
                           value.text if value else None, item in log.derived, log.lines.get(item),
                           predicted.get(item)))
        else:
            logged = getattr(log, item)
            text = None
            if item == "max_concurrency" and logged is not None and log.concurrency_len:
                text = f"{logged:.2f}x at {log.concurrency_len:,} tokens"
            out.append(Row(item, UNITS[item], logged, None, text, False, log.lines.get(item), predicted.get(item)))
    for item in COMPARED_COUNTS:
        if item in log.counts:
            out.append(Row(item, UNITS[item], log.counts[item], None, None, False, log.lines.get(item),
                           predicted.get(item)))
    return out


def _predicted(plan: Any) -> dict[str, float | int | None]:
    per = plan.per_gpu
    return {"total": plan.gpu_total_bytes, "budget": per.budget_bytes, "weights": per.weights_bytes,
            "activation": per.activation_bytes, "non_torch": per.non_torch_bytes, "cudagraph": per.cudagraph_bytes,
            "kv_cache": per.kv_cache_bytes, "num_gpu_blocks": plan.num_blocks, "kv_cache_tokens": plan.kv_cache_tokens,
            "max_concurrency": round(plan.max_concurrency, 4), "mamba_cache_slots": getattr(plan, "state_slots", None)}


def biggest(table: list[Row], plan: Any) -> tuple[str | None, str | None]:
    """(the item that differs most, the one line explaining it) of a waterfall with kvplan's prediction."""
    # CUDA graphs kvplan does not subtract (vLLM < 0.21) were not subtracted by the engine either
    candidates = [r for r in table if r.item in _WHY and r.difference is not None
                  and not (r.item == "cudagraph" and not r.kvplan)]
    if not candidates:
        return None, None
    row = max(candidates, key=lambda r: abs(r.difference or 0))
    diff = row.difference or 0
    if abs(diff) < (row.step or 1):
        return row.item, "every item kvplan could compare agrees within the log's rounding"
    return row.item, (f"biggest difference: {row.item.replace('_', '-')} {_gib(diff, sign=True)} "
                      f"(kvplan {_gib(row.kvplan)}, logged {row.text}): {_WHY[row.item]}")


def _gib(value: float | int | None, sign: bool = False) -> str:
    if value is None:
        return "?"
    return f"{value / 2**30:+.2f} GiB" if sign else f"{value / 2**30:.2f} GiB"
