"""SGLang: a token-slot KV pool (``page_size`` tokens per page, 1 by default).

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

from dataclasses import dataclass

from kvplan.dtypes import KVDType
from kvplan.engines.base import (
    CacheLayout,
    EngineOptions,
    GroupRule,
    Version,
    build_groups,
    cacheless_group,
    ceil_to,
    check_kv_dtype,
)
from kvplan.parallel import shard_spec
from kvplan.layouts import full, mla, recurrent, sliding
from kvplan.spec import LayerSpec, ModelSpec

DEFAULT_PAGE_SIZE = 1
# Models whose sliding / chunked layers SGLang serves from the hybrid SWA pool (window-bounded).
HYBRID_SWA_MODEL_TYPES = frozenset({"llama4", "gpt_oss", "mimo_v2_flash", "step3p5"})



@dataclass(frozen=True)
class SGLangEngine:
    name: str = "sglang"
    title: str = "SGLang"
    default_version: str = "latest"
    kv_dtypes: frozenset[str] = frozenset({"float32", "bfloat16", "float16", "fp8_e4m3", "fp8_e5m2", "nvfp4"})

    def auto_kv_dtype(self, spec: ModelSpec) -> str:
        return spec.dtype

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
        check_kv_dtype(self, kv_dtype)
        spec = shard_spec(spec, options.tp)
        page = options.block_size or DEFAULT_PAGE_SIZE
        assumptions: list[str] = []
        if options.block_size is None:
            assumptions.append("SGLang page size 1 (FlashInfer / FA3 / Triton backends; FlashMLA uses 64)")
        windowed = spec.model_type in HYBRID_SWA_MODEL_TYPES
        kinds = spec.layer_kind_counts()
        if ("sliding" in kinds or "chunked" in kinds) and not windowed:
            assumptions.append(
                f"SGLang serves {spec.model_type}'s sliding layers without its hybrid SWA pool: "
                "they hold the whole sequence"
            )
        groups = build_groups(
            spec, lambda layer, first: self._group(layer, first, kv_dtype, page, windowed))
        if "recurrent" in kinds:
            assumptions.append("SGLang keeps the conv state in bf16 and the SSM state in float32 (--mamba-ssm-dtype)")
        return CacheLayout(self.name, ".".join(map(str, version)), kv_dtype, page, groups, tuple(assumptions))

    @staticmethod
    def _group(layer: LayerSpec, first: int, dtype: KVDType, page: int, windowed: bool) -> GroupRule:
        kind = layer.kind
        whole = (lambda c, p=page: ceil_to(c, p))
        whole_text = "context" if page == 1 else f"ceil(context / {page}) x {page}"
        if kind in ("full", "sliding", "chunked"):
            cost = full.token_cost(layer, dtype)
            span = layer.window if kind == "sliding" else layer.chunk
            if kind == "full" or not windowed or span is None:
                return GroupRule(layer, first, cost, whole, whole_text)
            return GroupRule(layer, first, cost, lambda c, s=span, p=page: ceil_to(sliding.tokens_kept(c, s), p),
                             f"min(context, {span})" + ("" if page == 1 else f" rounded to {page}"))
        if kind == "mla":
            return GroupRule(layer, first, mla.latent_cost(layer, dtype), whole, whole_text)
        if kind == "recurrent":
            state = recurrent.state_cost(layer, conv_columns=(layer.conv_kernel or 1) - 1,
                                         conv_elem_bytes=2, ssm_elem_bytes=4)
            return cacheless_group(layer, first, state)
        return cacheless_group(layer, first)


SGLANG = SGLangEngine()
