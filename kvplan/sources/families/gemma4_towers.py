"""Gemma 4's vision and audio towers (modeling_gemma4.py), counted as the checkpoints store them."""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.reader import MAX_DIM, MAX_LAYERS
from kvplan.sources.families.tensors import Counter


def _tower_config(b: Counter, key: str, model_type: str, ints: tuple[str, ...],
                  what: str) -> dict | None:
    """The ``vision_config`` / ``audio_config`` of a gemma4 config if its tower can be counted exactly."""
    tc = b.top.get(key)
    if tc is None:
        if b.cfg is not b.top and key not in b.top:
            b.note(f"gemma4 config without {key}: {what} not counted")
        return None
    if not isinstance(tc, dict):
        raise ConfigError(f"gemma4 {key} is not an object")
    if tc.get("model_type", model_type) != model_type:
        b.note(f"{key} model_type {tc.get('model_type')!r} is not {model_type}: {what} not counted")
        return None
    missing = [name for name in ints if not isinstance(tc.get(name), int) or isinstance(tc.get(name), bool)]
    if missing:
        b.note(f"{key} lacks {', '.join(missing)}: {what} not counted")
        return None
    for name in ints:  # every size of a tower bounds work below (a loop over its layers)
        limit = MAX_LAYERS if name == "num_hidden_layers" else MAX_DIM
        if not 0 < tc[name] <= limit:
            raise ConfigError(f"{key}.{name}={tc[name]} is not a size of a real model (1 to {limit})")
    return tc


def _tower_flag(b: Counter, tc: dict, key: str, name: str, default: bool) -> bool:
    value = tc.get(name)
    if value is None:
        b.note(f"{key}.{name} absent: transformers default {default}")
        return default
    return bool(value)


def _clippable(b: Counter, component: str, module: str, n_in: int, n_out: int, clipped: bool) -> None:
    """``Gemma4ClippableLinear``: a bias-free Linear plus, with ``use_clipped_linears``, four scalar
    buffers (input_min/max, output_min/max) that the checkpoints store."""
    b.add(component, f"{module}.linear", n_out, n_in)
    if clipped:
        b.add(component, f"{module}.clip_bounds", 4)


def gemma4_vision(b: Counter) -> None:
    """``Gemma4VisionModel`` + ``embed_vision`` (modeling_gemma4.py).

    patch_embedder.input_proj (3 x patch^2 -> h), position_embedding_table (2 x
    ``position_embedding_size`` x h); per encoder layer q/k/v/o (``Gemma4ClippableLinear``, heads x
    head_dim), q_norm / k_norm (head_dim), 4 RMSNorms, GeGLU MLP gate/up/down (clippable);
    ``std_bias`` / ``std_scale`` (h each) when ``standardize``; the pooler has no weights;
    embed_vision.embedding_projection (h -> text h, no bias; its pre-projection norm has no weight).
    """
    tc = _tower_config(b, "vision_config", "gemma4_vision",
                       ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
                        "num_key_value_heads", "head_dim", "patch_size", "position_embedding_size"),
                       "vision tower")
    if tc is None:
        return
    vh, vl, vi = tc["hidden_size"], tc["num_hidden_layers"], tc["intermediate_size"]
    vnh, vkv, vhd = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
    patch = tc["patch_size"]
    clipped = _tower_flag(b, tc, "vision_config", "use_clipped_linears", False)
    standardize = _tower_flag(b, tc, "vision_config", "standardize", False)
    v = "model.vision_tower"
    b.add("vision", f"{v}.patch_embedder.input_proj", vh, 3 * patch * patch)
    b.add("vision", f"{v}.patch_embedder.position_embedding_table", 2, tc["position_embedding_size"], vh)
    for i in range(vl):
        p = f"{v}.encoder.layers.{i}"
        for name, n_in, n_out in (("q_proj", vh, vnh * vhd), ("k_proj", vh, vkv * vhd),
                                  ("v_proj", vh, vkv * vhd), ("o_proj", vnh * vhd, vh)):
            _clippable(b, "vision", f"{p}.self_attn.{name}", n_in, n_out, clipped)
        b.add("vision", f"{p}.self_attn.q_norm", vhd)
        b.add("vision", f"{p}.self_attn.k_norm", vhd)
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            b.add("vision", f"{p}.{name}", vh)
        for name, n_in, n_out in (("gate_proj", vh, vi), ("up_proj", vh, vi), ("down_proj", vi, vh)):
            _clippable(b, "vision", f"{p}.mlp.{name}", n_in, n_out, clipped)
    if standardize:
        b.add("vision", f"{v}.std_bias", vh)
        b.add("vision", f"{v}.std_scale", vh)
    b.add("vision", "model.embed_vision.embedding_projection", b.hidden, vh)


def gemma4_audio(b: Counter) -> None:
    """``Gemma4AudioModel`` + ``embed_audio`` (modeling_gemma4.py), a conformer on 128-bin mel frames.

    subsample_conv_projection: two bias-free 3x3 Conv2d (1 -> c0 -> c1 channels,
    c = ``subsampling_conv_channels``) each with a bias-free LayerNorm, input_proj_linear
    ((c0 // 4) x c1 -> h); per layer two feed-forward blocks (pre/post RMSNorm, h -> 4h -> h
    clippable linears), self-attention (q/k/v/post clippable h x h, relative_k_proj h x h,
    per_dim_scale of h / heads), a light conv block (pre RMSNorm, linear_start h -> 2h, depthwise
    conv1d h x 1 x ``conv_kernel_size``, conv RMSNorm, linear_end h -> h) and 3 RMSNorms;
    output_proj (h -> ``output_proj_dims``, with bias); embed_audio.embedding_projection
    (``output_proj_dims`` -> text h, no bias).
    """
    tc = _tower_config(b, "audio_config", "gemma4_audio",
                       ("hidden_size", "num_hidden_layers", "num_attention_heads", "conv_kernel_size",
                        "output_proj_dims"),
                       "audio tower")
    if tc is None:
        return
    channels = tc.get("subsampling_conv_channels")
    if not (isinstance(channels, (list, tuple)) and len(channels) == 2
            and all(isinstance(c, int) and not isinstance(c, bool) for c in channels)):
        b.note("audio_config lacks subsampling_conv_channels [c0, c1]: audio tower not counted")
        return
    ah, al, anh = tc["hidden_size"], tc["num_hidden_layers"], tc["num_attention_heads"]
    kernel, out_dims = tc["conv_kernel_size"], tc["output_proj_dims"]
    c0, c1 = channels
    clipped = _tower_flag(b, tc, "audio_config", "use_clipped_linears", True)
    a = "model.audio_tower"
    s = f"{a}.subsample_conv_projection"
    b.add("audio", f"{s}.layer0.conv", c0, 1, 3, 3)
    b.add("audio", f"{s}.layer0.norm", c0)
    b.add("audio", f"{s}.layer1.conv", c1, c0, 3, 3)
    b.add("audio", f"{s}.layer1.norm", c1)
    b.add("audio", f"{s}.input_proj_linear", ah, (c0 // 4) * c1)
    for i in range(al):
        p = f"{a}.layers.{i}"
        for ff in ("feed_forward1", "feed_forward2"):
            b.add("audio", f"{p}.{ff}.pre_layer_norm", ah)
            _clippable(b, "audio", f"{p}.{ff}.ffw_layer_1", ah, 4 * ah, clipped)
            _clippable(b, "audio", f"{p}.{ff}.ffw_layer_2", 4 * ah, ah, clipped)
            b.add("audio", f"{p}.{ff}.post_layer_norm", ah)
        for name in ("q_proj", "k_proj", "v_proj", "post"):
            _clippable(b, "audio", f"{p}.self_attn.{name}", ah, ah, clipped)
        b.add("audio", f"{p}.self_attn.relative_k_proj", ah, ah)
        b.add("audio", f"{p}.self_attn.per_dim_scale", ah // anh)
        b.add("audio", f"{p}.lconv1d.pre_layer_norm", ah)
        _clippable(b, "audio", f"{p}.lconv1d.linear_start", ah, 2 * ah, clipped)
        b.add("audio", f"{p}.lconv1d.depthwise_conv1d", ah, 1, kernel)
        b.add("audio", f"{p}.lconv1d.conv_norm", ah)
        _clippable(b, "audio", f"{p}.lconv1d.linear_end", ah, ah, clipped)
        for name in ("norm_pre_attn", "norm_post_attn", "norm_out"):
            b.add("audio", f"{p}.{name}", ah)
    b.add("audio", f"{a}.output_proj", out_dims, ah)
    b.add("audio", f"{a}.output_proj.bias", out_dims)
    b.add("audio", "model.embed_audio.embedding_projection", b.hidden, out_dims)
