"""TensorRT-LLM's backend as a variant (kvplan/engines/trtllm/variant.py): the PyTorch backend from 0.17, the default
from 1.0; a prebuilt engine (the C++ runtime) the default before. Read by --trtllm-backend, by ``kvplan check`` from
``--backend`` / the YAML's ``backend:``, and by ``kvplan log`` from PyExecutor's lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.budgets import Settings
from kvplan.budgets.base import GIB, activation_bytes
from kvplan.deploy import check
from kvplan.engines.trtllm import variant
from kvplan.engines.trtllm.budget import CONTEXT_BYTES
from kvplan.engines.trtllm.log import PYTORCH_FORMAT, logged_settings
from kvplan.errors import UsageError
from kvplan.plan import max_batch
from conftest import REPO

LLAMA8 = "meta-llama/Llama-3.1-8B"


@pytest.mark.parametrize(("version", "given", "want"), [
    ((0, 20), None, "engine"), ((0, 8), None, "engine"), ((1, 0), None, "pytorch"), ((1, 2), None, "pytorch"),
    ((0, 17), "pytorch", "pytorch"), ((0, 20), "pytorch", "pytorch"), ((1, 2), "engine", "engine"),
    ((0, 12), "engine", "engine"),
])
def test_the_backend_defaults_by_release(version, given, want):
    assert variant.chosen(version, given).name == want


@pytest.mark.parametrize("version", [(0, 16), (0, 12), (0, 8)])
def test_pytorch_before_its_first_release_is_refused(version):
    with pytest.raises(UsageError) as exc:
        variant.chosen(version, "pytorch")
    assert exc.value.field == "trtllm_backend"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvplan", "max-batch", LLAMA8, "-e", "trtllm", "-g", "H100-SXM-80GB",
                           "-c", "4k", *args], capture_output=True, text=True, cwd=REPO)


def test_the_flag_refuses_pytorch_at_0_16_by_name():
    done = _cli("--engine-version", "0.16", "--trtllm-backend", "pytorch")
    assert done.returncode == 2 and "--trtllm-backend" in done.stderr


def _plan(version: str, backend: str | None, **settings):
    return max_batch(LLAMA8, gpu="H100-SXM-80GB", engine="trtllm", engine_version=version, max_model_len=4096,
                     settings=Settings(trtllm_backend=backend, **settings))


def test_pytorch_before_1_0_plans_the_1_0_rule_without_engine_buffers():
    pytorch, engine, new = _plan("0.20", "pytorch"), _plan("0.20", None), _plan("1.0", None)
    # the same rule as 1.0's default, less the CUDA graphs 1.0 captures by default before the estimation (warmup.py)
    assert pytorch.per_gpu.cudagraph_bytes == 0 < new.per_gpu.cudagraph_bytes
    assert pytorch.per_gpu.activation_bytes == new.per_gpu.activation_bytes
    table = next(i.bytes for i in new.items if i.name == "block_offsets")  # the same in both (warmup.py)
    assert table == next(i.bytes for i in pytorch.items if i.name == "block_offsets")
    fraction = new.per_gpu.kv_cache_bytes / (new.per_gpu.budget_bytes - new.per_gpu.weights_bytes
                                             - new.per_gpu.activation_bytes - new.per_gpu.cudagraph_bytes
                                             - table - new.per_gpu.non_torch_bytes)
    assert pytorch.per_gpu.kv_cache_bytes - new.per_gpu.kv_cache_bytes == \
        pytest.approx(fraction * new.per_gpu.cudagraph_bytes, abs=2)
    assert engine.per_gpu.kv_cache_bytes < pytorch.per_gpu.kv_cache_bytes  # runtime buffers and decoder subtracted


def test_case_6294_budget_by_hand():
    # trtllm-6294-llama31-8b-fp8-h100-bench-f080 (tests/data/engine_logs_issue21f.yaml): 0.20.0, --backend pytorch.
    # TensorRT-LLM 0.20 tensorrt_llm/_torch/pyexecutor/_util.py cal_max_tokens:
    #   available = (total - peak + the dry run's KV) x fraction, the peak = torch's peak (weights + dry-run KV +
    #   warm-up activations) + memory outside torch; kvplan: fraction x (total - weights - activation - block-offset
    #   table - 0.6 GiB).
    weights, fraction, tokens, seqs = round(8.46 * GIB), 0.8, 23552, 4096
    plan = max_batch("meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM-80GB", engine="trtllm", engine_version="0.20.0",
                     max_model_len=157, settings=Settings(weights_bytes=weights, free_gpu_memory_fraction=fraction,
                                                          max_num_batched_tokens=tokens, max_num_seqs=seqs,
                                                          trtllm_backend="pytorch"))
    spec = plan.per_gpu
    from kvplan.sources.resolve import load_model

    # the dry run's dummy context requests: 156 tokens each (max_seq_len - 1) until 23,552 are queued, 151 of them,
    # one fp32 logits row each, and the attention op's context workspace (32 MiB + 23,552 x (4,096 x 2 + 8) B);
    # 0.20 captures no CUDA graphs by default
    act, _ = activation_bytes(load_model("meta-llama/Llama-3.1-8B-Instruct"), tokens, 1, 151)
    act += (32 << 20) + tokens * (4096 * 2 + 8)
    assert spec.activation_bytes == act and spec.non_torch_bytes == CONTEXT_BYTES and spec.cudagraph_bytes == 0
    # the attention metadata's KV block-offset table: 4,096 sequences x K/V x 5 blocks ("Max KV cache pages per
    # sequence: 5 [window size=157]") x int32
    table = 4096 * 2 * 5 * 4
    assert next(i.bytes for i in plan.items if i.name == "block_offsets") == table
    assert spec.kv_cache_bytes == int((plan.gpu_total_bytes - weights - act - table - CONTEXT_BYTES) * fraction)
    # the log's pool (52.51 GiB) is trtllm-bench's max_tokens cap (860,308 tokens, "The smaller value will be used"):
    # the fraction's own pool is at least that large
    assert spec.kv_cache_bytes >= 52.51 * GIB


# ------------------------------------------------------------------------------------------------ check

def _deploy(tmp_path: Path, version: str, flags: str = "", options: str | None = None) -> Path:
    if options is not None:
        (tmp_path / "extra.yaml").write_text(options)
        flags += " --extra_llm_api_options extra.yaml"
    path = tmp_path / "serve.sh"
    path.write_text(f"# kvplan/gpu: H100\n# kvplan/engine-version: {version}\n"
                    f"trtllm-serve {LLAMA8} --max_seq_len 4096 {flags}\n")
    return path


def _kv(path: Path) -> int:
    report = check([str(path)])
    assert report.exit_code == 0, [f.message for f in report.deployments[0].findings]
    return report.deployments[0].kv_cache_bytes_per_gpu


def test_check_reads_the_yaml_backend(tmp_path):
    engine = _kv(_deploy(tmp_path, "0.20"))
    pytorch = _kv(_deploy(tmp_path, "0.20", options="backend: pytorch\n"))
    flag = _kv(_deploy(tmp_path, "0.20", "--backend pytorch"))
    assert pytorch == flag > engine
    assert _kv(_deploy(tmp_path, "1.0", options="backend: pytorch\n")) == _kv(_deploy(tmp_path, "1.0"))  # its default


def test_check_plans_tensorrt_at_1_x_as_an_engine(tmp_path):
    path = _deploy(tmp_path, "1.2", "--backend tensorrt")
    report = check([str(path)])
    result = report.deployments[0]
    assert report.exit_code == 0 and [f for f in result.findings if f.code == "backend"]
    assert result.kv_cache_bytes_per_gpu < _kv(_deploy(tmp_path, "1.2"))


def test_check_plans_autodeploy_by_the_pytorch_rule(tmp_path):
    assert _kv(_deploy(tmp_path, "0.20", "--backend _autodeploy")) == _kv(_deploy(tmp_path, "0.20", "--backend pytorch"))


def test_check_refuses_pytorch_before_0_17(tmp_path):
    report = check([str(_deploy(tmp_path, "0.16", options="backend: pytorch\n"))])
    assert report.exit_code == 2
    found = [f for f in report.deployments[0].findings if f.code == "invalid-input"]
    assert found and "--backend pytorch" in found[0].message


# ------------------------------------------------------------------------------------------------ log

EXCERPT = """[TensorRT-LLM] TensorRT-LLM version: {version}
[07/24/2025-08:13:02] [TRT-LLM] [I] Rank 0 uses 8.46 GB for model weights.
[TensorRT-LLM][INFO] Number of tokens per block: 32.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 52.51 GiB for max tokens in paged KV cache (860320).
[07/24/2025-08:18:47] [TRT-LLM] [I] max_seq_len=157, max_num_requests=4096, max_num_tokens=23552
"""


def _format(text: str) -> str:
    from kvplan.logs import parse_text

    return parse_text(text, engine="trtllm").format


def test_log_detects_pyexecutor_before_1_0():
    assert _format(EXCERPT.format(version="0.20.0")) == PYTORCH_FORMAT
    assert logged_settings(PYTORCH_FORMAT, "0.20.0") == {"trtllm_backend": "pytorch"}


def test_log_keeps_the_plain_format_from_1_0_and_for_engine_logs():
    assert _format(EXCERPT.format(version="1.0.0")) == "trtllm"
    engine = EXCERPT.format(version="0.12.0").replace(
        "[07/24/2025-08:18:47] [TRT-LLM] [I] max_seq_len=157, max_num_requests=4096, max_num_tokens=23552\n", "")
    assert _format(engine) == "trtllm"
    assert logged_settings("trtllm", "0.20.0") == {} and logged_settings(PYTORCH_FORMAT, "1.0.0") == {}
