"""SGLang start-up logs (sgl-project/sglang, ``model_runner.py`` and ``memory_pool.py``), and how a
calibration from one applies.

"Load weight end. type=.., dtype=.., avail mem=F GB, mem usage=W GB." (free memory after the weights and
the weights' own usage); "KV Cache is allocated. #tokens: N, K size: X GB, V size: Y GB" (MLA pools:
"KV size: X GB"); "Memory pool end. avail mem=.."; "Capture cuda graph end. Time elapsed: .. mem usage=G GB";
the scheduler's "max_total_num_tokens=N, chunked_prefill_size=.., max_running_requests=.., context_len=L,
available_gpu_mem=.. GB"; the settings from "server_args=ServerArgs(model_path=.., mem_fraction_static=..,
tp_size=.., ...)". SGLang prints "GB" for ``bytes / (1 << 30)`` (``get_available_gpu_memory``): GiB.
The hierarchical cache's host pool (``mem_cache/pool_host/base.py`` ``HostKVCache.__init__``): "Allocating X GB
host memory for hierarchical KV cache." with X = bytes / 10^9 (decimal GB, unlike the lines above), per rank.
"""

from __future__ import annotations

import re

from kvplan.engines.log_format import (
    COUNT,
    NUMBER,
    Calibrated,
    CalibrationCase,
    Collector,
    Draft,
    Line,
    Logged,
    LogReader,
    LogSettings,
    kv_only,
    lazy_pattern,
    to_float,
    to_int,
)
from kvplan.record import replace

# Linear patterns (engines/log_format.py): a number is read whole where a run of digits starts; a pattern whose fields
# follow a marker far into the line ("Load weight end. ... avail mem=") is searched from the marker's first
# occurrence (``_after``), never with a lazy ".*?" tried again from every later occurrence.
_SIZE = NUMBER + r"\s*(GB|GiB|MB)"
MARKERS = ("KV Cache is allocated", "Load weight end", "server_args=ServerArgs", "max_total_num_tokens=",
           "Memory pool end", "sglang", "Capture cuda graph")
# printed once per launch by the main process (``entrypoints/engine.py::_launch_subprocesses``: "server_args=...")
STARTUPS = (lazy_pattern(r"server_args=ServerArgs\("),)

_AVAIL = lazy_pattern(r"avail mem=" + _SIZE + r"(?:, mem usage=" + _SIZE + ")?")
_LOAD_BEGIN = lazy_pattern(r"Load weight begin\. avail mem=" + _SIZE)
# before the token count was added (0.4.x): "KV Cache is allocated. K size: X GB, V size: Y GB." (no #tokens)
_KV = lazy_pattern(r"(?:#tokens:\s*" + COUNT + r", )?K size:\s*" + _SIZE + r", V size:\s*" + _SIZE)
_KV_MLA = lazy_pattern(r"#tokens:\s*" + COUNT + r", KV size:\s*" + _SIZE)
_KV_DTYPE = lazy_pattern(r"KV Cache is allocated\. dtype:\s*(?:torch\.)?(\w{1,32})")
_POOL_END = lazy_pattern(r"Memory pool end\. avail mem=" + _SIZE)
_MEM_USAGE = lazy_pattern(r"mem usage=" + _SIZE)
_SUMMARY = lazy_pattern(r"max_total_num_tokens=" + COUNT)
_CONTEXT = lazy_pattern(r"context_len=" + COUNT)
_RUNNING = lazy_pattern(r"max_running_requests=" + COUNT)
_PREFILL = lazy_pattern(r"max_prefill_tokens=" + COUNT)
_CHUNKED = lazy_pattern(r"chunked_prefill_size=(-?\d+)")
_AVAILABLE = lazy_pattern(r"available_gpu_mem=" + _SIZE)
# model_runner.py init_torch_distributed: "Init torch distributed ends. elapsed=.. s, mem usage=X GB" (the NCCL
# context and buffers, before the weights)
_INIT_DIST = lazy_pattern(r"Init torch distributed ends\.(?: elapsed=[\d.]+ s,)? mem usage=" + _SIZE)
# cuda_graph_runner.py: "Capture cuda graph begin/end. ... mem usage=G GB. avail mem=F GB."; later releases name the
# capture: "Capture piecewise CUDA graph end", "Capture target prefill CUDA graph end. elapsed=.., mem usage=..,
# avail mem=.." (one line per target)
_CAPTURE = lazy_pattern(r"Capture (cuda graph|piecewise CUDA graph|target (?:prefill|decode|extend|verify|draft) CUDA "
                        r"graph) (begin|end)\.")
_CAPTURE_NAMES = {"cuda graph": "cudagraph", "piecewise CUDA graph": "cudagraph_piecewise",
                  "target prefill CUDA graph": "cudagraph_prefill", "target decode CUDA graph": "cudagraph_decode"}
_AVAIL_ONLY = lazy_pattern(r"avail mem=" + _SIZE)
# hybrid models' mamba_cache.py / memory_pool.py: "Mamba Cache is allocated. max_mamba_cache_size: N, conv_state
# size: X GB, ssm_state size: Y GB"
_MAMBA = lazy_pattern(r"Mamba Cache is allocated\. max_mamba_cache_size: " + COUNT + r", conv_state size: " + _SIZE
                      + r", ssm_state size: " + _SIZE)
# model_loader: "#parameters (analytical): A B, #parameters (actual): P B" (billions)
_PARAMS = lazy_pattern(r"#parameters \(analytical\): (\d+(?:\.\d+)?) B, #parameters \(actual\): (\d+(?:\.\d+)?) B")
_HOST_POOL = lazy_pattern(r"Allocating (\d+(?:\.\d+)?) GB host memory for hierarchical KV cache")
_SERVER_ARGS = lazy_pattern(r"server_args=ServerArgs\((.*)")
_VERSION = lazy_pattern(r"sglang(?:==|\s{1,8}version[:=]?\s{0,8}v?)(\d+\.\d+[\w.]{0,32})", re.IGNORECASE)
# a key starts where a word starts (the look-behind): a 16 KB word is tried once, not from each of its letters
_PAIR = lazy_pattern(r"(?<!\w)(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,\s)]+)")
_ARGS = {"model_path": "model", "mem_fraction_static": "mem_fraction_static", "tp_size": "tp", "pp_size": "pp",
         "context_length": "max_model_len", "kv_cache_dtype": "kv_dtype", "dtype": "dtype",
         "chunked_prefill_size": "max_num_batched_tokens", "max_running_requests": "max_num_seqs",
         "page_size": "block_size", "disable_cuda_graph": "enforce_eager", "served_model_name": "served_model"}


def _after(marker: str, pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """``pattern`` searched from the first ``marker`` in ``text`` (None without one)."""
    at = text.find(marker)
    return pattern.search(text, at + len(marker)) if at >= 0 else None


def read(lines: list[Line], out: Collector) -> str:
    """Fill ``out`` from SGLang lines. A line that cannot be read is left out (and listed), never a reason to
    drop the log."""
    for line in lines:
        try:
            _read_line(line, out)
        except Exception as exc:  # noqa: BLE001 - one odd line must not cost the whole log
            out.skip(line.number, f"not read ({type(exc).__name__})")
    if "max_model_len" not in out.values and out.has("context_len"):
        out.values["max_model_len"] = out.values["context_len"]
    if gb := out.get("host_pool_gb"):
        out.notes.append(f"host KV tier (hierarchical cache): {gb} GB (10^9 B) of pinned host memory per rank")
    return "sglang"


def _read_line(line: Line, out: Collector) -> None:
    text = line.text
    if m := _after("Load weight end.", _AVAIL, text):
        out.put_size("free_after_weights", m.group(1), m.group(2), line)
        if m.group(3):
            out.put_size("weights", m.group(3), m.group(4), line)
    if "Load weight begin" in text and (m := _LOAD_BEGIN.search(text)):
        out.put_size("free_before_weights", m.group(1), m.group(2), line)
    if m := _after("KV Cache is allocated.", _KV, text):
        if m.group(1) is not None:
            out.put_int("kv_cache_tokens", m.group(1), line)
        out.put_size("k_size", m.group(2), m.group(3), line)
        out.put_size("v_size", m.group(4), m.group(5), line)
    elif m := _after("KV Cache is allocated.", _KV_MLA, text):
        out.put_int("kv_cache_tokens", m.group(1), line)
        out.put_size("kv_cache", m.group(2), m.group(3), line)
    if "KV Cache is allocated" in text and (m := _KV_DTYPE.search(text)):
        out.put("kv_dtype_logged", m.group(1), line)
    if "Memory pool end" in text and (m := _POOL_END.search(text)):
        out.put_size("free_after_kv", m.group(1), m.group(2), line)
    if "Capture " in text and (c := _CAPTURE.search(text)) and c.group(1) in _CAPTURE_NAMES:
        rest = text[c.end():]
        if c.group(2) == "begin":
            if m := _AVAIL_ONLY.search(rest):  # the first capture's: later ones begin after it
                out.put_size("free_before_graphs", m.group(1), m.group(2), line)
        else:
            if m := _MEM_USAGE.search(rest):
                out.put_size(_CAPTURE_NAMES[c.group(1)], m.group(1), m.group(2), line)
            if m := _AVAIL_ONLY.search(rest):
                out.put_size("free_after_capture", m.group(1), m.group(2), line)
    if "Init torch distributed" in text and (m := _INIT_DIST.search(text)):
        out.put_size("init_distributed", m.group(1), m.group(2), line)
    if "Mamba Cache is allocated" in text and (m := _MAMBA.search(text)):
        out.put_int("mamba_cache_slots", m.group(1), line)
        out.put_size("mamba_conv_state", m.group(2), m.group(3), line)
        out.put_size("mamba_ssm_state", m.group(4), m.group(5), line)
    if "#parameters" in text and (m := _PARAMS.search(text)):
        out.put("params_analytical_b", to_float(m.group(1)), line)
        out.put("params_actual_b", to_float(m.group(2)), line)
    if "max_total_num_tokens=" in text and (m := _SUMMARY.search(text)):
        out.put_int("kv_cache_tokens", m.group(1), line)
        if c := _CONTEXT.search(text):
            out.put_int("context_len", c.group(1), line)
        if p := _PREFILL.search(text):
            out.put_int("max_prefill_tokens", p.group(1), line)
        if r := _RUNNING.search(text):
            out.put_int("max_running_requests", r.group(1), line)
        if a := _AVAILABLE.search(text):
            out.put_size("free_after_graphs", a.group(1), a.group(2), line)
        if (c := _CHUNKED.search(text)) and (chunk := to_int(c.group(1))):  # -1 or 0: chunked prefill off
            out.put("max_num_batched_tokens", chunk, line)
    if "server_args=" in text and (m := _SERVER_ARGS.search(text)):
        for key, raw in _PAIR.findall(m.group(1)[:16384]):
            target = _ARGS.get(key)
            if target is None:
                continue
            value = raw.strip("'\"")
            if value in ("None", ""):
                continue
            if target in ("tp", "pp", "max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size"):
                if not (target == "max_num_batched_tokens" and value in ("-1", "0")):  # chunked prefill off
                    out.put_int(target, value, line)
            elif target == "mem_fraction_static":  # as logged: outside (0, 1] makes the log impossible (parse.py)
                out.put(target, to_float(value), line)
            elif target == "enforce_eager":
                out.put(target, value == "True", line)
            else:
                out.put(target, value[:1024], line)
    if "sglang" in text.lower() and (m := _VERSION.search(text)):
        out.put("engine_version", m.group(1), line)
    if "hierarchical KV cache" in text and (m := _HOST_POOL.search(text)):
        out.put("host_pool_gb", m.group(1), line)


def finish(d: Draft) -> None:
    """The pool's memory is logged as K and V sizes; the dtype on its own line when the args say 'auto'."""
    k, v = d.out.get("k_size"), d.out.get("v_size")
    if isinstance(k, Logged) and isinstance(v, Logged) and "kv_cache" not in d.memory:
        d.memory["kv_cache"] = Logged(k.bytes + v.bytes, k.step_bytes + v.step_bytes, f"K {k.text} + V {v.text}")
        d.line_of["kv_cache"] = d.out.line_of("k_size") or 0
    prefill, decode = d.out.get("cudagraph_prefill"), d.out.get("cudagraph_decode")
    if "cudagraph" not in d.memory and isinstance(prefill, Logged) and isinstance(decode, Logged):
        d.memory["cudagraph"] = Logged(prefill.bytes + decode.bytes, prefill.step_bytes + decode.step_bytes,
                                       f"prefill {prefill.text} + decode {decode.text}")
        d.derived.append("cudagraph")
        d.notes.append("CUDA graphs = the prefill and the decode captures' 'mem usage' (printed one per target)")
    if d.settings.kv_dtype in (None, "auto") and d.out.get("kv_dtype_logged"):
        d.settings = LogSettings(**{**d.settings.to_dict(), "kv_dtype": d.out.get("kv_dtype_logged")})


def calibrate(case: CalibrationCase) -> Calibrated:
    """Measured weights, and the memory outside them at SGLang's free-memory reading (kvplan's non-torch).

    SGLang sizes its pool as ``avail mem after the weights - T x (1 - mem_fraction_static)``
    (``profile_max_num_token``), where T, which it calls total_gpu_memory, is the free memory before the
    weights, least over the ranks (``ModelRunner.init_torch_distributed`` returns it). kvplan's SGLang
    budget takes T as total - non-torch, so the logged T is reproduced when the weights were measured."""
    m, notes, used, cal = case.cal.measured, case.notes, case.used, case.cal
    s = case.settings
    if "weights" in m:
        s = replace(s, weights_bytes=m["weights"].bytes)
        used.append("weights")
        notes.append(f"calibration: weights {m['weights'].logged} (measured)")
    if "free_after_weights" in m and "weights" in m:
        non_torch = case.total - m["weights"].bytes - m["free_after_weights"].bytes
        s = replace(s, non_torch_bytes=max(non_torch, 0))
        used.append("non_torch")
        notes.append(f"calibration: memory outside the weights before SGLang's free-memory reading "
                     f"{non_torch / 2**30:.2f} GiB (total - weights - logged avail mem)")
    if s.mem_fraction_static is None and cal.settings.mem_fraction_static is not None:
        s = replace(s, mem_fraction_static=cal.settings.mem_fraction_static)
        notes.append(f"calibration: mem_fraction_static {cal.settings.mem_fraction_static:g} as logged")
    if not used:
        return kv_only(case)
    return Calibrated(s, case.version, case.gpu_total, tuple(used), tuple(notes))


LOG = LogReader(engine="sglang", title="SGLang", markers=MARKERS, read=read, finish=finish,
                carried=("mem_fraction_static",), calibrate=calibrate, startups=STARTUPS)
"""SGLang's log format for ``Engine.log``."""
