"""TensorRT-LLM start-up logs (NVIDIA/TensorRT-LLM, ``kvCacheManager.cpp`` and the PyTorch backend).

"[TensorRT-LLM][INFO] Allocated X GiB for max tokens in paged KV cache (N)."; "Number of tokens per
block: B."; the PyTorch backend's "Memory used ... total: T GiB, available: A GiB" (A: the free memory the
pool is sized from, after weights and the dry run); "Number of blocks in KV cache primary pool: N"; "[TensorRT-LLM]
TensorRT-LLM version: V". Releases up to 0.8 (the C++ runtime, ``kvCacheManager.cpp``): "Allocate N bytes for
k/v cache." and "Using N tokens in paged KV cache." (from about 0.9: "Using N total tokens in paged KV cache, and
B blocks per sequence"): NVIDIA/TensorRT-LLM#224, #1400.
"""

from __future__ import annotations

import re

from kvplan.engines.log_format import COUNT, NUMBER, Collector, Line, LogReader, exact_bytes

MARKERS = ("TensorRT-LLM", "for max tokens in paged KV cache", "[TRT-LLM]", "tensorrt_llm", "bytes for k/v cache",
           "tokens in paged KV cache")

# Linear patterns (engines/log_format.py): each after a literal, the number read whole. No start-up pattern: every MPI
# rank imports tensorrt_llm and prints the version line, so that line does not mark one start-up.
_ALLOCATED = re.compile(r"Allocated " + NUMBER + r"\s*(GiB|GB|MiB|MB) for max tokens in paged KV cache \(" + COUNT
                        + r"\)")
_BLOCK = re.compile(r"Number of tokens per block:\s*(\d+)")
_ALLOCATE_BYTES = re.compile(r"Allocate " + COUNT + r" bytes for k/v cache")
_USING_TOKENS = re.compile(r"Using " + COUNT + r" (?:total )?tokens in paged KV cache")
_PRIMARY = re.compile(r"Number of blocks in KV cache primary pool:\s*" + COUNT)
_TOTAL = re.compile(r"total:\s*" + NUMBER + r"\s*(GiB|GB), available:\s*" + NUMBER + r"\s*(GiB|GB)")
_VERSION = re.compile(r"TensorRT-LLM version:\s*v?(\d+\.\d+[\w.]{0,32})")


def read(lines: list[Line], out: Collector) -> str:
    """Fill ``out`` from TensorRT-LLM lines. A line that cannot be read is left out (and listed)."""
    for line in lines:
        try:
            _read_line(line, out)
        except Exception as exc:  # noqa: BLE001 - one odd line must not cost the whole log
            out.skip(line.number, f"not read ({type(exc).__name__})")
    return "trtllm"


def _read_line(line: Line, out: Collector) -> None:
    text = line.text
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
    if m := _VERSION.search(text):
        out.put("engine_version", m.group(1), line)


LOG = LogReader(engine="trtllm", title="TensorRT-LLM", markers=MARKERS, read=read)
"""TensorRT-LLM's log format for ``Engine.log``: a calibration from it carries the KV-cache memory only."""
