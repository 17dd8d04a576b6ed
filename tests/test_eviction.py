"""Eviction budgets on the hf engine: golden numbers from the papers' reference code and NVIDIA kvpress."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvplan
from kvplan.engines.hf.eviction import PyramidKept, RatioKept, parse_evict
from kvplan.errors import UsageError

if TYPE_CHECKING:
    from kvplan.estimate import EstimateRow

LLAMA = "meta-llama/Llama-3.1-8B"  # 32 layers x 8 KV heads x (128 + 128) x 2 B = 131,072 B per token
LLAMA2 = "meta-llama/Llama-2-7b-hf"  # 32 layers x 32 heads x 256 x 2 B = 524,288 B per token


def _row(model: str, context: int, batch: int = 1, by_layer: bool = False, **options: object) -> EstimateRow:
    return kvplan.estimate(model, contexts=[context], batches=[batch], engine="hf", by_layer=by_layer,
                           engine_options=options).rows[0]


def test_streaming_llm_sink_and_window() -> None:
    # mit-han-lab/streaming-llm StartRecentKVCache: cache_size = start_size + recent_size
    evict = parse_evict("sink=4,window=4092")
    assert evict == (("sink", 4), ("window", 4092))
    assert _row(LLAMA, 1_048_576, evict=evict).kv_bytes == 4096 * 131_072
    assert _row(LLAMA, 3000, evict=evict).kv_bytes == 3000 * 131_072  # below the budget: nothing evicted


def test_streaming_llm_reference_default() -> None:
    # StartRecentKVCache(start_size=4, recent_size=512): 516 tokens
    assert _row(LLAMA2, 4096, evict=parse_evict("sink=4,window=512")).kv_bytes == 516 * 524_288


def test_h2o_reference_default() -> None:
    # FMInference/H2O H2OKVCache_LayerWise(hh_size=4, recent_size=512): cache_size 516, batch-linear
    row = _row(LLAMA2, 2048, 3, evict=parse_evict("heavy=4,recent=512"))
    assert row.kv_bytes == 3 * 516 * 524_288


def test_sliding_layers_keep_their_window() -> None:
    # Gemma 3 27B: 5 sliding (1,024 window, transformers keeps 1,023) per full layer
    plain = _row("google/gemma-3-27b-it", 131072, by_layer=True)
    evicted = _row("google/gemma-3-27b-it", 131072, by_layer=True, evict=parse_evict("sink=4,window=1020"))
    for before, after in zip(plain.layers, evicted.layers):
        assert after.tokens_held == (before.tokens_held if before.kind == "sliding" else 1024)


def test_output_says_answers_change_and_cites_the_method() -> None:
    result = kvplan.estimate(LLAMA, contexts=[8192], engine="hf",
                             engine_options={"evict": parse_evict("sink=4,window=1020")})
    note = next(a for a in result.assumptions if a.startswith("eviction changes the model's answers"))
    assert "StreamingLLM" in note and "2309.17453" in note


def test_kvpress_compute_n_kept_rounding() -> None:
    # kvpress/utils.py compute_n_kept: max(1, int(k_len * (1 - ratio))) in floats:
    # 1 - 0.9 = 0.09999999999999998, so 100 tokens keep 9, not 10; 10 tokens keep max(1, 0) = 1
    assert RatioKept(0.9).kept(100) == 9
    assert RatioKept(0.9).kept(10) == 1
    assert RatioKept(0.7).kept(1000) == 300
    assert RatioKept(0.5).kept(131072) == 65536


def test_snapkv_compresses_the_prompt_and_keeps_decoded_tokens() -> None:
    # prompt 1,000 at ratio 0.7 keeps 300; the 500 decoded tokens are appended whole
    row = _row(LLAMA, 1500, press="snapkv", compression_ratio=0.7, prompt_len=1000)
    assert row.kv_bytes == (300 + 500) * 131_072
    # no prompt length: the whole context is the prompt
    assert _row(LLAMA, 131072, press="snapkv", compression_ratio=0.5).kv_bytes == 65536 * 131_072


def test_pyramidkv_layer_budgets() -> None:
    # PyramidKVPress.get_layer_budget, q_len 1,000, ratio 0.5, window 64, beta 20, 32 layers:
    # capacity 564, min 25, max 975 >= 936 so max 936, min 64; steps 872 / 31
    budgets = [PyramidKept(0.5, layer, 32).kept(1000) for layer in range(32)]
    assert budgets[0] == 936 and budgets[15] == 514 and budgets[31] == 64
    row = _row(LLAMA, 1000, by_layer=True, press="pyramidkv", compression_ratio=0.5)
    assert [layer.tokens_held for layer in row.layers] == budgets
    assert row.kv_bytes == sum(budgets) * 4096
    # too short for a pyramid: kvpress falls back to SnapKV's budget, round(q_len x (1 - ratio))
    assert PyramidKept(0.5, 3, 32).kept(100) == 50


def test_adakv_masks_and_saves_nothing() -> None:
    plain = _row(LLAMA, 8192).kv_bytes
    result = kvplan.estimate(LLAMA, contexts=[8192], engine="hf",
                             engine_options={"press": "adakv", "compression_ratio": 0.5})
    assert result.rows[0].kv_bytes == plain
    assert any("not smaller" in a for a in result.assumptions)


@pytest.mark.parametrize(("options", "field"), [
    ({"evict": (("sink", 4),)}, "evict"),
    ({"evict": (("sink", 4), ("window", 0))}, "evict"),
    ({"press": "snapkv"}, "compression_ratio"),
    ({"press": "snapkv", "compression_ratio": 1.0}, "compression_ratio"),
    ({"compression_ratio": 0.5}, "press"),
    ({"press": "nope", "compression_ratio": 0.5}, "press"),
    ({"press": "snapkv", "compression_ratio": 0.5, "evict": (("sink", 4), ("window", 8))}, "press"),
    ({"kv_cache": "quantized", "evict": (("sink", 4), ("window", 8))}, "evict"),
])
def test_refusals(options: dict[str, object], field: str) -> None:
    with pytest.raises(UsageError) as refused:
        kvplan.estimate(LLAMA, contexts=[8192], engine="hf", engine_options=options)
    assert refused.value.field == field


def test_press_on_gemma3_compresses_the_full_layers_only() -> None:
    # kvpress 0.5.5 BasePress.__call__: for Gemma3ForConditionalGeneration (model_type gemma3) the hooks skip
    # layers whose self_attn.is_sliding; the 10 full layers of Gemma 3 27B keep int(8,192 x 0.5) = 4,096
    plain = _row("google/gemma-3-27b-it", 8192, by_layer=True)
    pressed = _row("google/gemma-3-27b-it", 8192, by_layer=True, press="snapkv", compression_ratio=0.5)
    full = [g for g in pressed.layers if g.kind == "full"]
    assert full and all(g.tokens_held == 4096 for g in full)
    sliding_before = [g.tokens_held for g in plain.layers if g.kind == "sliding"]
    assert [g.tokens_held for g in pressed.layers if g.kind == "sliding"] == sliding_before
    result = kvplan.estimate("google/gemma-3-27b-it", contexts=[8192], engine="hf",
                             engine_options={"press": "snapkv", "compression_ratio": 0.5})
    assert any("skips Gemma 3's sliding-window layers" in a for a in result.assumptions)
    # PyramidKV: layer 5 (the first full layer) has the budget of index 5 of 62
    pyramid = _row("google/gemma-3-27b-it", 8192, by_layer=True, press="pyramidkv", compression_ratio=0.5)
    first_full = next(g for g in pyramid.layers if g.kind == "full")
    assert first_full.tokens_held == PyramidKept(0.5, 5, 62).kept(8192)


def test_press_refuses_other_sliding_models_with_kvpress_reason_and_other_engines() -> None:
    for model in ("google/gemma-3-1b-it", "google/gemma-2-9b-it"):  # Gemma3ForCausalLM, Gemma2: hooked
        with pytest.raises(UsageError) as refused:
            kvplan.estimate(model, contexts=[8192], engine="hf",
                            engine_options={"press": "snapkv", "compression_ratio": 0.5})
        assert refused.value.field == "press" and "Gemma3ForConditionalGeneration" in str(refused.value)
    with pytest.raises(UsageError) as refused:
        kvplan.estimate(LLAMA, contexts=[8192], engine="vllm", engine_options={"evict": parse_evict("sink=4,window=8")})
    assert refused.value.field == "evict"


def test_parse_evict_refuses_a_bare_value() -> None:
    with pytest.raises(UsageError) as refused:
        parse_evict("4,4092")
    assert refused.value.field == "evict"


@given(context=st.integers(1, 2_000_000), sink=st.integers(0, 64), window=st.integers(1, 100_000))
def test_eviction_never_holds_more_than_the_plain_cache(context: int, sink: int, window: int) -> None:
    evicted = _row(LLAMA, context, evict=(("sink", sink), ("window", window))).kv_bytes
    assert evicted == min(context, sink + window) * 131_072 <= _row(LLAMA, context).kv_bytes


@given(prompt=st.integers(1, 100_000), ratio=st.floats(0, 0.99))
def test_press_keeps_at_least_one_and_at_most_the_prompt(prompt: int, ratio: float) -> None:
    kept = RatioKept(ratio).kept(prompt)
    assert 1 <= kept <= prompt
