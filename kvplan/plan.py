"""``kvplan.max_batch``: what a deployment can serve, per the chosen engine's memory rules.

Flow: the model is cut into pipeline stages (``kvplan.parallel``), each stage's cache laid out for one
tensor-parallel rank (``kvplan.engines``), one GPU's memory divided by the engine's budget rules
(``kvplan.budgets``), and the KV memory turned into blocks, tokens and sequences
(``kvplan.capacity``). The stage with the least room decides, as engines take the minimum over ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kvplan import __version__
from kvplan.budgets import GpuBudget, MemoryItem, Settings
from kvplan.capacity import vllm_capacity, vllm_max_model_len, vllm_pool
from kvplan.dtypes import canonical_kv_dtype_name, resolve_kv_dtype
from kvplan.engines import EngineOptions, get_engine, parse_version
from kvplan.errors import UsageError
from kvplan.hardware import GPU, find_gpu, gpu_from_memory, load_catalog
from kvplan.monotone import largest
from kvplan.parallel import pp_partitions, stage_specs, tp_notes
from kvplan.spec import ModelSpec

Solve = Literal["batch", "context", "gpus"]
_MAX_SEARCH_GPUS = 512


@dataclass(frozen=True)
class PerGpu:
    budget_bytes: int
    weights_bytes: int
    activation_bytes: int
    cudagraph_bytes: int
    non_torch_bytes: int
    kv_cache_bytes: int


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
    engine_defaults: dict[str, float | int] = field(default_factory=dict)
    assumptions: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        if self.fits:
            return ""
        return (f"max-model-len {self.max_model_len:,} needs {self.request_kv_bytes / 2**30:.2f} GiB of KV per GPU; "
                f"{max(self.per_gpu.kv_cache_bytes, 0) / 2**30:.2f} GiB available; {self.max_model_len_fit:,} fits")

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (fields are added over time, never renamed)."""
        return {
            "kvplan_version": self.kvplan_version, "engine": self.engine, "engine_version": self.engine_version,
            "model": self.model_id,
            "gpu": {"name": self.gpu_name, "total_bytes": self.gpu_total_bytes, "count": self.gpu_count},
            "parallel": {"tp": self.tp, "pp": self.pp, "dp": self.dp},
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
        }


def resolve_gpu(gpu: str | None, gpu_memory: str | None, catalog_file: Any = None) -> GPU:
    if gpu_memory is not None:
        if gpu is not None:
            raise UsageError("give --gpu or --gpu-memory, not both")
        return gpu_from_memory(gpu_memory)
    if gpu is None:
        raise UsageError("name a GPU with --gpu (see `kvplan gpus`) or give --gpu-memory")
    return find_gpu(gpu, load_catalog(catalog_file))


def max_batch(
    model: str | ModelSpec,
    *,
    gpu: str | None = None,
    gpu_memory: str | None = None,
    catalog: Any = None,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    engine: str = "vllm",
    engine_version: str | None = None,
    kv_dtype: str = "auto",
    max_model_len: int | None = None,
    context: int | None = None,
    batch: int = 1,
    block_size: int | None = None,
    settings: Settings | None = None,
    solve: Solve = "batch",
    concurrency: int | None = None,
) -> CapacityPlan:
    """How many sequences (or how long a context, or how many GPUs) a deployment serves."""
    if isinstance(model, str):
        from kvplan.sources.resolve import load_model

        spec = load_model(model)
    else:
        spec = model
    hw = resolve_gpu(gpu, gpu_memory, catalog)
    settings = settings or Settings()
    mml = max_model_len or spec.max_position_embeddings
    if mml is None:
        raise UsageError(f"{spec.id} declares no max_position_embeddings: pass --max-model-len")
    for name, value in (("tp", tp), ("pp", pp), ("dp", dp), ("batch", batch), ("max-model-len", mml)):
        if value < 1:
            raise UsageError(f"--{name} {value} must be at least 1")
    if solve == "gpus":
        return _solve_gpus(spec, hw, engine, engine_version, kv_dtype, mml, context, block_size, settings,
                           concurrency)
    if solve not in ("batch", "context"):
        raise UsageError(f"--solve {solve}: choose batch, context or gpus")
    return plan(spec, hw, tp=tp, pp=pp, dp=dp, engine=engine, engine_version=engine_version, kv_dtype=kv_dtype,
                max_model_len=mml, context=context or mml, batch=batch, block_size=block_size, settings=settings)


def plan(spec: ModelSpec, hw: GPU, *, tp: int, pp: int, dp: int, engine: str, engine_version: str | None,
         kv_dtype: str, max_model_len: int, context: int, batch: int, block_size: int | None,
         settings: Settings) -> CapacityPlan:
    eng = get_engine(engine)
    heads = spec.num_attention_heads
    if eng.name in ("vllm", "sglang") and heads and heads % tp:
        raise UsageError(f"{eng.title} refuses --tp {tp}: the model's {heads} attention heads do not divide by it")
    version_text = engine_version or eng.default_version
    version = parse_version(version_text)
    dtype = resolve_kv_dtype(canonical_kv_dtype_name(kv_dtype), eng.auto_kv_dtype(spec))
    options = EngineOptions(block_size=block_size, tp=tp)
    if eng.name == "vllm" and pp > 1:
        from kvplan.engines.vllm import VLLM

        layouts = VLLM.stage_layouts(spec, dtype, version, options, pp_partitions(spec.num_layers, pp))
    else:
        layouts = [eng.layout(stage, dtype, version, options) for stage in stage_specs(spec, pp)]
    budget = _budget(eng.name, spec, hw.memory_bytes, tp, pp, version, max_model_len, batch, settings)
    kv = budget.kv_cache_bytes
    assumptions = list(dict.fromkeys([*spec.assumptions, *budget.assumptions,
                                      *(a for lay in layouts for a in lay.assumptions), *tp_notes(spec, tp)]))
    if hw.estimate or hw.memory_precision != "exact":
        assumptions.append(f"{hw.name}: total memory {hw.memory_bytes / 2**30:.2f} GiB is "
                           f"{'an estimate' if hw.estimate else 'rounded'} ({hw.memory_precision})")

    if eng.name == "vllm":
        mnbt = int(budget.defaults.get("max_num_batched_tokens", 8192))
        pools = [vllm_pool(layout) for layout in layouts]
        caps = [vllm_capacity(pool, kv, max_model_len, version, mnbt) for pool in pools]
        worst = min(range(len(pools)), key=lambda i: caps[i].num_blocks / max(caps[i].blocks_per_request, 1))
        pool, cap = pools[worst], caps[worst]
        in_flight = mnbt * (2 if version >= (0, 23) else 1)
        per_request = pool.blocks_per_request(context, in_flight)
        max_b = cap.num_blocks // per_request if per_request else 0
        longest = min(vllm_max_model_len(p, kv, version, mnbt, 1 << 26) for p in pools)
        max_ctx = longest if batch == 1 else \
            largest(lambda c: all(batch * p.blocks_per_request(c, in_flight) <= p.num_blocks(kv) for p in pools))
        if pool.padding_layers:
            assumptions.append(f"vLLM pads its hybrid groups with {pool.padding_layers} unused layer(s) per rank")
        tokens, concurrency, blocks = cap.kv_cache_tokens, cap.max_concurrency, cap.num_blocks
        request_bytes = cap.request_bytes
        fits = cap.num_blocks >= cap.blocks_per_request and kv > 0
        block = pool.block_size
    else:
        def needed(c: int, b: int) -> int:
            return max(layout.total_bytes(c, b) for layout in layouts)

        max_b = largest(lambda b: needed(context, b) <= kv)
        max_ctx = largest(lambda c: needed(c, batch) <= kv)
        longest = max_ctx if batch == 1 else largest(lambda c: needed(c, 1) <= kv)
        request_bytes = needed(max_model_len, 1)
        tokens = largest(lambda n: needed(n, 1) <= kv)
        concurrency = (kv / request_bytes) if request_bytes else 0.0
        if eng.name in ("sglang", "trtllm"):
            concurrency = tokens / max_model_len
        fits = request_bytes <= kv
        blocks, block = None, layouts[0].block_size
        if eng.name == "sglang" and any(g.kind in ("sliding", "chunked") and g.held_formula.startswith("min")
                                        for lay in layouts for g in lay.groups):
            assumptions.append("SGLang splits full and sliding-window pools by swa_full_tokens_ratio (0.8); kvplan "
                               "treats the KV memory as one pool, which is optimistic when the load does not "
                               "match that split")

    decode_seconds = decode_tps = None
    decode_batch = max(1, min(batch if batch > 1 else max_b, max_b)) if max_b else 0
    if hw.bandwidth and decode_batch:
        read = budget.item("weights") + max(lay.total_bytes(context, decode_batch) for lay in layouts)
        decode_seconds = read / hw.bandwidth
        decode_tps = decode_batch * dp / decode_seconds
        assumptions.append(f"decode bound: one step reads this GPU's weights and the KV of {decode_batch} "
                           f"sequence(s) of {context:,} tokens at {hw.bandwidth / 1e12:.2f} TB/s: a lower bound "
                           "on time per step (an upper bound on tokens/s)")
    per_gpu = PerGpu(
        budget_bytes=budget.item("budget") or budget.item("static") or hw.memory_bytes,
        weights_bytes=budget.item("weights"), activation_bytes=budget.item("activation"),
        cudagraph_bytes=budget.item("cudagraph"), non_torch_bytes=budget.item("non_torch"), kv_cache_bytes=kv,
    )
    return CapacityPlan(
        kvplan_version=__version__, engine=eng.name, engine_version=version_text, model_id=spec.id,
        gpu_name=hw.name, gpu_total_bytes=hw.memory_bytes, gpu_count=tp * pp * dp, tp=tp, pp=pp, dp=dp,
        kv_dtype=dtype.name, per_gpu=per_gpu, items=budget.items, block_size=block, num_blocks=blocks,
        kv_cache_tokens=tokens, max_model_len=max_model_len, context=context, batch=batch,
        max_concurrency=concurrency * dp if eng.name != "vllm" else concurrency, max_batch=max_b * dp,
        max_context=max_ctx, fits=fits, request_kv_bytes=request_bytes, max_model_len_fit=longest,
        decode_step_seconds_min=decode_seconds, decode_tokens_per_second_max=decode_tps,
        engine_defaults=budget.defaults, assumptions=tuple(dict.fromkeys(assumptions)),
    )


def _budget(engine: str, spec: ModelSpec, total: int, tp: int, pp: int, version: tuple, max_model_len: int,
            batch: int, settings: Settings) -> GpuBudget:
    if engine == "vllm":
        from kvplan.budgets import vllm

        return vllm.budget(spec, total, tp, pp, version, max_model_len, settings)
    if engine == "sglang":
        from kvplan.budgets import sglang

        return sglang.budget(spec, total, tp, pp, version, settings)
    if engine == "trtllm":
        from kvplan.budgets import trtllm

        return trtllm.budget(spec, total, tp, pp, settings)
    if engine == "llamacpp":
        from kvplan.budgets import llamacpp

        return llamacpp.budget(spec, total, tp, pp, settings)
    from kvplan.budgets import hf

    return hf.budget(spec, total, tp, pp, max_model_len, batch, settings)


def _solve_gpus(spec: ModelSpec, hw: GPU, engine: str, engine_version: str | None, kv_dtype: str, mml: int,
                context: int | None, block_size: int | None, settings: Settings,
                concurrency: int | None) -> CapacityPlan:
    """The fewest GPUs of this type (tp and pp powers of two, any dp) reaching ``concurrency``."""
    if concurrency is None or concurrency < 1:
        raise UsageError("--solve gpus needs --concurrency N (sequences of --max-model-len to serve at once)")
    layers = spec.num_layers
    candidates = []
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8, 16):
            if pp > layers:
                continue
            try:
                one = plan(spec, hw, tp=tp, pp=pp, dp=1, engine=engine, engine_version=engine_version,
                           kv_dtype=kv_dtype, max_model_len=mml, context=context or mml, batch=1,
                           block_size=block_size, settings=settings)
            except UsageError:
                continue
            if one.max_batch < 1:
                continue
            dp = -(-concurrency // one.max_batch)
            if tp * pp * dp <= _MAX_SEARCH_GPUS:
                candidates.append((tp * pp * dp, -tp, pp, dp, tp))
    if not candidates:
        raise UsageError(f"no deployment of up to {_MAX_SEARCH_GPUS} {hw.name} GPUs serves {concurrency} "
                         f"sequences of {mml:,} tokens")
    count, _, pp, dp, tp = min(candidates)
    best = plan(spec, hw, tp=tp, pp=pp, dp=dp, engine=engine, engine_version=engine_version, kv_dtype=kv_dtype,
                max_model_len=mml, context=context or mml, batch=1, block_size=block_size, settings=settings)
    note = (f"fewest {hw.name} GPUs for {concurrency} concurrent sequences of {mml:,} tokens: {count} "
            f"(tp {tp} x pp {pp} x dp {dp}; tp and pp searched over powers of two)")
    from dataclasses import replace

    return replace(best, assumptions=(note, *best.assumptions))
