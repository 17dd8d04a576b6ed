"""Several deployments on one GPU (kvplan.share): each engine's rule for taking memory in turn, in numbers.

vLLM from 0.9 (``request_memory`` / 0.9.2 ``Worker.init_device``): a worker refuses to start when the free memory
is below ceil(total x gpu_memory_utilization); once started it holds its init snapshot (0.51 GiB at TP 1) plus that.
vLLM 0.8 V1 (``determine_available_memory``): every process's memory on the device comes out of the KV budget.
SGLang: mem_fraction_static of the memory free at its start."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.budgets.base import GIB, Settings
from kvplan.errors import UsageError
from kvplan.plan import max_batch
from kvplan.share import Tenant, share_gpu, start_in_turn

MODEL = "Qwen/Qwen3-8B"
H100 = 85017755648  # the catalog's H100-SXM-80GB, torch's total
SNAPSHOT = int(0.51 * GIB)


def _tenant(name: str, engine: str = "vllm", version: str | None = None, **given: float) -> Tenant:
    return Tenant(name, engine, Settings(**given), lambda s: max_batch(
        MODEL, gpu="H100", engine=engine, engine_version=version, max_model_len=32768, settings=s))


def test_vllm_two_halves_do_not_start_and_the_fix_does() -> None:
    result = share_gpu([_tenant("a", gpu_memory_utilization=0.5), _tenant("b", gpu_memory_utilization=0.5)])
    first, second = result.orders[0].deployments
    requested = math.ceil(H100 * 0.5)
    assert result.total_bytes == H100
    assert (first.starts, first.takes_bytes) == (True, SNAPSHOT + requested)
    # b's snapshot sees its own context too: 79.18 GiB - 40.10 - 0.51 = 38.57 GiB free < 39.59 GiB asked
    assert H100 - first.takes_bytes - SNAPSHOT < requested
    assert not second.starts and "38.57 GiB" in second.reason and "39.59 GiB" in second.reason
    assert not result.all_start and not result.orders[1].all_start  # the same the other way round
    fixes = {(f.deployment, f.setting): f.value for f in result.fixes}
    # the nearest: a or b at 0.48 (0.49 leaves 0.35 GiB too little)
    assert fixes == {("a", "gpu_memory_utilization"): 0.48, ("b", "gpu_memory_utilization"): 0.48}
    assert H100 - (SNAPSHOT + math.ceil(H100 * 0.49)) - SNAPSHOT < requested
    assert H100 - (SNAPSHOT + math.ceil(H100 * 0.48)) - SNAPSHOT >= requested
    for fix in result.fixes:  # each fix planned again: every deployment starts
        assert fix.order.all_start
        again = share_gpu([_tenant(d.name, gpu_memory_utilization=fix.value if d.name == fix.deployment else 0.5)
                           for d in fix.order.deployments], fixes=False)
        assert again.all_start
    assert result.to_dict()["fixes"][0]["planned"]["all_start"] is True


def test_vllm_others_do_not_shrink_the_budget_from_0_9() -> None:
    alone = max_batch(MODEL, gpu="H100", max_model_len=32768, settings=Settings(gpu_memory_utilization=0.45))
    order, gpu = start_in_turn([_tenant("a", gpu_memory_utilization=0.45), _tenant("b", gpu_memory_utilization=0.45)])
    assert gpu == "H100-SXM-80GB" and order.all_start
    assert [d.kv_cache_bytes for d in order.deployments] == [alone.per_gpu.kv_cache_bytes] * 2
    assert order.left_bytes == H100 - 2 * (SNAPSHOT + math.ceil(H100 * 0.45))


def test_vllm_0_8_counts_the_others_memory_as_its_own() -> None:
    alone = max_batch(MODEL, gpu="H100", engine_version="0.8.5", max_model_len=32768,
                      settings=Settings(gpu_memory_utilization=0.9))
    order, _ = start_in_turn([_tenant("a", version="0.8.5", gpu_memory_utilization=0.45),
                              _tenant("b", version="0.8.5", gpu_memory_utilization=0.9)])
    first, second = order.deployments
    assert first.takes_bytes == math.ceil(H100 * 0.45)  # all of its fraction: nothing else was on the GPU
    # the old meaning of the flag: 0.9 of the GPU for both together
    assert second.kv_cache_bytes == alone.per_gpu.kv_cache_bytes - first.takes_bytes
    assert second.starts and second.takes_bytes == math.ceil(H100 * 0.9) - first.takes_bytes


def test_sglang_takes_its_fraction_of_what_is_free() -> None:
    order, _ = start_in_turn([_tenant("a", "sglang", mem_fraction_static=0.4),
                              _tenant("b", "sglang", mem_fraction_static=0.6)])
    first, second = order.deployments
    alone = max_batch(MODEL, gpu="H100", engine="sglang", max_model_len=32768,
                      settings=Settings(mem_fraction_static=0.6))
    context = next(i.bytes for i in alone.items if i.name == "non_torch")  # the CUDA context SGLang starts with
    weights = alone.per_gpu.weights_bytes
    free_before = H100 - context - first.takes_bytes
    assert first.takes_bytes == context + (H100 - context) - int((H100 - context) * (1 - 0.4))
    assert second.kv_cache_bytes == free_before - weights - int(free_before * (1 - 0.6))
    assert second.kv_cache_bytes < alone.per_gpu.kv_cache_bytes
    assert order.all_start


@settings(max_examples=15, deadline=None)
@given(u1=st.integers(5, 95), u2=st.integers(5, 95))
def test_vllm_second_starts_exactly_when_its_fraction_is_free(u1: int, u2: int) -> None:
    order, _ = start_in_turn([_tenant("a", gpu_memory_utilization=u1 / 100),
                              _tenant("b", gpu_memory_utilization=u2 / 100)])
    first, second = order.deployments
    if not first.starts:  # alone on the GPU the check passes: only a cache too small stops it, and it holds nothing
        assert "does not hold one request" in first.reason and second.used_before_bytes == 0
        return
    free = H100 - (SNAPSHOT + math.ceil(H100 * u1 / 100)) - SNAPSHOT
    if free < math.ceil(H100 * u2 / 100):
        assert not second.starts and "refuses to start" in second.reason and second.takes_bytes == 0
    else:  # started, or its cache too small for one request: never the free-memory check
        assert second.starts or "does not hold one request" in second.reason
    assert order.left_bytes >= 0


def test_an_engine_without_a_rule_is_refused_by_name() -> None:
    with pytest.raises(UsageError) as exc:
        start_in_turn([_tenant("a", "hf"), _tenant("b")])
    assert exc.value.field == "engine"


def test_trtllm_holds_every_item_but_the_cache_once_started() -> None:
    """A TensorRT-LLM 1.x deployment holds its CUDA-graph pool and block-offset table too, not only weights and
    warm-up: the next deployment starts on what is left after all of them."""
    def trt(name: str) -> Tenant:
        return Tenant(name, "trtllm", Settings(free_gpu_memory_fraction=0.3), lambda s: max_batch(
            MODEL, gpu="H100", engine="trtllm", max_model_len=32768, settings=s))

    order, _ = start_in_turn([trt("a"), trt("b")])
    first = order.deployments[0]
    alone = max_batch(MODEL, gpu="H100", engine="trtllm", max_model_len=32768,
                      settings=Settings(free_gpu_memory_fraction=0.3))
    names = {i.name for i in alone.items}
    assert {"cudagraph", "block_offsets"} <= names
    assert first.takes_bytes == sum(i.bytes for i in alone.items if i.name != "kv_cache") + alone.per_gpu.kv_cache_bytes
    assert order.deployments[1].used_before_bytes == first.takes_bytes
