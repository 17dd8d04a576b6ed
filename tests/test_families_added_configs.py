"""The configs added for issue 21's "cannot load" logs, read as transformers reads them.

Qwen3.5 / Qwen3.6 (model_type qwen3_5 / qwen3_5_moe): Qwen3-Next's hybrid Gated DeltaNet decoder, dense or MoE, under
a vision tower.
EmbeddingGemma-300m: a gemma3_text encoder (bidirectional attention, the same cache layers as Gemma 3).

Ground truth: tests/data/hf_oracle_configs.json, what transformers 5.24.0 itself built from each config on the
meta device (tools/transformers_oracle_configs.py): its parameter count (no MTP layers: transformers builds
none), its DynamicCache layer classes and its DeltaNet state sizes; and the SGLang start-up log of Qwen3.5-9B
in tests/data/engine_logs_issue21f.yaml. Provenance of the configs: tests/data/hf_configs/SOURCES.yaml.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from conftest import DATA

from kvplan.errors import ConfigError
from kvplan.sources.hf_config import read_config_file, spec_from_config
from kvplan.sources.hf_params import count_params
from kvplan.spec import FullAttention, Recurrent

ORACLE = json.loads((DATA / "hf_oracle_configs.json").read_text())["models"]
QWEN3_5 = sorted(name for name in ORACLE if name.startswith(("Qwen__Qwen3.5-", "Qwen__Qwen3.6-")))
GIB = 1 << 30


def config_of(name: str) -> dict:
    return read_config_file(DATA / ORACLE[name]["config"])


@pytest.mark.parametrize("name", QWEN3_5)
def test_parameters_are_transformers_own_plus_the_mtp_layer(name: str):
    count = count_params(config_of(name))
    assert count.total - count.by_component["mtp"] == ORACLE[name]["params"]
    assert count.by_component["mtp"] > 0 and count.by_component["vision"] > 0
    assert (count.by_component["experts"] > 0) == ("moe" in config_of(name)["model_type"])
    assert not any("not counted" in a or "no parameter rule" in a for a in count.assumptions)


@pytest.mark.parametrize("name", QWEN3_5)
def test_layers_are_transformers_cache_layers_and_states(name: str):
    spec = spec_from_config(config_of(name), model_id=name)
    kind = {"LinearAttentionLayer": Recurrent, "DynamicLayer": FullAttention}
    layers = list(spec.expanded_layers())
    classes = ORACLE[name]["cache_layer_classes"]
    assert len(layers) == len(classes)
    assert all(isinstance(layer, kind[cls]) for layer, cls in zip(layers, classes))
    state = ORACLE[name]["linear_attention_state"]
    for layer in layers:
        if isinstance(layer, Recurrent):
            assert layer.mixer == "gated_delta_net"
            assert [layer.conv_dim, layer.conv_kernel] == state["conv_state"]
            assert list(layer.ssm_state) == state["recurrent_state"]
    assert spec.model_type.startswith("qwen3_5") and not any("not one kvplan knows" in a for a in spec.assumptions)


def test_mtp_layers_are_read_from_mtp_num_hidden_layers():
    config = config_of("Qwen__Qwen3.5-9B")
    assert spec_from_config(config, model_id="m").mtp_layers == 1
    config["text_config"]["mtp_num_hidden_layers"] = 0
    assert spec_from_config(config, model_id="m").mtp_layers == 0
    assert count_params(config).by_component["mtp"] == 0


def test_a_vision_config_without_a_size_is_refused_naming_it():
    config = copy.deepcopy(config_of("Qwen__Qwen3.5-9B"))
    del config["vision_config"]["out_hidden_size"]
    with pytest.raises(ConfigError, match="out_hidden_size"):
        count_params(config)


def test_the_sglang_log_gives_the_configs_bytes_per_token():
    # "KV Cache is allocated. #tokens: 327310, K size: 2.50 GB" at TP 2: 8 full-attention layers x (4 / 2) KV heads
    # x 256 x 2 B of K per token
    cases = yaml.safe_load((DATA / "engine_logs_issue21f.yaml").read_text())["cases"]
    case = next(c for c in cases if c["id"] == "sglang-qwen35-9b-hybrid-tp2-2x4090-mfs080")
    assert case["kvplan_model"] == "tests/data/" + ORACLE["Qwen__Qwen3.5-9B"]["config"]
    spec = spec_from_config(config_of("Qwen__Qwen3.5-9B"), model_id="m")
    tp = case["tensor_parallel_size"]
    k_per_token = sum(layer.kv_heads // tp * layer.head_dim * 2 for layer in spec.expanded_layers()
                      if isinstance(layer, FullAttention))
    logged = case["reported"]
    assert abs(logged["kv_cache_tokens"] * k_per_token - logged["k_size_gib"] * GIB) <= 0.005 * GIB


def test_embeddinggemma_is_gemma3_text_as_transformers_builds_it():
    name = "google__embeddinggemma-300m"
    config = config_of(name)
    count = count_params(config)
    assert count.total == ORACLE[name]["params"]  # Gemma3TextModel: tied embeddings, no lm_head of its own
    spec = spec_from_config(config, model_id=name)
    kind = {"DynamicSlidingWindowLayer": "sliding", "DynamicLayer": "full"}
    assert [layer.kind for layer in spec.expanded_layers()] == [kind[c] for c in ORACLE[name]["cache_layer_classes"]]
    assert {(layer.kv_heads, layer.head_dim) for layer in spec.expanded_layers()} == {(1, 256)}
    assert not any("not one kvplan knows" in a for a in spec.assumptions)


# --------------------------------------------------------------------------------------------
# Grok-2: model_type "git", read by the grok family (transformers has no Grok model: the log is the check)

GROK2 = DATA / "hf_configs_transcribed" / "xai-org__grok-2.json"


def _sglang_case(case_id: str) -> dict:
    cases = yaml.safe_load((DATA / "engine_logs_issue21f.yaml").read_text())["cases"]
    return next(c for c in cases if c["id"] == case_id)


def test_grok2_matches_its_sglang_log():
    case = _sglang_case("sglang-grok2-fp8-8xh100-tp8-v052rc2")
    assert case["kvplan_model"] == "tests/data/hf_configs_transcribed/xai-org__grok-2.json"
    config = read_config_file(GROK2)
    spec = spec_from_config(config, model_id="xai-org/grok-2")
    assert spec.layer_kind_counts() == {"full": 64} and (spec.num_experts, spec.experts_per_token) == (8, 2)
    assert not any("not one kvplan knows" in a for a in spec.assumptions)
    # "KV Cache is allocated. #tokens: 903439, K size: 13.79 GB" at TP 8: 64 layers x (8 / 8) KV head x 128 x 2 B
    tp = case["tensor_parallel_size"]
    k_per_token = sum(layer.kv_heads // tp * layer.head_dim * 2 for layer in spec.expanded_layers())
    logged = case["reported"]
    assert abs(logged["kv_cache_tokens"] * k_per_token - logged["k_size_gib"] * GIB) <= 0.005 * GIB
    # "#parameters (actual): 269.56 B" (SGLang's count of the loaded model)
    assert abs(count_params(config).total / 1e9 - logged["params_actual_b"]) < 0.001 * logged["params_actual_b"]


@pytest.mark.parametrize(("change", "field"), [
    ({"architectures": ["GitForCausalLM"]}, "architectures"),  # Microsoft's GIT shares the model_type
    ({"sliding_window_size": 8192}, "sliding_window_size"),
])
def test_grok_refuses_what_it_has_no_rule_for(change: dict, field: str):
    config = dict(read_config_file(GROK2), **change)
    with pytest.raises(ConfigError, match=field):
        spec_from_config(config, model_id="m")


def test_qwen3_omni_is_refused_naming_its_nested_thinker():
    # Qwen3-Omni-30B-A3B's shape: the decoder only under thinker_config.text_config
    config = {"model_type": "qwen3_omni_moe", "thinker_config": {"model_type": "qwen3_omni_moe_thinker", "text_config": {
        "model_type": "qwen3_omni_moe_text", "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 152064}}}
    with pytest.raises(ConfigError, match="thinker_config.text_config"):
        spec_from_config(config, model_id="m")
