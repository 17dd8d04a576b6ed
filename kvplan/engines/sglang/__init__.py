"""SGLang: its layout rules (``layout``), GPU budget (``budget``), serve flags (``flags``) and
start-up log (``log``)."""

from __future__ import annotations

from collections.abc import Sequence

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

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
from kvplan.record import dataclass, replace
from kvplan.spec import ModelSpec

if TYPE_CHECKING:
    from typing import Any

    from kvplan.budgets.base import GpuBudget, MemoryItem, Settings
    from kvplan.engines.device import DeviceShare
    from kvplan.engines.offload import OffloadTier

_SPLIT_POOL_NOTE = ("SGLang splits full and sliding-window pools by swa_full_tokens_ratio (0.8); kvplan treats the "
                    "KV memory as one pool, which is optimistic when the load does not match that split")


@dataclass(frozen=True)
class SGLangEngine(EngineDefaults):
    name: str = "sglang"
    title: str = "SGLang"
    default_version: str = "latest"
    newest_rules: Version = (0, 5, 23)
    memory_fraction: tuple[str, str] | None = ("mem_fraction_static", "--mem-fraction-static")
    # the hierarchical cache's host pool (sglang/offload.py); --cpu-offload-gb (sglang/budget.py)
    extra_options: frozenset[str] = frozenset({"hicache_ratio", "hicache_size_gb", "offload_link",
                                               "cpu_offload_bytes"})

    kv_dtypes = from_module("kvplan.engines.sglang.layout", "KV_DTYPES")
    settings = from_module("kvplan.engines.sglang.settings", "SETTINGS")
    serve = from_module("kvplan.engines.sglang.flags", "SERVE")
    launch = from_module("kvplan.engines.sglang.launch", "launch")
    log = from_module("kvplan.engines.sglang.log", "LOG")
    sharing = from_module("kvplan.engines.sglang.sharing", "SHARING")
    tensor_plan = from_module("kvplan.engines.sglang.tensors", "plan_tensors")
    speculate = from_module("kvplan.engines.sglang.speculative", "speculate")

    def auto_kv_dtype(self, spec: ModelSpec) -> str:
        return spec.dtype

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
        from kvplan.engines.sglang import layout

        return layout.layout(spec, kv_dtype, version, options)

    def check_parallel(self, spec: ModelSpec, tp: int) -> None:
        refuse_uneven_heads(self.title, spec, tp)

    def weights_overflow(self, plan: Any, settings: Settings, total_bytes: int) -> bool:
        """budget.py: KV memory = free - weights - int(free x (1 - fraction)), free = total - CUDA context - other
        processes <= total (none of it read from the KV dtype), at most free x fraction - weights + 1 where free >= 0
        and below 0 where it is not. With the fraction given (at most 1), the plan's fraction (SGLang's own factors
        on it: the model, release and vendor's, never the GPU's) holds on every GPU, so weights over total x fraction
        (+ 1 MiB for rounding) leave less than 0 bytes, which no request fits (token_pool.py; a hybrid model's token
        pool is then empty). Not with speculation (before 0.5.7 the pool grows by the draft's headroom), nor with a
        KV memory given."""
        if settings.kv_cache_memory_bytes is not None or settings.mem_fraction_static is None \
                or plan.speculation is not None:
            return False
        fraction = plan.engine_defaults.get("mem_fraction_static")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            return False
        return bool(plan.per_gpu.weights_bytes > total_bytes * fraction + (1 << 20))

    def device_share(self, items: Sequence[MemoryItem], total_bytes: int, tp: int, pp: int, version: Version,
                     used_bytes: int) -> DeviceShare:
        from kvplan.engines.sglang.device import device_share

        return device_share(items, total_bytes, used_bytes)

    def budget(self, spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
               settings: Settings) -> GpuBudget:
        from kvplan.engines.sglang import budget

        return budget.budget(spec, total_bytes, tp, pp, version, demand, settings)

    def capacity(self, layouts: Sequence[CacheLayout], kv_bytes: int, version: Version, budget: GpuBudget,
                 demand: Demand) -> KvCapacity:
        from kvplan.engines.token_pool import byte_pool_capacity

        windowed = any(g.tokens.windowed for layout in layouts for g in layout.groups)
        notes: tuple[str, ...] = (_SPLIT_POOL_NOTE,) if windowed else ()
        apart = None  # draft_apart's answer without speculation, without importing its module
        if demand.speculative is not None:
            from kvplan.engines.sglang.speculative import draft_apart, target_pool

            apart = draft_apart(demand.speculative, version)
        if apart is not None:  # before 0.5.14 the draft's pool is sized apart, outside kv_bytes
            layouts, kv_bytes, more = target_pool(layouts, kv_bytes, apart, version,
                                                  int(budget.defaults.get("max_running_requests", 0)) or None)
            notes = (*notes, *more)
        from kvplan.spec import Recurrent  # loaded with every spec

        if not any(isinstance(g.layer, Recurrent) and g.state is not None for layout in layouts for g in layout.groups):
            # no recurrent state (mamba.per_request_bytes would be 0): mamba.py is not read
            return byte_pool_capacity(layouts, kv_bytes, demand, concurrency_from_tokens=True,
                                      sharing=self.sharing_for(demand), assumptions=notes)
        from kvplan.engines.sglang import mamba

        per_request = mamba.per_request_bytes(layouts)
        if not per_request or not mamba.has_tokens(layouts):  # no state, or no token pool to split it from
            return byte_pool_capacity(layouts, kv_bytes, demand, concurrency_from_tokens=True,
                                      sharing=self.sharing_for(demand), assumptions=notes)
        # a hybrid model: state slots first, the full-attention tokens from what is left (mamba.py)
        given = budget.defaults.get("max_running_requests")
        cut = mamba.split(kv_bytes, per_request, version, int(given) if given else None)
        if demand.speculative is not None:
            notes = (*notes, mamba.SPECULATIVE_NOTE)
        cap = byte_pool_capacity(mamba.token_layouts(layouts), cut.token_bytes, demand, concurrency_from_tokens=True,
                                 sharing=self.sharing_for(demand), assumptions=(*notes, cut.rule))
        whole = max(layout.total_bytes(demand.request_tokens, 1) for layout in layouts)
        running = cut.max_running_requests
        return replace(cap, max_concurrency=min(cap.max_concurrency, running), max_batch=min(cap.max_batch, running),
                       max_context=cap.max_context if demand.batch <= running else 0, request_bytes=whole,
                       fits=cap.fits and running >= 1, state_slots=cut.slots)

    def offload_tier(self, layouts: Sequence[CacheLayout], version: Version, options: EngineOptions, tp: int,
                     demand: Demand, capacity: KvCapacity) -> OffloadTier | None:
        if options.hicache_ratio is None and options.hicache_size_gb is None:
            return None  # no host tier asked (offload_tier's own first answer), without importing its module
        from kvplan.engines.sglang.offload import offload_tier

        return offload_tier(layouts, options, tp, demand, capacity)


SGLANG = SGLangEngine()
