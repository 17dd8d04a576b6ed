"""Regression tests for small correctness gaps (issues 12 and 13), each next to the engine rule it follows."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan
from kvplan.deploy import check
from kvplan.render.check_out import render

LLAMA8 = "meta-llama/Llama-3.1-8B"


def _one(path: Path):
    report = check([str(path)])
    assert len(report.deployments) == 1, render(report, "table")
    return report, report.deployments[0]


# ------------------------------------------------- 1. shared_prefix: 0 is "nothing shared" everywhere

def _kvplan_file(tmp_path: Path, requirements: str) -> Path:
    path = tmp_path / "kvplan.yaml"
    path.write_text(f"version: 1\ndeployments:\n  - name: chat\n    model: {LLAMA8}\n    gpu: L4\n"
                    f"    engine: {{name: vllm, max_model_len: 16k}}\n    requirements: {requirements}\n")
    return path


@pytest.mark.parametrize("zero", ["0", "'0'"])
def test_shared_prefix_zero_in_a_kvplan_file_is_no_sharing(tmp_path, zero):
    plain = kvplan.max_batch(kvplan.load_model(LLAMA8), gpu="L4", engine="vllm", max_model_len=16384, context=8192)
    report, result = _one(_kvplan_file(tmp_path, f"{{min_concurrency: {plain.max_batch + 1}, at_context: 8k, "
                                                 f"shared_prefix: {zero}}}"))
    assert not any(f.invalid_input for f in result.findings), render(report, "table")
    failed = next(f for f in result.findings if f.code == "min-concurrency")
    assert failed.fits == plain.max_batch and "prefix" not in failed.message


def test_shared_prefix_zero_in_a_shell_annotation_is_no_sharing(tmp_path):
    plain = kvplan.max_batch(kvplan.load_model(LLAMA8), gpu="L4", engine="vllm", max_model_len=16384, context=8192)
    path = tmp_path / "serve.sh"
    path.write_text(f"# kvplan/gpu: L4\n# kvplan/min-concurrency: {plain.max_batch}@8k\n"
                    f"# kvplan/shared-prefix: 0\nvllm serve {LLAMA8} --max-model-len 16384\n")
    report, result = _one(path)
    assert report.exit_code == 0, render(report, "table")


@pytest.mark.parametrize("bad", ["-1", "'-1'"])
def test_negative_shared_prefix_is_still_refused(tmp_path, bad):
    report = check([str(_kvplan_file(tmp_path, f"{{min_concurrency: 1, at_context: 8k, shared_prefix: {bad}}}"))])
    assert report.exit_code == 2 and "requirements.shared_prefix" in render(report, "table")
