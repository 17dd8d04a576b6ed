"""Engines that keep one pool of token slots sized in bytes (SGLang, TensorRT-LLM, llama.cpp,
transformers): what fits is what the layout's bytes say, searched exactly."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kvplan.engines.capacity import Demand, KvCapacity
from kvplan.engines.layout import CacheLayout
from kvplan.engines.sharing import SharingRule, demand_workload, shared_bytes
from kvplan.monotone import largest


def _near(size: Callable[[int], int], budget: int, at: int) -> int:
    """Where to start the search for the largest n with ``size(n) <= budget``: ``at`` scaled by how many times
    ``size(at)`` fits (exact where the bytes grow in proportion, close where a window or a page rounds them).
    Only the number of probes depends on it: ``largest`` finds the same n from any start."""
    used = size(max(1, at))
    return max(1, budget * max(1, at) // used) if used > 0 else max(1, at)


def byte_pool_capacity(layouts: Sequence[CacheLayout], kv_bytes: int, demand: Demand, *,
                       concurrency_from_tokens: bool, assumptions: tuple[str, ...] = (),
                       sharing: SharingRule | None = None) -> KvCapacity:
    """The most sequences / longest context whose bytes fit ``kv_bytes`` on every stage.

    ``concurrency_from_tokens``: the engine reports concurrency as pool tokens / max_model_len
    (SGLang, TensorRT-LLM); otherwise it is KV bytes / one request's bytes."""

    def needed(context: int, batch: int) -> int:
        return max(layout.total_bytes(context, batch) for layout in layouts)

    workload = demand_workload(demand)
    if workload is not None and sharing is not None:
        # requests (of n samples or beams) whose common prefix is stored as the engine stores it
        rule = sharing

        def shared(context: int, batch: int) -> int:
            at = demand_workload(demand, context)
            assert at is not None
            return max(shared_bytes(lay, rule, at, batch) for lay in layouts)

        max_b = largest(lambda b: shared(demand.context, b) <= kv_bytes)
        max_ctx = min(demand.limit, largest(lambda c: shared(c, demand.batch) <= kv_bytes))
    else:
        at_batch = _near(lambda b: needed(demand.context, b), kv_bytes, 1)
        max_b = largest(lambda b: needed(demand.context, b) <= kv_bytes, at_batch)
        at_context = _near(lambda c: needed(c, demand.batch), kv_bytes, demand.context)
        max_ctx = min(demand.limit, largest(lambda c: needed(c, demand.batch) <= kv_bytes, at_context))
    one = _near(lambda c: needed(c, 1), kv_bytes, demand.max_model_len)
    longest = max_ctx if demand.batch == 1 and workload is None else min(
        demand.limit, largest(lambda c: needed(c, 1) <= kv_bytes, one))
    request_bytes = needed(demand.request_tokens, 1)
    tokens = largest(lambda n: needed(n, 1) <= kv_bytes, one)
    if concurrency_from_tokens:
        concurrency = tokens / demand.max_model_len
    else:
        # a budget the weights and activation overdraw holds no request, not a negative number of them
        concurrency = (max(0, kv_bytes) / request_bytes) if request_bytes else 0.0
    return KvCapacity(
        block_size=layouts[0].block_size, num_blocks=None, kv_cache_tokens=tokens, max_concurrency=concurrency,
        concurrency_per_replica=False, max_batch=max_b, max_context=max_ctx, max_model_len_fit=longest,
        request_bytes=request_bytes, fits=request_bytes <= kv_bytes, assumptions=assumptions,
    )

