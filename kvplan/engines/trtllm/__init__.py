"""TensorRT-LLM: its layout rules (``layout``), GPU budget (``budget``), ``trtllm-serve`` flags and
``extra_llm_api_options`` YAML (``flags``), host cache tier (``offload``) and start-up log (``log``)."""

from __future__ import annotations

from collections.abc import Sequence

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.dtypes import KVDType
from kvplan.engines.layout import CacheLayout, EngineOptions
from kvplan.engines.protocol import Demand, EngineDefaults, KvCapacity, from_module
from kvplan.engines.version import Version
from kvplan.record import dataclass
from kvplan.spec import ModelSpec

if TYPE_CHECKING:
    from kvplan.budgets.base import GpuBudget, MemoryItem, Settings
    from kvplan.engines.device import DeviceShare
    from kvplan.engines.offload import OffloadTier


@dataclass(frozen=True)
class TRTLLMEngine(EngineDefaults):
    name: str = "trtllm"
    title: str = "TensorRT-LLM"
    default_version: str = "latest"
    newest_rules: Version = (1, 2)
    # the fraction of the memory free after the weights (KvCacheConfig.free_gpu_memory_fraction)
    memory_fraction: tuple[str, str] | None = ("free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction")
    # CUDA only: TensorRT-LLM builds on TensorRT and CUDA kernels (docs: "Supported Hardware", NVIDIA GPUs)
    vendors: frozenset[str] | None = frozenset({"nvidia"})
    # kv_cache_config.host_cache_size: the secondary block pool (trtllm/offload.py)
    extra_options: frozenset[str] = frozenset({"host_cache_bytes", "offload_link"})
    # KVCacheManager.adjust_window_sizes_for_vswa (tensorrt_llm/_torch/pyexecutor/resource_manager.py): when
    # one sequence cannot fit, the larger attention windows are shrunk until it does; the engine starts
    unfit: str = ("TensorRT-LLM still starts: it shrinks the attention window to what one sequence can hold "
                  "(KVCacheManager.adjust_window_sizes_for_vswa), so longer requests lose their oldest tokens, "
                  "unless --fail_fast_on_attention_window_too_large makes it refuse")

    kv_dtypes = from_module("kvplan.engines.trtllm.layout", "KV_DTYPES")
    settings = from_module("kvplan.engines.trtllm.settings", "SETTINGS")
    serve = from_module("kvplan.engines.trtllm.flags", "SERVE")
    launch = from_module("kvplan.engines.trtllm.launch", "launch")
    log = from_module("kvplan.engines.trtllm.log", "LOG")
    sharing = from_module("kvplan.engines.trtllm.sharing", "SHARING")
    tensor_plan = from_module("kvplan.engines.trtllm.tensors", "plan_tensors")
    speculate = from_module("kvplan.engines.trtllm.speculative", "speculate")

    def auto_kv_dtype(self, spec: ModelSpec) -> str:
        return spec.dtype

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
        from kvplan.engines.trtllm import layout

        return layout.layout(spec, kv_dtype, version, options)

    def device_share(self, items: Sequence[MemoryItem], total_bytes: int, tp: int, pp: int, version: Version,
                     used_bytes: int) -> DeviceShare:
        from kvplan.engines.trtllm.device import device_share

        return device_share(items, total_bytes, used_bytes)

    def budget(self, spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
               settings: Settings) -> GpuBudget:
        from kvplan.engines.trtllm import budget

        return budget.budget(spec, total_bytes, tp, pp, version, demand, settings)

    def capacity(self, layouts: Sequence[CacheLayout], kv_bytes: int, version: Version, budget: GpuBudget,
                 demand: Demand) -> KvCapacity:
        from kvplan.engines.token_pool import byte_pool_capacity

        # "Allocated ... for max tokens in paged KV cache (N)": concurrency is N / max_seq_len
        return byte_pool_capacity(layouts, kv_bytes, demand, concurrency_from_tokens=True,
                                  sharing=self.sharing_for(demand))

    def offload_tier(self, layouts: Sequence[CacheLayout], version: Version, options: EngineOptions, tp: int,
                     demand: Demand, capacity: KvCapacity) -> OffloadTier | None:
        if not options.host_cache_bytes:
            return None  # no host cache asked (offload_tier's own first answer), without importing its module
        from kvplan.engines.trtllm.offload import offload_tier

        return offload_tier(layouts, options, tp, demand, capacity)


TRTLLM = TRTLLMEngine()
