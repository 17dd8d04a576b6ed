"""``kvplan.estimate``: KV-cache bytes for every (batch, context, kv dtype) of a sweep.

The engine's ``CacheLayout`` is built once per kv dtype; each point of the sweep then only
evaluates each group's token rule, so sweeps of 10^5 points stay well under a second. With
``lazy=True`` the rows are a ``RowSweep``: made again on each pass and never held whole, so the
renderers stream a sweep of any size in constant memory.
"""

from __future__ import annotations

from _collections_abc import Sequence  # collections.abc's own module: no import of collections
from itertools import islice, repeat

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any, overload
else:
    def overload(func):  # typing.overload's run-time effect that matters here: none (the last definition stands)
        return func

from kvplan._version import __version__
from kvplan.dtypes import canonical_kv_dtype_name, resolve_kv_dtype
from kvplan.engines import DEFAULT_ENGINE, CacheLayout, get_engine
from kvplan.engines.protocol import Engine, check_options, make_engine_options
from kvplan.engines.sharing import SharingRule, Workload
from kvplan.engines.speculative import speculation_dict
from kvplan.engines.version import unstated_version
from kvplan.errors import UsageError
from kvplan.record import dataclass, field
from kvplan.spec import ModelSpec
from kvplan.units import parse_counts
from kvplan.workload import (
    RowSharing,
    SharingTerm,
    sharing_terms,
    speculation_from,
    split_contexts,
)


@dataclass(frozen=True)
class LayerRow:
    """One layer's share of a row (``--by-layer``)."""

    index: int
    kind: str
    tokens_held: int
    """Tokens the layer holds for the whole batch."""
    bytes: int


@dataclass(frozen=True)
class EstimateRow:
    batch: int
    context: int
    kv_dtype: str
    kv_bytes: int
    """Exact bytes the engine holds for ``batch`` sequences of ``context`` tokens."""
    bytes_per_token: float
    """kv_bytes / (batch x context)."""
    layers: tuple[LayerRow, ...] | None = None
    kv_dtype_resolved: str = ""
    """The dtype ``kv_dtype`` stands for ('auto' -> the engine's default)."""
    sharing: RowSharing | None = None
    """With a prompt / output split, a shared prefix, samples or beams: the plain figure beside it."""
    admission_kv_bytes: int | None = None
    """What the engine reserves to admit ``batch`` requests of ``context`` tokens, where that differs in
    kind from what they hold while decoding (vLLM: window + tokens in flight for sliding layers)."""


@dataclass(frozen=True)
class RowBlock:
    """Consecutive rows of a sweep as columns, where the rows are plain (no per-layer breakdown, nothing
    shared): what the writers format without making an ``EstimateRow`` each. Row i is ``batches[i]``,
    ``contexts[i]``, ... with the block's dtype; the values are those the rows would hold."""

    kv_dtype: str
    kv_dtype_resolved: str
    batches: list[int]
    contexts: list[int]
    kv_bytes: list[int]
    bytes_per_token: list[float]
    admission_kv_bytes: list[int] | None
    """None where no row has one, or where the blocks were asked for without it."""

    def rows(self) -> Iterator[EstimateRow]:
        """The block's rows, as the point-by-point path makes them."""
        new_row = object.__new__
        dtype, resolved = self.kv_dtype, self.kv_dtype_resolved
        admitted: Iterable[int | None] = self.admission_kv_bytes if self.admission_kv_bytes is not None else \
            repeat(None)
        for batch, context, kv, per_token, admit in zip(self.batches, self.contexts, self.kv_bytes,
                                                       self.bytes_per_token, admitted):
            row = new_row(EstimateRow)  # EstimateRow(...) less its frozen __setattr__ calls, as in _rows
            row.__dict__.update(batch=batch, context=context, kv_dtype=dtype, kv_bytes=kv,
                                bytes_per_token=per_token, layers=None, kv_dtype_resolved=resolved, sharing=None,
                                admission_kv_bytes=admit)
            yield row


class RowSweep(Sequence[EstimateRow]):
    """The rows of a sweep, computed afresh on every pass (each a generator), so that no pass holds them
    all; ``len`` is known without computing any. Reads like the tuple ``estimate`` returns otherwise:
    indexing computes up to that row, a slice or a comparison materializes. Plain rows also come as
    ``RowBlock``s (``blocks``), a few thousand at a time, for the writers."""

    __slots__ = ("_make", "_count", "_blocks")

    def __init__(self, make: Callable[[], Iterator[EstimateRow]], count: int,
                 blocks: Callable[[bool], Iterator[RowBlock]] | None = None) -> None:
        self._make = make
        self._count = count
        self._blocks = blocks

    def __iter__(self) -> Iterator[EstimateRow]:
        return self._make()

    def blocks(self, admission: bool = True) -> Iterator[RowBlock] | None:
        """The rows as ``RowBlock``s, computed afresh, where they are plain; None otherwise (read the rows).
        ``admission``: with ``admission_kv_bytes`` (JSON shows it; the tables do not, and skip its cost)."""
        return None if self._blocks is None else self._blocks(admission)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> EstimateRow: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[EstimateRow, ...]: ...

    def __getitem__(self, index: int | slice) -> EstimateRow | tuple[EstimateRow, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        at = index + self._count if index < 0 else index
        if not 0 <= at < self._count:
            raise IndexError("row index out of range")
        return next(islice(self._make(), at, None))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (RowSweep, tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a tuple of its rows, but made anew: not hashable

    def __repr__(self) -> str:
        return f"RowSweep({self._count:,} rows)"


@dataclass(frozen=True)
class GroupFormula:
    """The formula behind the layers that share one rule, for ``--explain``."""

    kv_dtype: str
    layers: str
    """Which layers, as ranges: '0-4,6-10,...'."""
    count: int
    kind: str
    bytes_per_token: int
    token_formula: str
    tokens_held_formula: str
    state_bytes: int
    state_formula: str | None


@dataclass(frozen=True)
class ModelSummary:
    id: str
    source: str | None
    model_type: str
    num_layers: int
    layer_kinds: dict[str, int]
    params: int | None
    weights_bytes: int | None
    dtype: str
    max_position_embeddings: int | None
    mtp_layers: int = 0
    mtp_weights_bytes: int | None = None


@dataclass(frozen=True)
class EstimateResult:
    kvplan_version: str
    engine: str
    engine_version: str
    block_size: int | None
    model: ModelSummary
    rows: Sequence[EstimateRow]
    """A tuple; a ``RowSweep`` (iterated lazily, materialized when asked) from ``estimate(lazy=True)``."""
    formulas: tuple[GroupFormula, ...]
    assumptions: tuple[str, ...] = field(default=())
    sharing: Workload | None = None
    """What the requests share (prefix, samples, beams); None when nothing was asked."""
    sharing_terms: tuple[SharingTerm, ...] = ()
    engine_options: dict[str, Any] = field(default_factory=dict)
    """Engine options beyond block size and tp that were given (quantized cache, eviction), JSON-ready."""
    speculation: dict[str, Any] | None = None
    """Speculative decoding as planned (method, k, the slots each sequence holds beyond its context, the
    draft's id), JSON-ready; None when none was asked."""

    def to_dict(self, *, explain: bool = False, rows: list[Any] | None = None) -> dict[str, Any]:
        """The stable JSON form (fields are added over time, never renamed). ``rows``: what to put in place of
        the rows' dictionaries (the streaming JSON writer puts a marker there and writes the rows itself)."""
        out: dict[str, Any] = {
            "kvplan_version": self.kvplan_version,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "block_size": self.block_size,
            "model": {
                "id": self.model.id, "source": self.model.source, "model_type": self.model.model_type,
                "num_layers": self.model.num_layers, "layer_kinds": dict(self.model.layer_kinds),
                "params": self.model.params, "weights_bytes": self.model.weights_bytes,
                "dtype": self.model.dtype, "max_position_embeddings": self.model.max_position_embeddings,
                "mtp_layers": self.model.mtp_layers, "mtp_weights_bytes": self.model.mtp_weights_bytes,
            },
            "rows": [row_dict(row) for row in self.rows] if rows is None else rows,
            "assumptions": list(self.assumptions),
        }
        if self.sharing is not None:
            out["sharing"] = {"shared_prefix": self.sharing.shared_prefix, "n": self.sharing.n,
                              "beam_width": self.sharing.beam_width}
        if self.engine_options:
            out["engine_options"] = dict(self.engine_options)
        if self.speculation is not None:
            out["speculation"] = dict(self.speculation)
        if explain:
            out["formulas"] = [vars(f).copy() for f in self.formulas]
            if self.sharing is not None:
                out["sharing_terms"] = [vars(t).copy() for t in self.sharing_terms]
        return out


def row_dict(row: EstimateRow) -> dict[str, Any]:
    """One row's JSON form, as in ``EstimateResult.to_dict``'s ``rows``."""
    out: dict[str, Any] = {
        "batch": row.batch, "context": row.context, "kv_dtype": row.kv_dtype,
        "kv_dtype_resolved": row.kv_dtype_resolved,
        "kv_bytes": row.kv_bytes, "bytes_per_token": row.bytes_per_token,
        "admission_kv_bytes": row.admission_kv_bytes,
    }
    if row.layers is not None:
        out["layers"] = [vars(layer).copy() for layer in row.layers]
    if row.sharing is not None:
        sh = row.sharing
        out.update({"prompt_len": sh.prompt_len, "output_len": sh.output_len, "sequences": sh.sequences,
                    "kv_bytes_plain": sh.kv_bytes_plain, "saving_bytes": sh.kv_bytes_plain - row.kv_bytes,
                    "saving_fraction": round(1 - row.kv_bytes / sh.kv_bytes_plain, 6) if sh.kv_bytes_plain else 0.0})
    return out


def estimate(
    model: str | ModelSpec,
    *,
    contexts: int | str | Iterable[int | str] | None = None,
    batches: int | str | Iterable[int | str] = (1,),
    kv_dtypes: str | Iterable[str] = ("auto",),
    engine: str = DEFAULT_ENGINE,
    engine_version: str | None = None,
    block_size: int | None = None,
    by_layer: bool = False,
    tp: int = 1,
    swa_full: bool = False,
    async_scheduling: bool | None = None,
    prompt_len: int | None = None,
    output_len: int | None = None,
    shared_prefix: int = 0,
    n: int = 1,
    beam_width: int = 1,
    speculative_method: str | None = None,
    num_speculative_tokens: int | None = None,
    speculative_model: str | ModelSpec | None = None,
    num_nextn_predict_layers: int | None = None,
    engine_options: dict[str, Any] | None = None,
    lazy: bool = False,
) -> EstimateResult:
    """KV-cache footprint of ``model`` for every (batch, context, kv dtype) combination.

    ``model`` is a ModelSpec, or anything ``kvplan.load_model`` resolves (a path to a config.json,
    a model directory or a YAML spec, a bundled model id). ``contexts`` and ``batches`` take an int, a
    text as a person types it ('8k', '1k..128k', '1,8,32': k = 1024) or a list of those. With ``tp`` > 1
    the bytes are those one tensor-parallel rank holds, by the engine's own head-splitting rule.

    Sharing (docs/sharing.md): ``prompt_len`` + ``output_len`` make the context (either may be
    left out when ``contexts`` gives it); the first ``shared_prefix`` prompt tokens are common to
    every request; each request has ``n`` parallel samples or ``beam_width`` beams. Rows then hold
    what the engine stores with its sharing rule, beside the plain figure (nothing stored once).

    Speculative decoding (``speculative_method`` ngram / eagle / eagle3 / mtp / draft_model with
    ``num_speculative_tokens``; ``speculative_model`` the draft): the draft's layers join the cache and
    each sequence holds the engine's extra slots beyond its context, where the engine has a rule.

    ``lazy``: the rows as a ``RowSweep``, computed on each pass over them (the CLI streams them); a
    layout that may refuse single points (``GroupRule.refuses_points``) is computed whole all the same,
    so that a refusal comes before any output.
    """
    target = _load(model) if isinstance(model, str) else model
    counts = _counts(contexts, batches, kv_dtypes, prompt_len, output_len, block_size)
    eng = get_engine(engine)
    speculation = speculation_from(speculative_method, num_speculative_tokens, speculative_model,
                                   num_nextn_predict_layers)
    spec, extra, spec_notes = _speculated(eng, target, speculation, counts.batches, n * beam_width)
    workloads = _workloads(eng, counts, extra, shared_prefix, n, beam_width, speculation)
    version_text, version = eng.version_of(engine_version)
    options = _options(eng, engine_options, prompt_len, block_size=block_size, tp=tp, swa_full=swa_full,
                       async_scheduling=async_scheduling)
    auto_dtype = eng.auto_kv_dtype(spec)
    layouts = [(name, eng.layout(spec, resolve_kv_dtype(name, auto_dtype), version, options))
               for name in counts.dtype_names]
    assumptions = [*spec.assumptions, *eng.version_notes(version),
                   *unstated_version(eng.title, engine_version, version_text)]
    assumptions += _layout_notes(eng, spec, layouts, counts, auto_dtype, output_len, tp)
    make_rows, terms, first_workload = _sized(eng, layouts, counts, workloads, extra, by_layer, assumptions)
    assumptions.extend(spec_notes)
    refuses = any(g.refuses_points for _, layout in layouts for g in layout.groups)
    rows: Sequence[EstimateRow]
    if lazy and not refuses:
        blocks = _block_maker(eng, layouts, counts, extra) if workloads is None and not by_layer else None
        # plain rows are made from the blocks; the tuple (lazy=False) is made point by point, the reference
        make = make_rows if blocks is None else lambda: _block_rows(blocks(True))
        rows = RowSweep(make, len(layouts) * len(counts.contexts) * len(counts.batches), blocks)
    else:
        rows = tuple(make_rows())
    return EstimateResult(
        kvplan_version=__version__, engine=eng.name, engine_version=version_text,
        block_size=layouts[0][1].block_size, model=_summary(target), rows=rows,
        formulas=tuple(f for name, layout in layouts for f in _formulas(name, layout)),
        assumptions=tuple(dict.fromkeys(assumptions)), sharing=first_workload, sharing_terms=terms,
        engine_options=_json_options(engine_options), speculation=speculation_dict(speculation, extra),
    )


def _load(model: str) -> ModelSpec:
    from kvplan.sources.resolve import load_model

    return load_model(model)


@dataclass(frozen=True)
class _Counts:
    """The contexts, batches and KV dtypes asked for, parsed."""

    contexts: list[int]
    splits: list[tuple[int, int]] | None
    """(prompt, output) of each context, where a prompt or output length was given."""
    guessed_context: bool
    """No context and no prompt length: the default context was taken."""
    batches: list[int]
    dtype_names: list[str]


def _counts(contexts: int | str | Iterable[int | str] | None, batches: int | str | Iterable[int | str],
            kv_dtypes: str | Iterable[str], prompt_len: int | None, output_len: int | None,
            block_size: int | None) -> _Counts:
    if contexts is not None:
        contexts = parse_counts(contexts, "contexts")
    guessed_context = contexts is None and prompt_len is None  # split_contexts then takes its default
    parsed, splits = split_contexts(contexts, prompt_len, output_len)
    batch_list = parse_counts(batches, "batches")
    if isinstance(kv_dtypes, str):
        kv_dtypes = [d for d in kv_dtypes.split(",") if d.strip()]
    dtype_names = list(dict.fromkeys(canonical_kv_dtype_name(d) for d in kv_dtypes))
    if not dtype_names:
        raise UsageError("needs at least one value", field="kv_dtypes")
    if block_size is not None and block_size <= 0:
        raise UsageError(f"{block_size} must be a positive integer", field="block_size")
    return _Counts(parsed, splits, guessed_context, batch_list, dtype_names)


def _speculated(eng: Any, spec: ModelSpec, speculation: Any, batches: list[int],
                per_request: int) -> tuple[ModelSpec, int, tuple[str, ...]]:
    """(the model with its draft, the slots each sequence holds beyond its context, notes); the model as given
    without speculation."""
    if speculation is None:
        return spec, 0, ()
    sp = eng.speculate(spec, speculation, 1)
    if sp.max_batch is not None and max(batches) * per_request > sp.max_batch:  # transformers: one sequence
        raise UsageError(f"batch {max(batches) * per_request}: {eng.title} speculates for at most "
                         f"{sp.max_batch} sequence(s) at once ({sp.max_batch_reason})", field="batches")
    return sp.spec, sp.extra_tokens, sp.notes


def _workloads(eng: Any, counts: _Counts, extra: int, shared_prefix: int, n: int, beam_width: int,
               speculation: Any) -> dict[int, Workload] | None:
    """Each context's workload (keyed by context + the speculative slots), where any sharing was asked."""
    if counts.splits is None and not shared_prefix and n == 1 and beam_width == 1:
        return None
    splits = counts.splits or [(c, 0) for c in counts.contexts]
    # speculative slots are each sequence's own, after its output
    proposer = speculation.method if speculation is not None else None
    workloads = {p + o + extra: Workload(p, o + extra, shared_prefix, n, beam_width, proposer) for p, o in splits}
    eng.sharing.check(next(iter(workloads.values())))
    return workloads


def _options(eng: Any, engine_options: dict[str, Any] | None, prompt_len: int | None, **given: Any) -> Any:
    """The engine options: block size, tp, swa_full, async scheduling and the further ``EngineOptions`` fields
    (transformers' quantized cache: kv_cache, backend, nbits, ...), checked against the engine."""
    extra_options = dict(engine_options or {})
    if prompt_len is not None and ("kv_cache" in extra_options or "press" in extra_options):
        extra_options.setdefault("prompt_len", prompt_len)  # the quantized residual and the press need it
    options = make_engine_options(**{**given, **extra_options})
    check_options(eng, options)
    return options


def _layout_notes(eng: Any, spec: ModelSpec, layouts: list[tuple[str, CacheLayout]], counts: _Counts,
                  auto_dtype: str, output_len: int | None, tp: int) -> list[str]:
    """What the layouts assume, and what was taken for what was not given."""
    notes = [note for _, layout in layouts for note in layout.assumptions]
    if "auto" in counts.dtype_names:
        whose = "the model's dtype" if auto_dtype == spec.dtype else f"{eng.title}'s default cache type"
        notes.append(f"kv dtype 'auto' is {whose}, {auto_dtype}")
    notes.extend(_context_notes(spec, counts.contexts))
    if counts.guessed_context:  # said, never silently guessed
        first = counts.contexts[0]
        what = f" (prompt {first - output_len:,} + output {output_len:,})" if output_len is not None else ""
        notes.append(f"no context given: {first:,} tokens{what}; give a context or a prompt "
                     "length")
    notes.extend(_padding_notes(layouts[0][1]))
    if tp > 1:
        from kvplan.parallel import tp_notes

        notes.extend(tp_notes(spec, tp))
    return notes


def _sized(eng: Any, layouts: list[tuple[str, CacheLayout]], counts: _Counts, workloads: dict[int, Workload] | None,
           extra: int, by_layer: bool,
           assumptions: list[str]) -> tuple[Callable[[], Iterator[EstimateRow]], tuple[SharingTerm, ...],
                                            Workload | None]:
    """(rows, sharing terms, the first context's workload as asked): rows a maker of every (dtype, batch, context)
    row in turn, with what the engine stores once where a workload shares; the speculative slots taken back out
    of the contexts shown."""
    contexts = [c + extra for c in counts.contexts] if extra else counts.contexts
    admissions = [eng.admission(layout) for _, layout in layouts]

    def make_rows() -> Iterator[EstimateRow]:
        for (name, layout), admission in zip(layouts, admissions):
            rows = _rows(layout, name, counts.batches, contexts, by_layer, admission)
            if workloads is not None:
                rows = (_share(row, layouts, workloads[row.context], eng.sharing, by_layer, eng) for row in rows)
            if extra:
                rows = (_unshift(row, extra) for row in rows)
            yield from rows

    terms: tuple[SharingTerm, ...] = ()
    first_workload = None
    if workloads is not None:
        first_workload = workloads[counts.contexts[0] + extra]
        assumptions.extend(eng.sharing.notes(first_workload))
        terms = tuple(t for name, layout in layouts
                      for t in sharing_terms(name, layout, eng.sharing, first_workload, counts.batches[0]))
    if first_workload is not None and extra:
        from kvplan.record import replace as _replace

        first_workload = _replace(first_workload, output_len=first_workload.output_len - extra)
    return make_rows, terms, first_workload


_BLOCK_ROWS = 2048
"""Rows per ``RowBlock`` (fewer contexts per block with many batches): memory stays flat, the per-block
overhead small."""


def _block_maker(eng: Any, layouts: list[tuple[str, CacheLayout]], counts: _Counts,
                 extra: int) -> Callable[[bool], Iterator[RowBlock]] | None:
    """A maker of the plain rows of every (dtype, context, batch) as ``RowBlock``s, in the rows' order; None
    where a group's bytes are not whole numbers (the rows then come point by point)."""
    for _, layout in layouts:
        for g in layout.groups:
            if type(g.token.bytes) is not int or (g.state is not None and type(g.state.bytes) is not int):
                return None
    contexts = [c + extra for c in counts.contexts] if extra else counts.contexts
    batches = counts.batches

    def make(admission: bool) -> Iterator[RowBlock]:
        for name, layout in layouts:
            admit = eng.admission(layout) if admission else None
            yield from _layout_blocks(layout, name, batches, contexts, extra, admit)

    return make


def _layout_blocks(layout: CacheLayout, dtype_name: str, batches: list[int], contexts: list[int], extra: int,
                   admission: Callable[[Sequence[int]], list[int]] | None) -> Iterator[RowBlock]:
    """``_rows``' figures a block of contexts at a time: each group class's bytes over the block (the token
    rule's closed form over the list, ``held_many``), summed column-wise; contexts computed with the
    speculative slots, shown without them (``_unshift``)."""
    classes = _classes(layout)
    plain = all(g.tokens.per_sequence for _, g in classes)
    resolved = layout.kv_dtype.name
    width = len(batches)
    step = max(1, _BLOCK_ROWS // width)
    for start in range(0, len(contexts), step):
        part = contexts[start:start + step]
        shown = [c - extra for c in part] if extra else part
        admitted = admission(part) if admission is not None else None
        if plain:
            per_seq = _class_bytes(classes, part, 1)
            columns = [per_seq if batch == 1 else [batch * b for b in per_seq] for batch in batches]
        else:
            columns = [_class_bytes(classes, part, batch) for batch in batches]
        if width == 1:
            (batch,) = batches
            kv, context_column, batch_column = columns[0], shown, [batch] * len(part)
            per_token = [k / (batch * c) for k, c in zip(kv, shown)] if batch != 1 else \
                [k / c for k, c in zip(kv, shown)]
            admit_column = None if admitted is None else admitted if batch == 1 else [a * batch for a in admitted]
        else:  # rows go context by context, each context's batches in turn
            kv = [k for ks in zip(*columns) for k in ks]
            context_column = [c for c in shown for _ in batches]
            batch_column = batches * len(part)
            per_token = [k / (b * c) for k, b, c in zip(kv, batch_column, context_column)]
            admit_column = None if admitted is None else \
                [a * b for a, b in zip((a for a in admitted for _ in batches), batch_column)]
        yield RowBlock(dtype_name, resolved, batch_column, context_column, kv, per_token, admit_column)


def _class_bytes(classes: list[tuple[int, Any]], contexts: list[int], batch: int) -> list[int]:
    """Σ layers x bytes per layer over the group classes, at each context."""
    total: list[int] | None = None
    for count, g in classes:
        each = g.layer_bytes_many(contexts, batch, count)
        total = each if total is None else [t + b for t, b in zip(total, each)]
    return total if total is not None else [0] * len(contexts)


def _block_rows(blocks: Iterable[RowBlock]) -> Iterator[EstimateRow]:
    for block in blocks:
        yield from block.rows()


def row_blocks(rows: Sequence[EstimateRow], admission: bool = True) -> Iterator[RowBlock] | None:
    """``rows`` as ``RowBlock``s where they come that way (a plain ``RowSweep``); None otherwise."""
    return rows.blocks(admission) if isinstance(rows, RowSweep) else None


def _summary(target: ModelSpec) -> ModelSummary:
    return ModelSummary(
        id=target.id, source=target.source, model_type=target.model_type, num_layers=target.num_layers,
        layer_kinds=target.layer_kind_counts(), params=target.params, weights_bytes=target.weights_bytes,
        dtype=target.dtype, max_position_embeddings=target.max_position_embeddings,
        mtp_layers=target.mtp_layers, mtp_weights_bytes=target.mtp_weights_bytes,
    )


def _share(row: EstimateRow, layouts: list[tuple[str, CacheLayout]], workload: Workload, rule: SharingRule,
           by_layer: bool, eng: Engine | None = None) -> EstimateRow:
    """The row's bytes with the engine's sharing applied; the plain figure kept beside them."""
    from kvplan.record import replace
    from kvplan.workload import shared_figures

    layout = next(lay for name, lay in layouts if name == row.kv_dtype)
    kv, plain, per_layer = shared_figures(layout, rule, workload, row.batch, by_layer)
    sequences = row.batch * workload.samples
    layers = tuple(LayerRow(*values) for values in per_layer) if per_layer is not None else row.layers
    admission = row.admission_kv_bytes
    if admission is not None and eng is not None:  # what max-batch counts: shared blocks once, every sample's own
        admission = eng.shared_admission(layout, workload, row.batch)
    return replace(row, kv_bytes=kv, bytes_per_token=kv / (sequences * row.context), layers=layers,
                   admission_kv_bytes=admission,
                   sharing=RowSharing(workload.prompt_len, workload.output_len, sequences, plain))


def _unshift(row: EstimateRow, extra: int) -> EstimateRow:
    """A row computed at context + the speculative slots, reported at its context."""
    from kvplan.record import replace

    context = row.context - extra
    sequences = row.sharing.sequences if row.sharing is not None else row.batch
    sharing = replace(row.sharing, output_len=row.sharing.output_len - extra) if row.sharing is not None else None
    return replace(row, context=context, bytes_per_token=row.kv_bytes / (sequences * context), sharing=sharing)


def _json_options(values: dict[str, Any] | None) -> dict[str, Any]:
    """The given engine options as JSON values (``evict`` pairs become an object)."""
    out = {name: value for name, value in (values or {}).items() if value is not None}
    if "evict" in out:
        out["evict"] = dict(out["evict"])
    return out


def _classes(layout: CacheLayout) -> list[tuple[int, Any]]:
    """(layers, a group of them) per distinct cost: groups with equal token rules and sizes add up, so a sweep
    point costs a few function calls, not one per group (Gemma 3 has 21 groups but two distinct rules)."""
    merged: dict[tuple[object, ...], list[Any]] = {}  # cost_key -> [layers, a group of them]
    for g in layout.groups:
        key = g.cost_key
        if key in merged:
            merged[key][0] += g.count
        else:
            merged[key] = [g.count, g]
    return [(count, g) for count, g in merged.values()]


def _rows(layout: CacheLayout, dtype_name: str, batches: list[int], contexts: list[int],
          by_layer: bool, admission: Callable[[Sequence[int]], list[int]] | None) -> Iterable[EstimateRow]:
    """Every (context, batch) row, point by point: the path of by-layer and shared rows, and the reference the
    block path (``_layout_blocks``) is held to."""
    classes = _classes(layout)
    plain = all(g.tokens.per_sequence for _, g in classes)
    resolved = layout.kv_dtype.name
    new_row = object.__new__
    for context in contexts:  # the hot loop of a sweep: plain loops, names bound once
        per_seq = 0
        if plain:
            for count, g in classes:
                per_seq += count * g.layer_bytes(context, 1)
        admit = admission([context])[0] if admission is not None else None
        for batch in batches:
            if plain:
                kv = per_seq * batch
            else:
                kv = 0
                for count, g in classes:
                    kv += count * g.layer_bytes(context, batch)
            row = new_row(EstimateRow)  # EstimateRow(...) less its nine object.__setattr__ calls: a fifth of a sweep
            row.__dict__.update(batch=batch, context=context, kv_dtype=dtype_name, kv_bytes=kv,
                                bytes_per_token=kv / (batch * context),
                                layers=_layer_rows(layout, context, batch) if by_layer else None,
                                kv_dtype_resolved=resolved, sharing=None,
                                admission_kv_bytes=admit * batch if admit is not None else None)
            yield row


def _layer_rows(layout: CacheLayout, context: int, batch: int) -> tuple[LayerRow, ...]:
    rows: list[LayerRow] = []
    new_row = object.__new__
    for g in layout.groups:
        tokens = g.tokens_for(context, batch)
        nbytes = g.layer_bytes(context, batch)
        kind = "padding" if g.padding else g.kind
        for offset in range(g.count):
            row = new_row(LayerRow)  # LayerRow(...) less the frozen dataclass's __setattr__ calls, as in _rows
            row.__dict__.update(index=g.first_layer + offset, kind=kind, tokens_held=tokens, bytes=nbytes)
            rows.append(row)
    return tuple(rows)


def _formulas(dtype_name: str, layout: CacheLayout) -> Iterable[GroupFormula]:
    """One formula per distinct rule; interleaved models list each rule once with all its layers."""
    merged: dict[tuple[object, ...], list[Any]] = {}
    for g in layout.groups:
        state = g.state.formula if g.state is not None else None
        key = (g.padding, g.kind, g.token.formula, g.tokens, state)
        span = f"{g.first_layer}" if g.count == 1 else f"{g.first_layer}-{g.first_layer + g.count - 1}"
        if key in merged:
            merged[key][0].append(span)
            merged[key][1] += g.count
        else:
            merged[key] = [[span], g.count, g]
    for spans, count, g in merged.values():
        yield GroupFormula(
            kv_dtype=dtype_name, layers=",".join(spans), count=count, kind="padding" if g.padding else g.kind,
            bytes_per_token=g.token.bytes, token_formula=g.token.formula,
            tokens_held_formula=g.held_formula,
            state_bytes=g.state.bytes if g.state is not None else 0,
            state_formula=g.state.formula if g.state is not None else None,
        )


def _padding_notes(layout: CacheLayout) -> list[str]:
    """Unused slots the engine allocates (vLLM's hybrid pool padding) are part of kv_bytes: say so."""
    slots = [g for g in layout.groups if g.padding]
    if not slots:
        return []
    first = slots[0].first_layer
    last = slots[-1].first_layer + slots[-1].count - 1
    kinds = ", ".join(f"{g.count} {g.kind}" for g in slots)
    return [f"{layout.engine} pads its hybrid KV-cache groups with unused layer slots ({kinds}; rows "
            f"'padding', numbered {first}-{last}): each is allocated like a layer of its kind and counted "
            "in kv_bytes"]


def _context_notes(spec: ModelSpec, contexts: list[int]) -> list[str]:
    notes: list[str] = []
    limit = spec.max_position_embeddings
    rope = spec.rope_scaling
    if rope is not None and not any(a.startswith("rope_scaling") for a in spec.assumptions):
        reach = f" to {rope.extends_to:,} tokens" if rope.extends_to else ""
        factor = f", factor {rope.factor:g}" if rope.factor else ""
        notes.append(f"rope_scaling ({rope.type}{factor}) extends the context{reach}")
    if limit is not None:
        beyond = sorted(c for c in set(contexts) if c > limit)
        if beyond:
            shown = ", ".join(f"{c:,}" for c in beyond[:3]) + (" ..." if len(beyond) > 3 else "")
            notes.append(
                f"context {shown} exceeds max_position_embeddings {limit:,}: computed anyway, "
                "the model was not trained that far"
            )
    return notes
