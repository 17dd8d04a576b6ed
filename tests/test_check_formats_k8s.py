"""``kvplan check`` on Kubernetes-family formats (issue 22): KServe ``LLMInferenceService`` and
``InferenceService`` with a vLLM runtime, NVIDIA Dynamo ``DynamoGraphDeployment``, AIBrix ``RayClusterFleet``,
and a LeaderWorkerSet whose script holds multi-line quoted JSON and ``$((...))`` arithmetic.

Each format is read from a real public file under tests/data/deployments/ (its source on its first line); the
fields are compared with a reading of that file by hand (the values and lines written out below).
"""

from __future__ import annotations

import json
import resource
import signal
from pathlib import Path

import pytest
from conftest import hf_token, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.deploy import read_file
from kvplan.deploy.flags import arithmetic_value, shell_commands, substitute

DATA = Path(__file__).parent / "data" / "deployments"
TOKEN = "hf_k8sFormatsTOKENneverPrinted"


def read(name: str):
    fmt, deployments, findings = read_file(str(DATA / name))
    assert fmt == "kubernetes", fmt
    return deployments, findings


def setting(dep, key):
    v = dep.settings[key]
    return v.value, v.line


def test_fixtures_name_their_source():
    for name in ("lws-llm-d-deepseek-v4-decode.yaml", "kserve-llmisvc-dp-ep-qwen3.yaml",
                 "kserve-llmisvc-eagle3-pd.yaml", "kserve-isvc-huggingface-runtime.yaml",
                 "dynamo-vllm-disagg-kvbm-tp2.yaml", "aibrix-fleet-two-node.yaml"):
        first = (DATA / name).read_text().splitlines()[0]
        assert first.startswith("# source: https://github.com/") and "/blob/" in first, name


# ------------------------------------------------------------------------------------ (4) LeaderWorkerSet

def test_lws_multiline_json_and_arithmetic_are_read():
    """llm-d's wide-EP decode LWS: `bash -c` script with `$((LWS_GROUP_SIZE * DP_SIZE_LOCAL))` and a
    `--kv_transfer_config '{...}'` spanning three lines (it was "no container runs an engine")."""
    (dep,), findings = read("lws-llm-d-deepseek-v4-decode.yaml")
    assert findings == []
    assert dep.engine == "vllm"
    assert (dep.model.value, dep.model.line) == ("deepseek-ai/DeepSeek-V4-Pro", 81)
    assert (dep.engine_version.value, dep.engine_version.line) == ("0.22.1", 55)
    # 4 GPUs a pod x leaderWorkerTemplate.size 2
    assert (dep.gpu_count.value, dep.gpu_count.line) == (8, 213)
    assert dep.pods == 2
    assert dep.gpus == []  # no node selector: the GPU type is --gpu's
    assert setting(dep, "tp") == (1, 91)  # $TP_SIZE from env
    assert setting(dep, "dp") == (8, 92)  # $((LWS_GROUP_SIZE * DP_SIZE_LOCAL)) = 2 * 4
    assert setting(dep, "enable_expert_parallel")[0] is True
    assert setting(dep, "gpu_memory_utilization") == (0.9, 84)
    assert setting(dep, "max_num_seqs") == (512, 102)  # ${MAX_TOKENS}
    assert setting(dep, "max_num_batched_tokens") == (512, 101)
    assert setting(dep, "block_size") == (256, 104)
    assert setting(dep, "kv_cache_dtype") == ("fp8", 108)
    config, line = setting(dep, "kv_transfer_config")
    assert line == 97 and json.loads(config) == {"kv_connector": "NixlConnector", "kv_role": "kv_both",
                                                 "kv_load_failure_policy": "fail"}
    assert "max_model_len" not in dep.settings  # not given: the model's limit
    # --kv-cache-memory-bytes=${KV_CACHE_MEMORY_BYTES-}: a variable this file never sets, said as unknown
    (unknown,) = dep.unknowns
    assert (unknown.spelled, unknown.names, unknown.line) == ("--kv-cache-memory-bytes", ("KV_CACHE_MEMORY_BYTES",), 110)


def _lws(size: object, tp_arg: str, extra_env: str = "") -> str:
    return f"""apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: arith}}
spec:
  leaderWorkerTemplate:
    size: {size}
    workerTemplate:
      spec:
        nodeSelector: {{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
        containers:
          - name: vllm
            image: vllm/vllm-openai:v0.10.2
            command: [/bin/sh, -c]
            args:
              - |
                exec vllm serve Qwen/Qwen3-8B \\
                  --tensor-parallel-size {tp_arg} \\
                  --kv-transfer-config '{{
                    "kv_connector": "NixlConnector",
                    "kv_role": "kv_both"}}' \\
                  --max-model-len 8192
            env: [{extra_env}]
            resources: {{limits: {{nvidia.com/gpu: 8}}}}
"""


def test_lws_group_size_arithmetic(tmp_path):
    path = tmp_path / "lws.yaml"
    path.write_text(_lws(2, "$((LWS_GROUP_SIZE * 8))"))
    _, (dep,), findings = read_file(str(path))
    assert findings == [] and dep.unknowns == []
    assert dep.settings["tp"].value == 16 and dep.gpu_count.value == 16
    assert dep.settings["max_model_len"].value == 8192  # the command goes on after the multi-line JSON
    assert json.loads(dep.settings["kv_transfer_config"].value)["kv_connector"] == "NixlConnector"
    assert [g.value for g in dep.gpus] == ["NVIDIA-H100-80GB-HBM3"]


def test_lws_arithmetic_that_cannot_be_known_is_said(tmp_path, capsys):
    path = tmp_path / "lws.yaml"
    path.write_text(_lws(2, "$((LWS_GROUP_SIZE * NODE_GPUS))"))
    code, out, err = run_cli(["check", str(path), "-f", "json"])
    result = json.loads(out)
    (dep,) = result["deployments"]
    unknown = [f for f in dep["findings"] if f["code"] == "unknown-value"]
    assert unknown and "NODE_GPUS" in unknown[0]["message"] and "--tensor-parallel-size" in unknown[0]["message"]
    assert code in (0, 1) and "Traceback" not in err


@pytest.mark.parametrize("expr,env,value", [
    ("LWS_GROUP_SIZE * 8", {"LWS_GROUP_SIZE": "2"}, 16),
    (" ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ", {"DP_SIZE_LOCAL": "4"}, 0),
    ("2 + 3 * 4", {}, 14),
    ("$A - 10", {"A": "3"}, -7),
    ("-7 / 2", {}, -3),  # C division, as bash: toward zero
    ("7 % -3", {}, 1),
    ("- -5", {}, 5),
])
def test_arithmetic_as_bash(expr, env, value):
    assert arithmetic_value(expr, env) == (value, ())


@pytest.mark.parametrize("expr,env,names", [
    ("LWS_GROUP_SIZE * 8", {}, ("LWS_GROUP_SIZE",)),  # bash would take 0: kvplan says it cannot know
    ("N * 2", {"N": "four"}, ("N",)),
    ("2 ** 3", {}, ("$((2 ** 3))",)),
    ("1 / 0", {}, ("$((1 / 0))",)),
    ("010 + 1", {}, ("$((010 + 1))",)),  # octal in bash
    ("9" * 40, {}, (("$((" + "9" * 40 + "))")[:37] + "...",)),  # past 64 bits; the expression cut when named
    ("9223372036854775807 + 1", {}, ("$((9223372036854775807 + 1))",)),  # past 64 bits: bash wraps
    ("1 2", {}, ("$((1 2))",)),
    ("2 *", {}, ("$((2 *))",)),
])
def test_arithmetic_unknown(expr, env, names):
    assert arithmetic_value(expr, env) == (None, names)


def test_arithmetic_only_in_shell_text():
    # the kubelet expands $(VAR) only: a container argument '$((2*4))' reaches the engine as written
    assert substitute("$((2*4))", {}, k8s=True) == ("$((2*4))", ())
    assert substitute("$((2*4))", {}, arithmetic=True) == ("8", ())


def test_shell_commands_keep_quoted_newlines_and_comments():
    text = ("# don't split here\nvllm serve m \\\n  --kv-transfer-config '{\"a\": 1,\n  \"b\": 2}' \\\n"
            "  --tp $(( 2 * 2 ))\necho done\n")
    first, second = shell_commands(text, 1)
    assert [t.text for t in first] == ["vllm", "serve", "m", "--kv-transfer-config", '{"a": 1,\n  "b": 2}', "--tp",
                                       "$((2*2))"]
    assert [t.line for t in first] == [2, 2, 2, 3, 3, 5, 5]
    assert [t.text for t in second] == ["echo", "done"]
    # a quote never closed: that command is dropped (the shell refuses it), the text before is kept
    assert [[t.text for t in c] for c in shell_commands("a b\nvllm serve 'x\ny\n", 1)] == [["a", "b"]]


# ------------------------------------------------------------------------------------ (1) KServe

def test_kserve_llm_inference_service_dp_ep():
    """KServe's DP+EP sample: spec.parallelism {data 8, dataLocal 8, expert, tensor 1} with a worker: KServe's
    worker-data-parallel config runs vllm serve --enable-expert-parallel --tensor-parallel-size 1
    --data-parallel-size 8 over 8 / 8 = 1 pod of 8 GPUs."""
    (dep,), findings = read("kserve-llmisvc-dp-ep-qwen3.yaml")
    assert findings == []
    assert dep.engine == "vllm" and dep.engine_version is None  # KServe's llm-d image: no vLLM tag
    assert (dep.model.value, dep.model.spelled, dep.model.line) == ("Qwen/Qwen3-Coder-30B-A3B-Instruct",
                                                                    "spec.model.uri", 8)
    assert (dep.gpu_count.value, dep.gpu_count.line) == (8, 52)
    assert dep.gpus == []
    assert setting(dep, "tp") == (1, 15) and dep.settings["tp"].spelled == "spec.parallelism.tensor"
    assert setting(dep, "dp") == (8, 12) and dep.settings["dp"].spelled == "spec.parallelism.data"
    assert setting(dep, "enable_expert_parallel") == (True, 14)
    assert dep.settings["enable_expert_parallel"].spelled == "spec.parallelism.expert"
    for key in ("max_model_len", "gpu_memory_utilization", "kv_cache_dtype", "pp"):
        assert key not in dep.settings


def test_kserve_llm_inference_service_prefill_is_its_own_deployment():
    deps, findings = read("kserve-llmisvc-eagle3-pd.yaml")
    assert findings == []
    main, prefill = deps
    assert (main.name, prefill.name) == ("qwen3-32b-eagle3", "qwen3-32b-eagle3/prefill")
    for dep, tp_line, gpu_line in ((main, 21, 34), (prefill, 40, 49)):
        assert dep.model.value == "RedHatAI/Qwen3-32B-FP8-dynamic"
        assert setting(dep, "tp") == (2, tp_line)
        assert (dep.gpu_count.value, dep.gpu_count.line) == (2, gpu_line)
        assert dep.settings["VLLM_USE_V1"].value == "1"
    # the speculator KServe adds is not planned: said, not dropped
    assert any("spec.speculator" in note for note in main.notes)


def test_kserve_inference_service_huggingface_runtime_runs_vllm():
    """The fluid sample: a ClusterServingRuntime running `python3 -m huggingfaceserver "$@"` in bash -c, and an
    InferenceService whose args (vLLM's engine flags) KServe appends after the runtime's."""
    (dep,), findings = read("kserve-isvc-huggingface-runtime.yaml")
    assert findings == []
    assert dep.name == "llama-31-8b-instruct" and dep.engine == "vllm"
    assert dep.engine_version is None  # kserve/huggingfaceserver:latest is KServe's release
    # pvc:// storage: the weights are at /mnt/models in the pod, which kvplan cannot read: a kvplan/model
    # annotation names the model
    assert (dep.model.value, dep.model.spelled, dep.model.line) == ("/mnt/models", "storageUri", 82)
    assert (dep.gpu_count.value, dep.gpu_count.line) == (1, 93)
    assert setting(dep, "gpu_memory_utilization") == (0.95, 84)
    assert setting(dep, "max_model_len") == (1024, 85)
    assert setting(dep, "tp") == (1, 86)
    assert setting(dep, "enforce_eager") == (True, 87)
    assert any("huggingface runtime runs vLLM" in note for note in dep.notes)


def test_kserve_inference_service_bundled_vllm_runtime_and_backend(tmp_path):
    base = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: llama3, annotations: {kvplan/gpu: H100}}
spec:
  predictor:
    model:
      modelFormat: {name: huggingface}
      args: [--model_name=llama3, --model_id=meta-llama/Llama-3.1-8B, --max_model_len=8192%s]
      resources: {limits: {nvidia.com/gpu: "1"}}
"""
    path = tmp_path / "isvc.yaml"
    path.write_text(base % "")
    _, (dep,), _ = read_file(str(path))
    assert dep.model.value == "meta-llama/Llama-3.1-8B" and dep.settings["max_model_len"].value == 8192
    code, _, err = run_cli(["check", str(path), "-f", "json"])
    assert code == 0, err
    path.write_text(base % ", --backend=huggingface")  # transformers, not vLLM: nothing kvplan plans
    assert read_file(str(path))[1] == []


# ------------------------------------------------------------------------------------ (2) Dynamo

def test_dynamo_graph_prefill_and_decode_workers():
    deps, findings = read("dynamo-vllm-disagg-kvbm-tp2.yaml")
    assert findings == []
    assert [d.name for d in deps] == ["vllm-disagg-kvbm-tp2/VllmDecodeWorker", "vllm-disagg-kvbm-tp2/VllmPrefillWorker"]
    for dep, model_line, tp_line, gpu_line in ((deps[0], 119, 127, 101), (deps[1], 163, 175, 142)):
        assert dep.engine == "vllm"
        assert dep.engine_version is None  # vllm-runtime:my-tag is Dynamo's image, not vLLM's version
        assert (dep.model.value, dep.model.line) == ("Qwen/Qwen3-8B", model_line)
        assert (dep.gpu_count.value, dep.gpu_count.spelled, dep.gpu_count.line) == (2, "resources.limits.gpu",
                                                                                    gpu_line)
        assert setting(dep, "tp") == (2, tp_line)
        assert dep.settings["gpu_memory_utilization"].value == 0.23
        assert dep.settings["max_model_len"].value == 32000
        assert dep.settings["enforce_eager"].value is True


def test_dynamo_checked_end_to_end():
    code, out, err = run_cli(["check", str(DATA / "dynamo-vllm-disagg-kvbm-tp2.yaml"), "--gpu", "H100", "-f", "json"])
    assert code == 0, err
    result = json.loads(out)
    assert [d["parallel"]["tp"] for d in result["deployments"]] == [2, 2]
    assert [d["gpu"]["count"] for d in result["deployments"]] == [2, 2]
    assert [d["max_model_len"] for d in result["deployments"]] == [32000, 32000]


def test_dynamo_trtllm_worker_is_reported_not_skipped(tmp_path):
    path = tmp_path / "dgd.yaml"
    path.write_text("""apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: trt}
spec:
  services:
    TRTLLMWorker:
      componentType: worker
      resources: {limits: {gpu: "1"}}
      extraPodSpec:
        mainContainer:
          command: [python3, -m, dynamo.trtllm]
          args: [--model-path, Qwen/Qwen3-0.6B]
""")
    for extra in ([], ["--ignore-unrecognized"]):
        code, out, _ = run_cli(["check", str(path), "-f", "json", *extra])
        assert code == 2
        findings = json.loads(out)["files"][0]["findings"]
        assert any("dynamo.trtllm" in f["message"] for f in findings)


def test_dynamo_sglang_in_shell_and_multinode(tmp_path):
    path = tmp_path / "dgd.yaml"
    path.write_text("""apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: sg}
spec:
  services:
    decode:
      componentType: worker
      multinode: {nodeCount: 2}
      resources: {limits: {gpu: "8"}}
      envs: [{name: TP, value: "16"}]
      extraPodSpec:
        nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}
        mainContainer:
          command: [/bin/sh, -c]
          args: ["python3 -m dynamo.sglang --model-path Qwen/Qwen3-8B --tp $TP --context-length 32768"]
""")
    _, (dep,), findings = read_file(str(path))
    assert findings == [] and dep.engine == "sglang"
    assert dep.gpu_count.value == 16 and dep.pods == 2
    assert dep.settings["tp"].value == 16 and dep.settings["max_model_len"].value == 32768
    assert [g.value for g in dep.gpus] == ["NVIDIA-H200"]


@pytest.mark.parametrize("bad", ['"-1"', "true", '"1e9"', "[1]"])
def test_dynamo_bad_gpu_count_is_one_finding(tmp_path, bad):
    path = tmp_path / "dgd.yaml"
    path.write_text(f"""apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {{name: bad}}
spec:
  services:
    w:
      resources: {{limits: {{gpu: {bad}}}}}
      extraPodSpec: {{mainContainer: {{command: [python3, -m, dynamo.vllm], args: [--model, Qwen/Qwen3-8B]}}}}
""")
    _, deps, findings = read_file(str(path))
    assert deps == [] and [f.code for f in findings] == ["invalid-input"]
    assert "resources.limits.gpu" in findings[0].message


# ------------------------------------------------------------------------------------ (3) AIBrix

def test_aibrix_ray_cluster_fleet_gpus_are_the_clusters():
    (dep,), findings = read("aibrix-fleet-two-node.yaml")
    assert findings == []
    assert dep.name == "qwen-coder-7b-instruct" and dep.engine == "vllm"
    assert dep.model.value == "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert (dep.engine_version.value, dep.engine_version.line) == ("0.7.1", 37)
    # head 1 GPU + worker group small-group 1 replica x 1 GPU: tp 2 over the Ray cluster
    assert (dep.gpu_count.value, dep.gpu_count.line) == (2, 71)
    assert dep.pods == 2
    assert dep.settings["tp"].value == 2
    assert dep.settings["dtype"].value == "half"


def test_aibrix_bad_worker_replicas(tmp_path):
    text = (DATA / "aibrix-fleet-two-node.yaml").read_text().replace("          replicas: 1\n          minReplicas",
                                                                       "          replicas: true\n          minReplicas")
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    _, deps, findings = read_file(str(path))
    assert deps == [] and "workerGroupSpecs[0].replicas" in findings[0].message


def test_ignore_unrecognized_never_hides_these_formats():
    for name in ("lws-llm-d-deepseek-v4-decode.yaml", "kserve-llmisvc-dp-ep-qwen3.yaml",
                 "dynamo-vllm-disagg-kvbm-tp2.yaml", "aibrix-fleet-two-node.yaml"):
        _, out, _ = run_cli(["check", str(DATA / name), "--ignore-unrecognized", "-f", "json"])
        result = json.loads(out)
        assert result["files"][0]["skipped"] is False and result["deployments"], name


# ------------------------------------------------------------------------------------ hostile input

@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the hang guard needs SIGALRM")
@pytest.mark.parametrize("script", [
    "$((" * 300_000,
    "vllm serve m --tp $((" + "1+" * 300_000 + "1))",
    "vllm serve m --x '" + "{\n" * 200_000,
    "# '\n" * 200_000 + "vllm serve m",
    "vllm serve m \\\n" * 100_000,
    '"' + "\\\"" * 300_000,
])
def test_megabyte_scripts_end(tmp_path, script):
    path = tmp_path / "lws.yaml"
    path.write_text(_lws(2, "1").replace("command: [/bin/sh, -c]", "command: [/bin/sh, -c, " + json.dumps(script)
                                         + "]").replace("args:", "argz:"))
    code, _, err = run_cli(["check", str(path), "-f", "json"], seconds=20)
    assert code in (0, 1, 2) and "Traceback" not in err


# ------------------------------------------------------------------------------------ fuzz

_PIECES = st.sampled_from([
    "vllm serve Qwen/Qwen3-8B", "python3 -m dynamo.vllm --model Qwen/Qwen3-8B", "--tensor-parallel-size",
    "--data-parallel-size", "--max-model-len", "$((LWS_GROUP_SIZE * 8))", "$((1/0))", "$((A ** 2))", "${X-}",
    "'{\"kv_connector\":\n \"NixlConnector\"}'", "'unclosed", '"', "\\\n", "\n", "&&", ";", "#", "8", "-1", "1e308",
    "true", "\x00", "$@", "\"$@\"", "32k", "$(date)", "$(( ${I:-0} * 2 ))", "--enable-expert-parallel",
])
_VALUES = st.sampled_from(['"8"', "8", "true", "-1", "1e308", '"x"', "null", "[]", "{}", '"9999999999999"', "0"])
_KINDS = st.sampled_from(["lws", "llmisvc", "isvc", "dynamo", "fleet"])


def _doc(kind: str, script: str, number: str) -> str:
    quoted = json.dumps(script)
    if kind == "lws":
        return (f"kind: LeaderWorkerSet\nmetadata: {{name: f}}\nspec:\n  leaderWorkerTemplate:\n    size: {number}\n"
                f"    workerTemplate:\n      spec:\n        containers:\n          - command: [sh, -c, {quoted}]\n"
                f"            resources: {{limits: {{nvidia.com/gpu: {number}}}}}\n")
    if kind == "llmisvc":
        return (f"kind: LLMInferenceService\nmetadata: {{name: f}}\nspec:\n  model: {{uri: 'hf://Qwen/Qwen3-8B'}}\n"
                f"  parallelism: {{tensor: {number}, data: {number}, expert: true}}\n  worker: {{}}\n"
                f"  template:\n    containers:\n      - name: main\n        args: [{quoted}]\n"
                f"        env: [{{name: VLLM_ADDITIONAL_ARGS, value: {quoted}}}]\n"
                f"        resources: {{limits: {{nvidia.com/gpu: {number}}}}}\n")
    if kind == "isvc":
        return (f"kind: InferenceService\nmetadata: {{name: f}}\nspec:\n  predictor:\n    model:\n"
                f"      modelFormat: {{name: vLLM}}\n      args: [{quoted}, --tensor-parallel-size, {number}]\n"
                f"      storageUri: {quoted}\n      resources: {{limits: {{nvidia.com/gpu: {number}}}}}\n")
    if kind == "dynamo":
        return (f"kind: DynamoGraphDeployment\nmetadata: {{name: f}}\nspec:\n  services:\n    w:\n"
                f"      multinode: {{nodeCount: {number}}}\n      resources: {{limits: {{gpu: {number}}}}}\n"
                f"      extraPodSpec: {{mainContainer: {{command: [sh, -c, {quoted}]}}}}\n")
    return (f"kind: RayClusterFleet\nmetadata: {{name: f}}\nspec:\n  template:\n    spec:\n      headGroupSpec:\n"
            f"        template:\n          spec:\n            containers:\n              - command: [sh, -c, {quoted}]\n"
            f"                resources: {{limits: {{nvidia.com/gpu: {number}}}}}\n"
            f"      workerGroupSpecs: [{{replicas: {number}, template: {{spec: {{containers: "
            f"[{{resources: {{limits: {{nvidia.com/gpu: {number}}}}}}}]}}}}}}]\n")


_WORK: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def token_in_environment(tmp_path_factory):
    _WORK.append(tmp_path_factory.mktemp("k8s-fuzz"))
    with hf_token(TOKEN):
        yield


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the hang guard needs SIGALRM")
@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(kind=_KINDS, pieces=st.lists(_PIECES, max_size=12), number=_VALUES,
       flags=st.lists(st.sampled_from([[], ["--ignore-unrecognized"], ["--gpu", "H100"], ["-f", "json"]]),
                      max_size=2))
def test_fuzz_k8s_formats(kind, pieces, number, flags):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    path = _WORK[0] / f"{kind}.yaml"
    path.write_text(_doc(kind, " ".join(pieces), number))
    code, out, err = run_cli(["check", str(path), *[a for f in flags for a in f]], seconds=20)
    assert code in (0, 1, 2), (code, err[-2000:])
    assert "Traceback" not in out + err and "please report it" not in out + err, (out + err)[-3000:]
    assert TOKEN not in out + err
    if code == 2 and err:
        assert err.startswith("kvplan: error: ") and err.count("\n") == 1, err
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 512 * 1024


# ------------------------------------------------------------------------------------ found on files the tests did not hold


def test_bash_c_dashdash_runs_the_script_after_it():
    # AIBrix's own samples: command ["/bin/bash", "-lc", "--"], the script in args (bash: options end at "--", the
    # next word is the command string); it was "no container runs an engine"
    code, out, err = run_cli(["check", str(DATA / "aibrix-fleet-deepseek-r1-bash-dashdash.yaml"), "--gpu", "H200",
                              "-f", "json"])
    dep, = json.loads(out)["deployments"]
    assert code == 0 and dep["status"] == "pass", out
    assert dep["model"] == "deepseek-ai/DeepSeek-R1" and dep["parallel"]["tp"] == 16
    assert dep["gpu"]["count"] == 16  # the head's 8 and one worker of 8


def test_an_unread_kind_whose_argv_is_list_items_is_reported():
    # llm-d's DisaggregatedSet (a kind kvplan does not read) runs command: ["vllm", "serve"]: under
    # --ignore-unrecognized it was skipped silently because the launcher was split over list items
    code, out, err = run_cli(["check", str(DATA / "llm-d-disaggregatedset-gpt-oss.yaml"), "--ignore-unrecognized",
                              "-f", "json"])
    report = json.loads(out)
    codes = [f["code"] for f in report["findings"]]
    assert "engine-not-read" in codes, report
    text = next(f["message"] for f in report["findings"] if f["code"] == "engine-not-read")
    assert "vllm serve" in text


def test_kserve_kv_cache_offloading_is_said_not_planned():
    code, out, err = run_cli(["check", str(DATA / "kserve-llmisvc-kv-cache-offloading.yaml"), "--gpu", "H100",
                              "-f", "json"])
    dep, = json.loads(out)["deployments"]
    assert dep["status"] == "pass" and dep["model"] == "Qwen/Qwen2.5-7B-Instruct"
    said = [f["message"] for f in dep["findings"] if "kvCacheOffloading" in f["message"]]
    assert said and "cpu 10Gi" in said[0] and "not planned" in said[0]
