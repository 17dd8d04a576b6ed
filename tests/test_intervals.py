"""The range a budget-resting figure may take (issue: say how sure): every vLLM plan planned from kvplan's own
budget carries the engine's figures at both ends of its cross-validated error; given or measured KV memory
carries none; check warns (may-not-fit) where a deployment fits only above the low end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from kvplan.budgets import Settings
from kvplan.engines.vllm.fitted import kv_error
from kvplan.plan import max_batch


@pytest.mark.parametrize("model, gpu, tp", [("Qwen/Qwen3-8B", "H100", 1), ("meta-llama/Llama-3.1-70B", "A100-80GB", 4),
                                            ("google/gemma-3-27b-it", "L40S", 2), ("deepseek-ai/DeepSeek-V2-Lite",
                                                                                    "H200", 1)])
@pytest.mark.parametrize("version", ["0.19.0", "0.33"])
def test_the_range_is_the_error_band_run_through_the_capacity_rules(model: str, gpu: str, tp: int,
                                                                     version: str) -> None:
    p = max_batch(model, gpu=gpu, tp=tp, max_model_len=16384, engine_version=version)
    assert p.interval is not None
    error = kv_error(tuple(int(x) for x in version.split(".")))
    assert p.interval["kv_cache_bytes"] == list(error.bounds(p.per_gpu.kv_cache_bytes, p.gpu_total_bytes))
    for key, value in (("kv_cache_tokens", p.kv_cache_tokens), ("max_batch", p.max_batch),
                       ("max_concurrency", round(p.max_concurrency, 4))):
        low, high = p.interval[key]
        assert low <= high, key
        if error.low <= 0 <= error.high:  # kvplan errs both ways in this band: its estimate lies inside
            assert low <= value <= high, key
    assert p.interval["basis"] and json.loads(json.dumps(p.to_dict()))["interval"]["basis"] == p.interval["basis"]


def test_given_or_other_engines_carry_no_range() -> None:
    assert max_batch("Qwen/Qwen3-8B", gpu="H100", settings=Settings(kv_cache_memory_bytes=30 << 30)).interval is None
    assert max_batch("Qwen/Qwen3-8B", gpu="H100", engine="llamacpp").interval is None  # no record of its error yet
    given = Settings(kv_cache_memory_bytes=30 << 30)
    assert max_batch("Qwen/Qwen3-8B", gpu="H100", engine="sglang", settings=given).interval is None
    assert max_batch("Qwen/Qwen3-8B", gpu="H100", engine="trtllm", settings=given).interval is None
    calibrated = Settings(weights_bytes=16 << 30, non_torch_bytes=1 << 29)  # SGLang's calibration from a log
    assert max_batch("Qwen/Qwen3-8B", gpu="H100", engine="sglang", settings=calibrated).interval is None
    measured = Settings(activation_bytes=1 << 30, non_torch_bytes=1 << 28, cudagraph_bytes=1 << 29)
    assert max_batch("Qwen/Qwen3-8B", gpu="H100", settings=measured).interval is None


def test_the_table_prints_the_range_and_says_what_it_is() -> None:
    code, out, _ = run_cli(["max-batch", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "32k"])
    p = max_batch("Qwen/Qwen3-8B", gpu="H100", max_model_len=32000)
    low, high = p.interval["kv_cache_tokens"]
    assert code == 0 and f"{p.kv_cache_tokens:,} ({low:,} to {high:,})" in out
    assert "9 in 10 deployments" in " ".join(out.split())


def test_check_warns_where_it_fits_only_above_the_low_end(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"

    def verdict(util: float, *extra: str) -> tuple[int, dict]:
        script.write_text(f"vllm serve Qwen/Qwen3-8B --max-model-len 40000 --gpu-memory-utilization {util}\n")
        code, out, _ = run_cli(["check", str(script), "--gpu", "H100", "-f", "json", *extra])
        return code, json.loads(out)["deployments"][0]

    found = None
    for util in (0.28, 0.29, 0.30, 0.31, 0.32, 0.33, 0.34, 0.35):
        code, dep = verdict(util)
        if "may-not-fit" in [f["code"] for f in dep["findings"]]:
            found = util
            assert code == 0 and dep["status"] == "warn"
            break
    assert found is not None, "some utilization fits only above the low end"
    code, dep = verdict(found, "--strict")
    assert code == 1
