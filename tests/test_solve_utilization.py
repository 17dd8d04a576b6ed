"""``max-batch --solve utilization``: the smallest memory fraction (three decimals) at which the engine's plan
holds the workload; one step less does not."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from kvplan.budgets import Settings
from kvplan.errors import UsageError
from kvplan.plan import max_batch

WORK = {"gpu": "H100", "max_model_len": 32000, "concurrency": 8}


@pytest.mark.parametrize("engine, field", [("vllm", "gpu_memory_utilization"), ("sglang", "mem_fraction_static"),
                                           ("trtllm", "free_gpu_memory_fraction")])
@pytest.mark.parametrize("model, sequences", [("Qwen/Qwen3-8B", 8), ("google/gemma-3-12b-it", 4),
                                              ("Qwen/Qwen3-30B-A3B", 4)])
def test_the_fraction_found_is_the_least_that_holds(engine: str, field: str, model: str, sequences: int) -> None:
    found = max_batch(model, engine=engine, solve="utilization", **{**WORK, "concurrency": sequences})
    assert found.solved is not None and found.solved["setting"] == field
    value = found.solved["value"]
    assert 0 < value <= 1 and round(value, 3) == value

    def at(fraction: float):
        return max_batch(model, engine=engine, gpu="H100", max_model_len=32000, batch=sequences,
                         settings=Settings(**{field: fraction}))

    assert at(value).fits and at(value).max_batch >= sequences
    below = at(round(value - 0.001, 3))
    assert not (below.fits and below.max_batch >= sequences)
    assert found.max_batch == at(value).max_batch


def test_json_says_what_was_solved() -> None:
    code, out, _ = run_cli(["max-batch", "Qwen/Qwen3-8B", "--gpu", "H100", "--solve", "utilization",
                            "--concurrency", "8", "--max-model-len", "32k", "-f", "json"])
    assert code == 0
    solved = json.loads(out)["solved"]
    assert solved["flag"] == "--gpu-memory-utilization" and 0 < solved["value"] < 1


@pytest.mark.parametrize("kw, field", [
    ({"engine": "llamacpp"}, "solve"),
    ({"settings": Settings(gpu_memory_utilization=0.5)}, "gpu_memory_utilization"),
    ({"settings": Settings(kv_cache_memory_bytes=1 << 30)}, "kv_cache_memory"),
    ({"concurrency": 10**6}, "solve"),
])
def test_refusals_name_the_field(kw: dict, field: str) -> None:
    with pytest.raises(UsageError) as exc:
        max_batch("Qwen/Qwen3-8B", solve="utilization", **{**WORK, **kw})
    assert exc.value.field == field
