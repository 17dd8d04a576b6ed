"""vLLM's two GPU model runners (kvplan/engines/vllm/runner.py): which one a release runs for a model, and the
CUDA-graph term each takes off the KV budget. Goldens: each release's wheel (docs/research-vllm-runner.md) and
the real start-up logs in tests/data/engine_logs_issue21.yaml."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

import kvplan
from kvplan.budgets.base import GIB, Settings
from kvplan.engines.version import parse_version
from kvplan.engines.vllm import runner
from kvplan.errors import UsageError
from kvplan.plan import CapacityPlan
from kvplan.sources.resolve import load_model

from conftest import checked_kv_tokens

QWEN05 = str(Path(__file__).parent / "data" / "hf_configs" / "Qwen__Qwen2.5-0.5B.json")


def pick(model: str, version: str, proposer: str | None = None, pp: int = 1) -> str:
    return runner.default(parse_version(version), load_model(model), proposer, pp)[0]


@pytest.mark.parametrize(("model", "version", "expected"), [
    ("Qwen/Qwen3-8B", "0.21.0", "v1"),  # envs.py: VLLM_USE_V2_MODEL_RUNNER defaults to "0"
    ("Qwen/Qwen3-8B", "0.22.0", "v2"),  # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = {"Qwen3ForCausalLM"}
    ("meta-llama/Llama-3.1-8B", "0.22.0", "v1"),
    ("meta-llama/Llama-3.1-8B", "0.23.0", "v2"),  # + Llama, Mistral
    ("Qwen/Qwen2.5-7B", "0.24.0", "v1"),  # qwen2 is listed in no release
    ("Qwen/Qwen2.5-7B", "0.25.0", "v2"),  # "... or not model_config.is_moe"
    ("Qwen/Qwen3-30B-A3B", "0.27.1", "v1"),  # a MoE not listed
    ("deepseek-ai/DeepSeek-V2-Lite", "0.27.1", "v2"),  # DeepseekV2ForCausalLM is listed
    ("Qwen/Qwen3-30B-A3B", "0.29.0", "v2"),  # 0.29: no architecture test left
])
def test_default_runner_by_release_and_model(model: str, version: str, expected: str) -> None:
    assert pick(model, version) == expected


def test_unsupported_speculation_falls_back_to_v1() -> None:
    assert pick("meta-llama/Llama-3.1-8B", "0.30.0", "ngram") == "v1"
    assert pick("meta-llama/Llama-3.1-8B", "0.30.0", "draft_model") == "v1"
    assert pick("meta-llama/Llama-3.1-8B", "0.31.0", "draft_model") == "v2"
    assert pick("meta-llama/Llama-3.1-8B", "0.32.0", "ngram") == "v2"
    assert pick("meta-llama/Llama-3.1-8B", "0.29.0", "eagle3", pp=2) == "v1"
    assert pick("meta-llama/Llama-3.1-8B", "0.30.0", "eagle3", pp=2) == "v2"


def _plan(version: str, runner_: str | None = None, **kw: object) -> CapacityPlan:
    settings = Settings(model_runner=runner_, weights_bytes=int(0.93 * GIB), **kw)  # type: ignore[arg-type]
    return kvplan.max_batch(QWEN05, gpu="RTX-4090", engine_version=version, max_model_len=32768, settings=settings)


def test_v2_subtracts_no_cudagraph_memory_before_0_29() -> None:
    # gpu/model_runner.py profile_cudagraph_memory returns 0 in 0.12 - 0.28; V1's estimate is subtracted
    v2, v1 = _plan("0.27.1"), _plan("0.27.1", "v1")
    assert v2.per_gpu.cudagraph_bytes == 0 and v1.per_gpu.cudagraph_bytes > 0
    assert v2.per_gpu.kv_cache_bytes - v1.per_gpu.kv_cache_bytes == v1.per_gpu.cudagraph_bytes
    assert any("Model Runner V2" in a for a in v2.assumptions)
    assert not any("Model Runner V2" in a for a in v1.assumptions)


def test_v2_subtracts_its_measured_graphs_from_0_29() -> None:
    # gpu/cudagraph_utils.py profile_cudagraph_memory (0.29.0): captured, and the worker subtracts it
    assert _plan("0.29.0").per_gpu.cudagraph_bytes > 0
    assert _plan("0.29.0", enforce_eager=True).per_gpu.cudagraph_bytes == 0


def test_real_v2_logs_within_a_percent() -> None:
    # engine_logs_issue21.yaml: Qwen2.5-0.5B under Model Runner V2, given the logged weights
    from kvplan.hardware import find_gpu, load_catalog

    rtx4090 = dataclasses.replace(find_gpu("RTX-4090", load_catalog(None)), memory_bytes=round(23.99 * GIB),
                                  memory_precision="exact", estimate=False)  # the total the log prints
    lab = kvplan.max_batch(QWEN05, gpu=rtx4090, engine_version="0.27.1",
                           max_model_len=32768, settings=Settings(weights_bytes=int(0.93 * GIB),
                                                                  gpu_memory_utilization=0.92))
    assert lab.per_gpu.kv_cache_bytes / GIB == pytest.approx(20.52, abs=0.01 * 23.99)  # logged 20.52 GiB
    card16 = kvplan.max_batch(QWEN05, gpu_memory="15.55GiB", engine_version="0.26.0", max_model_len=32768,
                              settings=Settings(weights_bytes=int(0.93 * GIB), gpu_memory_utilization=0.9,
                                                max_num_batched_tokens=32768, max_num_seqs=256))
    assert card16.per_gpu.kv_cache_bytes / GIB == pytest.approx(11.94, abs=0.01 * 15.55)  # logged 11.94 GiB


def test_v2_refused_before_it_existed() -> None:
    with pytest.raises(UsageError) as err:
        _plan("0.11", "v2")
    assert err.value.field == "model_runner"


def test_cli_flag_reads_v1_or_v2() -> None:
    base = [sys.executable, "-m", "kvplan", "max-batch", QWEN05, "--gpu", "RTX-4090", "--engine", "vllm",
            "--engine-version", "0.27.1", "--max-model-len", "32768"]
    ok = subprocess.run([*base, "--model-runner", "v1"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([*base, "--model-runner", "v3"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "--model-runner" in bad.stderr and bad.stderr.count("\n") == 1


LOGS = Path(__file__).parent / "data" / "logs"


def test_log_says_which_runner() -> None:
    from kvplan.logs import parse_log

    # "Using V2 Model Runner" (0.26.0); V2's [model_runner.py:N] lines from EngineCore (0.27.1, 0.31.0)
    for name in ("vllm-0.26.0-runner-v2-16g.log", "vllm-0.27.1-runner-v2-4090.log", "vllm-0.31.0-runner-v2-a100.log"):
        log = parse_log(str(LOGS / name))
        assert log.format == "vllm-v1-runner-v2", name
    v1 = parse_log(str(LOGS / "vllm-0.21-tp4-ranks.log"))  # [gpu_model_runner.py:N]: the V1 runner
    assert v1.format == "vllm-v1"
    # the V0 engine at 0.8+ logs from worker/model_runner.py, bracketed too: never read as V2
    import yaml

    from kvplan.logs import parse_text

    cases = yaml.safe_load((Path(__file__).parent / "data" / "engine_logs_collected.yaml").read_text())["cases"]
    v0 = [c for c in cases if c.get("v0") and "[model_runner.py:" in str(c.get("log_excerpt"))]
    assert len(v0) >= 3
    assert all(parse_text(c["log_excerpt"]).format != "vllm-v1-runner-v2" for c in v0)


def test_calibration_from_a_v2_log_plans_with_v2() -> None:
    from kvplan.calibrate import calibrate
    from kvplan.logs import parse_log
    from kvplan.logs.calibration import from_log

    log = parse_log(str(LOGS / "vllm-0.26.0-runner-v2-16g.log"))
    cal = from_log(log, model=QWEN05)
    c = calibrate(cal, QWEN05, gpu=None, gpu_memory=str(cal.gpu.total_bytes), tp=1, pp=1, engine="vllm",
                  engine_version=None, kv_dtype="auto", max_model_len=32768, settings=Settings())
    assert c is not None and c.settings.model_runner == "v2"
    plan = kvplan.max_batch(QWEN05, gpu_memory=str(cal.gpu.total_bytes), engine="vllm",
                            engine_version=c.engine_version, max_model_len=32768, settings=c.settings)
    assert plan.per_gpu.cudagraph_bytes == 0  # captured after the KV cache was sized: not subtracted
    # the logged pool, 1,043,072 tokens (GPU KV cache size), to a block of 16 tokens
    assert abs(plan.kv_cache_tokens - 1_043_072) <= 16


def test_estimate_and_092_from_the_0_20_wheel() -> None:
    # 0.20.0: envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default "1", config/cache.py default 0.92 (0.19.0:
    # "0" and 0.9), though the 0.20.0 log line says "default since v0.21.0"
    old = kvplan.max_batch("Qwen/Qwen3-8B", gpu="H100", engine_version="0.19.1")
    new = kvplan.max_batch("Qwen/Qwen3-8B", gpu="H100", engine_version="0.20.0")
    assert old.per_gpu.cudagraph_bytes == 0 and new.per_gpu.cudagraph_bytes > 0
    assert (old.engine_defaults["gpu_memory_utilization"], new.engine_defaults["gpu_memory_utilization"]) == (0.9, 0.92)


def test_check_reads_the_deployments_runner_variable(tmp_path: Path) -> None:
    def tokens(env: str) -> int:
        path = tmp_path / "serve.sh"
        path.write_text("# kvplan/gpu: RTX-4090\n# kvplan/engine-version: 0.27.1\n"
                        f"{env}vllm serve Qwen/Qwen3-8B --max-model-len 8192\n")
        return checked_kv_tokens(path)

    # 0.27.1 runs Qwen3-8B on V2 by default (no graphs taken off); VLLM_USE_V2_MODEL_RUNNER=0 takes V1's estimate
    default, v1, v2 = tokens(""), tokens("VLLM_USE_V2_MODEL_RUNNER=0 "), tokens("VLLM_USE_V2_MODEL_RUNNER=1 ")
    assert default == v2 > v1
