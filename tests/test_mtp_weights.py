"""ModelSpec.mtp_weights_bytes: the checkpoint's MTP layers are not loaded by the main model, so the
budgets leave them out of the weights unless the plan speculates with mtp (whose draft loads them)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan
from kvplan.budgets.base import Settings
from kvplan.errors import SpecError
from kvplan.sources.hf_config import read_config_file
from kvplan.sources.hf_params import mtp_weights_bytes, weights_bytes
from kvplan.sources.resolve import load_model
from kvplan.sources.yaml_spec import dump_spec_yaml, spec_to_dict, validate_spec
from kvplan.spec import LayerSpec, ModelSpec
from conftest import DATA

ENGINES = ("vllm", "sglang", "trtllm", "hf")


def _fp8(out: int, inp: int, count: int = 1) -> int:
    """A block-quantized linear: 1 B per weight + one fp32 scale per 128 x 128 block (weight_block_size)."""
    return count * (out * inp + 4 * math.ceil(out / 128) * math.ceil(inp / 128))


# DeepSeek-V3's MTP layer (model.layers.61, tests/data/hf_configs/deepseek-ai__DeepSeek-V3.json: hidden
# 7168, vocab 129280, q_lora_rank 1536, kv_lora_rank 512, 128 heads of 128 + 64 rope dims, v 128, 256
# routed experts of 2048 + 1 shared): a whole decoder layer in the checkpoint's fp8 recipe, plus enorm,
# hnorm, eh_proj (Linear(2h, h), bf16: not quantized), shared_head.norm and its own shared_head.head and
# embed_tokens in bf16 (the DeepSeek-V3 README's 14B MTP module).
H, V = 7168, 129280
MTP_FP8 = (_fp8(1536, H) + _fp8(128 * 192, 1536) + _fp8(512 + 64, H) + _fp8(128 * 256, 512)  # q_a, q_b, kv_a, kv_b
           + _fp8(H, 128 * 128)                                                              # o_proj
           + _fp8(2048, H, 2 * 256) + _fp8(H, 2048, 256)                                     # experts
           + _fp8(2048, H, 2) + _fp8(H, 2048))                                               # shared expert
MTP_BF16 = 2 * (1536 + 512 + 2 * H            # q_a / kv_a layernorms, input / post-attention layernorms
                + 256 * H                     # router gate
                + 2 * H + 2 * H * H + H       # enorm, hnorm, eh_proj, shared_head.norm
                + 2 * V * H)                  # shared_head.head, embed_tokens
MTP_FP32 = 4 * 256                            # e_score_correction_bias, float32 in the checkpoint
DSV3_MTP_BYTES = MTP_FP8 + MTP_BF16 + MTP_FP32


def test_deepseek_v3_mtp_share_from_its_config():
    config = read_config_file(DATA / "hf_configs" / "deepseek-ai__DeepSeek-V3.json")
    assert DSV3_MTP_BYTES == 15_424_227_552  # 14.36 GiB
    assert mtp_weights_bytes(config) == DSV3_MTP_BYTES
    assert mtp_weights_bytes(config) < weights_bytes(config)[0]


def test_bundled_specs_carry_the_share_only_where_mtp_layers_are():
    assert load_model("deepseek-ai/DeepSeek-V3").mtp_weights_bytes == DSV3_MTP_BYTES
    for model in ("zai-org/GLM-4.5-Air", "Qwen/Qwen3-Next-80B-A3B-Thinking"):
        spec = load_model(model)
        assert spec.mtp_layers == 1 and 0 < spec.mtp_weights_bytes < spec.weights_bytes
    for model in ("moonshotai/Kimi-K2-Instruct", "meta-llama/Llama-3.1-8B"):
        spec = load_model(model)
        assert spec.mtp_weights_bytes is None and "mtp_weights_bytes" not in spec_to_dict(spec)


def _spec(**more) -> ModelSpec:
    values = {"weights_bytes": 1000, **more}
    return ModelSpec(id="m", model_type="deepseek_v3", mtp_layers=1,
                     layers=(LayerSpec(kind="mla", count=2, kv_lora_rank=512, qk_rope_head_dim=64),), **values)


def test_yaml_round_trip_and_zero_left_out():
    spec = _spec(mtp_weights_bytes=300)
    assert validate_spec(spec_to_dict(spec), "x.yaml") == spec and "mtp_weights_bytes: 300\n" in dump_spec_yaml(spec)
    assert "mtp_weights_bytes" not in spec_to_dict(_spec(mtp_weights_bytes=0))


@pytest.mark.parametrize("bad", [{"mtp_weights_bytes": 1001}, {"mtp_weights_bytes": 5, "weights_bytes": None}])
def test_the_share_must_be_part_of_the_weights(bad):
    with pytest.raises(SpecError, match="mtp_weights_bytes"):
        _spec(**bad)


def _plan(spec, engine: str, tp: int, **kw):
    """transformers splits no cache by tp and speculates without pp: one GPU of room for it."""
    if engine == "hf":
        return kvplan.max_batch(spec, gpu_memory=2 << 40, engine=engine, **kw)
    return kvplan.max_batch(spec, gpu="H200", tp=tp, engine=engine, **kw)


def _weights(plan) -> int:
    return next(item.bytes for item in plan.items if item.name == "weights")


@pytest.mark.parametrize("engine", ENGINES)
def test_budget_without_and_with_mtp_speculation(engine):
    spec = load_model("deepseek-ai/DeepSeek-V3")
    ranks = 1 if engine == "hf" else 8
    plain = _plan(spec, engine, ranks)
    mtp = _plan(spec, engine, ranks, speculative_method="mtp")
    assert _weights(plain) == -(-(spec.weights_bytes - DSV3_MTP_BYTES) // ranks)  # the engines skip layer 61
    assert _weights(mtp) == -(-spec.weights_bytes // ranks)                        # the MTP draft loads it
    note = next(item.note for item in plain.items if item.name == "weights")
    assert note.startswith("the checkpoint less its MTP layers") and "14.36 GiB" in note
    assert any("MTP weights:" in a and "in the budget" in a for a in mtp.assumptions)


def test_given_weights_stay_as_given():
    given_bytes = 80 << 30
    plan = kvplan.max_batch("deepseek-ai/DeepSeek-V3", gpu="H200", tp=8,
                            settings=Settings(weights_bytes=given_bytes))
    assert _weights(plan) == given_bytes


def test_json_names_the_mtp_layers():
    plan = kvplan.max_batch("deepseek-ai/DeepSeek-V3", gpu="H200", tp=8).to_dict()
    assert plan["mtp_layers"] == 1 and plan["mtp_weights_bytes"] == DSV3_MTP_BYTES
    model = kvplan.estimate("deepseek-ai/DeepSeek-V3", contexts=[1024], batches=[1]).to_dict()["model"]
    assert model["mtp_layers"] == 1 and model["mtp_weights_bytes"] == DSV3_MTP_BYTES


@settings(max_examples=30, deadline=None)
@given(engine=st.sampled_from(ENGINES), tp=st.sampled_from([1, 2, 4, 8]),
       weights=st.integers(min_value=1, max_value=1 << 40), part=st.floats(min_value=0, max_value=1))
def test_weights_with_mtp_speculation_are_never_fewer(engine, tp, weights, part):
    spec = replace(load_model("deepseek-ai/DeepSeek-V3"), weights_bytes=weights,
                   mtp_weights_bytes=int(weights * part))
    tp = 1 if engine == "hf" else tp
    plain = _plan(spec, engine, tp)
    mtp = _plan(spec, engine, tp, speculative_method="mtp")
    assert _weights(mtp) >= _weights(plain)
    assert _weights(mtp) - _weights(plain) <= -(-spec.mtp_weights_bytes // tp)
