"""TensorRT-LLM's C++ runtime (a prebuilt engine, releases before 1.0): the runtime buffers and the decoder are
taken before the KV pool is sized (kvplan/engines/trtllm/runtime.py)."""

from __future__ import annotations

import kvplan
from kvplan.budgets import Settings
from kvplan.engines.trtllm import runtime

GIB = 1 << 30


def _items(plan) -> dict[str, int]:
    return {i.name: i.bytes for i in plan.items}


def test_the_buffers_grow_with_the_build_batch_and_vocabulary() -> None:
    small = runtime.runtime_buffer_bytes(8, 1, 4096, 32000) + runtime.decoder_bytes(8, 1, 4096, 32000)
    large = runtime.runtime_buffer_bytes(4096, 1, 4096, 32000) + runtime.decoder_bytes(4096, 1, 4096, 32000)
    assert large > 400 * small
    # beam search adds gathered ids and a second penalty workspace
    assert runtime.decoder_bytes(8, 2, 4096, 32000) > 1.5 * runtime.decoder_bytes(8, 1, 4096, 32000)
    assert runtime.padded_vocab(151936, 3) == 151938


def test_the_012_bench_log_is_within_a_quarter_of_the_sum() -> None:
    """trtllm-bench on H100, 0.12 (tests/data/engine_logs_collected.yaml): 1.14 + 4.35 GiB logged."""
    got = runtime.runtime_buffer_bytes(4096, 1, 4098, 32000) + runtime.decoder_bytes(4096, 1, 4098, 32000)
    assert 0.75 < got / ((1.14 + 4.35) * GIB) < 1.0


def test_an_engine_release_subtracts_them_and_the_pytorch_backend_does_not() -> None:
    s = Settings(max_num_seqs=2048)
    old = kvplan.max_batch("meta-llama/Llama-2-7b-hf", gpu="H100-SXM-80GB", engine="trtllm", engine_version="0.12",
                           max_model_len=4096, settings=s)
    new = kvplan.max_batch("meta-llama/Llama-2-7b-hf", gpu="H100-SXM-80GB", engine="trtllm", engine_version="1.0",
                           max_model_len=4096, settings=s)
    assert {"runtime_buffers", "decoder"} <= set(_items(old)) and not {"runtime_buffers", "decoder"} & set(_items(new))
    assert old.per_gpu.kv_cache_bytes < new.per_gpu.kv_cache_bytes
    # the logged buffers replace kvplan's sum
    logged = kvplan.max_batch("meta-llama/Llama-2-7b-hf", gpu="H100-SXM-80GB", engine="trtllm", engine_version="0.12",
                              max_model_len=4096, settings=Settings(max_num_seqs=2048, engine_buffer_bytes=GIB))
    assert _items(logged)["runtime_buffers"] == GIB and "decoder" not in _items(logged)


def _llama(**settings: int):
    return kvplan.max_batch("meta-llama/Llama-2-7b-hf", gpu="H100-SXM-80GB", engine="trtllm", max_model_len=4096,
                            settings=Settings(**settings))


def test_kv_max_tokens_caps_the_pool_in_whole_blocks() -> None:
    free = _llama()
    capped = _llama(max_kv_tokens=100_001)
    assert capped.kv_cache_tokens == -(-100_001 // capped.block_size) * capped.block_size < free.kv_cache_tokens
    assert capped.per_gpu.kv_cache_bytes == free.per_gpu.kv_cache_bytes * capped.kv_cache_tokens // free.kv_cache_tokens
    assert capped.interval is None and free.interval is not None  # the cap is exact: no error band
    assert _llama(max_kv_tokens=10 * free.kv_cache_tokens).kv_cache_tokens == free.kv_cache_tokens  # not binding


def test_kv_max_tokens_refuses_a_bad_value_and_another_engine() -> None:
    from kvplan.cli import main

    base = ["max-batch", "meta-llama/Llama-2-7b-hf", "--gpu", "H100-SXM-80GB", "--kv-max-tokens"]
    for bad in ("0", "-3", "many"):
        assert main([*base, bad, "--engine", "trtllm"], fast=False) == 2
    assert main([*base, "5000", "--engine", "vllm"], fast=False) == 2
