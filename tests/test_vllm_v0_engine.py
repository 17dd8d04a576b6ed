"""vLLM's V0 engine at the releases whose default was V1 (0.8-0.10; kvplan/engines/vllm/variant.py): the
--vllm-engine setting, VLLM_USE_V1=0 in a deployment, the budget terms V0 charges (goldens: a real V0 0.8 log
in tests/data/engine_logs_collected.yaml), and ``kvplan log`` reading such a log as V0's."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import kvplan
from kvplan.budgets.base import GIB, Settings
from kvplan.deploy import check
from kvplan.engines.version import parse_version
from kvplan.engines.vllm import fitted, variant
from kvplan.errors import UsageError
from conftest import DATA

COLLECTED = {c["id"]: c for c in yaml.safe_load((DATA / "engine_logs_collected.yaml").read_text())["cases"]}
QWEN06 = "Qwen/Qwen3-0.6B"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, check=False)


def _max_batch(version: str, engine: str | None) -> list[str]:
    return ["max-batch", QWEN06, "--gpu", "RTX-4090", "--engine", "vllm", "--engine-version", version,
            "--max-model-len", "8192", "-f", "json", *(["--vllm-engine", engine] if engine else [])]


def test_flag_accepted_and_said_in_json() -> None:
    v0 = _cli(*_max_batch("0.9.2", "v0"))
    assert v0.returncode == 0, v0.stderr
    doc = json.loads(v0.stdout)
    assert doc["engine_defaults"]["vllm_engine"] == "v0"
    assert any("vLLM V0 engine at 0.9.2" in a for a in doc["assumptions"])
    # V0: max(max_model_len, 2048) tokens and 256 sequences, not V1's table
    assert doc["engine_defaults"]["max_num_batched_tokens"] == 8192 and doc["engine_defaults"]["max_num_seqs"] == 256
    v1 = json.loads(_cli(*_max_batch("0.9.2", "v1")).stdout)
    default = json.loads(_cli(*_max_batch("0.9.2", None)).stdout)
    assert "vllm_engine" not in v1["engine_defaults"] and v1["per_gpu"] == default["per_gpu"]
    assert doc["per_gpu"]["kv_cache_bytes"] != v1["per_gpu"]["kv_cache_bytes"]


@pytest.mark.parametrize(("version", "engine", "said"), [
    ("0.11", "v0", "no V0 engine"),  # no vllm/worker/worker.py in the 0.11.0 wheel
    ("0.33", "v0", "no V0 engine"),
    ("0.7", "v1", "from 0.8"),  # V1 was an opt-in preview before 0.8: kvplan has no rules for it
    ("0.9.2", "v2", "choose v0 or v1"),
])
def test_flag_refused_per_release(version: str, engine: str, said: str) -> None:
    bad = _cli(*_max_batch(version, engine))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "--vllm-engine" in bad.stderr and said in bad.stderr


@pytest.mark.parametrize(("version", "given", "expected"), [
    ("0.7.3", None, "v0"), ("0.8.0", None, "v1"), ("0.10.2", "v0", "v0"), ("0.10.2", None, "v1"),
    ("0.8.5", "v1", "v1"),
])
def test_engine_by_release(version: str, given: str | None, expected: str) -> None:
    assert variant.chosen(parse_version(version), given).name == expected


def test_v0_before_0_8_is_the_default_plan() -> None:
    def plan(engine: str | None) -> kvplan.CapacityPlan:
        return kvplan.max_batch(QWEN06, gpu="RTX-4090", engine="vllm", engine_version="0.7.3", max_model_len=8192,
                                settings=Settings(vllm_engine=engine))
    given, default = plan("v0"), plan(None)
    assert given.per_gpu == default.per_gpu and given.engine_defaults == default.engine_defaults
    assert "vllm_engine" not in given.engine_defaults  # V0 is that release's own engine: nothing to say


def test_v0_budget_terms_derived_by_hand_from_a_0_8_log() -> None:
    # file-rtx4070-8g-llama32-3b-gguf-q8-u090-10k: vLLM 0.8.2, V0 ('[worker.py:267]' summary), Llama-3.2-3B,
    # --max-model-len 10000, --enforce-eager, util 0.90, total_gpu_memory 7.65 GiB, weights 3.2637 GiB; logged
    # non-torch 0.02, activation 1.22, KV 2.38 GiB
    case = COLLECTED["file-rtx4070-8g-llama32-3b-gguf-q8-u090-10k"]
    rep = case["reported"]
    total, weights = round(rep["total_gpu_memory_gib"] * GIB), round(rep["weights_gib"] * GIB)
    plan = kvplan.max_batch(case["kvplan_model"], gpu_memory=str(total), engine="vllm", engine_version=case["version"],
                            max_model_len=case["max_model_len"],
                            settings=Settings(weights_bytes=weights, gpu_memory_utilization=0.9, enforce_eager=True,
                                              vllm_engine="v0"))
    g = plan.per_gpu
    # _set_default_args_v0: 10,000 <= 32,768, no chunked prefill -> max(10,000, 2048) tokens, 256 sequences
    assert plan.engine_defaults["max_num_batched_tokens"] == 10_000 and plan.engine_defaults["max_num_seqs"] == 256
    assert g.budget_bytes == math.ceil(total * 0.9)
    # profile_run samples min(256, 10,000) rows of Llama-3's 128,256 logits by the sort path: 38 B per logit
    assert g.activation_bytes == 256 * 128_256 * 38 == 1_247_674_368  # logged 1.22 GiB
    assert g.non_torch_bytes == fitted.FIT.non_torch_v0_tp1 == int(0.05 * GIB)  # V0's growth since its baseline
    assert g.cudagraph_bytes == 0  # V0 captures its graphs after sizing the cache
    assert g.kv_cache_bytes == g.budget_bytes - weights - g.activation_bytes - g.non_torch_bytes
    assert abs(g.kv_cache_bytes / GIB - rep["available_kv_gib"]) < 0.06  # logged 2.38 GiB (kvplan 2.43)
    # the V1 rules of 0.8 (all non-torch 0.76 GiB, V1's profile) miss the same log by 0.68 GiB
    v1 = kvplan.max_batch(case["kvplan_model"], gpu_memory=str(total), engine="vllm", engine_version=case["version"],
                          max_model_len=case["max_model_len"],
                          settings=Settings(weights_bytes=weights, gpu_memory_utilization=0.9, enforce_eager=True))
    assert abs(v1.per_gpu.kv_cache_bytes / GIB - rep["available_kv_gib"]) > 0.5


def test_v0_errors_are_judged_in_their_own_band() -> None:
    assert variant.V0.band((0, 8, 5)) == fitted.V0_AT_V1_BAND[1] == "V0 0.8-0.10"
    assert variant.V0.band((0, 7, 3)) == "V0 0.7" and variant.V1.band((0, 8, 5)) == "V1 0.8-0.9"
    assert fitted.V0_AT_V1_BAND in fitted.JUDGED_BANDS
    assert "V0 0.8-0.10" in fitted.kv_error((0, 8, 5), "V0 0.8-0.10").basis


def _compose(tmp_path: Path, version: str) -> Path:
    path = tmp_path / f"compose-{version}.yaml"
    path.write_text(f"services:\n  llm:\n    image: vllm/vllm-openai:v{version}\n    environment:\n"
                    "      - VLLM_USE_V1=0\n"
                    f"    command: [\"--model\", \"{QWEN06}\", \"--max-model-len\", \"8192\"]\n"
                    "    x-kvplan:\n      gpu: RTX-4090\n")
    return path


def test_check_plans_vllm_use_v1_0_as_v0_and_refuses_it_from_0_11(tmp_path: Path) -> None:
    result = check([str(_compose(tmp_path, "0.9.2"))]).deployments[0]
    v0 = kvplan.max_batch(QWEN06, gpu="RTX-4090", engine="vllm", engine_version="0.9.2", max_model_len=8192,
                          settings=Settings(vllm_engine="v0"))
    assert result.kv_cache_bytes_per_gpu == v0.per_gpu.kv_cache_bytes
    assert any("vLLM V0 engine" in a for a in result.assumptions)
    gone = check([str(_compose(tmp_path, "0.11.0"))]).deployments[0]
    assert any(f.severity == "error" and "no V0 engine" in f.message for f in gone.findings)


def test_refusal_names_the_setting() -> None:
    with pytest.raises(UsageError) as err:
        variant.chosen((0, 11, 0), "v0")
    assert err.value.field == "vllm_engine"


# ------------------------------------------------------------------------------------- kvplan log

ROCM = COLLECTED["file-rocm-16g-qwen3-06b-u090-40k-v085"]  # 'Initializing a V0 LLM engine (v0.8.5)'


def test_log_compare_and_calibration_plan_the_v0_engine(tmp_path: Path) -> None:
    path = tmp_path / "rocm-v0.log"
    path.write_text(ROCM["log_excerpt"])
    compared = _cli("log", str(path), "--compare", "--model", QWEN06, "-f", "json")
    assert compared.returncode == 0, compared.stderr
    doc = json.loads(compared.stdout)
    assert any("vLLM V0 engine at 0.8.5" in a for a in doc["compare"]["assumptions"])
    cal = tmp_path / "cal.yaml"
    assert _cli("log", str(path), "--model", QWEN06, "--save", str(cal)).returncode == 0
    planned = _cli("max-batch", QWEN06, "--gpu-memory", "15.98GiB", "--engine", "vllm", "--max-model-len", "40960",
                   "--calibration", str(cal), "-f", "json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["engine_defaults"]["vllm_engine"] == "v0"
    assert plan["num_blocks"] == ROCM["reported"]["num_gpu_blocks"]  # '# rocm blocks: 6495'


def test_v0_eager_forward_peak_derived_by_hand_from_a_t4_log() -> None:
    # file-t4-qwen25-15b-u050-32k-v072 (engine_logs_collected.yaml): vLLM 0.7.2 V0 on a T4 (XFormers), Qwen2.5-1.5B
    # fp16, max_seq_len 32768, chunked prefill off, capture list up to 256 (the default 256 sequences), util 0.50;
    # logged activation 2.02 GiB, KV 2.36 GiB
    case = COLLECTED["file-t4-qwen25-15b-u050-32k-v072"]
    rep = case["reported"]
    total, weights = round(rep["total_gpu_memory_gib"] * GIB), round(rep["weights_gib"] * GIB)
    plan = kvplan.max_batch(case["kvplan_model"], gpu_memory=str(total), engine="vllm", engine_version="0.7.2",
                            max_model_len=32768,
                            settings=Settings(weights_bytes=weights, gpu_memory_utilization=0.5))
    # 32,768 <= 32,768: no chunked prefill, max(32,768, 2048) tokens in 256 prompts
    assert plan.engine_defaults["max_num_batched_tokens"] == 32768
    # eager MLP at down_proj (0.7.2 models/qwen2.py Qwen2MLP.forward keeps gate_up named): gate_up 2 x 8,960, the
    # activation's output 8,960, down_proj's output, the residual and the MLP input 1,536 each, fp16:
    # (26,880 + 4,608) x 2 B = 62,976 B a token, 1.92 GiB; above the sampler's 256 x 151,936 x 38 B = 1.38 GiB
    assert plan.per_gpu.activation_bytes == 32768 * (3 * 8960 + 3 * 1536) * 2 == 2_063_597_568
    assert abs(plan.per_gpu.activation_bytes / GIB - rep["activation_peak_gib"]) < 0.11  # logged 2.02 GiB
    # V1 (torch.compile plans the compiled graph's buffers) keeps kvplan's calibrated profile
    v1 = variant.V1.forward_per_token(kvplan.load_model(case["kvplan_model"]), 1)
    assert v1 is None


@pytest.mark.parametrize(("model_type", "ups", "hiddens"), [("llama", 2, 2), ("qwen2", 2, 3), ("qwen3", 2, 3),
                                                         ("phi", 1, 2), ("gpt2", 1, 2)])
def test_v0_eager_forward_counts_the_gate_where_the_mlp_has_one(model_type: str, ups: int, hiddens: int) -> None:
    import dataclasses

    spec = dataclasses.replace(kvplan.load_model(QWEN06), model_type=model_type, hidden_size=1000, mlp_width=4000,
                               num_experts=None)
    # up projection output (ups x width / tp) + activation output (width / tp) + residual + MLP input (+ down_proj's
    # output where the gate/up output keeps its name: Qwen2MLP), bf16
    assert variant.V0.forward_per_token(spec, 2) == ((ups + 1) * 4000 // 2 + hiddens * 1000) * 2
    moe = dataclasses.replace(spec, num_experts=8)
    assert variant.V0.forward_per_token(moe, 1) is None  # fused-MoE buffers: budget.py's MoE workspace


@pytest.mark.parametrize(("version", "gpu", "expected"), [
    ("0.8.5", "MI300X", "v0"), ("0.9.1", "MI325X", "v0"), ("0.9.2", "MI300X", "v1"), ("0.8.5", "H100-SXM-80GB", "v1"),
    ("0.8.0", "AMD Radeon RX 7900 XTX", "v0"), ("0.10.1", "MI300X", "v1")])
def test_rocm_runs_v0_by_default_until_0_9_2(version: str, gpu: str, expected: str) -> None:
    # 0.8.0 / 0.8.5 EngineArgs._is_v1_supported_oracle: not_cuda -> "Falling back to V0 Engine" (the ROCm log in
    # engine_logs_collected.yaml prints it at 0.8.5); 0.9.0 / 0.9.1: v0_hardware = not (CUDA, TPU, x86 CPU);
    # 0.9.2: current_platform.default_v1, True on ROCm
    assert variant.chosen(parse_version(version), None, gpu).name == expected
    assert variant.chosen(parse_version(version), "v1", gpu).name == "v1"  # VLLM_USE_V1=1 given: V1


def test_v0_on_rocm_profiles_the_whole_context() -> None:
    # 0.8.5 _set_default_args_v0: chunked prefill above 32K only where current_platform.is_cuda() (0.7.3: and not
    # is_rocm()): the scheduler keeps max(max_model_len, 2048) tokens, and profile_run runs them all
    def plan(gpu: str) -> kvplan.CapacityPlan:
        return kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu=gpu, engine="vllm", engine_version="0.8.5",
                                max_model_len=131072)
    rocm, cuda = plan("MI300X"), plan("H200-141GB")
    assert rocm.engine_defaults["vllm_engine"] == "v0" and rocm.engine_defaults["max_num_batched_tokens"] == 131072
    # the eager forward over 131,072 tokens: (3 x 14,336 + 2 x 4,096) x 2 B a token
    assert rocm.per_gpu.activation_bytes == 131072 * (3 * 14336 + 2 * 4096) * 2
    assert "vllm_engine" not in cuda.engine_defaults and cuda.engine_defaults["max_num_batched_tokens"] != 131072
    v0_cuda = kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="H200-141GB", engine="vllm", engine_version="0.8.5",
                               max_model_len=131072, settings=Settings(vllm_engine="v0"))
    assert v0_cuda.engine_defaults["max_num_batched_tokens"] == 2048  # CUDA: chunked prefill on above 32K
