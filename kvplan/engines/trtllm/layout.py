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
from kvplan.engines.layout import CacheLayout, EngineOptions, GroupRule, build_groups, cacheless_group, check_kv_dtype, last_group
from kvplan.engines.rules import AllTokens, KeepLast, WholePages
from kvplan.engines.version import Version, render_version
from kvplan.layouts import full, mla, recurrent
from kvplan.layouts.base import TokenCost
from kvplan.spec import LayerSpec, ModelSpec

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
    kinds = spec.layer_kind_counts()
    if "sliding" in kinds or "chunked" in kinds:
        assumptions.append(
            "TensorRT-LLM sliding layers: a cyclic window of min(context, window) tokens in whole "
            "blocks per sequence (variable-window pools are sized by byte share, see max-batch)"
        )
    if "recurrent" in kinds:
        assumptions.append("TensorRT-LLM recurrent state assumed in the model dtype, conv window kernel - 1")
    groups = build_groups(spec, lambda layer, first: _group(layer, first, kv_dtype, block, spec.dtype_bytes, options.tp))
    return CacheLayout("trtllm", render_version(version), kv_dtype, block, groups, tuple(assumptions))


def _group(layer: LayerSpec, first: int, dtype: KVDType, block: int, model_bytes: int, tp: int) -> GroupRule:
    kind = layer.kind
    if kind == "full":
        return GroupRule(layer, first, _kv_cost(layer, dtype, tp), WholePages(AllTokens(), block))
    if kind in ("sliding", "chunked"):
        span = layer.window if kind == "sliding" else layer.chunk
        assert span is not None
        return GroupRule(layer, first, _kv_cost(layer, dtype, tp), WholePages(KeepLast(span), block))
    if kind == "mla":
        return GroupRule(layer, first, mla.latent_cost(layer, dtype), WholePages(AllTokens(), block))
    if kind == "recurrent":
        state = recurrent.state_cost(layer, conv_columns=(layer.conv_kernel or 1) - 1,
                                     conv_elem_bytes=model_bytes, ssm_elem_bytes=model_bytes)
        return cacheless_group(layer, first, state)
    return last_group(layer, first, "TensorRT-LLM")


def _kv_cost(layer: LayerSpec, dtype: KVDType, tp: int) -> TokenCost:
    """K and V bytes per token on one rank: ``head_dim x kv_heads // tp`` values each."""
    if tp == 1:
        return full.token_cost(layer, dtype)
    assert layer.kv_heads and layer.head_dim
    k_values = layer.head_dim * layer.kv_heads // tp
    v_values = layer.v_dim * layer.kv_heads // tp
    nbytes = dtype.vector_bytes(k_values) + dtype.vector_bytes(v_values)
    return TokenCost(nbytes, f"({layer.kv_heads} kv heads x {layer.head_dim}) // tp {tp} K + V values = {nbytes} B")
