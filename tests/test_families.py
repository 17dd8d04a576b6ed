"""One family registry for config.json (kvplan.sources.families): the layers and the parameter count of
a model come from the same family module and the same reader, so they cannot disagree.

Golden numbers come from the published counts pinned in tests/test_hf_params.py and the configs in
tests/data (provenance in tests/data/hf_configs/SOURCES.yaml); the defaults from transformers' config
classes, cited where used.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import ConfigError
from kvplan.sources import families, hf_families
from kvplan.sources.families.gemma4 import gemma4_geometry
from kvplan.sources.families.llama import generic_layers
from kvplan.sources.families.registry import register
from kvplan.sources.hf_config import read_config_file, spec_and_count, spec_from_config
from kvplan.sources.hf_params import count_params
from conftest import DATA

ALL = sorted([*DATA.glob("hf_configs/*.json"), *DATA.glob("hf_configs_transcribed/*.json")])
QWEN3_NEXT = DATA / "hf_configs" / "Qwen__Qwen3-Next-80B-A3B-Thinking.json"
GEMMA3_4B = DATA / "hf_configs_transcribed" / "google__gemma-3-4b-it.json"
_K_PROJ = re.compile(r"layers\.(\d+)\.self_attn\.k_proj$")


def load(path: Path) -> dict:
    return read_config_file(path)


def test_one_lookup_table():
    assert hf_families.known_model_types() == families.known_model_types()
    for model_type in ("llama", "qwen3_next", "gemma4", "gemma4_text", "deepseek_v3", "gpt2", "mamba2"):
        assert families.family_for({"model_type": model_type}).name == model_type
    assert families.family_for({"model_type": "something_new"}) is families.GENERIC
    # the text model's type wins over the wrapper's
    assert families.family_for({"model_type": "llava", "text_config": {"model_type": "qwen2"}}).name == "qwen2"


def test_a_model_type_is_registered_once():
    with pytest.raises(RuntimeError, match="registered twice"):
        register("llama", layers=generic_layers)


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_one_reading_gives_both(path: Path):
    config = load(path)
    spec, count, error = spec_and_count(config, model_id="m", source="s")
    assert error is None
    assert spec == spec_from_config(config, model_id="m", source="s")
    assert count == count_params(config)


def _k_proj_widths(config: dict) -> dict[int, int]:
    counter, _ = families.count(config)
    return {int(m[1]): t.shape[0] for t in counter.tensors if (m := _K_PROJ.search(t.module))}


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_count_and_cache_agree_on_every_attention_layer(path: Path):
    # Each k_proj the count lists has exactly kv_heads x head_dim outputs of the layer the cache holds.
    config = load(path)
    layers = list(spec_from_config(config, model_id="m").expanded_layers())
    widths = _k_proj_widths(config)
    for index, width in widths.items():
        if index < len(layers) and layers[index].kind in ("full", "sliding", "chunked"):
            layer = layers[index]
            assert layer.kv_heads is not None and layer.head_dim is not None
            assert width == layer.kv_heads * layer.head_dim, index


def test_the_agreement_check_covers_most_configs():
    checked = [p.stem for p in ALL if _k_proj_widths(load(p))]
    assert len(checked) >= 40, checked


@pytest.mark.parametrize("name", ["google__gemma-4-E2B-it", "google__gemma-4-E4B-it", "google__gemma-4-31B-it"])
def test_gemma4_geometry_is_read_once_for_both(name: str):
    # kv-shared layers cache nothing, yet their checkpoint k_proj has the geometry's shape too.
    config = load(DATA / "hf_configs" / f"{name}.json")
    reader, _ = families.open_config(config)
    geometry = gemma4_geometry(reader)
    widths = _k_proj_widths(config)
    assert len(widths) == len(geometry.types)
    assert all(widths[i] == kv * hd for i, (kv, hd) in enumerate(zip(geometry.kv_heads, geometry.head_dims)))


# --------------------------------------------------------------------------------------------
# Qwen3-Next: the two readers used to disagree


def test_qwen3_next_conv_kernel_defaults_as_transformers_in_both():
    # transformers Qwen3NextConfig: linear_conv_kernel_dim=4 (configuration_qwen3_next.py)
    config = load(QWEN3_NEXT)
    del config["linear_conv_kernel_dim"]
    spec = spec_from_config(config, model_id="m")
    recurrent = [g for g in spec.layers if g.kind == "recurrent"]
    assert recurrent and all(g.conv_kernel == 4 for g in recurrent)
    assert "linear_conv_kernel_dim absent: transformers Qwen3NextConfig default 4" in spec.assumptions
    count = count_params(config)
    assert count.total == count_params(load(QWEN3_NEXT)).total == 81_324_862_720  # HFAPI-B, test_hf_params


@pytest.mark.parametrize("length", [47, 49])
def test_qwen3_next_wrong_length_layer_types_is_an_error_in_both(length: int):
    config = load(QWEN3_NEXT)
    config["layer_types"] = ["linear_attention"] * (length - 1) + ["full_attention"]
    for read in (lambda: spec_from_config(config, model_id="m"), lambda: count_params(config)):
        with pytest.raises(ConfigError, match=f"layer_types has {length} entries but num_hidden_layers=48"):
            read()


def test_qwen3_next_count_follows_the_layer_types_the_cache_reads():
    config = load(QWEN3_NEXT)
    per_linear_layer = count_params(config).by_component["ssm"] // 36  # 48 layers, every 4th full
    config["layer_types"] = ["linear_attention" if i % 2 else "full_attention" for i in range(48)]
    spec = spec_from_config(config, model_id="m")
    assert spec.layer_kind_counts() == {"full": 24, "recurrent": 24}
    assert count_params(config).by_component["ssm"] == 24 * per_linear_layer


# --------------------------------------------------------------------------------------------
# Defaults and the generic fallback


def test_gemma3_config_class_defaults_reach_the_count():
    # transformers Gemma3TextConfig: num_attention_heads=8, num_key_value_heads=4, head_dim=256. A config
    # leaving them out used to be refused by the count while the cache used the defaults.
    config = load(GEMMA3_4B)
    for name in ("num_attention_heads", "num_key_value_heads", "head_dim"):
        del config["text_config"][name]
    spec, count, error = spec_and_count(config, model_id="m")
    assert error is None and count is not None
    assert count.total == count_params(load(GEMMA3_4B)).total
    assert "num_attention_heads absent: transformers Gemma3TextConfig default 8" in spec.assumptions


def test_unknown_model_type_says_so_on_both_sides():
    config = {"model_type": "something_new", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100}
    spec, count, _ = spec_and_count(config, model_id="m")
    assert "model_type 'something_new' is not one kvplan knows; read with the generic rules" in spec.assumptions
    assert count is not None and any("llama-like rule" in a for a in count.assumptions)
    assert spec.layers[0].kv_heads * spec.layers[0].head_dim == _k_proj_widths(config)[0] == 2 * 16


def test_an_assumption_is_said_once_on_the_side_that_made_it():
    # The layer rule reads the DeltaNet kernel, so its default is the spec's; the count, reading the
    # same field through the same reader, does not repeat it.
    config = load(QWEN3_NEXT)
    del config["linear_conv_kernel_dim"]
    spec, count, _ = spec_and_count(config, model_id="m")
    assert count is not None
    note = "linear_conv_kernel_dim absent: transformers Qwen3NextConfig default 4"
    assert note in spec.assumptions and note not in count.assumptions
    assert note not in count_params(config).assumptions


# --------------------------------------------------------------------------------------------
# Invariant over generated configs: the cache and the count read the same geometry.

_ATTENTION_TYPES = ["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
                    "phi3", "cohere", "cohere2", "olmo2", "granite", "gpt_oss", "something_new"]


@st.composite
def attention_configs(draw: st.DrawFn) -> dict:
    kv = draw(st.integers(1, 4))
    config: dict = {
        "model_type": draw(st.sampled_from(_ATTENTION_TYPES)),
        "num_hidden_layers": draw(st.integers(1, 8)),
        "num_attention_heads": kv * draw(st.integers(1, 4)),
        "hidden_size": 8 * draw(st.integers(1, 16)),
        "intermediate_size": draw(st.integers(1, 64)),
        "vocab_size": draw(st.integers(1, 100)),
        "num_local_experts": 2, "num_experts_per_tok": 1,  # gpt_oss needs experts; others ignore them
    }
    if draw(st.booleans()):
        config["num_key_value_heads"] = kv
    if draw(st.booleans()):
        config["head_dim"] = draw(st.integers(1, 64))
    if draw(st.booleans()):
        config["sliding_window"] = draw(st.integers(1, 4096))
    if config["model_type"] != "gpt_oss":
        del config["num_local_experts"], config["num_experts_per_tok"]
    return config


@settings(max_examples=150, deadline=None)
@given(attention_configs())
def test_generated_configs_read_the_same_geometry_for_cache_and_count(config: dict):
    try:
        spec = spec_from_config(config, model_id="m")
    except ConfigError:
        with pytest.raises(ConfigError):  # what the cache cannot read, the count cannot either
            count_params(config)
        return
    layers = list(spec.expanded_layers())
    widths = _k_proj_widths(config)
    assert sorted(widths) == list(range(len(layers)))
    for index, layer in enumerate(layers):
        assert layer.kv_heads is not None and layer.head_dim is not None
        assert widths[index] == layer.kv_heads * layer.head_dim


@pytest.mark.parametrize("where, field, value", [
    ("top", "num_nextn_predict_layers", 10**9),  # DeepSeek-style MTP layers: a loop per layer
    ("vision_config", "num_hidden_layers", 10**9),  # Gemma 4 tower layers: a loop per layer
    ("audio_config", "num_hidden_layers", 10**9),
    ("top", "intermediate_size", 10**40),
])
def test_hostile_sizes_are_refused_not_looped_over(where: str, field: str, value: int):
    name = "deepseek-ai__DeepSeek-V3" if field == "num_nextn_predict_layers" else "google__gemma-4-E2B-it"
    config = load(DATA / "hf_configs" / f"{name}.json")
    target = config if where == "top" else config[where]
    if where == "top" and "text_config" in config:
        target = config["text_config"]
    target[field] = value
    with pytest.raises(ConfigError, match=field):
        count_params(config)
