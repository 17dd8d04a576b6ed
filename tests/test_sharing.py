"""Shared prefixes, parallel samples and beams in ``estimate``: golden cases from the engines' code,
and the invariants any sharing rule keeps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan
from kvplan.errors import UsageError
from conftest import dense, estimate_row, interleaved

LLAMA_31_8B = dense("meta-llama/Llama-3.1-8B", 32, 8, 128, max_pos=131072)
PER_TOKEN = 131072  # 32 layers x 8 KV heads x 128 x (K + V) x 2 B
BLOCK_BYTES = 16 * PER_TOKEN  # one vLLM block (16 tokens) across all layers
# gpt-oss-like: sliding window 4096 on every other layer (a model type SGLang windows)
GEMMA_LIKE = interleaved("test/swa-like", "gpt_oss", 8, 2, 4096, 4, 128)
ENGINES = ("vllm", "sglang", "trtllm", "llamacpp", "hf")


def row(spec=LLAMA_31_8B, **kw):
    kw.setdefault("batches", [1])
    return kvplan.estimate(spec, **kw).rows[0]


def test_vllm_64_requests_store_a_4096_token_prefix_as_256_blocks_once():
    # vllm/v1/core/kv_cache_manager.py get_computed_blocks: full blocks of the common prefix are
    # referenced by every request; 4,096 / 16 = 256 blocks stored once instead of 64 times.
    r = row(contexts=[8192], batches=[64], shared_prefix=4096)
    plain = 64 * 512 * BLOCK_BYTES
    assert r.sharing.kv_bytes_plain == plain
    assert r.kv_bytes == plain - 63 * 256 * BLOCK_BYTES
    assert r.kv_bytes == (256 + 64 * 256) * BLOCK_BYTES


def test_vllm_prefix_hit_is_capped_at_prompt_minus_one():
    # get_computed_blocks: max_cache_hit_length = num_tokens - 1. A prompt that is exactly the
    # 4,096-token prefix shares 255 blocks: its last block is recomputed by every request.
    r = row(prompt_len=4096, output_len=1024, batches=[2], shared_prefix=4096)
    assert r.kv_bytes == (255 + 2 * (320 - 255)) * BLOCK_BYTES


def test_vllm_partial_prefix_block_is_per_request():
    # prefix 4,100 tokens = 256 full blocks + 4 tokens; only the 256 full blocks are shared
    r = row(prompt_len=6000, output_len=0, batches=[8], shared_prefix=4100)
    per_seq = -(-6000 // 16)
    assert r.kv_bytes == (256 + 8 * (per_seq - 256)) * BLOCK_BYTES


def test_vllm_n4_at_4k_prompt_1k_output():
    # vllm/v1/engine/parallel_sampling.py: n child requests with one prompt; each hits the cached
    # prompt for at most 4,095 tokens = 255 full blocks (get_computed_blocks), so the block with the
    # prompt's last token is recomputed per child: 255 + 4 x (320 - 255) = 515 blocks, not the
    # 256 + 4 x 64 = 512 of "prompt once plus 4 x output".
    r = row(prompt_len=4096, output_len=1024, n=4)
    assert r.kv_bytes == 515 * BLOCK_BYTES
    assert r.sharing.sequences == 4
    assert r.sharing.kv_bytes_plain == 4 * 320 * BLOCK_BYTES


def test_vllm_n_with_a_prompt_not_block_aligned_shares_every_full_prompt_block():
    r = row(prompt_len=4100, output_len=1000, n=4)  # 4,099 // 16 = 256 full blocks shared
    assert r.kv_bytes == (256 + 4 * (-(-5100 // 16) - 256)) * BLOCK_BYTES


def test_vllm_beams_share_all_full_prompt_blocks():
    # LLM.beam_search: each beam is a request of prompt + its tokens, longer than the prompt, so
    # all 256 full prompt blocks hit the cache
    r = row(prompt_len=4096, output_len=1024, beam_width=4)
    assert r.kv_bytes == (256 + 4 * 64) * BLOCK_BYTES


def test_hf_expands_rows_for_beams_and_samples():
    # generation/utils.py _expand_inputs_for_generation: batch x num_beams rows, each a full cache
    for kw in ({"beam_width": 4}, {"n": 4}):
        r = row(engine="hf", contexts=[4096], batches=[8], **kw)
        assert r.kv_bytes == 32 * 4096 * PER_TOKEN == r.sharing.kv_bytes_plain


def test_hf_and_llamacpp_store_a_prefix_per_request():
    for engine in ("hf", "llamacpp"):
        r = row(engine=engine, prompt_len=4096, output_len=1024, batches=[8], shared_prefix=4096)
        assert r.kv_bytes == r.sharing.kv_bytes_plain


def test_sglang_shares_at_token_granularity():
    # radix_cache.py match_prefix, page size 1; schedule_batch.py caps the match at input_len - 1
    r = row(engine="sglang", prompt_len=5000, output_len=1000, batches=[10], shared_prefix=4001)
    assert r.kv_bytes == (4001 + 10 * (6000 - 4001)) * PER_TOKEN
    r = row(engine="sglang", prompt_len=4096, output_len=1024, n=4)
    assert r.kv_bytes == (4095 + 4 * (5120 - 4095)) * PER_TOKEN


def test_trtllm_reuses_whole_blocks_and_shares_context_blocks_but_the_last_among_beams():
    # kvCacheManager.cpp: keys on inputLength - 1 tokens, full blocks of 32 reused; beams share
    # numContextBlocks - 1 blocks, the last context block and generation blocks are per beam
    per_block = 32 * PER_TOKEN
    r = row(engine="trtllm", prompt_len=5000, output_len=0, batches=[4], shared_prefix=4100)
    assert r.kv_bytes == (128 + 4 * (157 - 128)) * per_block  # 4,100 // 32 = 128; ceil(5000 / 32) = 157
    r = row(engine="trtllm", prompt_len=4096, output_len=1024, beam_width=4)
    assert r.kv_bytes == (127 + 4 * (160 - 127)) * per_block


@pytest.mark.parametrize(("engine", "flag", "field"), [
    ("llamacpp", {"n": 2}, "n"), ("llamacpp", {"beam_width": 2}, "beam_width"),
    ("sglang", {"beam_width": 2}, "beam_width"), ("trtllm", {"n": 2}, "n"),
])
def test_engines_without_a_rule_refuse_the_flag_by_name(engine, flag, field):
    with pytest.raises(UsageError) as err:
        row(engine=engine, contexts=[4096], **flag)
    assert err.value.field == field


@pytest.mark.parametrize(("kw", "field"), [
    ({"prompt_len": 100, "shared_prefix": 200}, "shared_prefix"),
    ({"prompt_len": 100, "output_len": 10, "contexts": [4096]}, "contexts"),
    ({"contexts": [100], "output_len": 100}, "output_len"),
    ({"contexts": [4096], "n": 2, "beam_width": 2}, "beam_width"),
    ({"contexts": [4096], "n": 0}, "n"),
])
def test_bad_sharing_values_name_their_field(kw, field):
    with pytest.raises(UsageError) as err:
        row(**kw)
    assert err.value.field == field


def test_sliding_layers_share_only_the_prefix_inside_their_window():
    # vLLM SlidingWindowManager frees blocks that left the window: at 8,192 + 4,096 tokens the
    # window (4,096) is past a 4,096-token prefix, so the sliding layers share nothing
    far = row(GEMMA_LIKE, prompt_len=8192, output_len=4096, batches=[4], shared_prefix=4096, by_layer=True)
    sliding = [lay for lay in far.layers if lay.kind == "sliding"]
    full = [lay for lay in far.layers if lay.kind == "full"]
    plain_sliding = row(GEMMA_LIKE, contexts=[12288], batches=[4], by_layer=True).layers
    assert sliding[0].tokens_held == next(lay for lay in plain_sliding if lay.kind == "sliding").tokens_held
    assert full[0].tokens_held == 256 * 16 + 4 * (12288 - 4096)


def test_plain_rows_have_no_sharing_fields():
    r = kvplan.estimate(LLAMA_31_8B, contexts=[4096])
    assert r.rows[0].sharing is None and "sharing" not in r.to_dict()
    assert "kv_bytes_plain" not in r.to_dict()["rows"][0]


def test_json_fields():
    doc = kvplan.estimate(LLAMA_31_8B, prompt_len=4096, output_len=1024, n=4).to_dict(explain=True)
    first = doc["rows"][0]
    assert {"prompt_len", "output_len", "sequences", "kv_bytes_plain", "saving_bytes", "saving_fraction"} <= set(first)
    assert first["saving_bytes"] == first["kv_bytes_plain"] - first["kv_bytes"]
    assert doc["sharing"] == {"shared_prefix": 0, "n": 4, "beam_width": 1}
    term = doc["sharing_terms"][0]
    assert term["per_request_tokens"] == 255 * 16 and term["per_sequence_tokens"] == 65 * 16
    assert term["tokens"] == 515 * 16 and term["plain_tokens"] == 4 * 320 * 16


# ---- invariants -------------------------------------------------------------------------------

SPECS = (LLAMA_31_8B, GEMMA_LIKE)
shapes = st.tuples(st.integers(1, 20_000), st.integers(0, 5_000), st.floats(0, 1), st.integers(1, 64))


@settings(max_examples=60, deadline=None)
@given(shape=shapes, engine=st.sampled_from(ENGINES), spec=st.sampled_from(SPECS))
def test_sharing_never_costs_more(shape, engine, spec):
    prompt, output, share, batch = shape
    r = estimate_row(spec, batch, engine=engine, prompt_len=prompt, output_len=output, shared_prefix=int(prompt * share))
    assert 0 < r.kv_bytes <= r.sharing.kv_bytes_plain


@settings(max_examples=40, deadline=None)
@given(shape=shapes, engine=st.sampled_from(ENGINES), spec=st.sampled_from(SPECS))
def test_no_prefix_is_the_plain_figure(shape, engine, spec):
    prompt, output, _, batch = shape
    r = estimate_row(spec, batch, engine=engine, prompt_len=prompt, output_len=output, shared_prefix=0)
    assert r.kv_bytes == r.sharing.kv_bytes_plain
    assert r.kv_bytes == kvplan.estimate(spec, contexts=[prompt + output], batches=[batch], engine=engine).rows[0].kv_bytes


@settings(max_examples=40, deadline=None)
@given(shape=shapes, engine=st.sampled_from(("vllm", "sglang", "trtllm")), spec=st.sampled_from(SPECS))
def test_the_saving_grows_with_batch(shape, engine, spec):
    prompt, output, share, batch = shape
    prefix = int(prompt * share)
    small = estimate_row(spec, batch, engine=engine, prompt_len=prompt, output_len=output, shared_prefix=prefix)
    big = estimate_row(spec, batch + 1, engine=engine, prompt_len=prompt, output_len=output, shared_prefix=prefix)
    assert big.sharing.kv_bytes_plain - big.kv_bytes >= small.sharing.kv_bytes_plain - small.kv_bytes


@settings(max_examples=40, deadline=None)
@given(shape=shapes, engine=st.sampled_from(("vllm", "sglang")), n=st.integers(2, 8))
def test_samples_never_cost_more_than_separate_sequences(shape, engine, n):
    prompt, output, _, batch = shape
    r = kvplan.estimate(LLAMA_31_8B, prompt_len=prompt, output_len=output, n=n, batches=[batch],
                        engine=engine).rows[0]
    assert r.kv_bytes <= r.sharing.kv_bytes_plain


@settings(max_examples=40, deadline=None)
@given(shape=shapes, engine=st.sampled_from(("vllm", "sglang")))
def test_sliding_layers_saving_is_capped_by_the_window(shape, engine):
    prompt, output, share, batch = shape
    prefix = int(prompt * share)
    r = kvplan.estimate(GEMMA_LIKE, prompt_len=prompt, output_len=output, shared_prefix=prefix, batches=[batch],
                        engine=engine, by_layer=True).rows[0]
    plain = kvplan.estimate(GEMMA_LIKE, contexts=[prompt + output], batches=[batch], engine=engine,
                            by_layer=True).rows[0]
    window, slack = 4096, 16  # a block of slack: vLLM's window starts in a partial block
    for shared_layer, plain_layer in zip(r.layers, plain.layers):
        if shared_layer.kind == "sliding":
            saved = plain_layer.tokens_held - shared_layer.tokens_held
            assert 0 <= saved <= (batch - 1) * (window + slack)


# ---- CLI --------------------------------------------------------------------------------------

def _cli(capsys, *args: str) -> tuple[int, str, str]:
    from kvplan.cli import main

    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_estimate_shared_prefix_json(capsys):
    code, out, _ = _cli(capsys, "estimate", "meta-llama/Llama-3.1-8B", "-b", "64", "--prompt-len", "6k",
                        "--output-len", "2k", "--shared-prefix", "4k", "-f", "json")
    assert code == 0
    first = __import__("json").loads(out)["rows"][0]
    assert first["context"] == 8192 and first["prompt_len"] == 6144
    assert first["kv_bytes"] == (256 + 64 * 256) * BLOCK_BYTES


def test_cli_explain_shows_the_sharing_arithmetic(capsys):
    code, out, _ = _cli(capsys, "estimate", "meta-llama/Llama-3.1-8B", "-c", "5k", "--prompt-len", "4k",
                        "--n", "4", "--explain")
    assert code == 0
    assert "4,080 per request" in out and "plain" in out and "saving" in out


def test_cli_refused_flag_is_one_line(capsys):
    code, _, err = _cli(capsys, "estimate", "meta-llama/Llama-3.1-8B", "-c", "4k", "--beam-width", "4",
                        "--engine", "llamacpp")
    assert code == 2 and err.count("\n") == 1 and "beam" in err


def test_vllm_hybrid_hit_is_a_multiple_of_the_lcm_of_block_sizes():
    # kv_cache_coordinator.py HybridKVCacheCoordinator: the hit length is a multiple of the lcm of
    # the groups' block sizes. Sliding layers with half the page get blocks of 32 (unify_pages), so
    # a 4,112-token prefix (257 blocks of 16) is shared as 4,096 tokens in the full layers.
    from kvplan.spec import LayerSpec, ModelSpec, group_layers

    layers = [LayerSpec(kind="full", kv_heads=8, head_dim=128) if i % 2 else
              LayerSpec(kind="sliding", kv_heads=4, head_dim=128, window=1024) for i in range(8)]
    spec = ModelSpec(id="test/hybrid-pages", model_type="gpt_oss", layers=group_layers(layers))
    r = row(spec, prompt_len=8192, output_len=0, batches=[4], shared_prefix=4112, by_layer=True)
    full = next(lay for lay in r.layers if lay.kind == "full")
    assert full.tokens_held == 4096 + 4 * (8192 - 4096)
