"""vLLM's own pool figures, reproduced exactly.

tests/data/vllm_pool_oracle_dev.json and vllm_pool_oracle_extra.json are what vLLM 0.33.0's planning
code (kv_cache_planning.py, kv_cache_utils.py) and its real KVCacheManager computed on CPU for 31
configs (the tool and its command are in each file's ``_meta``): 10 GiB of KV, max_model_len 32,768,
max_num_batched_tokens 8,192. For each: the pool's blocks, the logged "GPU KV cache size" tokens and
concurrency, the start-up check's estimated maximum model length, the attention block size, and the
bytes one request holds while the token at position N is written, under synchronous and async
scheduling. kvplan must give every one of these numbers.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

import kvplan
from kvplan.budgets import Settings
from conftest import DATA

_FILES = ("vllm_pool_oracle_dev.json", "vllm_pool_oracle_extra.json")


def _cases() -> list[tuple[str, str, dict, dict]]:
    out = []
    for name in _FILES:
        data = json.loads((DATA / name).read_text())
        for model, entry in data.items():
            if model != "_meta":
                out.append((name, model, entry, data["_meta"]))
    return out


def _config(path: str) -> Path:
    base = Path(path).name.replace("_from_transformers_defaults", "")
    for sub in ("hf_configs", "hf_configs_transcribed", "vllm_oracle_inputs"):
        if (DATA / sub / base).exists():
            return DATA / sub / base
    raise FileNotFoundError(path)


@lru_cache(maxsize=None)
def _spec(path: str):
    return kvplan.load_model(str(_config(path)))


CASES = _cases()


@pytest.mark.parametrize("source,model,entry,meta", CASES, ids=[f"{c[0][18:-5]}:{c[1]}" for c in CASES])
def test_pool_figures(source, model, entry, meta):
    kv_dtype = "fp8" if model.endswith("@fp8") else "auto"
    plan = kvplan.max_batch(_spec(entry["config"]), gpu_memory="80GiB", max_model_len=meta["max_model_len"],
                            kv_dtype=kv_dtype, engine_version="0.33",
                            settings=Settings(kv_cache_memory_bytes=meta["available_bytes"], weights_bytes=1,
                                              max_num_batched_tokens=meta["max_num_batched_tokens"]))
    pool = entry["pool"]
    assert plan.block_size == entry["block_size"]
    assert plan.num_blocks == pool["num_blocks"]
    assert plan.kv_cache_tokens == pool["log_kv_cache_size_tokens"]
    assert plan.max_concurrency == pytest.approx(pool["log_max_concurrency"], abs=5e-5)
    assert plan.fits == (pool["startup_check_error"] is None)
    assert min(plan.max_model_len_fit, meta["max_model_len"]) == pool["estimated_max_model_len"]


@pytest.mark.parametrize("source,model,entry,meta", CASES, ids=[f"{c[0][18:-5]}:{c[1]}" for c in CASES])
def test_bytes_held_while_decoding(source, model, entry, meta):
    kv_dtype = "fp8" if model.endswith("@fp8") else "auto"
    spec = _spec(entry["config"])
    points = sorted(int(n) for n in entry["decode_at"])
    for mode in ("sync", "async"):
        rows = kvplan.estimate(spec, contexts=points, kv_dtypes=[kv_dtype], engine_version="0.33",
                               async_scheduling=mode == "async").rows
        got = {row.context: row.kv_bytes for row in rows}
        want = {int(n): v[mode]["bytes"] for n, v in entry["decode_at"].items()}
        assert got == want, mode


def test_the_null_block_in_the_start_up_check():
    # 0.33's get_kv_cache_configs subtracts one pool block before the check and the max-length estimate;
    # 0.26.0's does not (docs/research-vllm.md section 4). gemma-3-27b, 10 GiB: 8,192 blocks of 1,310,720 B.
    spec = kvplan.load_model("google/gemma-3-27b-it")

    def plan(version: str, kv_bytes: int):
        return kvplan.max_batch(spec, gpu_memory="80GiB", max_model_len=32768, engine_version=version,
                                settings=Settings(kv_cache_memory_bytes=kv_bytes, weights_bytes=1,
                                                  max_num_batched_tokens=8192))

    assert plan("0.33", 10 << 30).max_model_len_fit == 26512
    assert plan("0.26", 10 << 30).max_model_len_fit == 26528
    # a pool of exactly the 8,582 blocks one 32k request needs: 0.33 refuses to start, 0.26 starts
    exact = 8582 * 1_310_720
    assert not plan("0.33", exact).fits and plan("0.26", exact).fits
    assert plan("0.33", exact + 1_310_720).fits


@pytest.mark.parametrize("source,model,entry,meta", CASES, ids=[f"{c[0][18:-5]}:{c[1]}" for c in CASES])
def test_admission_figure_is_vllms_per_request_memory(source, model, entry, meta):
    # estimate's admission_kv_bytes at max_model_len = vLLM's _max_memory_usage_bytes_from_groups
    kv_dtype = "fp8" if model.endswith("@fp8") else "auto"
    row = kvplan.estimate(_spec(entry["config"]), contexts=[meta["max_model_len"]], kv_dtypes=[kv_dtype],
                          engine_version="0.33").rows[0]
    assert row.admission_kv_bytes == entry["pool"]["max_memory_usage_bytes_per_request"]
