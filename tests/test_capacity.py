"""Parallelism rules and the block-pool arithmetic, replayed against real engine start-up logs.

Calibration (a) of the max-batch issue: from the KV memory an engine logged as available, kvplan must
give the token count it logged within 0.5 % (logs print GiB with two decimals, hence the tolerance).
Cases: tests/data/engine_logs_dev.yaml. Every case runs through ``kvplan.max_batch`` with the logged KV
memory given (``--kv-cache-memory``): the same code path as the command.
"""

from __future__ import annotations

import pytest
import yaml

import kvplan
from kvplan.budgets import Settings
from kvplan.errors import UsageError
from kvplan.parallel import pp_partitions, stage_specs
from kvplan.sources.resolve import load_model
from kvplan.spec import LayerSpec, ModelSpec
from conftest import DATA

GIB = 1 << 30
CASES = {c["id"]: c for c in yaml.safe_load((DATA / "engine_logs_dev.yaml").read_text())["cases"]}


def test_pipeline_split_follows_vllm():
    # vLLM docs / get_pp_indices: 61 layers -> PP2 [31, 30], PP4 [15, 15, 16, 15]
    assert pp_partitions(61, 2) == [31, 30]
    assert pp_partitions(61, 4) == [15, 15, 16, 15]
    with pytest.raises(UsageError, match="exceeds"):
        pp_partitions(4, 8)
    stages = stage_specs(load_model("deepseek-ai/DeepSeek-V3"), 4)
    assert [s.num_layers for s in stages] == [15, 15, 16, 15]


def test_tensor_parallel_replicates_kv_heads_past_their_count():
    # Qwen3-235B has 4 KV heads: TP8 holds 1 head per rank, the same as TP4 (vLLM get_num_kv_heads)
    spec = load_model("Qwen/Qwen3-235B-A22B")
    per_rank = {tp: kvplan.estimate(spec, contexts=[8192], engine="vllm", tp=tp).rows[0].kv_bytes for tp in (1, 4, 8)}
    assert per_rank[4] == per_rank[1] // 4 and per_rank[8] == per_rank[4]
    # TensorRT-LLM splits head_dim x kv_heads // tp without that floor
    trt = {tp: kvplan.estimate(spec, contexts=[8192], engine="trtllm", tp=tp).rows[0].kv_bytes for tp in (4, 8)}
    assert trt[8] * 2 == trt[4]
    # MLA is replicated on every rank
    ds = load_model("deepseek-ai/DeepSeek-V3")
    assert kvplan.estimate(ds, contexts=[8192], tp=8).rows[0].kv_bytes == kvplan.estimate(ds, contexts=[8192]).rows[0].kv_bytes
    with pytest.raises(UsageError, match="pipeline parallelism") as refused:
        kvplan.estimate(spec, contexts=[8192], engine="llamacpp", tp=2)
    assert refused.value.field == "tp"


def planned(model, engine: str, kv_bytes: int, version: str | None, max_model_len: int, tp: int = 1,
            kv_dtype: str = "auto"):
    """max-batch with the KV memory the engine logged (80 GiB GPU: vLLM's 8,192 batched tokens)."""
    return kvplan.max_batch(model, gpu_memory="80GiB", engine=engine, engine_version=version, kv_dtype=kv_dtype,
                            max_model_len=max_model_len, tp=tp,
                            settings=Settings(kv_cache_memory_bytes=kv_bytes, weights_bytes=1))


def vllm_tokens(model: str, kv_dtype: str, available_gib: float, version: str, max_model_len: int, tp: int = 1):
    return planned(model, "vllm", int(available_gib * GIB), version, max_model_len, tp, kv_dtype)


@pytest.mark.parametrize("case_id,model,kv_dtype,version,logged_key", [
    ("vllm-10517-llama31-8b-3090-20k", "meta-llama/Llama-3.1-8B", "auto", "0.6", "derived"),
    ("vllm-25350-fp8kv-100k", "Qwen/Qwen3-30B-A3B-FP8", "fp8", "0.10", "reported"),
    ("hfmem-60-gpt-oss-120b", "openai/gpt-oss-120b", "auto", "0.12", "reported"),
])
def test_vllm_tokens_from_logged_kv_memory(case_id, model, kv_dtype, version, logged_key):
    case = CASES[case_id]
    logged = case[logged_key]["kv_cache_tokens"]
    available = case["reported"]["available_kv_gib"]
    got = vllm_tokens(model, kv_dtype, available, version, case.get("max_model_len") or 131072)
    assert abs(got.kv_cache_tokens - logged) / logged < 0.005, (got.kv_cache_tokens, logged)
    if "max_concurrency" in case["reported"]:
        assert abs(got.max_concurrency - case["reported"]["max_concurrency"]) < 0.02


def test_vllm_blocks_from_logged_memory_aphrodite_pixtral():
    # sonar#1320 (aphrodite, a vLLM fork; Mistral-Nemo text backbone): 17.72 GiB -> 7259 blocks of 16
    case = CASES["sonar-1320-pixtral-48gb"]["reported"]["after"]
    got = vllm_tokens("mistralai/Mistral-Nemo-Base-2407", "auto", case["reserved_kv_gib"], "0.6", 8192)
    assert abs(got.num_blocks - case["num_gpu_blocks"]) <= 0.005 * case["num_gpu_blocks"]


def test_sglang_tokens_from_logged_k_size():
    # vllm#21348 (SGLang, Qwen3-235B-A22B-FP8, TP4): K size 8.23 GB (GiB) -> 367,404 tokens
    case = CASES["vllm-21348-qwen3-235b-fp8-4xh100-sglang"]["reported"]
    plan = planned("Qwen/Qwen3-235B-A22B-FP8", "sglang", int(2 * case["k_size_gib"] * GIB), None, 32768, tp=4)
    assert abs(plan.kv_cache_tokens - case["kv_cache_tokens"]) / case["kv_cache_tokens"] < 0.005


def test_trtllm_tokens_from_logged_kv_memory():
    # TensorRT-LLM#1188: Qwen2.5-Coder-0.5B (24 layers, 2 KV heads x 64), 4.53 GiB -> 395,776 tokens,
    # a multiple of 32 (tokens_per_block)
    case = CASES["trtllm-1188-qwen25-coder-05b-a4000"]["reported"]
    spec = ModelSpec(id="Qwen/Qwen2.5-Coder-0.5B-Instruct", model_type="qwen2", layers=(
        LayerSpec(kind="full", count=24, kv_heads=2, head_dim=64),))
    plan = planned(spec, "trtllm", int(case["kv_gib"] * GIB), None, 32768)
    assert plan.kv_cache_tokens % 32 == 0
    assert abs(plan.kv_cache_tokens - case["kv_cache_tokens"]) / case["kv_cache_tokens"] < 0.005
