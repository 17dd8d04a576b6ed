"""gpt-oss: alternating sliding (128) / full attention, attention sinks, MXFP4 experts."""

from __future__ import annotations

from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import Counter, gqa_attention
from kvplan.spec import LayerSpec


def gpt_oss_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_gpt_oss.py: layer_types default alternates sliding (128) / full from layer 0.
    types = reader.layer_types()
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(reader.num_layers())]
    return reader.layers_from_types(types)


def gpt_oss_params(b: Counter) -> None:
    """gpt_oss: transformers ``modeling_gpt_oss.py``.

    Attention q/k/v/o with biases (``attention_bias``) and one learned ``sinks`` logit per head;
    router Linear(h, E) with bias; experts gate_up_proj (E x h x 2I) + bias (E x 2I) and down_proj
    (E x I x h) + bias (E x h).
    """
    h, n_layers, nh = b.hidden, b.layers, b.heads
    experts = b.int("num_local_experts")
    inter = b.int("intermediate_size")
    bias = b.flag("attention_bias", True)
    b.embed()
    for i in range(n_layers):
        p = f"model.layers.{i}"
        gqa_attention(b, f"{p}.self_attn", q_bias=bias, kv_bias=bias, o_bias=bias)
        b.add("attention", f"{p}.self_attn.sinks", nh)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        b.linear("router", f"{p}.mlp.router", h, experts, bias=True, quantizable=False)
        b.linear("experts", f"{p}.mlp.experts.gate_up_proj", h, 2 * inter, bias=True, count=experts)
        b.linear("experts", f"{p}.mlp.experts.down_proj", inter, h, bias=True, count=experts)
    b.norm("model.norm", h)
    b.lm_head()


register("gpt_oss", layers=gpt_oss_layers, params=gpt_oss_params,
         defaults={"sliding_window": (128, "transformers GptOssConfig"), "head_dim": (64, "transformers GptOssConfig")})
