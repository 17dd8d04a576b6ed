"""``max-batch --shared-prefix``: the larger batch an engine's sharing allows."""

from __future__ import annotations

import json

import pytest

from kvplan.budgets import Settings
from kvplan.errors import UsageError
from kvplan.plan import max_batch
from conftest import dense

LLAMA_31_8B = dense("meta-llama/Llama-3.1-8B", 32, 8, 128, max_pos=131072)
BLOCK_BYTES = 16 * 131072
KV = 1000 * BLOCK_BYTES + 12345  # exactly 1,000 vLLM blocks of Llama-3.1-8B


def plan(**kw):
    return max_batch(LLAMA_31_8B, gpu_memory="80GiB", max_model_len=16384,
                     settings=Settings(kv_cache_memory_bytes=KV, weights_bytes=16 * 2**30), **kw)


def test_vllm_counts_the_prefix_blocks_once_in_the_pool():
    # 1,000 blocks; a 16,384-token request takes 1,024 blocks, so one request of 8,192 (512 blocks)
    # fits once with nothing shared; with a 4,096-token prefix (256 blocks, get_computed_blocks)
    # each further request needs 256 own blocks: (1,000 - 256) // 256 = 2
    plain = plan(context=8192)
    shared = plan(context=8192, shared_prefix=4096)
    assert plain.max_batch == 1000 // 512 == 1
    assert shared.max_batch == (1000 - 256) // (512 - 256) == 2
    assert shared.max_batch_plain == plain.max_batch
    assert any("stays cached" in a for a in shared.assumptions)
    doc = shared.to_dict()
    assert doc["shared_prefix"] == 4096 and doc["max_batch_plain"] == 1
    assert "shared_prefix" not in plain.to_dict()


def test_vllm_prefix_is_capped_at_context_minus_one():
    # a prefix as long as the request shares (8,192 - 1) // 16 = 511 blocks; BlockPool keeps one block as
    # the null block, never handed out (vllm/v1/core/block_pool.py), as the plain max batch counts it
    shared = plan(context=8192, shared_prefix=8192)
    assert shared.max_batch == (1000 - 1 - 511) // 1


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_byte_pool_engines_allow_a_larger_batch(engine):
    settings = Settings(kv_cache_memory_bytes=10 * 2**30, weights_bytes=16 * 2**30)
    common = dict(gpu_memory="80GiB", max_model_len=16384, settings=settings, engine=engine, context=8192)
    plain = max_batch(LLAMA_31_8B, **common)
    shared = max_batch(LLAMA_31_8B, shared_prefix=6144, **common)
    assert shared.max_batch > plain.max_batch == shared.max_batch_plain


def test_engines_that_share_nothing_keep_the_batch_and_say_why():
    shared = max_batch(LLAMA_31_8B, gpu_memory="80GiB", max_model_len=16384, engine="hf", context=8192, settings=Settings(weights_bytes=16 * 2**30),
                       shared_prefix=4096)
    assert shared.max_batch == shared.max_batch_plain
    assert any("nothing is shared" in a for a in shared.assumptions)


def test_prefix_longer_than_the_context_is_refused():
    with pytest.raises(UsageError) as err:
        plan(context=4096, shared_prefix=8192)
    assert err.value.field == "shared_prefix"


def test_cli_max_batch_shared_prefix(capsys):
    from kvplan.cli import main

    code = main(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu-memory", "80GiB", "--max-model-len", "8k",
                 "--weights-bytes", "16GiB",
                 "--kv-cache-memory", str(KV), "-c", "8k", "--shared-prefix", "4k", "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["max_batch"] == 2 and doc["max_batch_plain"] == 1
