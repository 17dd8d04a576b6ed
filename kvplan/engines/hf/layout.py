"""Hugging Face transformers layout rules: what ``generate`` holds in its cache after a prefill of ``context`` tokens.

``hf`` is the default ``DynamicCache``; ``hf-static`` is ``StaticCache(max_cache_len=context)``.
Rules from ``src/transformers/cache_utils.py`` (transformers 5.x), checked against what
transformers 5.23 itself allocated for 24 real configs (tests/data/cache_oracle_dev.json):

- Full attention layers (``DynamicLayer``): every token, K and V ``[batch, kv_heads, tokens, head_dim]``
  in the model dtype; no paging, no rounding.
- Sliding layers (``DynamicSlidingWindowLayer``): after an update keeps the last ``window - 1``
  tokens; ``StaticSlidingWindowLayer`` allocates ``min(window, max_cache_len)``.
- Chunked-attention layers (Llama 4) are cached like sliding layers with the chunk as window.
- MLA (DeepSeek-V2/V3, Kimi-K2): the latent, keys ``[.., kv_lora_rank]`` and values
  ``[.., qk_rope_head_dim]``, since PR #47761 (mid 2026; 5.12 still expanded, 5.23 measured latent);
  before, per-head K and V (``DeepseekV3Attention.forward`` up-projected, then cached).
- Recurrent layers (``LinearAttentionLayer``): conv state ``[conv_dim, conv_kernel]`` in the model
  dtype, SSM / recurrent state in float32 because the scan kernels return fp32 final states
  (mamba-2.8b: 368,640 B per layer; Qwen3-Next GDN layer: 2,162,688 B). 4.x ``MambaCache``
  preallocated both in the model dtype.
- Before 4.56 (PR #40039 added ``DynamicSlidingWindowLayer``) ``DynamicCache`` kept every token of
  sliding layers, except Gemma 2/3, whose generation_config asked for the static ``HybridCache``
  (sliding layers ``min(window, length)``, from 4.42 to 4.55).
"""

from __future__ import annotations

from kvplan.dtypes import KVDType
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
    no_tensor_parallel,
)
from kvplan.engines.rules import AllTokens, KeepLast
from kvplan.engines.version import Version, render_version
from kvplan.errors import UsageError
from kvplan.layouts import mla
from kvplan.record import dataclass
from kvplan.spec import (
    MLA,
    ChunkedLocal,
    FullAttention,
    LocalAttention,
    ModelSpec,
    NoCache,
    Recurrent,
    SharedKV,
    SlidingWindow,
)

# fp8 only as QuantizedCache(backend="fp8") (5.21+, hf/quantized.py)
KV_DTYPES = frozenset({"float32", "bfloat16", "float16", "fp8", "fp8_e4m3"})

# Releases whose cache rules differ (see module docstring).
_LATENT_MLA_SINCE = (5, 13)  # approximate: PR #47761 landed between 5.12 and 5.15
_LATENT_MLA_UNSURE = ((5, 12), (5, 16))  # releases where the switch may or may not have happened
_DYNAMIC_WINDOW_SINCE = (4, 56)
_FP32_STATE_SINCE = (5, 0)
_HYBRID_CACHE_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text"})


def layout(spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions, *, static: bool,
           name: str, title: str) -> CacheLayout:
    check_kv_dtype(title, KV_DTYPES, kv_dtype)
    no_tensor_parallel(title, options)
    if options.block_size is not None:
        raise UsageError(f"{title} does not page its cache: a block size does not apply", field="block_size")
    from kvplan.engines.hf import eviction, quantized, speculative

    evicting = eviction.wants_eviction(options)
    if evicting and static:
        raise UsageError(f"{title} evicts nothing: eviction budgets apply to the hf engine", field="evict")
    if evicting and quantized.wants_quantized(options, kv_dtype):
        raise UsageError("kvplan does not combine a quantized cache with eviction", field="evict")
    if speculative.is_assisted(spec) and (evicting or quantized.wants_quantized(options, kv_dtype)):
        raise UsageError("kvplan does not combine transformers speculative decoding with a quantized cache or "
                         "eviction", field="speculative_method")
    if quantized.wants_quantized(options, kv_dtype):
        if static:
            raise UsageError(f"{title} is not quantized: transformers' QuantizedCache is a dynamic cache "
                             "(use the hf engine)", field="kv_cache")
        return quantized.layout(spec, kv_dtype, version, options, name=name, title=title)
    assumptions: list[str] = []
    if not static and version < _DYNAMIC_WINDOW_SINCE and spec.model_type in _HYBRID_CACHE_TYPES:
        static = True
        assumptions.append(
            f"transformers {render_version(version)} generates {spec.model_type} with the static "
            "HybridCache its generation_config asks for (sized to the sequence length)"
        )
    context = _Context(kv_dtype, version, assumptions, static)
    groups = build_groups(spec, lambda layer, first: group_by_kind(RULES, layer, first, context, "transformers"))
    pool = None
    if speculative.is_assisted(spec):  # a draft's (or MTP) layers in a cache of their own (hf/speculative.py)
        groups, pool = speculative.draft_groups(spec, groups)
    if any(isinstance(layer, Recurrent) for layer in spec.layers):
        where = "float32" if version >= _FP32_STATE_SINCE else "the model dtype (4.x MambaCache)"
        assumptions.append(
            f"transformers keeps recurrent SSM state in {where} and the conv window in the model dtype"
        )
    result = CacheLayout(name, render_version(version), kv_dtype, None, groups, tuple(dict.fromkeys(assumptions)),
                         pool=pool)
    return eviction.apply(spec, result, options) if evicting else result


@dataclass(frozen=True)
class _Context:
    """What hf's rules read besides the layer."""

    dtype: KVDType
    version: Version
    assumptions: list[str]
    static: bool


def _full(layer: FullAttention, first: int, ctx: _Context) -> GroupRule:
    return GroupRule(layer, first, layer.token_cost(ctx.dtype), AllTokens())


def _windowed(layer: LocalAttention, first: int, ctx: _Context) -> GroupRule:
    """Sliding layers, and chunked ones cached like sliding layers with the chunk as window."""
    cost = layer.token_cost(ctx.dtype)
    if ctx.static:
        return GroupRule(layer, first, cost, KeepLast(layer.span))
    if ctx.version < _DYNAMIC_WINDOW_SINCE:
        ctx.assumptions.append(
            f"transformers {render_version(ctx.version)} DynamicCache keeps every token of "
            f"{layer.kind} layers (per-layer windows arrived in 4.56)"
        )
        return GroupRule(layer, first, cost, AllTokens())
    return GroupRule(layer, first, cost, KeepLast(layer.span, less=1))


def _mla(layer: MLA, first: int, ctx: _Context) -> GroupRule:
    if _LATENT_MLA_UNSURE[0] <= ctx.version < _LATENT_MLA_UNSURE[1]:
        ctx.assumptions.append(
            "transformers switched MLA from per-head K/V to the latent between 5.12 and 5.16 "
            "(PR #47761); kvplan assumes the latent from 5.13"
        )
    if ctx.version >= _LATENT_MLA_SINCE:
        cost = mla.split_latent_cost(layer, ctx.dtype)
    else:
        cost = mla.expanded_cost(layer, ctx.dtype)
        ctx.assumptions.append(
            "transformers 4.x caches MLA as per-head K and V (up-projected), not the latent"
        )
    return GroupRule(layer, first, cost, AllTokens())


def _recurrent(layer: Recurrent, first: int, ctx: _Context) -> GroupRule:
    ssm_bytes = 4 if ctx.version >= _FP32_STATE_SINCE else ctx.dtype.block_bytes
    state = layer.state_cost(conv_columns=layer.conv_kernel, conv_elem_bytes=ctx.dtype.block_bytes,
                             ssm_elem_bytes=ssm_bytes)
    return cacheless_group(layer, first, state)


RULES: KindRules[_Context] = {
    FullAttention: _full,
    SlidingWindow: _windowed,
    ChunkedLocal: _windowed,
    MLA: _mla,
    Recurrent: _recurrent,
    SharedKV: holds_nothing,
    NoCache: holds_nothing,
}
"""transformers' cache rule for each layer kind (``group_by_kind`` refuses a kind missing here)."""
