"""vLLM (V1 engine): every rule kvplan knows about vLLM, one module each.

- ``layout``: block sizes and the tokens each layer kind holds;
- ``pool``: the KV-cache groups of hybrid models, page unification, padding slots, PP stages;
- ``admission``: blocks, the logged token count, concurrency and the longest request that fits;
- ``budget``: how a V1 worker divides a GPU's memory before the KV cache;
- ``flags``: ``vllm serve`` flags as vLLM parses them (read by ``kvplan check``);
- ``log``: its start-up log lines and how a calibration from them applies (read by ``kvplan log``);
- ``tensors``: the buffers and views ``verify`` allocates, as the model runner does.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

from kvplan.dtypes import KVDType
from kvplan.engines.layout import CacheLayout, EngineOptions
from kvplan.engines.protocol import (
    Demand,
    EngineDefaults,
    KvCapacity,
    from_module,
    refuse_uneven_heads,
)
from kvplan.engines.version import Version
from kvplan.record import dataclass
from kvplan.spec import ModelSpec

if TYPE_CHECKING:
    from kvplan.budgets.base import GpuBudget, MemoryItem, Settings
    from kvplan.engines.device import DeviceShare
    from kvplan.engines.offload import OffloadTier
    from kvplan.engines.sharing import Workload
    from kvplan.engines.speculative import Speculation, SpeculativeLayout


@dataclass(frozen=True)
class VLLMEngine(EngineDefaults):
    name: str = "vllm"
    title: str = "vLLM"
    default_version: str = "0.33"
    newest_rules: Version = (0, 33)
    memory_fraction: tuple[str, str] | None = ("gpu_memory_utilization", "--gpu-memory-utilization")
    # the scheduling mode (layout.py) and host-memory tiers (offload.py)
    extra_options: frozenset[str] = frozenset({"async_scheduling", "kv_offloading_bytes", "swap_space_bytes",
                                               "offload_link", "cpu_offload_bytes", "lmcache"})
    # FusedMoEParallelConfig.make (model_executor/layers/fused_moe/config.py): with --data-parallel-size the MoE
    # layers shard their experts over tp x dp devices, by expert (--enable-expert-parallel) or by tensor
    # (flatten_tp_across_dp_and_pcp): either way each GPU holds 1 / (tp x dp) of them
    dp_shares_experts: bool = True

    kv_dtypes = from_module("kvplan.engines.vllm.layout", "KV_DTYPES")
    settings = from_module("kvplan.engines.vllm.settings", "SETTINGS")
    combine_settings = from_module("kvplan.engines.vllm.settings", "combine")
    serve = from_module("kvplan.engines.vllm.flags", "SERVE")
    launch = from_module("kvplan.engines.vllm.launch", "launch")
    log = from_module("kvplan.engines.vllm.log", "LOG")
    sharing = from_module("kvplan.engines.vllm.sharing", "SHARING")
    tensor_plan = from_module("kvplan.engines.vllm.tensors", "plan_tensors")

    def auto_kv_dtype(self, spec: ModelSpec) -> str:
        return spec.dtype

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
        from kvplan.engines.vllm import layout

        return layout.layout(spec, kv_dtype, version, options)

    def stage_layouts(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions,
                      pp: int) -> list[CacheLayout]:
        """vLLM groups the whole model's layers first, then projects the groups on each stage."""
        if pp == 1:
            return [self.layout(spec, kv_dtype, version, options)]
        from kvplan.engines.vllm.pool import project_stages
        from kvplan.parallel import pp_partitions

        whole = self.layout(spec, kv_dtype, version, options)
        return project_stages(whole, spec.num_layers, pp_partitions(spec.num_layers, pp))

    def check_parallel(self, spec: ModelSpec, tp: int) -> None:
        refuse_uneven_heads(self.title, spec, tp)

    def weights_overflow(self, plan: Any, settings: Settings, total_bytes: int) -> bool:
        """budget.py: KV memory = ceil(total x utilization) - weights - activation - non_torch - CUDA graphs (- other
        processes), none of it read from the KV dtype; the utilization is the plan's (given, or the release's
        default: no GPU changes it) and the rest is never negative (Settings refuses a negative measured item), so
        weights of at least ceil(total x utilization) leave none, and admission.py fits only a pool of more than 0
        bytes. A KV memory given (--kv-cache-memory) does not look at the GPU's memory."""
        if settings.kv_cache_memory_bytes is not None:
            return False
        util = plan.engine_defaults.get("gpu_memory_utilization")
        if isinstance(util, bool) or not isinstance(util, (int, float)):
            return False
        import math

        return bool(plan.per_gpu.weights_bytes >= math.ceil(total_bytes * util))

    def budget(self, spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
               settings: Settings) -> GpuBudget:
        from kvplan.engines.vllm import budget

        return budget.budget(spec, total_bytes, tp, pp, version, demand, settings)

    def capacity(self, layouts: Sequence[CacheLayout], kv_bytes: int, version: Version, budget: GpuBudget,
                 demand: Demand) -> KvCapacity:
        from kvplan.engines.vllm import admission

        batched = int(budget.defaults.get("max_num_batched_tokens", admission.DEFAULT_BATCHED_TOKENS))
        cap = admission.capacity(layouts, kv_bytes, version, batched, demand, demand.limit)
        if demand.shared_prefix or demand.n > 1 or demand.beam_width > 1:
            from kvplan.engines.vllm.sharing import PREFIX_CACHED_NOTE, shared_capacity
            from kvplan.record import replace

            requests, longest = shared_capacity(layouts, kv_bytes, batched, demand, cap.max_context)
            notes = (PREFIX_CACHED_NOTE,) if demand.shared_prefix else ()
            cap = replace(cap, max_batch=requests, max_context=longest, assumptions=(*cap.assumptions, *notes))
        return cap

    def speculate(self, spec: ModelSpec, speculation: Speculation, pp: int) -> SpeculativeLayout:
        from kvplan.engines.vllm.speculative import speculate

        if pp > 1:
            from kvplan.errors import UsageError

            raise UsageError("kvplan has no rule for vLLM speculative decoding with pipeline parallelism",
                             field="pp")
        return speculate(spec, speculation)

    def offload_tier(self, layouts: Sequence[CacheLayout], version: Version, options: EngineOptions, tp: int,
                     demand: Demand, capacity: KvCapacity) -> OffloadTier | None:
        if options.lmcache is not None:  # LMCacheConnectorV1's local tiers (lmcache.py)
            from kvplan.engines.vllm.lmcache import lmcache_tier

            return lmcache_tier(layouts, options, tp, demand)
        if options.kv_offloading_bytes is None and options.swap_space_bytes is None:
            return None  # no host tier asked (offload_tier's own first answer), without importing its module
        from kvplan.engines.vllm.offload import offload_tier

        return offload_tier(layouts, version, options, tp, demand)

    def device_share(self, items: Sequence[MemoryItem], total_bytes: int, tp: int, pp: int, version: Version,
                     used_bytes: int) -> DeviceShare:
        from kvplan.engines.vllm import device

        return device.device_share(items, total_bytes, tp, pp, version, used_bytes)

    def admission(self, layout: CacheLayout) -> Callable[[Sequence[int]], list[int]] | None:
        """Pool bytes one request of each of the given contexts is admitted with, at the default 8,192 batched
        tokens (``max_admission_blocks_per_request`` x bytes per pool block; padding slots included)."""
        from kvplan.engines.vllm.admission import DEFAULT_BATCHED_TOKENS, vllm_pool

        pool = vllm_pool(layout)
        per_block = pool.bytes_per_block

        def admitted(contexts: Sequence[int]) -> list[int]:
            return [n * per_block for n in pool.blocks_per_request_many(contexts, DEFAULT_BATCHED_TOKENS)]

        return admitted

    def shared_admission(self, layout: CacheLayout, workload: Workload, batch: int) -> int | None:
        """The pool bytes ``shared_capacity`` admits ``batch`` requests of ``workload`` with, at the default
        8,192 batched tokens: ``admission`` with what the requests share counted once."""
        from kvplan.engines.vllm.admission import (
            DEFAULT_BATCHED_TOKENS,
            in_flight_tokens,
            vllm_pool,
        )
        from kvplan.engines.vllm.sharing import shared_admission

        pool = vllm_pool(layout)
        in_flight = in_flight_tokens(pool.in_flight_batches, DEFAULT_BATCHED_TOKENS)
        return shared_admission(layout, pool, workload, in_flight).blocks(batch) * pool.bytes_per_block


VLLM = VLLMEngine()
