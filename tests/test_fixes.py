"""``check``'s fixes for a deployment that does not fit: each one, applied to the command and checked again,
passes; none is offered that does not."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from conftest import run_cli
from kvplan.deploy.fixes import Fix, apply

FAILING = [
    ("vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 2 --max-model-len 131072", "H100"),
    ("vllm serve Qwen/Qwen3-32B --max-model-len 40960 --gpu-memory-utilization 0.9", "L40S"),
    ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B --tp-size 2 --context-length 131072", "H100"),
    ("trtllm-serve meta-llama/Llama-3.1-8B --max_seq_len 131072 --kv_cache_free_gpu_memory_fraction 0.2", "L4"),
]


def _check(tmp_path: Path, command: str, gpu: str) -> dict:
    script = tmp_path / "serve.sh"
    script.write_text(f"#!/bin/sh\n{command}\n")
    code, out, _ = run_cli(["check", str(script), "--gpu", gpu, "-f", "json"])
    dep = json.loads(out)["deployments"][0]
    return {"code": code, **dep}


@pytest.mark.parametrize("command, gpu", FAILING)
def test_every_fix_applied_passes(tmp_path: Path, command: str, gpu: str) -> None:
    first = _check(tmp_path, command, gpu)
    assert first["status"] == "fail" and first["fixes"], first["findings"]
    for fix in first["fixes"]:
        if fix["setting"] == "gpu":
            again = _check(tmp_path, command, fix["value"])
        else:
            fixed = apply(shlex.split(command), Fix(fix["setting"], fix["value"], fix["flag"], 0, 0.0, ""))
            again = _check(tmp_path, shlex.join(fixed), gpu)
        assert again["status"] in ("pass", "warn"), (fix, again["findings"])
        assert again["kv_cache_tokens"] == fix["kv_cache_tokens"], fix


def test_a_passing_deployment_gets_no_fixes(tmp_path: Path) -> None:
    assert _check(tmp_path, "vllm serve Qwen/Qwen3-8B --max-model-len 8192", "H100")["fixes"] == []


def test_apply_replaces_or_adds_the_flag() -> None:
    fix = Fix("max_model_len", 4096, "--max-model-len", 0, 0.0, "")
    assert apply(["vllm", "serve", "m", "--max-model-len", "8192"], fix)[-1] == "4096"
    assert apply(["vllm", "serve", "m", "--max-model-len=8192"], fix)[-1] == "--max-model-len=4096"
    assert apply(["vllm", "serve", "m"], fix)[-2:] == ["--max-model-len", "4096"]
