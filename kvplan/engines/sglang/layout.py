"""SGLang layout rules: a token-slot KV pool (``page_size`` tokens per page, 1 by default).

Rules (sgl-project/sglang):
- Cell size per token, ``ModelRunnerKVCacheMixin.get_cell_size_per_token``
  (``python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py``): K/V layers
  ``kv_heads x (head_dim + v_head_dim) x bytes``; MLA ``(kv_lora_rank + qk_rope_head_dim) x bytes``.
- Sliding layers: the hybrid SWA pool (``set_num_tokens_hybrid_swa``) frees tokens that left the
  window, but ``_handle_model_specific_adjustments`` sets ``disable_hybrid_swa_memory`` for Gemma 2/3
  (every layer then holds the whole sequence), and SGLang's Llama/Mistral models have no window.
- Recurrent state (``python/sglang/srt/configs/mamba_utils.py``): conv ``(conv_kernel - 1) x conv_dim``
  fixed in bf16, SSM state in ``--mamba-ssm-dtype`` (default float32).
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
from kvplan.parallel import shard_spec
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

DEFAULT_PAGE_SIZE = 1
# Models whose sliding / chunked layers SGLang serves from the hybrid SWA pool (window-bounded).
HYBRID_SWA_MODEL_TYPES = frozenset({"llama4", "gpt_oss", "mimo_v2_flash", "step3p5"})
KV_DTYPES = frozenset({"float32", "bfloat16", "float16", "fp8_e4m3", "fp8_e5m2", "nvfp4"})
# SGLang's --kv-cache-dtype has no plain "fp8" (python/sglang/srt/server_args.py, ``add_cli_args`` choices: auto,
# fp8_e5m2, fp8_e4m3, bf16, bfloat16, fp4_e2m1): the generic fp8 of every engine is its fp8_e4m3.
FP8_KV = ("fp8_e4m3", "SGLang's fp8_e4m3 (--kv-cache-dtype fp8_e4m3; SGLang has no plain 'fp8')")


def layout(spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
    kv_dtype, fp8_note = engine_fp8(kv_dtype, KV_DTYPES, *FP8_KV)
    check_kv_dtype("SGLang", KV_DTYPES, kv_dtype)
    spec = shard_spec(spec, options.tp)
    page = options.block_size or DEFAULT_PAGE_SIZE
    assumptions: list[str] = [fp8_note] if fp8_note else []
    if options.block_size is None:
        assumptions.append("SGLang page size 1 (FlashInfer / FA3 / Triton backends; FlashMLA uses 64)")
    windowed = spec.model_type in HYBRID_SWA_MODEL_TYPES
    if any(isinstance(layer, LocalAttention) for layer in spec.layers) and not windowed:
        assumptions.append(
            f"SGLang serves {spec.model_type}'s sliding layers without its hybrid SWA pool: "
            "they hold the whole sequence"
        )
    context = _Context(kv_dtype, page, windowed)
    groups = build_groups(spec, lambda layer, first: group_by_kind(RULES, layer, first, context, "SGLang"))
    if any(isinstance(layer, Recurrent) for layer in spec.layers):
        assumptions.append("SGLang keeps the conv state in bf16 and the SSM state in float32 (--mamba-ssm-dtype)")
    return CacheLayout("sglang", render_version(version), kv_dtype, page, groups, tuple(assumptions))


@dataclass(frozen=True)
class _Context:
    """What SGLang's rules read besides the layer."""

    dtype: KVDType
    page: int
    windowed: bool
    """The model's sliding / chunked layers are served from the hybrid SWA pool."""


def _full(layer: KVAttention, first: int, ctx: _Context) -> GroupRule:
    return GroupRule(layer, first, layer.token_cost(ctx.dtype), WholePages(AllTokens(), ctx.page))


def _windowed(layer: LocalAttention, first: int, ctx: _Context) -> GroupRule:
    if not ctx.windowed:
        return _full(layer, first, ctx)
    return GroupRule(layer, first, layer.token_cost(ctx.dtype), WholePages(KeepLast(layer.span), ctx.page))


def _mla(layer: MLA, first: int, ctx: _Context) -> GroupRule:
    return GroupRule(layer, first, layer.token_cost(ctx.dtype), WholePages(AllTokens(), ctx.page))


def _recurrent(layer: Recurrent, first: int, ctx: _Context) -> GroupRule:
    state = layer.state_cost(conv_columns=layer.conv_kernel - 1, conv_elem_bytes=2, ssm_elem_bytes=4)
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
"""SGLang's cache rule for each layer kind (``group_by_kind`` refuses a kind missing here)."""
