"""kvplan check: deployment files read where they are, checked with kvplan.max_batch (offline)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

import kvplan
from kvplan.deploy import check
from kvplan.deploy.flags import FlagError, Token, find_invocation, shell_commands, substitute
from kvplan.engines.vllm.flags import vllm_int
from kvplan.deploy.gpus import gpu_for_label
from kvplan.deploy.yaml_lines import YamlInputError, load_all
from kvplan.errors import UsageError
from kvplan.hardware import load_catalog
from kvplan.render.check_out import render
from conftest import REPO

EXAMPLES = REPO / "examples"
SPECS = EXAMPLES / "specs"


def run(*paths, **kw):
    kw.setdefault("specs", SPECS)
    return check([str(p) for p in paths], **kw)


def codes(report):
    return {f.code for f in report.findings}


# ------------------------------------------------------------------------------------------ examples

@pytest.mark.parametrize("path", sorted((EXAMPLES / "pass").iterdir()), ids=lambda p: p.name)
def test_passing_examples(path):
    report = run(path)
    assert report.exit_code == 0, render(report, "table")
    assert report.deployments and all(d.status in ("pass", "warn") for d in report.deployments)


FAILING = {
    "k8s-too-long.yaml": ("does-not-fit", 20),
    "k8s-fp8-would-fit.yaml": ("does-not-fit", 22),
    "kvplan-requirements.yaml": ("min-concurrency", 12),
    "compose-gpu-count.yaml": ("gpu-count", 13),
}
INVALID = {
    "malformed.yaml": ("malformed-yaml", 11),
    "unknown-kind.yaml": ("unknown-kind", 2),
    "no-serving-container.yaml": ("no-serving-container", 1),
    "missing-value.yaml": ("invalid-input", 15),
    "unknown-gpu.yaml": ("unknown-gpu", 10),
    "unpinned-model.yaml": ("model-unresolved", 4),
    "kvplan-schema.yaml": ("invalid-input", 5),
}


def test_every_example_is_exercised():
    assert {p.name for p in (EXAMPLES / "fail").iterdir()} == set(FAILING)
    assert {p.name for p in (EXAMPLES / "invalid").iterdir()} == set(INVALID)


@pytest.mark.parametrize("name", sorted(FAILING))
def test_failing_examples(name):
    report = run(EXAMPLES / "fail" / name)
    code, line = FAILING[name]
    assert report.exit_code == 1
    hits = [f for f in report.findings if f.code == code]
    assert hits and hits[0].line == line and hits[0].file.endswith(name) and hits[0].deployment


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_examples(name):
    report = run(EXAMPLES / "invalid" / name)
    code, line = INVALID[name]
    assert report.exit_code == 2
    hits = [f for f in report.findings if f.code == code]
    assert hits and hits[0].line == line and hits[0].invalid_input


def test_bad_file_does_not_stop_the_others():
    report = run(EXAMPLES / "invalid" / "malformed.yaml", EXAMPLES / "fail" / "k8s-too-long.yaml",
                 EXAMPLES / "pass" / "kvplan.yaml")
    assert report.exit_code == 2
    assert {"malformed-yaml", "does-not-fit"} <= codes(report)
    assert [d.status for d in report.deployments].count("pass") == 3


def test_glob_and_missing_paths():
    report = run(str(EXAMPLES / "pass" / "**" / "*.yaml"))
    assert report.exit_code == 0 and len(report.files) == 7
    assert run(str(EXAMPLES / "nothing-*.yaml")).exit_code == 2
    assert run(EXAMPLES / "no-such-file.yaml").exit_code == 2


# ------------------------------------------------------------------------------------------ checks

def test_does_not_fit_names_numbers_from_max_batch():
    report = run(EXAMPLES / "fail" / "k8s-too-long.yaml")
    f = next(f for f in report.findings if f.code == "does-not-fit")
    plan = kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="L4", max_model_len=131072,
                            settings=kvplan.budgets.Settings(gpu_memory_utilization=0.9))
    assert f.message == plan.message
    assert re.match(r"max-model-len 131,072 needs 16\.00 GiB of KV per GPU; [0-9.]+ GiB available; [0-9,]+ fits$",
                    f.message)
    assert f.value == 131072 and f.fits == plan.max_model_len_fit
    assert f.suggestion is None  # fp8 does not make 128k fit either
    d = report.deployments[0]
    assert d.kv_cache_bytes_per_gpu == plan.per_gpu.kv_cache_bytes and d.gpu == "L4" and d.gpu_count == 1


def test_fp8_suggested_when_it_makes_it_fit():
    report = run(EXAMPLES / "fail" / "k8s-fp8-would-fit.yaml")
    f = next(f for f in report.findings if f.code == "does-not-fit")
    assert f.suggestion and f.suggestion.startswith("--kv-cache-dtype fp8 would pass")
    p8 = kvplan.max_batch("Qwen/Qwen3-8B", gpu="L4", max_model_len=32768, kv_dtype="fp8", engine_version="0.10.2",
                          settings=kvplan.budgets.Settings(max_num_seqs=16))
    assert p8.fits and f"{p8.max_model_len_fit:,} fits" in f.suggestion


def _kvplan_file(tmp_path, body: str) -> Path:
    path = tmp_path / "kvplan.yaml"
    path.write_text("version: 1\ndeployments:\n" + body)
    return path


def test_max_num_seqs_warning_or_error(tmp_path):
    body = ("  - name: a\n    model: meta-llama/Llama-3.1-8B\n    gpu: H100\n"
            "    engine: {max_model_len: 32k, max_num_seqs: 256}\n")
    report = run(_kvplan_file(tmp_path, body))
    f = next(f for f in report.findings if f.code == "max-num-seqs-unreachable")
    assert f.severity == "warning" and report.exit_code == 0 and f.line == 6
    assert run(_kvplan_file(tmp_path, body), strict=True).exit_code == 1
    report = run(_kvplan_file(tmp_path, body + "    requirements: {max_num_seqs_reachable: true}\n"))
    assert report.exit_code == 1 and next(f for f in report.findings if f.code == "max-num-seqs-unreachable").severity == "error"


def test_requirements_min_context_and_headroom(tmp_path):
    body = ("  - name: a\n    model: meta-llama/Llama-3.1-8B\n    gpu: L4\n    engine: {max_model_len: 16k}\n"
            "    requirements: {min_context: 32k}\n")
    report = run(_kvplan_file(tmp_path, body))
    assert report.exit_code == 1 and "min-context" in codes(report)
    # 24k fits on an L4 with a little room (3.0 GiB of KV in 3.7): 30 % headroom does not
    body = ("  - name: a\n    model: meta-llama/Llama-3.1-8B\n    gpu: L4\n    engine: {max_model_len: 24k}\n"
            "    requirements: {headroom: 30%}\n")
    report = run(_kvplan_file(tmp_path, body))
    f = next(f for f in report.findings if f.code == "headroom")
    assert report.exit_code == 1 and f.message.startswith("with 30% headroom") and f.line == 7


def test_tp_beyond_kv_heads_and_gpu_count(tmp_path):
    body = ("  - name: a\n    model: meta-llama/Llama-3.1-8B\n    gpu: {type: H100, count: 16}\n"
            "    engine: {tp: 16, max_model_len: 8k}\n")
    report = run(_kvplan_file(tmp_path, body))
    assert "tp-exceeds-kv-heads" in codes(report)


def test_engine_refusal_is_a_failure(tmp_path):
    body = "  - name: a\n    model: meta-llama/Llama-3.1-8B\n    gpu: {type: H100, count: 3}\n    engine: {tp: 3}\n"
    report = run(_kvplan_file(tmp_path, body))
    assert report.exit_code == 1 and "engine-refuses" in codes(report)


def test_inline_spec_and_memory_gpu(tmp_path):
    body = ("  - name: tiny\n    model:\n      spec: {id: tiny, model_type: llama, weights_bytes: 1000000000,\n"
            "             max_position_embeddings: 4096,\n"
            "             layers: [{kind: full, count: 4, kv_heads: 2, head_dim: 64}]}\n"
            "    gpu: {memory: 16GiB}\n")
    report = run(_kvplan_file(tmp_path, body))
    assert report.exit_code == 0, render(report, "table")


def test_unknown_env_value_is_reported(tmp_path):
    path = tmp_path / "serve.sh"
    path.write_text("# kvplan/gpu: H100\nvllm serve meta-llama/Llama-3.1-8B --max-model-len $MAX_LEN\n")
    report = run(path)
    f = next(f for f in report.findings if f.code == "unknown-value")
    assert f.severity == "warning" and f.line == 2 and "MAX_LEN" in f.message
    assert report.deployments[0].max_model_len == 131072  # the model's limit


def test_gpu_flag_fallback_and_missing_gpu(tmp_path):
    path = tmp_path / "serve.sh"
    path.write_text("python3 -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B "
                    "--max_model_len 8k\n")
    assert run(path).exit_code == 2 and "unknown-gpu" in codes(run(path))
    report = run(path, gpu="NVIDIA-A100-SXM4-80GB")
    assert report.exit_code == 0 and report.deployments[0].max_model_len == 8000  # vLLM: k = 1000


def test_ignore_unrecognized(tmp_path):
    other = tmp_path / "config.yaml"
    other.write_text("logging: {level: info}\n")
    assert run(other).exit_code == 2
    report = run(other, EXAMPLES / "invalid" / "no-serving-container.yaml", ignore_unrecognized=True)
    assert report.exit_code == 0 and all(f.skipped for f in report.files)


# ------------------------------------------------------------------------------------------ readers

def test_kubernetes_details():
    report = run(EXAMPLES / "pass" / "k8s-vllm-deployment.yaml")
    d = report.deployments[0]
    assert (d.name, d.tp, d.gpu_count, d.max_model_len, d.engine_version) == ("llama-70b", 4, 4, 32768, "0.10.2")
    lws = run(EXAMPLES / "pass" / "lws-llama-405b.yaml").deployments[0]
    assert (lws.gpu, lws.gpu_count, lws.tp, lws.pp) == ("H200-141GB", 16, 8, 2)
    helm = run(EXAMPLES / "pass" / "values-production-stack.yaml").deployments
    assert [d.name for d in helm] == ["llama3-8b [L4]", "llama3-8b [A10G]"]


def test_compose_dotenv_and_shell_variables(tmp_path):
    (tmp_path / ".env").write_text("CONTEXT_LENGTH=4096\n")
    src = (EXAMPLES / "pass" / "compose.yaml").read_text()
    (tmp_path / "compose.yaml").write_text(src)
    report = run(tmp_path / "compose.yaml")
    assert report.deployments[0].max_model_len == 4096 and report.deployments[0].engine == "sglang"
    shell = run(EXAMPLES / "pass" / "serve.sh").deployments[0]
    assert (shell.model, shell.max_model_len, shell.gpu_count) == ("acme/support-7b-instruct", 32768, 1)


def test_flags_parse_like_the_engines():
    inv = find_invocation([Token(w) for w in ["vllm", "serve", "m/x", "--max_model_len=32K", "-tp", "2",
                                              "--enforce-eager", "--port", "8000"]])
    assert inv.model.value == "m/x" and inv.options["tp"].value == "2" and inv.options["max_model_len"].value == "32K"
    assert vllm_int("32K") == 32768 and vllm_int("32k") == 32000 and vllm_int("4096") == 4096
    with pytest.raises(FlagError):
        find_invocation([Token(w) for w in ["vllm", "serve", "m/x", "--max-num-seqs"]])
    assert find_invocation([Token(w) for w in ["nginx", "-g", "daemon off;"]]) is None
    inv = find_invocation([Token("/bin/bash"), Token("-c"), Token("pip install x && exec python3 -m sglang.launch_server "
                                                                  "--model-path q/w --tp 4", 7)])
    assert inv.engine == "sglang" and inv.options["tp"].value == "4" and inv.line == 7
    assert substitute("${A:-3}-$(B)-$C", {"B": "2"}, k8s=True) == ("3-2-$C", ("C",))
    cmds = shell_commands("X=1 \\\n  vllm serve m \\\n  --tp 2; echo done\n", 1)
    assert [t.line for t in cmds[0]] == [1, 2, 2, 2, 3, 3] and cmds[1][0].text == "echo"


@pytest.mark.parametrize("label, name", [
    ("NVIDIA-H100-80GB-HBM3", "H100-SXM-80GB"), ("NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB"), ("NVIDIA-L4", "L4"),
    ("Tesla-T4", "T4"), ("NVIDIA-H100-80GB-HBM3-SHARED", "H100-SXM-80GB"), ("nvidia-tesla-a100", "A100-SXM4-40GB"),
    ("NVIDIA-A100-PCIE-40GB", "A100-PCIe-40GB"), ("NVIDIA-H200", "H200-141GB"), ("NVIDIA-A10G", "A10G"),
    ("NVIDIA-GeForce-RTX-4090", "RTX-4090"), ("a10g", "A10G"),
])
def test_gpu_labels(label, name):
    assert gpu_for_label(label, load_catalog()).name == name


def test_gpu_labels_unknown_and_mig():
    with pytest.raises(UsageError, match="unknown GPU label 'NVIDIA-Z100'"):
        gpu_for_label("NVIDIA-Z100", load_catalog())
    with pytest.raises(UsageError, match="MIG"):
        gpu_for_label("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", load_catalog())


def test_yaml_lines():
    docs = load_all("a: 1\n---\nb:\n  - x\n  - |\n    text\n", "f")
    assert docs[1][0].lines["b"] == 4 and docs[1][0]["b"].lines == [4, 6] and docs[1][1] == 3
    with pytest.raises(YamlInputError) as exc:
        load_all("a: [1,\nb: 2\n", "f")
    assert exc.value.line == 3  # where PyYAML notices the missing bracket


# ------------------------------------------------------------------------------------------ output

def _mixed():
    return run(EXAMPLES / "fail" / "k8s-fp8-would-fit.yaml", EXAMPLES / "pass" / "kvplan.yaml",
               EXAMPLES / "invalid" / "unknown-kind.yaml")


def test_json_is_stable():
    data = json.loads(render(_mixed(), "json"))
    assert list(data) == ["kvplan_version", "json_version", "exit_code", "strict", "summary", "files", "deployments",
                          "findings"]
    assert data["exit_code"] == 2 and data["json_version"] == 1
    f = data["findings"][0]
    assert list(f) == ["severity", "code", "file", "line", "deployment", "message", "value", "fits", "suggestion",
                       "invalid_input"]
    d = data["deployments"][0]
    for key in ("name", "file", "line", "source", "status", "model", "gpu", "parallel", "max_model_len",
                "kv_cache_bytes_per_gpu", "max_model_len_fit", "max_concurrency", "findings"):
        assert key in d


def test_junit_github_markdown_table():
    report = _mixed()
    root = ET.fromstring(render(report, "junit"))
    assert root.tag == "testsuites" and len(root.findall("testsuite")) == 3
    assert root.findall(".//failure") and root.findall(".//error")
    gh = render(report, "github").splitlines()
    assert any(line.startswith("::error file=") and ",line=22," in line for line in gh)
    assert all("\n" not in line for line in gh)
    md = render(report, "markdown")
    assert md.startswith("### kvplan check") and "| ❌ |" in md and "`does-not-fit`" in md
    table = render(report, "table")
    assert "k8s-fp8-would-fit.yaml:22: error: qwen3-8b: max-model-len 32,768 needs" in table


def test_cli(tmp_path):
    from typer.testing import CliRunner

    from kvplan.cli.app import app
    from kvplan.cli import check
    from kvplan.cli.options import typer_command

    check_command = typer_command(check, "check")

    if not any(c.name == "check" for c in app.registered_commands):
        app.command("check")(check_command)
    runner = CliRunner()
    ok = runner.invoke(app, ["check", str(EXAMPLES / "pass" / "kvplan.yaml"), "--specs", str(SPECS)])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["check", str(EXAMPLES / "fail" / "k8s-too-long.yaml"), "-f", "github"])
    assert bad.exit_code == 1 and bad.output.startswith("::error file=")
    invalid = runner.invoke(app, ["check", str(EXAMPLES / "invalid" / "malformed.yaml"), "-f", "json"])
    assert invalid.exit_code == 2 and json.loads(invalid.output)["exit_code"] == 2
    schema = runner.invoke(app, ["schema", "deployment"])
    assert schema.exit_code == 0 and json.loads(schema.output)["title"] == "kvplan deployment file"


# ------------------------------------------------------------------------------------------ ecosystem

def test_pre_commit_hook_and_ci_doc():
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "kvplan-check")
    assert hook["entry"].startswith("kvplan check") and hook["language"] == "python"
    doc = (REPO / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    workflow = next(yaml.safe_load(b) for b in blocks if "jobs:" in b)
    steps = [s.get("run", "") for job in workflow["jobs"].values() for s in job["steps"]]
    assert any("kvplan check" in s for s in steps)
    assert "HF_HUB_OFFLINE" in doc
    for field in ("exit_code", "findings", "max_model_len_fit", "invalid_input", "suggestion"):
        assert f"`{field}`" in doc
