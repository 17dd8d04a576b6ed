"""TensorRT-LLM start-up logs (NVIDIA/TensorRT-LLM, ``kvCacheManager.cpp`` and the PyTorch backend).

"[TensorRT-LLM][INFO] Allocated X GiB for max tokens in paged KV cache (N)."; "Number of tokens per
block: B."; the PyTorch backend's "Memory used ... total: T GiB, available: A GiB" (A: the free memory the
pool is sized from, after weights and the dry run); "Number of blocks in KV cache primary pool: N"; "[TensorRT-LLM]
TensorRT-LLM version: V". Releases up to 0.8 (the C++ runtime, ``kvCacheManager.cpp``): "Allocate N bytes for
k/v cache." and "Using N tokens in paged KV cache." (from about 0.9: "Using N total tokens in paged KV cache, and
B blocks per sequence"): NVIDIA/TensorRT-LLM#224, #1400. What the TensorRT engine takes ("Loaded engine size: X MiB",
whole MiB; "[MemUsageChange] Allocated X MiB for execution context memory."; "Allocated X MB GPU memory for runtime
buffers." and "... for decoder.", in ``MemoryCounters::bytesToString`` units: B, KB, MB, GB of 1024). The PyTorch
backend (1.0+, ``kvCacheManager.cpp``): "Max KV cache blocks per sequence: M [window size=W], tokens per block=T,
primary blocks=P, secondary blocks=S, max sequence length=L", one line per attention window, printed again for each
KV cache manager created: a first one for the estimation dry run, then the one that serves (its lines are read).

The PyTorch backend before 1.0 (``--backend pytorch``, 0.17 - 0.21; the releases' default was a prebuilt engine,
trtllm/variant.py) is told by its own lines: ``create_py_executor_instance``'s "max_seq_len=S, max_num_requests=B,
max_num_tokens=T", the estimation's "... in memory usage profiling" and "Estimated max tokens in KV cache"
(tensorrt_llm/_torch/pyexecutor/_util.py), PyExecutor's own; such a log is format ``trtllm-pytorch`` and is planned
with that backend (``logged_settings``). From 1.0 PyTorch is the default and the format stays ``trtllm``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.engines.log_format import (
    COUNT,
    NUMBER,
    Collector,
    Line,
    LogReader,
    exact_bytes,
    lazy_pattern,
)

if TYPE_CHECKING:
    from typing import Any

MARKERS = ("TensorRT-LLM", "for max tokens in paged KV cache", "[TRT-LLM]", "tensorrt_llm", "bytes for k/v cache",
           "tokens in paged KV cache")

# Linear patterns (engines/log_format.py): each after a literal, the number read whole. No start-up pattern: every MPI
# rank imports tensorrt_llm and prints the version line, so that line does not mark one start-up.
_ALLOCATED = lazy_pattern(r"Allocated " + NUMBER + r"\s*(GiB|GB|MiB|MB) for max tokens in paged KV cache \(" + COUNT
                          + r"\)")
_BLOCK = lazy_pattern(r"Number of tokens per block:\s*(\d+)")
_ALLOCATE_BYTES = lazy_pattern(r"Allocate " + COUNT + r" bytes for k/v cache")
_USING_TOKENS = lazy_pattern(r"Using " + COUNT + r" (?:total )?tokens in paged KV cache")
_PRIMARY = lazy_pattern(r"Number of blocks in KV cache primary pool:\s*" + COUNT)
_TOTAL = lazy_pattern(r"total:\s*" + NUMBER + r"\s*(GiB|GB), available:\s*" + NUMBER + r"\s*(GiB|GB)")
_VERSION = lazy_pattern(r"TensorRT[- ]LLM version:\s*v?(\d+\.\d+[\w.]{0,32})")
_ENGINE = lazy_pattern(r"Loaded engine size:\s*" + COUNT + r" MiB")
_CONTEXT = lazy_pattern(r"Allocated " + NUMBER + r"\s*(GiB|MiB|GB|MB|KB|B) for execution context memory")
_BUFFERS = lazy_pattern(r"Allocated " + NUMBER + r"\s*(GiB|MiB|GB|MB|KB|B) GPU memory for (runtime buffers|decoder)")
_WINDOW = lazy_pattern(r"\[window size=(\d{1,12})\], tokens per block=(\d{1,9}), primary blocks=(\d{1,15}), "
                       r"secondary blocks=(\d{1,15})")
_PYEXECUTOR = lazy_pattern(r"max_seq_len=\d{1,12}, max_num_requests=\d{1,12}, max_num_tokens=(\d{1,12})")
_PYEXECUTOR_TEXT = ("in memory usage profiling", "Estimated max tokens in KV cache", "PyExecutor")
PYTORCH_FORMAT = "trtllm-pytorch"
# the PyTorch flow (0.20, ``pyexecutor``): "Rank 0 uses 8.46 GB for model weights." (bytes / 2^30); the warning
# "Both free_gpu_memory_fraction and max_tokens are set (to F and N, respectively)" (N: the max_tokens the KV cache
# config holds, the estimate where trtllm-bench set it); "max_seq_len=.., max_num_requests=R, max_num_tokens=.."
_RANK_WEIGHTS = lazy_pattern(r"Rank (\d{1,6}) uses " + NUMBER + r" (GB|GiB) for model weights")
_MAX_TOKENS = lazy_pattern(r"Both free_gpu_memory_fraction and max_tokens are set \(to [\d.]+ and " + COUNT
                           + r", respectively\)")
_MAX_REQUESTS = lazy_pattern(r"\bmax_num_requests=" + COUNT)
_MAX_SEQ_LEN = lazy_pattern(r"\], tokens per block=\d+, primary blocks=\d+, secondary blocks=\d+, max sequence length="
                            + COUNT)
# the builder (TensorRT, ``[TRT] [I]``): "Total Weights Memory: N" and "Total Activation Memory: N" in bytes
_BUILD = lazy_pattern(r"Total (Weights|Activation) Memory: (\d{1,18})\b")
# 0.8 runtime: "[MemUsageChange] TensorRT-managed allocation in IExecutionContext creation: CPU +a, GPU +b, now: CPU c,
# GPU N (MiB)": what TensorRT holds once the execution context exists (the engine and its context)
_TRT_MANAGED = lazy_pattern(r"allocation in IExecutionContext creation: .{0,80}?now: CPU \d+, GPU (\d{1,12}) \(MiB\)")
# the same runtime's engine: "TensorRT-managed allocation in engine deserialization: CPU +a, GPU +N, now: ..." (MiB)
_DESERIALIZED = lazy_pattern(r"allocation in engine deserialization: CPU \+\d{1,12}, GPU \+(\d{1,12}),")
# 0.9 - 0.10 (kvCacheManager.cpp): "Max tokens in paged KV cache: N. Allocating B bytes." (tensorrtllm_backend#456)
_MAX_TOKENS_ALLOCATING = lazy_pattern(r"Max tokens in paged KV cache: " + COUNT + r"\. Allocating " + COUNT + r" bytes")
# the blocks one sequence can hold: "Max KV cache pages per sequence: N" (0.9+), "..., and B blocks per sequence" (0.8),
# "Max KV cache blocks per sequence: N [window size=W], ..." (the per-window line, 0.18+)
_PAGES_PER_SEQ = lazy_pattern(r"Max KV cache (?:pages|blocks) per sequence: " + COUNT)
_BLOCKS_PER_SEQ = lazy_pattern(r"tokens in paged KV cache, and " + COUNT + r" blocks per sequence")
_SECONDARY = lazy_pattern(r"Number of blocks in KV cache secondary pool:\s*" + COUNT)
# the PyTorch flow's profiling lines (1.x, tensorrt_llm/_torch/pyexecutor/_util.py): "Use X GB for model weights.",
# "Memory dynamically allocated during inference (inside torch) in memory usage profiling: X GiB", "Memory used
# outside torch (e.g., NCCL and CUDA graphs) in memory usage profiling: X GiB", "... device total memory X GiB"
_USE_WEIGHTS = lazy_pattern(r"\] Use " + NUMBER + r" (GB|GiB) for model weights")
_INFERENCE = lazy_pattern(r"Memory dynamically allocated during inference \(inside torch\) in memory usage "
                          r"profiling: " + NUMBER + r" (GiB|GB)")
_OUTSIDE = lazy_pattern(r"Memory used outside torch \(e\.g\., NCCL and CUDA graphs\) in memory usage profiling: "
                        + NUMBER + r" (GiB|GB)")
_DEVICE_TOTAL = lazy_pattern(r"device total memory " + NUMBER + r" (GiB|GB)")
_MAX_WINDOWS = 64  # attention windows kept per KV cache manager (a model has a few; a log is anyone's text)
DRY_RUN_NOTE = "the KV cache of the estimation dry run is left out: the KV cache manager created after it is read"
_DRY_RUN = ("kv_cache", "kv_cache_tokens", "num_gpu_blocks", "num_cpu_blocks")
"""What a KV cache manager logs: the estimation dry run's are replaced by the serving manager's."""


def read(lines: list[Line], out: Collector) -> str:
    """Fill ``out`` from TensorRT-LLM lines. A line that cannot be read is left out (and listed)."""
    windows: dict[int, tuple[int, int, Line]] = {}  # the current KV cache manager's pools: window -> blocks
    managers, allocated, pyexecutor, profiled = 0, False, False, False
    for line in lines:
        try:
            pyexecutor = pyexecutor or any(t in line.text for t in _PYEXECUTOR_TEXT) or (
                "max_num_requests=" in line.text and _PYEXECUTOR.search(line.text) is not None)
            if "primary blocks=" in line.text and (m := _WINDOW.search(line.text)):
                window = int(m.group(1))
                # a manager prints its windows' lines, then allocates: a line after the allocation (or a window
                # seen again) is the next manager's, and the one before was the dry run
                if windows and (allocated or window in windows):
                    managers += 1
                    windows, allocated = {}, False
                    _keep_dry_run_apart(out)
                if window in windows or len(windows) < _MAX_WINDOWS:
                    windows[window] = (int(m.group(3)), int(m.group(4)), line)
                out.put_int("block_size", m.group(2), line)
            pool_line = "for max tokens in paged KV cache" in line.text
            # the PyTorch flow (1.x) without window lines: an allocation after the profiling's "Peak memory during
            # memory usage profiling" line is the serving manager's, the one before it the estimation dry run's
            if pool_line and profiled and "kv_cache" in out.values:
                _keep_dry_run_apart(out)
                profiled, managers = False, managers + 1
            profiled = profiled or "Peak memory during memory usage profiling" in line.text
            allocated = allocated or pool_line
            _read_line(line, out)
        except Exception as exc:  # noqa: BLE001 - one odd line must not cost the whole log
            out.skip(line.number, f"not read ({type(exc).__name__})")
    if windows:
        _pools(windows, managers, out)
    elif managers:
        out.notes.append(DRY_RUN_NOTE)
    return PYTORCH_FORMAT if pyexecutor and _before_default(out) else "trtllm"


def _keep_dry_run_apart(out: Collector) -> None:
    """The estimation dry run's allocation, kept apart (``*_estimation``), and its manager's counts dropped."""
    for name in ("kv_cache", "kv_cache_tokens"):
        if name in out.values and f"{name}_estimation" not in out.values:
            out.values[f"{name}_estimation"] = out.values[name]
    for name in _DRY_RUN:
        out.values.pop(name, None)


def _before_default(out: Collector) -> bool:
    """The logged release is one whose default is a prebuilt engine (before 1.0), or none is logged."""
    from kvplan.engines.trtllm.variant import PYTORCH_DEFAULT_SINCE
    from kvplan.engines.version import parse_version

    logged = out.values.get("engine_version")
    if not logged:
        return True
    try:
        return parse_version(str(logged[0][1])) < PYTORCH_DEFAULT_SINCE
    except ValueError:
        return True


def logged_settings(fmt: str | None, version: str | None) -> dict[str, Any]:
    """The PyTorch backend, for a PyExecutor log at a release whose default is a prebuilt engine (before 1.0);
    nothing otherwise (from 1.0 it is the release's own backend)."""
    from kvplan.engines.trtllm.variant import FIELD, PYTORCH_DEFAULT_SINCE, PYTORCH_SINCE
    from kvplan.engines.version import parse_version

    if fmt != PYTORCH_FORMAT or not version:
        return {}
    try:
        release = parse_version(version)
    except ValueError:
        return {}
    return {FIELD: "pytorch"} if PYTORCH_SINCE <= release < PYTORCH_DEFAULT_SINCE else {}


def _pools(windows: dict[int, tuple[int, int, Line]], managers: int, out: Collector) -> None:
    """The serving manager's blocks, summed over its attention-window pools."""
    last = max((line for _, _, line in windows.values()), key=lambda line: line.number)
    out.values.pop("num_gpu_blocks", None)  # "Number of blocks in KV cache primary pool" counts one pool
    out.put("num_gpu_blocks", sum(p for p, _, _ in windows.values()), last)
    if (secondary := sum(s for _, s, _ in windows.values())) > 0:
        out.put("num_cpu_blocks", secondary, last)
    if len(windows) > 1:
        pools = [f"{p:,} (window {w:,})" for w, (p, _, _) in sorted(windows.items())]
        more = f" and {len(pools) - 8} more" if len(pools) > 8 else ""
        out.notes.append(f"KV blocks: the sum of {', '.join(pools[:8])}{more} primary blocks")
    if managers:
        out.notes.append(DRY_RUN_NOTE)


def _read_line(line: Line, out: Collector) -> None:
    text = line.text
    if "Loaded engine size" in text and (m := _ENGINE.search(text)):
        out.put_size("engine_size", m.group(1), "MiB", line)
    if "execution context memory" in text and (m := _CONTEXT.search(text)):
        out.put_size("execution_context", m.group(1), m.group(2), line)
    if "GPU memory for" in text and (m := _BUFFERS.search(text)):
        out.put_size(m.group(3).replace(" ", "_"), m.group(1), m.group(2), line)
    if m := _ALLOCATED.search(text):
        out.put_size("kv_cache", m.group(1), m.group(2), line)
        out.put_int("kv_cache_tokens", m.group(3), line)
    if m := _BLOCK.search(text):
        out.put_int("block_size", m.group(1), line)
    if "bytes for k/v cache" in text and (m := _ALLOCATE_BYTES.search(text)):
        out.put("kv_cache", exact_bytes(m.group(1)), line)
    if "tokens in paged KV cache" in text and (m := _USING_TOKENS.search(text)):
        out.put_int("kv_cache_tokens", m.group(1), line)
    if "primary pool" in text and (m := _PRIMARY.search(text)):
        out.put_int("num_gpu_blocks", m.group(1), line)
    if m := _TOTAL.search(text):
        out.put_size("total", m.group(1), m.group(2), line)
        out.put_size("free_before_kv", m.group(3), m.group(4), line)
    if "for model weights" in text and (m := _RANK_WEIGHTS.search(text)) and m.group(1) == "0":  # rank 0, as elsewhere
        out.put_size("weights", m.group(2), m.group(3), line)
    if "max_tokens are set" in text and (m := _MAX_TOKENS.search(text)):
        out.put_int("max_tokens", m.group(1), line)
    if "max_num_requests=" in text and (m := _MAX_REQUESTS.search(text)):
        out.put_int("max_running_requests", m.group(1), line)
        if m := _PYEXECUTOR.search(text):  # the executor's token budget: its max_num_tokens setting
            out.put_int("max_num_batched_tokens", m.group(1), line)
    if "max sequence length=" in text and (m := _MAX_SEQ_LEN.search(text)):
        out.put_int("max_model_len", m.group(1), line)
    if " Memory: " in text and (m := _BUILD.search(text)):
        out.put("build_" + m.group(1).lower(), exact_bytes(m.group(2)), line)
    if "IExecutionContext creation" in text and (m := _TRT_MANAGED.search(text)):
        out.put_size("trt_managed", m.group(1), "MiB", line)
    if "engine deserialization" in text and (m := _DESERIALIZED.search(text)):
        out.put_size("engine_size", m.group(1), "MiB", line)  # after "Loaded engine size" where both are printed
    if "Allocating" in text and (m := _MAX_TOKENS_ALLOCATING.search(text)):
        out.put_int("kv_cache_tokens", m.group(1), line)
        out.put("kv_cache", exact_bytes(m.group(2)), line)
    if "per sequence" in text and (m := _PAGES_PER_SEQ.search(text) or _BLOCKS_PER_SEQ.search(text)):
        out.put_int("max_blocks_per_seq", m.group(1), line)
    if "secondary pool" in text and (m := _SECONDARY.search(text)):
        out.put_int("num_cpu_blocks", m.group(1), line)
    if "for model weights" in text and (m := _USE_WEIGHTS.search(text)):
        out.put_size("weights", m.group(1), m.group(2), line)
    if "in memory usage profiling" in text:
        if m := _INFERENCE.search(text):
            out.put_size("activation", m.group(1), m.group(2), line)
        if m := _OUTSIDE.search(text):
            out.put_size("non_torch", m.group(1), m.group(2), line)
    if "device total memory" in text and (m := _DEVICE_TOTAL.search(text)):
        out.put_size("total", m.group(1), m.group(2), line)
    if m := _VERSION.search(text):
        out.put("engine_version", m.group(1), line)


LOG = LogReader(engine="trtllm", title="TensorRT-LLM", markers=MARKERS, read=read, logged_settings=logged_settings)
"""TensorRT-LLM's log format for ``Engine.log``: a calibration from it carries the KV-cache memory only."""
