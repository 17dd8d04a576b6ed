"""Expert parallelism with data-parallel attention, and the GPU search (issue 22).

- vLLM ``--data-parallel-size 8 --enable-expert-parallel`` for DeepSeek-R1 on 8 x H200 was planned as 8 whole
  replicas (626.92 GiB of weights per GPU, "leave no KV cache"). vLLM's ``FusedMoEParallelConfig.make``
  (vllm/model_executor/layers/fused_moe/config.py) spreads the experts over EP = tp x dp devices; attention,
  dense layers, embeddings and lm_head stay per DP rank (split over its tp), each rank with its own KV cache.
- SGLang ``--enable-dp-attention`` (layers/dp_attention.py, server_args.py ``_handle_data_parallelism``) and
  TensorRT-LLM ``enable_attention_dp`` (tensorrt_llm/mapping.py) are the same layout under other flags.
- ``max-batch --solve gpus`` dropped a given ``--tp`` and proposed splits nobody runs (tp 1 x pp 16).

The manifests below are small reproductions written for these tests (the issue's commands), not copies of
public files.
"""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvplan
from conftest import hf_token, run_cli
from kvplan.errors import UsageError
from kvplan.plan import Search
from kvplan.sources.resolve import load_model

GIB = 1 << 30
R1 = "deepseek-ai/DeepSeek-R1"
TOKEN = "hf_expertPARALLELtokenNeverPrinted"

# model_specs/deepseek-ai__DeepSeek-R1.yaml, read by hand
R1_WEIGHTS = 688_574_839_360
R1_MTP = 15_424_227_552
# 58 MoE layers (61 - first_k_dense_replace 3) x 256 routed experts x 3 matrices (gate, up: 7168 -> 2048; down:
# 2048 -> 7168), each fp8: 2048 x 7168 B + ceil(2048/128) x ceil(7168/128) = 896 fp32 block scales
R1_EXPERTS = 58 * 256 * 3 * (2048 * 7168 + 16 * 56 * 4)


def _one_line(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _check(path: Path) -> tuple[int, dict]:
    import json

    code, out, err = run_cli(["check", str(path), "-f", "json"])
    assert "Traceback" not in err
    return code, json.loads(out)


# ------------------------------------------------------------------------------------------ the spec figure

def test_expert_bytes_are_the_builders_count():
    spec = load_model(R1)
    assert R1_EXPERTS == 654_068_416_512
    assert (spec.weights_bytes, spec.mtp_weights_bytes, spec.expert_weights_bytes) == (R1_WEIGHTS, R1_MTP, R1_EXPERTS)
    assert load_model("meta-llama/Llama-3.1-8B").expert_weights_bytes is None  # dense: no experts


# ------------------------------------------------------------------------------------------ the library

def test_deepseek_r1_dp8_ep_fits_on_8_h200():
    plan = kvplan.max_batch(R1, gpu="H200", dp=8, expert_parallel=True, max_model_len=32768)
    # by hand: vLLM leaves the MTP layer out (deepseek_v2.py load_weights); the rest of the non-expert weights per
    # DP rank over its tp 1; the routed experts over ep = tp 1 x dp 8
    rest = R1_WEIGHTS - R1_MTP - R1_EXPERTS
    assert rest == 19_082_195_296
    assert plan.per_gpu.weights_bytes == rest + -(-R1_EXPERTS // 8) == 100_840_747_360
    assert plan.fits and (plan.tp, plan.dp, plan.ep, plan.gpu_count) == (1, 8, 8, 8)
    assert plan.per_gpu.kv_cache_bytes > 20 * GIB  # a sensible pool: the weights are 93.9 GiB of 139.8
    assert plan.max_batch >= 8 * 8  # each of the 8 ranks holds 8+ sequences of 32k
    assert plan.to_dict()["parallel"] == {"tp": 1, "pp": 1, "dp": 8, "ep": 8}
    assert any("ep = tp 1 x dp 8 = 8 GPUs" in a for a in plan.assumptions)


def test_whole_replicas_are_the_old_failure():
    plan = kvplan.max_batch(R1, gpu="H200", dp=8, expert_parallel=False, max_model_len=32768)
    assert not plan.fits and f"{plan.per_gpu.weights_bytes / GIB:.2f}" == "626.92"  # the figure


def test_vllm_shares_experts_with_dp_by_default():
    # FusedMoEParallelConfig.make: without --enable-expert-parallel the experts are tensor-sliced over tp x dp
    default = kvplan.max_batch(R1, gpu="H200", dp=8, max_model_len=32768)
    assert default.fits and default.ep == 8
    assert default.per_gpu.weights_bytes == 100_840_747_360
    sglang = kvplan.max_batch(R1, gpu="H200", dp=8, engine="sglang", max_model_len=32768)
    assert sglang.ep == 1 and not sglang.fits  # SGLang's --dp without DP attention: whole replicas


def test_tp_and_dp_with_pipeline_stages():
    plan = kvplan.max_batch(R1, gpu="H200", tp=2, pp=2, dp=4, expert_parallel=True, max_model_len=32768)
    rest = R1_WEIGHTS - R1_MTP - R1_EXPERTS
    assert plan.per_gpu.weights_bytes == -(-rest // 4) + -(-R1_EXPERTS // 16)  # rest / (tp x pp), experts / 16
    assert plan.ep == 8 and plan.gpu_count == 16


def test_dense_model_is_unchanged():
    plain = kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="H100", dp=4, max_model_len=8192)
    asked = kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="H100", dp=4, expert_parallel=True, max_model_len=8192)
    assert plain.per_gpu.weights_bytes == asked.per_gpu.weights_bytes and asked.ep == 1
    assert any("no routed experts" in a for a in asked.assumptions)


def test_expert_parallel_is_a_boolean():
    with pytest.raises(UsageError) as err:
        kvplan.max_batch(R1, gpu="H200", dp=8, expert_parallel=8)  # type: ignore[arg-type]
    assert err.value.field == "expert_parallel"


# ------------------------------------------------------------------------------------------ the CLI

def test_max_batch_flag():
    code, out, err = run_cli(["max-batch", R1, "--gpu", "H200", "--dp", "8", "--enable-expert-parallel",
                              "--max-model-len", "32768", "-f", "json"])
    assert code == 0, err
    import json

    doc = json.loads(out)
    assert doc["per_gpu"]["weights_bytes"] == 100_840_747_360 and doc["parallel"]["ep"] == 8


def test_max_batch_flag_refused_without_expert_parallelism():
    code, _, err = run_cli(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-e", "llamacpp", "--dp", "2",
                            "-ep"])
    assert "expert" in _one_line(code, err)


# ------------------------------------------------------------------------------------------ check: the three engines

_K8S = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: r1}}
spec:
  template:
    spec:
      nodeSelector: {{nvidia.com/gpu.product: NVIDIA-H200}}
      containers:
        - name: server
          image: {image}
          command: {command}
          resources: {{limits: {{nvidia.com/gpu: 8}}}}
"""


def test_check_vllm_dp_ep(tmp_path):
    command = f'[vllm, serve, {R1}, --data-parallel-size, "8", --enable-expert-parallel, --max-model-len, "32768"]'
    code, doc = _check(_write(tmp_path, "d.yaml", _K8S.format(image="vllm/vllm-openai:v0.11.0", command=command)))
    result = doc["deployments"][0]
    assert code == 0 and result["status"] == "pass", result
    assert result["weights_bytes_per_gpu"] == 100_840_747_360
    assert not [f for f in result["findings"] if f["code"] in ("gpu-count", "not-read")]


def test_check_vllm_short_flag(tmp_path):
    command = f'[vllm, serve, {R1}, -dp, "8", -ep, --max-model-len, "32768"]'
    code, doc = _check(_write(tmp_path, "d.yaml", _K8S.format(image="vllm/vllm-openai:v0.11.0", command=command)))
    assert code == 0 and doc["deployments"][0]["weights_bytes_per_gpu"] == 100_840_747_360


def _sglang(tmp_path: Path, running: int) -> tuple[int, dict]:
    command = (f'[python3, -m, sglang.launch_server, --model-path, {R1}, --tp, "8", --dp, "8", --enable-dp-attention, '
               f'--ep-size, "8", --context-length, "32768", --max-running-requests, "{running}"]')
    code, doc = _check(_write(tmp_path, "d.yaml", _K8S.format(image="lmsysorg/sglang:v0.5.2", command=command)))
    return code, doc["deployments"][0]


def test_check_sglang_dp_attention(tmp_path):
    code, result = _sglang(tmp_path, 64)
    assert code == 0 and result["status"] == "pass", result
    # attention tp 8 / 8 = 1, experts over all 8 GPUs: the same per-GPU weights as vLLM's DP8 + EP
    assert result["weights_bytes_per_gpu"] == 100_840_747_360
    assert result["parallel"] == {"tp": 8, "pp": 1, "dp": 8}  # as the file says
    notes = [f for f in result["findings"] if f["code"] == "dp-attention"]
    assert notes and "64 is the whole group's: 8 per rank" in notes[0]["message"]  # 64 // 8
    assert not [f for f in result["findings"] if f["code"] == "gpu-count"]  # tp 8 x pp 1: 8 GPUs, not 64


def test_check_sglang_running_requests_per_rank(tmp_path):
    # 256 // 8 = 32 requests of 32k per rank; each rank's pool (about 33 GiB, 2.14 GiB a request) holds 15
    code, result = _sglang(tmp_path, 256)
    unreachable = [f for f in result["findings"] if f["code"] == "max-num-seqs-unreachable"]
    assert code == 0 and unreachable and "256 (32 per rank)" in unreachable[0]["message"]
    assert "fit per rank" in unreachable[0]["message"]


@pytest.mark.parametrize("extra, field", [('--tp, "8", --dp, "3", --enable-dp-attention', "dp"),
                                          ('--tp, "8", --ep-size, "3"', "ep_size")])
def test_check_sglang_refusals(tmp_path, extra, field):
    command = f'[python3, -m, sglang.launch_server, --model-path, {R1}, {extra}, --context-length, "32768"]'
    code, doc = _check(_write(tmp_path, "d.yaml", _K8S.format(image="lmsysorg/sglang:v0.5.2", command=command)))
    result = doc["deployments"][0]
    assert code == 2 and result["status"] == "invalid", result
    assert any(f["code"] == "invalid-input" and field.replace("_", "-") in f["message"] for f in result["findings"])


def test_check_trtllm_attention_dp(tmp_path):
    _write(tmp_path, "extra.yaml", "enable_attention_dp: true\nmoe_expert_parallel_size: 8\n")
    path = _write(tmp_path, "serve.sh", f"# kvplan/gpu: H200\ntrtllm-serve {R1} --tp_size 8 --max_seq_len 32768 "
                  "--extra_llm_api_options extra.yaml\n")
    code, doc = _check(path)
    result = doc["deployments"][0]
    assert code == 0 and result["status"] == "pass", result
    codes = {f["code"] for f in result["findings"]}
    assert "attention-dp" in codes and "not-read" not in codes
    # TensorRT-LLM loads the MTP layer only for MTP speculation, as vLLM: the same figure
    assert result["weights_bytes_per_gpu"] == 100_840_747_360


def test_trtllm_ep_must_divide_tp(tmp_path):
    path = _write(tmp_path, "serve.sh", f"# kvplan/gpu: H200\ntrtllm-serve {R1} --tp_size 8 --ep_size 3\n")
    code, doc = _check(path)
    assert code == 2 and any("ep_size" in f["message"] for f in doc["deployments"][0]["findings"])


# ------------------------------------------------------------------------------------------ --solve gpus

def test_search_fills_tp_within_a_node_first():
    splits = Search().splits(61)
    assert (1, 16) not in splits and all(tp == 8 for tp, pp in splits if pp > 1)
    assert Search(tp=4).splits(61) == [(4, 1), (4, 2), (4, 4), (4, 8), (4, 16)]  # a tp given: kept
    assert Search(pp=2).splits(61) == [(1, 2), (2, 2), (4, 2), (8, 2)]
    assert all(tp <= 4 for tp, _ in Search(gpus_per_node=4).splits(61))


def test_solve_gpus_keeps_a_given_tp():
    plan = kvplan.max_batch("meta-llama/Llama-3.1-70B", gpu="H100", tp=4, max_model_len=32768, solve="gpus",
                            concurrency=64)
    assert plan.tp == 4 and plan.max_batch >= 64
    assert any("tp 4 as given" in a for a in plan.assumptions)


def test_solve_gpus_never_pipelines_an_unfilled_node():
    for model, gpu in (("meta-llama/Llama-3.1-70B", "H100"), (R1, "H100"), ("Qwen/Qwen3-235B-A22B", "A100-80GB")):
        plan = kvplan.max_batch(model, gpu=gpu, max_model_len=32768, solve="gpus", concurrency=64)
        assert plan.pp == 1 or plan.tp == 8, (model, plan.tp, plan.pp)


def test_solve_gpus_with_expert_parallel_grows_dp():
    # whole replicas of R1 need 2 nodes of H100 each; with the experts shared over the DP ranks, fewer GPUs
    ep = kvplan.max_batch(R1, gpu="H100", max_model_len=32768, solve="gpus", concurrency=64, expert_parallel=True)
    whole = kvplan.max_batch(R1, gpu="H100", max_model_len=32768, solve="gpus", concurrency=64,
                             expert_parallel=False)
    assert ep.max_batch >= 64 and ep.gpu_count <= whole.gpu_count and ep.ep == ep.tp * ep.dp


@pytest.mark.parametrize("argv, field", [
    (["--dp", "2"], "--dp"), (["--gpus-per-node", "0"], "gpus"), (["--gpus-per-node", "true"], "gpus"),
    (["--gpus-per-node", "1.5"], "gpus"), (["--gpus-per-node", "9" * 40], "gpus")])
def test_solve_gpus_refusals(argv, field):
    code, _, err = run_cli(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--solve", "gpus",
                            "--concurrency", "8", *argv])
    assert field in _one_line(code, err)


# ------------------------------------------------------------------------------------------ bounded fuzz

PARALLEL = st.sampled_from(["1", "2", "8", "0", "-1", "3", "true", "1.5", "9" * 30, ""])


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from([R1, "Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-8B"]),
       engine=st.sampled_from(["vllm", "sglang", "trtllm", "hf"]), tp=PARALLEL, pp=PARALLEL, dp=PARALLEL,
       ep=st.booleans(), solve=st.sampled_from(["batch", "gpus"]), node=st.sampled_from([None, "8", "4", "0", "x"]))
def test_fuzz_parallel_flags(model, engine, tp, pp, dp, ep, solve, node):
    argv = ["max-batch", model, "--gpu", "H200", "--max-model-len", "8192", "--engine", engine, "--tp", tp,
            "--pp", pp, "--solve", solve]
    if solve == "gpus":
        argv += ["--concurrency", "16"]
    else:
        argv += ["--dp", dp]
    if ep:
        argv.append("--enable-expert-parallel")
    if node is not None:
        argv += ["--gpus-per-node", node]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with hf_token(TOKEN):
        code, out, err = run_cli(argv, seconds=30)
    assert code in (0, 1, 2), (argv, err)
    assert "Traceback" not in out + err and TOKEN not in out + err
    if code == 2:
        _one_line(code, err)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 512 * 1024  # KiB: bounded memory
