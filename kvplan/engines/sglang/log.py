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
from dataclasses import replace
from typing import TYPE_CHECKING

from kvplan.logs.core import Line, Logged, logged_size, to_float, to_int
from kvplan.logs.model import Collector, LogSettings
from kvplan.logs.reader import Draft, LogReader

if TYPE_CHECKING:
    from kvplan.logs.calibration import Calibrated, CalibrationCase

_SIZE = r"(-?[\d.]+)\s*(GB|GiB|MB)"
MARKERS = ("KV Cache is allocated", "Load weight end", "server_args=ServerArgs", "max_total_num_tokens=",
           "Memory pool end", "sglang", "Capture cuda graph")

_LOAD_END = re.compile(r"Load weight end\..*?avail mem=" + _SIZE + r"(?:, mem usage=" + _SIZE + ")?")
_LOAD_BEGIN = re.compile(r"Load weight begin\. avail mem=" + _SIZE)
_KV = re.compile(r"KV Cache is allocated\..*?#tokens:\s*([\d,]+), K size:\s*" + _SIZE + r", V size:\s*" + _SIZE)
_KV_MLA = re.compile(r"KV Cache is allocated\..*?#tokens:\s*([\d,]+), KV size:\s*" + _SIZE)
_KV_DTYPE = re.compile(r"KV Cache is allocated\. dtype:\s*(?:torch\.)?(\w+)")
_POOL_END = re.compile(r"Memory pool end\. avail mem=" + _SIZE)
_GRAPH_END = re.compile(r"Capture cuda graph end\..*?mem usage=" + _SIZE)
_SUMMARY = re.compile(r"max_total_num_tokens=([\d,]+)")
_CONTEXT = re.compile(r"context_len=([\d,]+)")
_RUNNING = re.compile(r"max_running_requests=([\d,]+)")
_CHUNKED = re.compile(r"chunked_prefill_size=(-?[\d,]+)")
_AVAILABLE = re.compile(r"available_gpu_mem=" + _SIZE)
_HOST_POOL = re.compile(r"Allocating ([\d.]+) GB host memory for hierarchical KV cache")
_SERVER_ARGS = re.compile(r"server_args=ServerArgs\((.*)")
_VERSION = re.compile(r"sglang(?:==|\s+version[:=]?\s*v?)(\d+\.\d+[\w.]*)", re.IGNORECASE)
_PAIR = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,\s)]+)")
_ARGS = {"model_path": "model", "mem_fraction_static": "mem_fraction_static", "tp_size": "tp", "pp_size": "pp",
         "context_length": "max_model_len", "kv_cache_dtype": "kv_dtype", "dtype": "dtype",
         "chunked_prefill_size": "max_num_batched_tokens", "max_running_requests": "max_num_seqs",
         "page_size": "block_size", "disable_cuda_graph": "enforce_eager", "served_model_name": "served_model"}


def read(lines: list[Line], out: Collector) -> str:
    for line in lines:
        text = line.text
        if m := _LOAD_END.search(text):
            out.put("free_after_weights", logged_size(m.group(1), m.group(2)), line)
            if m.group(3):
                out.put("weights", logged_size(m.group(3), m.group(4)), line)
        if m := _LOAD_BEGIN.search(text):
            out.put("free_before_weights", logged_size(m.group(1), m.group(2)), line)
        if m := _KV.search(text):
            out.put("kv_cache_tokens", to_int(m.group(1)), line)
            out.put("k_size", logged_size(m.group(2), m.group(3)), line)
            out.put("v_size", logged_size(m.group(4), m.group(5)), line)
        elif m := _KV_MLA.search(text):
            out.put("kv_cache_tokens", to_int(m.group(1)), line)
            out.put("kv_cache", logged_size(m.group(2), m.group(3)), line)
        if m := _KV_DTYPE.search(text):
            out.put("kv_dtype_logged", m.group(1), line)
        if m := _POOL_END.search(text):
            out.put("free_after_kv", logged_size(m.group(1), m.group(2)), line)
        if m := _GRAPH_END.search(text):
            out.put("cudagraph", logged_size(m.group(1), m.group(2)), line)
        if m := _SUMMARY.search(text):
            out.put("kv_cache_tokens", to_int(m.group(1)), line)
            if c := _CONTEXT.search(text):
                out.put("context_len", to_int(c.group(1)), line)
            if r := _RUNNING.search(text):
                out.put("max_running_requests", to_int(r.group(1)), line)
            if a := _AVAILABLE.search(text):
                out.put("free_after_graphs", logged_size(a.group(1), a.group(2)), line)
            if c := _CHUNKED.search(text):
                out.put("max_num_batched_tokens", to_int(c.group(1)), line)
        if m := _SERVER_ARGS.search(text):
            for key, raw in _PAIR.findall(m.group(1)[:16384]):
                target = _ARGS.get(key)
                if target is None:
                    continue
                value = raw.strip("'\"")
                if value in ("None", ""):
                    continue
                if target in ("tp", "pp", "max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size"):
                    out.put(target, to_int(value), line)
                elif target == "mem_fraction_static":
                    f = to_float(value)
                    out.put(target, f if f is not None and 0 < f <= 1 else None, line)
                elif target == "enforce_eager":
                    out.put(target, value == "True", line)
                else:
                    out.put(target, value, line)
        if m := _VERSION.search(text):
            out.put("engine_version", m.group(1), line)
        if m := _HOST_POOL.search(text):
            out.put("host_pool_gb", m.group(1), line)
    if "max_model_len" not in out.values and out.has("context_len"):
        out.values["max_model_len"] = out.values["context_len"]
    if gb := out.get("host_pool_gb"):
        out.notes.append(f"host KV tier (hierarchical cache): {gb} GB (10^9 B) of pinned host memory per rank")
    return "sglang"


def finish(d: Draft) -> None:
    """The pool's memory is logged as K and V sizes; the dtype on its own line when the args say 'auto'."""
    k, v = d.out.get("k_size"), d.out.get("v_size")
    if isinstance(k, Logged) and isinstance(v, Logged) and "kv_cache" not in d.memory:
        d.memory["kv_cache"] = Logged(k.bytes + v.bytes, k.step_bytes + v.step_bytes, f"K {k.text} + V {v.text}")
        d.line_of["kv_cache"] = d.out.line_of("k_size") or 0
    if d.settings.kv_dtype in (None, "auto") and d.out.get("kv_dtype_logged"):
        d.settings = LogSettings(**{**d.settings.to_dict(), "kv_dtype": d.out.get("kv_dtype_logged")})


def calibrate(case: CalibrationCase) -> Calibrated:
    """Measured weights, and the memory outside them at SGLang's free-memory reading (kvplan's non-torch).

    SGLang sizes its pool as ``avail mem after the weights - T x (1 - mem_fraction_static)``
    (``profile_max_num_token``), where T, which it calls total_gpu_memory, is the free memory before the
    weights, least over the ranks (``ModelRunner.init_torch_distributed`` returns it). kvplan's SGLang
    budget takes T as total - non-torch, so the logged T is reproduced when the weights were measured."""
    from kvplan.logs.calibration import Calibrated, kv_only

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
                carried=("mem_fraction_static",), calibrate=calibrate)
"""SGLang's log format for ``Engine.log``."""
