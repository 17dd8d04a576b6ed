"""A bounded fuzz of the command line (issue 15): generated commands and input files.

Each generated call runs ``kvplan.cli.main(argv)`` in-process and must: exit 0, 1 or 2; print no
traceback; never print the HF token set in the environment; end (a 30 s alarm turns a hang into a
failure); and the whole run must stay within a memory budget. A few calls run the real entry
point (``python -m kvplan``) with its address space capped. HF_HUB_OFFLINE is set (conftest): no
network. ``verify`` is left out (it allocates with torch; tests/test_verify*.py cover it).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import REPO, hf_token, run_cli

TOKEN = "hf_fuzzTOKENthatMustNeverBePrinted"
SPEC_TEXT = (REPO / "model_specs" / "Qwen__Qwen3-8B.yaml").read_text()
CONFIG = json.loads((REPO / "tests" / "data" / "hf_configs" / "Qwen__Qwen3-0.6B.json").read_text())
DEPLOYMENTS = [p.read_text() for p in sorted((REPO / "examples" / "pass").glob("*.yaml"))]
BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
MEMORY_BUDGET_KB = 1024 * 1024  # the whole fuzz run may grow the test process's peak RSS by 1 GiB at most

WORK = Path(tempfile.mkdtemp(prefix="kvplan-fuzz-"))

# ------------------------------------------------------------------------------------------------
# Values and files

GARBAGE = st.sampled_from(["0", "-1", "", " ", "x", "nan", "inf", "9" * 40, "9" * 5000, "0x10", "1_000", "1.5",
                           "1e3", "128k..1k", "1..", "..8", "8k..8k:0", "30.5", "-5GiB", "1e400GiB", "100%", "true",
                           "None", "\u0661\u0662", "1\x00", "3" * 20 + "k", "x" * 300, "\u00e9", "../../etc/passwd",
                           "-", "--", "--help", "99.99", "0.0.0.1"])


def pool(*valid: str) -> st.SearchStrategy[str]:
    """Mostly values kvplan accepts (so that runs go deep), sometimes garbage."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), st.sampled_from(valid), GARBAGE)


COUNTS = pool("1", "8", "32", "8k", "32k", "1k..128k", "1k..8k:1k", "1,8,32", "1024", "8K", "4096")
PARALLEL = pool("1", "2", "4", "8")
SIZES = pool("80GB", "30.5GiB", "24GiB", "1000000000", "14.99GiB")
FRACTIONS = pool("0.9", "0.5", "0.95", "1.0")
ENGINES = pool("vllm", "sglang", "trtllm", "llamacpp", "hf", "hf-static")
DTYPES = pool("bf16", "fp8", "int4", "q8_0", "nvfp4", "auto", "fp16", "bf16,fp8")
VERSIONS = pool("0.10.2", "0.11.0", "4.57", "5.0")
GPUS = pool("H100", "H100-80GB", "RTX-4090", "A100-80GB", "L4", "H200")
FORMATS = pool("table", "json", "csv", "markdown", "github")
SOLVE = pool("batch", "context", "gpus")
REVISIONS = pool("main", "v1.0", "a" * 40)
MODELS = st.one_of(st.sampled_from(["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V3", "gpt2",
                                    "openai/gpt-oss-120b", "google/gemma-3-27b-it", "Qwen/Qwen3-Next-80B-A3B-Instruct",
                                    "mistralai/Mistral-7B-Instruct-v0.3"]),
                   st.sampled_from(["org/not-bundled", "nope", "", "org/name@v1", "org/name@", "a" * 500,
                                    "./nothing.json", "/dev/null", "/dev/zero", "examples/pass/kvplan.yaml",
                                    "tests/data/hf_configs", "..", "~", "Qwen/Qwen3-8B@main"]))
NUMBERS = st.one_of(COUNTS, SIZES, FRACTIONS)
WORDS = st.one_of(ENGINES, DTYPES, GPUS, FORMATS)


def _mutated_spec(data: st.DataObject) -> str:
    lines = SPEC_TEXT.splitlines()
    at = data.draw(st.integers(0, len(lines) - 1))
    key, sep, _ = lines[at].partition(": ")
    value = data.draw(st.one_of(NUMBERS, WORDS, st.sampled_from(["true", "[1, 2]", "{a: 1}", "null", "*x", "&a"])))
    lines[at] = f"{key}{sep or ': '}{value}"
    return "\n".join(lines) + "\n"


def _mutated_config(data: st.DataObject) -> str:
    config = dict(CONFIG)
    key = data.draw(st.sampled_from(sorted(config) + ["text_config", "layer_types", "quantization_config"]))
    json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                               lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                            max_size=4), max_leaves=10)
    config[key] = data.draw(json_values)
    return json.dumps(config)


def _mutated_deployment(data: st.DataObject) -> str:
    text = data.draw(st.sampled_from(DEPLOYMENTS))
    lines = text.splitlines()
    at = data.draw(st.integers(0, len(lines) - 1))
    key, sep, _ = lines[at].partition(": ")
    lines[at] = f"{key}{sep or ': '}{data.draw(st.one_of(NUMBERS, WORDS, MODELS))}"
    return "\n".join(lines) + "\n"


def draw_file(data: st.DataObject) -> str:
    """A file (or directory) with generated content under WORK; its path."""
    kind = data.draw(st.one_of(st.sampled_from(["spec", "config", "deployment", "dir", "shell"]),
                               st.sampled_from(["spec", "config", "deployment", "bytes", "text", "bomb", "deep",
                                                "huge", "dir", "shell"])))
    name = data.draw(st.sampled_from(["a.yaml", "config.json", "b.yml", "run.sh", "c.json", "noext"]))
    folder = Path(tempfile.mkdtemp(dir=WORK))
    path = folder / name
    if kind == "spec":
        path.write_text(_mutated_spec(data))
    elif kind == "config":
        path.write_text(_mutated_config(data))
    elif kind == "deployment":
        path.write_text(_mutated_deployment(data))
    elif kind == "bytes":
        path.write_bytes(data.draw(st.binary(max_size=512)))
    elif kind == "text":
        path.write_text(data.draw(st.text(max_size=512)), errors="surrogatepass")
    elif kind == "bomb":
        path.write_text(BOMB)
    elif kind == "deep":
        path.write_text("[" * 50_000 if name.endswith("json") else "- " * 50_000 + "x")
    elif kind == "huge":
        path.write_text(f'{{"num_hidden_layers": {"7" * 5000}}}' if name.endswith("json") else f"id: {'7' * 5000}\n")
    elif kind == "dir":
        path.mkdir()
        (path / "config.json").write_text(_mutated_config(data))
    else:
        path.write_text(f"#!/bin/sh\nvllm serve {data.draw(MODELS)} --max-model-len {data.draw(NUMBERS)} "
                        f"--tensor-parallel-size {data.draw(NUMBERS)}\n")
    return str(path)


FLAGS = {
    "estimate": {"-c": COUNTS, "-b": COUNTS, "-d": DTYPES, "-e": ENGINES, "--engine-version": VERSIONS,
                 "--block-size": pool("16", "32", "64"), "-f": FORMATS, "--by-layer": None, "--explain": None,
                 "--plot": None, "--revision": REVISIONS, "--hub": None},
    "max-batch": {"--gpu": GPUS, "--gpu-memory": SIZES, "--tp": PARALLEL, "--pp": PARALLEL, "--dp": PARALLEL,
                  "--engine": ENGINES, "--engine-version": VERSIONS, "--kv-cache-dtype": DTYPES,
                  "--max-model-len": COUNTS, "--solve": SOLVE, "--concurrency": COUNTS, "--batch": COUNTS,
                  "--context": COUNTS, "--block-size": pool("16", "32"), "--gpu-memory-utilization": FRACTIONS,
                  "--kv-cache-memory": SIZES, "--max-num-batched-tokens": COUNTS, "--max-num-seqs": COUNTS,
                  "--enforce-eager": None, "--mem-fraction-static": FRACTIONS,
                  "--free-gpu-memory-fraction": FRACTIONS, "--weights-bytes": SIZES, "--format": FORMATS,
                  "--gpu-catalog": "file"},
    "check": {"--format": FORMATS, "--gpu": GPUS, "--gpu-catalog": "file", "--specs": "dir", "--online": None,
              "--strict": None, "--ignore-unrecognized": None},
    "spec": {"--revision": REVISIONS, "--hub": None},
    "gpus": {"--format": FORMATS, "--catalog": "file"},
    "models": {"--format": FORMATS},
    "schema": {},
}


@st.composite
def commands(draw: st.DrawFn) -> list[str]:
    data = draw(st.data())
    command = draw(st.sampled_from(sorted(FLAGS)))
    argv = [command]
    if command in ("estimate", "max-batch", "spec", "check"):
        argv.append(draw_file(data) if draw(st.booleans()) else draw(MODELS))
    if command == "check" and draw(st.booleans()):
        argv.append(draw_file(data))
    names = sorted(FLAGS[command])
    for flag in draw(st.lists(st.sampled_from(names), max_size=4, unique=True)) if names else []:
        kind = FLAGS[command][flag]
        if kind is None:
            argv.append(flag)
        elif kind == "file":
            argv += [flag, draw_file(data)]
        elif kind == "dir":
            argv += [flag, str(Path(draw_file(data)).parent)]
        else:
            argv += [flag, draw(kind)]
    if command == "max-batch" and "--gpu" not in argv and "--gpu-memory" not in argv and draw(st.booleans()):
        argv += ["--gpu", draw(GPUS)]
    if command == "spec":
        argv += ["--output", str(Path(tempfile.mkdtemp(dir=WORK)) / "out.yaml")]  # never write outside WORK
    return argv


# ------------------------------------------------------------------------------------------------
# The properties


def run_in_process(argv: list[str]) -> tuple[int, str, str]:
    return run_cli(argv)


@pytest.fixture(scope="module", autouse=True)
def token_in_environment():
    import shutil

    with hf_token(TOKEN):
        yield
    shutil.rmtree(WORK, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the hang detector needs SIGALRM")
@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(argv=commands())
def test_generated_commands_exit_0_1_2_in_one_piece(argv):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, out, err = run_in_process(argv)
    event(f"{argv[0]} exit {code}")
    assert code in (0, 1, 2), (argv, code, err[-2000:])
    assert "Traceback" not in out + err, (argv, err[-4000:])
    assert TOKEN not in out + err, argv
    if code == 2:  # every mistake, the CLI framework's usage errors included, is one line (issue 15, item 10)
        assert err == "" or err.startswith("kvplan: error: ") and err.count("\n") == 1, (argv, err[-2000:])
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < MEMORY_BUDGET_KB, (argv, grown)


CASES = [
    ["estimate", "Qwen/Qwen3-8B", "-c", "8k", "-f", "json"],
    ["check", "examples/pass/compose.yaml", "--specs", "examples/specs"],
    ["estimate", "/dev/zero"],
    ["max-batch", "Qwen/Qwen3-8B", "--gpu", "H100", "--tp", "9" * 5000],
    ["estimate", "org/not-bundled", "--hub"],
]


@pytest.mark.slow
@pytest.mark.parametrize("argv", CASES, ids=[" ".join(a)[:40] for a in CASES])
def test_the_real_entry_point(argv):
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    env = {**os.environ, "HF_TOKEN": TOKEN, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "kvplan", *argv], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=60, preexec_fn=cap, check=False)
    assert done.returncode in (0, 1, 2), done.stderr
    assert "Traceback" not in done.stderr and TOKEN not in done.stdout + done.stderr
    if done.returncode == 2 and done.stderr and not done.stderr.startswith("Usage:"):  # see above
        assert done.stderr.startswith("kvplan: error: ") and done.stderr.count("\n") == 1, done.stderr
