"""llama.cpp: no budget solver: the cache is sized by n_ctx; the plan checks that it fits.

The GPU holds the weights (all layers offloaded, ``-ngl 99``), the KV cache of ``n_ctx`` cells and a
compute buffer (sized for ``n_ubatch`` tokens by the graph reservation in ``llama_context``).
"""

from __future__ import annotations

from kvplan.budgets.base import GIB, GpuBudget, MemoryItem, Settings, activation_bytes, kv_item, weights_per_gpu
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
