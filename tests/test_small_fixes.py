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


# ------------------------------------------ 2. --kv-offloading-size 0: vLLM does not start with it

@pytest.mark.parametrize("version", ["0.14.0", "0.26.0", "0.33.0"])
def test_kv_offloading_size_zero_is_refused_by_name(version):
    from kvplan.dtypes import resolve_kv_dtype
    from kvplan.engines import get_engine, parse_version
    from kvplan.engines.protocol import Demand, make_engine_options
    from kvplan.errors import UsageError

    spec, engine, ver = kvplan.load_model(LLAMA8), get_engine("vllm"), parse_version(version)
    opts = make_engine_options(tp=1, kv_offloading_bytes=0)
    layouts = engine.stage_layouts(spec, resolve_kv_dtype("auto", spec.dtype), ver, opts, 1)
    with pytest.raises(UsageError) as err:
        engine.offload_tier(layouts, ver, opts, 1, Demand(8192, 8192, 1), None)
    assert err.value.field == "kv_offloading_bytes" and "cpu_bytes_to_use must be specified" in str(err.value)


def test_kv_offloading_size_zero_exits_2_naming_the_flag(capsys):
    from kvplan.cli import main

    assert main(["max-batch", LLAMA8, "--gpu", "H100", "--max-model-len", "8k", "--kv-offloading-size", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kvplan: error: --kv-offloading-size: 0 GiB")


# ------------------------------------------------ 3. LMCACHE_* values: LMCache takes the quotes off

@pytest.mark.parametrize(("raw", "read"), [
    # LMCache 0.5.6 v1/config_base.py _parse_quoted_string: strip, then a literal between matching quotes
    ('"512"', "512"), ("'512'", "512"), (' "512" ', "512"), (" 512 ", "512"), ('"a\\tb"', "a\tb"),
    ('""', ""), ('"', '"'), ("'\"'", '"'), ('"x\'', '"x\''), ('"a" if 1 else "b"', 'a" if 1 else "b'), ("", ""),
])
def test_lmcache_env_values_are_unquoted_as_lmcache_does(raw, read):
    from kvplan.engines.vllm.lmcache import env_value

    assert env_value(raw) == read


def test_quoted_lmcache_chunk_size_in_a_compose_file(tmp_path):
    compose = """services:
  llm:
    image: vllm/vllm-openai:v0.11.0
    command: ["meta-llama/Llama-3.1-8B", "--max-model-len", "8192", "--kv-offloading-backend", "lmcache",
              "--kv-offloading-size", "16", "-tp", "2"]
    environment:
      - LMCACHE_CHUNK_SIZE="512"
    labels: ["kvplan/gpu=H100"]
"""
    path = tmp_path / "compose.yaml"
    path.write_text(compose)
    report, result = _one(path)
    assert not any(f.invalid_input for f in result.findings), render(report, "table")
    # 8 GiB per rank; a 512-token chunk of one rank is 512 x 65,536 B = 32 MiB: 256 chunks (tests/test_lmcache.py)
    assert result.offload["block_size"] == 512 and result.offload["blocks"] == 256
