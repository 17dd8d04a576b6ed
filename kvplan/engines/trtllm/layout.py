"""TensorRT-LLM layout rules: paged KV cache of ``tokens_per_block`` tokens (32 by default).

Rules (NVIDIA/TensorRT-LLM):
- Per token and layer, ``KVCacheManager.get_cache_size_per_token``
  (``tensorrt_llm/_torch/pyexecutor/resource_manager.py``): ``kv_factor x kv_heads x head_dim x bytes``
  with kv_factor 2 for K/V, 1 for MLA (``kv_lora_rank + qk_rope_head_dim``).
- ``tokens_per_block`` defaults to 32 (``KvCacheConfig`` in ``llm_args.py``, plugin_config).
- Tensor parallelism: ``head_dim x kv_heads // tp`` values per rank (an integer split, no
  replication floor: 4 KV heads on 8 ranks count as half a head each); MLA is not split.
- Sliding layers (variable sliding window attention, ``BlockManager`` in
  ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``) keep a window-sized cyclic cache per
  sequence: ``min(context, window)`` tokens in whole blocks.
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
from kvplan.engines.rules import AllTokens, KeepLast, WholePages
from kvplan.engines.version import Version, render_version
from kvplan.layouts.base import TokenCost
from kvplan.record import dataclass
from kvplan.spec import (
    MLA,
    ChunkedLocal,
    FullAttention,
    KVAttention,
    LocalAttention,
    ModelSpec,
    NoCache,
    Recurrent,
    SharedKV,
    SlidingWindow,
)

DEFAULT_TOKENS_PER_BLOCK = 32
KV_DTYPES = frozenset({"float32", "bfloat16", "float16", "fp8", "int8", "nvfp4"})
# TensorRT-LLM's one fp8 KV cache is FP8 e4m3 (``KvCacheConfig.dtype`` "fp8" in tensorrt_llm/llmapi/llm_args.py,
# QuantAlgo.FP8 / kFP8 = __nv_fp8_e4m3 in the kernels): the generic fp8 and fp8_e4m3 both map to it.
FP8_KV = ("fp8", "TensorRT-LLM's FP8 (kv_cache_config dtype: fp8, e4m3)")


def layout(spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
    kv_dtype, fp8_note = engine_fp8(kv_dtype, KV_DTYPES, *FP8_KV)
    check_kv_dtype("TensorRT-LLM", KV_DTYPES, kv_dtype)
    block = options.block_size or DEFAULT_TOKENS_PER_BLOCK
    assumptions: list[str] = [fp8_note] if fp8_note else []
    if any(isinstance(layer, LocalAttention) for layer in spec.layers):
        assumptions.append(
            "TensorRT-LLM sliding layers: a cyclic window of min(context, window) tokens in whole "
            "blocks per sequence (variable-window pools are sized by byte share, see max-batch)"
        )
    if any(isinstance(layer, Recurrent) for layer in spec.layers):
        assumptions.append("TensorRT-LLM recurrent state assumed in the model dtype, conv window kernel - 1")
    context = _Context(kv_dtype, block, spec.dtype_bytes, options.tp)
    groups = build_groups(spec, lambda layer, first: group_by_kind(RULES, layer, first, context, "TensorRT-LLM"))
    return CacheLayout("trtllm", render_version(version), kv_dtype, block, groups, tuple(assumptions))


@dataclass(frozen=True)
class _Context:
    """What TensorRT-LLM's rules read besides the layer."""

    dtype: KVDType
    block: int
    model_bytes: int
    tp: int


def _full(layer: FullAttention, first: int, ctx: _Context) -> GroupRule:
    return GroupRule(layer, first, _kv_cost(layer, ctx.dtype, ctx.tp), WholePages(AllTokens(), ctx.block))


def _windowed(layer: LocalAttention, first: int, ctx: _Context) -> GroupRule:
    return GroupRule(layer, first, _kv_cost(layer, ctx.dtype, ctx.tp), WholePages(KeepLast(layer.span), ctx.block))


def _mla(layer: MLA, first: int, ctx: _Context) -> GroupRule:
    return GroupRule(layer, first, layer.token_cost(ctx.dtype), WholePages(AllTokens(), ctx.block))


def _recurrent(layer: Recurrent, first: int, ctx: _Context) -> GroupRule:
    state = layer.state_cost(conv_columns=layer.conv_kernel - 1, conv_elem_bytes=ctx.model_bytes,
                             ssm_elem_bytes=ctx.model_bytes)
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
"""TensorRT-LLM's cache rule for each layer kind (``group_by_kind`` refuses a kind missing here)."""


def _kv_cost(layer: KVAttention, dtype: KVDType, tp: int) -> TokenCost:
    """K and V bytes per token on one rank: ``head_dim x kv_heads // tp`` values each."""
    if tp == 1:
        return layer.token_cost(dtype)
    k_values = layer.head_dim * layer.kv_heads // tp
    v_values = layer.v_dim * layer.kv_heads // tp
    nbytes = dtype.vector_bytes(k_values) + dtype.vector_bytes(v_values)
    return TokenCost(nbytes, f"({layer.kv_heads} kv heads x {layer.head_dim}) // tp {tp} K + V values = {nbytes} B")
