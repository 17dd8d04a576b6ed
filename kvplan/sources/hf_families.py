"""Family adapters for configs the generic rules of ``hf_config`` read wrongly.

One small function per family, registered by ``model_type`` (the text model's ``model_type`` is
tried first for nested multimodal configs). Each cites the transformers / vLLM source its rule
comes from. ``defaults`` are the transformers config-class defaults a Hub config may rely on by
leaving the field out (gemma-3-4b's ``text_config`` names neither heads nor head_dim).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan.errors import ConfigError
from kvplan.spec import LayerSpec

if TYPE_CHECKING:
    from kvplan.sources.hf_config import ConfigReader

Builder = Callable[["ConfigReader"], list[LayerSpec]]


@dataclass(frozen=True)
class Family:
    build: Builder
    defaults: dict[str, tuple[Any, str]] = field(default_factory=dict)


_FAMILIES: dict[str, Family] = {}

# Families the generic rules read correctly, with the transformers config class that agrees.
# Value: True when the architecture is multi-head attention (no KV-head field expected).
_GENERIC: dict[str, bool] = {
    "gpt2": True,          # GPT2Config: n_layer / n_head / n_embd / n_positions
    "gptj": True,          # GPTJConfig: same aliases, head_dim = n_embd / n_head
    "gpt_neox": True,      # GPTNeoXConfig (Pythia)
    "opt": True,           # OPTConfig
    "bloom": True,         # BloomConfig: n_layer / n_head / hidden_size (n_embed), ALiBi: no positions
    "olmo": True,
    "llama": False,        # LlamaConfig; Llama-1 configs have no num_key_value_heads
    "mistral": False,      # MistralConfig: sliding_window (v0.1: 4096) on every layer, null from v0.2
    "mixtral": False,      # MixtralConfig: same window rule as Mistral
    "starcoder2": False,   # Starcoder2Config: same window rule
    "granite": False,
    "olmo2": False,
    "glm4_moe": False,     # Glm4MoeConfig: explicit head_dim (128) != hidden / heads
    "cohere": False,
    "gemma": False,
    "mistral3": False,
}


def register(*model_types: str, defaults: dict[str, tuple[Any, str]] | None = None) -> Callable[[Builder], Builder]:
    def wrap(fn: Builder) -> Builder:
        for model_type in model_types:
            _FAMILIES[model_type] = Family(fn, dict(defaults or {}))
        return fn
    return wrap


def lookup(text_model_type: str | None, model_type: str) -> Family | None:
    if text_model_type and text_model_type in _FAMILIES:
        return _FAMILIES[text_model_type]
    return _FAMILIES.get(model_type)


def is_known_generic(text_model_type: str | None, model_type: str) -> bool:
    return (text_model_type in _GENERIC) or (model_type in _GENERIC)


def known_model_types() -> set[str]:
    return set(_FAMILIES) | set(_GENERIC)


def _is_mha(reader: ConfigReader) -> bool:
    return bool(_GENERIC.get(reader.text_model_type or "", False) or _GENERIC.get(reader.model_type, False))


def generic_layers(reader: ConfigReader) -> list[LayerSpec]:
    """The generic rules: MLA fields, else layer_types, else one window (or none) for all layers."""
    if reader.has("kv_lora_rank"):
        reader.note(f"model_type '{reader.model_type}' has kv_lora_rank: read as multi-head latent attention")
        return _mla(reader)
    mha = _is_mha(reader)
    types = reader.layer_types()
    if types is not None:
        return reader.layers_from_types(types, mha_family=mha)
    return reader.uniform_attention(mha_family=mha)


# --------------------------------------------------------------------------------------------
# Attention families


@register("falcon", "RefinedWeb", "RefinedWebModel")
def _falcon(reader: ConfigReader) -> list[LayerSpec]:
    # modeling_falcon.py FalconAttention: num_kv_heads = config.num_kv_heads if
    # (new_decoder_architecture or not multi_query) else 1; FalconConfig defaults multi_query=True,
    # num_kv_heads (older configs: n_head_kv) to num_attention_heads; head_dim = hidden // heads.
    n = reader.num_layers()
    heads = reader.num_heads()
    new_arch = reader.bool_field("new_decoder_architecture", False)
    multi_query = reader.bool_field("multi_query", True)
    hidden = reader.hidden_size()
    assert hidden is not None
    if hidden % heads:
        raise ConfigError(f"hidden_size={hidden} is not divisible by num_attention_heads={heads}")
    if new_arch or not multi_query:
        found = reader.raw("num_kv_heads", "n_head_kv", "num_key_value_heads")
        kv = reader.int_of(found[0], found[1]) if found else heads
        if found is None and new_arch:
            reader.note(f"falcon new_decoder_architecture without num_kv_heads: assumed {heads} (MHA)")
        if heads % kv:
            name = found[0] if found else "num_kv_heads"
            raise ConfigError(f"num_attention_heads={heads} is not a multiple of {name}={kv}")
    else:
        kv = 1  # legacy multi-query Falcon (7B): one K/V head shared by all query heads
    return [LayerSpec(kind="full", kv_heads=kv, head_dim=hidden // heads)] * n


@register("gpt_bigcode")
def _gpt_bigcode(reader: ConfigReader) -> list[LayerSpec]:
    # GPTBigCodeConfig (StarCoder, SantaCoder): multi_query=True (default) caches one K/V head.
    n = reader.num_layers()
    heads = reader.num_heads()
    hd = reader.head_dim()
    kv = 1 if reader.bool_field("multi_query", True) else heads
    return [LayerSpec(kind="full", kv_heads=kv, head_dim=hd)] * n


def _qwen_window(reader: ConfigReader) -> int | None:
    # Qwen2/Qwen3/Qwen2-MoE/Qwen3-MoE configs: sliding_window counts only when use_sliding_window is
    # true (the config classes set sliding_window = None otherwise; use_sliding_window defaults False).
    if not reader.bool_field("use_sliding_window", False):
        return None
    window = reader.sliding_window()
    if window is None:
        raise ConfigError("use_sliding_window=true but sliding_window is missing")
    return window


@register("qwen2", "qwen3")
def _qwen2(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_qwen2.py / configuration_qwen3.py: layer_types default = sliding for layer
    # index >= max_window_layers when the window is on, full otherwise.
    types = reader.layer_types()
    window = _qwen_window(reader)
    if types is not None:
        if window is None and any(t == "sliding_attention" for t in types):
            reader.note("layer_types lists sliding layers but use_sliding_window is off: cached as full attention")
            types = ["full_attention" if t == "sliding_attention" else t for t in types]
        return reader.layers_from_types(types)
    n = reader.num_layers()
    full = reader.attention()
    if window is None:
        return [full] * n
    max_window_layers = reader.int_field("max_window_layers", required=False, maximum=100_000)
    if max_window_layers is None:
        max_window_layers = 28
        reader.note("max_window_layers absent: transformers default 28")
    sliding = reader.attention("sliding", window=window)
    return [sliding if i >= max_window_layers else full for i in range(n)]


@register("qwen2_moe")
def _qwen2_moe(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_qwen2_moe.py (transformers 5): layer_types default = sliding when
    # (i + 1) % 2 and i < max_window_layers and use_sliding_window. Every released Qwen2-MoE config
    # has use_sliding_window=false, so this only matters for custom configs.
    types = reader.layer_types()
    window = _qwen_window(reader)
    if types is not None:
        return reader.layers_from_types(types)
    n = reader.num_layers()
    full = reader.attention()
    if window is None:
        return [full] * n
    max_window_layers = reader.int_field("max_window_layers", required=False, maximum=100_000) or 28
    sliding = reader.attention("sliding", window=window)
    return [sliding if (i + 1) % 2 and i < max_window_layers else full for i in range(n)]


@register("qwen3_moe")
def _qwen3_moe(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_qwen3_moe.py: no layer_types; sliding_window (when use_sliding_window) then
    # reaches every layer through DynamicCache's uniform rule.
    types = reader.layer_types()
    if types is not None:
        return reader.layers_from_types(types)
    n = reader.num_layers()
    window = _qwen_window(reader)
    if window is None:
        return [reader.attention()] * n
    return [reader.attention("sliding", window=window)] * n


@register("phi3")
def _phi3(reader: ConfigReader) -> list[LayerSpec]:
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


@register("gemma2", defaults={"head_dim": (256, "transformers Gemma2Config"),
                              "sliding_window": (4096, "transformers Gemma2Config")})
def _gemma2(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_gemma2.py: layer_types default = sliding when (i + 1) % 2, i.e. even layers
    # slide (window 4096), odd layers are global. Early configs also carry sliding_window_size.
    types = reader.layer_types()
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(reader.num_layers())]
    return reader.layers_from_types(types, window_fields=("sliding_window", "sliding_window_size"))


_GEMMA3_DEFAULTS = {
    # transformers Gemma3TextConfig defaults; gemma-3-4b/12b Hub configs leave some of these out.
    "num_attention_heads": (8, "transformers Gemma3TextConfig"),
    "num_key_value_heads": (4, "transformers Gemma3TextConfig"),
    "head_dim": (256, "transformers Gemma3TextConfig"),
    "sliding_window": (4096, "transformers Gemma3TextConfig"),
    "max_position_embeddings": (131072, "transformers Gemma3TextConfig"),
    "num_hidden_layers": (26, "transformers Gemma3TextConfig"),
}


@register("gemma3_text", "gemma3", defaults=_GEMMA3_DEFAULTS)
def _gemma3(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_gemma3.py: layer_types default = sliding when (i + 1) % sliding_window_pattern
    # (pattern 6: 5 local : 1 global); the pattern used to be saved as sliding_window_pattern or
    # _sliding_window_pattern.
    return _every_nth_global(reader, 6, "Gemma3")


@register("cohere2", defaults={"sliding_window": (4096, "transformers Cohere2Config")})
def _cohere2(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_cohere2.py: layer_types default = sliding when (i + 1) % sliding_window_pattern
    # (default 4: 3 local : 1 global).
    return _every_nth_global(reader, 4, "Cohere2")


def _every_nth_global(reader: ConfigReader, default: int, family: str) -> list[LayerSpec]:
    """``layer_types`` if given, else sliding layers with every ``sliding_window_pattern``-th global."""
    types = reader.layer_types()
    if types is None:
        found = reader.raw("sliding_window_pattern", "_sliding_window_pattern")
        if found is None:
            pattern = default
            reader.note(f"sliding_window_pattern absent: transformers {family} default {default} "
                        f"({default - 1} local : 1 global)")
        else:
            pattern = reader.int_of(found[0], found[1], maximum=100_000)
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(reader.num_layers())]
    return reader.layers_from_types(types)


@register("gpt_oss", defaults={"sliding_window": (128, "transformers GptOssConfig"),
                               "head_dim": (64, "transformers GptOssConfig")})
def _gpt_oss(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_gpt_oss.py: layer_types default alternates sliding (128) / full from layer 0.
    types = reader.layer_types()
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(reader.num_layers())]
    return reader.layers_from_types(types)


@register("llama4_text", "llama4", defaults={"head_dim": (128, "transformers Llama4TextConfig"),
                                             "attention_chunk_size": (8192, "transformers Llama4TextConfig")})
def _llama4(reader: ConfigReader) -> list[LayerSpec]:
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
                raise ConfigError(f"no_rope_layers={_short_list(flags)} is not {n} flags of 0/1")
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


def _short_list(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------------------------
# Multi-head latent attention


def _mla(reader: ConfigReader) -> list[LayerSpec]:
    n = reader.num_layers()
    layer = LayerSpec(
        kind="mla",
        kv_lora_rank=reader.int_field("kv_lora_rank"),
        qk_rope_head_dim=reader.int_field("qk_rope_head_dim"),
        qk_nope_head_dim=reader.int_field("qk_nope_head_dim", required=False),
        v_head_dim=reader.int_field("v_head_dim", required=False),
        num_heads=reader.int_field("num_attention_heads", required=False),
    )
    return [layer] * n


@register("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2")
def _deepseek(reader: ConfigReader) -> list[LayerSpec]:
    # DeepSeek-V2/V3/R1 and Kimi-K2 (DeepseekV3ForCausalLM): every decoder layer is MLA; the cache
    # holds the kv_lora_rank latent plus the shared qk_rope_head_dim key (vLLM MLAAttentionSpec,
    # head_size 576 for 512 + 64; transformers 5 DeepseekV3Attention). num_key_value_heads in these
    # configs is unused by MLA. MTP layers (num_nextn_predict_layers) are not decoder layers.
    return _mla(reader)


# --------------------------------------------------------------------------------------------
# Recurrent families


def _mamba1_state(reader: ConfigReader, *, expand: str, d_conv: str, d_state: str,
                  intermediate: str | None) -> LayerSpec:
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
    return LayerSpec(kind="recurrent", mixer="mamba", conv_dim=inner, conv_kernel=kernel, ssm_state=(inner, state))


@register("mamba", "falcon_mamba")
def _mamba(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_mamba.py: intermediate_size = int(expand * hidden_size); state_size, conv_kernel.
    n = reader.num_layers()
    return [_mamba1_state(reader, expand="expand", d_conv="conv_kernel", d_state="state_size",
                          intermediate="intermediate_size")] * n


@register("mamba2")
def _mamba2(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_mamba2.py / modeling_mamba2.py Mamba2Cache: conv state
    # [intermediate + 2 * n_groups * state_size, conv_kernel], SSM state [num_heads, head_dim,
    # state_size], intermediate = expand * hidden_size = num_heads * head_dim. Note head_dim here is
    # the SSM head, not an attention head.
    n = reader.num_layers()
    hidden = reader.hidden_size()
    assert hidden is not None
    expand = reader.int_field("expand", required=False) or 2
    heads = reader.int_field("num_heads")
    head_dim = reader.int_field("head_dim")
    state = reader.int_field("state_size")
    groups = reader.int_field("n_groups", required=False) or 1
    kernel = reader.int_field("conv_kernel", required=False) or 4
    assert heads is not None and head_dim is not None and state is not None
    inner = expand * hidden
    if heads * head_dim != inner:
        raise ConfigError(f"num_heads={heads} x head_dim={head_dim} != expand={expand} x hidden_size={hidden}")
    if heads % groups:
        raise ConfigError(f"num_heads={heads} is not a multiple of n_groups={groups}")
    layer = LayerSpec(kind="recurrent", mixer="mamba2", conv_dim=inner + 2 * groups * state,
                      conv_kernel=kernel, ssm_state=(heads, head_dim, state))
    return [layer] * n


@register("jamba")
def _jamba(reader: ConfigReader) -> list[LayerSpec]:
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
    mamba = _mamba1_state(reader, expand="mamba_expand", d_conv="mamba_d_conv", d_state="mamba_d_state",
                          intermediate=None)
    window = reader.sliding_window()
    attention = reader.attention("sliding", window=window) if window else reader.attention()
    return [attention if i % period == offset else mamba for i in range(n)]


@register("qwen3_next")
def _qwen3_next(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_qwen3_next.py: layer_types default = linear_attention unless
    # (i + 1) % full_attention_interval == 0 (interval 4 -> 3 gated-delta-net : 1 full).
    # Gated DeltaNet state (modeling_qwen3_next.py Qwen3NextDynamicCache / vLLM GDN spec):
    # conv over q, k and v: 2 * key_heads * key_dim + value_heads * value_dim channels, kernel
    # linear_conv_kernel_dim; recurrent state [value_heads, key_dim, value_dim].
    types = reader.layer_types()
    if types is None:
        interval = reader.int_field("full_attention_interval", required=False, maximum=100_000)
        if interval is None:
            interval = 4
            reader.note("full_attention_interval absent: transformers Qwen3-Next default 4")
        types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(reader.num_layers())]

    def gdn(layer_type: str) -> LayerSpec:
        if layer_type != "linear_attention":
            raise ConfigError(f"layer_types has '{layer_type}', which qwen3_next does not use")
        key_heads = reader.int_field("linear_num_key_heads")
        value_heads = reader.int_field("linear_num_value_heads")
        key_dim = reader.int_field("linear_key_head_dim")
        value_dim = reader.int_field("linear_value_head_dim")
        kernel = reader.int_field("linear_conv_kernel_dim")
        assert key_heads and value_heads and key_dim and value_dim and kernel
        if value_heads % key_heads:
            raise ConfigError(
                f"linear_num_value_heads={value_heads} is not a multiple of linear_num_key_heads={key_heads}")
        return LayerSpec(kind="recurrent", mixer="gated_delta_net",
                         conv_dim=2 * key_heads * key_dim + value_heads * value_dim, conv_kernel=kernel,
                         ssm_state=(value_heads, key_dim, value_dim))

    return reader.layers_from_types(types, recurrent=gdn)


@register("gemma3n_text", "gemma3n")
def _gemma3n(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_gemma3n.py / modeling_gemma3n.py: the last num_kv_shared_layers layers compute
    # no K/V; each reads the cache of the last earlier non-shared layer of its own type (sliding or
    # full), and transformers' cache leaves them out (cache_utils: num_kv_shared_layers). vLLM does
    # the same with kv_sharing_target_layer_name.
    types = reader.layer_types()
    if types is None:
        raise ConfigError("gemma3n config has no layer_types")
    layers = reader.layers_from_types(types)
    shared = reader.int_field("num_kv_shared_layers", required=False, maximum=len(layers)) or 0
    first_shared = len(layers) - shared
    if shared == 0:
        return layers
    out = layers[:first_shared]
    for index in range(first_shared, len(layers)):
        owners = [j for j in range(first_shared) if types[j] == types[index]]
        if not owners:
            raise ConfigError(f"num_kv_shared_layers={shared}: layer {index} ({types[index]}) has no earlier "
                              "layer of its type to share with")
        out.append(LayerSpec(kind="shared", shares_with=owners[-1]))
    reader.note(f"the last {shared} layers reuse earlier layers' KV cache (num_kv_shared_layers)")
    return out


# --------------------------------------------------------------------------------------------
# Gemma 4


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


@register("gemma4_text", "gemma4", defaults=_GEMMA4_DEFAULTS)
def _gemma4(reader: ConfigReader) -> list[LayerSpec]:
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

    def attention(index: int, layer_type: str) -> LayerSpec:
        if layer_type == "sliding_attention":
            layer_kv, layer_dim = kv, head_dim
        else:
            layer_kv, layer_dim = global_kv, global_head_dim
        if index in overrides:
            layer_kv = overrides[index].get("num_key_value_heads", layer_kv)
            layer_dim = overrides[index].get("head_dim", layer_dim)
            if heads % layer_kv:
                raise ConfigError(f"per_layer_config[{index}]: num_attention_heads={heads} is not a multiple "
                                  f"of num_key_value_heads={layer_kv}")
        if layer_type == "sliding_attention":
            return LayerSpec(kind="sliding", kv_heads=layer_kv, head_dim=layer_dim, window=window)
        return LayerSpec(kind="full", kv_heads=layer_kv, head_dim=layer_dim)

    layers = [attention(i, t) for i, t in enumerate(types)]

    found = reader.raw("num_kv_shared_layers")
    shared = reader.int_of("num_kv_shared_layers", found[1], minimum=0, maximum=n) if found else 0
    if shared == 0:
        return layers
    first_shared = n - shared
    out = layers[:first_shared]
    for index in range(first_shared, n):
        owners = [j for j in range(first_shared) if types[j] == types[index]]
        if not owners:
            raise ConfigError(f"num_kv_shared_layers={shared}: layer {index} ({types[index]}) has no earlier "
                              "non-shared layer of its type to share with")
        out.append(LayerSpec(kind="shared", shares_with=owners[-1]))
    reader.note(f"the last {shared} layers reuse earlier layers' KV cache (num_kv_shared_layers)")
    return out


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
        raise ConfigError(f"per_layer_config={_short_list(per_layer)} is not an object keyed by layer index")
    out: dict[int, dict[str, int]] = {}
    for key, entry in per_layer.items():
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise ConfigError(f"per_layer_config key {key!r} is not a layer index") from None
        if not 0 <= index < n:
            raise ConfigError(f"per_layer_config key {key!r} is outside layers 0..{n - 1}")
        if not isinstance(entry, dict):
            raise ConfigError(f"per_layer_config[{key!r}]={_short_list(entry)} is not an object")
        out[index] = {name: reader.int_of(f"per_layer_config[{key!r}].{name}", entry[name])
                      for name in ("head_dim", "num_key_value_heads") if entry.get(name) is not None}
    reader.note("per_layer_config present: per-layer head_dim / num_key_value_heads read from it "
                "(global_head_dim and num_global_key_value_heads are not consulted)")
    return out
