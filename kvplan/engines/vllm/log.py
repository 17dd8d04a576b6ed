"""vLLM start-up logs, V0 and V1, as the releases printed them; how a calibration from one applies.

Formats (vllm-project/vllm):
- V0 ~0.6: ``worker.py`` "Loading model weights took X GB"; "Memory profiling results: total_gpu_memory=..
  peak_torch_memory=.. non_torch_memory=.. kv_cache_size=.. gpu_memory_utilization=.." where
  kv = total x util - peak_torch (weights included) - non_torch; "# GPU blocks: N, # CPU blocks: M".
- V0 0.6.5 (December 2024, vllm-project/vllm#10511 ``worker.py::determine_num_available_blocks``): the same items
  one to a line, name then value: "total_gpu_memory  79.22GiB", "gpu_memory_utilization  0.90", "the current
  vLLM instance can use  71.29GiB", "model weights take  14.96GiB", "non_torch_memory  1.79GiB", "PyTorch
  activation peak memory  1.26GiB", "available_kv_cache_memory  53.29GiB".
- V0 0.7-0.10 (``worker.py`` ``determine_num_available_blocks``; V1's ``gpu_worker.py`` prints none of it, so at
  0.8-0.10 it marks the V0 engine: ``logged_settings``): "the current vLLM instance can
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
- Host KV tier: V0 "# CPU blocks: M" (swap space, per GPU); 0.19+ ``VLLM_USE_SIMPLE_KV_OFFLOAD``
  (``vllm/v1/simple_kv_offload/manager.py``) "SimpleCPUOffloadScheduler: Allocating N CPU blocks (X GB, mode=..)"
  (0.33: "N offload blocks"; X = per-rank bytes / 2^30); native CPU offloading 0.33
  (``kv_offload/cpu/shared_offload_region.py``) "Created mmap file PATH (X GB)" (bytes / 10^9, the whole region).
  The native connector before 0.33 prints no size, but "Allocating N CPU tensors..." (0.11-0.33, per worker) and
  at DEBUG each tensor ("Allocating CPU tensor of shape [..]" 0.11-0.19, in the KV dtype; "torch.zeros pinned
  tensor A×B" 0.20-0.26, int8): the pinned bytes (``engines/vllm/pinned.py``). kvplan shows them in the notes.
- Model runner (0.12+, ``engines/vllm/runner.py``): Model Runner V2 prints "Using V2 Model Runner"
  (``gpu_worker.py``, 0.18+) and its lines come from ``model_runner.py`` (``vllm/v1/worker/gpu/``); the V1 runner's
  from ``gpu_model_runner.py``. A V2 log is read as format ``vllm-v1-runner-v2`` and calibrates with that runner.
- Settings: "Initializing a V1 LLM engine (v0.10.2) with config: model='..', dtype=.., max_seq_len=..,
  tensor_parallel_size=.., kv_cache_dtype=.." and "non-default args: {...}" (``utils.py``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

import math
import re
from collections.abc import Callable

from kvplan.budgets import Settings
from kvplan.engines.log_format import (
    COUNT,
    NUMBER,
    Calibrated,
    CalibrationCase,
    Collector,
    DeviceReading,
    Draft,
    Line,
    Logged,
    LogReader,
    exact_bytes,
    kv_only,
    lazy_pattern,
    to_float,
    to_int,
)
from kvplan.record import replace

if TYPE_CHECKING:
    from typing import Any

# Linear patterns (engines/log_format.py): NUMBER starts only where a run of digits starts, and reads the number whole
# ('1.5e3 GiB' is 1,500 GiB, never 3 GiB); the old '-?[\d,]*\.?\d+' tried every split of a run of digits.
_NUM = NUMBER
_SIZE = NUMBER + r"\s*(GiB|GB|MiB|MB)"
_FRACTION = r"(\d+(?:\.\d+)?)"

MARKERS = ("GPU KV cache size", "GPU blocks:", "cuda blocks:", "CUDA blocks:", "Memory profiling",
           "Available KV cache memory",
           "Maximum concurrency for", "vLLM API server", "EngineCore", "gpu_worker.py", "model_runner.py",
           "non-default args", "LLM engine (v", "Model loading took", "Loading model weights took",
           "vllm.v1", "for peak activation", "RayWorkerWrapper", "available_kv_cache_memory",
           "the current vLLM instance can use", "stored in KV cache", "reserved for KV Cache is",
           "KV cache is needed, which is larger than", "Free memory on device (", "Desired GPU memory utilization",
           "num_gpu_blocks is:", "PyTorch activation peak memory", "model weights take")

# One per start-up, on rank 0 (``entrypoints/openai/api_server.py::run_server``; without the API server, the engine's
# ``LLMEngine.__init__`` / ``EngineCore.__init__`` line, once per data-parallel engine: DP0's is the start-up's).
STARTUPS = (lazy_pattern(r"vLLM API server version "), lazy_pattern(r"Initializing an? (?:V[01] )?LLM engine \("))

# (item, a literal the line must hold, the pattern): the literal is looked for first (a plain substring search), so
# that a line holding none of them costs no pattern (a pattern that starts with a number is tried at every
# character of the line: linear, but not free)
_PATTERNS: list[tuple[str, str, re.Pattern[str]]] = [(name, needle, lazy_pattern(pattern)) for name, needle, pattern in (
    # weights
    ("weights", "Loading model weights took ", r"Loading model weights took " + _SIZE),
    ("weights", "Model loading took ", r"Model loading took " + _SIZE),
    # the profile summary's weights: the loader's figure to 2 decimals (the loader's, printed first, has more)
    ("weights_profile", "model weights take ", r"model weights take\s{1,16}" + _SIZE),
    ("weights_summary", "Actual usage is ", r"Actual usage is " + _SIZE + r" for weight\b"),
    ("weights_non_torch", "Actual usage is ", r"Actual usage is " + _SIZE + r" for consumed memory"),
    ("weights_debug", "weights memory:", r"weights memory:\s*" + _SIZE),
    # totals and budget
    ("total", "total_gpu_memory", r"total_gpu_memory[=\s(]{1,16}" + _SIZE),
    ("total", "total capacity of ", r"total capacity of " + _SIZE),
    ("budget", "gpu_memory_utilization (", r"gpu_memory_utilization \(" + _FRACTION + r"\) = " + _SIZE),
    ("budget", "Desired GPU memory utilization is (",
     r"Desired GPU memory utilization is \(" + _FRACTION + r", " + _SIZE + r"\)"),
    ("budget", "Requested memory: ", r"Requested memory: " + _FRACTION + r" \(util\), " + _SIZE),
    ("budget", "the current vLLM instance can use ", r"the current vLLM instance can use\s{1,16}" + _SIZE),
    ("non_kv", "Total non KV cache memory:", r"Total non KV cache memory:\s*" + _SIZE),
    # 0.10 gpu_worker.py determine_available_memory, DEBUG: "Initial free memory: F GiB, free memory: G GiB,
    # requested GPU memory: R GiB" (F: the init snapshot's free memory; R: total x utilization)
    ("free_at_init", "Initial free memory: ", r"Initial free memory: " + _SIZE),
    ("budget", "requested GPU memory: ", r"requested GPU memory: " + _SIZE),
    # V0 0.6.4-0.6.x worker.py "Memory profiling results: ... initial_memory_usage=X ... memory_usage_post_profile=Y"
    # (total - free before the profile run; total - free after it)
    ("used_before_profile", "initial_memory_usage=", r"\binitial_memory_usage=" + _SIZE),
    ("used_after_profile", "memory_usage_post_profile=", r"\bmemory_usage_post_profile=" + _SIZE),
    # profile
    ("peak_torch", "peak_torch_memory=", r"peak_torch_memory=" + _SIZE),
    ("non_torch", "non_torch_memory", r"\bnon_torch_memory(?:=| takes |\s{1,16})" + _SIZE),
    ("non_torch", " for non-torch memory", r"(?<!for )" + _SIZE + r" for non-torch memory"),
    ("non_torch_debug", "non-torch forward increase memory:", r"non-torch forward increase memory:\s*" + _SIZE),
    ("activation", "activation peak memory", r"activation peak memory(?: takes)?\s{1,16}" + _SIZE),
    ("activation", " for peak activation", _SIZE + r" for peak activation"),
    ("activation_debug", "torch peak memory increase:", r"torch peak memory increase:\s*" + _SIZE),
    ("cudagraph", " for CUDAGraph memory", _SIZE + r" for CUDAGraph memory"),
    ("cudagraph_estimate", "Estimated CUDA graph memory:", r"Estimated CUDA graph memory:\s*" + _SIZE),
    ("cudagraph_capture", "Graph capturing finished in ", r"Graph capturing finished in \d+ secs?, took " + _SIZE),
    # 0.21+ gpu_worker.py, after capture: "CUDA graph pool memory: A GiB (actual), E GiB (estimated), difference: .."
    ("cudagraph_pool", "CUDA graph pool memory: ", r"CUDA graph pool memory: " + _SIZE + r" \(actual\)"),
    ("cudagraph_estimate", "CUDA graph pool memory: ", _SIZE + r" \(estimated\)"),
    # 0.19+ gpu_model_runner.py (profile_cudagraph_memory): "Estimated PIECEWISE CUDA graph memory: 122.00 MiB
    # first-capture + (51-1) x 6.00 MiB per-graph", one line per mode
    ("cudagraph_piecewise_first", "Estimated PIECEWISE CUDA graph memory:",
     r"Estimated PIECEWISE CUDA graph memory:\s*" + _SIZE + " first-capture"),
    ("cudagraph_piecewise_each", "Estimated PIECEWISE CUDA graph memory:", _SIZE + " per-graph"),
    ("cudagraph_full_first", "Estimated FULL CUDA graph memory:",
     r"Estimated FULL CUDA graph memory:\s*" + _SIZE + " first-capture"),
    ("cudagraph_full_each", "Estimated FULL CUDA graph memory:", _SIZE + " per-graph"),
    # KV
    ("kv_cache", "kv_cache_size=", r"kv_cache_size=" + _SIZE),
    ("kv_cache", "reserved for KV Cache is ", r"reserved for KV Cache is " + _SIZE),
    ("kv_cache", "available_kv_cache_memory", r"available_kv_cache_memory\s{1,16}" + _SIZE),
    ("kv_cache", "Available KV cache memory:", r"Available KV cache memory:\s*" + _SIZE),
    ("kv_cache_in_use", "Current kv cache memory in use is ", r"Current kv cache memory in use is " + _SIZE),
    ("kv_cache_needed", " KV cache is needed", r"\(" + _SIZE + r" KV cache is needed"),
    ("kv_cache_error", "available KV cache memory (", r"available KV cache memory \(" + _SIZE + r"\)"),
)]
# 0.10+ gpu_worker.py init_device, DEBUG: "worker init memory snapshot: torch_peak=.., free_memory=F, total_memory=T,
# cuda_memory=.., torch_memory=.., non_torch_memory=N, ..." before any model: N is the CUDA context and whatever ran
# first, not the budget's non-torch item (the growth since this snapshot), so the line is read apart
_SNAPSHOT = "memory snapshot:"
_SNAPSHOT_ITEMS = (("free_at_init", lazy_pattern(r"\bfree_memory=" + _SIZE)),
                   ("non_torch_at_init", lazy_pattern(r"\bnon_torch_memory=" + _SIZE)))
# 0.10.2+ "Replace gpu_memory_utilization config with `--kv-cache-memory=A` ... to fit into requested memory, or
# `--kv-cache-memory=B` ... to fully utilize gpu memory" (gpu_worker.py): the KV memory either way, in bytes
_KV_ADVICE = lazy_pattern(r"--kv-cache-memory=" + COUNT + r"`(?: \([^)]{0,32}\))? to (fit into requested|fully utilize)")
_FREE_AT_START = lazy_pattern(r"Free memory on device \(" + _NUM + r"/" + _NUM + r"\s*(GiB|GB)")
_IN_USE_BYTES = lazy_pattern(r"Current kv cache memory in use is " + COUNT + r" bytes")
# executor_base.py "# %s blocks: %d" names the device type (0.8.5: "# cuda blocks", "# rocm blocks", "# xpu blocks")
_BLOCKS = lazy_pattern(r"(?:GPU|cuda|CUDA|rocm|ROCm|xpu|XPU|hpu|HPU|npu|NPU|tpu|TPU) blocks: *" + COUNT)
# V1 v1/metrics/loggers.py (0.10+, the API server's engine 000): the pool's block count once the engine is up
_BLOCKS_INFO = lazy_pattern(r"cache_config_info with initialization after num_gpu_blocks is: *" + COUNT)
_CPU_BLOCKS = lazy_pattern(r"# *CPU blocks: *" + COUNT)
_SIMPLE_BLOCKS = lazy_pattern(r"SimpleCPUOffloadScheduler: Allocating " + COUNT + r" (?:CPU|offload) blocks \("
                              + _FRACTION + r" GB")
_MMAP_REGION = lazy_pattern(r"Created mmap file \S+ \(" + _FRACTION + r" GB\)")
_CPU_TENSORS = lazy_pattern(r"Allocating " + COUNT + r" CPU tensors")
_CPU_TENSOR_SIZE = lazy_pattern(r"Allocating CPU tensor of shape \[([^\]]{0,200})\]"
                                r"|torch\.zeros pinned tensor (\d+) *[×x] *(\d+)")
_TOKENS = lazy_pattern(r"GPU KV cache size: *" + COUNT + r" tokens")
_CONCURRENCY = lazy_pattern(r"Maximum concurrency for " + COUNT + r" tokens per request: *" + _FRACTION + r"x")
_ESTIMATED_LEN = lazy_pattern(r"estimated maximum model length is " + COUNT)
# V0's start-up error (``LLMEngine._initialize_kv_caches`` -> ``raise_if_cache_size_invalid``, vllm#2163): M is
# num_gpu_blocks x block_size, the tokens the pool holds; N the max model len it could not hold
_STORED = lazy_pattern(r"max seq len \(" + COUNT + r"\) is larger than the maximum number of tokens that can be "
                       r"stored in KV cache \(" + COUNT + r"\)")
_ENGINE = lazy_pattern(r"Initializing an? (?:V[01] )?LLM engine \(v?([0-9][\w.+\-]{0,63})\) with config: (.*)")
_SERVER_VERSION = lazy_pattern(r"vLLM API server version v?([0-9][\w.+\-]{0,63})")
_UTIL = lazy_pattern(r"gpu_memory_utilization(?:=| \(|\s{1,16}(?=\d))" + _FRACTION + r"|Desired GPU memory utilization is \("
                     + _FRACTION + r"|Requested memory: " + _FRACTION + r" \(util\)")
_UTIL_NOTE = lazy_pattern(r"--gpu-memory-utilization=" + _FRACTION + r" is equivalent")
_CHUNKED = lazy_pattern(r"max_num_batched_tokens=" + COUNT)
_MAX_LEN = lazy_pattern(r"Using max model len " + COUNT)
_DEVICE_NAME = lazy_pattern(r"device_name=(NVIDIA_[A-Za-z0-9_\-]{1,100})(?:,|\.json)")
_OVERRIDE = lazy_pattern(r"Overriding num_gpu_blocks=\d+ with num_gpu_blocks_override=(\d{1,18})\b")
_CONFIG_KEYS = {"model": "model", "max_seq_len": "max_model_len", "tensor_parallel_size": "tp",
                "pipeline_parallel_size": "pp", "dtype": "dtype", "kv_cache_dtype": "kv_dtype",
                "enforce_eager": "enforce_eager", "max_model_len": "max_model_len",
                "gpu_memory_utilization": "gpu_memory_utilization", "max_num_batched_tokens": "max_num_batched_tokens",
                "max_num_seqs": "max_num_seqs", "block_size": "block_size", "model_tag": "model"}
# a key starts where a word starts (the look-behind): a 16 KB word is tried once, not from each of its letters
_KV = lazy_pattern(r"(?<!\w)(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,\s)]+)")


# One cheap test per line before the patterns: a long log is mostly request lines that hold none of these.
_WORTH_READING = lazy_pattern("|".join(re.escape(k) for k in (
    "took", "total_gpu_memory", "Free memory on device", "total capacity", "utilization", "Requested memory",
    "non KV", "peak", "non_torch", "non-torch", "CUDAGraph", "CUDA graph", "kv_cache_size", "KV Cache is",
    "KV cache memory", "kv cache memory", "KV cache is needed", "blocks:", "GPU KV cache size",
    "Maximum concurrency", "maximum model length", "LLM engine", "API server version", "args",
    "max_num_batched_tokens", "max model len", "device_name=", "num_gpu_blocks", "weights memory", "weights take",
    "vLLM instance can use", "available_kv_cache_memory", "stored in KV cache",
    "offload blocks", "CPU blocks", "mmap file", "CPU tensor", "pinned tensor", "model_runner.py", "Model Runner",
    "top-p & top-k sampling", "num_gpu_blocks is", "Initial free memory", "requested GPU memory",
    "initial_memory_usage", "CUDA graph pool memory")))
# v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.__init__ (0.8 - 0.11.0 wheels): the profiling run's path
_SAMPLER_LINES = (("Using FlashInfer for top-p & top-k sampling", "flashinfer"),
                  ("Falling back to the PyTorch-native implementation of top-p & top-k sampling", "sort"))
_V2_FILE = lazy_pattern(r"\[model_runner\.py:\d")  # Model Runner V2's file (bracketed: a 0.8+ log line)
V2_FORMAT = "vllm-v1-runner-v2"
V2_RUNNER_SINCE = (0, 12)  # runner.py V2_SINCE: the release that brought vllm/v1/worker/gpu/model_runner.py


def read(lines: list[Line], out: Collector) -> str:
    """Fill ``out`` from vLLM lines; returns the format name. A line that cannot be read is left out (and
    listed), never a reason to drop the log."""
    state = {"fmt": "vllm"}
    tensor_sizes: dict[int | None, list[tuple[int, bool]]] = {}  # per rank: (bytes, or elements where True)
    for line in lines:
        if not _WORTH_READING.search(line.text):
            continue
        try:
            _read_line(line, out, state, tensor_sizes)
        except Exception as exc:  # noqa: BLE001 - one odd line must not cost the whole log
            out.skip(line.number, f"not read ({type(exc).__name__})")
    if _runs_v2(out) and state["fmt"] in ("vllm", "vllm-v1"):
        state["fmt"] = V2_FORMAT
        out.values["model_runner"] = [(None, "v2", 0)]
    if "max_model_len" not in out.values and out.has("concurrency_len"):
        out.values["max_model_len"] = out.values["concurrency_len"]
    tier = out.get("host_tier")
    if (count := out.get("cpu_tensors")) is not None:
        tier = tier or ("native CPU offloading", None, None, None)
        tier = (*tier[:3], ", ".join(p for p in (tier[3], _tensors_said(count, tensor_sizes, out)) if p))
    if tier:
        out.notes.append(host_tier_note(*tier))
    return state["fmt"]


def _read_line(line: Line, out: Collector, state: dict[str, str],
               tensor_sizes: dict[int | None, list[tuple[int, bool]]]) -> None:
    text = line.text
    for said, path in _SAMPLER_LINES:
        if said in text:
            out.put("vllm_sampler", path, line)
    if "Using V2 Model Runner" in text:
        out.put("runner_v2_said", True, line)
    if "gpu_model_runner.py:" in text:
        out.put("runner_v1_file", True, line)
    elif "model_runner.py:" in text and _V2_FILE.search(text):
        out.put("runner_v2_file", True, line)
        if "EngineCore" in line.label or "Worker" in line.label:  # V1-engine processes; V0 has neither label
            out.put("engine_core", True, line)
    if _SNAPSHOT in text:
        for name, pattern in _SNAPSHOT_ITEMS:
            if m := pattern.search(text):
                out.put_size(name, m.group(1), m.group(2), line)
        return
    for m in (_KV_ADVICE.finditer(text) if "--kv-cache-memory=" in text else ()):
        out.put("kv_cache_to_fit" if m.group(2).startswith("fit") else "kv_cache_full", exact_bytes(m.group(1)), line)
    for name, needle, pattern in _PATTERNS:
        m = pattern.search(text) if needle in text else None
        if m is None:
            continue
        groups = m.groups()
        if len(groups) == 3:  # Free memory on device (free/total GiB); utilization (U) = B GiB
            number, unit = (groups[1], groups[2])
        else:
            number, unit = groups[0], groups[1]
        out.put_size(name, number, unit, line)
    if m := _find("Free memory on device (", _FREE_AT_START, text):  # (free/total GiB)
        out.put_size("free_at_start", m.group(1), m.group(3), line)
        out.put_size("total", m.group(2), m.group(3), line)
    if m := _find("kv cache memory in use", _IN_USE_BYTES, text):
        out.put("kv_cache_in_use", exact_bytes(m.group(1)), line)
    if "Memory profiling results" in text:
        state["fmt"] = "vllm-v0-profile"
    elif "the current vLLM instance can use total_gpu_memory" in text:
        state["fmt"] = "vllm-0.7-profile"
    elif "available_kv_cache_memory" in text and state["fmt"] == "vllm":
        state["fmt"] = "vllm-0.6.5-profile"
    if m := _find("blocks:", _BLOCKS, text):
        out.put_int("num_gpu_blocks", m.group(1), line)
    if m := _find("num_gpu_blocks is", _BLOCKS_INFO, text):
        out.put_int("num_gpu_blocks", m.group(1), line)
    if m := _find("CPU blocks:", _CPU_BLOCKS, text):
        out.put_int("num_cpu_blocks", m.group(1), line)
        out.put("host_tier", ("vLLM V0 swap space", to_int(m.group(1)), None, None), line)
    elif m := _find("SimpleCPUOffloadScheduler", _SIMPLE_BLOCKS, text):
        out.put("host_tier", ("SimpleCPUOffloadConnector", to_int(m.group(1)), m.group(2) + " GiB per rank",
                              None), line)
    elif m := _find("mmap file", _MMAP_REGION, text):
        out.put("host_tier", ("native CPU offloading", None, None, m.group(1) + " GB (10^9 B) mmap region"), line)
    if m := _find("CPU tensors", _CPU_TENSORS, text):
        out.put_int("cpu_tensors", m.group(1), line)
    elif (m := _find("tensor", _CPU_TENSOR_SIZE, text)) and len(seen := tensor_sizes.setdefault(line.rank, [])) < 4096:
        raw = m.group(1).split(",") if m.group(1) is not None else [m.group(2), m.group(3)]
        dims = [to_int(d) for d in raw]
        if not dims or any(d is None for d in dims):  # "[2, ,16]": a shape that cannot be read, not a guess
            out.skip(line.number, f"the tensor shape [{m.group(1) or ''}] cannot be read")
        else:
            seen.append((math.prod(d or 0 for d in dims[:8]), m.group(1) is not None))
    if m := _find("GPU KV cache size", _TOKENS, text):
        out.put_int("kv_cache_tokens", m.group(1), line)
    if m := _find("Maximum concurrency", _CONCURRENCY, text):
        out.put_int("concurrency_len", m.group(1), line)
        out.put("max_concurrency", to_float(m.group(2)), line)
    if m := _find("stored in KV cache", _STORED, text):
        out.put_int("max_model_len", m.group(1), line)
        out.put_int("kv_cache_tokens", m.group(2), line)
    if m := _find("maximum model length", _ESTIMATED_LEN, text):
        out.put_int("estimated_max_model_len", m.group(1), line)
    if m := _find("LLM engine (", _ENGINE, text):
        out.put("engine_version", m.group(1), line)
        _config_pairs(m.group(2), line, out)
        if "V1 LLM engine" in text:
            state["fmt"] = "vllm-v1"
    if m := _find("API server version", _SERVER_VERSION, text):
        out.put("engine_version", m.group(1), line)
    # "non-default args: {...}" / "args: Namespace(...)": from the first opening to the last closing character, by
    # position (a regex "\{.*\}" would rescan the line from every later "non-default args: {")
    if (body := _between(text, "non-default args: {", "}")) is not None:
        _non_default("{" + body + "}", line, out)
    elif (body := _between(text, "args: Namespace(", ")")) is not None:
        _config_pairs(body, line, out)
    if m := _find("utilization", _UTIL, text) or _find("Requested memory", _UTIL, text):
        out.put("gpu_memory_utilization", _coerce("gpu_memory_utilization", m.group(1) or m.group(2) or m.group(3)),
                line)
    if m := _find("--gpu-memory-utilization=", _UTIL_NOTE, text):
        out.put("gpu_memory_utilization", to_float(m.group(1)), line)
    if "Chunked prefill is enabled" in text and (m := _find("max_num_batched_tokens=", _CHUNKED, text)):
        out.put_int("max_num_batched_tokens", m.group(1), line)
    if m := _find("max model len", _MAX_LEN, text):
        out.put_int("max_model_len", m.group(1), line)
    if m := _find("device_name=", _DEVICE_NAME, text):
        out.put("gpu_name", m.group(1).replace("_", " "), line)
    if m := _find("num_gpu_blocks_override", _OVERRIDE, text):
        out.notes.append(f"num_gpu_blocks_override={m.group(1)}: the block count is forced, not measured")
        out.put_int("num_gpu_blocks_override", m.group(1), line)
    if ("Available KV cache memory" in text or "GPU KV cache size" in text) and state["fmt"] == "vllm":
        state["fmt"] = "vllm-v1"


def _runs_v2(out: Collector) -> bool:
    """Whether the log is Model Runner V2's: it says so, or its lines come from V2's model_runner.py (never from
    gpu_model_runner.py) in a V1-engine log (V0's worker/model_runner.py has the same file name)."""
    if out.has("runner_v2_said"):
        return True
    if not out.has("runner_v2_file") or out.has("runner_v1_file"):
        return False
    from kvplan.engines.version import parse_version

    try:
        version = parse_version(str(out.get("engine_version"))) if out.get("engine_version") else None
    except ValueError:
        version = None
    return version >= V2_RUNNER_SINCE if version is not None else out.has("engine_core")


def _tensors_said(count: int, sizes: dict[int | None, list[tuple[int, bool]]], out: Collector) -> str:
    """The native connector's CPU tensors (one worker's: the lowest rank's lines) as pinned bytes. A shape counts
    elements of the GPU cache's dtype: the logged kv_cache_dtype (fp8: 1 B) or else the model dtype."""
    from kvplan.engines.version import parse_version
    from kvplan.engines.vllm.pinned import logged_tensors_note

    found = sizes[min(sizes, key=lambda r: r or 0)] if sizes else []
    kv, dtype = str(out.get("kv_dtype") or "auto"), str(out.get("dtype") or "")
    width = 1 if kv.startswith("fp8") else {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}.get(
        dtype if kv == "auto" else "", 0)
    byte_sizes = [n * width if elements else n for n, elements in found]
    try:
        version = parse_version(str(out.get("engine_version"))) if out.get("engine_version") else None
    except ValueError:
        version = None
    return logged_tensors_note(count, None if 0 in byte_sizes else byte_sizes, version)


def host_tier_note(kind: str, blocks: int | None, per_rank: str | None, region: str | None) -> str:
    """The host KV tier a log names, as a note (``kvplan max-batch`` plans it from the same flags)."""
    parts = [f"{blocks:,} CPU blocks" if blocks is not None else None, per_rank, region]
    return f"host KV tier ({kind}): " + ", ".join(p for p in parts if p)


def _find(needle: str, pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """``pattern`` where the line holds ``needle`` (a substring search first: most lines hold none)."""
    return pattern.search(text) if needle in text else None


def _between(text: str, start: str, end: str) -> str | None:
    """What lies between the first ``start`` and the last ``end`` after it (None: not both)."""
    at = text.find(start)
    if at < 0:
        return None
    stop = text.rfind(end)
    return text[at + len(start):stop] if stop >= at + len(start) else None


def _config_pairs(text: str, line: Line, out: Collector) -> None:
    for key, raw in _KV.findall(text[:8192]):
        target = _CONFIG_KEYS.get(key)
        if target is None:
            continue
        _put_setting(out, target, raw.strip("'\""), line)


def _non_default(text: str, line: Line, out: Collector) -> None:
    import ast  # only logs with a "non-default args" line need it (about 3 ms of every kvplan log start-up)

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
            _put_setting(out, target, str(value) if not isinstance(value, str) else value, line)


def _put_setting(out: Collector, target: str, raw: str, line: Line) -> None:
    value = _coerce(target, raw)
    if value is None and raw.isdigit():  # a count of more digits than kvplan reads: said, not dropped silently
        out.skip(line.number, f"{target}: a count of {len(raw):,} digits")
    out.put(target, value, line)


def _coerce(target: str, raw: str) -> object:
    if target in ("tp", "pp", "max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size"):
        return to_int(raw)
    if target == "gpu_memory_utilization":  # as logged: one outside (0, 1] makes the log impossible (parse.py)
        return to_float(raw)
    if target == "enforce_eager":
        return raw.strip().lower() == "true"
    if target == "dtype":
        return raw.removeprefix("torch.")
    if raw in ("None", ""):
        return None
    return raw


# --------------------------------------------------------------------------------- items in combination

_RANK_ITEMS = (("weights", ("weights", "weights_profile")), ("non_torch", ("non_torch",)),
               ("activation", ("activation",)), ("kv_cache", ("kv_cache",)))
"""The items a profile prints once per worker (V0: one set per pipeline rank), in the order printed."""


def _pipeline_ranks(d: Draft) -> None:
    """With pipeline parallelism each rank holds its own layers and prints its own set of items; the engine gives
    every rank the block count of the one with the least KV memory (V0 ``determine_num_available_blocks``: the
    minimum over the workers). Every rank's set is kept (``per_rank``) and the limiting rank's is shown."""
    out = d.out
    seen = [e for e in out.values.get("kv_cache", []) if isinstance(e[1], Logged)]
    if (d.settings.pp or 1) < 2 or len({e[1].bytes for e in seen}) < 2:
        return

    def source(e: tuple[Any, Any, int]) -> tuple[Any, bool]:
        return e[0], e[2] in out.workers

    def name(key: tuple[Any, bool], line: int) -> str:
        return f"worker (line {line})" if key[1] else f"rank {key[0] or 0}"

    for entry in seen:
        key = source(entry)
        for item, names in _RANK_ITEMS:
            found = next((e for n in names for e in out.values.get(n, []) if source(e) == key
                          and isinstance(e[1], Logged)), None)
            if found is not None:
                out.per_rank.append(DeviceReading(name(key, entry[2]), item, found[1], found[2]))
    low = min(seen, key=lambda e: (e[1].bytes, e[2]))
    key = source(low)
    picked = {r.item: r for r in out.per_rank if r.device == name(key, low[2])}
    for item, reading in picked.items():
        d.memory[item] = reading.value
        d.line_of[item] = reading.line
    d.memory.pop("weights_profile", None)  # rank 0's reprint: each rank's weights are in per_rank
    out.shown_per_rank.update(n for _, names in _RANK_ITEMS for n in names)
    d.notes.append(f"pipeline parallel: each rank printed its own items; {name(key, low[2])} has the least KV cache "
                   f"memory ({low[1].text}), which sets every rank's block count: its items are shown (each rank's: "
                   "'Per pipeline rank')")


def finish(d: Draft) -> None:
    """Items vLLM prints only in combination, worked out (and said), and the budget its utilization implies."""
    _pipeline_ranks(d)
    memory = d.memory
    if "activation" not in memory and "peak_torch" in memory and "weights" in memory:
        peak, weights = memory["peak_torch"], memory["weights"]
        memory["activation"] = Logged(peak.bytes - weights.bytes, peak.step_bytes + weights.step_bytes,
                                      f"{peak.text} - {weights.text}")
        d.derived.append("activation")
        d.notes.append("activation = peak_torch_memory - weights (vLLM V0 profiles the peak with the weights in it)")
    consumed = d.out.get("weights_non_torch")
    if isinstance(consumed, Logged):
        if "weights" in memory and "non_torch" not in memory:
            w = memory["weights"]
            memory["non_torch"] = Logged(consumed.bytes - w.bytes, consumed.step_bytes + w.step_bytes,
                                         f"{consumed.text} - {w.text}")
            d.derived.append("non_torch")
            d.notes.append("non-torch = 'consumed memory (weights + non-torch)' - the weights the loader logged")
        elif "weights" not in memory:
            memory["weights"] = consumed
            d.notes.append("weights include non-torch memory: the log prints them together")
    util = d.settings.gpu_memory_utilization
    if "budget" not in memory and "total" in memory and util:
        total = memory["total"]
        memory["budget"] = Logged(int(total.bytes * util), int(total.step_bytes * util) + 1, f"{total.text} x {util:g}")
        d.derived.append("budget")
    _sampler_said(d)
    in_use = d.out.get("kv_cache_in_use")
    if isinstance(in_use, Logged):  # the after-capture summary prints the pool exactly (or to more digits)
        available = memory.get("kv_cache")
        if available is None or (in_use.step_bytes < available.step_bytes
                                 and abs(in_use.bytes - available.bytes) <= available.step_bytes):
            if available is not None:  # the profile's reading, as first printed: kept beside the exact one
                memory["kv_cache_available"] = available
                d.line_of["kv_cache_available"] = d.line_of.get("kv_cache", 0)
            memory["kv_cache"] = in_use
            d.line_of["kv_cache"] = d.out.line_of("kv_cache_in_use") or 0
    v2 = d.out.get("model_runner") == "v2"
    graphs_profiled = _v2_graphs_profiled(d.settings.engine_version) if v2 else None
    if v2:
        rule = {True: "from 0.29 it subtracts its measured CUDA-graph memory, as the V1 runner its estimate",
                False: "before 0.29 it subtracts no CUDA-graph memory from the KV budget",
                None: "before 0.29 it subtracts no CUDA-graph memory from the KV budget, from 0.29 its measured "
                      "graphs"}[graphs_profiled]
        d.notes.append(f"Model Runner V2 ('Using V2 Model Runner', or its model_runner.py lines): {rule}; a "
                       "calibration plans with it (--model-runner v2)")
    if "cudagraph" in memory and "cudagraph_estimate" not in memory and graphs_profiled is not True:
        d.notes.append("CUDA graphs were captured after the KV cache was sized (" + (
            "Model Runner V2 before 0.29 does" if v2 else "vLLM before v0.21 does") + " not subtract them from the "
            "KV budget)")


def _sampler_said(d: Draft) -> None:
    """The top-k/top-p path the log's sampler took (its start-up line), kept where kvplan plans that choice:
    before 0.17 (sampler.py; from 0.17 the same FlashInfer line can precede the Triton pass kvplan plans)."""
    from kvplan.engines.version import parse_version
    from kvplan.engines.vllm.sampler import TRITON_SINCE

    path = d.settings.vllm_sampler
    if path is None:
        return
    try:
        late = parse_version(d.settings.engine_version) >= TRITON_SINCE if d.settings.engine_version else False
    except ValueError:
        late = False
    if late:
        d.settings = replace(d.settings, vllm_sampler=None)
        return
    d.notes.append(f"sampler: {path} top-k/top-p, as the log's start-up line says (line "
                   f"{d.out.line_of('vllm_sampler')}); a calibration plans with it (--vllm-sampler {path})")


def _v2_graphs_profiled(version: str | None) -> bool | None:
    """Whether Model Runner V2 of this release measures its CUDA graphs before sizing the KV cache (0.29+,
    runner.py); None where the log names no release."""
    from kvplan.engines.version import parse_version
    from kvplan.engines.vllm.runner import V2_GRAPHS_PROFILED_SINCE

    try:
        return parse_version(version) >= V2_GRAPHS_PROFILED_SINCE if version else None
    except ValueError:
        return None


V0_FORMATS = ("vllm-v0-profile", "vllm-0.6.5-profile", "vllm-0.7-profile")
"""Summaries only the V0 engine prints: 'the current vLLM instance can use total_gpu_memory' is in
vllm/worker/worker.py alone in the 0.8.0, 0.8.5, 0.9.2 and 0.10.1.1 wheels (V1's gpu_worker.py has none)."""


def logged_settings(fmt: str | None, version: str | None) -> dict[str, Any]:
    """The V0 engine, for a V0 summary at a release whose default is V1 (VLLM_USE_V1=0, or vLLM's fallback:
    variant.py); nothing otherwise (before 0.8 V0 is the release's own engine)."""
    from kvplan.engines.version import parse_version
    from kvplan.engines.vllm.variant import V0_REMOVED_IN, V1_DEFAULT_SINCE

    if fmt not in V0_FORMATS or not version:
        return {}
    try:
        release = parse_version(version)
    except ValueError:
        return {}
    return {"vllm_engine": "v0"} if V1_DEFAULT_SINCE <= release < V0_REMOVED_IN else {}


def implied_version(fmt: str | None) -> tuple[str, str] | None:
    """The release a format without a version line implies: the V0 and 0.7 profile summaries."""
    if fmt not in ("vllm-v0-profile", "vllm-0.6.5-profile", "vllm-0.7-profile"):
        return None
    version = {"vllm-v0-profile": "0.6", "vllm-0.6.5-profile": "0.6.5"}.get(fmt, "0.7")
    return version, (f"engine version not logged: the '{fmt}' lines were printed by vLLM {version}.x; "
                     f"{version} used (pass --engine-version)")


# --------------------------------------------------------------------------------------- calibration

def calibrate(case: CalibrationCase) -> Calibrated:
    """vLLM's own rule (``gpu_worker.py::determine_available_memory``): KV = ceil(total x util) - weights -
    activation peak - non-torch (- the CUDA-graph estimate from v0.21). The logged items are rounded to
    0.01 GiB, so the activation kvplan uses is the one that makes the logged items add up to the logged KV
    memory (refined to the logged block count when there is one); the difference to the printed activation
    is the rounding, and is said. The activation peak is profiled over ``max_num_batched_tokens`` tokens: for
    other settings it is scaled by kvplan's activation model (the same ratio), and that is said too."""
    cal, model, here, notes, used, probe = case.cal, case.model, case.here, case.notes, case.used, case.probe
    m = cal.measured
    if "weights" not in m or "kv_cache" not in m:
        return kv_only(case)
    c = cal.settings
    util = c.gpu_memory_utilization
    if util is None:
        util = here.engine_defaults.get("gpu_memory_utilization")
        notes.append(f"calibration: the log names no utilization; vLLM's default {util:g} assumed")
    weights = m["weights"].bytes
    non_torch = m["non_torch"].bytes if "non_torch" in m else None
    graphs = m["cudagraph"].bytes if "cudagraph" in m else None
    measured_at = dict(gpu_memory=str(case.total), engine_version=case.version,
                       max_model_len=c.max_model_len or here.max_model_len, **case.common)
    # the runner the log ran (its format says Model Runner V2): vLLM's rule for it, at the log and here
    logged_runner = "v2" if (cal.source or {}).get("format") == V2_FORMAT else None
    # the engine the log ran (a V0 summary at 0.8-0.10: V0), whatever the deployment planned here is given
    logged_engine = logged_settings((cal.source or {}).get("format"), case.version).get("vllm_engine")
    base = Settings(gpu_memory_utilization=util, max_num_batched_tokens=c.max_num_batched_tokens,
                    max_num_seqs=c.max_num_seqs, enforce_eager=bool(c.enforce_eager), weights_bytes=weights,
                    non_torch_bytes=non_torch, cudagraph_bytes=graphs,
                    model_runner=logged_runner or case.settings.model_runner,
                    vllm_engine=logged_engine or case.settings.vllm_engine, vllm_sampler=c.vllm_sampler)
    kv_target = _kv_target(cal, model, measured_at, base, notes, probe)
    # the activation that makes the measured items add up to the measured KV memory (vLLM's identity)
    without = probe(model, settings=replace(base, activation_bytes=0), **measured_at)
    activation = without.per_gpu.kv_cache_bytes - kv_target
    printed = m.get("activation")
    if printed is not None:
        slack = sum(i.step_bytes for i in m.values()) + 2 * (1 << 20)
        if abs(activation - printed.bytes) <= slack:
            notes.append(f"calibration: activation peak {activation / 2**30:.3f} GiB (logged {printed.logged}; "
                         "the logged items' rounding folded in so that they add up to the logged KV memory)")
        else:
            notes.append(f"calibration: the logged items do not add up to the logged KV memory "
                         f"({(activation - printed.bytes) / 2**30:+.2f} GiB): the logged activation "
                         f"{printed.logged} is used")
            activation = printed.bytes
    else:
        notes.append(f"calibration: activation peak {activation / 2**30:.3f} GiB = what the logged budget, weights"
                     + (", non-torch" if non_torch is not None else " (and kvplan's non-torch estimate)")
                     + " and KV memory leave")
    modelled = probe(model, settings=replace(base, non_torch_bytes=None), **measured_at)
    a0 = modelled.per_gpu.activation_bytes
    a1 = here.per_gpu.activation_bytes
    t0 = modelled.engine_defaults.get("max_num_batched_tokens")
    t1 = here.engine_defaults.get("max_num_batched_tokens")
    s0, s1 = modelled.engine_defaults.get("max_num_seqs"), here.engine_defaults.get("max_num_seqs")
    if (t0, s0) != (t1, s1) and a0 > 0:
        scaled = round(activation * a1 / a0)
        notes.append(f"calibration: activation scaled by vLLM's profile size (max_num_batched_tokens {t0:,} -> "
                     f"{t1:,}, max_num_seqs {s0} -> {s1}) with kvplan's activation model: "
                     f"{activation / 2**30:.2f} -> {scaled / 2**30:.2f} GiB")
        activation = scaled
    s = replace(case.settings, weights_bytes=weights, activation_bytes=max(activation, 0), non_torch_bytes=non_torch,
                cudagraph_bytes=graphs, model_runner=case.settings.model_runner or logged_runner,
                vllm_sampler=case.settings.vllm_sampler or c.vllm_sampler)
    if logged_runner and case.settings.model_runner is None:
        notes.append("calibration: Model Runner V2, as the log ran it")
    if s.gpu_memory_utilization is None and c.gpu_memory_utilization is not None:
        s = replace(s, gpu_memory_utilization=c.gpu_memory_utilization)
    used += ["weights", "activation"] + (["non_torch"] if non_torch is not None else []) + \
        (["cudagraph"] if graphs is not None else [])
    notes.insert(0, f"calibration: weights {m['weights'].logged}"
                 + (f", non-torch {m['non_torch'].logged}" if non_torch is not None else "")
                 + (f", CUDA graphs {m['cudagraph'].logged}" if graphs is not None else "")
                 + f" measured by {cal.engine} {cal.engine_version or ''}".rstrip() + f" on {cal.model}")
    return Calibrated(s, case.version, case.gpu_total, tuple(dict.fromkeys(used)), tuple(notes))


def _kv_target(cal: Any, model: Any, measured_at: dict[str, Any], base: Any, notes: list[str],
               probe: Callable[..., Any]) -> int:
    """The logged KV memory, narrowed to the logged block count where the log has one (``probe``: the planner,
    ``CalibrationCase.probe``)."""
    kv = cal.measured["kv_cache"]  # a MeasuredItem (kvplan.logs, not imported here)
    logged_bytes: int = kv.bytes
    step: int = kv.step_bytes
    low, high = logged_bytes - step // 2, logged_bytes + step // 2
    blocks: int | None = cal.num_gpu_blocks
    probe_bytes = 1 << 44
    probed = probe(model, settings=replace(base, kv_cache_memory_bytes=probe_bytes), **measured_at)
    if not probed.num_blocks:
        return logged_bytes
    per_block: int = probe_bytes // probed.num_blocks
    if blocks is None and cal.kv_cache_tokens and probed.block_size:
        # a single-group pool logs blocks x block_size tokens (vLLM <= 0.23)
        if (probed.kv_cache_tokens == probed.num_blocks * probed.block_size
                and cal.kv_cache_tokens % probed.block_size == 0):
            blocks = cal.kv_cache_tokens // probed.block_size
    if blocks is None or blocks <= 0:
        return logged_bytes
    lo, hi = max(low, blocks * per_block), min(high, (blocks + 1) * per_block - 1)
    if lo > hi:
        notes.append(f"calibration: the logged {blocks:,} blocks and {kv.logged} disagree by more than the "
                     "rounding; the logged memory is used")
        return logged_bytes
    notes.append(f"calibration: KV memory narrowed to {blocks:,} blocks x {per_block:,} B, within the logged "
                 f"{kv.logged}")
    return (lo + hi) // 2


LOG = LogReader(
    engine="vllm", title="vLLM", markers=MARKERS, read=read,
    sources=(("weights", ("weights", "weights_profile", "weights_summary", "weights_debug")),
             ("activation", ("activation", "activation_debug")),
             ("non_torch", ("non_torch", "non_torch_debug")),
             ("cudagraph", ("cudagraph", "cudagraph_estimate", "cudagraph_capture")),
             ("kv_cache", ("kv_cache", "kv_cache_error"))),
    finish=finish, implied_version=implied_version, logged_settings=logged_settings,
    carried=("gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs", "vllm_sampler"),
    profile_settings=("max_num_batched_tokens", "max_num_seqs"),
    calibrate=calibrate, startups=STARTUPS,
)
"""vLLM's log format for ``Engine.log``."""
