"""The waterfall of a parsed log, and kvplan's prediction for the same settings beside each item.

Only public entry points are used: ``kvplan.max_batch``, ``Settings`` and ``CapacityPlan`` fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kvplan.logs.model import ParsedLog
from kvplan.logs.reader import log_reader

WATERFALL = ("total", "budget", "weights", "activation", "non_torch", "cudagraph", "kv_cache",
             "num_gpu_blocks", "kv_cache_tokens", "max_concurrency")
LABELS = {"total": "total GPU memory", "budget": "x utilization (the engine's share)", "weights": "- weights",
          "activation": "- activation peak", "non_torch": "- non-torch memory", "cudagraph": "- CUDA graphs",
          "kv_cache": "= KV cache memory", "num_gpu_blocks": "KV blocks", "kv_cache_tokens": "KV tokens (as logged)",
          "max_concurrency": "max concurrency"}
UNITS = {"num_gpu_blocks": "blocks", "kv_cache_tokens": "tokens", "max_concurrency": "x"}
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
                "cudagraph_estimate": "CUDA-graph estimate", "cudagraph_capture": "CUDA graphs captured"}


def extras(log: ParsedLog) -> list[Row]:
    """Memory readings the log prints besides the waterfall's items (free memory at each step, ...)."""
    out = []
    for name in EXTRA_LABELS:
        value = log.memory.get(name)
        shown = log.memory.get("cudagraph")
        if value is not None and not (name.startswith("cudagraph") and shown and shown.bytes == value.bytes):
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
    return out


def _predicted(plan: Any) -> dict[str, float | int | None]:
    per = plan.per_gpu
    return {"total": plan.gpu_total_bytes, "budget": per.budget_bytes, "weights": per.weights_bytes,
            "activation": per.activation_bytes, "non_torch": per.non_torch_bytes, "cudagraph": per.cudagraph_bytes,
            "kv_cache": per.kv_cache_bytes, "num_gpu_blocks": plan.num_blocks, "kv_cache_tokens": plan.kv_cache_tokens,
            "max_concurrency": round(plan.max_concurrency, 4)}


def compare(log: ParsedLog, *, model: str | None = None, gpu: str | None = None, gpu_memory: str | None = None,
            tp: int | None = None, pp: int | None = None, engine_version: str | None = None,
            kv_dtype: str | None = None, max_model_len: int | None = None, settings: Any = None) -> Comparison:
    """kvplan.max_batch for the settings the log names (flags fill what it lacks; each such value is said)."""
    import kvplan
    from kvplan.errors import KvplanError, UsageError

    for name, given in (("tp", tp), ("pp", pp)):  # 0 is refused by name, never read as "not given"
        if given is not None and (isinstance(given, bool) or not isinstance(given, int) or given < 1):
            raise UsageError(f"{given!r} must be a whole number, at least 1", field=name)
    if log.engine is None:
        raise UsageError("not a start-up log kvplan reads: nothing to compare")
    s = log.settings
    notes: list[str] = []
    model = model or s.model
    if model is None:
        raise UsageError("the log names no model: pass --model (a bundled id, config.json or YAML spec)")
    if gpu is None and gpu_memory is None:
        total = log.memory.get("total")
        if total is None:
            raise UsageError("the log names no total GPU memory: pass --gpu or --gpu-memory")
        gpu_memory = str(total.bytes)
        notes.append(f"GPU: the total memory the log printed, {total.text}")
    version, inferred = version_of(log)
    version = engine_version or version
    if inferred and not engine_version:
        notes.append(inferred)
    elif version is None:
        notes.append("engine version not logged: kvplan's newest rules used (pass --engine-version)")
    for name, value in (("tp", tp if tp is not None else s.tp), ("pp", pp if pp is not None else s.pp)):
        if value is None:
            notes.append(f"{name} not logged: 1 used (pass --{name})")
    mml = max_model_len if max_model_len is not None else s.max_model_len
    if mml is None:
        notes.append("max model len not logged: the model's limit used (pass --max-model-len)")
    base = settings or kvplan.Settings()
    from dataclasses import replace

    # the engine's own knobs the log names (vLLM: utilization, batched tokens, max seqs; SGLang: the static
    # fraction) are carried into the plan unless given
    reader = log_reader(log.engine)
    carried = reader.carried if reader is not None else ()
    settings = replace(base, enforce_eager=base.enforce_eager or bool(s.enforce_eager),
                       **{name: getattr(base, name) or getattr(s, name) for name in carried})
    kv = kv_dtype or s.kv_dtype or "auto"
    # values the log gave, not a flag: a refusal names the log, not a flag the user did not pass
    from_log = {name for name, given, logged in (("tp", tp, s.tp), ("pp", pp, s.pp), ("kv_dtype", kv_dtype, s.kv_dtype),
                                                 ("max_model_len", max_model_len, s.max_model_len))
                if given is None and logged is not None}
    tp = tp if tp is not None else (s.tp or 1)
    pp = pp if pp is not None else (s.pp or 1)
    try:
        plan = kvplan.max_batch(model, gpu=gpu, gpu_memory=gpu_memory, tp=tp, pp=pp,
                                engine=log.engine, engine_version=version, kv_dtype=kv, max_model_len=mml,
                                settings=settings)
    except KvplanError as exc:
        if exc.field in from_log:
            raise UsageError(f"the log's {exc.field} {getattr(s, exc.field)}: {exc.message}") from None
        raise
    table = rows(log, plan)
    biggest_item, line = _biggest(table, plan)
    return Comparison(model=plan.model_id, gpu=plan.gpu_name, engine_version=plan.engine_version, plan=plan,
                      assumptions=tuple(notes), biggest=line, biggest_item=biggest_item)


def _biggest(table: list[Row], plan: Any) -> tuple[str | None, str | None]:
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
