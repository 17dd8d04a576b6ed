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
