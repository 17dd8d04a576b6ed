"""Host-memory KV tiers (vLLM): golden blocks from a vLLM log and from vLLM's CPUOffloadingSpec rule."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.engines import get_engine, parse_version
from kvplan.engines.offload import find_link
from kvplan.engines.protocol import Demand, make_engine_options
from kvplan.dtypes import resolve_kv_dtype
from kvplan.errors import UsageError
from kvplan.spec import LayerSpec, ModelSpec

GIB = 1 << 30


def _tier(spec: ModelSpec, version: str, tp: int = 1, pp: int = 1, mml: int = 65536, **options: object):
    engine = get_engine("vllm")
    opts = make_engine_options(tp=tp, **options)
    layouts = engine.stage_layouts(spec, resolve_kv_dtype("auto", spec.dtype), parse_version(version), opts, pp)
    return engine.offload_tier(layouts, parse_version(version), opts, tp, Demand(mml, mml, 1), None)


def test_v0_swap_space_matches_a_vllm_log() -> None:
    # vLLM V0 log posted in vllm-project/vllm PR #12126 (2025-01-16, H100, meta-llama/Llama-3.2-11B-Vision,
    # --max-model-len 65536, default --swap-space 4): "executor_base.py:95] # CUDA blocks: 6001, # CPU blocks:
    # 1638" (collected for issue 11 as vllm-pr12126-llama32-11b-vision-h100-v0). Its cache: 40 layers
    # (32 self- and 8 cross-attention) x 8 KV heads x 128 x K+V x bf16 = 163,840 B per token,
    # 2,621,440 B per 16-token block; 4 GiB // 2,621,440 = 1,638.
    spec = ModelSpec(id="llama-3.2-11b-vision-text", model_type="mllama",
                     layers=(LayerSpec(kind="full", count=40, kv_heads=8, head_dim=128),),
                     num_attention_heads=32, max_position_embeddings=131072)
    tier = _tier(spec, "0.6", swap_space_bytes=4 * GIB)
    assert tier.blocks == 1638
    assert tier.tokens == 1638 * 16
    assert tier.held_bytes == 1638 * 2_621_440
    # vllm/worker/cache_engine.py _allocate_kv_cache: one pinned tensor per layer of 1,638 x 65,536 B =
    # 107,347,968 B, which PyTorch's CachingHostAllocator rounds up to 2^27: 40 x 2^27 = 5 GiB pinned for 4 GiB
    assert tier.pinned_bytes == 40 * (1 << 27)


def test_v1_native_offloading_blocks_for_the_whole_deployment() -> None:
    # vllm/v1/kv_offload/cpu/spec.py: num_blocks = cpu_bytes_to_use // (page_size_bytes x kv_cache_tensors
    # x world_size). Llama-3.1-70B at tp 4: 2 KV heads x 256 x 2 B x 16 tokens = 16,384 B per layer page,
    # x 80 layers = 1,310,720 B per rank, x 4 ranks = 5,242,880 B per block: 200 GiB hold 40,960 blocks.
    spec = kvplan.load_model("meta-llama/Llama-3.1-70B")
    tier = _tier(spec, "0.33", tp=4, mml=131072, kv_offloading_bytes=200 * GIB)
    assert tier.blocks == 40_960 and tier.tokens == 655_360
    assert tier.requests == 5  # 8,192 blocks per 131,072-token request
    assert tier.pinned_bytes == 40_960 * 5_242_880
    assert tier.request_bytes_per_gpu == 8192 * 1_310_720
    assert tier.restore_seconds == pytest.approx(10_737_418_240 / 63_015_384_615)


def test_pipeline_stages_each_pin_their_own_layers() -> None:
    spec = kvplan.load_model("meta-llama/Llama-3.1-8B")  # 32 layers, 4,096 B per token per layer
    tier = _tier(spec, "0.33", tp=1, pp=2, kv_offloading_bytes=4 * GIB)
    per_rank_block = 16 * 16 * 4096  # 16 layers on each stage
    assert tier.blocks == 4 * GIB // (per_rank_block * 2)
    assert tier.pinned_bytes == tier.blocks * 2 * per_rank_block


def test_links_and_refusals() -> None:
    assert find_link(None).name == "pcie5-x16"
    assert find_link("C2C").bytes_per_s == 450_000_000_000
    with pytest.raises(UsageError) as refused:
        find_link("usb")
    assert refused.value.field == "offload_link"
    llama = kvplan.load_model("meta-llama/Llama-3.1-8B")
    with pytest.raises(UsageError) as refused:
        _tier(llama, "0.33", swap_space_bytes=4 * GIB)  # V0 only
    assert refused.value.field == "swap_space_bytes"
    with pytest.raises(UsageError) as refused:
        _tier(llama, "0.6", kv_offloading_bytes=4 * GIB)  # V1 only
    assert refused.value.field == "kv_offloading_bytes"
    with pytest.raises(UsageError) as refused:
        _tier(kvplan.load_model("google/gemma-3-27b-it"), "0.33", kv_offloading_bytes=4 * GIB)
    assert refused.value.field == "kv_offloading_bytes"


def test_other_engines_refuse_the_option() -> None:
    with pytest.raises(UsageError) as refused:
        kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="H100-80GB", engine="sglang",
                         engine_options={"kv_offloading_bytes": GIB})
    assert refused.value.field == "kv_offloading_bytes"


def test_max_batch_reports_the_tier_in_json() -> None:
    plan = kvplan.max_batch("meta-llama/Llama-3.1-70B", gpu="H100-80GB", tp=4, max_model_len=131072,
                            engine_options={"kv_offloading_bytes": 200 * GIB, "offload_link": "nvlink-c2c"})
    doc = plan.to_dict()
    assert doc["offload"]["blocks"] == 40_960 and doc["offload"]["link"] == "nvlink-c2c"
    assert any("bringing one request back" in a for a in doc["assumptions"])


def test_sglang_hierarchical_cache_by_size_and_by_ratio() -> None:
    # pool_host/base.py HostKVCache: int(GB x 1e9 // size_per_token), then (size // page + 1) x page.
    # Llama-3.1-8B: 131,072 B per token per rank; 100 GB -> 762,939 + 1 page of 1 token = 762,940 tokens,
    # 100,000,071,680 B ("Allocating 100.00 GB host memory for hierarchical KV cache").
    llama = kvplan.load_model("meta-llama/Llama-3.1-8B")
    plan = kvplan.max_batch(llama, gpu="H100-80GB", engine="sglang", max_model_len=32768,
                            engine_options={"hicache_size_gb": 100})
    assert plan.offload["tokens"] == 762_940
    assert plan.offload["pinned_bytes"] == 100_000_071_680
    assert plan.offload["requests"] == 23
    by_ratio = kvplan.max_batch(llama, gpu="H100-80GB", engine="sglang", max_model_len=32768,
                                engine_options={"hicache_ratio": 2.0})
    assert by_ratio.offload["tokens"] == 2 * by_ratio.kv_cache_tokens + 1
    with pytest.raises(UsageError) as refused:
        kvplan.max_batch(llama, gpu="H100-80GB", engine="vllm", engine_options={"hicache_ratio": 2.0})
    assert refused.value.field == "hicache_ratio"
