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


def test_a_literal_command_is_checked_and_its_fixes_are_whole_commands() -> None:
    words = ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32k"]
    code, out, _ = run_cli(["check", "--gpu", "L4", "-f", "json", "--", *words])
    dep = json.loads(out)["deployments"][0]
    assert code == 1 and dep["status"] == "fail" and dep["file"] == "command"
    commands = [f["command"] for f in dep["fixes"] if f.get("command")]
    assert commands and all(c.startswith("vllm serve Qwen/Qwen3-8B") for c in commands)
    for command in commands:  # each, checked again, starts
        code, out, _ = run_cli(["check", "--gpu", "L4", "-f", "json", "--", *shlex.split(command)])
        assert code == 0, command


def test_a_command_on_stdin() -> None:
    code, out, _ = run_cli(["check", "--gpu", "H100", "-f", "json", "-"],
                           stdin=b"vllm serve Qwen/Qwen3-8B \\\n  --max-model-len 32k\n")
    assert code == 0 and json.loads(out)["deployments"][0]["max_model_len"] == 32000
    code, _, err = run_cli(["check", "--gpu", "H100", "-"], stdin=b"   \n")
    assert code == 2 and err.count("\n") == 1


def test_a_missing_file_is_still_a_missing_file() -> None:
    code, out, err = run_cli(["check", "no/such/deploy.yaml"])
    assert code == 2 and "no such file" in out + err


@pytest.mark.parametrize("kw", [
    dict(model="meta-llama/Llama-3.1-70B", gpu="H100", tp=2, max_model_len=131072),
    dict(model="google/gemma-3-27b-it", gpu="L40S", engine="sglang", max_model_len=65536),
    dict(model="openai/gpt-oss-120b", gpu="H100", engine="vllm", kv_dtype="fp8", context=8192, batch=4),
    dict(model="Qwen/Qwen3-32B", gpu="L40S", engine="trtllm", shared_prefix=1024, context=8192, batch=8),
])
def test_a_fix_plan_without_its_interval_is_the_same_plan(kw):
    """check plans its fixes with ``interval=False`` (a fix reads the plan's own figures): nothing but the interval
    differs from the whole plan."""
    from kvplan.plan import max_batch
    from kvplan.record import replace

    model = kw.pop("model")
    whole, points = max_batch(model, **kw), max_batch(model, interval=False, **kw)
    assert whole.interval is not None and points.interval is None
    assert replace(whole, interval=None, asked=None) == replace(points, interval=None, asked=None)
    assert whole.to_dict() | {"interval": None} == points.to_dict() | {"interval": None}


@pytest.mark.parametrize("engine, version, settings, vendor", [
    ("vllm", None, {}, "T4"),
    ("vllm", "0.9.2", {"gpu_memory_utilization": 1.0}, "T4"),
    ("vllm", None, {"gpu_memory_utilization": 0.5, "cpu_offload_bytes": 4 << 30}, "T4"),
    ("vllm", None, {"gpu_memory_utilization": 0.9}, "MI300X"),
    ("sglang", None, {"mem_fraction_static": 1.0}, "T4"),
    ("sglang", "0.4.5", {"mem_fraction_static": 0.7}, "T4"),
    ("sglang", None, {"mem_fraction_static": 0.88}, "MI300X"),
])
def test_a_gpu_the_weights_overflow_never_fits(engine, version, settings, vendor):
    """The larger-GPU fix skips a GPU whose memory the weights overflow (``Engine.weights_overflow``) instead of
    planning it, and the fp8 fix where they overflow the deployment's own: every such GPU, planned with either KV
    dtype, does not fit; and the bound does skip GPUs."""
    from kvplan.budgets.base import Settings
    from kvplan.engines import get_engine
    from kvplan.errors import KvplanError
    from kvplan.hardware import load_catalog
    from kvplan.plan import max_batch
    from kvplan.sources.bundled import bundled_ids, load_bundled

    eng, chosen = get_engine(engine), Settings(**settings)
    catalog = load_catalog(None)
    reference_vendor = next(g.vendor for g in catalog if g.name == vendor)
    skipped = 0
    for model in bundled_ids():
        spec = load_bundled(model)
        for tp in (1, 2):
            kw = dict(tp=tp, engine=engine, engine_version=version, settings=chosen, max_model_len=16384,
                      interval=False)
            try:
                reference = max_batch(spec, gpu=vendor, **kw)
            except KvplanError:
                continue
            for gpu in catalog:
                if gpu.vendor != reference_vendor or not eng.weights_overflow(reference, chosen, gpu.memory_bytes):
                    continue
                skipped += 1
                for kv_dtype in ("auto", "fp8"):
                    try:
                        assert not max_batch(spec, gpu=gpu, **{**kw, "kv_dtype": kv_dtype}).fits, (model, tp, gpu.name)
                    except KvplanError:
                        pass
    assert skipped > 0


def test_the_larger_gpu_found_without_planning_the_small_ones_is_the_same(tmp_path: Path, monkeypatch) -> None:
    """Skipping the GPUs the weights overflow changes no fix: the same report as planning every GPU."""
    import kvplan
    from kvplan.engines import get_engine

    scripts = []
    for i, (command, gpu) in enumerate([*FAILING[:3], ("vllm serve meta-llama/Llama-3.1-70B --max-model-len 8192", "L4"),
                                        ("python -m sglang.launch_server --model-path Qwen/Qwen3-32B "
                                         "--mem-fraction-static 0.9", "A10G")]):
        script = tmp_path / f"serve{i}.sh"
        script.write_text(f"#!/bin/sh\n# kvplan/gpu: {gpu}\n{command}\n")
        scripts.append(str(script))
    bounded = kvplan.check(scripts).to_dict()
    assert sum(1 for d in bounded["deployments"] for f in d.get("fixes", []) if f["setting"] == "gpu") >= 3
    for name in ("vllm", "sglang"):
        monkeypatch.setattr(type(get_engine(name)), "weights_overflow", lambda self, plan, settings, total: False)
    assert kvplan.check(scripts).to_dict() == bounded


def test_the_larger_gpu_is_never_one_whose_memory_is_the_hosts(tmp_path: Path) -> None:
    """A deployment that needs ~100 GiB a GPU: the smallest catalog GPU above the RTX PRO 6000 by memory is the DGX
    Spark's GB10 (119.70 GiB of LPDDR5X shared with the CPU), which is no server to move a deployment to."""
    from kvplan.hardware import find_gpu, load_catalog

    gb10 = find_gpu("GB10", load_catalog(None))
    assert gb10.unified_memory and not find_gpu("H200", load_catalog(None)).unified_memory
    dep = _check(tmp_path, "vllm serve meta-llama/Llama-3.1-70B --quantization fp8 --max-model-len 100000",
                 "RTX-PRO-6000-Server")
    larger = [f["value"] for f in dep["fixes"] if f["setting"] == "gpu"]
    assert dep["status"] == "fail" and larger and "GB10" not in larger
    assert find_gpu(larger[0], load_catalog(None)).memory_bytes > gb10.memory_bytes
