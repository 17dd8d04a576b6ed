"""``parse_log``: detect the engine from the content, run its reader, assemble a :class:`ParsedLog`."""

from __future__ import annotations

from typing import BinaryIO

from kvplan.logs import llamacpp, sglang, trtllm, vllm
from kvplan.logs.core import MAX_LOG_BYTES, Logged, read_bounded, split_lines
from kvplan.logs.model import MEMORY_ITEMS, Collector, LogSettings, ParsedLog

_READERS = {"vllm": vllm, "sglang": sglang, "trtllm": trtllm, "llamacpp": llamacpp}
_SETTING_KEYS = ("model", "engine_version", "gpu_name", "tp", "pp", "dtype", "kv_dtype", "max_model_len",
                 "gpu_memory_utilization", "mem_fraction_static", "max_num_batched_tokens", "max_num_seqs",
                 "block_size", "enforce_eager")
_LABELS = {"total": "total GPU memory", "budget": "the engine's share of it", "weights": "weights",
           "activation": "activation peak", "non_torch": "non-torch memory", "cudagraph": "CUDA graphs",
           "kv_cache": "KV cache memory"}


def detect(text: str) -> str | None:
    """The engine whose markers the text holds most often (None: none of them)."""
    scores = {name: sum(min(text.count(marker), 50) for marker in reader.MARKERS) for name, reader in _READERS.items()}
    best = max(scores, key=lambda k: scores[k])
    return best if scores[best] > 0 else None


def parse_log(source: str | BinaryIO, engine: str | None = None, limit: int = MAX_LOG_BYTES) -> ParsedLog:
    """Read a log file (path) or binary stream: at most ``limit`` bytes. OSError propagates (a missing file);
    the content itself never makes this raise."""
    text, cut = read_bounded(source, limit)
    return parse_text(text, engine=engine, cut=cut)


def parse_text(text: str, engine: str | None = None, cut: bool = False) -> ParsedLog:
    text = text[:MAX_LOG_BYTES]
    try:
        return _parse(text, engine, cut)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not turn a log into a traceback
        return ParsedLog(engine=None, format=None, settings=LogSettings(), memory={}, bytes_read=len(text),
                         cut=cut, notes=(f"kvplan could not read this log ({type(exc).__name__}); please report it",))


def _parse(text: str, engine: str | None, cut: bool) -> ParsedLog:
    lines = split_lines(text)
    engine = engine or detect(text)
    if engine is None or engine not in _READERS:
        return ParsedLog(engine=None, format=None, settings=LogSettings(), memory={}, lines_read=len(lines),
                         bytes_read=len(text.encode("utf-8", "replace")), cut=cut,
                         notes=("no vLLM, SGLang, TensorRT-LLM or llama.cpp start-up lines found",))
    out = Collector()
    fmt = _READERS[engine].parse(lines, out)
    out.ranks.update(line.rank for line in lines if line.rank is not None)
    memory: dict[str, Logged] = {}
    derived: list[str] = []
    notes: list[str] = list(out.notes)
    line_of: dict[str, int] = {}

    def take(name: str, *sources: str) -> None:
        for source in sources:
            value = out.get(source)
            if isinstance(value, Logged):
                memory[name] = value
                line = out.line_of(source)
                if line:
                    line_of[name] = line
                return

    take("total", "total")
    take("budget", "budget")
    take("weights", "weights", "weights_summary", "weights_debug")
    take("activation", "activation", "activation_debug")
    take("non_torch", "non_torch", "non_torch_debug")
    take("cudagraph", "cudagraph", "cudagraph_estimate", "cudagraph_capture")
    take("kv_cache", "kv_cache", "kv_cache_error")
    for extra in ("peak_torch", "free_after_weights", "free_before_weights", "free_after_kv", "free_after_graphs",
                  "kv_cache_needed", "cudagraph_estimate", "cudagraph_capture"):
        take(extra, extra)
    settings = LogSettings(**{k: out.get(k) for k in _SETTING_KEYS})
    if engine == "llamacpp" and settings.model is None and out.get("model_name"):
        notes.append(f"the GGUF's general.name is '{out.get('model_name')}' (a display name, not a model id): "
                     "pass --model to compare")

    # Items the log prints only in combination: worked out, and said so.
    if "activation" not in memory and "peak_torch" in memory and "weights" in memory:
        peak, weights = memory["peak_torch"], memory["weights"]
        memory["activation"] = Logged(peak.bytes - weights.bytes, peak.step_bytes + weights.step_bytes,
                                      f"{peak.text} - {weights.text}")
        derived.append("activation")
        notes.append("activation = peak_torch_memory - weights (vLLM V0 profiles the peak with the weights in it)")
    consumed = out.get("weights_non_torch")
    if isinstance(consumed, Logged):
        if "weights" in memory and "non_torch" not in memory:
            w = memory["weights"]
            memory["non_torch"] = Logged(consumed.bytes - w.bytes, consumed.step_bytes + w.step_bytes,
                                         f"{consumed.text} - {w.text}")
            derived.append("non_torch")
            notes.append("non-torch = 'consumed memory (weights + non-torch)' - the weights the loader logged")
        elif "weights" not in memory:
            memory["weights"] = consumed
            notes.append("weights include non-torch memory: the log prints them together")
    if "budget" not in memory and "total" in memory and settings.gpu_memory_utilization and engine == "vllm":
        total = memory["total"]
        util = settings.gpu_memory_utilization
        memory["budget"] = Logged(int(total.bytes * util), int(total.step_bytes * util) + 1, f"{total.text} x {util:g}")
        derived.append("budget")
    if engine == "sglang":
        k, v = out.get("k_size"), out.get("v_size")
        if isinstance(k, Logged) and isinstance(v, Logged) and "kv_cache" not in memory:
            memory["kv_cache"] = Logged(k.bytes + v.bytes, k.step_bytes + v.step_bytes, f"K {k.text} + V {v.text}")
            line_of["kv_cache"] = out.line_of("k_size") or 0
        if settings.kv_dtype in (None, "auto") and out.get("kv_dtype_logged"):
            settings = LogSettings(**{**settings.to_dict(), "kv_dtype": out.get("kv_dtype_logged")})
    in_use = out.get("kv_cache_in_use")
    if isinstance(in_use, Logged):
        available = memory.get("kv_cache")
        if available is None or (in_use.step_bytes < available.step_bytes
                                 and abs(in_use.bytes - available.bytes) <= available.step_bytes):
            memory["kv_cache"] = in_use
            line_of["kv_cache"] = out.line_of("kv_cache_in_use") or 0
    if "cudagraph" in memory and engine == "vllm" and "cudagraph_estimate" not in memory:
        notes.append("CUDA graphs were captured after the KV cache was sized (vLLM before v0.21 does not "
                     "subtract them from the KV budget)")
    tokens = out.get("kv_cache_tokens")
    if engine == "llamacpp":
        tokens = out.get("cells")
    complete = "kv_cache" in memory or tokens is not None or out.get("num_gpu_blocks") is not None
    missing = [_LABELS[k] for k in MEMORY_ITEMS if k not in memory]
    if missing and engine is not None:
        notes.append("not in the log (unknown): " + ", ".join(missing))
    if not complete:
        notes.append("the log ends before the KV cache was allocated (truncated, or the engine failed earlier)")
    if cut:
        notes.append(f"only the first {MAX_LOG_BYTES >> 20} MiB of the log were read")
    notes.extend(out.rank_notes())
    for key in ("num_gpu_blocks", "kv_cache_tokens", "max_concurrency"):
        line = out.line_of(key)
        if line:
            line_of[key] = line
    return ParsedLog(
        engine=engine, format=fmt, settings=settings, memory=memory, derived=tuple(derived),
        num_gpu_blocks=out.get("num_gpu_blocks"), kv_cache_tokens=tokens, max_concurrency=out.get("max_concurrency"),
        concurrency_len=out.get("concurrency_len"), ranks=tuple(sorted(out.ranks)), lines_read=len(lines),
        bytes_read=len(text.encode("utf-8", "replace")), cut=cut, complete=complete,
        notes=tuple(dict.fromkeys(notes)), lines=line_of,
    )
