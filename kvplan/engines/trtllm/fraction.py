"""TensorRT-LLM's default ``free_gpu_memory_fraction`` by release: the fraction of the free memory the KV pool
takes when none is given.

The C++ runtime falls back to ``KvCacheConfig::kDefaultGpuMemFraction``
(cpp/include/tensorrt_llm/batch_manager/kvCacheConfig.h) when its optional fraction is unset; the Triton
backend (tensorrtllm_backend, inflight_batcher_llm/src/model_instance_state.cc) leaves it unset when the model
config has no ``kv_cache_free_gpu_mem_fraction`` and warns with the value it expects. Read at the release tags:

- v0.6.0, v0.6.1, v0.7.0, v0.7.1: the constant is 0.85f (the backend's warning says 0.85 too; v0.5.0 keeps it
  inside the closed batch-manager library, its backend also says 0.85).
- v0.8.0 on: 0.9f. It changed on main in "Update TensorRT-LLM (#846)" (2024-01-09), first released in 0.8.0;
  the v0.8.0 backend's warning says 0.9. The LLM API's ``KvCacheConfig`` and the PyTorch backend keep 0.9.

So tensorrtllm_backend#300 (0.7-era, "default value of 0.85") and the 0.8+ logs that print 0.9 both follow it.
"""

from __future__ import annotations

from kvplan.engines.version import Version

# (first release of the new value, the new value, the value before it)
DEFAULT_SINCE: tuple[Version, float, float] = ((0, 8), 0.9, 0.85)


def default_fraction(version: Version) -> float:
    """The fraction a deployment of this release uses when none is given."""
    since, new, old = DEFAULT_SINCE
    return new if version >= since else old
