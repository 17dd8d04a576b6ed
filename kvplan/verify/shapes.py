"""The tensors verify allocates, derived from the same ``CacheLayout`` ``estimate`` reads.

No torch here. The engine package builds its ``TensorPlan`` (``Engine.tensor_plan``: buffers, views,
blocks); this module adds what the comparison needs (the prediction per component) and checks that
every view lies inside its buffer and that the views add up to the prediction.
"""

from __future__ import annotations

from typing import Any

from kvplan.dtypes import canonical_kv_dtype_name, resolve_kv_dtype
from kvplan.engines import CacheLayout, EngineOptions, get_engine
from kvplan.engines.sharing import SharedSpans, Workload, group_bytes, shared_bytes
from kvplan.engines.tensors import (  # noqa: F401  (re-exported, "X as X": verify's modules read them here)
    DTYPE_BYTES as DTYPE_BYTES,
)
from kvplan.engines.tensors import (
    BlockTable as BlockTable,
)
from kvplan.engines.tensors import (
    BufferSpec as BufferSpec,
)
from kvplan.engines.tensors import (
    LayerInfo as LayerInfo,
)
from kvplan.engines.tensors import (
    TensorPlan as TensorPlan,
)
from kvplan.engines.tensors import (
    ViewSpec as ViewSpec,
)
from kvplan.engines.tensors import (
    component_names as component_names,
)
from kvplan.record import dataclass, field
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
    block_tables: tuple[BlockTable, ...] = ()
    """Paged engines: how each group's sequences reference its blocks (shared ones once)."""

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
    version = eng.version_of(engine_version)[1]
    dtype = resolve_kv_dtype(canonical_kv_dtype_name(kv_dtype), eng.auto_kv_dtype(spec))
    if block_size is not None and block_size <= 0:
        raise VerifyError(f"{block_size} must be a positive integer", field="block_size")
    layout = eng.layout(spec, dtype, version, EngineOptions(block_size=block_size, tp=1))
    if eng.tensor_plan(spec, layout, 1, 1) is None:
        raise VerifyError(f"verify has no tensor layout for {eng.title}: use `kvplan estimate` for it",
                          field="engine")
    return layout


def plan_cache(spec: ModelSpec, layout: CacheLayout, batch: int, context: int,
               workload: Workload | None = None) -> CachePlan:
    """Every tensor ``layout.engine`` allocates for ``batch`` sequences of ``context`` tokens; with a
    ``workload`` (``workload.context == context``), ``batch`` requests of its samples or beams, what
    the engine stores once allocated once (docs/sharing.md)."""
    if batch <= 0 or context <= 0:
        raise VerifyError("batch and context must be positive", field="batch" if batch < 1 else "context")
    eng = get_engine(layout.engine)
    tensors = eng.tensor_plan(spec, layout, batch, context, workload)
    if tensors is None:
        raise VerifyError(f"verify has no tensor layout for engine '{layout.engine}'")
    predicted = predicted_bytes(layout, batch, context, workload)
    spans = None
    if workload is not None:
        rule = eng.sharing.bind(layout)
        spans = {i: rule.spans(g, workload) for i, g in enumerate(layout.groups)}
    plan = CachePlan(
        model_id=spec.id, engine=layout.engine, engine_version=layout.engine_version,
        kv_dtype=layout.kv_dtype.name, block_size=layout.block_size, batch=batch, context=context,
        predicted_bytes=predicted,
        components=_components(layout, component_names(layout), batch, context, spans,
                               workload.samples if workload is not None else 1),
        buffers=tensors.buffers, layers=tensors.layers, num_blocks=tensors.num_blocks,
        group_size=tensors.group_size, padding_layers=tensors.padding_layers, notes=tensors.notes,
        block_tables=tensors.block_tables,
    )
    _check(plan)
    return plan


def predicted_bytes(layout: CacheLayout, batch: int, context: int, workload: Workload | None = None) -> int:
    """What ``kvplan estimate`` prints for ``batch`` requests of ``context`` tokens: the engine's sharing
    applied by the arithmetic estimate uses (kvplan.engines.sharing), never a copy of it."""
    if workload is None:
        return layout.total_bytes(context, batch)
    if workload.context != context:
        raise VerifyError(f"internal: a workload of {workload.context} tokens planned at {context}")
    return shared_bytes(layout, get_engine(layout.engine).sharing, workload, batch)


def _components(layout: CacheLayout, names: dict[int, str], batch: int, context: int,
                spans: dict[int, SharedSpans] | None = None, samples: int = 1) -> tuple[Component, ...]:
    acc: dict[str, list[Any]] = {}  # name -> [kind, layers, bytes, a group of them]
    for i, g in enumerate(layout.groups):
        if i not in names:
            continue
        entry = acc.setdefault(names[i], ["padding" if g.padding else g.kind, 0, 0, g])
        entry[1] += g.count
        if spans is None:
            entry[2] += g.count * g.layer_bytes(context, batch)
        else:
            entry[2] += g.count * group_bytes(g, spans[i], context, batch, samples)
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
    if plan.block_tables:  # the groups' regions tile the pool: no block allocated outside a table's reach
        end = 0
        for table in plan.block_tables:
            if table.first_block != end:
                raise VerifyError(f"internal: a block table starts at block {table.first_block}, not {end}")
            end += table.blocks
        if end != plan.num_blocks:
            raise VerifyError(f"internal: the block tables reach {end} blocks of the pool's {plan.num_blocks}")
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


# --------------------------------------------------------------------------------------- workload

@dataclass(frozen=True)
class VerifyWorkload:
    """What ``verify`` allocates beyond plain sequences, resolved exactly as ``kvplan.estimate`` does."""

    spec: ModelSpec
    """The layers the cache holds: the target's, plus a draft's or MTP layers."""
    context: int
    """Tokens per sequence as the user gave them (prompt + output)."""
    alloc_context: int
    """``context`` plus the speculative slots each sequence holds."""
    workload: Workload | None
    speculation: Any
    extra: int
    notes: tuple[str, ...]
    estimate_kwargs: dict[str, Any]
    """The same request for ``kvplan.estimate``, to compare its row with the tensors."""


def resolve_workload(spec: ModelSpec, engine: str, context: int | None, *, prompt_len: int | None = None,
                     output_len: int | None = None, shared_prefix: int = 0, n: int = 1, beam_width: int = 1,
                     speculative_method: str | None = None, num_speculative_tokens: int | None = None,
                     speculative_model: Any = None, pp: int = 1) -> VerifyWorkload:
    """The context, the speculative layers and slots, and what requests share, as ``estimate`` reads
    the same arguments (``kvplan/estimate.py``): verify threads them, the rules stay the engines'."""
    from kvplan.plan import check_samples
    from kvplan.workload import speculation_from, split_contexts

    check_samples(n, beam_width)  # more than vLLM's VLLM_MAX_N_SEQUENCES: refused as max-batch refuses it
    contexts, splits = split_contexts([context] if context is not None else None, prompt_len, output_len)
    (context,) = contexts
    eng = get_engine(engine)
    speculation = speculation_from(speculative_method, num_speculative_tokens, speculative_model, None)
    target, extra = spec, 0
    notes: tuple[str, ...] = ()
    if speculation is not None:
        sp = eng.speculate(spec, speculation, pp)  # vLLM refuses pp > 1 (field=pp)
        target, extra, notes = sp.spec, sp.extra_tokens, tuple(sp.notes)
    workload = None
    if splits is not None or shared_prefix or n != 1 or beam_width != 1:
        prompt, output = (splits or [(context, 0)])[0]
        # speculative slots are each sequence's own, after its output (as estimate counts them)
        workload = Workload(prompt, output + extra, shared_prefix, n, beam_width,
                            speculation.method if speculation is not None else None)
        eng.sharing.check(workload)
        notes = (*eng.sharing.notes(workload), *notes)
    kwargs: dict[str, Any] = {}
    if workload is not None:
        kwargs.update(prompt_len=workload.prompt_len, output_len=workload.output_len - extra,
                      shared_prefix=shared_prefix, n=n, beam_width=beam_width)
    if speculation is not None:
        kwargs.update(speculative_method=speculation.method,
                      num_speculative_tokens=speculation.num_speculative_tokens, speculative_model=speculation.draft)
    return VerifyWorkload(target, context, context + extra, workload, speculation, extra, notes, kwargs)


def workload_dict(work: VerifyWorkload, batch: int) -> dict[str, Any] | None:
    """The JSON form of what a sharing or speculative workload allocates (None for plain sequences)."""
    w, sp = work.workload, work.speculation
    if w is None and sp is None:
        return None
    return {"prompt_len": w.prompt_len if w is not None else work.context,
            "output_len": w.output_len - work.extra if w is not None else 0,
            "shared_prefix": w.shared_prefix if w is not None else 0, "n": w.n if w is not None else 1,
            "beam_width": w.beam_width if w is not None else 1,
            "sequences": batch * (w.samples if w is not None else 1),
            "speculative_method": sp.method if sp is not None else None,
            "num_speculative_tokens": sp.num_speculative_tokens if sp is not None else None,
            "extra_slots": work.extra, "draft": sp.draft.id if sp is not None and sp.draft is not None else None}
