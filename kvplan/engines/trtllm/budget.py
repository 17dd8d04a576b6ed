"""TensorRT-LLM: ``free_gpu_memory_fraction`` (0.9) of the memory free after weights and buffers.

docs/source/reference/memory.md and ``KvCacheCreator`` (tensorrt_llm/_torch/pyexecutor/_util.py):
the KV cache takes ``fraction x (total - peak memory after a warm-up of max_num_tokens)``.
"""

from __future__ import annotations

from kvplan.budgets.base import GIB, GpuBudget, MemoryItem, Settings, activation_bytes, kv_item, weights_per_gpu
from kvplan.engines.protocol import Demand
from kvplan.engines.version import Version
from kvplan.spec import ModelSpec

DEFAULT_FRACTION = 0.9
DEFAULT_MAX_NUM_TOKENS = 8192
CONTEXT_BYTES = int(0.6 * GIB)


# TensorRT-LLM builds (and so loads) the MTP layers only with an MTP spec_config (NVIDIA/TensorRT-LLM
# tensorrt_llm/_torch/models/modeling_deepseekv3.py DeepseekV3ForCausalLM.__init__ extends model.layers
# with draft_model.mtp_layers only then; load_weights fills its own modules only)
MTP_NOT_LOADED = "TensorRT-LLM does not load without MTP speculation (modeling_deepseekv3.py load_weights)"



def budget(spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
           settings: Settings) -> GpuBudget:
    fraction = settings.free_gpu_memory_fraction or DEFAULT_FRACTION
    tokens = settings.max_num_batched_tokens or DEFAULT_MAX_NUM_TOKENS
    weights = weights_per_gpu(spec, tp * pp, settings, MTP_NOT_LOADED)
    act, how = activation_bytes(spec, tokens, tp, settings.max_num_seqs or 256)
    items = [weights, MemoryItem("activation", act, "assumed", how),
             MemoryItem("non_torch", CONTEXT_BYTES, "assumed", "CUDA context, cuBLAS, NCCL")]
    free = total_bytes - weights.bytes - act - CONTEXT_BYTES - settings.device_used_bytes  # others': not free (device.py)
    kv = kv_item(settings, int(free * fraction), f"{fraction:g} x memory free after warm-up")
    items.append(kv)
    from kvplan.engines.trtllm.error import kv_error

    # a KV memory given (--kv-cache-memory, a calibration from a log) carries no error band
    error = kv_error(version) if settings.kv_cache_memory_bytes is None else None
    return GpuBudget(total_bytes, tuple(items), kv.bytes, {"free_gpu_memory_fraction": fraction,
                                                     "max_num_tokens": tokens},
                     ("TensorRT-LLM's warm-up peak is kvplan's estimate",), error)
