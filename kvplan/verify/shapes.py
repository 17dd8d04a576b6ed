"""The tensors verify allocates, derived from the same ``CacheLayout`` ``estimate`` reads.

No torch here. The engine package builds its ``TensorPlan`` (``Engine.tensor_plan``: buffers, views,
blocks); this module adds what the comparison needs (the prediction per component) and checks that
every view lies inside its buffer and that the views add up to the prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.dtypes import canonical_kv_dtype_name, resolve_kv_dtype
from kvplan.engines import CacheLayout, EngineOptions, get_engine, parse_version
from kvplan.engines.tensors import (  # noqa: F401  (re-exported: verify's modules read them here)
    DTYPE_BYTES,
    BufferSpec,
    LayerInfo,
    TensorPlan,
    ViewSpec,
    component_names,
)
from kvplan.spec import ModelSpec
from kvplan.verify.errors import VerifyError


@dataclass(frozen=True)
class Component:
    """Layers that share one rule (as ``--explain`` groups them), with the bytes estimate predicts."""

    name: str
    kind: str
    layers: int
    predicted_bytes: int
    formula: str


@dataclass(frozen=True)
class CachePlan:
    model_id: str
    engine: str
    engine_version: str
    kv_dtype: str
    """The dtype's canonical name ('auto' resolved)."""
    block_size: int | None
    batch: int
    context: int
    predicted_bytes: int
    """``CacheLayout.total_bytes(context, batch)``: what ``kvplan estimate`` prints."""
    buffers: tuple[BufferSpec, ...]
    components: tuple[Component, ...]
    layers: tuple[LayerInfo, ...]
    num_blocks: int | None = None
    group_size: int | None = None
    padding_layers: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def buffer_bytes(self) -> int:
        return sum(b.nbytes for b in self.buffers)

    def component_of(self, layer: int) -> str:
        for info in self.layers:
            if info.index == layer:
                return info.component
        raise KeyError(layer)


# --------------------------------------------------------------------------------------- layout

def resolve_layout(spec: ModelSpec, engine: str, engine_version: str | None, kv_dtype: str,
                   block_size: int | None) -> CacheLayout:
    """The engine's CacheLayout, built exactly as ``kvplan.estimate`` builds it (tp = 1)."""
    eng = get_engine(engine)
    version = parse_version(engine_version or eng.default_version)
    dtype = resolve_kv_dtype(canonical_kv_dtype_name(kv_dtype), eng.auto_kv_dtype(spec))
    if block_size is not None and block_size <= 0:
        raise VerifyError(f"{block_size} must be a positive integer", field="block_size")
    layout = eng.layout(spec, dtype, version, EngineOptions(block_size=block_size, tp=1))
    if eng.tensor_plan(spec, layout, 1, 1) is None:
        raise VerifyError(f"verify has no tensor layout for {eng.title}: use `kvplan estimate` for it",
                          field="engine")
    return layout


def plan_cache(spec: ModelSpec, layout: CacheLayout, batch: int, context: int) -> CachePlan:
    """Every tensor ``layout.engine`` allocates for ``batch`` sequences of ``context`` tokens."""
    if batch <= 0 or context <= 0:
        raise VerifyError("batch and context must be positive", field="batch" if batch < 1 else "context")
    tensors = get_engine(layout.engine).tensor_plan(spec, layout, batch, context)
    if tensors is None:
        raise VerifyError(f"verify has no tensor layout for engine '{layout.engine}'")
    plan = CachePlan(
        model_id=spec.id, engine=layout.engine, engine_version=layout.engine_version,
        kv_dtype=layout.kv_dtype.name, block_size=layout.block_size, batch=batch, context=context,
        predicted_bytes=layout.total_bytes(context, batch),
        components=_components(layout, component_names(layout), batch, context),
        buffers=tensors.buffers, layers=tensors.layers, num_blocks=tensors.num_blocks,
        group_size=tensors.group_size, padding_layers=tensors.padding_layers, notes=tensors.notes,
    )
    _check(plan)
    return plan


def _components(layout: CacheLayout, names: dict[int, str], batch: int, context: int) -> tuple[Component, ...]:
    acc: dict[str, list] = {}
    for i, g in enumerate(layout.groups):
        if i not in names:
            continue
        entry = acc.setdefault(names[i], ["padding" if g.padding else g.kind, 0, 0, g])
        entry[1] += g.count
        entry[2] += g.count * g.layer_bytes(context, batch)
    out = []
    for name, (kind, count, nbytes, g) in acc.items():
        formula = f"{g.token.formula} per token; tokens {g.held_formula}"
        if g.state is not None:
            formula = f"state {g.state.formula} per sequence"
        if g.padding:
            formula = f"unused layer slots, each a {g.kind} layer's pages: {formula}"
        out.append(Component(name, kind, count, nbytes, formula))
    return tuple(out)


def _check(plan: CachePlan) -> None:
    """Every view inside its buffer, and the views of each component add up to its prediction."""
    by_component: dict[str, int] = {}
    for buf in plan.buffers:
        for view in buf.views:
            if view.offset < 0 or view.end > buf.nbytes:
                raise VerifyError(f"internal: view {view.role} of layer {view.layer} leaves {buf.name}")
            name = plan.component_of(view.layer)
            by_component[name] = by_component.get(name, 0) + view.nbytes
    for comp in plan.components:
        got = by_component.get(comp.name, 0)
        if got != comp.predicted_bytes:
            raise VerifyError(f"internal: the tensors of '{comp.name}' hold {got:,} B but the {plan.engine} rule "
                              f"predicts {comp.predicted_bytes:,} B")
