"""vLLM (V1 engine) layout rules: paged KV cache, one page per block of ``block_size`` tokens per layer.

Rules and where they come from (vllm-project/vllm):
- Page sizes: ``vllm/v1/kv_cache_interface.py``. Full / sliding / chunked layers store
  ``block_size x kv_heads x (head_size + head_size_v)`` elements per page (plus fp32 scales for the
  per-token-head modes); ``MLAAttentionSpec`` stores one ``kv_lora_rank + qk_rope_head_dim`` (576)
  latent per token, no factor 2; ``MambaSpec`` pages hold one sequence's conv + SSM state.
- A sequence holds whole blocks: ``ceil(context / block_size)`` per full-attention layer.
- Sliding-window layers (``SlidingWindowManager.get_num_skipped_tokens`` in
  ``vllm/v1/core/single_type_kv_cache_manager.py``): tokens before ``context - window + 1`` are
  skipped and the blocks made only of skipped tokens are freed.
- Chunked local attention (``ChunkedLocalAttentionManager``): tokens before the current chunk's
  start are skipped likewise.
- Block size: ``CacheConfig`` default 16; ``vllm/platforms/cuda.py`` forces 64 for the FlashMLA
  backend (the MLA default on Hopper); hybrid attention + Mamba models raise the attention block
  so one attention page is at least one Mamba page (``HybridAttentionMambaModelConfig``).
- Recurrent state in the model dtype (``mamba_ssm_cache_dtype='auto'``) with a conv window of
  ``conv_kernel - 1`` columns (``MambaStateShapeCalculator`` in
  ``vllm/model_executor/layers/mamba/mamba_utils.py``); in hybrid models the state page is padded
  up to one attention page of the raised block size.
- Hybrid models: pages unified and layers cut into KV-cache groups (``pool.py``).
- Llama 4's chunked layers: ``VllmConfig.__post_init__`` turned the hybrid KV-cache manager off for
  ``attention_chunk_size`` models while ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE``
  defaulted to false (about v0.10 to v0.12): every layer then holds the whole sequence.
"""

from __future__ import annotations

from kvplan.dtypes import KVDType, engine_fp8
from kvplan.engines.layout import (
    CacheLayout,
    EngineOptions,
    GroupRule,
    KindRules,
    build_groups,
    cacheless_group,
    check_kv_dtype,
    group_by_kind,
    holds_nothing,
)
from kvplan.engines.rules import AllTokens, ChunkBlocks, WholePages, WindowBlocks
from kvplan.engines.version import Version, render_version
from kvplan.engines.vllm.pool import (
    DEFAULT_BLOCK_SIZE,
    padding_groups,
    paged,
    pool_grouping,
    unify_pages,
)
from kvplan.errors import UsageError
from kvplan.layouts.base import TokenCost
from kvplan.parallel import shard_spec
from kvplan.record import dataclass, replace
from kvplan.spec import (
    MLA,
    ChunkedLocal,
    FullAttention,
    KVAttention,
    ModelSpec,
    NoCache,
    Recurrent,
    SharedKV,
    SlidingWindow,
)

FLASHMLA_BLOCK_SIZE = 64
# Attention block sizes for hybrid Mamba models are multiples of the kernel alignment
# (platforms/interface.py ``_align_hybrid_block_size``): 16, and 64 for gated-delta-net layers once the
# FlashInfer GDN prefill kernel exports checkpoints (Hopper; 0.33 has it, 0.26 had neither: boundary
# approximate). Those layers also keep ``num_prefill_checkpoint_blocks`` = 1 extra page at admission.
_HYBRID_BLOCK_ALIGN = 16
_GDN_BLOCK_ALIGN = 64
GDN_CHECKPOINT_SINCE = (0, 27)
# Prefix caching on (the V1 default) turns mamba_cache_mode 'none' into 'align': a Mamba group is admitted
# with 2 pages (+ speculative + checkpoint blocks) instead of 1 (MambaModelConfig.verify_and_update_config,
# MambaSpec.max_memory_usage_bytes; present in 0.19, boundary approximate).
MAMBA_ALIGN_SINCE = (0, 19)
# The start-up check and the max-length estimate subtract the null block from the available memory
# (kv_cache_planning.get_kv_cache_configs): in 0.33, not in 0.26.0.
NULL_BLOCK_CHECK_SINCE = (0, 27)
# Quantised layouts vLLM defines for K/V heads only (kv_cache_interface.py), not for the MLA latent.
_NO_MLA_LAYOUT = frozenset({"int8_per_token_head", "fp8_per_token_head", "int4_per_token_head", "nvfp4"})
# Releases in which chunked local attention fell back to full attention by default (approximate
# bounds: the env default flipped to true after 0.12).
_CHUNKED_AS_FULL = ((0, 10), (0, 13))
# Async scheduling (the scheduler one batch ahead) became the default with PR #27614 (off in 0.11.0, on in
# the 0.19.0 logs; the first release with it is approximate).
ASYNC_SCHEDULING_SINCE = (0, 12)
# Sliding / chunked admission counts max_in_flight_tokens (two batches when async) in 0.26.0 and 0.33, one
# batch (max_num_batched_tokens) in 0.21.0 and before (kv_cache_interface.py); 0.22-0.25 unchecked.
ADMISSION_IN_FLIGHT_SINCE = (0, 23)

KV_DTYPES = frozenset({
    "float32", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
    "int8_per_token_head", "fp8_per_token_head", "int4_per_token_head", "nvfp4",
})
# vLLM's own fp8 name: ``CacheConfig.cache_dtype`` (vllm/config/cache.py) documents "fp8 (=fp8_e4m3)" on CUDA
# and ROCm; both spellings are accepted, the generic ``fp8`` of every engine maps here (kvplan.dtypes.engine_fp8).
FP8_KV = ("fp8", "vLLM's fp8 = fp8_e4m3 (--kv-cache-dtype fp8)")


def layout(spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
    """One tensor-parallel rank's cache for the whole model, groups padded as vLLM pads them."""
    kv_dtype, fp8_note = engine_fp8(kv_dtype, KV_DTYPES, *FP8_KV)
    check_kv_dtype("vLLM", KV_DTYPES, kv_dtype)
    spec = shard_spec(spec, options.tp)
    assumptions: list[str] = [fp8_note] if fp8_note else []
    state_costs = {id(layer): _state_cost(layer, spec) for layer in spec.layers if isinstance(layer, Recurrent)}
    block = _block_size(spec, kv_dtype, version, options, state_costs, assumptions)
    chunked_as_full = _CHUNKED_AS_FULL[0] <= version < _CHUNKED_AS_FULL[1]
    if chunked_as_full and any(isinstance(layer, ChunkedLocal) for layer in spec.layers):
        assumptions.append(
            f"vLLM {render_version(version)} turns the hybrid KV-cache manager off for chunked "
            "local attention by default: chunked layers hold the whole sequence"
        )
    lag = 2 if async_scheduling(version, options) else 1
    context = _Context(kv_dtype, block, state_costs, chunked_as_full, lag)
    groups = build_groups(spec, lambda layer, first: group_by_kind(RULES, layer, first, context, "vLLM"))
    groups = unify_pages(groups, assumptions)
    pool = replace(pool_grouping(groups), in_flight_batches=in_flight_batches(version, options),
                   state_pages=_state_pages(spec, version, assumptions),
                   reserved_blocks=1 if version >= NULL_BLOCK_CHECK_SINCE else 0)
    groups = groups + padding_groups(pool, spec.num_layers)
    if state_costs:
        assumptions.append(
            "vLLM holds one recurrent state per sequence (prefix caching in 'align' mode keeps up to 2 more)"
        )
    assumptions.append(
        f"vLLM: bytes held while the token at position 'context' is written, {'async' if lag == 2 else 'synchronous'} "
        f"scheduling ({'the default from about 0.12' if lag == 2 else 'the default before about 0.12'}"
        f"{'' if options.async_scheduling is None else ', as asked'}); sliding and chunked layers free "
        "their blocks one step later under async scheduling. JSON's admission_kv_bytes is what vLLM reserves to "
        "admit the requests (max_memory_usage_bytes at 8,192 batched tokens), the figure max-batch counts"
    )
    return CacheLayout("vllm", render_version(version), kv_dtype, block, groups, tuple(assumptions), pool)


def _state_cost(layer: Recurrent, spec: ModelSpec) -> TokenCost:
    elem = spec.dtype_bytes
    return layer.state_cost(conv_columns=layer.conv_kernel - 1, conv_elem_bytes=elem, ssm_elem_bytes=elem)


def _gdn_checkpoints(spec: ModelSpec, version: Version) -> bool:
    return version >= GDN_CHECKPOINT_SINCE and any(
        isinstance(layer, Recurrent) and layer.mixer == "gated_delta_net" for layer in spec.layers)


def _state_pages(spec: ModelSpec, version: Version, assumptions: list[str]) -> int:
    """Pages one Mamba group is admitted with (``MambaSpec.max_memory_usage_bytes``)."""
    if not any(isinstance(layer, Recurrent) for layer in spec.layers) or version < MAMBA_ALIGN_SINCE:
        return 1
    pages = 2 + (1 if _gdn_checkpoints(spec, version) else 0)
    assumptions.append(f"vLLM admits a request with {pages} state pages per Mamba group (prefix caching on: "
                       "mamba_cache_mode 'align'); a running sequence holds 1")
    return pages


def _block_size(spec: ModelSpec, dtype: KVDType, version: Version, options: EngineOptions,
                state_costs: dict[int, TokenCost], assumptions: list[str]) -> int:
    if options.block_size is not None:
        return options.block_size
    if any(isinstance(layer, MLA) for layer in spec.layers):
        assumptions.append(
            "vLLM block size 64: FlashMLA, the MLA backend on Hopper GPUs (Ampere: 16, Blackwell "
            "CUTLASS MLA: 128; pass a block size to change)"
        )
        return FLASHMLA_BLOCK_SIZE
    attention = [layer for layer in spec.layers if isinstance(layer, KVAttention)]
    if state_costs and attention:
        mamba_page = max(cost.bytes for cost in state_costs.values())
        attn_per_token = max(layer.token_cost(dtype).bytes for layer in attention)
        align = _GDN_BLOCK_ALIGN if _gdn_checkpoints(spec, version) else _HYBRID_BLOCK_ALIGN
        block = align * -(-mamba_page // (align * attn_per_token))
        assumptions.append(
            f"vLLM raises the attention block to {block} tokens so one attention page holds a "
            f"recurrent state page ({mamba_page:,} B)"
        )
        return max(block, DEFAULT_BLOCK_SIZE)
    return DEFAULT_BLOCK_SIZE


def async_scheduling(version: Version, options: EngineOptions) -> bool:
    """Whether the scheduler runs one batch ahead (``SchedulerConfig.async_scheduling``)."""
    if options.async_scheduling is not None:
        return options.async_scheduling
    return version >= ASYNC_SCHEDULING_SINCE


def in_flight_batches(version: Version, options: EngineOptions) -> int:
    """Batches a sliding or chunked group's admission reserves room for: ``max_in_flight_tokens`` (two
    batches under async scheduling) from about 0.23; one batch (``max_num_batched_tokens``) before."""
    if version < ADMISSION_IN_FLIGHT_SINCE:
        return 1
    return 2 if async_scheduling(version, options) else 1


@dataclass(frozen=True)
class _Context:
    """What vLLM's rules read besides the layer."""

    dtype: KVDType
    block: int
    state_costs: dict[int, TokenCost]
    """Each recurrent group's state per sequence, by ``id`` of its layer."""
    chunked_as_full: bool
    lag: int


def _full(layer: FullAttention, first: int, ctx: _Context) -> GroupRule:
    return paged(layer, first, layer.token_cost(ctx.dtype), ctx.block, WholePages(AllTokens(), ctx.block))


def _sliding(layer: SlidingWindow, first: int, ctx: _Context) -> GroupRule:
    return paged(layer, first, layer.token_cost(ctx.dtype), ctx.block, WindowBlocks(ctx.block, layer.window, ctx.lag))


def _chunked(layer: ChunkedLocal, first: int, ctx: _Context) -> GroupRule:
    if ctx.chunked_as_full:
        # the hybrid manager is off: vLLM gives these layers a FullAttentionSpec
        return paged(layer, first, layer.token_cost(ctx.dtype), ctx.block, WholePages(AllTokens(), ctx.block),
                     cache_kind="full")
    return paged(layer, first, layer.token_cost(ctx.dtype), ctx.block, ChunkBlocks(ctx.block, layer.chunk, ctx.lag))


def _mla(layer: MLA, first: int, ctx: _Context) -> GroupRule:
    if ctx.dtype.name in _NO_MLA_LAYOUT:
        raise UsageError(f"vLLM's MLA cache has no '{ctx.dtype.name}' layout (MLA takes auto, fp8 or fp8_ds_mla)",
                         field="kv_dtype")
    return paged(layer, first, layer.token_cost(ctx.dtype), ctx.block, WholePages(AllTokens(), ctx.block))


def _recurrent(layer: Recurrent, first: int, ctx: _Context) -> GroupRule:
    return replace(cacheless_group(layer, first, ctx.state_costs.get(id(layer))), block_size=ctx.block)


RULES: KindRules[_Context] = {
    FullAttention: _full,
    SlidingWindow: _sliding,
    ChunkedLocal: _chunked,
    MLA: _mla,
    Recurrent: _recurrent,
    SharedKV: holds_nothing,
    NoCache: holds_nothing,
}
"""vLLM's cache rule for each layer kind (``group_by_kind`` refuses a kind missing here)."""
