"""Properties every engine profile must keep, over random architectures."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan
from kvplan.spec import LayerSpec, ModelSpec

ENGINES = ["vllm", "sglang", "trtllm", "hf", "hf-static", "llamacpp"]
HALVING_ENGINES = ["vllm", "sglang", "trtllm"]  # engines with a plain 1-byte fp8 cache

engines = st.sampled_from(ENGINES)
contexts = st.integers(min_value=1, max_value=300_000)
batches = st.integers(min_value=1, max_value=256)
head_dims = st.sampled_from([64, 80, 96, 128, 256])


def spec_with(kv_heads: int, head_dim: int, layers: int, kind: str = "full", window: int | None = None) -> ModelSpec:
    extra = {"window": window} if kind == "sliding" else {"chunk": window} if kind == "chunked" else {}
    return ModelSpec(id="t", model_type="t", layers=(
        LayerSpec(kind=kind, count=layers, kv_heads=kv_heads, head_dim=head_dim, **extra),))


def kv_bytes(spec: ModelSpec, engine: str, context: int, batch: int = 1, dtype: str = "auto") -> int:
    return kvplan.estimate(spec, contexts=[context], batches=[batch], kv_dtypes=[dtype], engine=engine).rows[0].kv_bytes


@settings(max_examples=60, deadline=None)
@given(engine=engines, heads=st.integers(2, 64), group=st.integers(1, 8), head_dim=head_dims,
       layers=st.integers(1, 96), context=contexts, batch=batches)
def test_mqa_le_gqa_le_mha(engine, heads, group, head_dim, layers, context, batch):
    kv_heads = max(1, heads // group)
    mqa = kv_bytes(spec_with(1, head_dim, layers), engine, context, batch)
    gqa = kv_bytes(spec_with(kv_heads, head_dim, layers), engine, context, batch)
    mha = kv_bytes(spec_with(heads, head_dim, layers), engine, context, batch)
    assert mqa <= gqa <= mha


@settings(max_examples=60, deadline=None)
@given(engine=engines, head_dim=head_dims, layers=st.integers(1, 64), c1=contexts, c2=contexts,
       b1=batches, b2=batches, kind=st.sampled_from(["full", "sliding", "chunked"]),
       window=st.integers(16, 16384))
def test_monotone_in_batch_and_context(engine, head_dim, layers, c1, c2, b1, b2, kind, window):
    spec = spec_with(8, head_dim, layers, kind, window)
    (c1, c2), (b1, b2) = sorted((c1, c2)), sorted((b1, b2))
    # Full layers grow with context everywhere. Windowed layers need not: a chunked layer drops the
    # finished chunk, and a paged sliding layer holds one block more or less as the window crosses
    # block boundaries (see test_vllm_sliding_blocks_stay_within_one_block).
    if kind == "full" or (kind == "sliding" and engine in ("hf", "hf-static", "llamacpp")):
        assert kv_bytes(spec, engine, c1, b1) <= kv_bytes(spec, engine, c2, b1)
    assert kv_bytes(spec, engine, c1, b1) <= kv_bytes(spec, engine, c1, b2)


@settings(max_examples=100, deadline=None)
@given(window=st.integers(2, 8192), block=st.sampled_from([16, 32, 64]), context=st.integers(1, 200_000),
       asynchronous=st.booleans())
def test_vllm_sliding_blocks_stay_within_one_block(window, block, context, asynchronous):
    # While the token at position `context` is written, vLLM has computed context - lag tokens (lag 1
    # synchronous, 2 async) and frees the blocks made only of tokens before computed - window + 1: the
    # last window - 1 + lag tokens stay, in cdiv(window - 1 + lag, block) blocks or one more
    lag = 2 if asynchronous else 1
    spec = spec_with(1, 64, 1, "sliding", window)
    per_token = 1 * (64 + 64) * 2
    held = kvplan.estimate(spec, contexts=[context], block_size=block,
                           async_scheduling=asynchronous).rows[0].kv_bytes // per_token
    assert held % block == 0
    blocks = held // block
    kept = window - 1 + lag
    if context >= kept:
        low = -(-kept // block)
        assert low <= blocks <= low + 1
    else:
        assert blocks == -(-context // block)


@settings(max_examples=60, deadline=None)
@given(engine=engines, head_dim=head_dims, layers=st.integers(1, 64), window=st.integers(16, 8192),
       context=st.integers(1, 1_000_000), batch=batches)
def test_a_window_caps_growth(engine, head_dim, layers, window, context, batch):
    sliding = kv_bytes(spec_with(8, head_dim, layers, "sliding", window), engine, context, batch)
    full = kv_bytes(spec_with(8, head_dim, layers), engine, context, batch)
    assert sliding <= full
    if engine in ("vllm", "hf", "hf-static", "trtllm"):
        per_token_layer = 8 * head_dim * 2 * 2
        # never more than the window plus one partial block at each end, whatever the context
        cap = layers * batch * per_token_layer * (window + 2 * 32)
        assert sliding <= cap


@settings(max_examples=60, deadline=None)
@given(engine=st.sampled_from(HALVING_ENGINES), head_dim=head_dims, kv_heads=st.integers(1, 64),
       layers=st.integers(1, 128), context=contexts, batch=batches)
def test_fp8_is_half_of_bf16(engine, head_dim, kv_heads, layers, context, batch):
    spec = spec_with(kv_heads, head_dim, layers)
    assert 2 * kv_bytes(spec, engine, context, batch, "fp8_e4m3" if engine == "sglang" else "fp8") == \
        kv_bytes(spec, engine, context, batch, "bf16")


@settings(max_examples=60, deadline=None)
@given(heads=st.integers(1, 64), head_dim=head_dims, v_dim=head_dims, layers=st.integers(1, 128),
       context=contexts, batch=batches)
def test_full_attention_is_per_token_times_tokens(heads, head_dim, v_dim, layers, context, batch):
    spec = ModelSpec(id="t", model_type="t", layers=(
        LayerSpec(kind="full", count=layers, kv_heads=heads, head_dim=head_dim, v_head_dim=v_dim),))
    per_token = layers * heads * (head_dim + v_dim) * 2
    assert kv_bytes(spec, "hf", context, batch) == per_token * context * batch
    row = kvplan.estimate(spec, contexts=[context], batches=[batch], engine="vllm").rows[0]
    assert row.kv_bytes == per_token * (-(-context // 16) * 16) * batch


@settings(max_examples=40, deadline=None)
@given(engine=engines, layers=st.integers(1, 64), context=contexts, batch=batches)
def test_by_layer_rows_add_up(engine, layers, context, batch):
    spec = ModelSpec(id="t", model_type="gemma2", layers=(
        LayerSpec(kind="sliding", count=layers, kv_heads=4, head_dim=128, window=512),
        LayerSpec(kind="full", count=layers, kv_heads=4, head_dim=128)))
    row = kvplan.estimate(spec, contexts=[context], batches=[batch], engine=engine, by_layer=True).rows[0]
    assert sum(layer.bytes for layer in row.layers) == row.kv_bytes
    assert len(row.layers) == 2 * layers
