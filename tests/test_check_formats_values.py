"""kvplan check on values and task files (issue 22): llm-d modelservice values, vLLM's Helm chart, SkyPilot tasks,
Ray Serve LLM configs, production-stack's lmcacheConfig and vllmConfig.v0; --ignore-unrecognized never hides a file
that runs an engine; JSON and summaries say what the file says.

Every fixture under tests/data/deployments/ is a copy of a real public file (its source on line 1); the expected
values below are read from those files by hand.
"""

from __future__ import annotations

import json
import os
import resource
import signal
from pathlib import Path

import pytest
import yaml
from conftest import hf_token, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.deploy import check, read_file

DATA = Path(__file__).parent / "data" / "deployments"
TOKEN = "hf_valuesFormatsTOKENneverPrinted"


def read(name: str):
    fmt, deps, findings = read_file(str(DATA / name))
    return fmt, {d.name: d for d in deps}, findings


def settings_of(dep) -> dict:
    return {k: v.value for k, v in dep.settings.items()}


def one_line(code: int, out: str, err: str, field: str) -> None:
    """Exit 2, no traceback, and the field named on the finding's one line."""
    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert any(field in line for line in out.splitlines()), out


# ------------------------------------------------------------------------------------------ (1) llm-d modelservice

def test_llmd_pd_values_read_as_the_chart_renders_them():
    fmt, deps, findings = read("llm-d-ms-pd-values.yaml")
    assert fmt == "llm-d" and not findings and set(deps) == {"decode", "prefill"}
    decode, prefill = deps["decode"], deps["prefill"]
    # modelArtifacts.uri hf://openai/gpt-oss-120b; vllmServe: vllm serve MODEL --tensor-parallel-size 4 + args
    assert (decode.engine, decode.model.value, decode.engine_version) == ("vllm", "openai/gpt-oss-120b", None)
    assert [g.value for g in decode.gpus] == ["H200"]  # nodeSelector gpu.nvidia.com/model
    assert decode.gpu_count.value == 4  # no nvidia.com/gpu limit: dataLocal 1 x tensor 4
    s = settings_of(decode)
    assert (s["tp"], s["max_model_len"], s["block_size"]) == (4, 4096, 128)
    assert "gpu_memory_utilization" not in s and "pp" not in s and "dp" not in s and "kv_cache_dtype" not in s
    assert "NixlConnector" in s["kv_transfer_config"]
    assert decode.host_memory.value == 64 * 2**30  # resources.limits.memory 64Gi
    p = settings_of(prefill)
    assert "tp" not in p and prefill.gpu_count.value == 1  # parallelism.tensor 1: no flag, one GPU
    assert (p["max_model_len"], p["gpu_memory_utilization"], p["block_size"]) == (4096, 0.95, 128)


def test_llmd_pd_values_checked():
    report = check([str(DATA / "llm-d-ms-pd-values.yaml")])
    by = {d.name: d for d in report.deployments}
    assert report.exit_code == 0, [f.message for f in report.findings]
    assert (by["decode"].gpu, by["decode"].gpu_count, by["decode"].tp, by["decode"].max_model_len) == \
        ("H200-141GB", 4, 4, 4096)
    assert (by["prefill"].gpu_count, by["prefill"].tp) == (1, 1)


def test_llmd_inference_scheduling_and_heterogeneous_values():
    _, deps, _ = read("llm-d-ms-inference-scheduling-values.yaml")
    assert set(deps) == {"decode"}  # prefill: create: false
    d = deps["decode"]
    assert (d.model.value, settings_of(d)["tp"], settings_of(d)["gpu_memory_utilization"], d.gpu_count.value,
            d.gpus) == ("Qwen/Qwen3-32B", 2, 0.95, 2, [])
    # hf://"{{ .Values.modelArtifacts.name }}" rendered with the name; decode tensor 2, prefill tensor 1
    _, deps, _ = read("llm-d-modelservice-values-heterogeneous-pd.yaml")
    assert deps["decode"].model.value == "facebook/opt-125m" and settings_of(deps["decode"])["tp"] == 2
    assert deps["decode"].gpu_count.value == 2 and deps["prefill"].gpu_count.value == 1
    assert settings_of(deps["prefill"])["enforce_eager"] is True


def test_llmd_parallelism_rules_and_custom_command(tmp_path):
    path = tmp_path / "values.yaml"
    path.write_text("modelArtifacts: {uri: 'pvc+hf://models/hub/Qwen/Qwen3-8B', name: qwen}\nmultinode: true\n"
                    "decode:\n  parallelism: {tensor: 4, data: 16, dataLocal: 8}\n  nodeSelector:\n"
                    "    nvidia.com/gpu.product: NVIDIA-H200\n  containers:\n  - name: vllm\n"
                    "    command: [sh, -c]\n    args: ['exec vllm serve Qwen/Qwen3-8B -tp $(TP_SIZE) --data-parallel-size"
                    " $(DP_SIZE) --data-parallel-size-local $(DP_SIZE_LOCAL)']\n")
    _, deps, findings = read_file(str(path))
    d = deps[0]
    s = settings_of(d)
    # DP 16, DP local 8, workers data / dataLocal = 2: 8 x 4 GPUs per pod, 2 pods (LeaderWorkerSet)
    assert (s["tp"], s["dp"], d.gpu_count.value, d.pods) == (4, 16, 64, 2) and not findings
    assert d.model.value == "Qwen/Qwen3-8B"
    bad = tmp_path / "bad.yaml"
    bad.write_text("modelArtifacts: {uri: hf://Qwen/Qwen3-8B}\ndecode:\n  parallelism: {tensor: true}\n"
                   "  containers: [{name: vllm, modelCommand: vllmServe}]\n")
    one_line(*run_cli(["check", str(bad), "--gpu", "H100"]), "parallelism.tensor")


# ------------------------------------------------------------------------------------------ (2) vLLM's chart

def test_vllm_chart_values():
    fmt, deps, findings = read("vllm-chart-helm-values.yaml")
    d = deps["vllm-chart-helm-values"]
    assert fmt == "vllm-chart" and not findings
    # image.command: vllm serve /data/ --enforce-eager --dtype bfloat16 --block-size 16; tag latest: no version
    assert (d.engine, d.model.value, d.engine_version) == ("vllm", "/data/", None)
    s = settings_of(d)
    assert (s["enforce_eager"], s["block_size"], s.get("dtype")) == (True, 16, "bfloat16")
    assert "tp" not in s and "max_model_len" not in s and "gpu_memory_utilization" not in s
    assert d.gpu_count.value == 1 and d.host_memory.value == 16 * 2**30  # resources.limits
    assert d.gpus == [] and any("TYPE_GPU_USED" in n for n in d.notes)  # the chart's placeholder, not a GPU
    report = check([str(DATA / "vllm-chart-helm-values.yaml")], gpu="L4")
    assert "model-unresolved" in {f.code for f in report.findings}  # /data/ is a path inside the container


# ------------------------------------------------------------------------------------------ (3) SkyPilot

def test_skypilot_vllm_task():
    fmt, deps, _ = read("skypilot-vllm.sky.yaml")
    d = deps["skypilot-vllm.sky"]
    assert fmt == "skypilot" and d.model.value == "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8"  # envs
    assert settings_of(d) == {"tp": 8, "max_model_len": 430000}  # $SKYPILOT_NUM_GPUS_PER_NODE = 8
    assert [g.value for g in d.gpus] == ["H100", "H200", "B100", "B200", "GB200"] and d.gpu_count.value == 8


def test_skypilot_multinode_and_sglang():
    _, deps, _ = read("skypilot-vllm-multinode.sky.yaml")
    d = deps["skypilot-vllm-multinode.sky"]
    # the head node's branch (SKYPILOT_NODE_RANK 0): tp 8 (GPUs per node), pp 2 (num_nodes)
    assert settings_of(d) == {"tp": 8, "pp": 2, "max_model_len": 32768}
    assert (d.gpu_count.value, d.pods, [g.value for g in d.gpus]) == (16, 2, ["H100"])
    _, deps, _ = read("skypilot-sglang.yaml")
    d = deps["skypilot-sglang"]
    assert (d.engine, d.model.value, d.gpu_count.value) == ("sglang", "meta-llama/Llama-2-7b-chat-hf", 1)
    # SkyPilot's A100 is the 40 GB part (sky show-gpus: A100 and A100-80GB)
    assert [g.value for g in d.gpus] == ["L4", "A10G", "A10", "A100-SXM4-40GB", "A100-SXM4-80GB"]
    report = check([str(DATA / "skypilot-sglang.yaml")])
    assert report.exit_code == 0 and len(report.deployments) == 5


def test_skypilot_counts_refused(tmp_path):
    path = tmp_path / "task.yaml"
    path.write_text("resources: {accelerators: 'H100:true'}\nrun: vllm serve Qwen/Qwen3-8B\n")
    one_line(*run_cli(["check", str(path)]), "accelerators")
    path.write_text("num_nodes: true\nresources: {accelerators: H100:8}\nrun: vllm serve Qwen/Qwen3-8B\n")
    one_line(*run_cli(["check", str(path)]), "num_nodes")


# ------------------------------------------------------------------------------------------ (4) Ray Serve LLM

def test_ray_serve_llm_config_file_named_by_path():
    fmt, deps, findings = read("ray/configs/serve_llama_3dot1_8b_tp2.yaml")
    d = deps["llm-endpoint/llm_configs[0]"]
    assert fmt == "ray-serve" and [f.code for f in findings] == ["not-read"]  # found one directory up: said
    assert (d.model.value, [g.value for g in d.gpus], d.gpu_count.value) == \
        ("meta-llama/Llama-3.1-8B-Instruct", ["A10G"], 2)  # two bundles of GPU 1
    assert settings_of(d) == {"max_model_len": 8192, "tp": 2, "enforce_eager": False}
    report = check([str(DATA / "ray" / "configs" / "serve_llama_3dot1_8b_tp2.yaml")])
    r = report.deployments[0]
    assert report.exit_code == 0 and (r.gpu, r.gpu_count, r.tp, r.max_model_len) == ("A10G", 2, 2, 8192)


def test_ray_serve_dp_and_runtime_env():
    _, deps, _ = read("ray/serve_phi_tiny_moe_dp4_gang.yaml")
    d = deps["llm-endpoint/llm_config"]
    assert d.model.value == "microsoft/Phi-tiny-MoE-instruct" and d.gpus == []
    assert settings_of(d) == {"tp": 1, "pp": 1, "dp": 4, "max_model_len": 1024, "max_num_seqs": 32,
                              "enforce_eager": True}
    assert d.gpu_count.value == 4  # a bundle of GPU 1 per data-parallel rank
    _, deps, _ = read("ray/llama_3dot1_8b_quantized_tp1.yaml")
    d = deps["llama_3dot1_8b_quantized_tp1"]
    assert d.model.value == "neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"
    assert settings_of(d) == {"max_model_len": 8192, "tp": 1, "VLLM_USE_V1": "1"}  # runtime_env.env_vars
    assert (d.gpu_count.value, [g.value for g in d.gpus]) == (1, ["A10G"])


def test_ray_serve_a100_names_no_size(tmp_path):
    path = tmp_path / "llm.yaml"
    path.write_text("model_loading_config: {model_id: q, model_source: Qwen/Qwen3-8B}\naccelerator_type: A100\n"
                    "engine_kwargs: {tensor_parallel_size: 2, gpu_memory_utilization: 0.8, kv_cache_dtype: fp8}\n")
    _, deps, _ = read_file(str(path))
    d = deps[0]
    assert [g.value for g in d.gpus] == ["A100-SXM4-40GB", "A100-SXM4-80GB"]
    assert settings_of(d)["kv_cache_dtype"] == "fp8" and settings_of(d)["gpu_memory_utilization"] == 0.8
    path.write_text("model_loading_config: {model_id: Qwen/Qwen3-8B}\nengine_kwargs: {tensor_parallel_size: true}\n")
    one_line(*run_cli(["check", str(path), "--gpu", "H100"]), "tensor-parallel-size")


# ------------------------------------------------------------------------------------------ (5) production stack

def test_production_stack_lmcache_cpu_and_disk_tiers():
    _, deps, _ = read("production-stack-values-01-offload-kv-cache-local-disk.yaml")
    d = deps["llama3"]
    s = settings_of(d)
    assert (d.model.value, s["tp"], s["gpu_memory_utilization"], s["dtype"], s["max_num_batched_tokens"]) == \
        ("meta-llama/Llama-3.3-70B-Instruct", 8, 0.9, "bfloat16", 2048)
    assert json.loads(s["kv_transfer_config"])["kv_connector"] == "LMCacheConnectorV1"
    # cpuOffloadingBufferSize "128", diskOffloadingBufferSize "640" (GiB per worker), env LMCACHE_LOCAL_DISK
    assert (s["lmcache_local_cpu"], s["lmcache_max_local_cpu_size"], s["lmcache_max_local_disk_size"],
            s["lmcache_local_disk"]) == ("True", "128", "640", "file:///kv-store-disk/")
    assert d.gpu_count.value == 8 and d.engine_version is None  # lmcache/vllm-openai's tag is LMCache's
    r = check([str(DATA / "production-stack-values-01-offload-kv-cache-local-disk.yaml")], gpu="H100").deployments[0]
    assert r.status == "pass" and r.offload["host_bytes"] == 8 * 128 * 2**30
    assert r.offload["disk"]["disk_bytes"] == 8 * 640 * 2**30


def test_production_stack_v0_and_chart_defaults():
    _, deps, _ = read("production-stack-values-25-v100-multi-gpu-tp2.yaml")
    d = deps["qwen7b"]
    s = settings_of(d)
    assert s["VLLM_USE_V1"] == "0" and d.engine_version.value == "0.8.5"  # vllmConfig.v0 "1", tag v0.8.5
    assert (s["tp"], s["max_model_len"], s["gpu_memory_utilization"], s["dtype"], s["enforce_eager"]) == \
        (2, 8192, 0.9, "half", True)
    assert s["no_enable_prefix_caching"] is True  # no enablePrefixCaching: the chart passes --no-enable-prefix-caching
    assert d.gpu_count.value == 2 and d.gpus == []  # nodeSelectorTerms on a hostname: no GPU type
    r = check([str(DATA / "production-stack-values-25-v100-multi-gpu-tp2.yaml")], gpu="V100-SXM2-16GB")
    result = r.deployments[0]
    assert result.status == "pass" and result.offload["kind"].startswith("vLLM V0 swap")  # the V0 engine planned
    _, deps, _ = read("production-stack-values-06-session-routing.yaml")
    s = settings_of(deps["opt125m"])
    assert (s["lmcache_max_local_cpu_size"], s["enable_prefix_caching"], s["max_model_len"]) == ("10", True, 1024)


def test_production_stack_keys_the_chart_drops_are_said(tmp_path):
    path = tmp_path / "values.yaml"
    path.write_text("servingEngineSpec:\n  modelSpec:\n  - name: m\n    modelURL: Qwen/Qwen3-8B\n    requestGPU: 1\n"
                    "    vllmConfig: {kvCacheDtype: fp8, maxModelLen: 4096}\n")
    report = check([str(path)], gpu="L4")
    notes = [f.message for f in report.findings if f.code == "not-read"]
    assert any("vllmConfig.kvCacheDtype" in n for n in notes) and report.deployments[0].kv_dtype != "fp8"
    path.write_text("servingEngineSpec:\n  modelSpec:\n  - name: m\n    modelURL: Qwen/Qwen3-8B\n    requestGPU: true\n")
    one_line(*run_cli(["check", str(path), "--gpu", "L4"]), "requestGPU")


# ------------------------------------------------------------------------------------------ (6) honest reporting

def test_ignore_unrecognized_reports_a_file_that_runs_an_engine(tmp_path):
    other = tmp_path / "settings.yaml"
    other.write_text("logging: {level: info}\n")
    runs = tmp_path / "custom.yaml"
    runs.write_text("launcher:\n  cmd: vllm serve Qwen/Qwen3-8B --max-model-len 8192\n")
    report = check([str(other), str(runs)], ignore_unrecognized=True)
    assert report.files[0].skipped and not report.files[1].skipped
    found = report.files[1].findings
    assert [f.code for f in found] == ["engine-not-read"] and found[0].severity == "warning" and found[0].line == 2
    assert report.exit_code == 0 and check([str(runs)], ignore_unrecognized=True, strict=True).exit_code == 1
    assert check([str(runs)]).exit_code == 2  # without the flag: an invalid input, as before


def test_ignore_unrecognized_unknown_kind_document(tmp_path):
    path = tmp_path / "multi.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: example.com/v1\n"
                    "kind: MyServingThing\nspec:\n  image: vllm/vllm-openai:v0.10.2\n---\napiVersion: x/v1\n"
                    "kind: Other\nspec: {}\n")
    report = check([str(path)], ignore_unrecognized=True)
    codes = [(f.code, f.line) for f in report.findings]
    assert codes == [("engine-not-read", 6)]  # the document that runs vLLM; 'Other' runs nothing: dropped


def test_json_parallelism_is_what_the_file_says(tmp_path):
    path = tmp_path / "k8s.yaml"
    path.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n"
                    "      containers:\n      - name: v\n        image: vllm/vllm-openai:v0.10.2\n"
                    "        args: [--model, org/not-bundled, --tensor-parallel-size, '4', --pipeline-parallel-size,"
                    " $(PP), --max-model-len, '8192']\n        resources: {limits: {nvidia.com/gpu: 8}}\n")
    code, out, _ = run_cli(["check", str(path), "--gpu", "H100", "--format", "json"])
    data = json.loads(out)
    d = data["deployments"][0]
    assert code == 2 and d["status"] == "invalid"
    assert d["parallel"] == {"tp": 4, "pp": None, "dp": 1}  # pp: an unresolved $(PP); dp: not written (default)
    assert (d["gpu"]["count"], d["max_model_len"]) == (8, 8192)


def test_summary_counts_add_up(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("a: [1,\n")
    report = check([str(DATA / "skypilot-sglang.yaml"), str(DATA / "vllm-chart-helm-values.yaml"), str(bad)],
                   gpu="L4")
    c = report.counts()
    assert c["deployments"] == c["passed"] + c["failed"] + c["invalid"] == 6
    assert (c["passed"], c["invalid"], c["files_invalid"], c["files_checked"]) == (5, 1, 1, 2)
    assert c["files"] == c["files_checked"] + c["files_invalid"] + c["files_skipped"]
    code, out, _ = run_cli(["check", str(DATA / "skypilot-sglang.yaml"), str(DATA / "vllm-chart-helm-values.yaml"),
                            str(bad), "--gpu", "L4"])
    assert code == 2
    assert out.rstrip().splitlines()[-1].startswith(
        "6 deployment(s) in 3 file(s) (2 read, 1 not read): 5 pass, 0 fail, 1 invalid;")


# ------------------------------------------------------------------------------------------ fuzz

_MEMORY_KB = 512 * 1024


NASTY = st.one_of(st.integers(-3, 10**6), st.booleans(), st.floats(allow_nan=True, allow_infinity=True),
                  st.sampled_from(["1e308", "8", "H100:8", "x" * 200, "$(X)", "${Y:-2}", "", "true", "-1", "0.5",
                                   "{{ .Values.x }}", "../../etc/passwd", "/dev/zero", "9" * 400]),
                  st.none(), st.lists(st.sampled_from(["--tensor-parallel-size", "2", "--max-model-len", "x"]),
                                      max_size=4))


@st.composite
def documents(draw) -> dict:
    v = lambda: draw(NASTY)
    kind = draw(st.sampled_from(["llmd", "chart", "sky", "ray", "stack"]))
    if kind == "llmd":
        return {"modelArtifacts": {"uri": draw(st.sampled_from(["hf://Qwen/Qwen3-8B", "pvc://c/p", v()])),
                                   "name": v()},
                "multinode": v(), "decode": {"replicas": v(), "parallelism": {"tensor": v(), "data": v(),
                                                                              "dataLocal": v(), "workers": v()},
                                             "containers": [{"name": "vllm", "modelCommand": draw(st.sampled_from(
                                                 ["vllmServe", "imageDefault", "custom", "x"])), "args": v(),
                                                 "command": v(), "resources": {"limits": {"nvidia.com/gpu": v()}}}]}}
    if kind == "chart":
        return {"image": {"repository": "vllm/vllm-openai", "tag": v(),
                          "command": ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", str(v())]},
                "resources": {"limits": {"nvidia.com/gpu": v(), "memory": v()}}, "gpuModels": [v()]}
    if kind == "sky":
        return {"envs": {"M": v()}, "num_nodes": v(), "resources": {"accelerators": v()},
                "run": f"vllm serve $M --tensor-parallel-size $SKYPILOT_NUM_GPUS_PER_NODE --max-model-len {v()}"}
    if kind == "ray":
        return {"applications": [{"import_path": "ray.serve.llm:build_openai_app", "args": {"llm_configs": [
            {"model_loading_config": {"model_id": v(), "model_source": v()}, "accelerator_type": v(),
             "placement_group_config": {"bundles": [{"GPU": v()}]},
             "engine_kwargs": {"tensor_parallel_size": v(), "max_model_len": v(), "kv_cache_dtype": v()}},
            draw(st.sampled_from(["./missing.yaml", "/dev/zero", "/etc/hostname"]))]}}]}
    return {"servingEngineSpec": {"modelSpec": [{"name": "m", "modelURL": v(), "requestGPU": v(), "tag": v(),
                                                  "vllmConfig": {"v0": v(), "maxModelLen": v(), "extraArgs": v(),
                                                                 "tensorParallelSize": v()},
                                                  "lmcacheConfig": {"enabled": v(), "cpuOffloadingBufferSize": v(),
                                                                    "diskOffloadingBufferSize": v()}}]}}


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("values-fuzz")


@pytest.mark.slow
@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=documents(), ignore=st.booleans())
def test_fuzz_values_formats(doc, ignore, fuzz_dir):
    path = fuzz_dir / "values.yaml"
    path.write_text(yaml.safe_dump(doc))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    argv = ["check", str(path), "--gpu", "H100", "--format", "json"] + (["--ignore-unrecognized"] if ignore else [])
    with hf_token(TOKEN):
        code, out, err = run_cli(argv, seconds=30)
    assert code in (0, 1, 2), (code, out, err)
    assert "Traceback" not in out + err and TOKEN not in out + err
    assert "please report it" not in out, out  # a kvplan bug, not a finding about the input
    data = json.loads(out)
    for f in data["findings"]:
        assert "\n" not in f["message"] and len(f["message"]) <= 1100
    c = data["summary"]
    assert c["deployments"] == c["passed"] + c["failed"] + c["invalid"]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < _MEMORY_KB


@pytest.mark.slow
def test_a_megabyte_run_line_ends(tmp_path):
    """A 1 MB run: script line (a flag repeated) is read in bounded time (the alarm turns a hang into a failure)."""
    path = tmp_path / "task.yaml"
    path.write_text("resources: {accelerators: H100:1}\nrun: vllm serve Qwen/Qwen3-8B" + " --max-model-len 8k" * 60000
                    + "\n")
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("hang")))
    signal.alarm(60)
    try:
        code, out, err = run_cli(["check", str(path)], seconds=60)
    finally:
        signal.alarm(0)
    assert code in (0, 1) and "Traceback" not in out + err
    assert os.path.getsize(path) > 1_000_000


def test_ignore_unrecognized_reports_an_llmd_container_it_cannot_read(tmp_path):
    path = tmp_path / "values.yaml"
    path.write_text("modelArtifacts: {uri: hf://Qwen/Qwen3-8B}\ndecode:\n  containers:\n"
                    "  - {name: vllm, image: ghcr.io/llm-d/llm-d-cuda:v0.5.0, modelCommand: imageDefault}\n")
    assert check([str(path)], gpu="H100").exit_code == 2  # its entry point is not one kvplan knows
    report = check([str(path)], gpu="H100", ignore_unrecognized=True)
    assert [f.code for f in report.findings] == ["engine-not-read"] and not report.files[0].skipped


def test_skypilot_image_id_gives_the_engine_version():
    # resources.image_id: docker:vllm/vllm-openai:v0.10.0 (skypilot llm/kimi-k2): the task runs in that image, so
    # vLLM 0.10.0's rules apply, not the newest
    from conftest import run_cli

    code, out, err = run_cli(["check", str(Path(__file__).parent / "data" / "deployments" / "skypilot-kimi-k2.sky.yaml"),
                              "-f", "json"])
    deps = json.loads(out)["deployments"]
    assert deps and all(d["engine_version"] == "0.10.0" for d in deps), out


def test_an_unplanned_deployment_still_shows_its_gpu():
    # a deployment whose model cannot be resolved (invalid) shows the GPU its file names, else --gpu (it was null)
    from conftest import run_cli

    data = Path(__file__).parent / "data" / "deployments"
    code, out, err = run_cli(["check", str(data / "kserve-llmisvc-dp-ep-qwen3.yaml"), "--gpu", "H100", "-f", "json"])
    dep, = json.loads(out)["deployments"]
    assert dep["status"] == "invalid" and dep["gpu"] == {"name": "H100", "count": 8}
    code, out, err = run_cli(["check", str(data / "skypilot-vllm.sky.yaml"), "-f", "json"])
    assert {d["gpu"]["name"] for d in json.loads(out)["deployments"]} >= {"H100"}
