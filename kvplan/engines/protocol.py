"""The one interface every engine package implements, and the defaults most engines share.

``estimate``, ``max_batch``, ``verify`` and ``check`` reach an engine only through this protocol:
its layout rules (``layout``, ``stage_layouts``), its GPU budget (``budget``), its pool and admission
(``capacity``), the serve flags it parses (``serve``), the start-up log it prints (``log``) and the tensors
``verify`` allocates (``tensor_plan``). Nothing outside ``kvplan/engines/<engine>/`` tests an engine's name.
What a deployment asks of the KV cache and what a pool serves (``Demand``, ``KvCapacity``) are in
``capacity.py``, which the shared pool rules (``token_pool.py``) read too; they are re-exported here.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Protocol
else:
    Protocol = object  # a protocol is for type checkers: at run time nothing subclasses or checks it

from kvplan.dtypes import KVDType
from kvplan.engines.capacity import Demand, KvCapacity
from kvplan.engines.layout import CacheLayout, EngineOptions
from kvplan.engines.version import Version, newer_than_known, parse_version
from kvplan.errors import UsageError
from kvplan.spec import ModelSpec

if TYPE_CHECKING:
    from kvplan.budgets.base import GpuBudget, MemoryItem, Settings
    from kvplan.engines.device import DeviceShare
    from kvplan.engines.launch import Launch
    from kvplan.engines.log_format import LogReader
    from kvplan.engines.offload import OffloadTier
    from kvplan.engines.serve_format import ServeFlags
    from kvplan.engines.sharing import SharingRule, Workload
    from kvplan.engines.speculative import Speculation, SpeculativeLayout
    from kvplan.engines.tensors import TensorPlan

__all__ = ["Demand", "Engine", "EngineDefaults", "KvCapacity", "check_options", "from_module", "make_engine_options",
           "refuse_uneven_heads"]


class Engine(Protocol):
    # read-only members: the engines are frozen dataclasses (a plain annotation here would ask for settable ones)
    @property
    def name(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def default_version(self) -> str: ...

    @property
    def newest_rules(self) -> Version: ...

    @property
    def kv_dtypes(self) -> frozenset[str]:
        """KV dtype names this engine accepts (canonical names; 'auto' is always accepted)."""
        ...

    @property
    def serve(self) -> ServeFlags | None:
        """How ``kvplan check`` reads this engine's launch command, where it has one kvplan reads."""
        ...

    @property
    def log(self) -> LogReader | None:
        """How ``kvplan log`` reads this engine's start-up log (``engines/<engine>/log.py``), where it has one."""
        ...

    @property
    def launch(self) -> Launch | None:
        """The command that starts a planned deployment (``kvplan fit``), where kvplan writes one."""
        ...

    @property
    def vendors(self) -> frozenset[str] | None:
        """GPU vendors the engine runs on; None: any (a plan for another vendor's GPU is refused by field)."""
        ...

    @property
    def memory_fraction(self) -> tuple[str, str] | None:
        """(``Settings`` field, engine flag) of the memory fraction the engine takes; None where it has none."""
        ...

    @property
    def extra_options(self) -> frozenset[str]:
        """``EngineOptions`` fields beyond block_size and tp that this engine has (llama.cpp: swa_full)."""
        ...

    @property
    def unfit(self) -> str:
        """What the engine does when one sequence of max_model_len does not fit ("" where it refuses to start)."""
        ...

    @property
    def sharing(self) -> SharingRule:
        """What the engine stores once: a common prefix, the prompt of parallel samples or beams."""
        ...

    @property
    def dp_shares_experts(self) -> bool:
        """Whether the data-parallel ranks of a MoE model share one copy of the routed experts by default."""
        ...

    def auto_kv_dtype(self, spec: ModelSpec) -> str: ...

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout: ...

    def stage_layouts(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions,
                      pp: int) -> list[CacheLayout]: ...

    def check_parallel(self, spec: ModelSpec, tp: int) -> None: ...

    def version_notes(self, version: Version) -> list[str]: ...

    def version_of(self, text: str | None) -> tuple[str, Version]: ...

    def budget(self, spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
               settings: Settings) -> GpuBudget: ...

    def capacity(self, layouts: Sequence[CacheLayout], kv_bytes: int, version: Version, budget: GpuBudget,
                 demand: Demand) -> KvCapacity: ...

    def tensor_plan(self, spec: ModelSpec, layout: CacheLayout, batch: int, context: int,
                    workload: Workload | None = None) -> TensorPlan | None: ...

    def admission(self, layout: CacheLayout) -> Callable[[Sequence[int]], list[int]] | None: ...

    def shared_admission(self, layout: CacheLayout, workload: Workload, batch: int) -> int | None:
        """``admission`` for ``batch`` requests of a workload that shares a prefix, samples or beams, what
        they share counted once (the figure max-batch counts); None where admission is what the layout holds."""
        return None

    def speculate(self, spec: ModelSpec, speculation: Speculation, pp: int) -> SpeculativeLayout: ...

    def offload_tier(self, layouts: Sequence[CacheLayout], version: Version, options: EngineOptions, tp: int,
                     demand: Demand, capacity: KvCapacity) -> OffloadTier | None: ...

    def weights_overflow(self, plan: Any, settings: Settings, total_bytes: int) -> bool:
        """Whether a plan like ``plan`` (the same model, settings, parallelism and requests; another GPU of the same
        vendor, or another KV cache dtype) surely does not fit a GPU of ``total_bytes``: its weights
        (``plan.per_gpu.weights_bytes``, which neither changes) leave no KV memory there, by this engine's own budget.
        False where unsure: the caller then plans it (``kvplan check``'s fixes skip the larger GPUs too small to hold
        the weights, and an fp8 KV cache where they overflow the deployment's own GPU)."""
        ...

    def device_share(self, items: Sequence[MemoryItem], total_bytes: int, tp: int, pp: int, version: Version,
                     used_bytes: int) -> DeviceShare:
        """What one GPU of a deployment (its budget's ``items``, planned with ``device_used_bytes`` =
        ``used_bytes``) takes once started beside ``used_bytes`` held by other processes, and whether it starts."""
        ...


class from_module:  # noqa: N801 - used like a decorator-less property
    """An engine attribute read from a module of its package on first use (keeps ``import kvplan`` and
    the estimate fast path from importing every engine's flags, logs and sharing rules). A module function
    whose signature is the protocol method's (``plan_tensors``, ``speculate``) stands in for the method."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        import sys

        module = sys.modules.get(self.module)
        if module is None:  # importlib.import_module, less the import of importlib at start-up
            __import__(self.module)
            module = sys.modules[self.module]
        return getattr(module, self.name)


class EngineDefaults:
    """Behaviour most engines share; an engine package overrides what its engine does differently."""

    name: str
    title: str
    default_version: str
    newest_rules: Version
    serve: ServeFlags | None = None
    log: LogReader | None = None
    launch: Launch | None = None
    """The command that starts a planned deployment (``engines/<engine>/launch.py``); None: kvplan writes none."""
    vendors: frozenset[str] | None = None
    """GPU vendors the engine runs on (``kvplan.hardware.VENDORS``); None: any."""
    memory_fraction: tuple[str, str] | None = None
    """The fraction of the GPU the engine takes (``Settings`` field, the engine's flag), which ``--solve
    utilization`` finds; None where its cache is sized otherwise."""
    extra_options: frozenset[str] = frozenset()
    unfit: str = ""
    dp_shares_experts: bool = False
    """Whether the data-parallel ranks of a MoE model share one copy of the routed experts by default (the
    plan's ``expert_parallel`` when it is not given)."""

    @property
    def sharing(self) -> SharingRule:
        """Nothing stored once, no rule for samples or beams (refused by name)."""
        from kvplan.engines.sharing import SharingRule

        return SharingRule(title=self.title)

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version,
               options: EngineOptions) -> CacheLayout:  # pragma: no cover - every engine defines it
        raise NotImplementedError

    def stage_layouts(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions,
                      pp: int) -> list[CacheLayout]:
        """Each pipeline stage laid out on its own (vLLM overrides: it groups the whole model first)."""
        from kvplan.parallel import stage_specs

        return [self.layout(stage, kv_dtype, version, options) for stage in stage_specs(spec, pp)]

    def check_parallel(self, spec: ModelSpec, tp: int) -> None:
        return None

    def weights_overflow(self, plan: Any, settings: Settings, total_bytes: int) -> bool:
        """No bound (``Engine.weights_overflow``): every GPU is planned."""
        return False

    def version_notes(self, version: Version) -> list[str]:
        return newer_than_known(self.title, version, self.newest_rules)

    def version_of(self, text: str | None) -> tuple[str, Version]:
        """The release asked for (None: the engine's default; an empty text is refused) and its tuple."""
        chosen = self.default_version if text is None else text
        return chosen, parse_version(chosen)

    def capacity(self, layouts: Sequence[CacheLayout], kv_bytes: int, version: Version, budget: GpuBudget,
                 demand: Demand) -> KvCapacity:
        from kvplan.engines.token_pool import byte_pool_capacity

        return byte_pool_capacity(layouts, kv_bytes, demand, concurrency_from_tokens=False,
                                  sharing=self.sharing_for(demand))

    def sharing_for(self, demand: Demand) -> SharingRule | None:
        """The engine's ``sharing`` rule where the demand's requests share something (all a byte pool reads it
        for), else None: a plain plan does not import the engine's sharing module (a check's start)."""
        from kvplan.engines.sharing import shares

        return self.sharing if shares(demand) else None

    def tensor_plan(self, spec: ModelSpec, layout: CacheLayout, batch: int, context: int,
                    workload: Workload | None = None) -> TensorPlan | None:
        """The tensors ``verify`` allocates for ``batch`` requests of ``context`` tokens (with a
        ``workload``: its samples or beams, and what the engine stores once); None where kvplan has no
        tensor layout for the engine."""
        return None

    def admission(self, layout: CacheLayout) -> Callable[[Sequence[int]], list[int]] | None:
        """Bytes the engine reserves to admit one request of each given length (a sweep's block of contexts at
        once), where it admits by a rule of its own (vLLM's ``max_memory_usage_bytes``); None where admission is
        what the layout holds."""
        return None

    def speculate(self, spec: ModelSpec, speculation: Speculation, pp: int) -> SpeculativeLayout:
        """The layers and slots speculative decoding adds; refused where kvplan has no rule."""
        raise UsageError(f"kvplan has no speculative-decoding rule for {self.title}", field="speculative_method")

    def shared_admission(self, layout: CacheLayout, workload: Workload, batch: int) -> int | None:
        """``admission`` with what the workload's requests share counted once; None where admission is what
        the layout holds."""
        return None

    def offload_tier(self, layouts: Sequence[CacheLayout], version: Version, options: EngineOptions, tp: int,
                     demand: Demand, capacity: KvCapacity) -> OffloadTier | None:
        """The host-memory KV tier the options ask for (``engines/offload.py`` ``OffloadTier``), or None."""
        return None

    def device_share(self, items: Sequence[MemoryItem], total_bytes: int, tp: int, pp: int, version: Version,
                     used_bytes: int) -> DeviceShare:
        """Refused by name: kvplan has no rule for how this engine takes memory beside other processes."""
        raise UsageError(f"kvplan has no rule for how {self.title} shares a GPU with other processes",
                         field="engine")


def make_engine_options(**values: Any) -> EngineOptions:
    """``EngineOptions`` from keyword values, an unknown name refused by name (estimate and plan)."""
    global _OPTION_NAMES
    if _OPTION_NAMES is None:
        from kvplan.record import field_names

        _OPTION_NAMES = frozenset(field_names(EngineOptions))
    for name in values:
        if name not in _OPTION_NAMES:
            raise UsageError(f"unknown engine option '{name}'", field=name)
    return EngineOptions(**values)


_OPTION_NAMES: frozenset[str] | None = None
_CHECKED: set[tuple[Any, EngineOptions]] = set()
"""(engine, options) pairs found acceptable: every plan checks its options (``kvplan check`` makes thousands)."""


def check_options(engine: Engine, options: EngineOptions) -> None:
    """Refuse an option the engine does not have, naming it (never silently ignore it)."""
    try:
        key = (engine, options)
        if key in _CHECKED:
            return
    except TypeError:  # an option holding a mutable value: checked each time
        key = None
    _check_options(engine, options)
    if key is not None and len(_CHECKED) < 4096:
        _CHECKED.add(key)


def _check_options(engine: Engine, options: EngineOptions) -> None:
    from kvplan.record import field_defaults, field_names

    defaults = field_defaults(options)
    for name in field_names(options):
        if name in ("block_size", "tp") or (name in defaults and getattr(options, name) == defaults[name]):
            continue
        if name not in engine.extra_options:
            raise UsageError(f"{engine.title} has no {name.replace('_', '-')} option", field=name)


def refuse_uneven_heads(title: str, spec: ModelSpec, tp: int) -> None:
    """Engines that shard attention heads evenly refuse a tp that does not divide them."""
    heads = spec.num_attention_heads
    if heads and heads % tp:
        raise UsageError(f"{title} refuses tensor parallelism {tp}: the model's {heads} attention heads "
                         "do not divide by it", field="tp")
