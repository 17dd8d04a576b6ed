"""llama.cpp: no budget solver: the cache is sized by n_ctx; the plan checks that it fits.

The GPU holds the weights (all layers offloaded, ``-ngl 99``), the KV cache of ``n_ctx`` cells and a
compute buffer (sized for ``n_ubatch`` tokens by the graph reservation in ``llama_context``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvplan.budgets.base import GIB, GpuBudget, MemoryItem, Settings, activation_bytes, kv_item, weights_per_gpu
from kvplan.engines.layout import CacheLayout
from kvplan.engines.protocol import KvCapacity
from kvplan.errors import UsageError
from kvplan.engines.protocol import Demand
from kvplan.engines.version import Version
from kvplan.spec import ModelSpec

N_UBATCH = 512
CONTEXT_BYTES = int(0.4 * GIB)


def budget(spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
           settings: Settings) -> GpuBudget:
    weights = weights_per_gpu(spec, tp * pp, settings)
    act, how = activation_bytes(spec, N_UBATCH, 1, N_UBATCH)
    items = [weights, MemoryItem("activation", act, "assumed", f"compute buffer: {how}"),
             MemoryItem("non_torch", CONTEXT_BYTES, "assumed", "CUDA context")]
    kv = kv_item(settings, total_bytes - weights.bytes - act - CONTEXT_BYTES, "total - weights - compute buffer - context")
    items.append(kv)
    return GpuBudget(total_bytes, tuple(items), kv.bytes, {"n_ubatch": N_UBATCH},
                     ("llama.cpp: all layers offloaded to the GPU(s); compute buffer estimated",))


def host_kv_capacity(layouts: Sequence[CacheLayout], budget: GpuBudget, demand: Demand, sharing: Any) -> KvCapacity:
    """``--no-kv-offload``: the cache is host memory, so the GPU does not bound it; the host memory it may
    take must be given (``--kv-cache-memory``), and the GPU must still hold the weights, the compute
    buffer (kvplan's estimate; with the cache on the host, attention runs on the CPU: an upper bound) and
    the context."""
    from kvplan.record import replace

    from kvplan.engines.token_pool import byte_pool_capacity

    given = next((i for i in budget.items if i.name == "kv_cache"), None)
    if given is None or given.tag != "given":
        raise UsageError("llama.cpp --no-kv-offload keeps the KV cache in host memory: give the host memory it may "
                         "take as --kv-cache-memory (e.g. 64GiB)", field="kv_cache_memory")
    gpu_left = budget.total_bytes - sum(i.bytes for i in budget.items if i.name != "kv_cache")
    cap = byte_pool_capacity(layouts, given.bytes, demand, concurrency_from_tokens=False, sharing=sharing)
    note = (f"--kv-cache-memory {given.bytes:,} B is host memory; the GPU keeps {gpu_left:,} B free beside the "
            "weights, compute buffer and context")
    if gpu_left < 0:
        return replace(cap, fits=False, max_batch=0, max_concurrency=0.0, assumptions=(
            *cap.assumptions, f"the GPU cannot hold the weights, compute buffer and context: {-gpu_left:,} B short"))
    return replace(cap, assumptions=(*cap.assumptions, note))
