"""Issue 22, "Formats and shapes not read": offline pinning from a local config.json (``kvplan spec --id``,
``check --specs DIR`` of model directories, the index's total_size), the A40 / L40 / H800 / A800 catalog
entries, one fp8 KV-dtype name on every engine, and ``max-batch --format csv|markdown``.

Real files: tests/data/deployments/local-model-llama31-8b-bnb8 (config.json and an excerpt of the index of a
public bitsandbytes checkpoint; its SOURCE.md names the repository and commit) and tests/data/hf_configs.
"""

from __future__ import annotations

import csv
import io
import json
import resource
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import DATA, hf_token, run_cli

BNB = DATA / "deployments" / "local-model-llama31-8b-bnb8"
QWEN3_8B = DATA / "hf_configs" / "Qwen__Qwen3-8B.json"
TOKEN = "hf_catalogOutputsTOKENneverPrinted"
GIB = 1 << 30


def one_line(code: int, err: str, flag: str) -> str:
    assert code == 2, err
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert flag in err, err
    return err


def model_dir(root: Path, *parts: str, config: Path = QWEN3_8B) -> Path:
    d = root.joinpath(*parts)
    d.mkdir(parents=True)
    shutil.copy(config, d / "config.json")
    return d


# ------------------------------------------------------------------------------------------------
# (1) kvplan spec from a local config.json; check --specs with model directories


def test_spec_from_local_config_and_index_gives_the_index_total_size(tmp_path):
    # by hand, from the two files: total_size 9,086,705,888; bitsandbytes load_in_8bit -> int8; Llama-3.1-8B's
    # parameters (32 layers, hidden 4096, mlp 14336, 8 KV heads x 128, vocab 128,256, untied) 8,030,261,248
    out = tmp_path / "spec.yaml"
    code, _, err = run_cli(["spec", str(BNB), "--id", "jeevanchaps/Meta-Llama3.1-8B-Instruct-assessment",
                            "-o", str(out)])
    assert code == 0, err
    from kvplan.sources.yaml_spec import load_user_spec

    spec = load_user_spec(out)
    assert spec.id == "jeevanchaps/Meta-Llama3.1-8B-Instruct-assessment"
    assert spec.weights_bytes == 9_086_705_888
    assert spec.weights_dtype == "int8"
    assert spec.params == 8_030_261_248
    assert spec.weights_source == f"model.safetensors.index.json metadata.total_size in {BNB}"
    assert any("analytic count" in a and "total_parameters" in a for a in spec.assumptions)
    assert spec.num_layers == 32 and spec.max_position_embeddings == 131_072
    assert [(g.kind, g.count, g.kv_heads, g.head_dim) for g in spec.layers] == [("full", 32, 8, 128)]
    # and the config.json path itself reads the same directory
    code, text, err = run_cli(["spec", str(BNB / "config.json")])
    assert code == 0 and "weights_bytes: 9086705888" in text, err


def test_index_total_parameters_is_used_when_the_index_has_it(tmp_path):
    d = model_dir(tmp_path, "m")
    (d / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": 16_381_470_720, "total_parameters": 8_190_735_360},
        "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    from kvplan.sources.resolve import load_model

    spec = load_model(str(d))
    assert (spec.weights_bytes, spec.params) == (16_381_470_720, 8_190_735_360)
    assert not any("analytic" in a for a in spec.assumptions)


@pytest.mark.parametrize("size", [True, 1.5, -3, 0, "16", 1 << 60, None])
def test_a_bad_total_size_is_not_used_and_said(tmp_path, size):
    d = model_dir(tmp_path, "m")
    (d / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": size}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}))
    from kvplan.sources.resolve import load_model

    spec = load_model(str(d))
    assert spec.weights_source and spec.weights_source.startswith("computed from")  # the config's count
    assert spec.params == 8_190_735_360  # Qwen3-8B by the config
    if size is not None:
        assert any("metadata.total_size" in a and "not used" in a for a in spec.assumptions)


@pytest.mark.parametrize("bad", ["", "   ", "a\nb", "x" * 201, "\x00"])
def test_spec_id_is_checked(bad):
    code, _, err = run_cli(["spec", str(QWEN3_8B), "--id", bad])
    one_line(code, err, "--id")


SCRIPT = """#!/bin/sh
# kvplan/gpu: {gpu}
{command}
"""


def deployment(root: Path, name: str, gpu: str, command: str) -> Path:
    root.mkdir(exist_ok=True)
    path = root / f"{name}.sh"
    path.write_text(SCRIPT.format(gpu=gpu, command=command))
    return path


def test_check_specs_reads_model_directories_by_the_deployment_model_id(tmp_path):
    specs = tmp_path / "specs"
    bnb = model_dir(specs, "jeevanchaps", "Meta-Llama3.1-8B-Instruct-assessment", config=BNB / "config.json")
    shutil.copy(BNB / "model.safetensors.index.json", bnb)
    model_dir(specs, "acme__qwen3-8b-ft")  # a fine-tune with Qwen3-8B's config, named org__name
    deploy = tmp_path / "deploy"
    deployment(deploy, "a", "L40", "vllm serve jeevanchaps/Meta-Llama3.1-8B-Instruct-assessment --max-model-len 8192")
    deployment(deploy, "b", "A40", "python -m sglang.launch_server --model-path acme/qwen3-8b-ft "
                                   "--context-length 32768")
    code, out, err = run_cli(["check", str(deploy), "--specs", str(specs), "-f", "json"])
    assert code == 0, err + out
    deps = {d["name"]: d for d in json.loads(out)["deployments"]}
    assert deps["a"]["model"] == "jeevanchaps/Meta-Llama3.1-8B-Instruct-assessment"
    assert deps["a"]["weights_bytes_per_gpu"] == 9_086_705_888  # the index's total_size, one GPU
    assert deps["a"]["gpu"] == {"name": "L40", "count": 1}
    assert deps["b"]["model"] == "acme/qwen3-8b-ft" and deps["b"]["gpu"] == {"name": "A40", "count": 1}
    assert deps["b"]["max_model_len"] == 32_768
    # offline without --specs: neither model resolves
    code, out, err = run_cli(["check", str(deploy), "-f", "json"])
    assert code == 2
    assert {d["status"] for d in json.loads(out)["deployments"]} == {"invalid"}


def test_two_directories_pinning_one_model_are_refused(tmp_path):
    specs = tmp_path / "specs"
    model_dir(specs, "acme__m")
    model_dir(specs, "acme", "m")
    deploy = deployment(tmp_path / "deploy", "a", "H100", "vllm serve acme/m")
    code, _, err = run_cli(["check", str(deploy), "--specs", str(specs)])
    one_line(code, err, "--specs")


def test_a_broken_model_directory_fails_its_deployment_only(tmp_path):
    specs = tmp_path / "specs"
    model_dir(specs, "acme__good")
    (model_dir(specs, "acme__bad") / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": true')
    deploy = tmp_path / "deploy"
    deployment(deploy, "good", "H100", "vllm serve acme/good --max-model-len 8192")
    deployment(deploy, "bad", "H100", "vllm serve acme/bad")
    code, out, err = run_cli(["check", str(deploy), "--specs", str(specs), "-f", "json"])
    assert code == 2, err
    status = {d["name"]: d["status"] for d in json.loads(out)["deployments"]}
    assert status == {"good": "pass", "bad": "invalid"}
    assert "Traceback" not in out + err


def test_a_yaml_spec_wins_over_a_model_directory_of_the_same_id(tmp_path):
    specs = tmp_path / "specs"
    model_dir(specs, "acme__m")
    code, text, err = run_cli(["spec", str(QWEN3_8B), "--id", "acme/m"])
    assert code == 0, err
    (specs / "m.yaml").write_text(text.replace("weights_bytes: 16381470720", "weights_bytes: 1000000000"))
    from kvplan.deploy import load_specs

    assert load_specs(specs).get("acme/m").weights_bytes == 1_000_000_000


# ------------------------------------------------------------------------------------------------
# (2) the GPU catalog: A40, L40, H800, A800


@pytest.mark.parametrize("name, canonical, memory, estimate", [
    ("A40", "A40", 47_608_692_736, False),                       # deviceQuery "45403 MBytes (47608692736 bytes)"
    ("NVIDIA A40", "A40", 47_608_692_736, False),
    ("L40", "L40", 47_576_711_168, True),                        # the L40S reading, marked ESTIMATE
    ("NVIDIA L40", "L40", 47_576_711_168, True),
    ("H800", "H800-SXM-80GB", 85_017_755_648, True),             # the H100 SXM reading, marked ESTIMATE
    ("NVIDIA H800 80GB HBM3", "H800-SXM-80GB", 85_017_755_648, True),
    ("A800", "A800-SXM4-80GB", 85_100_068_864, True),            # the A100-SXM4-80GB reading, ESTIMATE
    ("NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB", 85_100_068_864, True),
    ("NVIDIA A800 80GB PCIe", "A800-PCIe-80GB", 84_974_239_744, True),
])
def test_new_catalog_gpus(name, canonical, memory, estimate):
    from kvplan.hardware import find_gpu, load_catalog

    g = find_gpu(name, load_catalog())
    assert (g.name, g.memory_bytes, g.estimate) == (canonical, memory, estimate)
    assert ("ESTIMATE" in g.sources["memory"]) == estimate


@pytest.mark.parametrize("label, canonical", [
    ("NVIDIA-A40", "A40"), ("NVIDIA-L40", "L40"), ("NVIDIA-L40S", "L40S"), ("NVIDIA-H800", "H800-SXM-80GB"),
    ("NVIDIA-A800-SXM4-80GB", "A800-SXM4-80GB"),
])
def test_gpu_feature_discovery_labels_find_them(label, canonical):
    from kvplan.deploy.gpus import gpu_for_label
    from kvplan.hardware import load_catalog

    assert gpu_for_label(label, load_catalog()).name == canonical


def test_spec_sheet_rates_of_the_new_gpus():
    from kvplan.hardware import find_gpu, load_catalog

    catalog = load_catalog()
    rates = {n: (find_gpu(n, catalog).bandwidth, find_gpu(n, catalog).tflops) for n in ("A40", "L40", "H800", "A800")}
    assert rates == {"A40": (696e9, 149.7), "L40": (864e9, 181.05), "H800": (3.35e12, 989.4), "A800": (2.039e12, 312)}


# ------------------------------------------------------------------------------------------------
# (3) one fp8 name on every engine


def test_fp8_compares_across_engines_in_estimate():
    # Qwen3-8B: 36 layers x 8 KV heads x 128 x 2 (K and V) x 1 byte = 73,728 B per token; x 8,192 = 603,979,776
    code, out, err = run_cli(["estimate", "Qwen/Qwen3-8B", "-e", "vllm,sglang,trtllm", "--kv-dtype", "fp8",
                              "-c", "8k", "-f", "json"])
    assert code == 0, err
    results = {r["engine"]: r for r in json.loads(out)["results"]}
    for engine, own in (("vllm", "fp8"), ("sglang", "fp8_e4m3"), ("trtllm", "fp8")):
        row = results[engine]["rows"][0]
        assert (row["kv_dtype"], row["kv_dtype_resolved"], row["kv_bytes"]) == ("fp8", own, 603_979_776), engine
    notes = {e: [a for a in r["assumptions"] if a.startswith("kv dtype fp8 is")] for e, r in results.items()}
    assert notes["vllm"] == ["kv dtype fp8 is vLLM's fp8 = fp8_e4m3 (--kv-cache-dtype fp8): OCP e4m3, 1 byte per "
                             "value, per-tensor scale"]
    assert notes["sglang"][0].startswith("kv dtype fp8 is SGLang's fp8_e4m3")
    assert notes["trtllm"][0].startswith("kv dtype fp8 is TensorRT-LLM's FP8")


def test_fp8_compares_across_engines_in_max_batch():
    code, out, err = run_cli(["max-batch", "Qwen/Qwen3-8B", "--gpu", "H100", "-e", "vllm,sglang,trtllm",
                              "--kv-dtype", "fp8", "--max-model-len", "32k", "-f", "json"])
    assert code == 0, err
    doc = json.loads(out)
    assert [r["engine"] for r in doc["results"]] == ["vllm", "sglang", "trtllm"]
    for r in doc["results"]:
        assert r["kv_dtype"] == "fp8" and r["fits"]
        assert any(a.startswith("kv dtype fp8 is") for a in r["assumptions"]), r["engine"]
    # fp8_e4m3 is accepted by TensorRT-LLM too (its FP8), e5m2 is not: refused by --kv-dtype
    assert run_cli(["estimate", "Qwen/Qwen3-8B", "-e", "trtllm", "--kv-dtype", "fp8_e4m3", "-c", "8k"])[0] == 0
    code, _, err = run_cli(["estimate", "Qwen/Qwen3-8B", "-e", "trtllm", "--kv-dtype", "fp8_e5m2", "-c", "8k"])
    one_line(code, err, "--kv-dtype")


def test_other_dtypes_get_no_fp8_line():
    code, out, err = run_cli(["estimate", "Qwen/Qwen3-8B", "-e", "sglang", "-c", "8k", "-f", "json"])
    assert code == 0, err
    assert not any("fp8" in a for a in json.loads(out)["assumptions"])


# ------------------------------------------------------------------------------------------------
# (4) max-batch --format csv and markdown


MB = ["max-batch", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "32k"]


def test_max_batch_csv_has_json_values():
    code, out, err = run_cli([*MB, "-e", "vllm,sglang", "-f", "csv"])
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["engine"] for r in rows] == ["vllm", "sglang"]
    from kvplan.render.csv_out import PLAN_COLUMNS

    assert out.splitlines()[0] == ",".join(PLAN_COLUMNS)
    for r in rows:
        code, js, err = run_cli([*MB, "-e", r["engine"], "-f", "json"])
        doc = json.loads(js)
        assert int(r["max_batch"]) == doc["max_batch"] and int(r["kv_cache_tokens"]) == doc["kv_cache_tokens"]
        assert int(r["kv_cache_bytes_per_gpu"]) == doc["per_gpu"]["kv_cache_bytes"]
        assert (r["tp"], r["pp"], r["dp"], r["gpu"], r["fits"]) == ("1", "1", "1", "H100-SXM-80GB", "yes")
        assert r["max_model_len"] == "32000" and r["max_batch_plain"] == ""  # 32k as vLLM reads it
    assert rows[1]["num_blocks"] == ""  # SGLang reports no blocks


def test_max_batch_markdown():
    code, out, err = run_cli([*MB, "-f", "markdown"])
    assert code == 0, err
    assert out.startswith("### Capacity: Qwen/Qwen3-8B on 1 x H100-SXM-80GB (tp 1 x pp 1 x dp 1), vllm ")
    assert "| memory | size | bytes | how | why |" in out and "| fits | yes |" in out
    assert "**Assumptions**" in out
    for line in out.splitlines():  # a note's '|' never splits a table row
        if line.startswith("| "):
            assert line.replace("\\|", "").count("|") in (3, 6), line


def test_max_batch_that_does_not_fit_exits_1_in_every_format():
    for fmt in ("csv", "markdown"):
        code, out, err = run_cli(["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "L4", "-f", fmt])
        assert code == 1 and err.startswith("kvplan: does not fit"), err
        assert (",no" in out) if fmt == "csv" else ("| fits | **no** |" in out)


@pytest.mark.parametrize("argv, flag", [
    ([*MB, "-f", "xml"], "--format"),
    ([*MB, "-e", "vllm,nope"], "--engine"),
    ([*MB, "-e", "vllm,sglang", "--calibration", str(DATA / "calibration.yaml")], "--calibration"),
])
def test_max_batch_mistakes_are_one_line(argv, flag):
    code, _, err = run_cli(argv)
    one_line(code, err, flag)


# ------------------------------------------------------------------------------------------------
# A bounded fuzz of this surface

WORK = Path(tempfile.mkdtemp(prefix="kvplan-catalog-fuzz-"))
INDEX_VALUES = st.sampled_from([True, False, None, 0, -1, 1.5, 1e308, "9", 9 * 10**40, [], {}, 16_381_470_720,
                                1 << 50, (1 << 50) + 1])
FORMATS = st.sampled_from(["table", "json", "csv", "markdown", "CSV", "", "md", "x" * 300])
ENGINES = st.sampled_from(["vllm", "sglang", "trtllm", "vllm,sglang,trtllm", "llamacpp", "hf", "vllm,,", ",", "a" * 300])
DTYPES = st.sampled_from(["fp8", "fp8_e4m3", "fp8_e5m2", "auto", "FP8", "fp8,fp8", "", "int8", "nvfp4"])
GPUS = st.sampled_from(["A40", "L40", "H800", "A800", "A800-PCIe-80GB", "NVIDIA L40", "L41", ""])
IDS = st.one_of(st.sampled_from(["Qwen/Qwen3-8B", "a/b", "x" * 250, "\n", "\t", "é/ü"]), st.text(max_size=30))


@st.composite
def commands(draw: st.DrawFn) -> list[str]:
    kind = draw(st.sampled_from(["max-batch", "estimate", "spec", "check"]))
    if kind == "max-batch":
        return ["max-batch", "Qwen/Qwen3-8B", "--gpu", draw(GPUS), "-e", draw(ENGINES), "--kv-dtype", draw(DTYPES),
                "-f", draw(FORMATS), "--max-model-len", draw(st.sampled_from(["8k", "0", "true", "1e308"]))]
    if kind == "estimate":
        return ["estimate", "Qwen/Qwen3-0.6B", "-e", draw(ENGINES), "--kv-dtype", draw(DTYPES), "-c", "4k",
                "-f", draw(FORMATS)]
    d = WORK / f"m{draw(st.integers(0, 10**9))}"
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "hf_configs" / "Qwen__Qwen3-0.6B.json", d / "config.json")
    meta = {"total_size": draw(INDEX_VALUES)}
    if draw(st.booleans()):
        meta["total_parameters"] = draw(INDEX_VALUES)
    index = {"metadata": meta, "weight_map": {"x": "model-00001-of-00001.safetensors"}}
    text = json.dumps(index, allow_nan=True) if draw(st.booleans()) else "[" * 5000 + "]" * 5000
    (d / "model.safetensors.index.json").write_text(text)
    if kind == "spec":
        return ["spec", str(d), "--id", draw(IDS)]
    specs = WORK / f"specs{draw(st.integers(0, 10**9))}"
    org = draw(st.sampled_from(["acme__m", "acme", ".hidden", "a" * 200]))
    target = specs / org / ("m" if org in ("acme", "a" * 200) else "")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(d, target, dirs_exist_ok=True)
    deploy = WORK / f"deploy{draw(st.integers(0, 10**9))}.sh"
    deploy.write_text(SCRIPT.format(gpu=draw(GPUS) or "H100", command="vllm serve acme/m --kv-cache-dtype "
                                    + (draw(DTYPES) or "auto")))
    return ["check", str(deploy), "--specs", str(specs), "-f", draw(st.sampled_from(["table", "json"]))]


@pytest.fixture(scope="module", autouse=True)
def token_in_environment():
    with hf_token(TOKEN):
        yield
    shutil.rmtree(WORK, ignore_errors=True)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the hang detector needs SIGALRM")
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(argv=commands())
def test_generated_commands_exit_0_1_2_in_one_piece(argv):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, out, err = run_cli(argv)
    assert code in (0, 1, 2), (argv, code, err[-2000:])
    assert "Traceback" not in out + err, (argv, err[-4000:])
    assert TOKEN not in out + err, argv
    if code == 2:
        assert err == "" or err.startswith("kvplan: error: ") and err.count("\n") == 1, (argv, err[-2000:])
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 1024 * 1024, argv
