"""Qwen3-Next: Gated DeltaNet (linear attention) layers with every 4th layer gated full attention, MoE.

One reading of the geometry for both sides: :func:`qwen3_next_types` says which layers are full
attention (a ``layer_types`` of the wrong length is an error naming it) and :func:`gdn_dims` gives
the DeltaNet sizes. ``linear_conv_kernel_dim`` defaults to 4 as in transformers' ``Qwen3NextConfig``
(said in the assumptions); the head counts and sizes are required.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import Counter, gated_mlp, gqa_attention, intermediate
from kvplan.spec import FullAttention, LayerSpec, Recurrent


def qwen3_next_types(reader: ConfigReader) -> list[str]:
    # configuration_qwen3_next.py: layer_types default = linear_attention unless
    # (i + 1) % full_attention_interval == 0 (interval 4 -> 3 gated-delta-net : 1 full). A
    # layer_types of the wrong length is an error (transformers layer_type_validation).
    types = reader.layer_types()
    if types is None:
        interval = reader.int_field("full_attention_interval", required=False, maximum=100_000)
        if interval is None:
            interval = 4
            reader.note("full_attention_interval absent: transformers Qwen3-Next default 4")
        types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(reader.num_layers())]
    return types


def gdn_dims(reader: ConfigReader) -> tuple[int, int, int, int, int]:
    """Gated DeltaNet sizes: (key heads, key head dim, value heads, value head dim, conv kernel)."""
    key_heads = reader.int_field("linear_num_key_heads")
    key_dim = reader.int_field("linear_key_head_dim")
    value_heads = reader.int_field("linear_num_value_heads")
    value_dim = reader.int_field("linear_value_head_dim")
    kernel = reader.int_field("linear_conv_kernel_dim")
    assert key_heads and value_heads and key_dim and value_dim and kernel
    if value_heads % key_heads:
        raise ConfigError(
            f"linear_num_value_heads={value_heads} is not a multiple of linear_num_key_heads={key_heads}")
    return key_heads, key_dim, value_heads, value_dim, kernel


def qwen3_next_layers(reader: ConfigReader) -> list[LayerSpec]:
    # Gated DeltaNet state (modeling_qwen3_next.py Qwen3NextDynamicCache / vLLM GDN spec):
    # conv over q, k and v: 2 * key_heads * key_dim + value_heads * value_dim channels, kernel
    # linear_conv_kernel_dim; recurrent state [value_heads, key_dim, value_dim].
    def gdn(layer_type: str) -> LayerSpec:
        if layer_type != "linear_attention":
            raise ConfigError(f"layer_types has '{layer_type}', which {reader.model_type} does not use")
        key_heads, key_dim, value_heads, value_dim, kernel = gdn_dims(reader)
        return Recurrent(mixer="gated_delta_net",
                         conv_dim=2 * key_heads * key_dim + value_heads * value_dim, conv_kernel=kernel,
                         ssm_state=(value_heads, key_dim, value_dim))

    return reader.layers_from_types(qwen3_next_types(reader), recurrent=gdn)


def qwen3_next_params(b: Counter) -> None:
    """qwen3_next: transformers ``modeling_qwen3_next.py``.

    Every ``full_attention_interval``-th layer (or per ``layer_types``) is gated full attention
    (q_proj doubled for the output gate, q_norm/k_norm of head_dim); the others Gated DeltaNet:
    in_proj_qkvz (h -> 2 x key_dim + 2 x value_dim), in_proj_ba (h -> 2 x v_heads), conv1d
    (2 x key_dim + value_dim channels, no bias), dt_bias / A_log per v-head, gated RMSNorm
    (v_head_dim), out_proj (value_dim -> h). MoE as qwen2_moe (experts, shared_expert,
    shared_expert_gate), and the ``mtp.*`` layer the checkpoints ship (below). Which layers are
    full attention, and the DeltaNet sizes, are the cache rule's (:func:`qwen3_next_layers`).
    """
    hybrid_gdn_params(b, decoder="model", split_in_proj=False)


def hybrid_gdn_params(b: Counter, *, decoder: str, split_in_proj: bool) -> None:
    """The Gated DeltaNet + gated attention decoder of qwen3_next and qwen3_5 (see :func:`qwen3_next_params`):
    ``decoder`` is the module prefix of its layers; ``split_in_proj``: the DeltaNet input projections are
    stored as in_proj_qkv / in_proj_z / in_proj_b / in_proj_a (qwen3_5) instead of fused in_proj_qkvz /
    in_proj_ba (qwen3_next), the same elements."""
    h, n_layers = b.hidden, b.layers
    full = [isinstance(layer, FullAttention) for layer in qwen3_next_layers(b.reader)]
    k_heads, k_dim, v_heads, v_dim, conv = gdn_dims(b.reader)
    key_dim, value_dim = k_heads * k_dim, v_heads * v_dim
    experts = b.int("num_experts", default=0)
    moe_inter = b.int("moe_intermediate_size", default=0)
    shared_inter = b.int("shared_expert_intermediate_size", default=0)
    step = b.int("decoder_sparse_step", default=1)
    only = set(b.get("mlp_only_layers", default=[]) or [])
    hd = b.head_dim

    def layer(p: str, i: int, is_full: bool, override: str | None = None) -> None:
        def comp(c: str) -> str:
            return override or c

        if is_full:
            gqa_attention(b, f"{p}.self_attn", q_bias=False, kv_bias=False, o_bias=False, q_out_factor=2,
                           component=comp("attention"))
            b.add(comp("norms"), f"{p}.self_attn.q_norm", hd)
            b.add(comp("norms"), f"{p}.self_attn.k_norm", hd)
        else:
            m = f"{p}.linear_attn"
            if split_in_proj:
                b.linear("ssm", f"{m}.in_proj_qkv", h, 2 * key_dim + value_dim)
                b.linear("ssm", f"{m}.in_proj_z", h, value_dim)
                b.linear("ssm", f"{m}.in_proj_b", h, v_heads)
                b.linear("ssm", f"{m}.in_proj_a", h, v_heads)
            else:
                b.linear("ssm", f"{m}.in_proj_qkvz", h, 2 * key_dim + 2 * value_dim)
                b.linear("ssm", f"{m}.in_proj_ba", h, 2 * v_heads)
            b.add("ssm", f"{m}.conv1d", 2 * key_dim + value_dim, 1, conv)
            b.add("ssm", f"{m}.dt_bias", v_heads)
            b.add("ssm", f"{m}.A_log", v_heads)
            b.add("ssm", f"{m}.norm", v_dim)
            b.linear("ssm", f"{m}.out_proj", value_dim, h)
        b.norm(f"{p}.input_layernorm", h, component=comp("norms"))
        b.norm(f"{p}.post_attention_layernorm", h, component=comp("norms"))
        if experts and i not in only and (i + 1) % max(step, 1) == 0:
            b.linear(comp("router"), f"{p}.mlp.gate", h, experts, quantizable=False)
            gated_mlp(b, f"{p}.mlp.experts", moe_inter, component=comp("experts"), count=experts)
            if shared_inter:
                gated_mlp(b, f"{p}.mlp.shared_expert", shared_inter, component=comp("shared_experts"))
                b.linear(comp("shared_experts"), f"{p}.mlp.shared_expert_gate", h, 1, quantizable=False)
        else:
            gated_mlp(b, f"{p}.mlp", intermediate(b), component=comp("mlp"))

    b.embed(f"{decoder}.embed_tokens")
    for i in range(n_layers):
        layer(f"{decoder}.layers.{i}", i, full[i])
    b.norm(f"{decoder}.norm", h)
    b.lm_head()

    # MTP: vLLM model_executor/models/qwen3_next_mtp.py: mtp.fc (Linear(2h, h)), pre_fc_norm_embedding,
    # pre_fc_norm_hidden, full-attention MoE decoder layer(s) mtp.layers.N, mtp.norm; embeddings and
    # lm_head are shared with the main model. How many: qwen3_next_mtp_layers, as ModelSpec.mtp_layers.
    for k in range(b.family.mtp_count(b.reader)):
        b.linear("mtp", "mtp.fc", 2 * h, h, quantizable=False)
        b.add("mtp", "mtp.pre_fc_norm_embedding", h)
        b.add("mtp", "mtp.pre_fc_norm_hidden", h)
        layer(f"mtp.layers.{k}", n_layers + k, True, "mtp")
        b.add("mtp", "mtp.norm", h)


def qwen3_next_mtp_layers(reader: ConfigReader) -> int:
    """Qwen3-Next configs leave ``num_nextn_predict_layers`` out, and its checkpoints ship one ``mtp.*``
    layer: vLLM ``Qwen3NextMTP`` builds ``getattr(config, "num_nextn_predict_layers", 1)`` layers
    (``qwen3_next_mtp.py``) and SGLang sets it to 1 for ``Qwen3NextForCausalLMMTP``
    (``ModelConfig._config_draft_model``)."""
    return reader.mtp_layers(absent=1, why="qwen3_next: num_nextn_predict_layers absent: 1 MTP layer (mtp.*), "
                             "as the Qwen3-Next-80B-A3B checkpoints ship and vLLM / SGLang build")


_QWEN3_NEXT_DEFAULTS = {
    # transformers Qwen3NextConfig default (configuration_qwen3_next.py); a config that leaves out the
    # DeltaNet head counts or sizes is refused instead: they set the size of every recurrent state.
    "linear_conv_kernel_dim": (4, "transformers Qwen3NextConfig"),
}
register("qwen3_next", layers=qwen3_next_layers, params=qwen3_next_params, defaults=_QWEN3_NEXT_DEFAULTS,
         mtp=qwen3_next_mtp_layers)
