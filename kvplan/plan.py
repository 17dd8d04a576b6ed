"""``kvplan.max_batch``: what a deployment can serve, per the chosen engine's memory rules.

Flow: the engine lays out each pipeline stage's cache for one tensor-parallel rank
(``Engine.stage_layouts``), divides one GPU's memory by its budget rules (``Engine.budget``) and
turns the KV memory into blocks, tokens and sequences by its pool and admission rules
(``Engine.capacity``). The stage with the least room decides, as engines take the minimum over ranks.
Nothing here depends on which engine it is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any, Literal

from kvplan._version import __version__
from kvplan.budgets import MemoryItem, Settings
from kvplan.budgets.base import given_kv_notes
from kvplan.dtypes import canonical_kv_dtype_name, resolve_kv_dtype
from kvplan.engines import DEFAULT_ENGINE, Demand, get_engine
from kvplan.engines.layout import HOST_POOL
from kvplan.engines.protocol import Engine, check_options, make_engine_options
from kvplan.engines.sharing import MAX_SAMPLES
from kvplan.engines.version import unstated_version
from kvplan.errors import UsageError
from kvplan.hardware import (
    GPU,
    KNOWN_VENDORS,
    VENDOR_TITLES,
    find_gpu,
    gpu_from_memory,
    load_catalog,
)
from kvplan.parallel import tp_notes
from kvplan.record import dataclass, field, replace
from kvplan.spec import ModelSpec
from kvplan.units import MAX_COUNT

if TYPE_CHECKING:  # a type: no typing at run time
    Solve = Literal["batch", "context", "gpus", "utilization"]
_MAX_SEARCH_GPUS = 512
GPUS_PER_NODE = 8
"""GPUs one node holds (HGX / DGX H100, H200, B200, MI300X boards): tensor parallelism stays within one."""
MAX_GPUS = 1 << 20
"""Most GPUs one deployment plans (tp x pp x dp): ten times the largest clusters built."""
# refusals of the workload itself, not of one tp x pp candidate (pp with speculation is a candidate's)
_WORKLOAD_FIELDS = frozenset({"shared_prefix", "n", "beam_width", "prompt_len", "speculative_method",
                              "num_speculative_tokens", "speculative_model", "gpu"})
"""Refusals whatever the split (the workload, or an engine that does not run on this GPU): --solve gpus says them."""


@dataclass(frozen=True)
class PerGpu:
    budget_bytes: int
    weights_bytes: int
    activation_bytes: int
    cudagraph_bytes: int
    non_torch_bytes: int
    kv_cache_bytes: int


@dataclass(frozen=True)
class Asked:
    """What a plan was asked, kept beside it (never in its JSON) so a chart can ask again at other contexts."""

    replan: Callable[[int], CapacityPlan]
    """The same deployment, settings and workload planned at another context (max_model_len unchanged): what
    ``max_batch(..., context=c)`` answers."""
    context: int | None = None
    """The context asked for (None: max_model_len, the default)."""
    concurrency: int | None = None
    """The concurrency asked for (``--solve gpus`` or ``utilization``), else None."""


@dataclass(frozen=True)
class CapacityPlan:
    kvplan_version: str
    engine: str
    engine_version: str
    model_id: str
    gpu_name: str
    gpu_total_bytes: int
    gpu_count: int
    tp: int
    pp: int
    dp: int
    kv_dtype: str
    per_gpu: PerGpu
    items: tuple[MemoryItem, ...]
    block_size: int | None
    num_blocks: int | None
    kv_cache_tokens: int
    max_model_len: int
    context: int
    batch: int
    max_concurrency: float
    max_batch: int
    max_context: int
    fits: bool
    request_kv_bytes: int
    """KV bytes one request of max_model_len needs on one GPU."""
    max_model_len_fit: int
    """The longest max-model-len one sequence can have (what vLLM suggests when it refuses to start)."""
    decode_step_seconds_min: float | None
    decode_tokens_per_second_max: float | None
    engine_defaults: dict[str, float | int | str] = field(default_factory=dict)
    assumptions: tuple[str, ...] = ()
    admission_note: str = ""
    """Where the engine admits a request with more than a computed sequence holds (vLLM's windows)."""
    shared_prefix: int = 0
    """Leading tokens common to every request (``--shared-prefix``); 0 when none."""
    max_batch_plain: int | None = None
    """With a shared prefix, samples or beams: the max batch with nothing shared, beside ``max_batch``."""
    n: int = 1
    """Parallel samples per request: ``batch``, ``max_batch`` and the concurrency count requests of n."""
    beam_width: int = 1
    """Beams per request (as ``n``)."""
    offload: dict[str, Any] | None = None
    """The host-memory KV tier (``OffloadTier.to_dict``), where one was asked for."""
    speculation: dict[str, Any] | None = None
    """Speculative decoding as planned (``kvplan.engines.speculative.speculation_dict``); None when none."""
    mtp_layers: int = 0
    """MTP layers the model's checkpoint ships (loaded only for MTP speculation)."""
    mtp_weights_bytes: int | None = None
    """Bytes of the checkpoint that are those MTP layers, when known."""
    misfit: str = ""
    """Why it does not fit where the engine would start but not one request of the workload fits (its
    samples or beams); empty otherwise."""
    ep: int = 0
    """GPUs one copy of the routed experts is spread over in each pipeline stage: tp x dp with expert
    parallelism across the data-parallel ranks, else tp (0 in plans made before the field: read as tp)."""
    interval: dict[str, Any] | None = None
    """Where the engine's own figures may lie (``KvError``, cross-validated on real logs): each budget-resting
    number at the low and high end of the KV memory, and the basis; None where the KV memory is given or
    measured, the engine has no record of its error, or ``max_batch(..., interval=False)`` left it out (a caller
    reading only the plan's own figures, as check's fixes do, spares the two capacity searches)."""
    solved: dict[str, Any] | None = None
    """``--solve utilization``: the engine's memory fraction found (setting, engine flag, value); else None."""
    state_slots: int | None = None
    """Recurrent-state slots the engine sizes apart from the KV tokens (SGLang's ``max_mamba_cache_size``, JSON
    ``mamba_cache_slots``); None where it keeps none apart."""
    asked: Asked | None = field(default=None, compare=False, repr=False)
    """How to plan it again at another context (``max_batch``'s plans; None for a bare ``plan``)."""

    def at_context(self, context: int) -> CapacityPlan:
        """This deployment and workload planned at ``context`` tokens, as ``max_batch(..., context=context)``
        plans it (the concurrency-against-context chart's points)."""
        if self.asked is None:
            raise ValueError("a plan made by max_batch can be planned again at another context")
        return self.asked.replan(context)

    @property
    def samples(self) -> int:
        """Sequences per request: its samples or beams."""
        return self.n * self.beam_width

    @property
    def message(self) -> str:
        if self.fits:
            return ""
        if self.misfit:
            return self.misfit
        gib = 2**30
        if self.per_gpu.kv_cache_bytes <= 0 and self.per_gpu.kv_cache_bytes + self.per_gpu.weights_bytes <= 0:
            # the other items alone take the whole budget: blaming the weights would mislead
            # (10^20 batched tokens gave "the weights alone leave no KV cache")
            others = sorted((i for i in self.items if i.name not in ("budget", "static", "weights", "kv_cache")
                             and i.bytes > 0), key=lambda i: -i.bytes)
            what = ", ".join(f"{i.name} {i.bytes / gib:,.2f} GiB" for i in others[:3]) or "nothing"
            hint = " (the activation peak grows with the tokens and sequences per batch)" \
                if others and others[0].name == "activation" else ""
            return (f"before the weights, {what} take the whole budget per GPU "
                    f"({self.per_gpu.budget_bytes / gib:,.2f} GiB): no room for weights or KV cache; lower the "
                    f"settings that size them{hint}")
        if self.per_gpu.kv_cache_bytes <= 0 and self.per_gpu.weights_bytes > 0:
            room = self.per_gpu.kv_cache_bytes + self.per_gpu.weights_bytes  # what the weights could have had
            short = self.per_gpu.weights_bytes - max(room, 0)
            ranks = self.tp * self.pp
            fewest = -(-(self.per_gpu.weights_bytes * ranks) // room) if room > 0 else None
            more = f"at least {fewest} GPUs of this type (tp x pp) for the weights alone" if fewest else "more GPUs"
            if self.ep > self.tp:  # the experts already spread over tp x dp: both shrink the weights per GPU
                more = "more GPUs (a larger tp, or more data-parallel ranks for the experts to spread over)"
            return (f"the weights alone ({self.per_gpu.weights_bytes / gib:.2f} GiB per GPU) leave no KV cache: "
                    f"{short / gib:.2f} GiB over what this engine leaves for weights and cache "
                    f"({max(room, 0) / gib:.2f} GiB). What would fit: {more}, a GPU with more memory, or a "
                    "quantized checkpoint (fp8 / int4 weights)")
        return (f"max-model-len {self.max_model_len:,} needs {self.request_kv_bytes / gib:.2f} GiB of KV per GPU; "
                f"{max(self.per_gpu.kv_cache_bytes, 0) / gib:.2f} GiB available; {self.max_model_len_fit:,} fits")

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (fields are added over time, never renamed)."""
        out = {
            "kvplan_version": self.kvplan_version, "engine": self.engine, "engine_version": self.engine_version,
            "model": self.model_id,
            "gpu": {"name": self.gpu_name, "total_bytes": self.gpu_total_bytes, "count": self.gpu_count},
            "parallel": {"tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep or self.tp},
            "kv_dtype": self.kv_dtype,
            "per_gpu": vars(self.per_gpu).copy(),
            "breakdown": [vars(i).copy() for i in self.items],
            "engine_defaults": dict(self.engine_defaults),
            "block_size": self.block_size, "num_blocks": self.num_blocks,
            "kv_cache_tokens": self.kv_cache_tokens, "max_model_len": self.max_model_len,
            "max_concurrency": round(self.max_concurrency, 4), "context": self.context, "batch": self.batch,
            "max_batch": self.max_batch, "max_context": self.max_context, "fits": self.fits,
            "request_kv_bytes": self.request_kv_bytes, "max_model_len_fit": self.max_model_len_fit,
            "decode_step_seconds_min": self.decode_step_seconds_min,
            "decode_tokens_per_second_max": self.decode_tokens_per_second_max,
            "message": self.message,
            "assumptions": list(self.assumptions),
            "mtp_layers": self.mtp_layers, "mtp_weights_bytes": self.mtp_weights_bytes,
            **({"shared_prefix": self.shared_prefix, "max_batch_plain": self.max_batch_plain}
               if self.shared_prefix or self.samples > 1 else {}),
            **({"n": self.n, "beam_width": self.beam_width, "max_batch_sequences": self.max_batch * self.samples}
               if self.samples > 1 else {}),
        }
        if self.state_slots is not None:
            out["mamba_cache_slots"] = self.state_slots
        if self.offload is not None:
            out["offload"] = dict(self.offload)
        if self.speculation is not None:
            out["speculation"] = dict(self.speculation)
        if self.interval is not None:
            out["interval"] = dict(self.interval)
        if self.solved is not None:
            out["solved"] = dict(self.solved)
        return out


def resolve_gpu(gpu: str | GPU | None, gpu_memory: str | int | None, catalog_file: Any = None) -> GPU:
    """A catalog GPU by name, a ``GPU`` as given, or an ad-hoc GPU of ``gpu_memory`` bytes ('80GiB' or an int)."""
    if gpu_memory is not None:
        if gpu is not None:
            raise UsageError("give a GPU or a GPU memory size, not both", field="gpu_memory")
        return gpu_from_memory(str(gpu_memory))
    if gpu is None:
        raise UsageError("name a GPU (see `kvplan gpus`) or give a GPU memory size", field="gpu")
    if isinstance(gpu, GPU):
        return gpu
    return find_gpu(gpu, load_catalog(catalog_file))


def max_batch(
    model: str | ModelSpec,
    *,
    gpu: str | GPU | None = None,
    gpu_memory: str | int | None = None,
    catalog: Any = None,
    tp: int | None = None,
    pp: int | None = None,
    dp: int | None = None,
    expert_parallel: bool | None = None,
    gpus_per_node: int = GPUS_PER_NODE,
    engine: str = DEFAULT_ENGINE,
    engine_version: str | None = None,
    kv_dtype: str = "auto",
    max_model_len: int | None = None,
    context: int | None = None,
    batch: int = 1,
    block_size: int | None = None,
    settings: Settings | None = None,
    solve: Solve = "batch",
    concurrency: int | None = None,
    swa_full: bool = False,
    shared_prefix: int = 0,
    n: int = 1, beam_width: int = 1,
    prompt_len: int | None = None,
    speculative_method: str | None = None,
    num_speculative_tokens: int | None = None,
    speculative_model: str | ModelSpec | None = None,
    num_nextn_predict_layers: int | None = None,
    engine_options: dict[str, Any] | None = None, interval: bool = True,
) -> CapacityPlan:
    """How many sequences (or how long a context, or how many GPUs) a deployment serves.

    ``shared_prefix``: leading tokens common to every request; ``max_batch`` then counts them as the
    engine stores them (vLLM: the prefix's full blocks once in the pool) and ``max_batch_plain``
    keeps the figure with nothing shared.

    ``n`` parallel samples or ``beam_width`` beams: ``batch``, ``max_batch`` (and ``concurrency`` with
    ``solve="gpus"``) count requests of that many sequences, each engine sharing their prompt its way
    (vLLM: n child requests, each a sequence its scheduler counts against ``max_num_seqs``).
    ``prompt_len``: the prompt part of ``context`` the samples share (default: all of it).

    Speculative decoding (``speculative_method`` with ``num_speculative_tokens``, a draft as ``speculative_model``):
    the draft's layers and weights join the target's, and each sequence holds the engine's extra slots, by the
    engine's own rule (``Engine.speculate``: vLLM, SGLang, TensorRT-LLM and transformers have one; docs/sharing.md).

    ``tp``, ``pp``: per replica (default 1); ``dp``: replicas, each with its own KV cache for its own
    requests. ``expert_parallel``: the dp replicas form one expert-parallel group, the routed experts
    spread over tp x dp GPUs while attention, dense layers, embeddings and lm_head stay per replica, split
    over its tp (vLLM ``--enable-expert-parallel``; SGLang ``--enable-dp-attention``; TensorRT-LLM
    ``enable_attention_dp``). None: the engine's way with dp (vLLM shares the experts of a MoE model over
    its DP ranks whether or not EP is on: ``FusedMoEParallelConfig.make``; the others keep whole replicas).

    ``solve="gpus"`` keeps a ``tp`` or ``pp`` given and searches the rest as engines are deployed: tp within
    a node of ``gpus_per_node`` GPUs first, pipeline stages across nodes, then replicas (dp)."""
    spec = _load(model) if isinstance(model, str) else model
    hw = resolve_gpu(gpu, gpu_memory, catalog)
    settings = settings or Settings()
    given_tp, given_pp = tp, pp
    tp, pp, dp, mml = _checked_sizes(spec, tp, pp, dp, expert_parallel, solve, max_model_len, batch=batch,
                                     block_size=block_size, concurrency=concurrency, gpus_per_node=gpus_per_node)
    check_samples(n, beam_width)
    speculation = _speculation(speculative_method, num_speculative_tokens, speculative_model,
                               num_nextn_predict_layers)
    if solve == "gpus":
        return _solve_gpus(spec, hw, engine, engine_version, kv_dtype, mml, context, block_size, settings,
                           concurrency, swa_full, engine_options, Sharing(shared_prefix, n, beam_width, prompt_len),
                           speculation, Search(given_tp, given_pp, expert_parallel, gpus_per_node))
    if solve not in ("batch", "context", "utilization"):
        raise UsageError(f"'{solve}': choose batch, context, gpus or utilization", field="solve")

    def planned(chosen: Settings, rows: int, at: int | None = None) -> CapacityPlan:  # at: another context
        again = Asked(functools.partial(planned, chosen, rows), context, concurrency)  # the settings found stay
        return plan(spec, hw, tp=tp, pp=pp, dp=dp, engine=engine, engine_version=engine_version, kv_dtype=kv_dtype,
                    max_model_len=mml, context=at or context or mml, batch=rows, block_size=block_size, settings=chosen,
                    swa_full=swa_full, shared_prefix=shared_prefix, speculation=speculation, n=n, beam_width=beam_width,
                    engine_options=engine_options, prompt_len=prompt_len, expert_parallel=expert_parallel, asked=again,
                    with_interval=interval)
    return _solve_utilization(engine, settings, planned, batch if concurrency is None else concurrency) \
        if solve == "utilization" else planned(settings, batch)


def _speculation(method: str | None, tokens: int | None, draft: str | ModelSpec | None,
                 mtp_layers: int | None) -> Any:
    """``kvplan.workload.speculation_from``, reached only where speculation is asked: a plain plan does not
    import the speculative modules (their frozen classes cost start-up time)."""
    if method is None and tokens is None and draft is None and mtp_layers is None:
        return None  # what speculation_from answers for nothing asked
    from kvplan.workload import speculation_from

    return speculation_from(method, tokens, draft, mtp_layers)


def _speculation_dict(speculation: Any, extra_slots: int) -> dict[str, object] | None:
    if speculation is None:
        return None  # what speculation_dict answers, without importing it
    from kvplan.engines.speculative import speculation_dict

    return speculation_dict(speculation, extra_slots)


def _solve_utilization(engine: str, settings: Settings, planned: Any, want: int) -> CapacityPlan:
    """``--solve utilization``: the least memory fraction holding ``want`` (the batch, or the concurrency asked)."""
    from kvplan.solve import solve_fraction

    solved: CapacityPlan = solve_fraction(get_engine(engine), settings, lambda chosen: planned(chosen, want), want)
    return solved  # planned()'s plan (solve.py returns Any)


def _load(model: str) -> ModelSpec:
    from kvplan.sources.resolve import load_model

    return load_model(model)


def _checked_sizes(spec: ModelSpec, tp: int | None, pp: int | None, dp: int | None, expert_parallel: bool | None,
                   solve: str, max_model_len: int | None, **counts: int | None) -> tuple[int, int, int, int]:
    """(tp, pp, dp, max model length) with their defaults, each count refused by name unless a whole number from
    1 to ``MAX_COUNT``, and the GPUs at most ``MAX_GPUS``."""
    if expert_parallel is not None and not isinstance(expert_parallel, bool):  # a count here is a mistake for ep's size, said by name
        raise UsageError(f"{expert_parallel!r}: expert_parallel is true or false (the size is tp x dp)",
                         field="expert_parallel")
    tp, pp = 1 if tp is None else tp, 1 if pp is None else pp  # 0 reaches the check below, by field
    if solve == "gpus" and dp is not None:
        raise UsageError(f"{dp}: --solve gpus finds the data-parallel size; give tp or pp to keep them",
                         field="dp")
    dp = 1 if dp is None else dp
    mml = max_model_len or spec.max_position_embeddings
    if mml is None:
        raise UsageError(f"{spec.id} declares no max_position_embeddings: give a max model length",
                         field="max_model_len")
    named = {"tp": tp, "pp": pp, "dp": dp, "batch": counts["batch"], "max_model_len": mml, "block_size":
             counts["block_size"], "concurrency": counts["concurrency"], "gpus_per_node": counts["gpus_per_node"]}
    for name, value in named.items():
        if isinstance(value, bool) or (value is not None and not isinstance(value, int)):  # True is not 1 GPU
            raise UsageError(f"{value!r} is not a whole number", field=name)
        if value is not None and value < 1:  # a block of -5 tokens planned 0 blocks and exited 0
            raise UsageError(f"{value} must be at least 1", field=name)
        if value is not None and value > MAX_COUNT:  # 10^20 of anything planned an answer, exit 0
            raise UsageError(f"{value:,} is absurdly large (at most {MAX_COUNT:,})", field=name)
    if tp * pp * dp > MAX_GPUS:
        raise UsageError(f"tp {tp} x pp {pp} x dp {dp} = {tp * pp * dp:,} GPUs: kvplan plans at most {MAX_GPUS:,}",
                         field="dp")
    return tp, pp, dp, mml


def _token_cap(eng: Any, layouts: Any, version: Any, budget: Any, demand: Demand, cap: Any,
               limit: int) -> tuple[Any, int, Any]:
    """The pool capped at ``limit`` tokens rounded up to whole blocks, where the memory allows more: the engine
    allocates only those blocks, so the KV memory is the budget's scaled to them (exact: no error band)."""
    block = cap.block_size or 1
    tokens = -(-limit // block) * block
    if cap.kv_cache_tokens <= 0 or tokens >= cap.kv_cache_tokens:
        return budget, budget.kv_cache_bytes, cap
    kv = budget.kv_cache_bytes * tokens // cap.kv_cache_tokens
    note = f"capped at {limit:,} tokens ({tokens:,} in whole blocks), of the {cap.kv_cache_tokens:,} the memory allows"
    items = tuple(replace(i, bytes=kv, note=note) if i.name == "kv_cache" else i for i in budget.items)
    budget = replace(budget, items=items, kv_cache_bytes=kv, kv_error=None)
    return budget, kv, eng.capacity(layouts, kv, version, budget, demand)


def check_samples(n: int, beam_width: int) -> None:
    """Refuse a request of more sequences than ``MAX_SAMPLES`` (0 and negatives are ``Workload``'s to refuse,
    by the same field)."""
    for name, value in (("n", n), ("beam_width", beam_width)):
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SAMPLES:
            raise UsageError(f"{value:,} sequences per request: at most {MAX_SAMPLES:,} (vLLM refuses {name} above "
                             f"VLLM_MAX_N_SEQUENCES, {MAX_SAMPLES:,} by default)", field=name)


@dataclass(frozen=True)
class Sharing:
    """What the requests of a plan share (``max_batch``'s keyword arguments, carried to the GPU search)."""

    shared_prefix: int = 0
    n: int = 1
    beam_width: int = 1
    prompt_len: int | None = None

    def kwargs(self) -> dict[str, Any]:
        return {"shared_prefix": self.shared_prefix, "n": self.n, "beam_width": self.beam_width,
                "prompt_len": self.prompt_len}


def plan(spec: ModelSpec, hw: GPU, *, tp: int, pp: int, dp: int, engine: str, engine_version: str | None,
         kv_dtype: str, max_model_len: int, context: int, batch: int, block_size: int | None,
         settings: Settings, swa_full: bool = False, shared_prefix: int = 0,
         speculation: Any = None, engine_options: dict[str, Any] | None = None, n: int = 1, beam_width: int = 1,
         prompt_len: int | None = None, expert_parallel: bool | None = None,
         with_interval: bool = True, asked: Asked | None = None) -> CapacityPlan:
    eng = get_engine(engine)
    _check_vendor(eng, hw)
    settings, split_experts, ep_notes = _expert_parallel(eng, spec, settings, expert_parallel, tp, dp)
    mtp_layers, mtp_weights = spec.mtp_layers, spec.mtp_weights_bytes  # the target's, before speculation
    sp = eng.speculate(spec, speculation, pp) if speculation is not None else None
    spec_notes: tuple[str, ...]
    spec, extra, spec_notes = (sp.spec, sp.extra_tokens, sp.notes) if sp is not None else (spec, 0, ())
    workload = _workload(context, shared_prefix, prompt_len, n, beam_width, speculation)
    options = _checked_options(eng, spec, settings, engine_options, block_size=block_size, tp=tp, swa_full=swa_full)
    version_text, version = eng.version_of(engine_version)
    dtype = resolve_kv_dtype(canonical_kv_dtype_name(kv_dtype), eng.auto_kv_dtype(spec))
    layouts = _stage_layouts(eng, spec, dtype, version, options, pp)
    model_limit = context_limit(spec)
    limit = max(max_model_len, context, model_limit or 0) if model_limit else 1 << 26
    held_cap = _held_cap(sp, max(max_model_len, context))
    # speculative slots: each running sequence holds them beyond its context (up to max_model_len where the
    # engine caps them there); the search for the longest context then reaches the limit plus the slots
    demand = Demand(max_model_len=max_model_len, context=min(context + extra, held_cap),
                    batch=batch * workload.samples, limit=limit + extra if held_cap == _UNCAPPED else limit,
                    gpu_name=hw.name, gpu_vendor=hw.vendor or "", speculative=sp, dp=dp)  # sequences, for the budget
    budget = eng.budget(spec, hw.memory_bytes, tp, pp, version, demand, settings)
    kv = budget.kv_cache_bytes
    cap = eng.capacity(layouts, kv, version, budget, demand)
    if settings.max_kv_tokens is not None:
        budget, kv, cap = _token_cap(eng, layouts, version, budget, demand, cap, settings.max_kv_tokens)
    plain_batch, misfit = None, ""
    if not workload.plain:
        cap, plain_batch, misfit = _shared_capacity(eng, layouts, kv, version, budget, demand, cap, workload,
                                                    prompt_len, dp)
    interval = _interval(eng, layouts, version, budget, demand, workload, prompt_len, dp, hw.memory_bytes,
                         max(max_model_len, context), extra, held_cap) \
        if with_interval and budget.kv_error is not None else None
    longest = _longest(cap.max_context, extra, held_cap)
    if held_cap == _UNCAPPED:  # the search went limit + extra far: one sequence's longest stays within the limit
        cap = replace(cap, max_model_len_fit=min(cap.max_model_len_fit, limit))
    assumptions = list(dict.fromkeys([*spec.assumptions, *eng.version_notes(version),
                                      *unstated_version(eng.title, engine_version, version_text), *budget.assumptions,
                                      *(a for lay in layouts for a in lay.assumptions), *tp_notes(spec, tp)]))
    assumptions += _capacity_notes(hw, cap, longest, settings, model_limit, limit)
    assumptions.extend(spec_notes)
    assumptions.extend(ep_notes)
    tier = eng.offload_tier(layouts, version, options, tp, demand, cap)  # a host-memory tier, when asked for
    if tier is not None:
        assumptions.extend(tier.notes())
    max_b = cap.max_batch
    decode_batch = max(1, min(batch if batch > 1 else max_b, max_b)) if max_b else 0
    decode_seconds = decode_tps = None
    if hw.bandwidth and decode_batch:
        decode_seconds, decode_tps = _decode_bound(eng, spec, hw.bandwidth, budget, layouts, workload, context,
                                                   decode_batch, dp, split_experts, assumptions)
    per_gpu = PerGpu(
        budget_bytes=budget.item("budget") or budget.item("static") or hw.memory_bytes,
        weights_bytes=budget.item("weights"), activation_bytes=budget.item("activation"),
        cudagraph_bytes=budget.item("cudagraph"), non_torch_bytes=budget.item("non_torch"), kv_cache_bytes=kv,
    )
    concurrency = cap.max_concurrency if cap.concurrency_per_replica else cap.max_concurrency * dp
    return CapacityPlan(
        kvplan_version=__version__, engine=eng.name, engine_version=version_text, model_id=spec.id,
        gpu_name=hw.name, gpu_total_bytes=hw.memory_bytes, gpu_count=tp * pp * dp, tp=tp, pp=pp, dp=dp,
        kv_dtype=dtype.name, per_gpu=per_gpu, items=budget.items, block_size=cap.block_size,
        num_blocks=cap.num_blocks, kv_cache_tokens=cap.kv_cache_tokens, max_model_len=max_model_len,
        context=context, batch=batch, max_concurrency=concurrency, max_batch=max_b * dp,
        max_context=longest, fits=cap.fits, request_kv_bytes=cap.request_bytes,
        max_model_len_fit=cap.max_model_len_fit,
        decode_step_seconds_min=decode_seconds, decode_tokens_per_second_max=decode_tps,
        engine_defaults=budget.defaults, assumptions=tuple(dict.fromkeys(assumptions)),
        admission_note=cap.admission_note, shared_prefix=shared_prefix, max_batch_plain=plain_batch,
        offload=tier.to_dict() if tier is not None else None, n=n, beam_width=beam_width,
        mtp_layers=mtp_layers, mtp_weights_bytes=mtp_weights,
        speculation=_speculation_dict(speculation, extra), misfit=misfit, ep=tp * dp if split_experts else tp,
        interval=interval, asked=asked, state_slots=cap.state_slots,
    )


def _stage_layouts(eng: Any, spec: ModelSpec, dtype: Any, version: Any, options: Any, pp: int) -> list[Any]:
    """The engine's layouts per stage; the same for every GPU type, so a search over GPUs (fit, --solve gpus)
    builds them once (layouts are frozen values; a caller gets its own list)."""
    key = (eng.name, spec, dtype, version, options, pp)
    try:
        hash(key)
    except TypeError:  # an option holding a mutable value: built each time
        return list(eng.stage_layouts(spec, dtype, version, options, pp))
    return list(_cached_layouts(key, eng))


@functools.lru_cache(maxsize=4096)  # bounded; 512 evicted a 10,000-file check's ~1,100 combinations (6,300 builds)
def _cached_layouts(key: tuple[Any, ...], eng: Any) -> tuple[Any, ...]:
    _, spec, dtype, version, options, pp = key
    return tuple(eng.stage_layouts(spec, dtype, version, options, pp))


def _interval(eng: Any, layouts: Any, version: Any, budget: Any, demand: Demand, workload: Any,
              prompt_len: int | None, dp: int, total_bytes: int, longest: int, extra: int,
              held_cap: int) -> dict[str, Any]:
    """The plan's budget-resting figures at the two ends of the engine's KV memory for ~90 % of deployments
    (``GpuBudget.kv_error``): the same capacity rules run on each end."""
    error = budget.kv_error
    ends = []
    for kv in error.bounds(budget.kv_cache_bytes, total_bytes):
        cap = eng.capacity(layouts, kv, version, budget, demand)
        if not workload.plain:
            cap = _shared_capacity(eng, layouts, kv, version, budget, demand, cap, workload, prompt_len, dp)[0]
        concurrency = cap.max_concurrency if cap.concurrency_per_replica else cap.max_concurrency * dp
        ends.append({"kv_cache_bytes": kv, "kv_cache_tokens": cap.kv_cache_tokens, "max_batch": cap.max_batch * dp,
                     "max_concurrency": round(concurrency, 4),
                     "max_context": min(_context_of(cap.max_context, extra, held_cap), longest),
                     "fits": cap.fits})
    low, high = ends
    return {**{key: [low[key], high[key]] for key in low}, "error_fraction": [error.low, error.high],
            "basis": error.basis, **({"few_logs": True} if error.thin else {})}


def _check_vendor(eng: Any, hw: GPU) -> None:
    """Refuse, by field, a GPU of a vendor the engine does not run on."""
    if eng.vendors is not None and hw.vendor in KNOWN_VENDORS and hw.vendor not in eng.vendors:
        runs_on = " and ".join(VENDOR_TITLES[v] for v in sorted(eng.vendors))
        raise UsageError(f"{eng.title} runs on {runs_on} GPUs only; {hw.name} is an {VENDOR_TITLES[hw.vendor]} GPU",
                         field="gpu")


def _expert_parallel(eng: Any, spec: ModelSpec, settings: Settings, expert_parallel: bool | None, tp: int,
                     dp: int) -> tuple[Settings, bool, list[str]]:
    """(the settings with the experts split over the dp ranks where they are, whether they are, notes)."""
    ep_notes: list[str] = []
    split_experts = _shares_experts(eng, spec, expert_parallel) and dp > 1
    if expert_parallel and dp > 1 and not split_experts:
        ep_notes.append(f"expert parallel: {spec.id} has no routed experts, so it changes nothing: {dp} whole replicas")
    elif split_experts:
        # vLLM FusedMoEParallelConfig.make (model_executor/layers/fused_moe/config.py): EP size = tp x dp, each
        # device owning whole experts; attention and its KV cache stay per DP rank, split over its tp
        from kvplan.record import replace as _replace

        settings = _replace(settings, expert_dp=dp)
        how = "" if expert_parallel else (f" ({eng.title} with data parallelism: its MoE layers shard the experts "
                                          "over the DP ranks even without expert parallelism)")
        ep_notes.append(f"expert parallel: the routed experts spread over ep = tp {tp} x dp {dp} = {tp * dp} GPUs "
                        f"(per pipeline stage){how}; attention, dense layers, embeddings and lm_head per "
                        f"data-parallel rank over its tp {tp}; each of the {dp} ranks has its own KV cache for its "
                        "own requests")
    return settings, split_experts, ep_notes


def _workload(context: int, shared_prefix: int, prompt_len: int | None, n: int, beam_width: int,
              speculation: Any) -> Any:
    """The requests as the user gave them (speculative slots are the engine's, added in its demand)."""
    if shared_prefix < 0 or shared_prefix > context:
        raise UsageError(f"shared-prefix {shared_prefix:,} must be between 0 and the context ({context:,})",
                         field="shared_prefix")
    if prompt_len is not None and not 1 <= prompt_len <= context:
        raise UsageError(f"prompt-len {prompt_len:,} must be between 1 and the context ({context:,})",
                         field="prompt_len")
    from kvplan.engines.sharing import Workload

    prompt = prompt_len if prompt_len is not None else context
    return Workload(prompt, context - prompt, shared_prefix, n, beam_width,
                    speculation.method if speculation is not None else None)


def _checked_options(eng: Any, spec: ModelSpec, settings: Settings, engine_options: dict[str, Any] | None,
                     **given: Any) -> Any:
    """The engine options (engine_options: further EngineOptions fields: transformers' quantized cache, eviction
    budgets, offload), refused where the engine does not take them or cannot split the model over tp."""
    options = make_engine_options(**{**given, **(engine_options or {})})
    check_options(eng, options)
    if settings.cpu_offload_bytes and "cpu_offload_bytes" not in eng.extra_options:
        raise UsageError(f"{eng.title} has no weight offload to host memory kvplan plans", field="cpu_offload_bytes")
    eng.check_parallel(spec, given["tp"])
    return options


def _shared_capacity(eng: Any, layouts: Any, kv: int, version: Any, budget: Any, demand: Demand, cap: Any,
                     workload: Any, prompt_len: int | None, dp: int) -> tuple[Any, int, str]:
    """(the capacity with what the requests share stored once, the max batch with nothing shared, why no request
    fits where the engine starts but none does)."""
    from kvplan.record import replace

    eng.sharing.check(workload)  # refused by field where the engine has no rule for samples or beams
    plain_sequences = cap.max_batch
    plain_batch = cap.max_batch // workload.samples * dp  # the same requests, each sequence its own cache
    context = workload.prompt_len + workload.output_len
    cap = eng.capacity(layouts, kv, version, budget,
                       replace(demand, batch=demand.batch // workload.samples, shared_prefix=workload.shared_prefix,
                               proposer=workload.proposer, n=workload.n, beam_width=workload.beam_width,
                               prompt_len=workload.prompt_len))
    notes = eng.sharing.notes(workload)
    if prompt_len is None and workload.samples > 1:
        notes = (f"the whole context ({context:,} tokens) is taken as the prompt the samples share; give a "
                 "prompt length for the part they do not", *notes)
    cap = replace(cap, assumptions=(*cap.assumptions, *notes))
    misfit = ""
    if cap.fits and cap.max_batch < 1:
        # the engine starts (one sequence of max_model_len fits) but no request of this workload does:
        # a max batch of 0 is not a fit
        misfit = _request_misfit(workload, context, kv, plain_sequences)
        cap = replace(cap, fits=False)
    return cap, plain_batch, misfit


def _capacity_notes(hw: GPU, cap: Any, longest: int, settings: Settings, model_limit: int | None,
                    limit: int) -> list[str]:
    notes = []
    if hw.estimate or hw.memory_precision != "exact":
        precision = f" ({hw.memory_precision})" if hw.memory_precision != "exact" else ""
        notes.append(f"{hw.name}: total memory {hw.memory_bytes / 2**30:.2f} GiB is "
                     f"{'an estimate' if hw.estimate else 'rounded'}{precision}")
    notes.extend(cap.assumptions)
    notes.extend(given_kv_notes(settings))
    if model_limit and longest == limit and limit == model_limit:
        notes.append(f"the longest context is capped at the model's limit, {model_limit:,} tokens")
    return notes


def _decode_bound(eng: Any, spec: ModelSpec, bandwidth: float, budget: Any, layouts: Any, workload: Any,
                  context: int, decode_batch: int, dp: int, split_experts: bool,
                  assumptions: list[str]) -> tuple[float, float]:
    """(seconds per decode step at least, tokens per second at most): the weights and KV one step reads at the
    GPU's bandwidth; says so in ``assumptions``."""
    sequences = decode_batch * workload.samples
    # under expert parallelism every rank's tokens reach this GPU's experts (all-to-all dispatch)
    weights_read, weights_how = decode_weights(spec, budget.item("weights"),
                                               sequences * (dp if split_experts else 1))
    # a cache in host memory (llama.cpp -nkvo) is read by the CPU, which runs its attention: llama.cpp
    # src/llama-graph.cpp build_attn_mha puts the attention nodes on backend_cpu unless offload_kqv
    host_kv = any(lay.pool == HOST_POOL for lay in layouts)
    if host_kv:
        kv_read, kv_how = 0, ""
    elif workload.plain:
        kv_read = max(lay.total_bytes(context, decode_batch) for lay in layouts)
        kv_how = f" and the KV of {decode_batch} sequence(s) of {context:,} tokens"
    else:
        reads = [eng.sharing.decode_kv_bytes(lay, workload, decode_batch) for lay in layouts]
        kv_read, how = max(reads)
        kv_how = (f" and the KV of {sequences} sequence(s) ({decode_batch} request(s)) of {context:,} tokens: "
                  f"{how}")
    decode_seconds = (weights_read + kv_read) / bandwidth
    if host_kv:
        assumptions.append(f"decode bound: one step reads {weights_how} at {bandwidth / 1e12:.2f} TB/s; the "
                           "KV cache is in host memory and its attention runs on the CPU at host memory "
                           "bandwidth, for which kvplan has no figure: not counted, so the bound is the weights' "
                           "read alone (still a lower bound on time per step, a looser one)")
    else:
        assumptions.append(f"decode bound: one step reads {weights_how}{kv_how} at "
                           f"{bandwidth / 1e12:.2f} TB/s: a lower bound on time per step (an upper bound on "
                           "tokens/s)")
    return decode_seconds, sequences * dp / decode_seconds


def _shares_experts(eng: Engine, spec: ModelSpec, expert_parallel: bool | None) -> bool:
    """Whether data-parallel ranks share one copy of the model's routed experts: asked for, or the engine's way
    (``dp_shares_experts``), and the model has routed experts."""
    shares = eng.dp_shares_experts if expert_parallel is None else expert_parallel
    return bool(shares and (spec.expert_weights_bytes or spec.routed_expert_params))


def _request_misfit(workload: Any, context: int, kv_bytes: int, plain_sequences: int) -> str:
    """Why not one request of ``workload`` fits the KV cache one GPU has."""
    samples = workload.samples
    label = "n" if workload.n > 1 else "beam width"
    what = f"a request of {samples:,} sequences ({label} {samples:,})" if samples > 1 else "one request"
    lower = (f"lower {'n' if workload.n > 1 else 'the beam width'}, the context or the prompt length"
             if samples > 1 else "lower the context")
    return (f"{what} of {context:,} tokens does not fit in the {max(kv_bytes, 0) / 2**30:.2f} GiB of KV cache per "
            f"GPU, even with what its sequences share stored once ({plain_sequences:,} sequence(s) of that length "
            f"fit with nothing shared): {lower}")


_UNCAPPED = 1 << 62


def _held_cap(sp: Any, max_len: int) -> int:
    """The most tokens one sequence holds, speculative slots included: ``max_len`` (max_model_len, or the
    context where longer) where the engine caps the slots there (vLLM ``KVCacheManager.allocate_slots``:
    computed + new + lookahead tokens, at most max_model_len), no cap where its tables have room for the slots
    past it. TensorRT-LLM (``tensorrt_llm/_torch/pyexecutor/py_executor_creator.py``) gives its
    ``KVCacheManager`` max_seq_len + ``get_num_extra_kv_tokens`` + the draft tokens (its max_blocks_per_seq),
    and ``KVCacheManager.prepare_resources`` (``resource_manager.py``) adds every draft token's slot, the
    n-gram drafter padding its list to max_draft_len; SGLang's req_to_token rows are context_len + 4 + the
    draft tokens (``ModelRunner`` ``extra_max_context_len``). A plan without speculation has no slots."""
    return max_len if sp is None or sp.capped_at_max_model_len else _UNCAPPED


def _longest(pool_context: int, extra: int, held_cap: int) -> int:
    """The longest context at batch 1 when each sequence holds ``extra`` speculative slots beyond it, up to
    ``held_cap`` tokens in all (the cap ``Demand`` applies; vLLM ``KVCacheManager.allocate_slots`` caps
    computed + new + lookahead tokens at max_model_len): a context that reaches the cap holds no slot
    beyond it, so a pool that holds the cap serves it whatever k is."""
    return pool_context if pool_context >= held_cap else max(0, pool_context - extra)


def _context_of(pool_context: int, extra: int, held_cap: int) -> int:
    """The interval's longest context: as before for capped engines (the held count, capped by the caller), the
    held count less the slots where every sequence holds them."""
    return pool_context if held_cap < _UNCAPPED else max(0, pool_context - extra)


def decode_weights(spec: ModelSpec, weights_bytes: int, batch: int) -> tuple[int, str]:
    """Weight bytes one decode step of ``batch`` tokens reads on one GPU, and how they were counted.

    Dense models read every weight. An MoE step reads the weights every token uses plus, per MoE layer,
    the routed experts its tokens go to: with ``k`` of ``E`` experts per token and uniform routing,
    ``E x (1 - (1 - k/E)^batch)`` distinct experts on average (at most all E). The routed experts'
    share of the bytes is their share of the parameters."""
    experts, top_k, routed = spec.num_experts, spec.experts_per_token, spec.routed_expert_params
    if not (experts and top_k and routed and spec.params and routed < spec.params):
        return weights_bytes, "this GPU's weights"
    touched = experts * (1 - (1 - top_k / experts) ** batch)
    routed_bytes = weights_bytes * routed / spec.params
    read = int(weights_bytes - routed_bytes + routed_bytes * touched / experts)
    return read, (f"this GPU's weights less the routed experts a batch of {batch} does not reach "
                  f"({touched:.1f} of {experts} experts per MoE layer on average, top-{top_k} uniform routing)")


def context_limit(spec: ModelSpec) -> int | None:
    """The longest context the model is configured for: max_position_embeddings, or what its
    rope_scaling extends to where that is longer."""
    limit = spec.max_position_embeddings
    if spec.rope_scaling is not None and spec.rope_scaling.extends_to:
        limit = max(limit or 0, spec.rope_scaling.extends_to)
    return limit


@dataclass(frozen=True)
class Search:
    """What ``--solve gpus`` keeps and how it searches the rest."""

    tp: int | None = None
    """A tensor-parallel size given: kept (None: searched)."""
    pp: int | None = None
    """A pipeline-parallel size given: kept (None: searched)."""
    expert_parallel: bool | None = None
    gpus_per_node: int = GPUS_PER_NODE

    def splits(self, layers: int) -> list[tuple[int, int]]:
        """(tp, pp) candidates as engines are deployed: tp a power of two within one node (vLLM's and SGLang's
        multi-node guides run tp = GPUs per node and pipeline stages across nodes; tp across nodes pays
        inter-node all-reduces every layer), pp > 1 only once tp fills the node, unless tp was given."""
        node_tp = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= self.gpus_per_node] or [1]
        tps = [self.tp] if self.tp is not None else node_tp
        out: list[tuple[int, int]] = []
        for tp in tps:
            if self.pp is not None:
                pps = [self.pp]
            elif self.tp is None and tp < node_tp[-1]:
                pps = [1]  # a node not yet filled by tp: no pipeline stages
            else:
                pps = [p for p in (1, 2, 4, 8, 16) if p <= layers]
            out.extend((tp, pp) for pp in pps)
        return out


def _solve_gpus(spec: ModelSpec, hw: GPU, engine: str, engine_version: str | None, kv_dtype: str, mml: int,
                context: int | None, block_size: int | None, settings: Settings,
                concurrency: int | None, swa_full: bool = False,
                engine_options: dict[str, Any] | None = None, sharing: Sharing = Sharing(),
                speculation: Any = None, search: Search = Search()) -> CapacityPlan:
    """The fewest GPUs of this type reaching ``concurrency`` (requests of ``sharing.n`` samples or beams), with
    what the requests share and the speculation planned as ``max_batch`` plans them. A tp or pp given is kept;
    the rest is searched as deployments are laid out (``Search.splits``), then replicas (dp) added. With expert
    parallelism a replica's capacity grows with dp (its experts spread further), so dp is searched too."""
    if concurrency is None or concurrency < 1:
        raise UsageError("solving for GPUs needs a concurrency (sequences of max-model-len to serve at once)",
                         field="concurrency")

    def one(tp: int, pp: int, dp: int, with_interval: bool = False, at: int | None = None) -> CapacityPlan:
        return plan(spec, hw, tp=tp, pp=pp, dp=dp, engine=engine, engine_version=engine_version,
                    kv_dtype=kv_dtype, max_model_len=mml, context=at or context or mml, batch=1,
                    block_size=block_size, settings=settings, swa_full=swa_full,
                    engine_options=engine_options, speculation=speculation, expert_parallel=search.expert_parallel,
                    with_interval=with_interval, **sharing.kwargs())

    candidates: list[tuple[int, int, int, int, int]] = []
    refusal: UsageError | None = None
    # smallest splits first: a split whose tp x pp already exceeds the fewest GPUs found cannot win (min() below is
    # order-free), and replicas beyond that count need not be searched
    for tp, pp in sorted(search.splits(spec.num_layers), key=lambda split: split[0] * split[1]):
        best_count = min(candidates)[0] if candidates else _MAX_SEARCH_GPUS
        most = min(_MAX_SEARCH_GPUS, best_count) // (tp * pp)
        if most < 1:
            continue
        try:
            first = one(tp, pp, 1)
            if not _shares_experts(get_engine(engine), spec, search.expert_parallel):
                dp = -(-concurrency // first.max_batch) if first.max_batch >= 1 else most + 1
            elif first.max_batch >= concurrency:
                dp = 1
            elif one(tp, pp, most).max_batch < concurrency:
                continue
            else:  # the total is monotone in dp (more replicas, each with fewer experts): the least that reaches it
                low, high = 1, most
                while high - low > 1:
                    mid = (low + high) // 2
                    low, high = (low, mid) if one(tp, pp, mid).max_batch >= concurrency else (mid, high)
                dp = high
        except UsageError as exc:
            if exc.field in _WORKLOAD_FIELDS:  # the workload is refused whatever the GPU count
                raise
            if search.tp is not None or search.pp is not None:
                refusal = refusal or exc  # the split the user gave is refused: say why if nothing else plans
            continue
        if dp <= most:
            candidates.append((tp * pp * dp, -tp, pp, dp, tp))
    what = "sequences" if sharing.n * sharing.beam_width == 1 else f"requests of {sharing.n * sharing.beam_width}"
    if not candidates:
        if refusal is not None:
            raise refusal
        raise UsageError(f"no deployment of up to {_MAX_SEARCH_GPUS} {hw.name} GPUs serves {concurrency:,} "
                         f"{what} of {context or mml:,} tokens")
    count, _, pp, dp, tp = min(candidates)
    best = one(tp, pp, dp, with_interval=True)
    shared = f" sharing a {sharing.shared_prefix:,}-token prefix" if sharing.shared_prefix else ""
    kept = [f"{name} {value} as given" for name, value in (("tp", search.tp), ("pp", search.pp)) if value is not None]
    how = "; ".join(kept) if kept else (f"tp a power of two within a node of {search.gpus_per_node} GPUs, pipeline "
                                        "stages only once tp fills the node")
    ep = f", experts over ep = {best.ep}" if best.ep > best.tp else ""
    note = (f"fewest {hw.name} GPUs for {concurrency} concurrent {what} of {context or mml:,} tokens{shared}: "
            f"{count} (tp {tp} x pp {pp} x dp {dp}{ep}; {how})")
    again = Asked(lambda at: one(tp, pp, dp, with_interval=True, at=at), context, concurrency)
    return replace(best, assumptions=(note, *best.assumptions), asked=again)
