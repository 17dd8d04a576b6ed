"""TensorRT-LLM's release-dependent defaults read from its code (kvplan/engines/trtllm/fraction.py): the KV
fraction a deployment takes when none is given."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.budgets import Settings
from kvplan.engines.trtllm.fraction import default_fraction


# kvCacheConfig.h kDefaultGpuMemFraction at the tags: 0.85f in v0.6.0 - v0.7.1, 0.9f from v0.8.0 (TensorRT-LLM #846)
@pytest.mark.parametrize(("version", "want"), [((0, 5, 0), 0.85), ((0, 6, 1), 0.85), ((0, 7, 1), 0.85),
                                               ((0, 8, 0), 0.9), ((0, 9, 0), 0.9), ((0, 17, 0), 0.9),
                                               ((1, 2, 1), 0.9)])
def test_the_default_fraction_by_release(version, want) -> None:
    assert default_fraction(version) == want


def _plan(version: str, **settings: float):
    return kvplan.max_batch("meta-llama/Llama-2-7b-hf", gpu="H100-SXM-80GB", engine="trtllm", engine_version=version,
                            max_model_len=4096, settings=Settings(max_num_seqs=256, **settings))


def test_a_071_plan_takes_085_of_the_same_free_memory_and_a_given_fraction_wins() -> None:
    old, new = _plan("0.7.1"), _plan("0.8.0")
    assert old.per_gpu.kv_cache_bytes < new.per_gpu.kv_cache_bytes
    # the same items before the pool (the runtime sizes do not depend on these two releases): only the fraction moves
    free = {i.name: i.bytes for i in old.items if i.name != "kv_cache"}
    assert free == {i.name: i.bytes for i in new.items if i.name != "kv_cache"}
    assert abs(old.per_gpu.kv_cache_bytes / new.per_gpu.kv_cache_bytes - 0.85 / 0.9) < 1e-6
    assert _plan("0.7.1", free_gpu_memory_fraction=0.9).per_gpu.kv_cache_bytes == new.per_gpu.kv_cache_bytes


# A tied lm_head in a prebuilt engine (kvplan/engines/trtllm/tied_head.py): TensorRT-LLM's converters write the
# embedding again as lm_head.weight (v0.9.0 models/llama/convert.py convert_hf_llama), split by vocabulary rows over
# the tensor-parallel ranks; Gemma's converter shares them from the 0.10 line (#1492); the PyTorch backend shares.
GEMMA_7B = "tests/data/hf_configs_transcribed/google__gemma-7b.json"


def _weights(model: str, version: str, tp: int = 1, **settings: object) -> int:
    plan = kvplan.max_batch(model, gpu="H100-SXM-80GB", engine="trtllm", engine_version=version, tp=tp,
                            max_model_len=4096, settings=Settings(max_num_seqs=256, **settings))
    return next(i.bytes for i in plan.items if i.name == "weights")


def test_a_tied_head_is_its_own_copy_in_a_prebuilt_engine() -> None:
    from kvplan.sources.resolve import load_model

    llama32 = load_model("meta-llama/Llama-3.2-1B")  # tied: 128,256 x 2,048 in bf16
    ckpt = llama32.weights_bytes
    assert _weights("meta-llama/Llama-3.2-1B", "0.12.0") == ckpt + 128256 * 2048 * 2
    assert _weights("meta-llama/Llama-3.2-1B", "0.12.0", tp=2) == -(-ckpt // 2) + 128256 // 2 * 2048 * 2
    # the PyTorch backend points lm_head.weight at the embedding: the checkpoint's one matrix
    assert _weights("meta-llama/Llama-3.2-1B", "1.0.0") == ckpt
    assert _weights("meta-llama/Llama-3.2-1B", "0.17.0", trtllm_backend="pytorch") == ckpt
    # and a logged engine size already holds whatever the engine holds
    assert _weights("meta-llama/Llama-3.2-1B", "0.12.0", weights_bytes=3 << 30) == 3 << 30
    # the spec's "lm_head shares the embedding" is the checkpoint's: the plan says the engine holds it twice
    def said(version: str) -> bool:
        plan = kvplan.max_batch("meta-llama/Llama-3.2-1B", gpu="H100-SXM-80GB", engine="trtllm", engine_version=version,
                                max_model_len=4096)
        return any("held twice by the prebuilt engine" in a for a in plan.assumptions)

    assert said("0.12.0") and not said("1.0.0")


def test_gemma_shares_its_head_from_010_and_an_untied_model_gets_nothing() -> None:
    from kvplan.sources.resolve import load_model

    ckpt = load_model(GEMMA_7B).weights_bytes
    assert _weights(GEMMA_7B, "0.9.0") == ckpt + 256000 * 3072 * 2  # the v0.9.0 converter writes the copy
    assert _weights(GEMMA_7B, "0.10.0") == ckpt  # tensorrt_llm/models/gemma/model.py asserts the sharing
    llama2 = load_model("meta-llama/Llama-2-7b-hf")  # its own lm_head in the checkpoint already
    assert _weights("meta-llama/Llama-2-7b-hf", "0.12.0") == llama2.weights_bytes


def test_the_copy_pads_the_vocabulary_to_the_tensor_parallel_size() -> None:
    from kvplan.engines.trtllm.tied_head import lm_head_copy_bytes
    from kvplan.sources.resolve import load_model

    qwen3 = load_model("Qwen/Qwen3-0.6B")  # 151,936 rows -> 151,938 over 3 ranks
    assert lm_head_copy_bytes(qwen3, (0, 20), 3) == 151938 // 3 * 1024 * 2
