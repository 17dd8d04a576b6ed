"""vLLM's block pool: from KV memory to blocks, logged tokens, concurrency and the longest fit.

(``vllm/v1/core/kv_cache_utils.py``, ``kv_cache_planning.py``)
- A model with one layer type is one group whose block holds every layer's page. Hybrid models
  (sliding + full, attention + Mamba) are cut into groups of ``group_size`` slots (``pool.py``);
  every group draws from one pool of ``available // page // group_size`` blocks.
- A request of ``max_model_len`` tokens is admitted with ``ceil(len / block)`` blocks per full group,
  ``ceil(min(window - 1 + in_flight, len) / block) + 1`` per sliding group,
  ``ceil(min(chunk + in_flight, len) / block)`` per chunked group and one state block per Mamba group
  (``max_admission_blocks_per_request``); ``in_flight`` is ``max_num_batched_tokens``, doubled with
  async scheduling from v0.23 (``VllmConfig.max_in_flight_tokens``).
- Maximum concurrency = blocks / blocks per request. The logged "GPU KV cache size: N tokens" has
  meant ``blocks x block_size`` (to v0.9), ``blocks // groups x block_size`` (v0.10 to v0.23) and
  ``int(concurrency x max_model_len)`` (v0.24 on).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence

from kvplan.engines.layout import CacheLayout
from kvplan.engines.protocol import Demand, KvCapacity
from kvplan.engines.version import Version
from kvplan.engines.vllm.pool import (
    DEFAULT_BLOCK_SIZE,
    PoolGrouping,
    PoolType,
    pool_grouping,
)
from kvplan.monotone import LIMIT
from kvplan.record import dataclass

# "GPU KV cache size: N tokens": int(concurrency x max_model_len) in 0.21.0 and later (0.20 unchecked),
# blocks // groups x block size before (get_kv_cache_capacity).
CONCURRENCY_LOG_SINCE = (0, 21)
GROUPED_LOG_SINCE = (0, 10)
DEFAULT_BATCHED_TOKENS = 8192
_UNLIMITED = 1 << 62


def in_flight_tokens(batches: int, max_num_batched_tokens: int) -> int:
    """Tokens scheduled but not yet computed: two batches with async scheduling (the default from v0.23,
    ``VllmConfig.max_in_flight_tokens``), one synchronous."""
    return max_num_batched_tokens * batches


@dataclass(frozen=True)
class PoolShape:
    block_size: int
    types: tuple[PoolType, ...]
    group_size: int
    groups_per_type: tuple[int, ...]
    padding_layers: int
    bytes_per_block: int
    """Memory one pool block costs across the whole rank (all tensors of a block index)."""
    in_flight_batches: int = 2
    state_pages: int = 1
    reserved_blocks: int = 1

    @property
    def num_groups(self) -> int:
        return sum(self.groups_per_type)

    def num_blocks(self, available_bytes: int) -> int:
        """Blocks vLLM makes of ``available_bytes`` (what it logs)."""
        if self.bytes_per_block == 0:  # a rank without cache layers never limits the pool
            return _UNLIMITED
        return max(0, available_bytes // self.bytes_per_block)

    def free_blocks(self, available_bytes: int) -> int:
        """Blocks the start-up check compares a request with: all, less the null block where the check
        subtracts it (``get_kv_cache_configs``, after 0.26)."""
        return max(0, self.num_blocks(available_bytes) - self.reserved_blocks)

    def usable_blocks(self, available_bytes: int) -> int:
        """Blocks running requests can hold: ``BlockPool`` keeps one as the null block, never handed out."""
        return max(0, self.num_blocks(available_bytes) - 1)

    def blocks_per_request(self, length: int, batched_tokens: int) -> int:
        """Blocks a request of ``length`` tokens is admitted with (``max_memory_usage_bytes`` per group)."""
        in_flight = in_flight_tokens(self.in_flight_batches, batched_tokens)
        return sum(groups * self.admission_blocks(t, length, in_flight)
                   for t, groups in zip(self.types, self.groups_per_type))

    def blocks_per_request_many(self, lengths: Sequence[int], batched_tokens: int) -> list[int]:
        """``blocks_per_request`` at each of ``lengths`` (a sweep's block), each group type's terms read once."""
        in_flight = in_flight_tokens(self.in_flight_batches, batched_tokens)
        total: list[int] | None = None
        for t, groups in zip(self.types, self.groups_per_type):
            fixed, cap, block = self._admission_terms(t, in_flight)
            if cap == 0:
                each = [groups * fixed] * len(lengths)
            elif cap is None:
                each = [groups * (fixed - (-length // block)) for length in lengths]
            else:
                each = [groups * (fixed - (-(length if length < cap else cap) // block)) for length in lengths]
            total = each if total is None else [a + b for a, b in zip(total, each)]
        return total if total is not None else [0] * len(lengths)

    def longest(self, blocks: int, batched_tokens: int, upper: int) -> int:
        """The largest length in [1, ``upper``] admitted with at most ``blocks`` blocks, 0 if none: what a bisection
        over ``blocks_per_request`` (monotone in the length) finds, worked out from its pieces where it can. Past
        every window (sliding, chunked) the count grows only with the full groups' ceil(length / block): one
        division when they share a block size (from length 1 where there is no window at all). Otherwise bisected,
        as ``_estimate_max_model_len_from_groups`` does."""
        if upper < 1 or self.blocks_per_request(1, batched_tokens) > blocks:
            return 0
        if self.blocks_per_request(upper, batched_tokens) <= blocks:
            return upper
        in_flight = in_flight_tokens(self.in_flight_batches, batched_tokens)
        lo, hi = 1, upper  # admitted at lo, not at hi
        saturated, full = 1, 0
        sizes: set[int] = set()
        for t, groups in zip(self.types, self.groups_per_type):
            if t.kind == "recurrent":
                continue
            if t.kind in ("sliding", "chunked") and t.span is not None:
                saturated = max(saturated, t.span + in_flight - (t.kind == "sliding"))
            else:
                full, sizes = full + groups, sizes | {t.block_size}
        if saturated < upper and len(sizes) == 1:
            fixed_at = self.blocks_per_request(saturated, batched_tokens)
            if fixed_at <= blocks:
                (block,) = sizes
                fixed = fixed_at - full * -(-saturated // block)
                return min(upper, (blocks - fixed) // full * block)
            hi = saturated
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.blocks_per_request(mid, batched_tokens) <= blocks:
                lo = mid
            else:
                hi = mid
        return lo

    def admission_blocks(self, layer_type: PoolType, length: int, in_flight: int) -> int:
        """Blocks one group of ``layer_type`` is admitted with for a request of ``length`` tokens."""
        fixed, cap, block = self._admission_terms(layer_type, in_flight)
        if cap == 0:
            return fixed
        return fixed - (-(length if cap is None else min(cap, length)) // block)

    def _admission_terms(self, layer_type: PoolType, in_flight: int) -> tuple[int, int | None, int]:
        """(fixed blocks, cap, block): a group of ``layer_type`` is admitted with fixed + ceil(min(cap, length) /
        block) blocks (no cap: the whole length; cap 0: the fixed blocks only)."""
        block = layer_type.block_size
        if layer_type.kind == "recurrent":
            return self.state_pages, 0, block
        if layer_type.kind == "sliding" and layer_type.span is not None:
            return 1, layer_type.span - 1 + in_flight, block
        if layer_type.kind == "chunked" and layer_type.span is not None:
            return 0, layer_type.span + in_flight, block
        return 0, None, block


def vllm_pool(layout: CacheLayout) -> PoolShape:
    """The block pool vLLM builds for one rank's layers."""
    grouping = layout.pool if isinstance(layout.pool, PoolGrouping) else pool_grouping(layout.groups)
    block = layout.block_size or DEFAULT_BLOCK_SIZE
    types = grouping.types
    rules = dict(in_flight_batches=grouping.in_flight_batches, state_pages=grouping.state_pages,
                 reserved_blocks=grouping.reserved_blocks)
    if not grouping.hybrid:
        # one group: a block index holds one page of every layer
        per_block = sum(t.page_bytes * t.layers for t in types)
        return PoolShape(block, types, grouping.group_size, (1,), 0, per_block, **rules)
    padding = sum(grouping.padding_per_type)
    page = max(t.page_bytes for t in types)  # unified by the layout (unify_kv_cache_spec_page_size)
    return PoolShape(block, types, grouping.group_size, grouping.groups_per_type, padding,
                     page * grouping.group_size, **rules)


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
    """The figures of vLLM's "GPU KV cache size: N tokens, Maximum concurrency ..." line
    (``get_kv_cache_capacity``: all blocks, the null block included)."""
    blocks = pool.num_blocks(available_bytes)
    per_request = pool.blocks_per_request(max_model_len, max_num_batched_tokens)
    concurrency = blocks / per_request if per_request else 0.0
    if version >= CONCURRENCY_LOG_SINCE:
        tokens = int(concurrency * max_model_len)
    elif version >= GROUPED_LOG_SINCE:
        tokens = blocks // pool.num_groups * pool.block_size
    else:
        tokens = blocks * pool.block_size
    return VLLMCapacity(blocks, tokens, concurrency, per_request, per_request * pool.bytes_per_block)


def vllm_max_model_len(pool: PoolShape, available_bytes: int, max_num_batched_tokens: int, upper: int) -> int:
    """The longest request that fits the blocks requests can have (``_estimate_max_model_len_from_groups``:
    a binary search up to ``upper``)."""
    return pool.longest(pool.free_blocks(available_bytes), max_num_batched_tokens, upper)


def capacity(layouts: Sequence[CacheLayout], kv_bytes: int, version: Version, batched_tokens: int,
             demand: Demand, limit: int = 1 << 26) -> KvCapacity:
    """What one replica serves: the stage with the fewest requests' worth of blocks decides.
    ``limit``: the longest context worth searching (the model's own limit)."""
    pools = [vllm_pool(layout) for layout in layouts]
    caps = [vllm_capacity(pool, kv_bytes, demand.max_model_len, version, batched_tokens) for pool in pools]
    worst = min(range(len(pools)), key=lambda i: caps[i].num_blocks / max(caps[i].blocks_per_request, 1))
    pool, cap = pools[worst], caps[worst]
    per_request = pool.blocks_per_request(demand.context, batched_tokens)
    max_b = pool.usable_blocks(kv_bytes) // per_request if per_request else 0
    longest = min(vllm_max_model_len(p, kv_bytes, batched_tokens, limit) for p in pools)
    if demand.batch == 1:
        max_ctx = longest
    else:
        # batch x blocks <= usable  <=>  blocks <= usable // batch: the longest context each stage admits that often
        max_ctx = min(p.longest(p.usable_blocks(kv_bytes) // demand.batch, batched_tokens, min(limit, LIMIT))
                      for p in pools)
    notes: tuple[str, ...] = ()
    admission = ""
    if any(t.kind in ("sliding", "chunked") for p in pools for t in p.types):
        admission = ("vLLM admits a sliding or chunked layer with the window plus the tokens in flight, + 1 block; "
                     "a sequence whose context is computed holds fewer blocks, so more can fit once running")
    if pool.padding_layers:
        notes = (f"vLLM pads its hybrid groups with {pool.padding_layers} unused layer(s) per rank",)
    return KvCapacity(
        block_size=pool.block_size, num_blocks=cap.num_blocks, kv_cache_tokens=cap.kv_cache_tokens,
        max_concurrency=cap.max_concurrency, concurrency_per_replica=True, max_batch=max_b, max_context=max_ctx,
        max_model_len_fit=longest, request_bytes=cap.request_bytes,
        fits=cap.blocks_per_request <= pool.free_blocks(kv_bytes) and kv_bytes > 0, assumptions=notes,
        admission_note=admission,
    )
