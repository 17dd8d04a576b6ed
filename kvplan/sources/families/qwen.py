"""Qwen2, Qwen3 and their MoE variants (Qwen3-Next has its own module).

Layers: ``sliding_window`` counts only when ``use_sliding_window`` is true (the config classes set
``sliding_window = None`` otherwise; ``use_sliding_window`` defaults False); which layers slide
differs per version (below). Parameters: the llama-like rule with Qwen's biases and norms.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.llama import LlamaStyle, styled
from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.spec import LayerSpec


def qwen_window(reader: ConfigReader) -> int | None:
    # Qwen2/Qwen3/Qwen2-MoE/Qwen3-MoE configs: sliding_window counts only when use_sliding_window is
    # true (the config classes set sliding_window = None otherwise; use_sliding_window defaults False).
    if not reader.bool_field("use_sliding_window", False):
        return None
    window = reader.sliding_window()
    if window is None:
        raise ConfigError("use_sliding_window=true but sliding_window is missing")
    return window


def qwen2_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_qwen2.py / configuration_qwen3.py: layer_types default = sliding for layer
    # index >= max_window_layers when the window is on, full otherwise.
    types = reader.layer_types()
    window = qwen_window(reader)
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
    sliding = reader.attention(window=window)
    return [sliding if i >= max_window_layers else full for i in range(n)]


def qwen2_moe_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_qwen2_moe.py (transformers 5): layer_types default = sliding when
    # (i + 1) % 2 and i < max_window_layers and use_sliding_window. Every released Qwen2-MoE config
    # has use_sliding_window=false, so this only matters for custom configs.
    types = reader.layer_types()
    window = qwen_window(reader)
    if types is not None:
        return reader.layers_from_types(types)
    n = reader.num_layers()
    full = reader.attention()
    if window is None:
        return [full] * n
    max_window_layers = reader.int_field("max_window_layers", required=False, maximum=100_000) or 28
    sliding = reader.attention(window=window)
    return [sliding if (i + 1) % 2 and i < max_window_layers else full for i in range(n)]


def qwen3_moe_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_qwen3_moe.py: no layer_types; sliding_window (when use_sliding_window) then
    # reaches every layer through DynamicCache's uniform rule.
    types = reader.layer_types()
    if types is not None:
        return reader.layers_from_types(types)
    n = reader.num_layers()
    window = qwen_window(reader)
    if window is None:
        return [reader.attention()] * n
    return [reader.attention(window=window)] * n


# modeling_qwen2.py Qwen2Attention: q/k/v always biased, o_proj never.
_QWEN2 = LlamaStyle(qkv_bias=True, o_bias=False)
# modeling_qwen3.py: attention_bias, q_norm / k_norm of head_dim.
_QWEN3 = LlamaStyle(qk_norm="head")

register("qwen2", layers=qwen2_layers, params=styled(_QWEN2))
# Qwen2-VL / Qwen2.5-VL text models: Qwen2's decoder (modeling_qwen2_vl.py / modeling_qwen2_5_vl.py).
register("qwen2_vl_text", "qwen2_5_vl_text", layers=qwen2_layers, params=styled(_QWEN2))
# Their configs as first published (before transformers split out text_config): the text model's fields
# at the top level beside vision_config, the same Qwen2 decoder.
register("qwen2_vl", "qwen2_5_vl", layers=qwen2_layers, params=styled(_QWEN2))
register("qwen3", layers=qwen2_layers, params=styled(_QWEN3))
register("qwen2_moe", layers=qwen2_moe_layers,
         params=styled(LlamaStyle(qkv_bias=True, o_bias=False, moe="qwen", shared_expert_gate=True)))
# Qwen3-Coder configs spell the q/k/v bias qkv_bias; use_qk_norm false drops q_norm / k_norm.
register("qwen3_moe", layers=qwen3_moe_layers,
         params=styled(LlamaStyle(qkv_bias_field="qkv_bias", qk_norm="head_unless_off", moe="qwen")))
# Qwen3-VL / Qwen3-VL-MoE: the text model under text_config is Qwen3's / Qwen3-MoE's decoder (vLLM qwen3_vl.py
# Qwen3LLMModel, qwen3_vl_moe.py Qwen3MoeLLMModel); the vision tower is not counted (kvplan/sources/vision_towers.py)
register("qwen3_vl", "qwen3_vl_text", layers=qwen2_layers, params=styled(_QWEN3))
register("qwen3_vl_moe", "qwen3_vl_moe_text", layers=qwen3_moe_layers,
         params=styled(LlamaStyle(qkv_bias_field="qkv_bias", qk_norm="head_unless_off", moe="qwen")))
