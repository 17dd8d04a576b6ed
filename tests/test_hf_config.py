"""kvplan.sources.hf_config: Hugging Face config.json -> ModelSpec.

Ground truth: tests/data/cache_oracle_dev.json (what transformers 5.23 and vLLM 0.33 computed for the
configs in tests/data/hf_configs). Families without a real config there are covered by hand-written
configs below that mirror a named public model's config.json (cache-relevant fields kept verbatim).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.errors import ConfigError, KvplanError
from kvplan.sources.hf_config import read_config_file, spec_from_config
from kvplan.spec import ModelSpec
from conftest import DATA

CONFIG_DIR = DATA / "hf_configs"
ORACLE = json.loads((DATA / "cache_oracle_dev.json").read_text())["models"]
# hf_configs_transcribed/: further real configs, transcribed from public pages (see its sources).
ALL_CONFIGS = sorted(CONFIG_DIR.glob("*.json")) + sorted((DATA / "hf_configs_transcribed").glob("*.json"))


def load(name: str) -> dict:
    return json.loads((CONFIG_DIR / f"{name}.json").read_text())


def spec_of(name: str) -> ModelSpec:
    return spec_from_config(load(name), model_id=name, source=f"tests/data/hf_configs/{name}.json")


def kinds(spec: ModelSpec) -> list[str]:
    return [layer.kind for layer in spec.expanded_layers()]


def rle(items: list[str]) -> str:
    out: list[list] = []
    for item in items:
        if out and out[-1][0] == item:
            out[-1][1] += 1
        else:
            out.append([item, 1])
    return " ".join(f"{k}x{n}" for k, n in out)


# The oracle's vocabulary for what a layer caches (MLA appears as 'full' there).
_ORACLE_KIND = {"full": "full", "sliding": "sliding", "chunked": "chunked", "mla": "full",
                "recurrent": "recurrent_state"}


def _raw_layer_count(config: dict) -> int:
    text = config.get("text_config") or config
    for name in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        if text.get(name) is not None:
            return text[name]
    raise AssertionError("config without a layer count")


# --------------------------------------------------------------------------------------------
# Every real config


def test_there_are_real_configs():
    assert len(ALL_CONFIGS) >= 24
    assert set(ORACLE) <= {p.stem for p in ALL_CONFIGS}


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_real_config_parses(path: Path):
    config = read_config_file(path)
    spec = spec_from_config(config, model_id=path.stem, source=str(path))
    assert spec.id == path.stem
    assert spec.source == str(path)
    assert spec.model_type == config["model_type"]
    assert spec.num_layers == _raw_layer_count(config)
    assert spec.dtype in ("bfloat16", "float16", "float32")
    # Run-length encoded: no two neighbouring groups are the same layer.
    for a, b in zip(spec.layers, spec.layers[1:], strict=False):
        assert replace(a, count=1) != replace(b, count=1)
    assert all(isinstance(a, str) and "\n" not in a for a in spec.assumptions)
    # Nothing known is reported as unknown.
    assert not any("is not one kvplan knows" in a for a in spec.assumptions)


# --------------------------------------------------------------------------------------------
# The oracle: what transformers 5.23 and vLLM 0.33 computed


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_layer_kinds_match_oracle(name: str):
    spec = spec_of(name)
    oracle = ORACLE[name]
    assert spec.num_layers == oracle["layers"]
    assert spec.model_type == oracle["model_type"]
    assert rle([_ORACLE_KIND[k] for k in kinds(spec)]) == oracle["attention_kind_summary"]


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_attention_shapes_match_oracle(name: str):
    spec = spec_of(name)
    oracle = ORACLE[name]
    attention = [g for g in spec.layers if g.kind in ("full", "sliding", "chunked")]
    mla = [g for g in spec.layers if g.kind == "mla"]
    if oracle["vllm_use_mla"]:
        assert not attention and mla
        assert oracle["kv_heads"] == 1
        for group in mla:
            assert group.kv_lora_rank == oracle["head_dim"]["k"]
            assert group.qk_rope_head_dim == oracle["head_dim"]["v"]
            assert group.kv_lora_rank + group.qk_rope_head_dim == oracle["vllm_head_size"]
        return
    assert not mla
    if oracle["kv_heads"] is None:
        assert not attention
        return
    assert {g.kv_heads for g in attention} == {oracle["kv_heads"]}
    assert {g.head_dim for g in attention} == {oracle["head_dim"]}
    assert {g.v_dim for g in attention} == {oracle["head_dim"]}
    spans = {g.window for g in attention if g.kind == "sliding"} | {g.chunk for g in attention if g.kind == "chunked"}
    assert spans == ({oracle["window"]} if oracle["window"] is not None else set())


def _vllm_kind_counts(oracle: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key, n in oracle["vllm_layer_spec_summary"].items():
        kind = key.split(":")[0]
        counts[kind] = counts.get(kind, 0) + n
    return counts


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_layer_kind_counts_match_vllm(name: str):
    spec = spec_of(name)
    expected = {("recurrent" if k == "mamba" else k): n for k, n in _vllm_kind_counts(ORACLE[name]).items()}
    got = {("full" if k == "mla" else k): n for k, n in spec.layer_kind_counts().items()}
    assert got == expected


def _transformers_cache_bytes(spec: ModelSpec, tokens: int) -> int:
    """transformers 5 DynamicCache in bf16: K+V per layer; sliding/chunked keep window - 1 tokens;
    MLA keeps the latent (keys kv_lora_rank, values qk_rope_head_dim); recurrent layers keep the
    conv window (model dtype) and an fp32 SSM state."""
    total = 0
    for g in spec.layers:
        if g.kind == "full":
            total += g.count * 2 * g.kv_heads * g.head_dim * 2 * tokens
        elif g.kind == "sliding":
            total += g.count * 2 * g.kv_heads * g.head_dim * 2 * min(tokens, g.window - 1)
        elif g.kind == "chunked":
            total += g.count * 2 * g.kv_heads * g.head_dim * 2 * min(tokens, g.chunk - 1)
        elif g.kind == "mla":
            total += g.count * (g.kv_lora_rank + g.qk_rope_head_dim) * 2 * tokens
        elif g.kind == "recurrent":
            total += g.count * (g.conv_dim * g.conv_kernel * 2 + math.prod(g.ssm_state) * 4)
        else:
            raise AssertionError(g.kind)
    return total


@pytest.mark.parametrize("name", sorted(ORACLE))
@pytest.mark.parametrize("tokens", ["1024", "32768"])
def test_spec_reproduces_transformers_cache_bytes(name: str, tokens: str):
    spec = spec_of(name)
    assert _transformers_cache_bytes(spec, int(tokens)) == ORACLE[name]["hf_cache_bytes"][tokens]


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_spec_reproduces_vllm_bytes_per_token(name: str):
    spec = spec_of(name)
    per_token = 0
    for g in spec.layers:
        if g.kind in ("full", "sliding", "chunked"):
            per_token += g.count * 2 * g.kv_heads * g.head_dim * 2
        elif g.kind == "mla":
            per_token += g.count * (g.kv_lora_rank + g.qk_rope_head_dim) * 2
    assert per_token == ORACLE[name]["vllm_bytes_per_token_bf16"]


@pytest.mark.parametrize(
    "name, mixer, hf_bytes, vllm_bytes",
    [
        # oracle notes: transformers conv window = kernel, fp32 state; vLLM kernel - 1, bf16 state
        ("ArthurZ__mamba-2.8b", "mamba", 368_640, 194_560),
        ("Qwen__Qwen3-Next-80B-A3B-Thinking", "gated_delta_net", 2_162_688, 1_097_728),
    ],
)
def test_recurrent_state_bytes_match_oracle_notes(name, mixer, hf_bytes, vllm_bytes):
    spec = spec_of(name)
    (state,) = {g for g in spec.layers if g.kind == "recurrent"}
    assert state.mixer == mixer
    assert state.conv_dim * state.conv_kernel * 2 + math.prod(state.ssm_state) * 4 == hf_bytes
    assert state.conv_dim * (state.conv_kernel - 1) * 2 + math.prod(state.ssm_state) * 2 == vllm_bytes


def test_qwen3_next_gated_delta_net_fields():
    spec = spec_of("Qwen__Qwen3-Next-80B-A3B-Thinking")
    state = next(g for g in spec.layers if g.kind == "recurrent")
    assert state.conv_dim == 2 * 16 * 128 + 32 * 128 == 8192
    assert state.conv_kernel == 4
    assert state.ssm_state == (32, 128, 128)
    assert [i for i, k in enumerate(kinds(spec)) if k == "full"] == list(range(3, 48, 4))


def test_mamba_fields():
    spec = spec_of("ArthurZ__mamba-2.8b")
    (group,) = spec.layers
    assert (group.kind, group.count, group.mixer) == ("recurrent", 64, "mamba")
    assert group.conv_dim == 5120 and group.conv_kernel == 4 and group.ssm_state == (5120, 16)
    assert spec.dtype == "float16"


def test_mla_fields_deepseek_v3():
    spec = spec_of("deepseek-ai__DeepSeek-V3")
    (group,) = spec.layers
    assert (group.kind, group.count) == ("mla", 61)
    assert (group.kv_lora_rank, group.qk_rope_head_dim, group.qk_nope_head_dim, group.v_head_dim,
            group.num_heads) == (512, 64, 128, 128, 128)
    assert not hasattr(group, "kv_heads") and not hasattr(group, "head_dim")  # an MLA layer has no K/V heads


def test_mla_fields_deepseek_v2_lite_and_kimi():
    lite = spec_of("deepseek-ai__DeepSeek-V2-Lite").layers[0]
    assert (lite.kind, lite.num_heads, lite.kv_lora_rank) == ("mla", 16, 512)
    kimi = spec_of("moonshotai__Kimi-K2-Instruct")
    assert kimi.model_type == "kimi_k2"
    assert [(g.kind, g.count, g.num_heads) for g in kimi.layers] == [("mla", 61, 64)]


def test_llama4_scout_chunked_and_nope_layers():
    spec = spec_of("meta-llama__Llama-4-Scout-17B-16E-Instruct")
    ks = kinds(spec)
    assert [i for i, k in enumerate(ks) if k == "full"] == [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47]
    assert {g.chunk for g in spec.layers if g.kind == "chunked"} == {8192}
    assert any("no_rope_layers absent" in a for a in spec.assumptions)
    assert spec.hidden_size == 5120 and spec.num_attention_heads == 40  # from text_config


def test_gemma2_alternates_from_sliding():
    ks = kinds(spec_of("google__gemma-2-9b-it"))
    assert ks[:4] == ["sliding", "full", "sliding", "full"] and ks.count("sliding") == 21


def test_gemma3_27b_nested_text_config():
    spec = spec_of("google__gemma-3-27b-it")
    assert spec.model_type == "gemma3"
    assert spec.hidden_size == 5376 and spec.vocab_size == 262208
    assert spec.dtype == "bfloat16" and not any("torch_dtype" in a for a in spec.assumptions)
    assert spec.rope_scaling is not None and spec.rope_scaling.type == "linear"
    assert spec.rope_scaling.factor == 8.0 and spec.rope_scaling.extends_to is None


def test_gemma3_1b_pattern_and_window():
    spec = spec_of("google__gemma-3-1b-it")
    ks = kinds(spec)
    assert [i for i, k in enumerate(ks) if k == "full"] == [5, 11, 17, 23]
    assert {g.window for g in spec.layers if g.kind == "sliding"} == {512}


def test_qwen2_use_sliding_window_false_means_no_window():
    config = load("Qwen__Qwen2.5-7B")
    assert config["sliding_window"] == 131072 and config["use_sliding_window"] is False
    assert set(kinds(spec_from_config(config, model_id="q"))) == {"full"}


# --------------------------------------------------------------------------------------------
# Families without a real config in tests/data (hand-written, mirroring a public config.json)

# EleutherAI/pythia-1.4b config.json
PYTHIA_1_4B = {
    "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 16,
    "num_hidden_layers": 24, "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False,
    "torch_dtype": "float16", "transformers_version": "4.24.0", "use_cache": True,
    "use_parallel_residual": True, "vocab_size": 50304,
}

# facebook/opt-6.7b config.json
OPT_6_7B = {
    "activation_dropout": 0.0, "activation_function": "relu", "architectures": ["OPTForCausalLM"],
    "attention_dropout": 0.0, "bos_token_id": 2, "do_layer_norm_before": True, "dropout": 0.1,
    "eos_token_id": 2, "ffn_dim": 16384, "hidden_size": 4096, "init_std": 0.02, "layerdrop": 0.0,
    "max_position_embeddings": 2048, "model_type": "opt", "num_attention_heads": 32,
    "num_hidden_layers": 32, "pad_token_id": 1, "prefix": "</s>", "torch_dtype": "float16",
    "transformers_version": "4.21.0.dev0", "use_cache": True, "vocab_size": 50272, "word_embed_proj_dim": 4096,
}

# bigscience/bloom-560m config.json (ALiBi: no position limit in the config)
BLOOM_560M = {
    "apply_residual_connection_post_layernorm": False, "architectures": ["BloomForCausalLM"],
    "attention_dropout": 0.0, "attention_softmax_in_fp32": True, "bias_dropout_fusion": True,
    "bos_token_id": 1, "eos_token_id": 2, "hidden_dropout": 0.0, "hidden_size": 1024,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": True,
    "model_type": "bloom", "n_head": 16, "n_inner": None, "n_layer": 24, "offset_alibi": 100,
    "pad_token_id": 3, "pretraining_tp": 1, "skip_bias_add": True, "skip_bias_add_qkv": False,
    "slow_but_exact": False, "transformers_version": "4.24.0", "unk_token_id": 0, "use_cache": True,
    "vocab_size": 250880,
}

# tiiuae/falcon-40b config.json (new_decoder_architecture: grouped KV heads)
FALCON_40B = {
    "alibi": False, "apply_residual_connection_post_layernorm": False, "architectures": ["FalconForCausalLM"],
    "attention_dropout": 0.0, "bias": False, "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0,
    "hidden_size": 8192, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon",
    "new_decoder_architecture": True, "num_attention_heads": 128, "num_hidden_layers": 60,
    "num_kv_heads": 8, "parallel_attn": True, "torch_dtype": "bfloat16", "transformers_version": "4.27.4",
    "use_cache": True, "vocab_size": 65024,
}

# google/gemma-7b config.json
GEMMA_7B = {
    "architectures": ["GemmaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu", "hidden_size": 3072,
    "initializer_range": 0.02, "intermediate_size": 24576, "max_position_embeddings": 8192,
    "model_type": "gemma", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 16,
    "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000.0,
    "torch_dtype": "bfloat16", "transformers_version": "4.38.0.dev0", "use_cache": True, "vocab_size": 256000,
}

# google/gemma-3-4b-it config.json (vision_config trimmed): the text_config leaves heads, KV heads
# and head_dim to Gemma3TextConfig's defaults (8, 4, 256).
GEMMA3_4B = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
    "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
    "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {
        "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
        "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024,
    },
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16,
                      "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False},
}

# CohereForAI/c4ai-command-r7b-12-2024 config.json
COMMAND_R7B = {
    "architectures": ["Cohere2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 5, "cache_implementation": "hybrid", "eos_token_id": 255001, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "layer_norm_eps": 1e-05, "logit_scale": 0.25, "max_position_embeddings": 132096, "model_type": "cohere2",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "order_of_interleaved_layers": "local_attn_first", "pad_token_id": 0, "position_embedding_type": "rope_gptj",
    "rope_scaling": None, "rope_theta": 50000, "rotary_pct": 1.0, "sliding_window": 4096,
    "sliding_window_pattern": 4, "torch_dtype": "bfloat16", "transformers_version": "4.48.0.dev0",
    "use_cache": True, "use_embedding_sharing": True, "use_gated_activation": True, "vocab_size": 256000,
}

# ibm-granite/granite-3.1-8b-instruct config.json
GRANITE_3_1_8B = {
    "architectures": ["GraniteForCausalLM"], "attention_bias": False, "attention_dropout": 0.1,
    "attention_multiplier": 0.0078125, "bos_token_id": 0, "embedding_multiplier": 12.0, "eos_token_id": 0,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12800,
    "logits_scaling": 16.0, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "granite",
    "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "pad_token_id": 0,
    "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000000.0,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.47.0",
    "use_cache": True, "vocab_size": 49155,
}

# microsoft/Phi-3-mini-128k-instruct config.json; the 48-entry long/short factor lists are shortened
# to placeholders (kvplan does not read them).
PHI3_MINI_128K = {
    "architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0,
    "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "model_type": "phi3",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"long_factor": [1.0] * 48, "short_factor": [1.0] * 48, "type": "longrope"},
    "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": True, "vocab_size": 32064,
}


def test_gpt_neox_pythia():
    spec = spec_from_config(PYTHIA_1_4B, model_id="EleutherAI/pythia-1.4b")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 24, 16, 128)]
    assert spec.dtype == "float16" and spec.max_position_embeddings == 2048
    assert spec.assumptions == ()  # MHA family: no KV-head assumption, dtype given


def test_opt():
    spec = spec_from_config(OPT_6_7B, model_id="facebook/opt-6.7b")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 32, 32, 128)]
    assert spec.vocab_size == 50272 and spec.assumptions == ()


def test_bloom_uses_n_head_n_layer_and_has_no_position_limit():
    spec = spec_from_config(BLOOM_560M, model_id="bigscience/bloom-560m")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 24, 16, 64)]
    assert spec.max_position_embeddings is None
    assert spec.assumptions == ("torch_dtype absent: assumed bfloat16",)


def test_gpt2_and_gptj_aliases():
    gpt2 = spec_of("openai-community__gpt2")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in gpt2.layers] == [("full", 12, 12, 64)]
    assert gpt2.max_position_embeddings == 1024 and gpt2.hidden_size == 768
    gptj = spec_of("EleutherAI__gpt-j-6b")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in gptj.layers] == [("full", 28, 16, 256)]
    assert gptj.max_position_embeddings == 2048


def test_falcon_legacy_multi_query_has_one_kv_head():
    config = load("tiiuae__falcon-7b-instruct")
    assert config["multi_query"] is True and config["num_kv_heads"] == 71  # num_kv_heads is ignored
    spec = spec_from_config(config, model_id="tiiuae/falcon-7b-instruct")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 32, 1, 64)]


def test_falcon_40b_new_decoder_architecture():
    spec = spec_from_config(FALCON_40B, model_id="tiiuae/falcon-40b")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 60, 8, 64)]


def test_falcon_without_multi_query_is_mha():
    config = dict(load("tiiuae__falcon-7b-instruct"), multi_query=False)
    del config["num_kv_heads"]
    spec = spec_from_config(config, model_id="falcon-mha")
    assert spec.layers[0].kv_heads == 71


def test_falcon_refinedweb_n_head_kv():
    # The pre-transformers "RefinedWeb" spelling of falcon-40b (n_head / n_layer / n_head_kv).
    config = {"model_type": "RefinedWeb", "n_head": 128, "n_head_kv": 8, "n_layer": 60, "hidden_size": 8192,
              "new_decoder_architecture": True, "torch_dtype": "bfloat16", "vocab_size": 65024}
    spec = spec_from_config(config, model_id="falcon-40b-old")
    assert [(g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [(60, 8, 64)]


@pytest.mark.parametrize("name, n, kv, hd, rope_to", [
    ("meta-llama__Llama-2-7b-hf", 32, 32, 128, None),
    ("meta-llama__Llama-2-70b-hf", 80, 8, 128, None),
    ("meta-llama__Llama-3.1-8B", 32, 8, 128, 131072),
    ("meta-llama__Llama-3.2-1B-Instruct", 16, 8, 64, 131072),
])
def test_llama_generations(name, n, kv, hd, rope_to):
    spec = spec_of(name)
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", n, kv, hd)]
    assert (spec.rope_scaling.extends_to if spec.rope_scaling else None) == rope_to


def test_llama1_without_kv_field_records_mha_assumption():
    config = dict(load("meta-llama__Llama-2-7b-hf"))
    del config["num_key_value_heads"]
    spec = spec_from_config(config, model_id="llama-1-like")
    assert spec.layers[0].kv_heads == 32
    assert any("num_key_value_heads absent" in a for a in spec.assumptions)


def test_mistral_v01_window_on_every_layer_and_v03_none():
    v01 = spec_of("mistralai__Mistral-7B-v0.1")
    assert [(g.kind, g.count, g.window) for g in v01.layers] == [("sliding", 32, 4096)]
    v03 = spec_of("mistralai__Mistral-7B-Instruct-v0.3")
    assert [(g.kind, g.count) for g in v03.layers] == [("full", 32)]


def test_explicit_head_dim_wins_over_hidden_over_heads():
    nemo = spec_of("mistralai__Mistral-Nemo-Base-2407")  # 5120 / 32 = 160, head_dim 128
    assert nemo.hidden_size == 5120 and {g.head_dim for g in nemo.layers} == {128}
    glm = spec_of("zai-org__GLM-4.5-Air")  # 4096 / 96 is not even an integer
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in glm.layers] == [("full", 46, 8, 128)]


def test_null_head_dim_falls_back_to_hidden_over_heads():
    config = dict(load("meta-llama__Llama-3.1-8B"), head_dim=None)
    assert spec_from_config(config, model_id="x").layers[0].head_dim == 128


# mistralai/Mistral-Small-3.1-24B-Instruct-2503 config.json (vision_config trimmed)
MISTRAL_SMALL_3_1 = {
    "architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10, "model_type": "mistral3",
    "multimodal_projector_bias": False, "projector_hidden_act": "gelu", "spatial_merge_size": 2,
    "text_config": {
        "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 32768,
        "max_position_embeddings": 131072, "model_type": "mistral", "num_attention_heads": 32,
        "num_hidden_layers": 40, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000000.0,
        "sliding_window": None, "vocab_size": 131072,
    },
    "torch_dtype": "bfloat16",
    "vision_config": {"head_dim": 64, "hidden_size": 1024, "image_size": 1540, "model_type": "pixtral",
                      "num_attention_heads": 16, "num_hidden_layers": 24, "patch_size": 14},
    "vision_feature_layer": -1,
}


def test_mistral3_nested_text_config():
    spec = spec_from_config(MISTRAL_SMALL_3_1, model_id="mistralai/Mistral-Small-3.1-24B-Instruct-2503")
    assert spec.model_type == "mistral3"
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 40, 8, 128)]
    assert (spec.hidden_size, spec.vocab_size, spec.max_position_embeddings) == (5120, 131072, 131072)
    assert spec.assumptions == ()


def test_mixtral():
    spec = spec_of("mistralai__Mixtral-8x22B-v0.1")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 56, 8, 128)]


def test_qwen2_sliding_layers_from_max_window_layers():
    # Qwen2.5-7B with the window switched on: transformers' Qwen2Config slides layers >= max_window_layers.
    config = dict(load("Qwen__Qwen2.5-7B"), use_sliding_window=True, sliding_window=4096, max_window_layers=21)
    spec = spec_from_config(config, model_id="qwen2-swa")
    assert [(g.kind, g.count, getattr(g, "window", None)) for g in spec.layers] == [
        ("full", 21, None), ("sliding", 7, 4096)]


def test_qwen2_moe_real_config_and_sliding_variant():
    real = spec_of("Qwen__Qwen1.5-MoE-A2.7B")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in real.layers] == [("full", 24, 16, 128)]
    config = dict(load("Qwen__Qwen1.5-MoE-A2.7B"), use_sliding_window=True, sliding_window=4096)
    ks = kinds(spec_from_config(config, model_id="qwen2-moe-swa"))
    # transformers Qwen2MoeConfig: sliding where (i + 1) % 2 and i < max_window_layers (21)
    assert [i for i, k in enumerate(ks) if k == "sliding"] == list(range(0, 21, 2))


def test_qwen3_and_qwen3_moe():
    q3 = spec_of("Qwen__Qwen3-0.6B")  # hidden 1024 / 16 heads = 64, head_dim 128
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in q3.layers] == [("full", 28, 8, 128)]
    moe = spec_of("Qwen__Qwen3-30B-A3B")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in moe.layers] == [("full", 48, 4, 128)]
    config = dict(load("Qwen__Qwen3-30B-A3B"), use_sliding_window=True, sliding_window=4096)
    swa = spec_from_config(config, model_id="qwen3-moe-swa")  # Qwen3MoeConfig has no layer_types
    assert [(g.kind, g.count, g.window) for g in swa.layers] == [("sliding", 48, 4096)]


def test_gemma_v1():
    spec = spec_from_config(GEMMA_7B, model_id="google/gemma-7b")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 28, 16, 256)]


def test_gemma2_27b():
    spec = spec_of("google__gemma-2-27b")
    assert {(g.kind, g.kv_heads, g.head_dim, getattr(g, "window", None)) for g in spec.layers} == {
        ("sliding", 16, 128, 4096), ("full", 16, 128, None)}
    assert spec.layer_kind_counts() == {"sliding": 23, "full": 23}


def test_gemma3_4b_relies_on_config_class_defaults():
    spec = spec_from_config(GEMMA3_4B, model_id="google/gemma-3-4b-it")
    assert spec.num_layers == 34
    assert [i for i, k in enumerate(kinds(spec)) if k == "full"] == [5, 11, 17, 23, 29]
    assert {(g.kv_heads, g.head_dim) for g in spec.layers} == {(4, 256)}
    assert {g.window for g in spec.layers if g.kind == "sliding"} == {1024}
    assert spec.num_attention_heads == 8 and spec.max_position_embeddings == 131072
    text = " | ".join(spec.assumptions)
    assert "num_key_value_heads absent: transformers Gemma3TextConfig default 4" in text
    assert "head_dim absent" in text and "sliding_window_pattern absent" in text


def test_gemma3_sliding_window_pattern_overrides_default():
    config = copy.deepcopy(GEMMA3_4B)
    config["text_config"].update(sliding_window_pattern=2, num_hidden_layers=6)
    assert kinds(spec_from_config(config, model_id="g")) == ["sliding", "full"] * 3


def test_cohere_and_cohere2():
    r = spec_of("Aratako__c4ai-command-r-v01-japanese-instruct")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in r.layers] == [("full", 40, 64, 128)]
    r7b = spec_from_config(COMMAND_R7B, model_id="CohereForAI/c4ai-command-r7b-12-2024")
    assert rle(kinds(r7b)) == " ".join(["slidingx3 fullx1"] * 8)
    assert {g.window for g in r7b.layers if g.kind == "sliding"} == {4096}
    with_types = dict(COMMAND_R7B, layer_types=["full_attention"] * 2 + ["sliding_attention"] * 30)
    assert rle(kinds(spec_from_config(with_types, model_id="c"))) == "fullx2 slidingx30"


def test_phi3_window_applies_to_every_layer():
    mini = spec_of("microsoft__Phi-3-mini-4k-instruct")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim, getattr(g, "window", None)) for g in mini.layers] == [
        ("sliding", 32, 32, 96, 2047)]
    medium = spec_of("microsoft__Phi-3-medium-4k-instruct")
    assert [(g.kind, g.count, g.window) for g in medium.layers] == [("sliding", 40, 2047)]
    phi4 = spec_of("microsoft__phi-4")  # sliding_window null
    assert [(g.kind, g.count) for g in phi4.layers] == [("full", 40)]


def test_phi3_128k_longrope():
    spec = spec_from_config(PHI3_MINI_128K, model_id="microsoft/Phi-3-mini-128k-instruct")
    assert [(g.kind, g.count, g.window) for g in spec.layers] == [("sliding", 32, 262144)]
    assert spec.rope_scaling is not None
    assert (spec.rope_scaling.type, spec.rope_scaling.original_max_position_embeddings,
            spec.rope_scaling.extends_to) == ("longrope", 4096, 131072)
    assert any("never binds" in a for a in spec.assumptions)


def test_gpt_oss_default_layer_types_when_absent():
    config = dict(load("openai__gpt-oss-20b"))
    del config["layer_types"]
    spec = spec_from_config(config, model_id="gpt-oss-no-types")
    assert rle(kinds(spec)) == ORACLE["openai__gpt-oss-20b"]["attention_kind_summary"]
    assert {g.window for g in spec.layers if g.kind == "sliding"} == {128}


def test_llama4_explicit_no_rope_layers_list_wins():
    config = copy.deepcopy(load("meta-llama__Llama-4-Maverick-17B-128E-Instruct"))
    config["text_config"]["no_rope_layers"] = [1, 0] * 24  # 1 = RoPE layer (chunked), 0 = NoPE (full)
    ks = kinds(spec_from_config(config, model_id="l4"))
    assert ks == ["chunked", "full"] * 24


def test_llama4_explicit_layer_types_win():
    config = copy.deepcopy(load("meta-llama__Llama-4-Scout-17B-16E-Instruct"))
    config["text_config"]["layer_types"] = ["full_attention"] * 48
    assert set(kinds(spec_from_config(config, model_id="l4"))) == {"full"}


def test_jamba():
    spec = spec_of("ai21labs__AI21-Jamba-1.5-Mini")
    ks = kinds(spec)
    assert [i for i, k in enumerate(ks) if k == "full"] == [4, 12, 20, 28]
    full = next(g for g in spec.layers if g.kind == "full")
    assert (full.kv_heads, full.head_dim) == (8, 128)
    mamba = next(g for g in spec.layers if g.kind == "recurrent")
    assert (mamba.mixer, mamba.conv_dim, mamba.conv_kernel, mamba.ssm_state) == ("mamba", 8192, 4, (8192, 16))


def test_mamba2():
    spec = spec_of("mistralai__Mamba-Codestral-7B-v0.1")
    (group,) = spec.layers
    assert (group.kind, group.count, group.mixer) == ("recurrent", 64, "mamba2")
    assert group.conv_dim == 8192 + 2 * 8 * 128
    assert group.conv_kernel == 4 and group.ssm_state == (128, 64, 128)


def test_granite_and_olmo2():
    granite = spec_from_config(GRANITE_3_1_8B, model_id="ibm-granite/granite-3.1-8b-instruct")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in granite.layers] == [("full", 40, 8, 128)]
    olmo2 = spec_of("allenai__OLMo-2-1124-7B")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in olmo2.layers] == [("full", 32, 32, 128)]


FAMILIES = ["gpt2", "gptj", "gpt_neox", "opt", "bloom", "falcon", "llama", "mistral", "mixtral", "qwen2",
            "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "gemma", "gemma2", "gemma3", "gemma3_text",
            "phi3", "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "llama4", "jamba", "mamba", "mamba2",
            "cohere", "cohere2", "glm4_moe", "granite", "olmo2", "mistral3", "phi", "kimi_vl", "qwen3_5", "qwen3_5_moe",
            "git"]
HAND_WRITTEN = [PYTHIA_1_4B, OPT_6_7B, BLOOM_560M, FALCON_40B, GEMMA_7B, GEMMA3_4B, COMMAND_R7B,
                GRANITE_3_1_8B, PHI3_MINI_128K, MISTRAL_SMALL_3_1]


def test_every_family_has_a_real_or_hand_written_config():
    sources = [json.loads(p.read_text()) for p in ALL_CONFIGS] + HAND_WRITTEN
    # a text_config may name no model_type of its own (Kimi-VL's)
    covered = {c["model_type"] for c in sources} | {c["text_config"].get("model_type") for c in sources
                                                   if isinstance(c.get("text_config"), dict)}
    missing = [f for f in FAMILIES if f not in covered]
    assert not missing
    for config in HAND_WRITTEN:
        spec = spec_from_config(config, model_id="x")
        assert not any("is not one kvplan knows" in a for a in spec.assumptions)


# --------------------------------------------------------------------------------------------
# Generic rules and assumptions


MINIMAL = {"model_type": "acme_lm", "num_hidden_layers": 4, "num_attention_heads": 8,
           "num_key_value_heads": 2, "hidden_size": 512, "torch_dtype": "float16"}


def test_unknown_model_type_reads_generically_and_says_so():
    spec = spec_from_config(MINIMAL, model_id="acme/lm")
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 4, 2, 64)]
    assert "model_type 'acme_lm' is not one kvplan knows; read with the generic rules" in spec.assumptions


def test_unknown_model_type_with_alias_fields():
    config = {"model_type": "mpt_like", "n_layers": 6, "n_heads": 4, "d_model": 256, "max_seq_len": 4096}
    spec = spec_from_config(config, model_id="x")
    assert [(g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [(6, 4, 64)]
    assert spec.max_position_embeddings == 4096
    assert any("num_key_value_heads absent" in a for a in spec.assumptions)


def test_unknown_model_type_with_layer_types_and_window():
    config = dict(MINIMAL, layer_types=["sliding_attention", "full_attention"] * 2, sliding_window=256)
    spec = spec_from_config(config, model_id="x")
    windows = [(g.kind, getattr(g, "window", None)) for g in spec.expanded_layers()]
    assert windows == [("sliding", 256), ("full", None)] * 2


def test_unknown_model_type_with_window_and_no_layer_types_slides_everywhere():
    spec = spec_from_config(dict(MINIMAL, sliding_window=1024), model_id="x")
    assert [(g.kind, g.count, g.window) for g in spec.layers] == [("sliding", 4, 1024)]


def test_use_sliding_window_false_switches_the_window_off():
    spec = spec_from_config(dict(MINIMAL, sliding_window=1024, use_sliding_window=False), model_id="x")
    assert [(g.kind, g.count) for g in spec.layers] == [("full", 4)]


def test_unknown_model_type_with_mla_fields():
    config = dict(MINIMAL, kv_lora_rank=256, qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64)
    spec = spec_from_config(config, model_id="x")
    assert [(g.kind, g.kv_lora_rank, g.qk_rope_head_dim) for g in spec.layers] == [("mla", 256, 32)]


@pytest.mark.parametrize("alias", ["num_kv_heads", "n_head_kv", "multi_query_group_num"])
def test_kv_head_aliases(alias):
    config = {k: v for k, v in MINIMAL.items() if k != "num_key_value_heads"}
    config[alias] = 4
    assert spec_from_config(config, model_id="x").layers[0].kv_heads == 4


def test_dtype_from_dtype_key_and_absent():
    assert spec_from_config(dict(MINIMAL, torch_dtype=None, dtype="float32"), model_id="x").dtype == "float32"
    config = {k: v for k, v in MINIMAL.items() if k != "torch_dtype"}
    spec = spec_from_config(config, model_id="x")
    assert spec.dtype == "bfloat16" and "torch_dtype absent: assumed bfloat16" in spec.assumptions
    assert spec_of("meta-llama__Llama-2-7b-hf").dtype == "float16"


def test_model_fields_filled():
    spec = spec_of("meta-llama__Llama-3.1-70B")
    assert (spec.num_attention_heads, spec.hidden_size, spec.vocab_size, spec.max_position_embeddings) == (
        64, 8192, 128256, 131072)


def test_rope_scaling_llama3_derivation_is_explained():
    spec = spec_of("meta-llama__Llama-3.1-8B")
    rope = spec.rope_scaling
    # llama3 scaling over 8,192 original positions; the config declares 131,072, which is the reach
    assert (rope.type, rope.factor, rope.original_max_position_embeddings, rope.extends_to) == (
        "llama3", 8.0, 8192, 131072)
    assert any("from 8,192 to the declared max_position_embeddings 131,072" in a for a in spec.assumptions)


def test_rope_scaling_added_to_an_original_length_config_extends_by_the_factor():
    # Qwen2.5's documented yarn recipe: factor 4 over 32,768 in a config that declares 32,768
    config = {"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 1024, "num_attention_heads": 8,
              "num_key_value_heads": 2, "max_position_embeddings": 32768,
              "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    assert spec_from_config(config, model_id="q").rope_scaling.extends_to == 131072


def test_rope_scaling_yarn_deepseek():
    rope = spec_of("deepseek-ai__DeepSeek-V3").rope_scaling
    assert (rope.type, rope.factor, rope.extends_to) == ("yarn", 40.0, 163840)


def test_rope_parameters_transformers5_spelling():
    params = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1e6}
    rope = spec_from_config(dict(MINIMAL, rope_parameters=params), model_id="x").rope_scaling
    assert (rope.type, rope.extends_to) == ("yarn", 131072)
    assert spec_from_config(dict(MINIMAL, rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
                            model_id="x").rope_scaling is None
    per_type = {"full_attention": {"rope_type": "linear", "factor": 8.0},
                "sliding_attention": {"rope_type": "default"}}
    rope = spec_from_config(dict(MINIMAL, rope_parameters=per_type), model_id="x").rope_scaling
    assert (rope.type, rope.factor, rope.extends_to) == ("linear", 8.0, None)


# --------------------------------------------------------------------------------------------
# Errors: one line, naming the field and value


def _without(config: dict, *keys: str) -> dict:
    return {k: v for k, v in config.items() if k not in keys}


ERROR_CASES = [
    (dict(MINIMAL, num_hidden_layers=0), "num_hidden_layers=0"),
    (dict(MINIMAL, num_hidden_layers=-3), "num_hidden_layers=-3"),
    (dict(MINIMAL, num_hidden_layers=10**7), "num_hidden_layers=10000000"),
    (dict(MINIMAL, num_hidden_layers=2.5), "num_hidden_layers=2.5"),
    (dict(MINIMAL, num_hidden_layers=True), "num_hidden_layers=True"),
    (_without(MINIMAL, "num_hidden_layers"), "num_hidden_layers (nor n_layer, num_layers, n_layers)"),
    (_without(MINIMAL, "num_attention_heads"), "num_attention_heads"),
    (dict(MINIMAL, num_attention_heads="8"), "num_attention_heads='8'"),
    (dict(MINIMAL, num_attention_heads=0), "num_attention_heads=0"),
    (dict(MINIMAL, num_key_value_heads=3), "num_key_value_heads=3"),
    (dict(MINIMAL, num_key_value_heads=16), "num_key_value_heads=16"),
    (dict(MINIMAL, num_key_value_heads=-1), "num_key_value_heads=-1"),
    (dict(MINIMAL, hidden_size=500), "hidden_size=500"),
    (_without(MINIMAL, "hidden_size"), "hidden_size"),
    (dict(MINIMAL, head_dim=0), "head_dim=0"),
    (dict(MINIMAL, head_dim=10**9), "head_dim=1000000000"),
    (dict(MINIMAL, sliding_window=0), "sliding_window=0"),
    (dict(MINIMAL, torch_dtype="banana"), "torch_dtype='banana'"),
    (dict(MINIMAL, max_position_embeddings=-1), "max_position_embeddings=-1"),
    (dict(MINIMAL, layer_types=["full_attention"] * 3), "layer_types has 3 entries"),
    (dict(MINIMAL, layer_types=["full_attention", "banana", "full_attention", "full_attention"]),
     "layer_types[1]='banana'"),
    (dict(MINIMAL, layer_types=["chunked_attention"] * 4), "attention_chunk_size"),
    (dict(MINIMAL, layer_types=["linear_attention"] * 4), "linear_attention"),
    (dict(MINIMAL, layer_types="full_attention"), "layer_types"),
    (dict(MINIMAL, rope_scaling={"rope_type": "yarn", "factor": -2}), "rope_scaling.factor=-2"),
    (_without(MINIMAL, "model_type"), "model_type"),
    (dict(MINIMAL, text_config=[1, 2]), "text_config"),
    ({"model_type": "acme_lm"}, "num_hidden_layers"),
    (_without(load("deepseek-ai__DeepSeek-V3"), "qk_rope_head_dim"), "qk_rope_head_dim"),
    (dict(load("deepseek-ai__DeepSeek-V3"), kv_lora_rank=0), "kv_lora_rank=0"),
    (dict(load("mistralai__Mamba-Codestral-7B-v0.1"), num_heads=100), "num_heads=100"),
    (dict(load("mistralai__Mamba-Codestral-7B-v0.1"), n_groups=3), "n_groups=3"),
    (dict(load("ai21labs__AI21-Jamba-1.5-Mini"), attn_layer_offset=8), "attn_layer_offset=8"),
    (_without(load("Qwen__Qwen3-Next-80B-A3B-Thinking"), "linear_key_head_dim"), "linear_key_head_dim"),
    (dict(load("Qwen__Qwen2.5-7B"), use_sliding_window=True, sliding_window=None), "sliding_window"),
    (dict(load("google__gemma-3-1b-it"), sliding_window_pattern=0), "sliding_window_pattern=0"),
    (dict(load("tiiuae__falcon-7b-instruct"), new_decoder_architecture=True, num_kv_heads=7), "num_kv_heads=7"),
    (dict(load("tiiuae__falcon-7b-instruct"), multi_query="yes"), "multi_query='yes'"),
]


@pytest.mark.parametrize("config, needle", ERROR_CASES, ids=[n for _, n in ERROR_CASES])
def test_bad_configs_raise_one_line_config_error(config, needle):
    with pytest.raises(ConfigError) as info:
        spec_from_config(config, model_id="bad")
    message = str(info.value)
    assert needle in message
    assert "\n" not in message


def test_not_a_dict():
    with pytest.raises(ConfigError):
        spec_from_config([1, 2, 3], model_id="bad")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Files


def test_read_config_file_and_directory(tmp_path: Path):
    source = CONFIG_DIR / "openai-community__gpt2.json"
    assert read_config_file(source)["model_type"] == "gpt2"
    (tmp_path / "config.json").write_text(source.read_text())
    assert read_config_file(tmp_path) == read_config_file(source)


def test_read_config_file_malformed_json_names_line_and_column(tmp_path: Path):
    bad = tmp_path / "config.json"
    bad.write_text('{\n  "model_type": "llama",\n  "num_hidden_layers": 32,,\n}\n')
    with pytest.raises(ConfigError) as info:
        read_config_file(bad)
    message = str(info.value)
    assert str(bad) in message and ":3:" in message and "\n" not in message


@pytest.mark.parametrize("text, kind", [("[1, 2]", "array"), ('"x"', "string"), ("null", "null"), ("3", "number")])
def test_read_config_file_not_an_object(tmp_path: Path, text, kind):
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=kind):
        read_config_file(path)


def test_read_config_file_directory_without_config(tmp_path: Path):
    with pytest.raises(ConfigError, match="config.json"):
        read_config_file(tmp_path)


def test_read_config_file_missing_path(tmp_path: Path):
    with pytest.raises(KvplanError):
        read_config_file(tmp_path / "nope.json")


def test_gemma3n_kv_shared_layers_hold_no_cache():
    # Mirrors google/gemma-3n-E4B-it's text_config (hand-written: no copy of the Hub file was at hand):
    # 35 layers, 4 local : 1 global, window 512, the last 15 layers reuse earlier layers' KV.
    import kvplan

    types = (["sliding_attention"] * 4 + ["full_attention"]) * 7
    config = {"model_type": "gemma3n", "torch_dtype": "bfloat16", "text_config": {
        "model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 35, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 256, "sliding_window": 512, "num_kv_shared_layers": 15,
        "layer_types": types, "max_position_embeddings": 32768, "vocab_size": 262400}}
    spec = spec_from_config(config, model_id="google/gemma-3n-E4B-it")
    assert spec.layer_kind_counts() == {"sliding": 16, "full": 4, "shared": 15}
    owners = {layer.shares_with for layer in spec.expanded_layers() if layer.kind == "shared"}
    assert owners == {18, 19}  # the last sliding and the last full layer before layer 20
    row = kvplan.estimate(spec, contexts=[1024], engine="hf").rows[0]
    assert row.kv_bytes == (16 * 511 + 4 * 1024) * 2 * 2 * 256 * 2
    config["text_config"]["num_kv_shared_layers"] = 35
    with pytest.raises(ConfigError, match="num_kv_shared_layers"):
        spec_from_config(config, model_id="x")
