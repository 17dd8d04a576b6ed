"""vLLM start-up logs, V0 and V1, as the releases printed them; how a calibration from one applies.

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
- Host KV tier: V0 "# CPU blocks: M" (swap space, per GPU); 0.19+ ``VLLM_USE_SIMPLE_KV_OFFLOAD``
  (``vllm/v1/simple_kv_offload/manager.py``) "SimpleCPUOffloadScheduler: Allocating N CPU blocks (X GB, mode=..)"
  (0.33: "N offload blocks"; X = per-rank bytes / 2^30); native CPU offloading 0.33
  (``kv_offload/cpu/shared_offload_region.py``) "Created mmap file PATH (X GB)" (bytes / 10^9, the whole region).
  The native connector before 0.33 prints no size, but "Allocating N CPU tensors..." (0.11-0.33, per worker) and
  at DEBUG each tensor ("Allocating CPU tensor of shape [..]" 0.11-0.19, in the KV dtype; "torch.zeros pinned
  tensor A×B" 0.20-0.26, int8): the pinned bytes (``engines/vllm/pinned.py``). kvplan shows them in the notes.
- Settings: "Initializing a V1 LLM engine (v0.10.2) with config: model='..', dtype=.., max_seq_len=..,
  tensor_parallel_size=.., kv_cache_dtype=.." and "non-default args: {...}" (``utils.py``).
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvplan.logs.core import Line, Logged, exact_bytes, logged_size, to_float, to_int
from kvplan.logs.model import Collector
from kvplan.logs.reader import Draft, LogReader

if TYPE_CHECKING:
    from kvplan.logs.calibration import Calibrated, Calibration, CalibrationCase

_NUM = r"(-?[\d,]*\.?\d+)"
_SIZE = _NUM + r"\s*(GiB|GB|MiB|MB)"

MARKERS = ("GPU KV cache size", "GPU blocks:", "cuda blocks:", "CUDA blocks:", "Memory profiling",
           "Available KV cache memory",
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
_BLOCKS = re.compile(r"#?\s*(?:GPU|cuda|CUDA) blocks:\s*([\d,]+)")  # 0.8.5 executor_base.py: "# CUDA blocks"
_CPU_BLOCKS = re.compile(r"#\s*CPU blocks:\s*([\d,]+)")
_SIMPLE_BLOCKS = re.compile(r"SimpleCPUOffloadScheduler: Allocating ([\d,]+) (?:CPU|offload) blocks \(([\d.]+) GB")
_MMAP_REGION = re.compile(r"Created mmap file \S+ \(([\d.]+) GB\)")
_CPU_TENSORS = re.compile(r"Allocating ([\d,]+) CPU tensors")
_CPU_TENSOR_SIZE = re.compile(r"Allocating CPU tensor of shape \[([\d,\s]+)\]"
                              r"|torch\.zeros pinned tensor (\d+)\s*[×x]\s*(\d+)")
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
    "max_num_batched_tokens", "max model len", "device_name=", "num_gpu_blocks", "weights memory", "weights take",
    "offload blocks", "CPU blocks", "mmap file", "CPU tensor", "pinned tensor")))


def read(lines: list[Line], out: Collector) -> str:
    """Fill ``out`` from vLLM lines; returns the format name."""
    fmt = "vllm"
    tensor_sizes: dict[int | None, list[tuple[int, bool]]] = {}  # per rank: (bytes, or elements where True)
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
        if (m := _BLOCKS.search(text)) and ("GPU blocks" in text or "cuda blocks" in text or "CUDA blocks" in text):
            out.put("num_gpu_blocks", to_int(m.group(1)), line)
        if m := _CPU_BLOCKS.search(text):
            out.put("host_tier", ("vLLM V0 swap space", to_int(m.group(1)), None, None), line)
        elif m := _SIMPLE_BLOCKS.search(text):
            out.put("host_tier", ("SimpleCPUOffloadConnector", to_int(m.group(1)), m.group(2) + " GiB per rank",
                                  None), line)
        elif m := _MMAP_REGION.search(text):
            out.put("host_tier", ("native CPU offloading", None, None, m.group(1) + " GB (10^9 B) mmap region"), line)
        if m := _CPU_TENSORS.search(text):
            out.put("cpu_tensors", to_int(m.group(1)), line)
        elif (m := _CPU_TENSOR_SIZE.search(text)) and len(seen := tensor_sizes.setdefault(line.rank, [])) < 4096:
            dims = [int(d) for d in m.group(1).split(",")] if m.group(1) else [int(m.group(2)), int(m.group(3))]
            seen.append((math.prod(dims[:8]), bool(m.group(1))))
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
    tier = out.get("host_tier")
    if (count := out.get("cpu_tensors")) is not None:
        tier = tier or ("native CPU offloading", None, None, None)
        tier = (*tier[:3], ", ".join(p for p in (tier[3], _tensors_said(count, tensor_sizes, out)) if p))
    if tier:
        out.notes.append(host_tier_note(*tier))
    return fmt


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


# --------------------------------------------------------------------------------- items in combination

def finish(d: Draft) -> None:
    """Items vLLM prints only in combination, worked out (and said), and the budget its utilization implies."""
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
    in_use = d.out.get("kv_cache_in_use")
    if isinstance(in_use, Logged):  # the after-capture summary prints the pool exactly (or to more digits)
        available = memory.get("kv_cache")
        if available is None or (in_use.step_bytes < available.step_bytes
                                 and abs(in_use.bytes - available.bytes) <= available.step_bytes):
            memory["kv_cache"] = in_use
            d.line_of["kv_cache"] = d.out.line_of("kv_cache_in_use") or 0
    if "cudagraph" in memory and "cudagraph_estimate" not in memory:
        d.notes.append("CUDA graphs were captured after the KV cache was sized (vLLM before v0.21 does not "
                       "subtract them from the KV budget)")


def implied_version(fmt: str | None) -> tuple[str, str] | None:
    """The release a format without a version line implies: the V0 and 0.7 profile summaries."""
    if fmt not in ("vllm-v0-profile", "vllm-0.7-profile"):
        return None
    version = "0.6" if fmt == "vllm-v0-profile" else "0.7"
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
    import kvplan
    from kvplan.logs.calibration import Calibrated, kv_only

    cal, model, here, notes, used = case.cal, case.model, case.here, case.notes, case.used
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
    base = kvplan.Settings(gpu_memory_utilization=util, max_num_batched_tokens=c.max_num_batched_tokens,
                           max_num_seqs=c.max_num_seqs, enforce_eager=bool(c.enforce_eager), weights_bytes=weights,
                           non_torch_bytes=non_torch, cudagraph_bytes=graphs)
    kv_target = _kv_target(cal, model, measured_at, base, notes)
    # the activation that makes the measured items add up to the measured KV memory (vLLM's identity)
    without = kvplan.max_batch(model, settings=replace(base, activation_bytes=0), **measured_at)
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
    modelled = kvplan.max_batch(model, settings=replace(base, non_torch_bytes=None), **measured_at)
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
                cudagraph_bytes=graphs)
    if s.gpu_memory_utilization is None and c.gpu_memory_utilization is not None:
        s = replace(s, gpu_memory_utilization=c.gpu_memory_utilization)
    used += ["weights", "activation"] + (["non_torch"] if non_torch is not None else []) + \
        (["cudagraph"] if graphs is not None else [])
    notes.insert(0, f"calibration: weights {m['weights'].logged}"
                 + (f", non-torch {m['non_torch'].logged}" if non_torch is not None else "")
                 + (f", CUDA graphs {m['cudagraph'].logged}" if graphs is not None else "")
                 + f" measured by {cal.engine} {cal.engine_version or ''}".rstrip() + f" on {cal.model}")
    return Calibrated(s, case.version, case.gpu_total, tuple(dict.fromkeys(used)), tuple(notes))


def _kv_target(cal: Calibration, model: Any, measured_at: dict[str, Any], base: Any,
               notes: list[str]) -> int:
    """The logged KV memory, narrowed to the logged block count where the log has one."""
    import kvplan

    kv = cal.measured["kv_cache"]
    low, high = kv.bytes - kv.step_bytes // 2, kv.bytes + kv.step_bytes // 2
    blocks = cal.num_gpu_blocks
    probe_bytes = 1 << 44
    probe = kvplan.max_batch(model, settings=replace(base, kv_cache_memory_bytes=probe_bytes), **measured_at)
    if not probe.num_blocks:
        return kv.bytes
    per_block = probe_bytes // probe.num_blocks
    if blocks is None and cal.kv_cache_tokens and probe.block_size:
        # a single-group pool logs blocks x block_size tokens (vLLM <= 0.23)
        if probe.kv_cache_tokens == probe.num_blocks * probe.block_size and cal.kv_cache_tokens % probe.block_size == 0:
            blocks = cal.kv_cache_tokens // probe.block_size
    if blocks is None or blocks <= 0:
        return kv.bytes
    lo, hi = max(low, blocks * per_block), min(high, (blocks + 1) * per_block - 1)
    if lo > hi:
        notes.append(f"calibration: the logged {blocks:,} blocks and {kv.logged} disagree by more than the "
                     "rounding; the logged memory is used")
        return kv.bytes
    notes.append(f"calibration: KV memory narrowed to {blocks:,} blocks x {per_block:,} B, within the logged "
                 f"{kv.logged}")
    return (lo + hi) // 2


LOG = LogReader(
    engine="vllm", title="vLLM", markers=MARKERS, read=read,
    sources=(("weights", ("weights", "weights_summary", "weights_debug")),
             ("activation", ("activation", "activation_debug")),
             ("non_torch", ("non_torch", "non_torch_debug")),
             ("cudagraph", ("cudagraph", "cudagraph_estimate", "cudagraph_capture")),
             ("kv_cache", ("kv_cache", "kv_cache_error"))),
    finish=finish, implied_version=implied_version,
    carried=("gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs"),
    profile_settings=("max_num_batched_tokens", "max_num_seqs"),
    calibrate=calibrate,
)
"""vLLM's log format for ``Engine.log``."""
