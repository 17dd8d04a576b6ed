"""llama.cpp start-up logs (ggml-org/llama.cpp: ``llama-context.cpp``, ``llama-kv-cache*.cpp``, ggml-cuda).

Newer builds: "llama_context: n_ctx = N", "llama_kv_cache[_unified[_iswa]]: size = X MiB (C cells, L layers,
S/S seqs), K (f16): .. MiB, V (f16): .. MiB" (one line per cache: a SWA model prints two);
older builds: "llama_kv_cache_init: kv_size = N, offload = 1, type_k = 'q8_0', type_v = 'q8_0', n_layer = L",
"llama_new_context_with_model: KV self size = X MiB, K (q8_0): .., V (q8_0): ..". Per device:
"CUDA0 KV buffer size = X MiB" (one per cache: a SWA model prints two on one device), "CUDA0 model buffer size"
(before about b3700: "llm_load_tensors: CUDA0 buffer size", and "CPU buffer size" for the part in host memory),
"CUDA0 compute buffer size", a recurrent model's "llama_memory_recurrent: CUDA0 RS buffer size". GPU:
"Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9" (ggml_cuda_init).
"""

from __future__ import annotations

from kvplan.engines.log_format import (
    NUMBER,
    Collector,
    Draft,
    Line,
    Logged,
    LogReader,
    exact_bytes,
    lazy_pattern,
    logged_size,
)

MARKERS = ("llama_kv_cache", "llama_context", "llama_new_context_with_model", "llama_model_loader", "ggml_",
           "llm_load", "load_tensors", "print_info")
# once per start (``common/common.cpp``: "build: N (commit) with ..." is the first line llama-server prints)
STARTUPS = (lazy_pattern(r"^build: \d+ \("),)

# Linear patterns (engines/log_format.py): each after a literal, with bounded runs where a field is free text.
_MIB = NUMBER + r" MiB"
_SIZE_LINE = lazy_pattern(r"llama_kv_cache\w{0,32}:\s+size =\s*" + _MIB + r" \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)"
                          r"(?:/\s*(\d+))? seqs\), K \((\w+)\):\s*" + _MIB + r", V \((\w+)\):\s*" + _MIB)
_SELF_SIZE = lazy_pattern(r"KV self size\s*=\s*" + _MIB + r", K \((\w+)\):\s*" + _MIB + r", V \((\w+)\):\s*" + _MIB)
_INIT = lazy_pattern(r"kv_size = (\d+), offload = \d+, type_k = '(\w+)', type_v = '(\w+)', n_layer = (\d+)")
# llama_kv_cache_iswa (2025+): "creating non-SWA KV cache, size = N cells" / "creating     SWA KV cache, size = N cells",
# before each cache's size line
_ISWA = lazy_pattern(r"creating\s+(non-SWA|SWA) KV cache, size = (\d{1,12}) cells")
# llama-server: "new slot id_slot=0 n_ctx_slot=N" (the context one request may fill: n_ctx / slots)
_SLOT = lazy_pattern(r"new slot id_slot=0 n_ctx_slot=(\d{1,12})\b")
_N_CTX = lazy_pattern(r"^(?:llama_context|llama_new_context_with_model):\s+n_ctx\s*=\s*(\d+)")
# no kind: the weights (llm_load_tensors before the word "model" was added)
_DEVICE_BUF = lazy_pattern(r"\b(CUDA\d{1,4}|ROCm\d{1,4}|Metal|Vulkan\d{1,4}|SYCL\d{1,4})\s+(?:(KV|RS|model|compute) )?"
                           r"buffer size =\s*" + _MIB)
_DEVICE_ITEM = {"KV": "kv_cache", "RS": "recurrent_state", None: "weights", "model": "weights",
                "compute": "activation"}
# buffers in host memory: the part of the weights left on the CPU (CPU_Mapped: mmap'd), pinned staging (CUDA_Host)
_HOST_BUF = lazy_pattern(r"\b(CPU|CPU_Mapped|CUDA_Host|CPU_REPACK)\s+(?:(KV|model|compute|output) )?buffer size =\s*"
                         + _MIB)
_HOST_KEY = {"KV": "kv_host", None: "weights_host", "model": "weights_host", "compute": "compute_host",
             "output": "output_host"}
_PER_DEVICE_KV = 8  # KV buffers summed per device (a SWA model prints two; a draft model's context more)
# ggml-cuda (ggml_backend_cuda_device_get_memory, NVML builds): "... free: 11490947072 total: 12884901888" in bytes
_NVML = lazy_pattern(r"NVML memory reporting free: (\d{1,18}) total: (\d{1,18})")
# llama_model_load_from_file_impl: "using device CUDA0 (NVIDIA GeForce RTX 3060) (0000:01:00.0) - 10958 MiB free"
_FREE_AT_LOAD = lazy_pattern(r"using device (\w{1,64}) \([^)]{1,200}\)[^-]{0,64}- (\d{1,12}) MiB free")
_DEVICE = lazy_pattern(r"Device (\d{1,4}): ([^,]{1,200}), compute capability")
_USING = lazy_pattern(r"using device (\w+) \(([^)]{1,200})\)")
_NAME = lazy_pattern(r"general\.name\s+(?:str\s+)?=\s*(.+)$")
_BUILD = lazy_pattern(r"^build: (\d{1,18}) \((\w+)\)")


def read(lines: list[Line], out: Collector) -> str:
    """Fill ``out`` from llama.cpp lines. A line that cannot be read is left out (and listed)."""
    state = _State()
    for line in lines:
        try:
            _read_line(line, out, state)
        except Exception as exc:  # noqa: BLE001 - one odd line must not cost the whole log
            out.skip(line.number, f"not read ({type(exc).__name__})")
    caches, sums, devices, per_device = state.caches, state.sums, state.devices, state.per_device
    if caches:
        total = sum(c.bytes for c in caches)
        step = max(c.step_bytes for c in caches)
        text = " + ".join(c.text for c in caches)
        out.values["kv_cache"] = [(None, Logged(total, step * len(caches), text), out.line_of("kv_line") or 0)]
    for key in ("weights", "activation"):
        if key in sums:
            n = len(devices[key])
            out.values[key] = [(None, Logged(sums[key], (1 << 20) // 100 * n,
                                             f"{sums[key] / (1 << 20):.2f} MiB over {n} device(s)"),
                                out.line_of(f"{key}_line") or 0)]
    if "kv_cache" not in out.values and "kv_device" in sums:
        out.values["kv_cache"] = [(None, Logged(sums["kv_device"], state.steps["kv_device"], "KV buffers"),
                                   out.line_of("kv_device_line") or 0)]
    if "recurrent_state" in sums:
        total = sums["recurrent_state"]
        out.values["recurrent_state"] = [(None, Logged(total, state.steps["recurrent_state"],
                                                       f"{total / (1 << 20):.2f} MiB"),
                                          out.line_of("recurrent_state_line") or 0)]
    if len({name.split(" ")[0] for name in per_device}) > 1:
        out.notes.append("the KV cache is split over devices (" + ", ".join(per_device) + "); the waterfall "
                         "shows the whole cache")
    for name, (total, step) in state.halves.items():
        out.values[name] = [(None, Logged(total, step, f"{total / (1 << 20):.2f} MiB"), out.line_of("kv_line") or 0)]
    for name, (size, number) in state.host.items():
        out.values[name] = [(None, size, number)]
    if state.k_type:
        kv_dtype = state.k_type if state.k_type == state.v_type else f"{state.k_type}/{state.v_type}"
        out.values["kv_dtype"] = [(None, kv_dtype, 0)]
    if "cells" in out.values and "max_model_len" not in out.values:
        out.values["max_model_len"] = out.values["cells"]
    return "llamacpp"


class _State:
    def __init__(self) -> None:
        self.caches: list[Logged] = []
        self.k_type: str | None = None
        self.v_type: str | None = None
        self.sums: dict[str, int] = {}
        self.devices: dict[str, set[str]] = {}
        self.per_device: list[str] = []
        self.halves: dict[str, tuple[int, int]] = {}  # k_size / v_size: bytes summed over the caches, step
        self.host: dict[str, tuple[Logged, int]] = {}
        self.kv_lines: dict[tuple[str, str], int] = {}  # (key, device) -> buffers summed
        self.steps: dict[str, int] = {}  # rounding of a sum of several buffers
        self.next_cache: str | None = None  # "cells" / "cells_swa": the cache the iSWA "creating" line announced


def _cache(number: str, line: Line, out: Collector, state: _State) -> None:
    size = logged_size(number, "MiB")
    if size is None:
        out.skip(line.number, f"'{number[:24]} MiB' is not a size kvplan reads")
    elif len(state.caches) < 8:
        state.caches.append(size)


def _half(name: str, number: str, line: Line, state: _State) -> None:
    """K or V of one cache line; a SWA model prints two caches, whose halves add up."""
    size = logged_size(number, "MiB")
    if size is not None and len(state.caches) <= 8:
        total, step = state.halves.get(name, (0, 0))
        state.halves[name] = (total + size.bytes, step + size.step_bytes)


def _device_buffer(device: str, item: str, number: str, line: Line, out: Collector, state: _State) -> None:
    """One device's buffer: kept as printed (per device), and summed into its item: the weights and the compute
    buffer once per device, every KV buffer of a device (a SWA model's two caches), every recurrent-state buffer."""
    size = logged_size(number, "MiB")
    if size is None:
        out.skip(line.number, f"'{number[:24]} MiB' is not a size kvplan reads")
        return
    out.put_device(device, item, size, line)
    key = "kv_device" if item == "kv_cache" else item
    seen = state.devices.setdefault(key, set())
    if item in ("kv_cache", "recurrent_state"):
        count = state.kv_lines.get((key, device), 0)
        if count >= _PER_DEVICE_KV or (device not in seen and len(seen) >= 64):
            return
        state.kv_lines[(key, device)] = count + 1
        state.steps[key] = state.steps.get(key, 0) + size.step_bytes
    elif device in seen or len(seen) >= 64:
        return
    seen.add(device)
    state.sums[key] = state.sums.get(key, 0) + size.bytes
    if key == "kv_device":
        state.per_device.append(f"{device} {size.text}")
    out.put(f"{key}_line", line.number, line)


def _read_line(line: Line, out: Collector, state: _State) -> None:
    text = line.text
    if m := _SIZE_LINE.search(text):
        _cache(m.group(1), line, out, state)
        _half("k_size", m.group(7), line, state)
        _half("v_size", m.group(9), line, state)
        cells = state.next_cache or ("cells" if not out.has("cells") else "cells_swa")
        out.put_int(cells, m.group(2), line)
        state.next_cache = None
        state.k_type, state.v_type = m.group(6), m.group(8)
        out.put("kv_line", line.number, line)
    elif m := _SELF_SIZE.search(text):
        _cache(m.group(1), line, out, state)
        _half("k_size", m.group(3), line, state)
        _half("v_size", m.group(5), line, state)
        state.k_type, state.v_type = m.group(2), m.group(4)
        out.put("kv_line", line.number, line)
    if m := _INIT.search(text):
        out.put_int("cells", m.group(1), line)
        state.k_type, state.v_type = m.group(2), m.group(3)
    if "KV cache, size =" in text and (m := _ISWA.search(text)):
        state.next_cache = "cells" if m.group(1) == "non-SWA" else "cells_swa"
        out.put_int(state.next_cache, m.group(2), line)
    if "n_ctx_slot=" in text and (m := _SLOT.search(text)):
        out.put_int("ctx_per_slot", m.group(1), line)
    if m := _N_CTX.search(text):
        out.put_int("max_model_len", m.group(1), line)
    if "buffer size" in text and (m := _DEVICE_BUF.search(text)):
        _device_buffer(m.group(1), _DEVICE_ITEM[m.group(2)], m.group(3), line, out, state)
    if "buffer size" in text and (m := _HOST_BUF.search(text)):
        key = _HOST_KEY[m.group(2)]
        if (size := logged_size(m.group(3), "MiB")) is not None and key not in state.host:
            state.host[key] = (size, line.number)
    if "NVML" in text and (m := _NVML.search(text)):
        out.put("total", exact_bytes(m.group(2)), line)
        out.put("free_at_start", exact_bytes(m.group(1)), line)
    if "MiB free" in text and (m := _FREE_AT_LOAD.search(text)):
        out.put_size("free_at_load", m.group(2), "MiB", line)
        if (free := logged_size(m.group(2), "MiB")) is not None:
            out.put_device(m.group(1), "free_at_load", free, line)
    if m := _DEVICE.search(text):
        if m.group(1) == "0":
            out.put("gpu_name", m.group(2).strip(), line)
    elif m := _USING.search(text):
        out.put("gpu_name", m.group(2).strip(), line)
    if m := _NAME.search(text):
        out.put("model_name", m.group(1).strip()[:200], line)
    if m := _BUILD.search(text):
        out.put("engine_version", f"b{m.group(1)}", line)


def finish(d: Draft) -> None:
    """llama.cpp logs cells, not tokens, and names the model only by its GGUF display name."""
    if d.settings.model is None and d.out.get("model_name"):
        d.notes.append(f"the GGUF's general.name is '{d.out.get('model_name')}' (a display name, not a model id): "
                       "pass --model to compare")
    d.tokens = d.out.get("cells")


LOG = LogReader(engine="llamacpp", title="llama.cpp", markers=MARKERS, read=read, finish=finish,
                startups=STARTUPS)
"""llama.cpp's log format for ``Engine.log``: a calibration from it carries the KV-cache memory only."""
