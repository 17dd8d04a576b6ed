"""Golden numbers from public facts, each with its source, through every engine profile."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.errors import UsageError
from kvplan.spec import LayerSpec, ModelSpec, group_layers
from conftest import DATA, dense, interleaved

LLAMA_31_8B = dense("meta-llama/Llama-3.1-8B", 32, 8, 128, max_pos=131072)
DEEPSEEK_V3 = ModelSpec(id="deepseek-ai/DeepSeek-V3", model_type="deepseek_v3", layers=(
    LayerSpec(kind="mla", count=61, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
              v_head_dim=128, num_heads=128),))


def kv(spec, context, batch=1, dtype="auto", engine="vllm", **kw):
    return kvplan.estimate(spec, contexts=[context], batches=[batch], kv_dtypes=[dtype], engine=engine, **kw).rows[0]


def test_llama31_8b_is_128_kib_per_token():
    # config: 32 layers x 8 KV heads x 128 head dim x (K + V) x 2 B = 131,072 B per token
    for engine in ("vllm", "sglang", "trtllm", "hf"):
        assert kv(LLAMA_31_8B, 8192, engine=engine).bytes_per_token == 131072


def test_llama2_70b_and_mixtral_per_token_the_seed_tables_got_wrong():
    # Both use 8 KV heads (GQA): 80 x 8 x 128 x 2 x 2 = 320 KiB and 32 x 8 x 128 x 2 x 2 = 128 KiB,
    # not the 1.25 MB and 512 KB of seed 004; one 4K request of Llama-2-70B is 1.25 GiB, not 20 GB.
    llama2_70b = dense("meta-llama/Llama-2-70b-hf", 80, 8, 128)
    assert kv(llama2_70b, 4096, dtype="float16").bytes_per_token == 320 * 1024
    assert kv(llama2_70b, 4096, dtype="float16").kv_bytes == 1_342_177_280
    assert kv(dense("mistralai/Mixtral-8x7B-v0.1", 32, 8, 128), 4096).bytes_per_token == 128 * 1024


def test_falcon_7b_multi_query_is_8_kib_per_token():
    # falcon-7b: 32 layers, multi_query (1 KV head), head_dim 4544 / 71 = 64: 32 x 1 x 64 x 2 x 2
    assert kv(dense("tiiuae/falcon-7b", 32, 1, 64, model_type="falcon"), 2048, engine="hf").bytes_per_token == 8192


def test_deepseek_v3_latent_and_transformers_4_expansion():
    # 61 MLA layers x (512 + 64) x 2 B = 70,272 B per token (vLLM MLAAttentionSpec, head_size 576)
    assert kv(DEEPSEEK_V3, 4096).bytes_per_token == 70272
    assert kv(DEEPSEEK_V3, 4096, engine="hf").bytes_per_token == 70272
    assert kv(DEEPSEEK_V3, 4096, dtype="fp8").bytes_per_token == 35136
    assert kv(DEEPSEEK_V3, 4096, dtype="fp8_ds_mla").bytes_per_token == 61 * 656
    # transformers 4.x: 128 heads x (192 + 128) x 2 B per layer = 81,920 B; 71x the latent
    old = kv(DEEPSEEK_V3, 4096, engine="hf", engine_version="4.57").bytes_per_token
    assert old == 61 * 81920 and round(old / 70272, 1) == 71.1


def test_vllm_pages_whole_blocks():
    # 1000 tokens occupy ceil(1000 / 16) = 63 blocks = 1008 token slots per layer
    row = kv(LLAMA_31_8B, 1000)
    assert row.kv_bytes == 1008 * 131072
    assert kv(LLAMA_31_8B, 1000, engine="hf").kv_bytes == 1000 * 131072
    # MLA on Hopper: FlashMLA blocks of 64
    assert kv(DEEPSEEK_V3, 1000).kv_bytes == 1024 * 70272
    assert kv(DEEPSEEK_V3, 1000, block_size=16).kv_bytes == 1008 * 70272


def test_vllm_sliding_layers_hold_the_window_blocks():
    gpt_oss_20b = interleaved("openai/gpt-oss-20b", "gpt_oss", 24, 2, 128, 8, 64)
    # While the token at position 1024 is written, 1023 tokens are computed (synchronous scheduling):
    # skipped = 1023 - 128 + 1 = 896 -> blocks 56..63, 8 blocks = 128 tokens. Async scheduling (the
    # default from 0.23) frees one step later: 1022 computed, 895 skipped -> 9 blocks. vLLM 0.33's own
    # KVCacheManager holds exactly these (tests/data/vllm_pool_oracle_dev.json, gpt-oss-20b decode_at 1024).
    def held(**kw):
        row = kvplan.estimate(gpt_oss_20b, contexts=[1024], by_layer=True, **kw).rows[0]
        return {layer.kind: layer.tokens_held for layer in row.layers}

    assert held(async_scheduling=False) == {"sliding": 128, "full": 1024}
    assert held(engine_version="0.11") == {"sliding": 128, "full": 1024}  # async off by default in 0.11.0
    assert held() == held(async_scheduling=True) == {"sliding": 144, "full": 1024}


def test_transformers_sliding_layers_keep_window_minus_one():
    # transformers DynamicSlidingWindowLayer keeps window - 1 tokens (oracle: gemma-2-9b-it)
    gemma2 = interleaved("google/gemma-2-9b-it", "gemma2", 42, 2, 4096, 8, 256)
    assert kv(gemma2, 32768, engine="hf").kv_bytes == 21 * 8192 * (32768 + 4095)
    assert kv(gemma2, 32768, engine="hf-static").kv_bytes == 21 * 8192 * (32768 + 4096)
    # before 4.56 Gemma 2 generated with the static HybridCache
    assert kv(gemma2, 32768, engine="hf", engine_version="4.50").kv_bytes == 21 * 8192 * (32768 + 4096)
    mistral = ModelSpec(id="m", model_type="mistral", layers=(
        LayerSpec(kind="sliding", count=32, kv_heads=8, head_dim=128, window=4096),))
    assert kv(mistral, 8192, engine="hf", engine_version="4.55").kv_bytes == 32 * 4096 * 8192


def test_llamacpp_cells_and_quantised_types_match_pr_21551():
    # llama.cpp PR #21551 (Mistral-Small-24B architecture, 6656 cells): f16 1040.00 MiB,
    # q8_0 552.50 MiB, q4_0 292.50 MiB
    small = dense("mistralai/Mistral-Small-24B-Base-2501", 40, 8, 128, model_type="mistral")
    mib = {d: kv(small, 6656, engine="llamacpp", dtype=d).kv_bytes / 2**20 for d in ("f16", "q8_0", "q4_0")}
    assert mib == {"f16": 1040.0, "q8_0": 552.5, "q4_0": 292.5}
    # n_ctx is padded to a multiple of 256 cells
    assert kv(small, 1000, engine="llamacpp", dtype="f16").kv_bytes == 1024 * 163840


def test_llamacpp_swa_cache_is_window_times_sequences_plus_ubatch():
    gemma3 = interleaved("google/gemma-3-27b-it", "gemma3", 62, 6, 1024, 16, 128)
    row = kvplan.estimate(gemma3, contexts=[32768], batches=[4], engine="llamacpp", by_layer=True).rows[0]
    held = {layer.kind: layer.tokens_held for layer in row.layers}
    # unified cache: 4 x 32768 cells; SWA: pad256(1024 x 4 + 512) = 4608 cells
    assert held == {"sliding": 4608, "full": 131072}


def test_recurrent_state_differs_by_engine():
    # mamba-2.8b, per layer and sequence: transformers 368,640 B (conv 5120x4 bf16 + ssm 5120x16 fp32),
    # vLLM 194,560 B (conv 5120x3 + ssm 5120x16, bf16), llama.cpp 389,120 B (f32, conv d_conv - 1)
    mamba = ModelSpec(id="state-spaces/mamba-2.8b", model_type="mamba", layers=(
        LayerSpec(kind="recurrent", count=64, mixer="mamba", conv_dim=5120, conv_kernel=4, ssm_state=(5120, 16)),))
    for engine, per_layer in (("hf", 368640), ("vllm", 194560), ("llamacpp", 389120)):
        for context in (1024, 65536):
            assert kv(mamba, context, batch=3, engine=engine).kv_bytes == 3 * 64 * per_layer
    # transformers 4.x MambaCache held both states in the model dtype
    assert kv(mamba, 1024, engine="hf", engine_version="4.57").kv_bytes == 64 * (5120 * 4 * 2 + 5120 * 16 * 2)


def test_vllm_hybrid_mamba_raises_the_block_and_pads_the_state():
    # Qwen3-Next: 2 KV heads x 256 dims -> 2,048 B per token per attention layer; GDN state page
    # 1,097,728 B -> attention block 16 x ceil(1,097,728 / (16 x 2,048)) = 544 tokens (vLLM 0.26); the
    # state page is padded to 544 x 2,048 = 1,114,112 B. 0.33 aligns GDN hybrids to 64 (FlashInfer GDN
    # prefill checkpoints): 576 tokens, pages of 1,179,648 B (vllm_pool_oracle_dev.json, Qwen3-Next-80B).
    layers = [LayerSpec(kind="full", kv_heads=2, head_dim=256) if i % 4 == 3 else
              LayerSpec(kind="recurrent", mixer="gated_delta_net", conv_dim=8192, conv_kernel=4,
                        ssm_state=(32, 128, 128)) for i in range(48)]
    qwen3_next = ModelSpec(id="Qwen/Qwen3-Next-80B-A3B-Instruct", model_type="qwen3_next", layers=group_layers(layers))
    result = kvplan.estimate(qwen3_next, contexts=[1000], engine_version="0.26")
    assert result.block_size == 544
    assert result.rows[0].kv_bytes == 12 * 1088 * 2048 + 36 * 1_114_112
    result = kvplan.estimate(qwen3_next, contexts=[1000])
    assert result.block_size == 576
    assert result.rows[0].kv_bytes == 12 * 1152 * 2048 + 36 * 1_179_648


def test_vllm_chunked_local_attention_holds_the_current_chunk():
    scout = interleaved("meta-llama/Llama-4-Scout-17B-16E", "llama4", 48, 4, 8192, 8, 128, kind="chunked")
    held = {layer.kind: layer.tokens_held
            for layer in kvplan.estimate(scout, contexts=[20000], by_layer=True).rows[0].layers}
    # current chunk starts at 16384: blocks 1024..1249 -> 226 blocks = 3616 tokens
    assert held == {"chunked": 3616, "full": 20000}
    old = {layer.kind: layer.tokens_held for layer in
           kvplan.estimate(scout, contexts=[20000], engine_version="0.11", by_layer=True).rows[0].layers}
    assert old == {"chunked": 20000, "full": 20000}


def test_engine_dtype_and_option_errors():
    with pytest.raises(UsageError, match="q8_0"):
        kv(LLAMA_31_8B, 1024, dtype="q8_0")  # vLLM has no ggml types
    with pytest.raises(UsageError, match="fp8"):
        kv(LLAMA_31_8B, 1024, engine="hf", dtype="fp8", engine_version="5.20")  # fp8 cache: 5.21+
    with pytest.raises(UsageError, match="unknown engine"):
        kv(LLAMA_31_8B, 1024, engine="tgi")
    with pytest.raises(UsageError, match="version"):
        kv(LLAMA_31_8B, 1024, engine_version="new")
    with pytest.raises(UsageError, match="context"):
        kvplan.estimate(LLAMA_31_8B, contexts=[0])


def test_context_beyond_the_model_limit_is_computed_and_flagged():
    result = kvplan.estimate(LLAMA_31_8B, contexts=[262144])
    assert result.rows[0].kv_bytes == 262144 * 131072
    assert any("exceeds max_position_embeddings" in a for a in result.assumptions)


def test_llamacpp_swa_full_gives_sliding_layers_n_ctx_cells():
    # llama.cpp src/llama-kv-cache-iswa.cpp: size_swa = swa_full ? size_base : pad256(min(size_base,
    # n_swa x n_seq + n_ubatch)); llama-server's default (common_params::swa_full) is off.
    # gemma-3-27b: 62 layers (52 sliding of window 1024, 10 full), 16 KV heads x 128, f16: 8,192 B/token/layer.
    spec = kvplan.load_model("google/gemma-3-27b-it")
    default = kvplan.estimate(spec, contexts=[32768], batches=[4], engine="llamacpp").rows[0].kv_bytes
    full = kvplan.estimate(spec, contexts=[32768], batches=[4], engine="llamacpp", swa_full=True).rows[0].kv_bytes
    assert default == 10 * 131072 * 8192 + 52 * 4608 * 8192 == 12_700_352_512
    assert full == 62 * 131072 * 8192 == 66_571_993_088
    with pytest.raises(UsageError) as refused:
        kvplan.estimate(spec, engine="vllm", swa_full=True)
    assert refused.value.field == "swa_full"


def test_llamacpp_phi3_sliding_layers_hold_n_ctx_cells():
    # llama.cpp turned Phi's SWA off (ggml-org/llama.cpp#13676: "Phi SWA is currently disabled", n_swa = 0): every
    # layer of Phi-3-mini (32 layers, 32 KV heads x 96, sliding_window 2047 in its config) holds n_ctx f16 cells
    spec = kvplan.load_model(str(DATA / "hf_configs" / "microsoft__Phi-3-mini-4k-instruct.json"))
    assert [(g.kind, g.window) for g in spec.layers] == [("sliding", 2047)]
    row = kvplan.estimate(spec, contexts=[4096], engine="llamacpp", kv_dtypes="f16").rows[0]
    assert row.kv_bytes == 4096 * 32 * 2 * 32 * 96 * 2
    assert not any("sliding-window cache" in a for a in kvplan.estimate(spec, contexts=[4096], engine="llamacpp")
                   .assumptions)
