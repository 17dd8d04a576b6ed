"""DeepSeek-V2/V3/R1, Kimi-K2, Kimi-VL and every config with MLA fields: multi-head latent attention.

Layers: every decoder layer caches the ``kv_lora_rank`` latent plus the shared ``qk_rope_head_dim``
key (vLLM ``MLAAttentionSpec``, head_size 576 for 512 + 64; transformers 5 ``DeepseekV3Attention``).
``num_key_value_heads`` in these configs is unused by MLA; MTP layers (``num_nextn_predict_layers``:
DeepSeek-V3 / R1 and V3.2 ship 1, Kimi-K2 0, V2 configs leave it out) are not decoder layers: they are
``ModelSpec.mtp_layers``. Parameters: the MLA projections, dense and routed MLPs, MTP layers.
"""

from __future__ import annotations

from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import Counter, gated_mlp, intermediate, mtp_layers
from kvplan.spec import MLA, LayerSpec


def mla_layers(reader: ConfigReader) -> list[LayerSpec]:
    n = reader.num_layers()
    layer = MLA(
        kv_lora_rank=reader.int_field("kv_lora_rank"),
        qk_rope_head_dim=reader.int_field("qk_rope_head_dim"),
        qk_nope_head_dim=reader.int_field("qk_nope_head_dim", required=False),
        v_head_dim=reader.int_field("v_head_dim", required=False),
        num_heads=reader.int_field("num_attention_heads", required=False),
    )
    return [layer] * n


def deepseek_params(b: Counter) -> None:
    """deepseek_v2, deepseek_v3, kimi_k2: transformers ``modeling_deepseek_v3.py`` / the remote
    ``modeling_deepseek.py``.

    MLA: q_a_proj (h -> q_lora_rank) + q_a_layernorm + q_b_proj (q_lora_rank -> heads x
    (qk_nope + qk_rope)), or a plain q_proj when ``q_lora_rank`` is null; kv_a_proj_with_mqa
    (h -> kv_lora_rank + qk_rope), kv_a_layernorm (kv_lora_rank), kv_b_proj (kv_lora_rank -> heads x
    (qk_nope + v_head_dim)), o_proj (heads x v_head_dim -> h). Layers ``i >= first_k_dense_replace``
    with ``i % moe_layer_freq == 0`` are MoE: ``n_routed_experts`` experts of
    ``moe_intermediate_size``, one shared MLP of ``n_shared_experts x moe_intermediate_size``, router
    weight (experts x h) plus ``e_score_correction_bias`` when ``topk_method == "noaux_tc"``.
    """
    h, n_layers, nh = b.hidden, b.layers, b.heads
    mla = mla_layers(b.reader)[0]
    assert isinstance(mla, MLA)
    kv_lora, rope = mla.kv_lora_rank, mla.qk_rope_head_dim
    nope = b.int("qk_nope_head_dim")
    v_dim = b.int("v_head_dim")
    if "q_lora_rank" in b.cfg:
        q_lora = b.int("q_lora_rank") if b.cfg["q_lora_rank"] is not None else 0  # null: a plain q_proj
    else:
        q_lora = 1536  # DeepseekV2Config / DeepseekV3Config default
        b.note("q_lora_rank absent: assumed 1536 (the transformers config-class default); "
               "a Hub config with q_lora_rank null would have a plain q_proj")
    attn_bias = b.flag("attention_bias", False)
    experts = b.int("n_routed_experts", default=0)
    moe_inter = b.int("moe_intermediate_size", default=0)
    shared = b.int("n_shared_experts", default=0)
    first_dense = b.int("first_k_dense_replace", default=0)
    freq = b.int("moe_layer_freq", default=1)
    noaux = b.get("topk_method") == "noaux_tc" or (
        b.text_type in ("deepseek_v3", "kimi_k2") and b.get("topk_method") is None)

    def layer(prefix: str, i: int, override: str | None = None) -> None:
        def comp(c: str) -> str:
            return override or c

        a = f"{prefix}.self_attn"
        if q_lora:
            b.linear(comp("attention"), f"{a}.q_a_proj", h, q_lora, bias=attn_bias)
            b.add(comp("norms"), f"{a}.q_a_layernorm", q_lora)
            b.linear(comp("attention"), f"{a}.q_b_proj", q_lora, nh * (nope + rope))
        else:
            b.linear(comp("attention"), f"{a}.q_proj", h, nh * (nope + rope))
        b.linear(comp("attention"), f"{a}.kv_a_proj_with_mqa", h, kv_lora + rope, bias=attn_bias)
        b.add(comp("norms"), f"{a}.kv_a_layernorm", kv_lora)
        b.linear(comp("attention"), f"{a}.kv_b_proj", kv_lora, nh * (nope + v_dim))
        b.linear(comp("attention"), f"{a}.o_proj", nh * v_dim, h, bias=attn_bias)
        b.norm(f"{prefix}.input_layernorm", h, component=comp("norms"))
        b.norm(f"{prefix}.post_attention_layernorm", h, component=comp("norms"))
        if experts and i >= first_dense and i % max(freq, 1) == 0:
            b.linear(comp("router"), f"{prefix}.mlp.gate", h, experts, quantizable=False)
            if noaux:
                b.add(comp("router"), f"{prefix}.mlp.gate.e_score_correction_bias", experts, fp32=True)
            gated_mlp(b, f"{prefix}.mlp.experts", moe_inter, component=comp("experts"), count=experts)
            if shared:
                gated_mlp(b, f"{prefix}.mlp.shared_experts", shared * moe_inter,
                           component=comp("shared_experts"))
        else:
            gated_mlp(b, f"{prefix}.mlp", intermediate(b), component=comp("mlp"))

    b.embed()
    for i in range(n_layers):
        layer(f"model.layers.{i}", i)
    b.norm("model.norm", h)
    b.lm_head()
    mtp_layers(b, n_layers, lambda prefix, i: layer(prefix, i, "mtp"))


register("deepseek_v2", "deepseek_v3", "kimi_k2", layers=mla_layers, params=deepseek_params)
# Kimi-VL (KimiVLConfig, remote code): a DeepSeek-V3 text model in a text_config that names no
# model_type, beside a MoonViT vision_config; the KV cache is the text model's MLA cache.
register("kimi_vl", layers=mla_layers, params=deepseek_params)
# DeepSeek-V3.2: the same cache; its indexer weights have no rule here (counted llama-like, said so).
register("deepseek_v32", layers=mla_layers)
