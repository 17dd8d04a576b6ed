"""``kvplan fit``: which GPUs, how many, at what cost: the smallest deployment of each GPU type that holds a
workload, by each engine's own memory rules.

For each GPU type (the catalog, or those asked for), engine and KV dtype, ``max_batch(solve="gpus")`` finds the
fewest GPUs of that type that hold ``concurrency`` sequences of ``context`` tokens (tp within a node, pipeline
stages across nodes, then replicas: ``plan.Search``), and the row is that deployment planned again at the
workload's batch (the figures ``kvplan max-batch`` prints for it). Two bounds come with each row, labelled as
bounds: the decode step from memory bandwidth (weights and KV read once a step, the plan's own figure) and the
time to the first token from the prefill's FLOPs at the GPU's dense bf16 peak. Prices are the user's
(``load_prices``): kvplan ships none.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

import math

from kvplan.engines import DEFAULT_ENGINE
from kvplan.errors import UsageError
from kvplan.record import dataclass, field, replace

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    Progress = Callable[[int, int], None]
    """Called with (done, total) after each GPU type x engine x KV dtype is planned."""


@dataclass(frozen=True)
class Prices:
    """What a GPU-hour costs, per catalog GPU name (the user's figures; kvplan ships none)."""

    per_gpu_hour: Mapping[str, float]
    currency: str = "USD"
    source: str = ""


@dataclass(frozen=True)
class Beside:
    """A second model served on the same GPUs as each row's replicas (``kvplan fit --beside``): ``concurrency``
    sequences of ``context`` tokens, spread over the row's replicas like the row's own."""

    model: Any
    context: int
    concurrency: int = 1


@dataclass(frozen=True)
class BesideRow:
    """Whether the second model fits on a row's GPUs: both at the least memory fraction that holds its workload
    (the row's model started first, the other on what it leaves), planned with ``kvplan.share``."""

    model: str
    setting: str
    flag: str
    fraction: float | None
    """The row's model's least fraction; None where it was not found."""
    beside_fraction: float | None
    fits: bool
    reason: str
    share: Any = None
    """The pair planned (``kvplan.share.ShareResult``), both orders; None where it was not planned."""

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "setting": self.setting, "flag": self.flag, "fraction": self.fraction,
                "beside_fraction": self.beside_fraction, "fits": self.fits, "reason": self.reason,
                "share": self.share.to_dict() if self.share is not None else None}


@dataclass(frozen=True)
class FitRow:
    gpu: str
    engine: str
    engine_version: str
    kv_dtype: str
    tp: int
    pp: int
    dp: int
    """Replicas (data-parallel ranks), each with its own KV cache."""
    gpus: int
    nodes: int
    kv_cache_tokens: int
    """Tokens one replica's KV pool holds."""
    max_concurrency: int
    """Sequences of the context the whole deployment holds at once (``max_batch``)."""
    kv_left_bytes: int
    """KV memory per GPU the workload leaves unused (its concurrency spread over the replicas)."""
    decode_step_seconds_min: float | None
    """A bound: one decode step at the workload's concurrency reads the weights and KV once at peak bandwidth."""
    output_tokens_per_second_max: float | None
    ttft_seconds_min: float | None
    """A bound: the prefill of one request's prompt at the GPU's dense bf16 peak, tp ranks busy."""
    usd_per_hour: float | None
    usd_per_million_output_tokens: float | None
    """At the decode bound: the least the output costs on this deployment."""
    command: str
    """The launch command (one replica's where the engine starts replicas apart); "" where kvplan writes none."""
    assumptions: tuple[str, ...] = ()
    plan: Any = field(default=None, compare=False, repr=False)
    """The ``CapacityPlan`` behind the row (``max-batch``'s figures)."""
    beside: BesideRow | None = None
    """With ``fit(beside=...)``: whether the second model fits on this row's GPUs."""

    def to_dict(self) -> dict[str, Any]:
        extra = {"beside": self.beside.to_dict()} if self.beside is not None else {}
        return {"gpu": self.gpu, "engine": self.engine, "engine_version": self.engine_version,
                "kv_dtype": self.kv_dtype, "parallel": {"tp": self.tp, "pp": self.pp, "dp": self.dp},
                "gpus": self.gpus, "nodes": self.nodes, "kv_cache_tokens": self.kv_cache_tokens,
                "max_concurrency": self.max_concurrency, "kv_left_bytes": self.kv_left_bytes,
                "decode_step_seconds_min": self.decode_step_seconds_min,
                "output_tokens_per_second_max": self.output_tokens_per_second_max,
                "ttft_seconds_min": self.ttft_seconds_min, "usd_per_hour": self.usd_per_hour,
                "usd_per_million_output_tokens": self.usd_per_million_output_tokens,
                "command": self.command, "assumptions": list(self.assumptions), **extra}


@dataclass(frozen=True)
class Refused:
    """A GPU type x engine x KV dtype with no deployment that holds the workload, and why."""

    gpu: str
    engine: str
    kv_dtype: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "engine": self.engine, "kv_dtype": self.kv_dtype, "reason": self.reason}


@dataclass(frozen=True)
class FitResult:
    kvplan_version: str
    model_id: str
    context: int
    concurrency: int
    prompt_len: int
    gpus_per_node: int
    rows: tuple[FitRow, ...]
    refused: tuple[Refused, ...]
    currency: str | None
    assumptions: tuple[str, ...] = ()
    beside: Beside | None = None

    def to_dict(self) -> dict[str, Any]:
        beside = self.beside
        extra = {"beside": {"model": getattr(beside.model, "id", beside.model), "context": beside.context,
                            "concurrency": beside.concurrency}} if beside is not None else {}
        return {"kvplan_version": self.kvplan_version, "model": self.model_id,
                "workload": {"context": self.context, "concurrency": self.concurrency,
                             "prompt_len": self.prompt_len},
                "gpus_per_node": self.gpus_per_node, "currency": self.currency,
                "rows": [r.to_dict() for r in self.rows], "refused": [r.to_dict() for r in self.refused],
                "assumptions": list(self.assumptions), **extra}


def fit(model: Any, *, context: int, concurrency: int, gpus: Sequence[str] | None = None,
        engines: Sequence[str] = (DEFAULT_ENGINE,), kv_dtypes: Sequence[str] = ("auto",), engine_version: str | None = None,
        gpus_per_node: int = 8, prompt_len: int | None = None, prices: Prices | None = None, catalog: Any = None,
        settings: Any = None, progress: Progress | None = None, beside: Beside | None = None) -> FitResult:
    """The smallest deployment of each GPU type (x engine x KV dtype) holding ``concurrency`` sequences of
    ``context`` tokens (``max_model_len`` = ``context``). ``prompt_len`` (default: the context) sizes the
    time-to-first-token bound. Rows sorted by GPU count then by KV memory left over (most first); with
    ``prices``, by $/hour. ``beside``: a second model on each row's GPUs (``BesideRow``); the rows are still
    the smallest for the model alone."""
    from kvplan._version import __version__
    from kvplan.hardware import find_gpu, load_catalog
    from kvplan.sources.resolve import load_model

    spec = load_model(model) if isinstance(model, str) else model
    if beside is not None:
        beside = replace(beside, model=load_model(beside.model) if isinstance(beside.model, str) else beside.model)
        for name, value in (("beside_context", beside.context), ("beside_concurrency", beside.concurrency)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{value!r} must be a whole number of at least 1", field=name)
    for name, value in (("context", context), ("concurrency", concurrency), ("gpus_per_node", gpus_per_node)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{value!r} must be a whole number of at least 1", field=name)
    prompt = context if prompt_len is None else prompt_len
    if not 1 <= prompt <= context:
        raise UsageError(f"{prompt:,} must be from 1 to the context ({context:,})", field="prompt_len")
    table = load_catalog(catalog)
    types = list(table) if not gpus else [find_gpu(name, table) for name in dict.fromkeys(gpus)]
    if prices is not None:
        unpriced = [g.name for g in types if g.name not in prices.per_gpu_hour]
        if gpus and unpriced:  # asked for by name: a missing price is a mistake, not a skipped row
            raise UsageError(f"no price for {', '.join(unpriced)} in the prices file", field="prices")
        types = [g for g in types if g.name in prices.per_gpu_hour]
    combos = [(g, e, d) for g in types for e in engines for d in kv_dtypes]
    rows, refused = [], []
    for done, (hw, engine, kv_dtype) in enumerate(combos, 1):
        try:
            row = _row(spec, hw, engine, kv_dtype, engine_version, context, concurrency, prompt, gpus_per_node,
                       prices, settings)
            rows.append(row if beside is None else replace(row, beside=_beside(spec, hw, row, beside, settings)))
        except UsageError as exc:
            if exc.field not in _PER_DEPLOYMENT:
                raise  # the workload or a flag is refused whatever the GPU: the user's to fix, said once
            refused.append(Refused(hw.name, engine, kv_dtype, str(exc)))
        if progress is not None:
            progress(done, len(combos))
    key = ((lambda r: (r.usd_per_hour, r.gpus, -r.kv_left_bytes)) if prices is not None
           else (lambda r: (r.gpus, -r.kv_left_bytes, r.gpu)))
    notes = ["decode and time-to-first-token figures are bounds (peak bandwidth and dense bf16 FLOPs), not "
             "measured speeds",
             f"GPUs per replica searched as engines are deployed: tp within a node of {gpus_per_node} GPUs, pipeline "
             "stages across nodes, then replicas"]
    if prices is not None:
        notes.append(f"prices: the user's ({prices.source or 'given'}); $ per million output tokens at the "
                     "decode bound")
    if beside is not None:
        notes.append(f"beside: {beside.model.id} ({beside.concurrency:,} sequences of {beside.context:,} tokens over "
                     "each row's replicas) on the same GPUs, both at the least memory fraction that holds their "
                     f"workload, {spec.id} started first; the rows are the smallest deployments of {spec.id} alone")
    return FitResult(__version__, spec.id, context, concurrency, prompt, gpus_per_node,
                     tuple(sorted(rows, key=key)), tuple(refused), prices.currency if prices else None, tuple(notes),
                     beside)


# UsageError fields that mean "this GPU type x engine x dtype cannot hold it" rather than a mistake in the request
_PER_DEPLOYMENT = frozenset({None, "tp", "pp", "dp", "kv_dtype", "kv_cache_dtype", "gpu", "max_model_len",
                             "concurrency", "engine_version"})


def _row(spec: Any, hw: Any, engine: str, kv_dtype: str, engine_version: str | None, context: int,
         concurrency: int, prompt: int, gpus_per_node: int, prices: Prices | None, settings: Any) -> FitRow:
    from kvplan.engines import get_engine
    from kvplan.plan import max_batch

    common = {"gpu": hw, "engine": engine, "engine_version": engine_version, "kv_dtype": kv_dtype,
              "max_model_len": context, "context": context, "settings": settings}
    found = max_batch(spec, solve="gpus", concurrency=concurrency, gpus_per_node=gpus_per_node, **common)
    per_replica = -(-concurrency // found.dp)
    plan = max_batch(spec, tp=found.tp, pp=found.pp, dp=found.dp, batch=per_replica, **common)
    plan = replace(plan, assumptions=(*found.assumptions[:1], *plan.assumptions))
    kv_left = plan.per_gpu.kv_cache_bytes - per_replica * plan.request_kv_bytes
    step = plan.decode_step_seconds_min
    tps = concurrency / step if step else None
    ttft = _ttft(spec, hw, prompt, plan.tp)
    hourly = prices.per_gpu_hour[hw.name] * plan.gpu_count if prices is not None else None
    per_million = hourly / (tps * 3600) * 1e6 if hourly is not None and tps else None
    eng = get_engine(engine)
    command, notes = _command(eng, spec.id, plan, kv_dtype, context, gpus_per_node)
    return FitRow(gpu=hw.name, engine=plan.engine, engine_version=plan.engine_version, kv_dtype=plan.kv_dtype,
                  tp=plan.tp, pp=plan.pp, dp=plan.dp, gpus=plan.gpu_count,
                  nodes=-(-plan.gpu_count // gpus_per_node), kv_cache_tokens=plan.kv_cache_tokens,
                  max_concurrency=plan.max_batch, kv_left_bytes=kv_left, decode_step_seconds_min=step,
                  output_tokens_per_second_max=tps, ttft_seconds_min=ttft, usd_per_hour=hourly,
                  usd_per_million_output_tokens=per_million, command=command, assumptions=notes, plan=plan)


def _beside(spec: Any, hw: Any, row: FitRow, beside: Beside, settings: Any) -> BesideRow:
    """The second model on the row's GPUs: the row's model at its least fraction for its workload, then the other
    at its least fraction on what the first leaves (``device_used_bytes``), the pair planned in both orders."""
    from kvplan.budgets.base import Settings
    from kvplan.engines import get_engine
    from kvplan.errors import KvplanError
    from kvplan.plan import max_batch
    from kvplan.share import Tenant, share_gpu, start_in_turn

    plan, other = row.plan, beside.model
    eng = get_engine(row.engine)
    if eng.memory_fraction is None:
        return BesideRow(other.id, "", "", None, None, False, f"{eng.title} takes no memory fraction: kvplan cannot "
                         "size two deployments on one GPU with it")
    field_name, flag = eng.memory_fraction
    base = settings or Settings()
    common = {"gpu": hw, "engine": row.engine,
              "engine_version": plan.engine_version, "tp": plan.tp, "pp": plan.pp, "dp": plan.dp}
    per_replica, other_per_replica = plan.batch, -(-beside.concurrency // plan.dp)

    def mine(chosen: Any) -> Any:
        return max_batch(spec, kv_dtype=row.kv_dtype, max_model_len=plan.max_model_len, context=plan.context,
                         batch=per_replica, settings=chosen, **common)

    def theirs(chosen: Any) -> Any:
        return max_batch(other, max_model_len=beside.context, context=beside.context, batch=other_per_replica,
                         settings=chosen, **common)

    fraction = other_fraction = None
    try:
        fraction = max_batch(spec, kv_dtype=row.kv_dtype, max_model_len=plan.max_model_len, context=plan.context,
                             batch=per_replica, concurrency=per_replica * plan.dp, solve="utilization", settings=base,
                             **common).solved["value"]
        first = Tenant(spec.id, row.engine, replace(base, **{field_name: fraction}), mine)
        takes = start_in_turn([first])[0].deployments[0].takes_bytes
        other_fraction = max_batch(other, max_model_len=beside.context, context=beside.context,
                                   batch=other_per_replica, concurrency=other_per_replica * plan.dp,
                                   solve="utilization", settings=replace(base, device_used_bytes=takes),
                                   **common).solved["value"]
        second = Tenant(other.id if other.id != spec.id else f"{other.id} (beside)", row.engine, replace(base, **{field_name: other_fraction}), theirs)
        shared = share_gpu([first, second], fixes=False)
    except KvplanError as exc:
        return BesideRow(other.id, field_name, flag, fraction, other_fraction, False, exc.message)
    given = shared.orders[0]
    reason = "; ".join(f"{d.name}: {d.reason or d.capped}" for d in given.deployments if not (d.starts and d.fits))
    return BesideRow(other.id, field_name, flag, fraction, other_fraction, given.all_fit, reason, shared)


def _command(eng: Any, model: str, plan: Any, kv_dtype: str, context: int,
             gpus_per_node: int) -> tuple[str, tuple[str, ...]]:
    """The launch command. Whole replicas (each its own copy of the weights) are separate servers: one command,
    run once per replica behind a load balancer. Replicas that share the routed experts (expert parallelism
    over the data-parallel ranks) are one engine: one command with the data-parallel size."""
    from kvplan.engines.launch import Deployment

    if eng.launch is None:
        return "", (f"kvplan writes no launch command for {eng.title}",)
    shared = plan.ep > plan.tp
    asked = None if kv_dtype.strip().lower() == "auto" else plan.kv_dtype
    dp = plan.dp if shared else 1
    command = eng.launch(Deployment(model, plan.tp, plan.pp, dp, context, asked, shared))
    notes = []
    if plan.dp > 1 and not shared:
        notes.append(f"{plan.dp} replicas: run this command once per replica ({plan.tp * plan.pp} GPUs each), "
                     "behind a load balancer")
    if plan.tp * plan.pp * dp > gpus_per_node:
        notes.append("spans nodes: start the engine's multi-node runtime first (vLLM: Ray or --data-parallel-address;"
                     " SGLang: --nnodes/--node-rank; TensorRT-LLM: MPI)")
    return command, tuple(notes)


def prefill_flops(spec: Any, prompt: int) -> float | None:
    """FLOPs of one prompt's prefill: 2 per active parameter per token (the routed experts at top-k / E), plus
    causal attention over the prompt (QK^T and AV: 2 x prompt^2 x heads x head_dim per attention layer)."""
    params = spec.params
    if not params:
        return None
    routed, experts, top_k = spec.routed_expert_params, spec.num_experts, spec.experts_per_token
    active = params - routed + routed * top_k / experts if routed and experts and top_k else params
    heads = spec.num_attention_heads or 0
    attention = 0.0
    for layer in spec.layers:
        head_dim = getattr(layer, "head_dim", None)
        if not head_dim or getattr(layer, "kv_heads", None) is None:
            continue  # MLA, recurrent and cacheless layers: their projections are in the parameters
        span = min(prompt, getattr(layer, "window", None) or getattr(layer, "chunk", None) or prompt)
        attention += layer.count * 2.0 * prompt * span * heads * head_dim
    return 2.0 * active * prompt + attention


def _ttft(spec: Any, hw: Any, prompt: int, tp: int) -> float | None:
    flops = prefill_flops(spec, prompt)
    if flops is None or not hw.tflops:
        return None
    return flops / (hw.tflops * 1e12 * tp)


def load_prices(path: str) -> Prices:
    """A prices file (YAML or JSON): ``currency`` (default USD) and ``gpus``: catalog GPU name or alias ->
    price of one GPU-hour. Every name is resolved against the catalog; a bad entry is refused by name."""
    from kvplan.hardware import find_gpu, load_catalog
    from kvplan.safe_io import load_yaml, read_text

    data = load_yaml(read_text(path), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), dict) or not data["gpus"]:
        raise UsageError(f"{path}: a prices file maps `gpus:` (GPU name -> price per GPU-hour); see "
                         "`kvplan schema prices`", field="prices")
    unknown = set(data) - {"currency", "gpus", "source"}
    if unknown:
        raise UsageError(f"{path}: unknown key {sorted(unknown)[0]!r} (known: currency, gpus, source)",
                         field="prices")
    currency = data.get("currency", "USD")
    if not isinstance(currency, str) or not 1 <= len(currency) <= 8:
        raise UsageError(f"{path}: currency {currency!r} is not a currency code", field="prices")
    table = load_catalog(None)
    prices: dict[str, float] = {}
    for name, value in data["gpus"].items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e6 \
                or math.isnan(value):
            raise UsageError(f"{path}: {name}: {value!r} is not a price per GPU-hour", field="prices")
        prices[find_gpu(str(name), table).name] = float(value)
    return Prices(prices, currency, str(data.get("source") or path))


def prices_schema() -> dict[str, Any]:
    """The prices file's JSON schema (``kvplan schema prices``)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "kvplan prices",
            "type": "object", "additionalProperties": False, "required": ["gpus"],
            "properties": {
                "currency": {"type": "string", "default": "USD", "description": "Currency code of the prices."},
                "source": {"type": "string", "description": "Where the prices come from (shown in the output)."},
                "gpus": {"type": "object", "minProperties": 1,
                         "description": "GPU name or alias from `kvplan gpus` -> price of one GPU-hour.",
                         "additionalProperties": {"type": "number", "exclusiveMinimum": 0}}}}
