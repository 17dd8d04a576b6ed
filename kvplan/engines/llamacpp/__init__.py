"""llama.cpp: its layout rules (``layout``), GPU budget (``budget``) and start-up log (``log``)."""

from __future__ import annotations

from collections.abc import Sequence

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.dtypes import KVDType
from kvplan.engines.layout import CacheLayout, EngineOptions
from kvplan.engines.protocol import Demand, EngineDefaults, KvCapacity, from_module
from kvplan.engines.version import LATEST, Version
from kvplan.record import dataclass
from kvplan.spec import ModelSpec

if TYPE_CHECKING:
    from kvplan.budgets.base import GpuBudget, Settings


@dataclass(frozen=True)
class LlamaCppEngine(EngineDefaults):
    name: str = "llamacpp"
    title: str = "llama.cpp"
    default_version: str = "current"
    newest_rules: Version = LATEST
    extra_options: frozenset[str] = frozenset({"swa_full", "no_kv_offload"})

    kv_dtypes = from_module("kvplan.engines.llamacpp.layout", "KV_DTYPES")
    settings = from_module("kvplan.engines.llamacpp.settings", "SETTINGS")
    log = from_module("kvplan.engines.llamacpp.log", "LOG")
    sharing = from_module("kvplan.engines.llamacpp.sharing", "SHARING")

    def auto_kv_dtype(self, spec: ModelSpec) -> str:
        return "float16"  # --cache-type-k / -v default

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
        from kvplan.engines.llamacpp import layout

        return layout.layout(spec, kv_dtype, version, options)

    def capacity(self, layouts: Sequence[CacheLayout], kv_bytes: int, version: Version, budget: GpuBudget,
                 demand: Demand) -> KvCapacity:
        from kvplan.engines.llamacpp.budget import host_kv_capacity
        from kvplan.engines.llamacpp.layout import HOST_KV

        if layouts and layouts[0].pool == HOST_KV:
            return host_kv_capacity(layouts, budget, demand, self.sharing)
        return super().capacity(layouts, kv_bytes, version, budget, demand)

    def budget(self, spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
               settings: Settings) -> GpuBudget:
        from kvplan.engines.llamacpp import budget

        return budget.budget(spec, total_bytes, tp, pp, version, demand, settings)


LLAMACPP = LlamaCppEngine()
