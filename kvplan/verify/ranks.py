"""What each rank of a tensor x pipeline parallel deployment holds: the plans, no torch.

Rank ``r`` of ``tp`` x ``pp`` ranks is tensor-parallel rank ``r % tp`` of pipeline stage ``r // tp``
(torchrun's and vLLM's order: the ranks of one stage are consecutive). Its cache is built with the
same calls ``kvplan max-batch`` makes (``kvplan.plan.plan``):

- vLLM with ``pp`` > 1: ``VLLM.stage_layouts`` -- the whole model's KV-cache groups projected on
  each stage's layers (``pp_partitions``), with ``EngineOptions(tp=...)`` splitting the KV heads
  (``kvplan.parallel.shard_spec``: ``max(1, kv_heads // tp)``, replicated past the head count; MLA
  latents replicated on every rank).
- otherwise: the engine's own ``stage_layouts`` (each ``stage_specs`` stage; transformers refuses ``tp`` > 1).

Every rank of one stage holds the same shard: the heads split evenly, whatever the tp rank.
``kvplan.verify.distributed`` executes these plans, one process per rank.
"""

from __future__ import annotations

from typing import Any

from kvplan.dtypes import canonical_kv_dtype_name, resolve_kv_dtype
from kvplan.engines import DEFAULT_ENGINE, CacheLayout, EngineOptions, get_engine
from kvplan.parallel import pp_partitions, tp_notes
from kvplan.record import dataclass
from kvplan.spec import ModelSpec
from kvplan.verify.errors import VerifyError
from kvplan.verify.shapes import CachePlan, VerifyWorkload, plan_cache, resolve_workload

#: Most ranks one verify run starts or joins (bounded time and memory).
MAX_RANKS = 64


@dataclass(frozen=True)
class RankPlan:
    rank: int
    tp_rank: int
    pp_rank: int
    first_layer: int
    """The stage's first decoder layer (model numbering)."""
    num_layers: int
    """Decoder layers of the stage."""
    plan: CachePlan
    work: VerifyWorkload | None = None
    """The context, shared prefix, samples or beams and speculative slots every rank allocates."""


def placement(rank: int, tp: int) -> tuple[int, int]:
    """(tp_rank, pp_rank) of ``rank``: the tp ranks of one stage are consecutive."""
    return rank % tp, rank // tp


def check_parallel(tp: int, pp: int) -> None:
    for name, value in (("tp", tp), ("pp", pp)):
        if value < 1:
            raise VerifyError(f"--{name} {value} must be at least 1")
    if tp * pp > MAX_RANKS:
        raise VerifyError(f"--tp {tp} x --pp {pp} = {tp * pp} ranks: verify runs at most {MAX_RANKS}")


def stage_layouts(spec: ModelSpec, *, tp: int, pp: int, engine: str, engine_version: str | None,
                  kv_dtype: str, block_size: int | None) -> tuple[list[CacheLayout], list[ModelSpec]]:
    """One layout per pipeline stage (what one rank of that stage holds), by the engine's own
    ``stage_layouts`` and its tensor-parallel refusals: the same calls max-batch makes. Every stage plans
    its tensors from the whole spec (only its dtype and id are read)."""
    eng = get_engine(engine)
    if block_size is not None and block_size <= 0:
        raise VerifyError(f"{block_size} must be a positive integer", field="block_size")
    eng.check_parallel(spec, tp)
    version = eng.version_of(engine_version)[1]
    dtype = resolve_kv_dtype(canonical_kv_dtype_name(kv_dtype), eng.auto_kv_dtype(spec))
    layouts = eng.stage_layouts(spec, dtype, version, EngineOptions(block_size=block_size, tp=tp), pp)
    if eng.tensor_plan(spec, layouts[0], 1, 1) is None:
        raise VerifyError(f"verify has no tensor layout for {eng.title}: use `kvplan estimate` for it",
                          field="engine")
    return layouts, [spec] * pp


def plan_ranks(spec: ModelSpec, *, tp: int = 1, pp: int = 1, batch: int = 1, context: int | None = None,
               engine: str = DEFAULT_ENGINE, engine_version: str | None = None, kv_dtype: str = "auto",
               block_size: int | None = None, prompt_len: int | None = None, output_len: int | None = None,
               shared_prefix: int = 0, n: int = 1, beam_width: int = 1, speculative_method: str | None = None,
               num_speculative_tokens: int | None = None, speculative_model: Any = None) -> tuple[RankPlan, ...]:
    """The cache every one of the ``tp`` x ``pp`` ranks allocates, in rank order.

    ``context`` defaults to 8,192 or prompt + output. With a shared prefix, ``n``, beams or speculative
    decoding (``kvplan.verify.verify``'s arguments) every rank holds its shard of the shared layout: the
    same block tables as one device (sharing is by token position, the same on every rank), each block
    a shard's page; the draft's layers join each rank's pool sharded at the target's tp."""
    check_parallel(tp, pp)
    if batch <= 0:
        raise VerifyError(f"--batch {batch} must be positive", field="batch")
    if context is not None and context <= 0:
        raise VerifyError(f"--context {context} must be positive", field="context")
    work = resolve_workload(spec, engine, context, prompt_len=prompt_len, output_len=output_len,
                            shared_prefix=shared_prefix, n=n, beam_width=beam_width,
                            speculative_method=speculative_method, num_speculative_tokens=num_speculative_tokens,
                            speculative_model=speculative_model, pp=pp)
    layouts, specs = stage_layouts(work.spec, tp=tp, pp=pp, engine=engine, engine_version=engine_version,
                                   kv_dtype=kv_dtype, block_size=block_size)
    plans = [plan_cache(s, layout, batch, work.alloc_context, work.workload) for s, layout in zip(specs, layouts)]
    if pp == 1:  # the per-rank bytes `kvplan estimate --tp` prints: one source of truth
        from kvplan.estimate import estimate

        printed = estimate(spec, contexts=[work.context], batches=[batch], kv_dtypes=[kv_dtype], engine=engine,
                           engine_version=engine_version, block_size=block_size, tp=tp,
                           **work.estimate_kwargs).rows[0].kv_bytes
        if printed != plans[0].predicted_bytes:
            raise VerifyError(f"internal: estimate --tp {tp} says {printed:,} B, the rank's layout "
                              f"{plans[0].predicted_bytes:,} B")
    firsts, start = [], 0
    for size in pp_partitions(work.spec.num_layers, pp):  # a draft's layers (pp 1 only) join the stage
        firsts.append((start, size))
        start += size
    out = []
    for rank in range(tp * pp):
        tp_rank, pp_rank = placement(rank, tp)
        first, size = firsts[pp_rank]
        out.append(RankPlan(rank, tp_rank, pp_rank, first, size, plans[pp_rank], work))
    return tuple(out)


def parallel_notes(spec: ModelSpec, tp: int, pp: int) -> list[str]:
    notes = list(tp_notes(spec, tp))
    if pp > 1:
        sizes = pp_partitions(spec.num_layers, pp)
        notes.append(f"pipeline stages hold {', '.join(map(str, sizes))} layers (vLLM's get_pp_indices split)")
    if tp > 1 and pp > 1:
        notes.append(f"rank r is tp rank r % {tp} of pipeline stage r // {tp}")
    return notes
