"""TensorRT-LLM on a GPU that other processes use too (``Engine.device_share``).

The KV cache takes ``free_gpu_memory_fraction`` of the memory free after the warm-up (``KvCacheCreator``,
tensorrt_llm/_torch/pyexecutor/_util.py: ``torch.cuda.mem_get_info``'s free bytes), so memory others hold is not
free and shrinks it (``budget.py`` subtracts ``device_used_bytes``); there is no start-up check beyond a cache
that comes out empty (the plan's fit). Started, it holds its context, weights, warm-up peak and KV cache.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.budgets.base import MemoryItem
from kvplan.engines.device import DeviceShare, gib


def device_share(items: Sequence[MemoryItem], total_bytes: int, used_bytes: int) -> DeviceShare:
    # every item but the cache stays held once started: the weights, the warm-up's peak, the CUDA-graph pool
    # (graphs are captured again after the pool is made), the block-offset table and what lies outside torch
    held = sum(i.bytes for i in items if i.name != "kv_cache")
    kv = max(0, sum(i.bytes for i in items if i.name == "kv_cache"))
    if used_bytes + held > total_bytes:
        return DeviceShare(0, f"TensorRT-LLM's weights and warm-up ({gib(held)}) do not fit the "
                              f"{gib(total_bytes - used_bytes)} others leave free")
    return DeviceShare(held + kv)
