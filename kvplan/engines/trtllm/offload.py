"""TensorRT-LLM's host KV tier: the secondary block pool of ``kv_cache_config.host_cache_size``.

Rules and where they come from (NVIDIA/TensorRT-LLM):
- ``KvCacheConfig.host_cache_size`` (``tensorrt_llm/llmapi/llm_args.py``): bytes, None by default (no tier).
  Every rank's ``KVCacheManager`` takes the whole of it as its secondary memory
  (``tensorrt_llm/_torch/pyexecutor/resource_manager.py``, ``calculate_max_num_blocks``:
  ``_secondary_pool_memory_bytes = host_cache_size or 0``, not divided by the mapping; the unit test
  ``test_calculate_max_num_blocks_from_cpp`` checks it), so the deployment pins ``tp x pp`` times it at most.
- ``BaseKVCacheManager::calculateMaxNumBlocks`` (``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``):
  ``tokens = int(host bytes x window share / cache bytes per token)``, ``blocks = tokens // tokens_per_block``,
  then the minimum over the ranks (an MPI MIN reduction, as for the primary pool). One window (every layer
  holding every token) has a share of 1; the bytes per token are the rank's K and V (or latent) of all its
  layers.
- ``WindowBlockManager::allocatePools``: the secondary pool is ``BufferManager::pinned`` of ``blocks x layers x
  kv factor x block size`` elements: page-locked host memory, ``blocks x tokens_per_block x bytes per token``.
- Blocks move there when evicted from the GPU pool and come back on reuse (``onboard_blocks``, true by
  default): the tier serves block reuse (prefix caching), not preemption.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.engines.layout import CacheLayout, EngineOptions
from kvplan.engines.offload import OffloadTier, find_link, uniform_token_bytes
from kvplan.engines.protocol import Demand, KvCapacity
from kvplan.errors import UsageError


def _token_bytes(layout: CacheLayout) -> int:
    """Cache bytes per token of one rank's stage, for a stage whose layers all hold every token (one window)."""
    return uniform_token_bytes(layout, "TensorRT-LLM's host cache (kv_cache_config.host_cache_size)",
                               "host_cache_bytes")


def offload_tier(layouts: Sequence[CacheLayout], options: EngineOptions, tp: int, demand: Demand,
                 capacity: KvCapacity) -> OffloadTier | None:
    size = options.host_cache_bytes
    if not size:  # None or 0: calculateMaxNumBlocks gives no secondary blocks
        return None
    if size < 0:
        raise UsageError(f"kv_cache_config.host_cache_size {size} must not be negative", field="host_cache_bytes")
    block = layouts[0].block_size or 32
    per_token = [_token_bytes(layout) for layout in layouts]
    blocks = min((size // spt) // block for spt in per_token)  # every stage keeps the smallest count (MPI MIN)
    tokens = blocks * block
    pinned = tp * sum(tokens * spt for spt in per_token)
    link = find_link(options.offload_link)
    request_bytes = demand.max_model_len * max(per_token)
    remarks = (f"TensorRT-LLM host cache: kv_cache_config.host_cache_size {size:,} B per rank; each rank pins "
               f"{blocks:,} blocks x {block} tokens of its layers (logged as the secondary blocks of "
               "'Blocks per window size'); evicted blocks wait there for reuse (block reuse on), they are not "
               "a swap space for preempted requests",)
    return OffloadTier(kind="TensorRT-LLM host cache (kv_cache_config.host_cache_size)", host_bytes=size * tp * len(layouts),
                       blocks=blocks, block_size=block, tokens=tokens, pinned_bytes=pinned,
                       requests=tokens // demand.max_model_len, request_bytes_per_gpu=request_bytes, link=link,
                       restore_seconds=request_bytes / link.bytes_per_s, remarks=remarks)
