"""Hostile calibration files (issue 23; issue 21's calibration items): ``--calibration FILE`` of ``max-batch`` and
``check``, and the files ``kvplan log --save`` writes. One line and exit 2 for every bad file (under ``check``: an
invalid-input finding, the other files still checked), bounded time and memory, and save and load agree.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import DATA, hf_token, run_cli
from kvplan.errors import UsageError
from kvplan.logs import parse_log, parse_text
from kvplan.logs.calibration import MAX_FILE_BYTES, Calibration, dump, from_log, load, validate

LLAVA = DATA / "logs" / "vllm-0.10.2-llava-mistral-7b-h100.log"
CASES = {c["id"]: c for c in yaml.safe_load((DATA / "engine_logs_dev.yaml").read_text())["cases"]}
V0_LOG = CASES["vllm-10517-llama31-8b-3090-20k"]["log_excerpt"]
GOOD = dump(from_log(parse_text(V0_LOG), model="meta-llama/Llama-3.1-8B"))
"""A calibration of Llama-3.1-8B on an RTX 3090 (vLLM 0.6), as ``kvplan log --save`` writes it."""
MAX_BATCH = ["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "RTX-3090", "--max-model-len", "20000"]
SERVE = ("# kvplan/gpu: RTX-3090\n"
         "vllm serve meta-llama/Llama-3.1-8B --max-model-len 20000 --gpu-memory-utilization 0.9\n")
TOKEN = "hf_calibrationTOKENthatMustNeverBePrinted"


def run(*argv: str, seconds: float = 30) -> tuple[int, str, str]:
    """``kvplan.cli.main`` in-process, output captured; a hang becomes a failure after ``seconds``."""
    return run_cli(argv, seconds=seconds)


def one_line(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def with_value(key: str, value: str, text: str = GOOD) -> str:
    """``text`` with the first ``key:`` line's value replaced (indentation kept)."""
    new, count = re.subn(rf"(?m)^(\s*{re.escape(key)}:) .*$", lambda m: f"{m.group(1)} {value}", text, count=1)
    assert count == 1, key
    return new


def check_json(tmp_path: Path, calibration: Path) -> tuple[int, dict]:
    deploy = tmp_path / "serve.sh"
    deploy.write_text(SERVE)
    code, out, err = run("check", str(deploy), "--calibration", str(calibration), "-f", "json")
    assert "Traceback" not in out + err
    return code, json.loads(out)


def calibration_finding(doc: dict, path: Path) -> dict:
    findings = [f for f in doc["files"] if f["path"] == str(path)]
    assert len(findings) == 1, doc["files"]
    (finding,) = findings[0]["findings"]
    assert finding["code"] == "invalid-input" and finding["invalid_input"], finding
    return finding


# ------------------------------------------------------------------------------------------------
# The bounded reader: devices, pipes, size, depth, integer length


@pytest.mark.parametrize("command", ["max-batch", "check"])
def test_dev_zero_is_refused_without_reading_it(command, tmp_path):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if command == "max-batch":
        err = one_line(*run(*MAX_BATCH, "--calibration", "/dev/zero")[::2])
        assert "--calibration" in err and "/dev/zero" in err and "character device" in err
    else:
        code, doc = check_json(tmp_path, Path("/dev/zero"))
        assert code == 2 and "character device" in calibration_finding(doc, Path("/dev/zero"))["message"]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 256 * 1024  # KB: it read nothing


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_named_pipe_without_a_writer_does_not_block(tmp_path):
    pipe = tmp_path / "calib.yaml"
    os.mkfifo(pipe)
    err = one_line(*run(*MAX_BATCH, "--calibration", str(pipe), seconds=10)[::2])
    assert "named pipe" in err and str(pipe) in err
    code, doc = check_json(tmp_path, pipe)
    assert code == 2 and "named pipe" in calibration_finding(doc, pipe)["message"]


def test_a_file_over_1_mib_is_refused_as_too_large_not_cut(tmp_path):
    big = tmp_path / "calib.yaml"
    big.write_text(GOOD + "# " + "x" * MAX_FILE_BYTES + "\n")
    err = one_line(*run(*MAX_BATCH, "--calibration", str(big))[::2])
    assert "1 MiB" in err and str(big) in err


HUGE = {
    "5,000-digit integer": with_value("bytes", "7" * 5000),
    "4,000-digit integer": with_value("bytes", "7" * 4000),  # Python converts it: the value's bound refuses it
    "100,000-deep flow": "measured: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "100,000-deep block": "- " * 100_000 + "x\n",
}


@pytest.mark.parametrize("text", HUGE.values(), ids=HUGE.keys())
def test_huge_integers_and_deep_nesting_are_one_line(text, tmp_path):
    path = tmp_path / "calib.yaml"
    path.write_text(text)
    err = one_line(*run(*MAX_BATCH, "--calibration", str(path))[::2])
    assert str(path) in err and len(err) < 400  # the 5,000 digits are not echoed


@pytest.mark.parametrize("text", HUGE.values(), ids=HUGE.keys())
def test_under_check_a_bad_calibration_is_a_finding_not_the_end_of_the_report(text, tmp_path):
    path = tmp_path / "calib.yaml"
    path.write_text(text)
    code, doc = check_json(tmp_path, path)
    assert code == 2 and doc["exit_code"] == 2
    assert "calibration not read" in calibration_finding(doc, path)["message"]
    assert [d["model"] for d in doc["deployments"]] == ["meta-llama/Llama-3.1-8B"]  # still checked
    assert doc["deployments"][0]["status"] in ("pass", "warn", "fail")


def test_library_check_reports_the_calibration_and_load_names_its_field(tmp_path):
    from kvplan.deploy import check

    path = tmp_path / "calib.yaml"
    path.write_text(with_value("tp", "true"))
    (tmp_path / "serve.sh").write_text(SERVE)
    report = check([str(tmp_path / "serve.sh")], calibration=path)
    assert report.exit_code == 2 and len(report.deployments) == 1
    with pytest.raises(UsageError) as caught:
        load(path)
    assert caught.value.field == "calibration" and "settings.tp" in caught.value.message


# ------------------------------------------------------------------------------------------------
# Strict values: booleans are not numbers; impossible values name their field


BAD_VALUES = [
    ("tp", "true", "settings.tp"),
    ("pp", "false", "settings.pp"),
    ("bytes", "true", "measured.total.bytes"),  # the first `bytes:` line
    ("step_bytes", "true", "measured.total.step_bytes"),
    ("num_gpu_blocks", "true", "num_gpu_blocks"),
    ("kvplan_calibration", "true", "kvplan_calibration"),
    ("max_model_len", "'20000'", "settings.max_model_len"),
    ("max_model_len", "20000.0", "settings.max_model_len"),
    ("max_model_len", "0", "settings.max_model_len"),
    ("gpu_memory_utilization", "0", "settings.gpu_memory_utilization"),
    ("gpu_memory_utilization", "1.5", "settings.gpu_memory_utilization"),
    ("gpu_memory_utilization", "1.0e+308", "settings.gpu_memory_utilization"),
    ("gpu_memory_utilization", ".nan", "NaN"),
    ("gpu_memory_utilization", "true", "settings.gpu_memory_utilization"),
    ("tp", "70000", "settings.tp"),
    ("engine", "magic", "engine"),
    ("model", "''", "model"),
    ("model", "x" * 5000, "model"),
    ("engine_version", "2024-01-01", "2024-01-01"),
]


@pytest.mark.parametrize("key, value, named", BAD_VALUES, ids=[f"{k}={v[:12]}" for k, v, _ in BAD_VALUES])
def test_bad_values_are_one_line_naming_the_field(key, value, named, tmp_path):
    path = tmp_path / "calib.yaml"
    path.write_text(with_value(key, value))
    err = one_line(*run(*MAX_BATCH, "--calibration", str(path))[::2])
    assert named in err and "--calibration" in err and len(err) < 400, err


def test_max_num_seqs_0_and_negative_weights_are_refused(tmp_path):
    path = tmp_path / "calib.yaml"
    path.write_text(GOOD.replace("  max_model_len: 20000\n", "  max_model_len: 20000\n  max_num_seqs: 0\n"))
    assert "settings.max_num_seqs" in one_line(*run(*MAX_BATCH, "--calibration", str(path))[::2])
    path.write_text(GOOD.replace("bytes: 16094101451", "bytes: -16094101451"))
    assert "measured.weights.bytes" in one_line(*run(*MAX_BATCH, "--calibration", str(path))[::2])
    path.write_text(GOOD.replace("bytes: 4090956349", "bytes: 409095634900"))  # KV larger than the GPU
    assert "measured.kv_cache.bytes" in one_line(*run(*MAX_BATCH, "--calibration", str(path))[::2])


def test_weights_logged_as_0_load():
    # a tiny model's weights print as "took 0.00 GiB": 0 within the log's step, a reading, not a mistake
    data = yaml.safe_load(GOOD)
    data["measured"]["weights"]["bytes"] = 0
    assert validate(data, "x").measured["weights"].bytes == 0


def test_a_negative_kv_cache_still_loads():
    # a model that does not fit logs a negative KV memory (vllm#13882): a measurement, not a mistake
    cal = from_log(parse_text(CASES["vllm-13882-qwen25-7b-4060-negative"]["log_excerpt"]), model="Qwen/Qwen2.5-7B")
    assert cal.measured["kv_cache"].bytes < 0 and validate(yaml.safe_load(dump(cal)), "x") == cal


@pytest.mark.parametrize("text, said", [("- 1\n", "an array"), ("", "an empty file"), ("x\n", "a string"),
                                        (GOOD + "bogus: 1\n", "bogus"), (GOOD + "---\nx: 1\n", "one YAML document"),
                                        ("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
                                            f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n"
                                            for i in range(1, 10)), "alias")])
def test_not_a_calibration_is_one_line(text, said, tmp_path):
    path = tmp_path / "calib.yaml"
    path.write_text(text)
    assert said in one_line(*run(*MAX_BATCH, "--calibration", str(path))[::2])


# ------------------------------------------------------------------------------------------------
# Save and load agree (issue 21): a negative CUDA-graph figure, a model given as a config path, impossible values


def _negative_graphs_log(tmp_path: Path) -> Path:
    text = LLAVA.read_text().replace("took 0.67 GiB", "took -0.03 GiB")
    text = text.replace("and 0.67 GiB for CUDAGraph memory", "and -0.03 GiB for CUDAGraph memory")
    assert "-0.03 GiB for CUDAGraph" in text
    path = tmp_path / "vllm.log"
    path.write_text(text)
    return path


def test_a_negative_cuda_graph_figure_is_saved_as_logged_and_used_as_0(tmp_path):
    calib = tmp_path / "calib.yaml"
    code, _, err = run("log", str(_negative_graphs_log(tmp_path)), "--model", "mistralai/Mistral-7B-v0.1",
                       "--save", str(calib))
    assert code == 0, err
    assert load(calib).measured["cudagraph"].logged == "-0.03 GiB"  # the file keeps what vLLM printed
    code, out, err = run("max-batch", "mistralai/Mistral-7B-v0.1", "--calibration", str(calib), "-f", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert any("CUDA-graph memory logged as -0.03 GiB; 0 used" in a for a in doc["assumptions"]), doc["assumptions"]
    assert doc["kv_cache_tokens"] == 451744  # the identity still reproduces the logged pool


def test_a_model_given_as_its_config_path_matches_its_calibration(tmp_path):
    model_dir = tmp_path / "Mistral-7B-v0.1"
    model_dir.mkdir()
    shutil.copy(DATA / "hf_configs" / "mistralai__Mistral-7B-v0.1.json", model_dir / "config.json")
    calib = tmp_path / "calib.yaml"
    config = str(model_dir / "config.json")
    code, _, err = run("log", str(LLAVA), "--model", config, "--save", str(calib))
    assert code == 0, err
    for model in (config, str(model_dir), "mistralai/Mistral-7B-v0.1"):
        code, _, err = run("max-batch", model, "--calibration", str(calib))
        assert code in (0, 1) and "measured with model" not in err, (model, err)
    other = tmp_path / "Qwen3-8B"
    other.mkdir()
    shutil.copy(DATA / "hf_configs" / "Qwen__Qwen3-0.6B.json", other / "config.json")
    err = one_line(*run("max-batch", str(other / "config.json"), "--calibration", str(calib))[::2])
    assert "measured with model" in err


@pytest.mark.parametrize("change, named", [
    ({"max_model_len": 0}, "settings.max_model_len"), ({"max_num_seqs": 0}, "settings.max_num_seqs"),
    ({"gpu_memory_utilization": 1.5}, "settings.gpu_memory_utilization"),
    ({"gpu_memory_utilization": 0.0}, "settings.gpu_memory_utilization"),
    ({"max_num_batched_tokens": 0}, "settings.max_num_batched_tokens"),
])
def test_from_log_refuses_what_load_would_refuse(change, named):
    log = parse_log(str(LLAVA))
    bad = replace(log, settings=replace(log.settings, **change))
    with pytest.raises(UsageError) as caught:
        from_log(bad, model="mistralai/Mistral-7B-v0.1")
    assert caught.value.field == "save" and named in caught.value.message


def test_from_log_refuses_negative_weights_and_tp_0():
    log = parse_log(str(LLAVA))
    weights = log.memory["weights"]
    bad = replace(log, memory={**log.memory, "weights": replace(weights, bytes=-weights.bytes)})
    with pytest.raises(UsageError, match="measured.weights.bytes") as caught:
        from_log(bad, model="mistralai/Mistral-7B-v0.1")
    assert caught.value.field == "save"
    with pytest.raises(UsageError) as caught:
        from_log(log, model="mistralai/Mistral-7B-v0.1", tp=0)
    assert caught.value.field == "tp"


def test_what_is_saved_loads_back_equal(tmp_path):
    cal = from_log(parse_log(str(LLAVA)), source=str(LLAVA))
    path = tmp_path / "calib.yaml"
    path.write_text(dump(cal))
    assert load(path) == cal and isinstance(cal, Calibration)


# ------------------------------------------------------------------------------------------------
# Fuzz: mutated calibration files under max-batch and check; mutated logs saved and loaded back

HOSTILE = st.sampled_from(["true", "false", "null", "~", "0", "-1", "1.5", "1.0e+308", ".inf", "-.inf", ".nan",
                           "7" * 5000, "7" * 4000, "'8'", "[1, 2]", "{a: 1}", "x" * 5000, "-16094101451",
                           "2024-01-01", "!!binary aGk=", "!!set {a, b}", "*a", "&a x", "0x10", "1_000", "''",
                           "\"\\0\"", "[" * 200, "{" * 60, TOKEN, "-0.03", "1e3", "vllm", "sglang", "0.95"])
MEMORY_BUDGET_KB = 1024 * 1024  # the whole fuzz run may grow the test process's peak RSS by 1 GiB at most
WORK = Path(tempfile.mkdtemp(prefix="kvplan-calibration-fuzz-"))


@st.composite
def calibration_texts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["line", "line", "line", "lines", "insert", "bytes", "text", "truncate"]))
    lines = GOOD.splitlines()
    if kind in ("line", "lines"):
        for _ in range(1 if kind == "line" else draw(st.integers(2, 5))):
            at = draw(st.integers(0, len(lines) - 1))
            key, sep, _ = lines[at].partition(": ")
            lines[at] = f"{key.rstrip(':')}: {draw(HOSTILE)}" if sep or key.endswith(":") else draw(HOSTILE)
        return "\n".join(lines) + "\n"
    if kind == "insert":
        at = draw(st.integers(0, len(lines)))
        indent = draw(st.sampled_from(["", "  ", "    "]))
        key = draw(st.sampled_from(["tp", "bytes", "extra", "measured", "cudagraph", "notes", "source", "x" * 100]))
        lines.insert(at, f"{indent}{key}: {draw(HOSTILE)}")
        return "\n".join(lines) + "\n"
    if kind == "bytes":
        return draw(st.binary(max_size=256)).decode("latin-1")
    if kind == "text":
        return draw(st.text(max_size=256))
    return GOOD[: draw(st.integers(0, len(GOOD)))]


@pytest.fixture(scope="module", autouse=True)
def token_in_environment():
    with hf_token(TOKEN):
        yield
    shutil.rmtree(WORK, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the hang detector needs SIGALRM")
@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=calibration_texts(), command=st.sampled_from(["max-batch", "check"]))
def test_generated_calibration_files_exit_0_1_2_in_one_piece(text, command):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    folder = Path(tempfile.mkdtemp(dir=WORK))
    path = folder / "calib.yaml"
    path.write_text(text, errors="surrogatepass")
    if command == "max-batch":
        argv = [*MAX_BATCH, "--calibration", str(path)]
    else:
        (folder / "serve.sh").write_text(SERVE)
        argv = ["check", str(folder / "serve.sh"), "--calibration", str(path)]
    code, out, err = run(*argv)
    event(f"{command} exit {code}")
    assert code in (0, 1, 2), (argv, code, err[-2000:])
    assert "Traceback" not in out + err, err[-4000:]
    # a file may hold the token's text (and a bad value is echoed, cut); kvplan never adds it from the environment
    assert TOKEN not in out + err or TOKEN in text
    if code == 2 and command == "max-batch":
        assert err.startswith("kvplan: error: ") and err.count("\n") == 1 and len(err) < 2000, err[-2000:]
    if command == "check":  # the deployment is reported whatever the calibration holds
        assert "meta-llama/Llama-3.1-8B" in out
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < MEMORY_BUDGET_KB


LOG_NUMBERS = st.sampled_from(["0", "-0.03", "-14.99", "0.00", "1.5e3", "99999", "7" * 40, "1,000", ".5", "-1"])


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_what_from_log_accepts_load_accepts(data):
    """Save and load agree: a mutated log either is refused by ``from_log`` (one UsageError) or its saved text
    reads back equal."""
    text = data.draw(st.sampled_from([LLAVA.read_text(), V0_LOG]))
    numbers = list(re.finditer(r"\d+\.\d+(?= ?Gi?B)|(?<=len )\d+|(?<=utilization \()[\d.]+", text))
    for _ in range(data.draw(st.integers(1, 3))):
        m = data.draw(st.sampled_from(numbers))
        text = text[:m.start()] + data.draw(LOG_NUMBERS) + text[m.end():]
        numbers = list(re.finditer(r"\d+\.\d+(?= ?Gi?B)|(?<=len )\d+|(?<=utilization \()[\d.]+", text))
    log = parse_text(text)
    try:
        cal = from_log(log, model="mistralai/Mistral-7B-v0.1")
        saved = dump(cal)
    except UsageError as exc:
        event("refused")
        assert "\n" not in str(exc)
        return
    event("saved")
    path = Path(tempfile.mkdtemp(dir=WORK)) / "calib.yaml"
    path.write_text(saved)
    assert load(path) == cal
