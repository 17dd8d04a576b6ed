"""What a start-up log says, as typed values: unknown is None, never a guess.

The settings a log names and the collector a reader fills are the engines' log format
(``kvplan.engines.log_format``); they are re-exported here.
"""

from __future__ import annotations

from kvplan.engines.log_format import DEVICE_ITEMS, Collector, DeviceReading, Logged, LogSettings
from kvplan.record import dataclass, field

__all__ = ["COUNT_ITEMS", "DEVICE_ITEMS", "MEMORY_ITEMS", "Collector", "DeviceReading", "LogSettings", "ParsedLog"]

MEMORY_ITEMS = ("total", "budget", "weights", "activation", "non_torch", "cudagraph", "kv_cache")
"""The waterfall's memory items, in order (bytes per GPU)."""
COUNT_ITEMS = {"num_cpu_blocks": "CPU blocks", "max_running_requests": "max running requests",
               "max_prefill_tokens": "max prefill tokens", "mamba_cache_slots": "recurrent-state slots",
               "kv_cells": "KV cells", "num_gpu_blocks_override": "GPU blocks forced (num_gpu_blocks_override)",
               "params_analytical_b": "parameters, analytical (billions)",
               "params_actual_b": "parameters, actual (billions)", "max_tokens": "KV max_tokens (as configured)",
               "kv_cache_tokens_estimation": "KV tokens of the estimation dry run", "cells_swa": "SWA KV cells",
               "ctx_per_slot": "context per slot", "max_blocks_per_seq": "KV blocks one sequence can hold"}
"""Further capacity counts (their labels): a reader fills them under these names in its collector."""


@dataclass(frozen=True)
class ParsedLog:
    engine: str | None
    """vllm, sglang, trtllm, llamacpp; None: not a log kvplan reads."""
    format: str | None
    """Which of the engine's log formats (e.g. 'vllm-v1', 'vllm-v0-profile')."""
    settings: LogSettings
    memory: dict[str, Logged]
    """Memory items per GPU (MEMORY_ITEMS and engine-specific extras), as logged."""
    derived: tuple[str, ...] = ()
    """Memory items worked out from logged ones (how: in notes), not printed by the engine."""
    num_gpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    concurrency_len: int | None = None
    """The request length the logged concurrency is for (vLLM prints it)."""
    counts: dict[str, int | float] = field(default_factory=dict)
    """Capacity counts an engine prints besides blocks, tokens and concurrency (``COUNT_ITEMS``), as logged."""
    ranks: tuple[int, ...] = ()
    lines_read: int = 0
    bytes_read: int = 0
    cut: bool = False
    """The log was longer than kvplan reads (core.MAX_LOG_BYTES)."""
    complete: bool = False
    """The log reaches the KV-cache allocation."""
    notes: tuple[str, ...] = ()
    lines: dict[str, int] = field(default_factory=dict)
    """Item -> the line number it was read from."""
    detected: str | None = None
    """The engine whose lines the log holds (``parse.detect``), whichever reader was asked for."""
    impossible: tuple[str, ...] = ()
    """Values no start-up can log ('line 12: weights -3.00 GiB is negative'): the log is corrupted or not what it
    seems, and is not to be used (``kvplan log`` refuses it, exit 2)."""
    startups: tuple[int, ...] = ()
    """The first line of each start-up the log holds (a restarted container's log holds several); the last is
    read."""
    size: int | None = None
    """The file's size in bytes (None: a stream)."""
    per_rank: tuple[DeviceReading, ...] = ()
    """Each pipeline rank's memory items, where the log prints one set per rank and they differ (vLLM with PP > 1):
    the waterfall shows the rank with the least KV-cache memory, the one that limits the pool."""
    per_device: tuple[DeviceReading, ...] = ()
    """Buffers the log printed per device, one per printed line (llama.cpp's 'CUDA1 KV buffer size'): the
    waterfall's items are their sums."""

    def item(self, name: str) -> int | None:
        value = self.memory.get(name)
        return value.bytes if value is not None else None
