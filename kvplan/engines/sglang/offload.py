"""SGLang's hierarchical cache (``--enable-hierarchical-cache``): a host KV pool beside the GPU pool.

``python/sglang/srt/mem_cache/pool_host/base.py`` ``HostKVCache.__init__``: with ``--hicache-size`` N
(GB = 10^9 bytes, per rank) the pool holds ``int(N x 1e9 // size_per_token)`` tokens, else
``int(device_pool.size x hicache_ratio)`` (``--hicache-ratio``, default 2.0); then
``page_num = size // page_size + 1`` and ``size = page_num x page_size`` (one page more even when aligned),
and it logs "Allocating {size x size_per_token / 1e9:.2f} GB host memory for hierarchical KV cache".
``size_per_token`` (``pool_host/mha.py``, ``mla.py``): the rank's K and V (or latent) of all its layers.
The host pool is pinned (``pin_memory``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.engines.layout import CacheLayout, EngineOptions
from kvplan.engines.offload import OffloadTier, find_link, uniform_token_bytes
from kvplan.engines.protocol import Demand, KvCapacity
from kvplan.errors import UsageError

DEFAULT_RATIO = 2.0  # ServerArgs.hicache_ratio
_MAX_HOST_GB = 10**6  # a petabyte of host memory per rank: beyond any machine, and finite for int()
_MAX_RATIO = 10**4  # a host pool 10,000 x the device pool: beyond any machine


def _token_bytes(layout: CacheLayout) -> int:
    return uniform_token_bytes(layout, "SGLang's hierarchical cache", "hicache_ratio")


def offload_tier(layouts: Sequence[CacheLayout], options: EngineOptions, tp: int, demand: Demand,
                 capacity: KvCapacity) -> OffloadTier | None:
    if options.hicache_ratio is None and options.hicache_size_gb is None:
        return None
    page = layouts[0].block_size or 1
    per_token = [_token_bytes(layout) for layout in layouts]
    if options.hicache_size_gb is not None:
        if not 0 < options.hicache_size_gb <= _MAX_HOST_GB:  # also nan, inf and 1e300, which int() refuses
            raise UsageError(f"--hicache-size {options.hicache_size_gb} must be positive, at most {_MAX_HOST_GB:,} GB",
                             field="hicache_size_gb")
        size = min(int(options.hicache_size_gb * 10**9 // spt) for spt in per_token)  # synced to the PP minimum
        how = f"--hicache-size {options.hicache_size_gb} GB per rank"
    else:
        ratio = options.hicache_ratio if options.hicache_ratio is not None else DEFAULT_RATIO
        if not 0 < ratio <= _MAX_RATIO:
            raise UsageError(f"--hicache-ratio {ratio:g} must be positive, at most {_MAX_RATIO:,}",
                             field="hicache_ratio")
        size = int(capacity.kv_cache_tokens * ratio)
        how = f"--hicache-ratio {ratio:g} x the {capacity.kv_cache_tokens:,}-token device pool"
    size = (size // page + 1) * page
    pinned = tp * sum(size * spt for spt in per_token)
    link = find_link(options.offload_link)
    request_bytes = demand.max_model_len * max(per_token)
    return OffloadTier(kind=f"SGLang hierarchical cache ({how})", host_bytes=pinned, blocks=size // page,
                       block_size=page, tokens=size, pinned_bytes=pinned, requests=size // demand.max_model_len,
                       request_bytes_per_gpu=request_bytes, link=link,
                       restore_seconds=request_bytes / link.bytes_per_s)
