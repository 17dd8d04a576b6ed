"""Mamba, Mamba-2 and Jamba: recurrent state instead of (or beside) a KV cache.

Layers: the conv and SSM state each layer keeps per sequence (transformers ``MambaCache`` /
``Mamba2Cache``, vLLM ``MambaSpec``). Parameters: the mixers of transformers ``modeling_mamba.py``,
``modeling_mamba2.py`` and ``modeling_jamba.py``. Both read the mixer sizes from the same functions.
"""

from __future__ import annotations

import math
from typing import Any

from kvplan.errors import ConfigError
from kvplan.record import dataclass
from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import (
    Counter,
    gated_mlp,
    gqa_attention,
    intermediate,
)
from kvplan.spec import LayerSpec, Recurrent


def mamba1_state(reader: ConfigReader, *, expand: str, d_conv: str, d_state: str,
                  intermediate: str | None) -> Recurrent:
    # Mamba (transformers MambaCache / vLLM MambaSpec): conv state [intermediate, d_conv] and
    # SSM state [intermediate, d_state], intermediate = expand x hidden_size.
    hidden = reader.hidden_size()
    assert hidden is not None
    inner = reader.int_field(intermediate, required=False) if intermediate else None
    if inner is None:
        factor = reader.int_field(expand, required=False)
        if factor is None:
            factor = 2
            reader.note(f"{expand} absent: assumed 2 (transformers default)")
        inner = factor * hidden
        if inner > (1 << 22):
            raise ConfigError(f"{expand}={factor} x hidden_size={hidden} is larger than any real model")
    kernel = reader.int_field(d_conv, required=False)
    if kernel is None:
        kernel = 4
        reader.note(f"{d_conv} absent: assumed 4 (transformers default)")
    state = reader.int_field(d_state, required=False)
    if state is None:
        state = 16
        reader.note(f"{d_state} absent: assumed 16 (transformers default)")
    return Recurrent(mixer="mamba", conv_dim=inner, conv_kernel=kernel, ssm_state=(inner, state))


def mamba_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_mamba.py: intermediate_size = int(expand * hidden_size); state_size, conv_kernel.
    n = reader.num_layers()
    return [mamba1_state(reader, expand="expand", d_conv="conv_kernel", d_state="state_size",
                          intermediate="intermediate_size")] * n


def mamba2_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_mamba2.py / modeling_mamba2.py Mamba2Cache: conv state
    # [intermediate + 2 * n_groups * state_size, conv_kernel], SSM state [num_heads, head_dim,
    # state_size], intermediate = expand * hidden_size = num_heads * head_dim. Note head_dim here is
    # the SSM head, not an attention head.
    n = reader.num_layers()
    d = mamba2_dims(reader)
    layer = Recurrent(mixer="mamba2", conv_dim=d.inner + 2 * d.groups * d.state,
                      conv_kernel=d.kernel, ssm_state=(d.heads, d.head_dim, d.state))
    return [layer] * n


@dataclass(frozen=True)
class Mamba2Dims:
    inner: int
    heads: int
    head_dim: int
    state: int
    groups: int
    kernel: int


def mamba2_dims(reader: ConfigReader) -> Mamba2Dims:
    """The Mamba-2 mixer's sizes (modeling_mamba2.py Mamba2Mixer: intermediate = expand x hidden)."""
    hidden = reader.hidden_size()
    expand = reader.int_field("expand")
    heads = reader.int_field("num_heads")
    head_dim = reader.int_field("head_dim")
    state = reader.int_field("state_size")
    groups = reader.int_field("n_groups")
    kernel = reader.int_field("conv_kernel")
    assert hidden and expand and heads and head_dim and state and groups and kernel
    inner = expand * hidden
    if heads * head_dim != inner:
        raise ConfigError(f"num_heads={heads} x head_dim={head_dim} != expand={expand} x hidden_size={hidden}")
    if heads % groups:
        raise ConfigError(f"num_heads={heads} is not a multiple of n_groups={groups}")
    return Mamba2Dims(inner, heads, head_dim, state, groups, kernel)


def jamba_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_jamba.py layers_block_type: attention where i % attn_layer_period ==
    # attn_layer_offset, Mamba elsewhere (Jamba-v0.1: period 8, offset 4 -> 4 attention of 32).
    n = reader.num_layers()
    period = reader.int_field("attn_layer_period", required=False, maximum=100_000)
    offset_found = reader.raw("attn_layer_offset")
    if period is None:
        period = 8
        reader.note("attn_layer_period absent: transformers Jamba default 8")
    if offset_found is None:
        offset = 4
        reader.note("attn_layer_offset absent: transformers Jamba default 4")
    else:
        offset = reader.int_of("attn_layer_offset", offset_found[1], minimum=0, maximum=100_000)
    if offset >= period:
        raise ConfigError(f"attn_layer_offset={offset} must be smaller than attn_layer_period={period}")
    mamba = mamba1_state(reader, expand="mamba_expand", d_conv="mamba_d_conv", d_state="mamba_d_state",
                          intermediate=None)
    window = reader.sliding_window()
    attention = reader.attention(window=window) if window else reader.attention()
    return [attention if i % period == offset else mamba for i in range(n)]


def mamba1_mixer(b: Counter, p: str, *, h: int, inner: int, state: int, conv: int, dt_rank: int,
                  proj_bias: bool, conv_bias: bool) -> None:
    """``MambaMixer`` (transformers ``modeling_mamba.py``): in_proj (h -> 2I), depthwise conv1d
    (I x 1 x k, bias), x_proj (I -> dt_rank + 2N), dt_proj (dt_rank -> I, bias), A_log (I x N),
    D (I), out_proj (I -> h)."""
    b.linear("ssm", f"{p}.in_proj", h, 2 * inner, bias=proj_bias)
    b.add("ssm", f"{p}.conv1d", inner, 1, conv)
    if conv_bias:
        b.add("ssm", f"{p}.conv1d.bias", inner)
    b.linear("ssm", f"{p}.x_proj", inner, dt_rank + 2 * state)
    b.linear("ssm", f"{p}.dt_proj", dt_rank, inner, bias=True)
    b.add("ssm", f"{p}.A_log", inner, state)
    b.add("ssm", f"{p}.D", inner)
    b.linear("ssm", f"{p}.out_proj", inner, h, bias=proj_bias)


def _dt_rank(b: Counter, value: Any, h: int) -> int:
    if value is None or value == "auto":
        return math.ceil(h / 16)
    return int(value)


def mamba_params(b: Counter) -> None:
    """mamba: transformers ``modeling_mamba.py``: embeddings, per layer an RMSNorm + MambaMixer,
    norm_f, lm_head tied by default (``MambaConfig.tie_word_embeddings=True``)."""
    h, n_layers = b.hidden, b.layers
    layer = mamba_layers(b.reader)[0]  # the mixer sizes the cache rule reads
    assert isinstance(layer, Recurrent)
    inner, conv, state = layer.conv_dim, layer.conv_kernel, layer.ssm_state[1]
    dt_rank = _dt_rank(b, b.get("time_step_rank"), h)
    vocab = b.vocab
    pad = b.int("pad_vocab_size_multiple", default=1)
    if pad > 1 and vocab % pad:
        b.note(f"vocab_size {vocab} is not a multiple of pad_vocab_size_multiple {pad}; counted unpadded")
    b.embed("backbone.embeddings")
    for i in range(n_layers):
        p = f"backbone.layers.{i}"
        b.norm(f"{p}.norm", h)
        mamba1_mixer(b, f"{p}.mixer", h=h, inner=inner, state=state, conv=conv, dt_rank=dt_rank,
                      proj_bias=b.flag("use_bias", False), conv_bias=b.flag("use_conv_bias", True))
    b.norm("backbone.norm_f", h)
    b.lm_head()


def mamba2_params(b: Counter) -> None:
    """mamba2: transformers ``modeling_mamba2.py``: in_proj (h -> 2I + 2 x n_groups x N + heads),
    conv1d over I + 2 x n_groups x N channels (bias), dt_bias / A_log / D per head, gated RMSNorm (I),
    out_proj (I -> h)."""
    h, n_layers = b.hidden, b.layers
    d = mamba2_dims(b.reader)
    inner, state, groups, heads, conv = d.inner, d.state, d.groups, d.heads, d.kernel
    proj_bias = b.flag("use_bias", False)
    conv_dim = inner + 2 * groups * state
    b.embed("backbone.embeddings")
    for i in range(n_layers):
        p = f"backbone.layers.{i}"
        m = f"{p}.mixer"
        b.norm(f"{p}.norm", h)
        b.linear("ssm", f"{m}.in_proj", h, 2 * inner + 2 * groups * state + heads, bias=proj_bias)
        b.add("ssm", f"{m}.conv1d", conv_dim, 1, conv)
        if b.flag("use_conv_bias", True):
            b.add("ssm", f"{m}.conv1d.bias", conv_dim)
        b.add("ssm", f"{m}.dt_bias", heads)
        b.add("ssm", f"{m}.A_log", heads)
        b.add("ssm", f"{m}.D", heads)
        b.add("ssm", f"{m}.norm", inner)
        b.linear("ssm", f"{m}.out_proj", inner, h, bias=proj_bias)
    b.norm("backbone.norm_f", h)
    b.lm_head()


def jamba_params(b: Counter) -> None:
    """jamba: transformers ``modeling_jamba.py``. Attention on layers with
    ``i % attn_layer_period == attn_layer_offset``, Mamba elsewhere (mixer with dt/B/C RMSNorms);
    MoE (``num_experts``, router Linear(h, E)) on ``i % expert_layer_period == expert_layer_offset``,
    dense MLP elsewhere; input_layernorm + pre_ff_layernorm per layer."""
    h, n_layers = b.hidden, b.layers
    # Mamba or attention, as the cache rule says
    mixers = [isinstance(layer, Recurrent) for layer in jamba_layers(b.reader)]
    e_period, e_offset = b.int("expert_layer_period", default=2), b.int("expert_layer_offset", default=1)
    experts = b.int("num_experts", default=1)
    inter = intermediate(b)
    mamba = mamba1_state(b.reader, expand="mamba_expand", d_conv="mamba_d_conv", d_state="mamba_d_state",
                         intermediate=None)
    m_inner, conv, state = mamba.conv_dim, mamba.conv_kernel, mamba.ssm_state[1]
    dt_rank = _dt_rank(b, b.get("mamba_dt_rank"), h)
    b.embed()
    for i in range(n_layers):
        p = f"model.layers.{i}"
        if not mixers[i]:
            gqa_attention(b, f"{p}.self_attn", q_bias=False, kv_bias=False, o_bias=False)
        else:
            m = f"{p}.mamba"
            mamba1_mixer(b, m, h=h, inner=m_inner, state=state, conv=conv, dt_rank=dt_rank,
                          proj_bias=b.flag("mamba_proj_bias", False),
                          conv_bias=b.flag("mamba_conv_bias", True))
            b.add("norms", f"{m}.dt_layernorm", dt_rank)
            b.add("norms", f"{m}.b_layernorm", state)
            b.add("norms", f"{m}.c_layernorm", state)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.pre_ff_layernorm", h)
        if experts > 1 and i % e_period == e_offset:
            b.linear("router", f"{p}.feed_forward.router", h, experts, quantizable=False)
            gated_mlp(b, f"{p}.feed_forward.experts", inter, component="experts", count=experts)
        else:
            gated_mlp(b, f"{p}.feed_forward", inter)
    b.norm("model.final_layernorm", h)
    b.lm_head()


register("mamba", layers=mamba_layers, params=mamba_params, tied_by_default=True)
register("falcon_mamba", layers=mamba_layers)
register("mamba2", layers=mamba2_layers, params=mamba2_params, defaults={
    # transformers Mamba2Config defaults
    "expand": (2, "transformers Mamba2Config"), "num_heads": (128, "transformers Mamba2Config"),
    "head_dim": (64, "transformers Mamba2Config"), "state_size": (128, "transformers Mamba2Config"),
    "n_groups": (1, "transformers Mamba2Config"), "conv_kernel": (4, "transformers Mamba2Config")})
register("jamba", layers=jamba_layers, params=jamba_params)
