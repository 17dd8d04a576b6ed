"""From KV-cache memory to what an engine can serve: blocks, logged tokens, concurrency, longest fit.

The per-rank cache layout comes from ``kvplan.engines``; this module turns a byte budget into the
numbers an engine reports at start-up.

vLLM (``vllm/v1/core/kv_cache_utils.py``):
- A model with one layer type is one group whose block holds every layer's page. Hybrid models
  (sliding + full, attention + Mamba) are cut into groups of ``group_size`` slots by
  ``kvplan.engines.vllm.pool_grouping`` (pages unified, short groups padded); every group draws from
  one pool of ``available // page // group_size`` blocks.
- A request of ``max_model_len`` tokens is admitted with ``ceil(len / block)`` blocks per full group,
  ``ceil(min(window - 1 + in_flight, len) / block) + 1`` per sliding group,
  ``ceil(min(chunk + in_flight, len) / block)`` per chunked group and one state block per Mamba group
  (``max_admission_blocks_per_request``); ``in_flight`` is ``max_num_batched_tokens``, doubled with
  async scheduling from v0.23 (``VllmConfig.max_in_flight_tokens``).
- Maximum concurrency = blocks / blocks per request. The logged "GPU KV cache size: N tokens" has
  meant ``blocks x block_size`` (to v0.9), ``blocks // groups x block_size`` (v0.10 to v0.23) and
  ``int(concurrency x max_model_len)`` (v0.24 on).
- Other engines keep one token pool: ``budget // bytes per token``, rounded down to the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.base import CacheLayout, Version
from kvplan.engines.vllm import pool_grouping

ASYNC_IN_FLIGHT_SINCE = (0, 23)
CONCURRENCY_LOG_SINCE = (0, 24)
GROUPED_LOG_SINCE = (0, 10)


@dataclass(frozen=True)
class LayerType:
    """Layers one rank holds that vLLM would put in the same kind of group."""

    kind: str
    span: int | None
    """window (sliding) or chunk (chunked)."""
    layers: int
    page_bytes: int
    """One block of one layer (or one state of one recurrent layer)."""
    block_size: int
    """Tokens per block of this type (page unification may give a type larger blocks)."""


@dataclass(frozen=True)
class PoolShape:
    block_size: int
    types: tuple[LayerType, ...]
    group_size: int
    groups_per_type: tuple[int, ...]
    padding_layers: int
    bytes_per_block: int
    """Memory one pool block costs across the whole rank (all tensors of a block index)."""

    @property
    def num_groups(self) -> int:
        return sum(self.groups_per_type)

    def num_blocks(self, available_bytes: int) -> int:
        if self.bytes_per_block == 0:  # a rank without cache layers never limits the pool
            return 1 << 62
        return max(0, available_bytes // self.bytes_per_block)

    def blocks_per_request(self, length: int, in_flight: int) -> int:
        total = 0
        for layer_type, groups in zip(self.types, self.groups_per_type):
            total += groups * _admission_blocks(layer_type, length, in_flight)
        return total


def _admission_blocks(layer_type: LayerType, length: int, in_flight: int) -> int:
    block = layer_type.block_size
    if layer_type.kind == "recurrent":
        return 1
    if layer_type.kind == "sliding" and layer_type.span is not None:
        return -(-min(layer_type.span - 1 + in_flight, length) // block) + 1
    if layer_type.kind == "chunked" and layer_type.span is not None:
        return -(-min(layer_type.span + in_flight, length) // block)
    return -(-length // block)


def vllm_pool(layout: CacheLayout) -> PoolShape:
    """The block pool vLLM builds for one rank's layers (grouping by ``kvplan.engines.vllm``)."""
    grouping = layout.pool or pool_grouping(layout.groups)
    block = layout.block_size or 16
    types = tuple(LayerType(t.kind, t.span, t.layers, t.page_bytes, t.block_size) for t in grouping.types)
    if not grouping.hybrid:
        # one group: a block index holds one page of every layer
        per_block = sum(t.page_bytes * t.layers for t in types)
        return PoolShape(block, types, grouping.group_size, (1,), 0, per_block)
    padding = sum(grouping.padding_per_type)
    page = max(t.page_bytes for t in types)  # unified by the engine layout (unify_kv_cache_spec_page_size)
    return PoolShape(block, types, grouping.group_size, grouping.groups_per_type, padding,
                     page * grouping.group_size)


@dataclass(frozen=True)
class VLLMCapacity:
    num_blocks: int
    kv_cache_tokens: int
    """The token count the chosen vLLM version logs at start-up."""
    max_concurrency: float
    blocks_per_request: int
    request_bytes: int
    """Bytes one request of max_model_len needs (vLLM's start-up check)."""


def vllm_capacity(pool: PoolShape, available_bytes: int, max_model_len: int, version: Version,
                  max_num_batched_tokens: int) -> VLLMCapacity:
    in_flight = max_num_batched_tokens * (2 if version >= ASYNC_IN_FLIGHT_SINCE else 1)
    blocks = pool.num_blocks(available_bytes)
    per_request = pool.blocks_per_request(max_model_len, in_flight)
    concurrency = blocks / per_request if per_request else 0.0
    if version >= CONCURRENCY_LOG_SINCE:
        tokens = int(concurrency * max_model_len)
    elif version >= GROUPED_LOG_SINCE:
        tokens = blocks // pool.num_groups * pool.block_size
    else:
        tokens = blocks * pool.block_size
    return VLLMCapacity(blocks, tokens, concurrency, per_request, per_request * pool.bytes_per_block)


def vllm_max_model_len(pool: PoolShape, available_bytes: int, version: Version, max_num_batched_tokens: int,
                       upper: int) -> int:
    """The longest request that fits (vLLM's ``estimate_max_model_len``: a binary search)."""
    in_flight = max_num_batched_tokens * (2 if version >= ASYNC_IN_FLIGHT_SINCE else 1)
    blocks = pool.num_blocks(available_bytes)
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pool.blocks_per_request(mid, in_flight) <= blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


def pool_tokens(budget_bytes: int, bytes_per_token: int, page: int) -> int:
    """A token-slot pool (SGLang, TensorRT-LLM): whole pages of ``page`` tokens."""
    if bytes_per_token <= 0:
        return 0
    return max(0, budget_bytes // bytes_per_token) // page * page
