"""transformers ``generate``: weights, the DynamicCache and the forward pass's peak share the GPU."""

from __future__ import annotations

from kvplan.budgets.base import GIB, GpuBudget, MemoryItem, Settings, kv_item, weights_per_gpu
from kvplan.engines.hf.activation import prefill_activation
from kvplan.engines.protocol import Demand
from kvplan.engines.version import Version
from kvplan.spec import ModelSpec

CONTEXT_BYTES = int(0.4 * GIB)


# transformers drops the checkpoint's MTP layers on load (5.23 DeepseekV3ForCausalLM, Glm4MoeForCausalLM,
# Qwen3NextForCausalLM: _keys_to_ignore_on_load_unexpected)
MTP_NOT_LOADED = ("transformers does not load without MTP speculation (DeepseekV3ForCausalLM "
                  "_keys_to_ignore_on_load_unexpected)")


def budget(spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
           settings: Settings) -> GpuBudget:
    max_model_len, batch = demand.max_model_len, demand.batch
    weights = weights_per_gpu(spec, tp * pp, settings, MTP_NOT_LOADED)
    # the prefill of one sequence is the widest pass; logits are kept for the last position of each sequence
    est = prefill_activation(spec, 1, max_model_len, batch)
    act = est.bytes
    items = [weights, MemoryItem("activation", act, "assumed", f"prefill peak: {est.formula}"),
             MemoryItem("non_torch", CONTEXT_BYTES, "assumed", "CUDA context")]
    kv = kv_item(settings, total_bytes - weights.bytes - act - CONTEXT_BYTES, "total - weights - activation - context")
    items.append(kv)
    return GpuBudget(total_bytes, tuple(items), kv.bytes, {},
                     ("transformers: activation peak of a one-sequence prefill estimated",))
