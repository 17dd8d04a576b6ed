"""Grok-1 / Grok-2 (``Grok1ForCausalLM``), whose config.json says ``model_type: "git"``.

transformers has no Grok model (its ``git`` is Microsoft's image-to-text GIT), so the rules follow the engines
that serve it (SGLang ``models/grok.py``, vLLM ``models/grok1.py``): every layer full GQA attention; a MoE of
``num_local_experts`` gated experts (``moe_intermediate_size``) plus, with ``residual_moe``, a dense gated MLP
(``intermediate_size``) beside it; four RMSNorms per layer. A ``git`` config that is not a Grok one, or a Grok
config with a sliding window, is refused naming the field: kvplan has no rule for either.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import Counter, gated_mlp, gqa_attention
from kvplan.spec import LayerSpec

_GROK_ARCHITECTURES = ("Grok1ForCausalLM", "Grok1ModelForCausalLM")


def grok_layers(reader: ConfigReader) -> list[LayerSpec]:
    architectures = reader.top.get("architectures") or []
    if not any(a in _GROK_ARCHITECTURES for a in architectures):
        raise ConfigError(f"model_type 'git' with architectures={architectures!r}: kvplan reads 'git' only as Grok "
                          f"({' / '.join(_GROK_ARCHITECTURES)})")
    window = reader.raw("sliding_window_size")
    if window is not None and window[1] not in (None, -1, 0):
        raise ConfigError(f"sliding_window_size={window[1]!r}: Grok's sliding-window layers have no kvplan rule")
    return [reader.attention()] * reader.num_layers()


def grok_params(b: Counter) -> None:
    """Grok1ForCausalLM as SGLang's ``models/grok.py`` builds it: embed_tokens; per layer q/k/v/o (no bias),
    pre_attn_norm / post_attn_norm / pre_moe_norm / post_moe_norm, the router Linear(h, E), E gated experts of
    moe_intermediate_size, and with residual_moe a dense gated MLP of intermediate_size; the final norm and
    lm_head."""
    h = b.hidden
    experts = b.int("num_local_experts")
    moe_inter = b.int("moe_intermediate_size", "intermediate_size")
    residual = b.flag("residual_moe", False)
    b.embed()
    for i in range(b.layers):
        p = f"model.layers.{i}"
        gqa_attention(b, f"{p}.self_attn", q_bias=False, kv_bias=False, o_bias=False)
        for norm in ("pre_attn_norm", "post_attn_norm", "pre_moe_norm", "post_moe_norm"):
            b.norm(f"{p}.{norm}", h)
        b.linear("router", f"{p}.block_sparse_moe.gate", h, experts, quantizable=False)
        gated_mlp(b, f"{p}.block_sparse_moe.experts", moe_inter, component="experts", count=experts)
        if residual:
            gated_mlp(b, f"{p}.mlp", b.int("intermediate_size"))
    b.norm("model.norm", h)
    b.lm_head()


register("git", layers=grok_layers, params=grok_params)
