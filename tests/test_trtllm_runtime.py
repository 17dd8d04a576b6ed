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
    """trtllm-bench on H100, 0.12 (tests/data/engine_logs_collected.yaml): 1.14 + 4.35 GiB logged, for GPT-J-6B's
    vocabulary of 50,400 (the log's engine: its case's derived.model_identified)."""
    got = runtime.runtime_buffer_bytes(4096, 1, 4098, 50400) + runtime.decoder_bytes(4096, 1, 4098, 50400)
    assert 1.0 < got / ((1.14 + 4.35) * GIB) < 1.25


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


def test_the_build_default_max_num_tokens_follows_the_release() -> None:
    """trtllm-build's defaults (runtime.py): before 0.11 max_num_tokens was unset and check_max_num_tokens made it
    max_batch_size x max_input_len (max_input_len 1,024 by default, below max_seq_len); 8,192 from 0.11. An unknown
    build's max_batch_size is assumed 256 before 0.11 and 2,048 (BuildConfig) from it."""
    from kvplan.engines import parse_version

    v09, v010, v011, v012 = (parse_version(v) for v in ("0.9.0", "0.10.0", "0.11.0", "0.12"))
    assert runtime.default_max_num_tokens(v09, 40, 2048)[0] == 40 * 1024
    assert runtime.default_max_num_tokens(v010, 64, 512)[0] == 64 * 512  # a shorter max_seq_len bounds the input
    assert runtime.default_max_num_tokens(v011, 40, 2048)[0] == runtime.default_max_num_tokens(v012, 4096, 4098)[0] \
        == 8192
    assert [runtime.default_batch(parse_version(v)) for v in ("0.8.0", "0.10.0", "0.11.0")] == [256, 256, 2048]


def _context(version: str, **settings: int) -> tuple[int, tuple[str, ...]]:
    plan = kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="RTX-3090", engine="trtllm", engine_version=version,
                            max_model_len=2048, settings=Settings(**settings))
    return _items(plan)["activation"], tuple(plan.assumptions)


def test_an_engine_before_011_is_planned_with_its_builds_token_dimension() -> None:
    """The execution context of a 0.9 engine built for 40 sequences is sized for 40 x 1,024 tokens, said as an
    assumption; a given max_num_tokens replaces the rule, and a release from 0.11 keeps 8,192 without it. Without
    the build's batch the product is not known: 8,192 tokens, said as assumed."""
    ctx, said = _context("0.9.0", max_num_seqs=40)
    given, said_given = _context("0.9.0", max_num_seqs=40, max_num_batched_tokens=8192)
    new, said_new = _context("0.12", max_num_seqs=40)
    unknown, said_unknown = _context("0.9.0")
    assert ctx == 5 * given and given == new == unknown  # 40,960 tokens against 8,192, the same bytes per token
    assert any("40,960 = max_batch_size 40 x max_input_len 1,024" in a for a in said)
    assert not any("max_input_len" in a for a in (*said_given, *said_new))
    assert any("8,192 tokens, assumed" in a and "--max-num-seqs" in a for a in said_unknown)


def test_the_rule_meets_the_context_a_09_log_allocated() -> None:
    """trtllm-benchdoc-llama3-8b-3090-triton (tests/data/engine_logs_collected.yaml; its source prints TensorRT's
    memory readings): the GPU in use goes from 15,681 MiB after the engine's deserialization to 19,719 MiB once the
    context is created, 8 + 8 MiB of it cuBLAS and cuDNN; TllmRuntime allocates the execution context in between.
    kvplan's context for that build (max_batch_size 40, max_seq_len 2,048, no max_num_tokens) is within 2 % of it."""
    logged = (19_719 - 15_681 - 16) * (1 << 20)
    ctx, _ = _context("0.9.0", max_num_seqs=40)
    assert abs(ctx / logged - 1) < 0.02
