"""Gemma 4 (google/gemma-4-31B, -26B-A4B, -E4B, -E2B): the cache and the parameter count.

Both read the attention layout from :func:`gemma4_geometry`; the vision and audio towers are in
``gemma4_towers``.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import ConfigError
from kvplan.record import dataclass
from kvplan.sources.families.gemma import kv_shared_tail
from kvplan.sources.families.gemma4_towers import gemma4_audio, gemma4_vision
from kvplan.sources.families.reader import ConfigReader, short_repr
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import Counter, gated_mlp
from kvplan.spec import FullAttention, LayerSpec, SlidingWindow

_GEMMA4_DEFAULTS = {
    # transformers Gemma4TextConfig defaults (configuration_gemma4.py, huggingface/transformers
    # @ 351f643ab9f582c01026b6d75aab3e2c5a8338cd); every released google/gemma-4-* config sets these.
    "num_hidden_layers": (30, "transformers Gemma4TextConfig"),
    "num_attention_heads": (8, "transformers Gemma4TextConfig"),
    "num_key_value_heads": (4, "transformers Gemma4TextConfig"),
    "head_dim": (256, "transformers Gemma4TextConfig"),
    "sliding_window": (512, "transformers Gemma4TextConfig"),
    "max_position_embeddings": (131072, "transformers Gemma4TextConfig"),
}
_GEMMA4_GLOBAL_HEAD_DIM = 512  # Gemma4TextConfig.global_head_dim default
_GEMMA4_TYPES = ("sliding_attention", "full_attention")


@dataclass(frozen=True)
class Gemma4Geometry:
    """One reading of a Gemma 4 text config's attention layout, for the cache and the count alike."""

    types: list[str]
    """sliding_attention / full_attention per layer (the last one forced full)."""
    kv_heads: list[int]
    head_dims: list[int]
    window: int
    shared: int
    """num_kv_shared_layers: the last ``shared`` layers compute no K/V of their own."""


def gemma4_geometry(reader: ConfigReader) -> Gemma4Geometry:
    """Gemma 4 (google/gemma-4-31B, -26B-A4B, -E4B, -E2B): sliding and global layers differ in shape.

    Rules, identical in both engines:
    - layer_types: default sliding unless (i + 1) % 6 == 0, and the last layer is forced to
      full_attention (Gemma4TextConfig.__post_init__, configuration_gemma4.py @ 351f643a).
    - sliding layers: head_dim, num_key_value_heads, window sliding_window. Full (global) layers:
      global_head_dim (default 512; null falls back to head_dim), and num_global_key_value_heads only
      when attention_k_eq_v, otherwise num_key_value_heads. transformers modeling_gemma4.py
      Gemma4TextAttention.__init__ (@ 0246b4f3335464614ef1de66531f9131a44ec801); vLLM
      vllm/model_executor/models/gemma4.py Gemma4DecoderLayer.__init__ (@ 001cabc1be16a59a70d720ed61a13b678c060a18).
    - attention_k_eq_v (global layers have no v_proj): both engines still cache a separate V tensor.
      transformers computes value_states = v_norm(k_proj(x)) and passes both K and V to
      past_key_values.update; vLLM loads the K weights into the V slot of qkv_proj and uses a plain
      Attention layer, i.e. a FullAttentionSpec holding K and V. So a global layer costs
      2 x kv_heads x global_head_dim elements per token, which LayerSpec expresses as is.
    - num_kv_shared_layers: the last N layers compute no K/V and read the cache of the last earlier
      non-shared layer of their own type (transformers: is_kv_shared_layer / store_full_length_kv and
      no past_key_values.update; vLLM: kv_sharing_target_layer_name, so no KV cache of their own).
    - newer transformers (configuration_gemma4.py @ 008e574391258935f3ecc3035c882e73bbcac419) turn
      global_head_dim / num_global_key_value_heads into per_layer_config overrides and, when a config
      already carries per_layer_config, use that instead; such configs are read the same way.
    """
    n = reader.num_layers()
    types = reader.layer_types()
    if types is None:
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
        reader.note("layer_types absent: transformers Gemma4 default, every 6th layer global (5 local : 1 global)")
    types = list(types)
    for index, layer_type in enumerate(types):
        if layer_type not in _GEMMA4_TYPES:
            raise ConfigError(f"layer_types[{index}]='{layer_type}' is not a layer type gemma4 uses")
    if types[-1] != "full_attention":
        types[-1] = "full_attention"
        reader.note("layer_types ends with a sliding layer: transformers Gemma4 forces the last layer to full_attention")

    heads = reader.num_heads()
    kv = reader.kv_heads()
    head_dim = reader.head_dim()
    window = reader.sliding_window()
    if window is None:  # use_sliding_window: false is not a Gemma 4 field; only an odd config gets here
        raise ConfigError("gemma4 config disables sliding_window, which Gemma 4 does not support")
    if reader.cfg.get("use_bidirectional_attention") == "all":
        window = window // 2 + 1
        reader.note(f"use_bidirectional_attention='all': transformers Gemma4 narrows the window to "
                    f"sliding_window // 2 + 1 = {window}")

    per_layer = reader.cfg.get("per_layer_config")
    if per_layer is not None:
        overrides = _gemma4_per_layer(reader, per_layer, n)
        global_kv, global_head_dim = kv, head_dim  # only the overrides widen a layer
    else:
        overrides = {}
        global_head_dim = _gemma4_global_head_dim(reader, head_dim)
        global_kv = _gemma4_global_kv_heads(reader, heads, kv)

    kv_heads, head_dims = [], []
    for index, layer_type in enumerate(types):
        layer_kv, layer_dim = (kv, head_dim) if layer_type == "sliding_attention" else (global_kv, global_head_dim)
        if index in overrides:
            layer_kv = overrides[index].get("num_key_value_heads", layer_kv)
            layer_dim = overrides[index].get("head_dim", layer_dim)
            if heads % layer_kv:
                raise ConfigError(f"per_layer_config[{index}]: num_attention_heads={heads} is not a multiple "
                                  f"of num_key_value_heads={layer_kv}")
        kv_heads.append(layer_kv)
        head_dims.append(layer_dim)
    found = reader.raw("num_kv_shared_layers")
    shared = reader.int_of("num_kv_shared_layers", found[1], minimum=0, maximum=n) if found else 0
    return Gemma4Geometry(types, kv_heads, head_dims, window, shared)


def gemma4_layers(reader: ConfigReader) -> list[LayerSpec]:
    """Gemma 4's cache: sliding and global layers differ in shape; kv-shared layers hold none."""
    g = gemma4_geometry(reader)
    layers: list[LayerSpec] = [
        SlidingWindow(kv_heads=kv, head_dim=dim, window=g.window) if t == "sliding_attention"
        else FullAttention(kv_heads=kv, head_dim=dim)
        for t, kv, dim in zip(g.types, g.kv_heads, g.head_dims)]
    return kv_shared_tail(reader, layers, g.types)


def _gemma4_global_head_dim(reader: ConfigReader, head_dim: int) -> int:
    if "global_head_dim" not in reader.cfg:
        reader.note(f"global_head_dim absent: transformers Gemma4TextConfig default {_GEMMA4_GLOBAL_HEAD_DIM}")
        return _GEMMA4_GLOBAL_HEAD_DIM
    value = reader.cfg["global_head_dim"]
    if value is None or value == 0:
        # modeling_gemma4.py: `config.global_head_dim if not self.is_sliding and config.global_head_dim
        # else config.head_dim`
        reader.note(f"global_head_dim is {value!r}: global layers use head_dim={head_dim}")
        return head_dim
    return reader.int_of("global_head_dim", value)


def _gemma4_global_kv_heads(reader: ConfigReader, heads: int, kv: int) -> int:
    found = reader.raw("num_global_key_value_heads")
    if not reader.bool_field("attention_k_eq_v", False):
        # Only attention_k_eq_v models switch the global layers' KV-head count (both engines).
        if found is not None and found[1] != kv:
            reader.note(f"num_global_key_value_heads={found[1]} ignored: attention_k_eq_v is false, so global "
                        f"layers use num_key_value_heads={kv} (transformers and vLLM)")
        return kv
    if found is None:
        reader.note(f"attention_k_eq_v without num_global_key_value_heads: global layers assumed to use "
                    f"num_key_value_heads={kv}")
        return kv
    global_kv = reader.int_of(found[0], found[1])
    if heads % global_kv:
        raise ConfigError(f"num_attention_heads={heads} is not a multiple of num_global_key_value_heads={global_kv}")
    return global_kv


def _gemma4_per_layer(reader: ConfigReader, per_layer: Any, n: int) -> dict[int, dict[str, int]]:
    """per_layer_config {layer index: {head_dim, num_key_value_heads}} (transformers HeterogeneousConfigMixin)."""
    if not isinstance(per_layer, dict):
        raise ConfigError(f"per_layer_config={short_repr(per_layer)} is not an object keyed by layer index")
    out: dict[int, dict[str, int]] = {}
    for key, entry in per_layer.items():
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise ConfigError(f"per_layer_config key {key!r} is not a layer index") from None
        if not 0 <= index < n:
            raise ConfigError(f"per_layer_config key {key!r} is outside layers 0..{n - 1}")
        if not isinstance(entry, dict):
            raise ConfigError(f"per_layer_config[{key!r}]={short_repr(entry)} is not an object")
        out[index] = {name: reader.int_of(f"per_layer_config[{key!r}].{name}", entry[name])
                      for name in ("head_dim", "num_key_value_heads") if entry.get(name) is not None}
    reader.note("per_layer_config present: per-layer head_dim / num_key_value_heads read from it "
                "(global_head_dim and num_global_key_value_heads are not consulted)")
    return out


def gemma4_params(b: Counter) -> None:
    """gemma4 / gemma4_text: transformers ``modeling_gemma4.py`` (``Gemma4ForConditionalGeneration``).

    Counted as the published checkpoints store it (names ``model.language_model.*``; every tensor,
    persistent buffers included, since ``total_size`` counts them):
    - layer geometry (types, per-layer KV heads and head_dim, kv-shared layers) from
      :func:`gemma4_geometry`, the same reading the cache rule uses.
    - attention: q_proj, k_proj, v_proj (none on global layers when ``attention_k_eq_v``), o_proj
      (biases iff ``attention_bias``), q_norm / k_norm of the layer's head_dim (v_norm has no weight).
      The last ``num_kv_shared_layers`` layers compute no K/V, yet the checkpoints still store their
      k_proj / v_proj / k_norm (transformers skips them on load; vLLM's qkv_proj loads them).
    - per layer: input / post-attention / pre- and post-feedforward RMSNorms, a ``layer_scalar``
      buffer (1 value), a GeGLU MLP of ``intermediate_size`` (twice that on kv-shared layers when
      ``use_double_wide_mlp``).
    - ``enable_moe_block`` (26B-A4B): beside the dense MLP, router (proj Linear(h, E), ``scale`` (h),
      ``per_expert_scale`` (E)), experts ``gate_up_proj`` (E x 2I x h) and ``down_proj`` (E x h x I)
      with I = ``moe_intermediate_size``, and 3 more RMSNorms.
    - per-layer embeddings when ``hidden_size_per_layer_input`` > 0 (E2B / E4B): the table
      ``embed_tokens_per_layer`` (``vocab_size_per_layer_input`` x layers x that width),
      ``per_layer_model_projection`` (h -> layers x width) and its norm; in each layer
      ``per_layer_input_gate`` (h -> width), ``per_layer_projection`` (width -> h) and
      ``post_per_layer_input_norm``.
    - embed_tokens, final norm, lm_head only if not tied; the vision tower and
      the audio tower (``gemma4_towers``) with their ``embed_vision`` / ``embed_audio`` projections.
    """
    h, n_layers, nh = b.hidden, b.layers, b.heads
    top = "model.language_model" if b.cfg is not b.top else "model"
    bias = b.flag("attention_bias", False)
    k_eq_v = b.flag("attention_k_eq_v", False)

    g = gemma4_geometry(b.reader)
    types, shared = g.types, g.shared
    first_shared = n_layers - shared
    double_wide = b.flag("use_double_wide_mlp", False)
    inter = b.int("intermediate_size")
    ple = b.int("hidden_size_per_layer_input", default=256,
                why="transformers Gemma4TextConfig default; released configs set it")
    moe = b.flag("enable_moe_block", False)
    if moe:
        experts = b.int("num_experts")
        moe_inter = b.int("moe_intermediate_size", "expert_intermediate_size")

    b.embed(f"{top}.embed_tokens")
    if ple:
        ple_vocab = b.int("vocab_size_per_layer_input", default=262_144,
                          why="transformers Gemma4TextConfig default")
        b.add("embed", f"{top}.embed_tokens_per_layer", ple_vocab, n_layers * ple)
        b.linear("other", f"{top}.per_layer_model_projection", h, n_layers * ple, quantizable=False)
        b.add("norms", f"{top}.per_layer_projection_norm", ple)
    shared_kv = 0
    for i, layer_type in enumerate(types):
        p = f"{top}.layers.{i}"
        full = layer_type == "full_attention"
        layer_kv, layer_hd = g.kv_heads[i], g.head_dims[i]
        a = f"{p}.self_attn"
        b.linear("attention", f"{a}.q_proj", h, nh * layer_hd, bias=bias)
        b.linear("attention", f"{a}.k_proj", h, layer_kv * layer_hd, bias=bias)
        if not (k_eq_v and full):
            b.linear("attention", f"{a}.v_proj", h, layer_kv * layer_hd, bias=bias)
        b.linear("attention", f"{a}.o_proj", nh * layer_hd, h, bias=bias)
        b.add("norms", f"{a}.q_norm", layer_hd)
        b.add("norms", f"{a}.k_norm", layer_hd)
        if i >= first_shared:
            shared_kv += layer_kv * layer_hd * h * (1 if k_eq_v and full else 2) + layer_hd
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            b.norm(f"{p}.{name}", h)
        b.add("other", f"{p}.layer_scalar", 1)
        gated_mlp(b, f"{p}.mlp", inter * (2 if double_wide and i >= first_shared else 1))
        if ple:
            b.linear("other", f"{p}.per_layer_input_gate", h, ple)
            b.linear("other", f"{p}.per_layer_projection", ple, h)
            b.norm(f"{p}.post_per_layer_input_norm", h)
        if moe:
            b.linear("router", f"{p}.router.proj", h, experts, quantizable=False)
            b.add("router", f"{p}.router.scale", h)
            b.add("router", f"{p}.router.per_expert_scale", experts)
            b.linear("experts", f"{p}.experts.gate_up_proj", h, 2 * moe_inter, count=experts)
            b.linear("experts", f"{p}.experts.down_proj", moe_inter, h, count=experts)
            for name in ("post_feedforward_layernorm_1", "post_feedforward_layernorm_2",
                         "pre_feedforward_layernorm_2"):
                b.norm(f"{p}.{name}", h)
    b.norm(f"{top}.norm", h)
    b.lm_head()
    if shared_kv:
        b.note(f"the {shared} kv-shared layers' k_proj/v_proj/k_norm ({shared_kv:,} parameters) are counted: "
               "the published checkpoints store them, though transformers does not load them")
    gemma4_vision(b)
    gemma4_audio(b)


register("gemma4_text", "gemma4", layers=gemma4_layers, params=gemma4_params, defaults=_GEMMA4_DEFAULTS,
         own_towers=True)
