"""Llama 4 (Scout, Maverick): chunked local attention on RoPE layers, global NoPE layers, MoE."""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.reader import ConfigReader, short_repr
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import Counter, gated_mlp, gqa_attention
from kvplan.sources.families.vision import vision_tower
from kvplan.spec import LayerSpec


def llama4_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_llama4.py: no_rope_layers[i] == 1 means layer i uses RoPE (the name reads
    # backwards); default int((i + 1) % no_rope_layer_interval != 0), interval 4. layer_types
    # default: RoPE layers are chunked_attention (chunk = attention_chunk_size), NoPE layers are
    # full_attention. vLLM caches the chunked ones as ChunkedLocalAttentionSpec.
    types = reader.layer_types()
    if types is None:
        n = reader.num_layers()
        flags = reader.cfg.get("no_rope_layers")
        if flags:
            if not isinstance(flags, list) or len(flags) != n or any(f not in (0, 1) for f in flags):
                raise ConfigError(f"no_rope_layers={short_repr(flags)} is not {n} flags of 0/1")
        else:
            interval = reader.int_field("no_rope_layer_interval", required=False, maximum=100_000)
            if interval is None:
                interval = 4
                reader.note("no_rope_layers absent: transformers default, every 4th layer NoPE (global)")
            flags = [int((i + 1) % interval != 0) for i in range(n)]
        types = ["chunked_attention" if flag else "full_attention" for flag in flags]
    if reader.cfg.get("attention_chunk_size", 0) is None:
        reader.note("attention_chunk_size is null: chunked layers cached as full attention")
        types = ["full_attention" if t == "chunked_attention" else t for t in types]
    return reader.layers_from_types(types)


def llama4_params(b: Counter) -> None:
    """llama4 / llama4_text: transformers ``modeling_llama4.py``.

    MoE layers (``moe_layers``, else every ``interleave_moe_layer_step``-th layer counting from
    step-1): ``num_local_experts`` experts (gate_up_proj E x h x 2I, down_proj E x I x h with
    I = ``intermediate_size``), router Linear(h, E), one shared expert MLP of ``intermediate_size``;
    other layers a dense MLP of ``intermediate_size_mlp``. q/k norm is a weightless L2 norm.
    """
    h, n_layers = b.hidden, b.layers
    experts = b.int("num_local_experts", default=0)
    inter = b.int("intermediate_size")
    inter_mlp = b.int("intermediate_size_mlp", default=inter)
    step = b.int("interleave_moe_layer_step", default=1)
    moe_layers = b.get("moe_layers")
    if moe_layers is None:
        moe_layers = list(range(step - 1, n_layers, step)) if step else []
    moe_set = set(moe_layers)
    bias = b.flag("attention_bias", False)
    b.embed()
    for i in range(n_layers):
        p = f"model.layers.{i}"
        gqa_attention(b, f"{p}.self_attn", q_bias=bias, kv_bias=bias, o_bias=bias)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        if experts and i in moe_set:
            b.linear("router", f"{p}.feed_forward.router", h, experts, quantizable=False)
            gated_mlp(b, f"{p}.feed_forward.experts", inter, component="experts", count=experts)
            gated_mlp(b, f"{p}.feed_forward.shared_expert", inter, component="shared_experts")
        else:
            gated_mlp(b, f"{p}.feed_forward", inter_mlp)
    b.norm("model.norm", h)
    b.lm_head()
    vision_tower(b)


register("llama4_text", "llama4", layers=llama4_layers, params=llama4_params, own_towers=True,
         defaults={"head_dim": (128, "transformers Llama4TextConfig"),
                   "attention_chunk_size": (8192, "transformers Llama4TextConfig")})
