"""TensorRT-LLM start-up logs (NVIDIA/TensorRT-LLM, ``kvCacheManager.cpp`` and the PyTorch backend).

"[TensorRT-LLM][INFO] Allocated X GiB for max tokens in paged KV cache (N)."; "Number of tokens per
block: B."; the PyTorch backend's "Memory used ... total: T GiB, available: A GiB"; "[TensorRT-LLM]
TensorRT-LLM version: V".
"""

from __future__ import annotations

import re

from kvplan.logs.core import Line, logged_size, to_int
from kvplan.logs.model import Collector
from kvplan.logs.reader import LogReader

MARKERS = ("TensorRT-LLM", "for max tokens in paged KV cache", "[TRT-LLM]", "tensorrt_llm")

_ALLOCATED = re.compile(r"Allocated ([\d.]+)\s*(GiB|GB|MiB|MB) for max tokens in paged KV cache \(([\d,]+)\)")
_BLOCK = re.compile(r"Number of tokens per block:\s*(\d+)")
_TOTAL = re.compile(r"total:\s*([\d.]+)\s*(GiB|GB), available:\s*([\d.]+)\s*(GiB|GB)")
_VERSION = re.compile(r"TensorRT-LLM version:\s*v?(\d+\.\d+[\w.]*)")


def read(lines: list[Line], out: Collector) -> str:
    for line in lines:
        text = line.text
        if m := _ALLOCATED.search(text):
            out.put("kv_cache", logged_size(m.group(1), m.group(2)), line)
            out.put("kv_cache_tokens", to_int(m.group(3)), line)
        if m := _BLOCK.search(text):
            out.put("block_size", to_int(m.group(1)), line)
        if m := _TOTAL.search(text):
            out.put("total", logged_size(m.group(1), m.group(2)), line)
        if m := _VERSION.search(text):
            out.put("engine_version", m.group(1), line)
    return "trtllm"


LOG = LogReader(engine="trtllm", title="TensorRT-LLM", markers=MARKERS, read=read)
"""TensorRT-LLM's log format for ``Engine.log``: a calibration from it carries the KV-cache memory only."""
