"""Hugging Face transformers (``hf``: DynamicCache, ``hf-static``: StaticCache): layout rules
(``layout``), the GPU budget of ``generate`` (``budget``) and the tensors ``verify`` allocates
(``tensors``)."""

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
    from kvplan.budgets.base import GpuBudget, Settings
    from kvplan.engines.hf.activation import Estimate
    from kvplan.engines.speculative import Speculation, SpeculativeLayout


@dataclass(frozen=True)
class TransformersEngine(EngineDefaults):
    name: str = "hf"
    title: str = "transformers (DynamicCache)"
    default_version: str = "5.23"
    newest_rules: Version = (5, 23)
    static: bool = False
    library: str = "transformers"
    """The Python package whose cache objects hold this layout (what ``verify --activation`` measures)."""
    # transformers' QuantizedCache (hf/quantized.py); hf-static refuses them with its reason
    extra_options: frozenset[str] = frozenset({"kv_cache", "backend", "nbits", "residual_length", "q_group_size",
                                               "axis_key", "axis_value", "prompt_len", "evict", "press",
                                               "compression_ratio"})

    kv_dtypes = from_module("kvplan.engines.hf.layout", "KV_DTYPES")
    settings = from_module("kvplan.engines.hf.settings", "SETTINGS")
    sharing = from_module("kvplan.engines.hf.sharing", "SHARING")
    tensor_plan = from_module("kvplan.engines.hf.tensors", "plan_tensors")

    def auto_kv_dtype(self, spec: ModelSpec) -> str:
        return spec.dtype

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
        from kvplan.engines.hf import layout

        return layout.layout(spec, kv_dtype, version, options, static=self.static, name=self.name, title=self.title)

    def budget(self, spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
               settings: Settings) -> GpuBudget:
        from kvplan.engines.hf import budget

        return budget.budget(spec, total_bytes, tp, pp, version, demand, settings)

    def prefill_activation(self, spec: ModelSpec, batch: int, tokens: int) -> Estimate:
        """The activation peak of one prefill forward (what ``verify --activation`` measures)."""
        from kvplan.engines.hf.activation import prefill_activation

        return prefill_activation(spec, batch, tokens)

    def speculate(self, spec: ModelSpec, speculation: Speculation, pp: int) -> SpeculativeLayout:
        from kvplan.engines.hf.speculative import speculate

        return speculate(spec, speculation, pp, static=self.static)

    def capacity(self, layouts: Sequence[CacheLayout], kv_bytes: int, version: Version, budget: GpuBudget,
                 demand: Demand) -> KvCapacity:
        cap = super().capacity(layouts, kv_bytes, version, budget, demand)
        from kvplan.engines.hf.speculative import one_sequence

        return one_sequence(layouts, demand, cap)


HF = TransformersEngine()
HF_STATIC = TransformersEngine(name="hf-static", title="transformers (StaticCache)", static=True)
