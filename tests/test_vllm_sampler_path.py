"""The top-k/top-p path of vLLM's profiling-run sampler as a setting (--vllm-sampler; VLLM_USE_FLASHINFER_SAMPLER
in a deployment; the start-up line in a log; the sampler field of the engine-log cases)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import kvplan
from kvplan.budgets.base import Settings
from kvplan.plan import CapacityPlan
from kvplan.errors import UsageError

from conftest import checked_kv_tokens, k8s_h100

DATA = Path(__file__).parent / "data"
QWEN8 = "Qwen/Qwen3-8B"  # bundled; vocabulary 151,936
QWEN4 = str(DATA / "hf_configs_transcribed" / "Qwen__Qwen3-4B.json")  # the logged model (its case's kvplan_model)


def _plan(version: str, path: str | None, **kw: object) -> CapacityPlan:
    return kvplan.max_batch(QWEN8, gpu="H100-SXM-80GB", engine_version=version, max_model_len=40960,
                            settings=Settings(vllm_sampler=path, **kw))  # type: ignore[arg-type]


def test_sort_costs_24_bytes_per_logit_more_than_flashinfer_in_0_10() -> None:
    default, flashinfer, sort = _plan("0.10.2", None), _plan("0.10.2", "flashinfer"), _plan("0.10.2", "sort")
    # the default is pip's path (flashinfer is an extra of the wheel), which most 0.9 - 0.11.0 logs show: the sort
    assert default.per_gpu.activation_bytes == sort.per_gpu.activation_bytes
    # 1,024 rows (max_num_seqs) x 151,936 logits x (38 - 14) B: the sampler dominates the forward pass here
    assert sort.per_gpu.activation_bytes - flashinfer.per_gpu.activation_bytes == 1024 * 151_936 * 24
    assert sort.per_gpu.kv_cache_bytes < flashinfer.per_gpu.kv_cache_bytes
    # the assumptions line says which path, why, and how to plan the image's FlashInfer
    assert any("sort" in a and "assumed" in a and "--vllm-sampler flashinfer" in a for a in default.assumptions)
    assert any("sort" in a and "given" in a for a in sort.assumptions)
    assert any("flashinfer" in a and "given" in a for a in flashinfer.assumptions)
    # 0.11.1 - 0.16 sort by default: nothing rests on flashinfer, nothing said
    assert not any("vLLM sampler" in a for a in _plan("0.12.0", None).assumptions)


def test_paths_a_release_cannot_take_are_refused() -> None:
    for version, path in (("0.10.2", "triton"), ("0.16.0", "triton"), ("0.6.4", "flashinfer"), ("0.10.2", "heap")):
        with pytest.raises(UsageError) as err:
            _plan(version, path)
        assert err.value.field == "vllm_sampler", (version, path)
    assert _plan("0.17.0", "sort").per_gpu.activation_bytes > _plan("0.17.0", None).per_gpu.activation_bytes
    _plan("0.12.0", "flashinfer")  # opt-in from 0.11.1: accepted
    # the V0 engine (to 0.10) plans its sampler's sort only: FlashInfer there is refused by name, sort is taken
    with pytest.raises(UsageError) as err:
        _plan("0.10.2", "flashinfer", vllm_engine="v0")
    assert err.value.field == "vllm_sampler"
    v0_sort, v0 = _plan("0.10.2", "sort", vllm_engine="v0"), _plan("0.10.2", None, vllm_engine="v0")
    assert v0_sort.per_gpu.activation_bytes == v0.per_gpu.activation_bytes
    assert not any("vLLM sampler" in a for a in v0.assumptions)  # V0's default rests on no flashinfer


def _cli(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan", "max-batch", QWEN8, "--gpu", "H100-SXM-80GB", "--engine",
                           "vllm", "--engine-version", "0.10.2", "--max-model-len", "40960", "--format", "json",
                           *extra], capture_output=True, text=True, check=False)


def test_cli_option_accepted_refused_and_in_json() -> None:
    default, flashinfer = _cli(), _cli("--vllm-sampler", "FLASHINFER")
    assert default.returncode == 0 and flashinfer.returncode == 0, flashinfer.stderr
    d, f = json.loads(default.stdout), json.loads(flashinfer.stdout)
    assert f["kv_cache_tokens"] > d["kv_cache_tokens"]  # the default sorts
    assert any("flashinfer" in a and "given" in a for a in f["assumptions"])
    for bad in ("triton", "radix"):
        done = _cli("--vllm-sampler", bad)
        assert done.returncode == 2 and "--vllm-sampler" in done.stderr and done.stderr.count("\n") == 1


def test_check_reads_the_deployments_variable(tmp_path: Path) -> None:
    def tokens(env: str, version: str = "0.10.2") -> int:
        path = tmp_path / "serve.sh"
        path.write_text(f"# kvplan/gpu: H100-SXM-80GB\n# kvplan/engine-version: {version}\n"
                        f"{env}vllm serve {QWEN8} --max-model-len 40960\n")
        return checked_kv_tokens(path)

    default = tokens("")
    assert tokens("VLLM_USE_FLASHINFER_SAMPLER=1 ") > default  # FlashInfer's path, where kvplan assumes the sort
    assert tokens("VLLM_USE_FLASHINFER_SAMPLER=0 ") == default  # sorts, 0.10.2's path without flashinfer
    # 0.12 sorts unless opted in
    assert tokens("VLLM_USE_FLASHINFER_SAMPLER=1 ", "0.12.0") > tokens("", "0.12.0")


# the real lines (0.10.2 wheel, topk_topp_sampler.py; the H100 Qwen3-4B log of engine_logs_issue21b.yaml)
SORT_LINE = ("(EngineCore_DP0 pid=4031397) WARNING 09-20 19:08:10 [topk_topp_sampler.py:69] FlashInfer is not "
             "available. Falling back to the PyTorch-native implementation of top-p & top-k sampling. For the best "
             "performance, please install FlashInfer.")
FLASHINFER_LINE = ("(EngineCore_0 pid=1812) INFO 09-04 01:02:57 [topk_topp_sampler.py:50] Using FlashInfer for "
                   "top-p & top-k sampling.")


def _case(case_id: str) -> dict:
    for name in ("engine_logs_issue21b.yaml", "engine_logs_more.yaml"):
        for case in yaml.safe_load((DATA / name).read_text())["cases"]:
            if case["id"] == case_id:
                return case
    raise KeyError(case_id)


def _with_line(excerpt: str, line: str) -> str:
    lines = excerpt.splitlines()
    return "\n".join([*lines[:4], line, *lines[4:]]) + "\n"


def test_log_line_read_into_the_settings() -> None:
    from kvplan.logs import parse_text

    excerpt = _case("file-h100-qwen3-4b-u090-40k-v0102")["log_excerpt"]
    assert parse_text(excerpt).settings.vllm_sampler is None
    assert "vllm_sampler" not in parse_text(excerpt).settings.to_dict()  # older logs' JSON unchanged
    log = parse_text(_with_line(excerpt, SORT_LINE))
    assert log.settings.vllm_sampler == "sort"
    assert any("sampler: sort" in n for n in log.notes)
    assert parse_text(_with_line(excerpt, FLASHINFER_LINE)).settings.vllm_sampler == "flashinfer"
    # from 0.17 kvplan plans the Triton pass: the FlashInfer line is not a path kvplan can take there
    late = _with_line(excerpt.replace("version 0.10.2", "version 0.22.1"), FLASHINFER_LINE)
    assert parse_text(late).settings.vllm_sampler is None


def test_compare_and_save_plan_with_the_logged_path() -> None:
    from kvplan.calibrate import calibrate, compare
    from kvplan.logs import parse_text
    from kvplan.logs.calibration import dump, from_log, parse

    excerpt = _case("file-h100-qwen3-4b-u090-40k-v0102")["log_excerpt"]
    plain, sorted_ = parse_text(excerpt), parse_text(_with_line(excerpt, SORT_LINE))
    flash = parse_text(_with_line(excerpt, FLASHINFER_LINE))
    kw = {"model": QWEN4}
    a, b, c = compare(plain, **kw), compare(sorted_, **kw), compare(flash, **kw)
    # the logged 5.59 GiB peak is the sort's, kvplan's default for 0.10.2; a FlashInfer line moves the plan from it
    assert b.plan.per_gpu.activation_bytes == a.plan.per_gpu.activation_bytes
    assert a.plan.per_gpu.activation_bytes - c.plan.per_gpu.activation_bytes == 1024 * 151_936 * 24
    assert abs(a.plan.per_gpu.activation_bytes / 2**30 - 5.59) < abs(c.plan.per_gpu.activation_bytes / 2**30 - 5.59)
    cal = from_log(sorted_, model=QWEN4)
    assert cal.settings.vllm_sampler == "sort"
    assert parse(dump(cal), "saved").settings.vllm_sampler == "sort"
    assert "vllm_sampler" not in dump(from_log(plain, model=QWEN4))  # files of logs without the line unchanged
    done = calibrate(cal, QWEN4, gpu=None, gpu_memory=str(cal.gpu.total_bytes), tp=1, pp=1, engine="vllm",
                     engine_version=None, kv_dtype="auto", max_model_len=40960, settings=Settings())
    assert done is not None and done.settings.vllm_sampler == "sort"


def test_crossval_inputs_honour_the_recorded_path() -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent))
    from benchmarks import crossval

    recorded = {c["id"]: c for c in crossval.cases() if c.get("sampler")}
    assert {"file-h100-qwen3-4b-u090-40k-v0102", "file-h100-qwen3-30b-a3b-2507-u090-6k-v0102"} <= set(recorded)
    for case in recorded.values():
        assert case["sampler"] in ("sort", "flashinfer") and case["sampler_evidence"]
        inp, why = crossval.inputs(case)
        if inp is not None:
            assert inp["settings"]["vllm_sampler"] == case["sampler"], case["id"]
    unrecorded = next(c for c in crossval.cases() if c.get("engine") == "vllm" and not c.get("sampler")
                      and crossval.inputs(c)[0] is not None)
    assert "vllm_sampler" not in crossval.inputs(unrecorded)[0]["settings"]


def test_rocm_gpus_sort_where_cuda_takes_flashinfer() -> None:
    # vLLM 0.9.2 / 0.10.2 / 0.11.0 v1/sample/ops/topk_topp_sampler.py: TopKTopPSampler takes FlashInfer's path only
    # under current_platform.is_cuda(); on ROCm it is forward_native, the sort (38 B per logit at 1,024 rows)
    def rocm(version: str, path: str | None = None) -> CapacityPlan:
        return kvplan.max_batch(QWEN8, gpu="MI300X", engine_version=version, max_model_len=40960,
                                settings=Settings(vllm_sampler=path))

    for version in ("0.9.2", "0.10.2", "0.11.0"):
        default, sort = rocm(version), rocm(version, "sort")
        assert default.per_gpu.activation_bytes == sort.per_gpu.activation_bytes, version
        # nothing rests on flashinfer being installed there: no assumption about it
        assert not any("FlashInfer" in a and "assumed" in a for a in default.assumptions), version
        # and FlashInfer cannot be given for a ROCm GPU
        with pytest.raises(UsageError) as err:
            rocm(version, "flashinfer")
        assert err.value.field == "vllm_sampler"
    # on a CUDA GPU the release takes FlashInfer where it is installed (kvplan's default, the sort, says so); on ROCm
    # never
    from kvplan.engines.vllm import sampler

    assert sampler.flashinfer_if_installed((0, 10, 2)) and not sampler.flashinfer_if_installed((0, 10, 2), cuda=False)
    assert not sampler.flashinfer_if_installed((0, 11, 1)) and not sampler.flashinfer_if_installed((0, 8, 5))
    assert sampler.default((0, 10, 2), 1024) == "sort"
    assert sampler.bytes_per_logit((0, 10, 2), 1024, cuda=False)[0] == 38.0
    # the other releases' defaults, the same on both platforms (the default takes no platform)
    assert sampler.default((0, 12, 0), 1024) == "sort" and sampler.default((0, 19, 0), 1024) == "triton"


K8S_CONTAINER = """      - name: vllm
        image: {image}
        args: ["--model", "Qwen/Qwen3-8B", "--max-model-len", "40960"]
{env}        resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""
COMPOSE = """services:
  qwen:
    image: {image}
    command: ["--model", "Qwen/Qwen3-8B", "--max-model-len", "40960"]
{env}    labels: {{kvplan/gpu: H100-SXM-80GB}}
    deploy:
      resources:
        reservations:
          devices: [{{driver: nvidia, count: 1, capabilities: [gpu]}}]
"""


@pytest.mark.parametrize("form", ["k8s", "compose"])
def test_check_plans_flashinfer_for_vllm_s_own_image(tmp_path: Path, form: str) -> None:
    # vLLM's vllm/vllm-openai image installs flashinfer (flags.py image_settings): 0.9 - 0.11.0 take its path
    def tokens(image: str, env: str = "") -> int:
        if form == "k8s":
            text = k8s_h100(K8S_CONTAINER.format(
                image=image, env=f"        env: [{{name: VLLM_USE_FLASHINFER_SAMPLER, value: '{env}'}}]\n" if env else ""),
                name="qwen")
            path = tmp_path / "deployment.yaml"
        else:
            text = COMPOSE.format(image=image, env=f"    environment: {{VLLM_USE_FLASHINFER_SAMPLER: '{env}'}}\n"
                                  if env else "")
            path = tmp_path / "compose.yaml"
        path.write_text(text)
        return checked_kv_tokens(path)

    official = tokens("vllm/vllm-openai:v0.10.2")
    other = tokens("registry.example.com/team/vllm-openai:v0.10.2")  # another build: pip's default, the sort
    assert official > other
    assert tokens("docker.io/vllm/vllm-openai:v0.10.2") == official
    assert tokens("vllm/vllm-openai:v0.10.2", "0") == other  # the variable wins over the image
    assert tokens("registry.example.com/team/vllm-openai:v0.10.2", "1") == official
    # from 0.11.1 FlashInfer's sampler is opt-in: the image changes nothing
    assert tokens("vllm/vllm-openai:v0.12.0") == tokens("registry.example.com/team/vllm-openai:v0.12.0")


def test_image_path_says_why_and_yields_to_the_release() -> None:
    from kvplan.engines.vllm import sampler

    image = _plan("0.10.2", sampler.IMAGE)
    assert image.per_gpu.activation_bytes == _plan("0.10.2", "flashinfer").per_gpu.activation_bytes
    assert any(sampler.IMAGE_WHY in a for a in image.assumptions)
    assert not any("assumed" in a and "vLLM sampler" in a for a in image.assumptions)
    # where flashinfer does not change the path (0.12, a ROCm GPU, the V0 engine) it is the release's default
    assert _plan("0.12.0", sampler.IMAGE).per_gpu.activation_bytes == _plan("0.12.0", None).per_gpu.activation_bytes
    assert _plan("0.10.2", sampler.IMAGE, vllm_engine="v0").per_gpu.activation_bytes == \
        _plan("0.10.2", None, vllm_engine="v0").per_gpu.activation_bytes
    rocm = kvplan.max_batch(QWEN8, gpu="MI300X", engine_version="0.10.2", max_model_len=40960,
                            settings=Settings(vllm_sampler=sampler.IMAGE))
    assert rocm.per_gpu.activation_bytes == kvplan.max_batch(QWEN8, gpu="MI300X", engine_version="0.10.2",
                                                             max_model_len=40960).per_gpu.activation_bytes
