"""The llama-like families, and the generic rules every unknown ``model_type`` is read with.

Layers (the generic rule): MLA fields (``kv_lora_rank``) make every layer multi-head latent
attention; else ``layer_types``; else one ``sliding_window`` (or none) for every layer, which is
what transformers' ``DynamicCache(config=...)`` builds (``cache_utils.py``) and what vLLM's
``Attention`` does with a model-level ``cache_config.sliding_window``.

Parameters (the llama-like rule, transformers ``models/<family>/modeling_<family>.py``): q/k/v/o
projections, a gated MLP (or experts), RMSNorms, embeddings and lm_head. What differs per family is
a :class:`LlamaStyle`:

- biases: llama/mistral/qwen3 ``attention_bias`` on q/k/v/o; qwen2 and qwen2_moe always bias q/k/v,
  never o (``Qwen2Attention``); glm4_moe ``attention_bias`` on q/k/v only; llama ``mlp_bias``.
- norms: 2 RMSNorms per layer; gemma2/gemma3 add pre/post-feedforward norms (4 per layer);
  qwen3(_moe), gemma3 and glm4_moe (``use_qk_norm``) add q_norm/k_norm of head_dim; olmo2 has
  post-attention/post-feedforward norms and q_norm/k_norm over the whole projection; cohere has one
  LayerNorm per layer (parallel attention and MLP) and q/k norms per head if ``use_qk_norm``.
- MoE: mixtral ``num_local_experts``; qwen2_moe/qwen3_moe ``num_experts`` on layers where
  ``(i + 1) % decoder_sparse_step == 0`` and ``i not in mlp_only_layers``, with qwen2_moe's
  ``shared_expert`` + ``shared_expert_gate`` (Linear(hidden, 1)); glm4_moe DeepSeek-style
  ``first_k_dense_replace`` / ``n_routed_experts`` / ``n_shared_experts`` and a router with
  ``e_score_correction_bias``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from kvplan.record import dataclass
from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import (
    Counter,
    gated_mlp,
    gqa_attention,
    intermediate,
    mtp_layers,
)
from kvplan.spec import LayerSpec

# --------------------------------------------------------------------------------------------
# Layers


def generic_layers(reader: ConfigReader) -> list[LayerSpec]:
    """The generic rules: MLA fields, else layer_types, else one window (or none) for all layers."""
    if reader.has("kv_lora_rank"):
        from kvplan.sources.families.deepseek import mla_layers

        reader.note(f"model_type '{reader.model_type}' has kv_lora_rank: read as multi-head latent attention")
        return mla_layers(reader)
    types = reader.layer_types()
    if types is not None:
        return reader.layers_from_types(types)
    return reader.uniform_attention()


def phi3_layers(reader: ConfigReader) -> list[LayerSpec]:
    # What a phi3 `sliding_window` means: a window on EVERY layer. transformers' Phi3Config has no
    # layer_types, so DynamicCache(config=...) makes every layer a DynamicSlidingWindowLayer
    # (cache_utils.py) and modeling_phi3 passes sliding_window=config.sliding_window to every
    # attention call; vLLM's Phi3ForCausalLM is Llama's, whose Attention falls back to the
    # model-level cache_config.sliding_window when the config has no per-layer layer_types
    # (vllm/attention/layer.py, "per-layer setting > model-level setting"). Phi-3-mini-4k: 2047;
    # Phi-3-mini-128k / Phi-3.5: 262144, longer than the context, so it never binds.
    types = reader.layer_types()
    if types is not None:
        return reader.layers_from_types(types)
    return reader.uniform_attention()


# --------------------------------------------------------------------------------------------
# Parameters


QkNorm = Literal["none", "head", "head_unless_off", "head_if_flag", "per_head_if_flag", "projection"]
Moe = Literal["auto", "mixtral", "qwen", "glm"]


@dataclass(frozen=True)
class LlamaStyle:
    """What one llama-like family changes in the common decoder layer."""

    qkv_bias: bool | None = None
    """Bias on q/k/v: None reads ``attention_bias`` (and ``qkv_bias_field`` when set)."""
    o_bias: bool | None = None
    """Bias on o_proj: None reads ``attention_bias``."""
    qkv_bias_field: str | None = None
    """A config field that, when present, decides the q/k/v bias (Qwen3-Coder's ``qkv_bias``)."""
    qk_norm: QkNorm = "none"
    norms: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")
    moe: Moe = "auto"
    """auto: detected from the config's expert fields."""
    shared_expert_gate: bool = False
    """qwen2_moe: ``shared_expert`` of ``shared_expert_intermediate_size`` + ``shared_expert_gate``."""
    mtp: bool = False
    note: str | None = None


LLAMA = LlamaStyle()


def llama_like(b: Counter, style: LlamaStyle = LLAMA) -> None:
    """Count a llama-like decoder (see the module docstring for what each style changes)."""
    h, n_layers, hd, nh, nkv = b.hidden, b.layers, b.head_dim, b.heads, b.kv_heads
    attn_bias = b.flag("attention_bias", False)
    q_bias = kv_bias = attn_bias if style.qkv_bias is None else style.qkv_bias
    if style.qkv_bias_field and b.get(style.qkv_bias_field) is not None:
        q_bias = kv_bias = bool(b.get(style.qkv_bias_field))
    o_bias = attn_bias if style.o_bias is None else style.o_bias
    mlp_bias = b.flag("mlp_bias", False)
    qk_norm = style.qk_norm
    if qk_norm == "head_unless_off":
        qk_norm = "none" if b.get("use_qk_norm") is False else "head"
    elif qk_norm in ("head_if_flag", "per_head_if_flag"):
        qk_norm = ("head" if qk_norm == "head_if_flag" else "per_head") if b.flag("use_qk_norm", False) else "none"

    b.embed()
    if style.note:
        b.note(style.note)

    experts = moe_inter = shared_inter = 0
    sparse: Callable[[int], bool] = lambda i: False
    router_bias = False
    moe = style.moe
    if moe == "auto":
        if b.get("num_local_experts"):
            moe = "mixtral"
        elif b.get("num_experts") and b.get("moe_intermediate_size"):
            moe = "qwen"
        elif b.get("n_routed_experts") and b.get("first_k_dense_replace") is not None:
            moe = "glm"
    if moe == "mixtral":
        experts = b.int("num_local_experts")
        moe_inter = intermediate(b)
        sparse = lambda i: True
    elif moe == "qwen":
        experts = b.int("num_experts")
        moe_inter = b.int("moe_intermediate_size")
        if style.shared_expert_gate:
            shared_inter = b.int("shared_expert_intermediate_size", default=0)
        step = b.int("decoder_sparse_step", default=1)
        only = set(b.get("mlp_only_layers", default=[]) or [])
        sparse = lambda i: experts > 0 and i not in only and (i + 1) % max(step, 1) == 0
    elif moe == "glm":
        experts = b.int("n_routed_experts")
        moe_inter = b.int("moe_intermediate_size")
        shared_inter = b.int("n_shared_experts", default=0) * moe_inter
        first_dense = b.int("first_k_dense_replace", default=0)
        sparse = lambda i: i >= first_dense
        router_bias = True  # Glm4MoeTopkRouter.e_score_correction_bias

    def layer(prefix: str, i: int, component_override: str | None = None) -> None:
        def comp(c: str) -> str:
            return component_override or c

        gqa_attention(b, f"{prefix}.self_attn", q_bias=q_bias, kv_bias=kv_bias, o_bias=o_bias,
                      component=comp("attention"))
        if qk_norm == "per_head":
            b.add(comp("norms"), f"{prefix}.self_attn.q_norm", nh, hd)
            b.add(comp("norms"), f"{prefix}.self_attn.k_norm", nkv, hd)
        elif qk_norm != "none":
            qn, kn = (nh * hd, nkv * hd) if qk_norm == "projection" else (hd, hd)
            b.add(comp("norms"), f"{prefix}.self_attn.q_norm", qn)
            b.add(comp("norms"), f"{prefix}.self_attn.k_norm", kn)
        for name in style.norms:
            b.norm(f"{prefix}.{name}", h, component=comp("norms"))
        if sparse(i):
            b.linear(comp("router"), f"{prefix}.mlp.gate", h, experts, quantizable=False)
            if router_bias:
                b.add(comp("router"), f"{prefix}.mlp.gate.e_score_correction_bias", experts, fp32=True)
            gated_mlp(b, f"{prefix}.mlp.experts", moe_inter, component=comp("experts"), count=experts)
            if shared_inter:
                gated_mlp(b, f"{prefix}.mlp.shared_expert", shared_inter, component=comp("shared_experts"))
                if style.shared_expert_gate:
                    b.linear(comp("shared_experts"), f"{prefix}.mlp.shared_expert_gate", h, 1,
                             quantizable=False)
        else:
            gated_mlp(b, f"{prefix}.mlp", intermediate(b), component=comp("mlp"), bias=mlp_bias)

    for i in range(n_layers):
        layer(f"model.layers.{i}", i)
    b.norm("model.norm", h)
    b.lm_head()
    if style.mtp:
        mtp_layers(b, n_layers, lambda prefix, i: layer(prefix, i, "mtp"))


def styled(style: LlamaStyle) -> Callable[[Counter], None]:
    """The llama-like parameter rule with one family's style."""
    def rule(b: Counter) -> None:
        llama_like(b, style)
    return rule


# --------------------------------------------------------------------------------------------
# Registrations: families the generic layer rule reads correctly, with the config class that agrees.

register("llama", layers=generic_layers, params=llama_like)  # LlamaConfig; Llama-1 has no KV-head field
# MistralConfig / MixtralConfig: sliding_window (v0.1: 4096) on every layer, null from v0.2.
register("mistral", "granite", layers=generic_layers, params=llama_like)
register("mixtral", layers=generic_layers, params=styled(LlamaStyle(moe="mixtral")))
register("mistral3", "starcoder2", layers=generic_layers)  # Starcoder2Config: same window rule
register("olmo2", layers=generic_layers, params=styled(LlamaStyle(
    qk_norm="projection", norms=("post_attention_layernorm", "post_feedforward_layernorm"))))
register("glm4_moe", layers=generic_layers, params=styled(LlamaStyle(
    o_bias=False, qk_norm="head_if_flag", moe="glm", mtp=True)))  # explicit head_dim 128 != hidden / heads
register("phi3", layers=phi3_layers, params=styled(LlamaStyle(
    note="phi3: fused qkv_proj / gate_up_proj counted as separate q/k/v and gate/up (same size)")))
# Multi-head attention families: no KV-head field expected. GPTNeoXConfig (Pythia), OPTConfig,
# BloomConfig (n_layer / n_head / hidden_size, ALiBi: no positions), OlmoConfig.
register("gpt_neox", "olmo", layers=generic_layers, mha=True)
register("opt", "bloom", layers=generic_layers, mha=True, tied_by_default=True)
