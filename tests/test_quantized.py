"""transformers' QuantizedCache: golden bytes derived by hand from the backends' packing (always run).

tests/test_quantized_oracle.py checks the same rules against transformers' own cache layers where
transformers, optimum-quanto and hqq are installed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan
from kvplan.engines.rules import QuantizedResidual
from kvplan.errors import UsageError

LLAMA = "meta-llama/Llama-3.1-8B"  # 32 layers, 8 KV heads, head_dim 128, bfloat16
Q = {"kv_cache": "quantized"}


def _bytes(model: str, context: int, batch: int = 1, **options: object) -> int:
    rows = kvplan.estimate(model, contexts=[context], batches=[batch], engine="hf", engine_options=options).rows
    return rows[0].kv_bytes


def test_quanto_int4_prefill_only() -> None:
    # quanto int4, axis 0, groups of 64 (QuantizedLayer defaults). One K of 1,000 tokens: 8 x 1000 x 128 =
    # 1,024,000 elements = 16,000 groups; packed 2 per byte along the groups: 8,000 rows x 64 = 512,000 B;
    # a bf16 scale and shift per group: 64,000 B. K + V = 1,152,000 B per layer, x 32 layers.
    assert _bytes(LLAMA, 1000, **Q, prompt_len=1000) == 36_864_000


def test_quanto_residual_grows_then_is_requantized() -> None:
    # 127 decoded tokens stay in bf16 beside the quantized prompt: 127 x 8 x 256 x 2 = 520,192 B per layer
    assert _bytes(LLAMA, 1127, **Q, prompt_len=1000) == 36_864_000 + 32 * 520_192
    # the 128th makes residual + 1 >= residual_length: all 1,128 tokens quantized, the residual empty
    # (18,048 groups per K: 577,536 B data + 72,192 B scales and shifts)
    assert _bytes(LLAMA, 1128, **Q, prompt_len=1000) == 32 * 2 * (577_536 + 72_192)


def test_no_prompt_length_assumes_the_largest_residual() -> None:
    # hqq 2-bit, axis 0: 873 quantized tokens per K are 893,952 elements = 13,968 groups as [64, 13,968];
    # 4 rows per byte: 223,488 B; scale and zero in bf16: 55,872 B. Residual 127 tokens: 520,192 B.
    result = kvplan.estimate(LLAMA, contexts=[1000], engine="hf",
                             engine_options={**Q, "backend": "hqq", "nbits": 2})
    assert result.rows[0].kv_bytes == 32 * (2 * (223_488 + 55_872) + 520_192) == 34_525_184
    assert any("largest full-precision residual" in a for a in result.assumptions)


def test_fp8_backend_one_byte_per_element_and_one_fp32_scale_per_tensor() -> None:
    # Fp8QuantizedLayer: float8_e4m3fn K and V, a 0-dim fp32 scale each, shared by the batch
    per_layer = 8 * 131072 * 128 * 2
    assert _bytes(LLAMA, 131072, **Q, backend="fp8") == 32 * (per_layer + 8)
    assert _bytes(LLAMA, 131072, 4, **Q, backend="fp8") == 32 * (4 * per_layer + 8)


def test_fp8_kv_dtype_is_the_fp8_backend_since_5_21() -> None:
    fp8 = kvplan.estimate(LLAMA, contexts=[4096], engine="hf", kv_dtypes=["fp8"]).rows[0].kv_bytes
    assert fp8 == 32 * (8 * 4096 * 256 + 8)
    with pytest.raises(UsageError) as refused:
        kvplan.estimate(LLAMA, contexts=[4096], engine="hf", engine_version="5.20", kv_dtypes=["fp8"])
    assert refused.value.field == "kv_dtype" and "5.21" in str(refused.value)


@pytest.mark.parametrize(("options", "field"), [
    ({**Q, "backend": "fp8", "nbits": 4}, "nbits"),  # QuantizedCache: fp8 takes no group-wise options
    ({**Q, "nbits": 3}, "nbits"),  # quanto: 2 or 4
    ({**Q, "backend": "hqq", "nbits": 5}, "nbits"),
    ({**Q, "axis_key": 1}, "axis_key"),  # quanto: 0 or -1
    ({**Q, "backend": "hqq", "axis_value": -1}, "axis_value"),
    ({**Q, "backend": "hqq", "nbits": 3, "axis_key": 1}, "axis_key"),  # hqq 3-bit dequantize breaks on 4-D
    ({**Q, "backend": "gptq"}, "backend"),
    ({"kv_cache": "offloaded"}, "kv_cache"),
    ({**Q, "residual_length": -1}, "residual_length"),
    ({**Q, "q_group_size": 0}, "q_group_size"),
])
def test_refusals_name_the_option(options: dict[str, object], field: str) -> None:
    with pytest.raises(UsageError) as refused:
        kvplan.estimate(LLAMA, contexts=[1024], engine="hf", engine_options=options)
    assert refused.value.field == field


def test_only_full_attention_models() -> None:
    # QuantizedCache.__init__: "only supported for models with only full attention layers"
    with pytest.raises(UsageError) as refused:
        kvplan.estimate("google/gemma-3-27b-it", contexts=[1024], engine="hf", engine_options=Q)
    assert "full attention" in str(refused.value) and "sliding" in str(refused.value)


def test_group_size_must_divide_as_quanto_requires() -> None:
    # axis -1 groups across batch x heads x tokens: 8 x 1001 is not a multiple of 64
    with pytest.raises(UsageError) as refused:
        _bytes(LLAMA, 1001, **Q, axis_key=-1, prompt_len=1001)
    assert refused.value.field == "q_group_size"


def test_other_engines_and_static_refuse_the_option() -> None:
    with pytest.raises(UsageError) as refused:
        kvplan.estimate(LLAMA, contexts=[1024], engine="vllm", engine_options=Q)
    assert refused.value.field == "kv_cache"
    with pytest.raises(UsageError) as refused:
        kvplan.estimate(LLAMA, contexts=[1024], engine="hf-static", engine_options=Q)
    assert refused.value.field == "kv_cache"


def test_mla_latent_is_quantized_too() -> None:
    # DeepSeek-V2-Lite (27 layers) in 5.23 caches K [.., 512] and V [.., 64] per token, one "head"
    got = _bytes("deepseek-ai/DeepSeek-V2-Lite", 1024, **Q, prompt_len=1024)
    k = 512 * 1024 // 2 + 2 * (512 * 1024 // 64) * 2
    v = 64 * 1024 // 2 + 2 * (64 * 1024 // 64) * 2
    assert got == 27 * (k + v)


@settings(max_examples=60, deadline=None)
@given(context=st.integers(1, 200_000), batch=st.integers(1, 8), nbits=st.sampled_from([2, 4]))
def test_quantized_is_never_larger_than_bf16(context: int, batch: int, nbits: int) -> None:
    plain = _bytes(LLAMA, context, batch)
    assert _bytes(LLAMA, context, batch, **Q, nbits=nbits) <= plain


@settings(max_examples=60, deadline=None)
@given(context=st.integers(1, 100_000))
def test_worst_case_residual_grows_with_context(context: int) -> None:
    assert _bytes(LLAMA, context, **Q) <= _bytes(LLAMA, context + 1, **Q)


@given(prompt=st.integers(1, 10_000), steps=st.integers(0, 10_000), residual=st.integers(0, 512))
def test_residual_rule_matches_the_update_loop(prompt: int, steps: int, residual: int) -> None:
    # QuantizedLayer.update, one token per step: flush when kept + 1 >= residual_length
    kept = 0
    for _ in range(min(steps, 1200)):
        kept = 0 if kept + 1 >= residual else kept + 1
    steps = min(steps, 1200)
    assert QuantizedResidual(residual, prompt).split(prompt + steps) == (prompt + steps - kept, kept)


@pytest.mark.parametrize("options", [
    {**Q, "prompt_len": 1000},
    {**Q, "nbits": 2, "axis_key": -1, "q_group_size": 32},
    {**Q, "backend": "hqq", "nbits": 3},
    {**Q, "backend": "hqq", "nbits": 1, "axis_key": 1, "residual_length": 16},
    {**Q, "backend": "fp8"},
])
def test_verify_tensor_plan_allocates_the_predicted_bytes(options: dict[str, object]) -> None:
    from kvplan.engines import get_engine, parse_version
    from kvplan.engines.protocol import make_engine_options
    from kvplan.dtypes import resolve_kv_dtype

    spec = kvplan.load_model("meta-llama/Llama-3.2-1B-Instruct")
    engine = get_engine("hf")
    layout = engine.layout(spec, resolve_kv_dtype("auto", spec.dtype), parse_version("5.23"),
                           make_engine_options(**options))
    plan = engine.tensor_plan(spec, layout, 4, 1100)
    assert sum(b.nbytes for b in plan.buffers) == layout.total_bytes(1100, 4)
    assert all(info.attend == 0 for info in plan.layers)  # no decode step on quantized states
