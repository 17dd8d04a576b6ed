"""The configs added for issue 21's left-out vLLM logs: read as transformers reads them, sized as the logs show.

Ground truth:
- tests/data/hf_oracle_issue21.json: what transformers 5.24.0 itself computed for each config (model built on
  the meta device in bf16: its parameters, its DynamicCache layer classes, the bytes of every cached key/value
  tensor after a forward pass over L tokens). Kimi-VL: its text_config read as DeepseekV3Config.
- the vLLM 0.19.0 start-up logs of llm-d-planner (tests/data/engine_logs_found.yaml): "Available KV cache
  memory: X GiB" (two decimals) and "GPU KV cache size: N tokens", so N x bytes per token must give X.
Provenance of the configs: tests/data/hf_configs/SOURCES.yaml.
"""

from __future__ import annotations

import json

import pytest

import kvplan
from kvplan.dtypes import resolve_kv_dtype
from kvplan.engines import EngineOptions, get_engine, parse_version
from kvplan.errors import ConfigError
from kvplan.sources.hf_config import read_config_file, spec_from_config
from kvplan.sources.hf_params import count_params
from conftest import DATA, log_cases

ORACLE = json.loads((DATA / "hf_oracle_issue21.json").read_text())["models"]
GIB = 1 << 30
# transformers' cache layer classes -> the kind kvplan gives the layer
_HF_KIND = {"DynamicLayer": {"full", "mla"}, "DynamicSlidingWindowLayer": {"sliding"}}


def config_of(name: str) -> dict:
    return read_config_file(DATA / ORACLE[name]["config"].split(" ")[0])


def spec_of(name: str):
    return spec_from_config(config_of(name), model_id=name.replace("__", "/"))


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_cache_bytes_are_transformers_own(name: str):
    spec = spec_of(name)
    for length, expected in ORACLE[name]["hf_cache_bytes"].items():
        got = kvplan.estimate(spec, contexts=[int(length)], kv_dtypes=["bf16"], engine="hf").rows[0].kv_bytes
        assert got == expected, (name, length)


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_layer_kinds_are_transformers_cache_layers(name: str):
    kinds = [layer.kind for layer in spec_of(name).expanded_layers()]
    classes = ORACLE[name]["cache_layer_classes"]
    assert len(kinds) == len(classes)
    assert all(kind in _HF_KIND[cls] for kind, cls in zip(kinds, classes)), name


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_parameter_count_is_transformers_own(name: str):
    count = count_params(config_of(name))
    expected = ORACLE[name]["params"]
    if name == "moonshotai__Kimi-VL-A3B-Instruct":
        # the text model only (the MoonViT config gives no image size: its tower is not counted, and says so);
        # plus the 26 MoE layers' e_score_correction_bias (64 experts), a buffer to transformers, a stored tensor
        assert count.total - count.by_component["vision"] == expected + 26 * 64
        assert any("vision tower not counted" in a for a in count.assumptions)
    else:
        assert count.total == expected
    assert not any("no parameter rule of its own" in a for a in count.assumptions)


def test_phi_is_a_known_multi_head_family():
    spec = spec_of("microsoft__phi-2")
    assert spec.model_type == "phi"
    assert not any("not one kvplan knows" in a or "num_key_value_heads" in a for a in spec.assumptions)
    assert {(layer.kv_heads, layer.head_dim) for layer in spec.expanded_layers()} == {(32, 80)}
    config = config_of("microsoft__phi-2")
    config["qk_layernorm"] = True  # modeling_phi.py: q/k LayerNorms over head_dim, weight and bias
    assert count_params(config).total == ORACLE["microsoft__phi-2"]["params"] + 32 * 2 * 2 * 80


def test_kimi_vl_is_read_as_its_deepseek_v3_text_model():
    spec = spec_of("moonshotai__Kimi-VL-A3B-Instruct")
    assert spec.model_type == "kimi_vl"
    assert spec.layer_kind_counts() == {"mla": 27}
    assert not any("not one kvplan knows" in a for a in spec.assumptions)
    assert (spec.num_experts, spec.experts_per_token) == (64, 6)


def test_qwen2_vl_as_first_published_is_its_qwen2_text_model():
    # Qwen2-VL-7B's language model is Qwen2-7B's decoder (28 layers, 4 KV heads x 128, hidden 3584, MLP 18944,
    # vocabulary 152,064, q/k/v biases), its fields at the top level beside vision_config in the first
    # published configs. Built here from Qwen2.5-7B's config (the same decoder; its count is pinned exactly
    # in test_hf_params) with the vision_config keys Qwen2-VL's config class reads.
    config = read_config_file(DATA / "hf_configs" / "Qwen__Qwen2.5-7B.json")
    config.update(model_type="qwen2_vl", architectures=["Qwen2VLForConditionalGeneration"],
                  vision_config={"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "mlp_ratio": 4,
                                 "num_heads": 16, "patch_size": 14, "spatial_merge_size": 2})
    spec = spec_from_config(config, model_id="m")
    assert spec.layer_kind_counts() == {"full": 28}
    assert {(layer.kv_heads, layer.head_dim) for layer in spec.expanded_layers()} == {(4, 128)}
    assert not any("not one kvplan knows" in a for a in spec.assumptions)
    count = count_params(config)
    assert count.total == count_params(read_config_file(DATA / "hf_configs" / "Qwen__Qwen2.5-7B.json")).total
    assert any("vision tower not counted" in a for a in count.assumptions)  # said, not silently left out


# --------------------------------------------------------------------------------------------
# The logs: N tokens x kvplan's bytes per token = the logged available KV memory (two decimals)

LOGS = {
    "llmd-planner-v0190-google-gemma-2-2b-it-h100-80gb-tp1pp1dp1-8192": "hf_configs_transcribed/google__gemma-2-2b.json",
    "llmd-planner-v0190-google-gemma-7b-h100-80gb-tp1pp1dp1-8192": "hf_configs_transcribed/google__gemma-7b.json",
    "llmd-planner-v0190-granite-3-1-2b-h100-80gb-tp1pp1dp1-8192":
        "hf_configs_transcribed/ibm-granite__granite-3.3-2b-instruct.json",
    "llmd-planner-v0190-granite-3-1-8b-h100-80gb-tp1pp1dp1-8192": "hf_configs/ibm-granite__granite-3.3-8b-instruct.json",
    "llmd-planner-v0190-ibm-granite-granite-3-3-h100-80gb-tp1pp1dp1-8192":
        "hf_configs/ibm-granite__granite-3.3-8b-instruct.json",
    "llmd-planner-v0190-microsoft-phi-2-h100-80gb-tp1pp1dp1-2048": "hf_configs/microsoft__phi-2.json",
    "llmd-planner-v0190-moonshotai-kimi-vl-a3b-i-h100-80gb-tp1pp1dp1-8192":
        "hf_configs/moonshotai__Kimi-VL-A3B-Instruct.json",
    "llmd-planner-v0190-moonshotai-kimi-vl-a3b-i-h100-80gb-tp2pp1dp1-8192":
        "hf_configs/moonshotai__Kimi-VL-A3B-Instruct.json",
}


def _log_cases() -> dict[str, dict]:
    cases = log_cases("engine_logs_found.yaml")
    return {c["id"]: c for c in cases if c["id"] in LOGS}


@pytest.mark.parametrize("case_id", sorted(LOGS))
def test_logged_kv_tokens_match_the_bytes_per_token(case_id: str):
    case = _log_cases()[case_id]
    assert case["kvplan_model"] == f"tests/data/{LOGS[case_id]}"  # the crossval reads the same config
    spec = spec_from_config(read_config_file(DATA / LOGS[case_id]), model_id=case_id)
    tp = case["tensor_parallel_size"]
    # kv_cache_dtype auto: the dtype the log ran (gemma-2-2b's config says float32; vLLM ran bfloat16)
    assert case["kv_cache_dtype"] == "auto"
    layout = get_engine("vllm").layout(spec, resolve_kv_dtype(case["dtype"], spec.dtype), parse_version("0.19"),
                                       EngineOptions(tp=tp))
    per_token = sum(g.count * g.token.bytes for g in layout.groups if not g.padding)
    logged = case["reported"]
    assert abs(logged["kv_cache_tokens"] * per_token - logged["available_kv_gib"] * GIB) <= 0.005 * GIB + per_token


# --------------------------------------------------------------------------------------------
# Llama 3.2 Vision: refused, naming why


def test_mllama_is_refused_with_its_cross_attention_cache():
    # Llama-3.2-11B-Vision's text_config shape (cross_attention_layers every 5th from 3: 8 of 40 layers)
    config = {"model_type": "mllama", "text_config": {
        "model_type": "mllama_text_model", "num_hidden_layers": 40, "num_attention_heads": 32,
        "num_key_value_heads": 8, "hidden_size": 4096, "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38]}}
    with pytest.raises(ConfigError, match=r"cross-attention layers \(8 of 40 layers\).*once per request"):
        spec_from_config(config, model_id="m")
