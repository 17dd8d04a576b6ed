"""vLLM start-up logs, V0 and V1, as the releases printed them.

Formats (vllm-project/vllm):
- V0 ~0.6: ``worker.py`` "Loading model weights took X GB"; "Memory profiling results: total_gpu_memory=..
  peak_torch_memory=.. non_torch_memory=.. kv_cache_size=.. gpu_memory_utilization=.." where
  kv = total x util - peak_torch (weights included) - non_torch; "# GPU blocks: N, # CPU blocks: M".
- V0 0.7 / V1 0.8-0.9 (``determine_num_available_blocks`` / ``gpu_worker.py``): "the current vLLM instance can
  use total_gpu_memory (X) x gpu_memory_utilization (U) = B"; "model weights take ..; non_torch_memory
  takes ..; PyTorch activation peak memory takes ..; the rest of the memory reserved for KV Cache is ..".
- V1 0.10+: ``gpu_model_runner.py`` "Model loading took X GiB"; ``gpu_worker.py`` "Available KV cache memory";
  ``kv_cache_utils.py`` "GPU KV cache size: N tokens", "Maximum concurrency for L tokens per request: Cx";
  "Graph capturing finished in S secs, took X GiB"; from v0.21 "Estimated CUDA graph memory: X GiB total";
  the after-capture summary "Free memory on device (F/T GiB) on startup. Desired GPU memory utilization is
  (U, B GiB). Actual usage is W GiB for weight, A GiB for peak activation, N GiB for non-torch memory, and
  G GiB for CUDAGraph memory ... Current kv cache memory in use is K bytes" (later: "W GiB for consumed
  memory (weights + non-torch)" and "K GiB"); the debug ``MemoryProfilingResult`` line ("torch peak memory
  increase", "non-torch forward increase memory", "weights memory").
- Settings: "Initializing a V1 LLM engine (v0.10.2) with config: model='..', dtype=.., max_seq_len=..,
  tensor_parallel_size=.., kv_cache_dtype=.." and "non-default args: {...}" (``utils.py``).
"""

from __future__ import annotations

import ast
import re

from kvplan.logs.core import Line, exact_bytes, logged_size, to_float, to_int
from kvplan.logs.model import Collector

_NUM = r"(-?[\d,]*\.?\d+)"
_SIZE = _NUM + r"\s*(GiB|GB|MiB|MB)"

MARKERS = ("GPU KV cache size", "GPU blocks:", "cuda blocks:", "Memory profiling", "Available KV cache memory",
           "Maximum concurrency for", "vLLM API server", "EngineCore", "gpu_worker.py", "model_runner.py",
           "non-default args", "LLM engine (v", "Model loading took", "Loading model weights took",
           "vllm.v1", "for peak activation", "RayWorkerWrapper")

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    # weights
    ("weights", re.compile(r"Loading model weights took " + _SIZE)),
    ("weights", re.compile(r"Model loading took " + _SIZE)),
    ("weights", re.compile(r"model weights take " + _SIZE)),
    ("weights_summary", re.compile(r"Actual usage is " + _SIZE + r" for weight\b")),
    ("weights_non_torch", re.compile(r"Actual usage is " + _SIZE + r" for consumed memory")),
    ("weights_debug", re.compile(r"weights memory:\s*" + _SIZE)),
    # totals and budget
    ("total", re.compile(r"total_gpu_memory[=\s(]+" + _SIZE)),
    ("total", re.compile(r"Free memory on device \(" + _NUM + r"/" + _SIZE)),
    ("total", re.compile(r"total capacity of " + _SIZE)),
    ("budget", re.compile(r"gpu_memory_utilization \([\d.]+\) = " + _SIZE)),
    ("budget", re.compile(r"Desired GPU memory utilization is \([\d.]+, " + _SIZE + r"\)")),
    ("budget", re.compile(r"Requested memory: [\d.]+ \(util\), " + _SIZE)),
    ("non_kv_debug", re.compile(r"Total non KV cache memory:\s*" + _SIZE)),
    # profile
    ("peak_torch", re.compile(r"peak_torch_memory=" + _SIZE)),
    ("non_torch", re.compile(r"\bnon_torch_memory(?:=| takes )" + _SIZE)),
    ("non_torch", re.compile(r"(?<!for )\b" + _SIZE + r" for non-torch memory")),
    ("non_torch_debug", re.compile(r"non-torch forward increase memory:\s*" + _SIZE)),
    ("activation", re.compile(r"activation peak memory takes " + _SIZE)),
    ("activation", re.compile(_SIZE + r" for peak activation")),
    ("activation_debug", re.compile(r"torch peak memory increase:\s*" + _SIZE)),
    ("cudagraph", re.compile(_SIZE + r" for CUDAGraph memory")),
    ("cudagraph_estimate", re.compile(r"Estimated CUDA graph memory:\s*" + _SIZE)),
    ("cudagraph_capture", re.compile(r"Graph capturing finished in \d+ secs?, took " + _SIZE)),
    # KV
    ("kv_cache", re.compile(r"kv_cache_size=" + _SIZE)),
    ("kv_cache", re.compile(r"reserved for KV Cache is " + _SIZE)),
    ("kv_cache", re.compile(r"Available KV cache memory:\s*" + _SIZE)),
    ("kv_cache_in_use", re.compile(r"Current kv cache memory in use is " + _SIZE)),
    ("kv_cache_needed", re.compile(r"\(" + _SIZE + r" KV cache is needed")),
    ("kv_cache_error", re.compile(r"available KV cache memory \(" + _SIZE + r"\)")),
]
_IN_USE_BYTES = re.compile(r"Current kv cache memory in use is ([\d,]+) bytes")
_BLOCKS = re.compile(r"#?\s*(?:GPU|cuda) blocks:\s*([\d,]+)")
_TOKENS = re.compile(r"GPU KV cache size:\s*([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request:\s*([\d.,]+)x")
_ESTIMATED_LEN = re.compile(r"estimated maximum model length is ([\d,]+)")
_ENGINE = re.compile(r"Initializing an? (?:V[01] )?LLM engine \(v?([0-9][\w.+\-]*)\) with config: (.*)")
_SERVER_VERSION = re.compile(r"vLLM API server version v?([0-9][\w.+\-]*)")
_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})")
_NAMESPACE = re.compile(r"args: Namespace\((.*)\)")
_UTIL = re.compile(r"gpu_memory_utilization(?:=| \()([\d.]+)|Desired GPU memory utilization is \(([\d.]+)"
                   r"|Requested memory: ([\d.]+) \(util\)")
_UTIL_NOTE = re.compile(r"--gpu-memory-utilization=([\d.]+) is equivalent")
_CHUNKED = re.compile(r"max_num_batched_tokens=([\d,]+)")
_MAX_LEN = re.compile(r"Using max model len ([\d,]+)")
_DEVICE_NAME = re.compile(r"device_name=(NVIDIA_[A-Za-z0-9_\-]+?)(?:,|\.json)")
_OVERRIDE = re.compile(r"Overriding num_gpu_blocks=\d+ with num_gpu_blocks_override=(\d+)")
_CONFIG_KEYS = {"model": "model", "max_seq_len": "max_model_len", "tensor_parallel_size": "tp",
                "pipeline_parallel_size": "pp", "dtype": "dtype", "kv_cache_dtype": "kv_dtype",
                "enforce_eager": "enforce_eager", "max_model_len": "max_model_len",
                "gpu_memory_utilization": "gpu_memory_utilization", "max_num_batched_tokens": "max_num_batched_tokens",
                "max_num_seqs": "max_num_seqs", "block_size": "block_size", "model_tag": "model"}
_KV = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,\s)]+)")


# One cheap test per line before the patterns: a long log is mostly request lines that hold none of these.
_WORTH_READING = re.compile("|".join(re.escape(k) for k in (
    "took", "total_gpu_memory", "Free memory on device", "total capacity", "utilization", "Requested memory",
    "non KV", "peak", "non_torch", "non-torch", "CUDAGraph", "CUDA graph", "kv_cache_size", "KV Cache is",
    "KV cache memory", "kv cache memory", "KV cache is needed", "blocks:", "GPU KV cache size",
    "Maximum concurrency", "maximum model length", "LLM engine", "API server version", "args",
    "max_num_batched_tokens", "max model len", "device_name=", "num_gpu_blocks", "weights memory", "weights take")))


def parse(lines: list[Line], out: Collector) -> str:
    """Fill ``out`` from vLLM lines; returns the format name."""
    fmt = "vllm"
    for line in lines:
        text = line.text
        if not _WORTH_READING.search(text):
            continue
        for name, pattern in _PATTERNS:
            m = pattern.search(text)
            if m is None:
                continue
            groups = m.groups()
            if name == "total" and len(groups) == 3:  # Free memory on device (free/total GiB)
                out.put(name, logged_size(groups[1], groups[2]), line)
            else:
                out.put(name, logged_size(groups[0], groups[1]), line)
        m = _IN_USE_BYTES.search(text)
        if m:
            out.put("kv_cache_in_use", exact_bytes(m.group(1)), line)
        if "Memory profiling results" in text:
            fmt = "vllm-v0-profile"
        elif "the current vLLM instance can use" in text:
            fmt = "vllm-0.7-profile"
        if (m := _BLOCKS.search(text)) and ("GPU blocks" in text or "cuda blocks" in text):
            out.put("num_gpu_blocks", to_int(m.group(1)), line)
        if m := _TOKENS.search(text):
            out.put("kv_cache_tokens", to_int(m.group(1)), line)
        if m := _CONCURRENCY.search(text):
            out.put("concurrency_len", to_int(m.group(1)), line)
            out.put("max_concurrency", to_float(m.group(2)), line)
        if m := _ESTIMATED_LEN.search(text):
            out.put("estimated_max_model_len", to_int(m.group(1)), line)
        if m := _ENGINE.search(text):
            out.put("engine_version", m.group(1), line)
            _config_pairs(m.group(2), line, out)
            if "V1 LLM engine" in text:
                fmt = "vllm-v1"
        if m := _SERVER_VERSION.search(text):
            out.put("engine_version", m.group(1), line)
        if m := _NON_DEFAULT.search(text):
            _non_default(m.group(1), line, out)
        elif m := _NAMESPACE.search(text):
            _config_pairs(m.group(1), line, out)
        if m := _UTIL.search(text):
            out.put("gpu_memory_utilization", _coerce("gpu_memory_utilization", m.group(1) or m.group(2) or m.group(3)), line)
        if m := _UTIL_NOTE.search(text):
            out.put("gpu_memory_utilization", to_float(m.group(1)), line)
        if "Chunked prefill is enabled" in text and (m := _CHUNKED.search(text)):
            out.put("max_num_batched_tokens", to_int(m.group(1)), line)
        if m := _MAX_LEN.search(text):
            out.put("max_model_len", to_int(m.group(1)), line)
        if m := _DEVICE_NAME.search(text):
            out.put("gpu_name", m.group(1).replace("_", " "), line)
        if m := _OVERRIDE.search(text):
            out.notes.append(f"num_gpu_blocks_override={m.group(1)}: the block count is forced, not measured")
        if "Available KV cache memory" in text or "GPU KV cache size" in text:
            if fmt == "vllm":
                fmt = "vllm-v1"
    if "max_model_len" not in out.values and out.has("concurrency_len"):
        out.values["max_model_len"] = out.values["concurrency_len"]
    return fmt


def _config_pairs(text: str, line: Line, out: Collector) -> None:
    for key, raw in _KV.findall(text[:8192]):
        target = _CONFIG_KEYS.get(key)
        if target is None:
            continue
        out.put(target, _coerce(target, raw.strip("'\"")), line)


def _non_default(text: str, line: Line, out: Collector) -> None:
    try:
        values = ast.literal_eval(text[:8192])
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        _config_pairs(text.replace(": ", "="), line, out)
        return
    if not isinstance(values, dict):
        return
    for key, value in values.items():
        target = _CONFIG_KEYS.get(str(key))
        if target is not None:
            out.put(target, _coerce(target, str(value)), line)


def _coerce(target: str, raw: str) -> object:
    if target in ("tp", "pp", "max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size"):
        return to_int(raw)
    if target == "gpu_memory_utilization":
        value = to_float(raw)
        return value if value is not None and 0 < value <= 1 else None
    if target == "enforce_eager":
        return raw.strip().lower() == "true"
    if target == "dtype":
        return raw.removeprefix("torch.")
    if raw in ("None", ""):
        return None
    return raw
