"""kvplan verify: the tensors planned from the CacheLayout hold exactly what estimate predicts.

The planner (kvplan.verify.shapes) needs no torch; everything that allocates is skipped with a reason
when torch is missing (CI installs torch==2.13.0, so it runs there, on the CPU).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from kvplan.sources.resolve import load_model
from kvplan.verify.errors import VerifyError
from kvplan.monotone import largest
from kvplan.verify.shapes import plan_cache, resolve_layout
from conftest import REPO, estimate_kv

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed: pip install 'kvplan[verify]'")


# ------------------------------------------------------------------------------ planner (no torch)

def test_vllm_shapes_follow_the_engine_layout():
    spec = load_model("deepseek-ai/DeepSeek-V2-Lite")
    plan = plan_cache(spec, resolve_layout(spec, "vllm", None, "auto", None), 2, 100)
    assert plan.block_size == 64 and plan.num_blocks == 2 * 2 and len(plan.buffers) == 27
    (view,) = plan.buffers[0].views
    assert view.role == "latent" and view.shape == (4, 64, 576) and view.dtype == "bfloat16"
    ds = plan_cache(spec, resolve_layout(spec, "vllm", None, "fp8_ds_mla", None), 1, 64)
    assert ds.buffers[0].views[0].shape == (1, 64, 656) and ds.buffers[0].views[0].dtype == "uint8"

    llama = load_model("meta-llama/Llama-3.1-8B")
    p = plan_cache(llama, resolve_layout(llama, "vllm", None, "fp8_per_token_head", None), 3, 20)
    roles = {v.role: v for v in p.buffers[0].views}
    assert roles["K"].dtype == "float8_e4m3fn" and roles["K"].shape == (6, 16, 8, 128)
    assert roles["K scale"].dtype == "float32" and roles["K scale"].shape == (6, 16, 8)

    mistral = load_model("mistralai/Mistral-7B-v0.1")  # sliding 4096: only the window's blocks
    p = plan_cache(mistral, resolve_layout(mistral, "vllm", None, "auto", None), 1, 10_000)
    # async scheduling (0.33's default): 10,000 - 2 tokens computed while the last is written
    assert p.num_blocks == (-(-10_000 // 16)) - (10_000 - 2 - 4096 + 1) // 16


def test_hf_shapes_follow_transformers():
    spec = load_model("deepseek-ai/DeepSeek-V2-Lite")
    latent = plan_cache(spec, resolve_layout(spec, "hf", None, "auto", None), 2, 10)
    assert [b.shape for b in latent.buffers[:2]] == [(2, 1, 10, 512), (2, 1, 10, 64)]
    expanded = plan_cache(spec, resolve_layout(spec, "hf", "4.57", "auto", None), 2, 10)
    assert [b.shape for b in expanded.buffers[:2]] == [(2, 16, 10, 192), (2, 16, 10, 128)]
    mamba = load_model("state-spaces/mamba-2.8b-hf")
    p = plan_cache(mamba, resolve_layout(mamba, "hf", None, "auto", None), 1, 10)
    assert p.buffers[1].dtype == "float32"  # SSM state in fp32 (5.x)
    gemma = load_model("google/gemma-3-12b-it")
    p = plan_cache(gemma, resolve_layout(gemma, "hf", None, "auto", None), 1, 5000)
    assert p.buffers[0].shape[2] == 1023  # sliding layer: window - 1


def test_other_engines_are_refused_clearly():
    spec = load_model("gpt2")
    for engine in ("llamacpp",):
        with pytest.raises(VerifyError, match="no tensor layout"):
            resolve_layout(spec, engine, None, "auto", None)


@pytest.mark.parametrize("answer,guess", [(0, 5), (1, 1), (7, 7), (7, 1), (7, 100), (1000, 3), (5, 6)])
def test_gallop_and_bisect(answer, guess):
    calls = []

    def ok(n):
        calls.append(n)
        return n <= answer

    assert largest(ok, guess) == answer
    if guess == answer:
        assert len(calls) == 2


def test_allocator_model():
    from kvplan.verify.allocate import rounded, segment_bytes

    assert rounded(1) == 512 and rounded(512) == 512 and rounded(513) == 1024
    assert segment_bytes([1000, 1000]) == 2 << 20
    assert segment_bytes([3 << 20]) == 20 << 20
    assert segment_bytes([(10 << 20) + 1]) == 12 << 20


def test_importing_the_cli_and_verify_planner_never_imports_torch():
    code = ("import sys, kvplan.cli.app, kvplan.verify, kvplan.verify.shapes, kvplan.cli.verify; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ------------------------------------------------------------------------------ allocation (torch, CPU)

CASES = [
    ("openai-community/gpt2", "vllm", "auto", None, 2, 1024),
    ("meta-llama/Llama-3.1-8B", "vllm", "fp8", None, 2, 100),
    ("meta-llama/Llama-3.1-8B", "vllm", "fp8_e5m2", None, 1, 33),
    ("Qwen/Qwen3-8B", "vllm", "fp8_per_token_head", None, 2, 50),
    ("Qwen/Qwen3-8B", "vllm", "int8_per_token_head", None, 1, 17),
    ("Qwen/Qwen3-8B", "vllm", "int4_per_token_head", None, 1, 17),
    ("Qwen/Qwen3-8B", "vllm", "nvfp4", None, 1, 17),
    ("Qwen/Qwen3-8B", "hf", "bf16", None, 3, 77),
    ("deepseek-ai/DeepSeek-V2-Lite", "vllm", "auto", None, 2, 100),
    ("deepseek-ai/DeepSeek-V2-Lite", "vllm", "fp8", None, 1, 100),
    ("deepseek-ai/DeepSeek-V2-Lite", "vllm", "fp8_ds_mla", None, 1, 100),
    ("deepseek-ai/DeepSeek-V2-Lite", "hf", "bf16", None, 2, 100),
    ("deepseek-ai/DeepSeek-V2-Lite", "hf", "bf16", "4.57", 1, 40),
    ("mistralai/Mistral-7B-v0.1", "vllm", "auto", None, 1, 4200),
    ("mistralai/Mistral-7B-v0.1", "hf", "auto", None, 1, 4200),
    ("google/gemma-3-12b-it", "vllm", "auto", None, 1, 1100),
    ("google/gemma-3-12b-it", "hf-static", "auto", None, 1, 1100),
    ("openai/gpt-oss-20b", "vllm", "fp8", None, 2, 300),
    ("tiiuae/falcon-7b-instruct", "vllm", "auto", None, 2, 500),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "vllm", "auto", None, 1, 100),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "hf", "auto", None, 1, 100),
    ("state-spaces/mamba-2.8b-hf", "hf", "auto", None, 2, 10),
    ("ai21labs/AI21-Jamba-1.5-Mini", "vllm", "auto", None, 1, 64),
]


@needs_torch
@pytest.mark.parametrize("model,engine,dtype,version,batch,context", CASES)
def test_measured_storage_equals_the_estimate_on_cpu(model, engine, dtype, version, batch, context):
    from kvplan.verify import verify
    from kvplan.verify.allocate import live_tensors

    r = verify(model, batch=batch, context=context, engine=engine, engine_version=version, kv_dtype=dtype,
               device="cpu")
    expected = estimate_kv(model, batch, context, engine=engine, engine_version=version, kv_dtypes=[dtype])
    assert r.predicted_bytes == expected
    assert r.measured_storage_bytes == expected and r.allocated_bytes == expected
    assert r.exact and r.error_bytes == 0 and r.error_pct == 0.0
    assert all(c.error_bytes == 0 for c in r.components)
    assert r.released and live_tensors() == 0


@needs_torch
def test_views_have_the_engine_dtypes():
    import torch

    from kvplan.verify.allocate import allocate, live_tensors

    spec = load_model("Qwen/Qwen3-8B")
    plan = plan_cache(spec, resolve_layout(spec, "vllm", None, "fp8_per_token_head", None), 2, 20)
    alloc = allocate(plan, torch.device("cpu"))
    try:
        assert alloc.views[(0, "K")].dtype == torch.float8_e4m3fn
        assert alloc.views[(0, "K scale")].dtype == torch.float32
        assert alloc.views[(0, "K scale")].shape == (4, 16, 8)
        assert alloc.buffers[0].dtype == torch.int8
        assert alloc.views[(0, "K")].untyped_storage().data_ptr() == alloc.buffers[0].untyped_storage().data_ptr()
    finally:
        alloc.release()
    del alloc
    nxt = load_model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    plan = plan_cache(nxt, resolve_layout(nxt, "vllm", None, "auto", None), 2, 20)
    alloc = allocate(plan, torch.device("cpu"))
    try:
        assert alloc.views[(0, "conv")].shape == (2, 3, 8192)
        assert alloc.views[(0, "conv")].dtype == torch.bfloat16
        assert alloc.views[(0, "page padding")].shape[0] == 2
    finally:
        alloc.release()
    del alloc
    assert live_tensors() == 0


@needs_torch
def test_vllm_pool_padding_is_predicted_and_measured():
    from kvplan.verify import verify

    r = verify("google/gemma-3-27b-it", batch=1, context=2048, device="cpu")
    padding = [c for c in r.components if c.name == "pool padding"]
    # 52 sliding layers in 6 groups of 10 slots: 8 unused slots, each a sliding layer's 65 blocks of
    # 16 tokens x 8,192 B (16 kv heads x (128 + 128) x 2 B) -- allocated by vLLM, never read. 65: at
    # position 2048 under async scheduling 2046 tokens are computed, 1023 skipped -> blocks 63..127.
    assert r.exact and padding and padding[0].layers == 8
    assert padding[0].predicted_bytes == padding[0].measured_bytes == 8 * 65 * 16 * 8192
    assert r.predicted_bytes == r.measured_storage_bytes == (60 * 65 * 16 + 10 * 2048) * 8192 == 678_952_960
    assert all(c.error_bytes == 0 for c in r.components)


@needs_torch
def test_find_max_batch_on_cpu_matches_max_batch():
    from kvplan.verify import verify

    budget = 2 << 30
    r = verify("Qwen/Qwen3-8B", context=1024, find_max_batch=True, memory_budget=budget, device="cpu")
    per_seq = estimate_kv("Qwen/Qwen3-8B", 1, 1024)
    assert r.max_batch is not None
    assert r.max_batch.measured == budget // per_seq == r.max_batch.predicted == r.max_batch.from_estimate
    assert r.batch == r.max_batch.measured and r.exact and len(r.max_batch.probes) == 2
    hf = verify("meta-llama/Llama-3.2-1B-Instruct", engine="hf", context=1000, find_max_batch=True,
                memory_budget=budget, device="cpu")
    assert hf.max_batch.measured == hf.max_batch.predicted == budget // estimate_kv(
        "meta-llama/Llama-3.2-1B-Instruct", 1, 1000, engine="hf")
    with pytest.raises(VerifyError, match="memory_budget"):
        verify("Qwen/Qwen3-8B", context=1024, find_max_batch=True, device="cpu")


@pytest.mark.slow
@needs_torch
@pytest.mark.parametrize("model,engine,dtype,version", [
    ("openai-community/gpt2", "vllm", "auto", None),
    ("Qwen/Qwen3-8B", "hf", "auto", None),
    ("deepseek-ai/DeepSeek-V2-Lite", "vllm", "auto", None),
    ("deepseek-ai/DeepSeek-V2-Lite", "hf", "auto", None),
    ("deepseek-ai/DeepSeek-V2-Lite", "hf", "auto", "4.57"),
    ("tiiuae/falcon-7b-instruct", "vllm", "int8_per_token_head", None),
    ("google/gemma-3-12b-it", "vllm", "fp8", None),
])
def test_decode_step_runs_on_cpu(model, engine, dtype, version):
    from kvplan.verify import verify
    from kvplan.verify.allocate import live_tensors

    r = verify(model, batch=2, context=70, engine=engine, engine_version=version, kv_dtype=dtype, device="cpu",
               decode=True, repeats=2, gpu="H100")
    assert r.decode is not None and r.decode.seconds > 0 and r.decode.read_bytes > 0
    assert r.decode.bound_seconds == pytest.approx(r.decode.read_bytes / 3.35e12, rel=0.05)
    assert r.decode.peak_workspace_bytes is None  # CUDA only
    assert live_tensors() == 0


@needs_torch
def test_decode_refuses_packed_dtypes():
    from kvplan.verify import verify
    from kvplan.verify.allocate import live_tensors

    with pytest.raises(VerifyError, match="nvfp4"):
        verify("Qwen/Qwen3-8B", batch=1, context=32, kv_dtype="nvfp4", device="cpu", decode=True)
    assert live_tensors() == 0


@needs_torch
def test_refuses_what_cannot_fit_and_frees_after_oom(monkeypatch):
    import torch

    from kvplan.verify import allocate as al
    from kvplan.verify import verify

    with pytest.raises(VerifyError, match="lower --batch"):
        verify("Qwen/Qwen3-8B", batch=100_000, context=131072, device="cpu")
    calls = {"n": 0}
    real = al._empty

    def flaky(torch_mod, spec, device):
        calls["n"] += 1
        if calls["n"] > 5:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(torch_mod, spec, device)

    monkeypatch.setattr(al, "_empty", flaky)
    with pytest.raises(VerifyError, match="out of memory.*everything freed"):
        verify("Qwen/Qwen3-8B", batch=1, context=64, device="cpu")
    assert al.live_tensors() == 0


@needs_torch
def test_no_cuda_gives_one_line(monkeypatch):
    import torch

    from kvplan.verify import verify

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(VerifyError, match="--device cpu"):
        verify("gpt2", batch=1, context=16)
    with pytest.raises(VerifyError, match="cuda:N or cpu"):
        verify("gpt2", batch=1, context=16, device="mps")


def test_no_torch_gives_one_line(monkeypatch):
    from kvplan.verify import verify

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(VerifyError, match=r"pip install 'kvplan\[verify\]'"):
        verify("gpt2", batch=1, context=16, device="cpu")


# ------------------------------------------------------------------------------ command line

def _run_cli(args: list[str]) -> tuple[int, str, str]:
    import typer
    from typer.testing import CliRunner

    from kvplan.cli import verify
    from kvplan.cli.options import typer_command

    verify_command = typer_command(verify, "verify")

    app = typer.Typer()
    app.command("verify")(verify_command)
    app.command("other")(lambda: None)
    result = CliRunner().invoke(app, ["verify", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, getattr(result, "stderr", "")


@needs_torch
def test_cli_json_is_stable():
    code, out, _ = _run_cli(["gpt2", "--device", "cpu", "--batch", "2", "--context", "1k", "-f", "json"])
    assert code == 0
    data = json.loads(out)
    for key in ("kvplan_version", "device", "engine", "batch", "context", "kv_dtype", "predicted_bytes",
                "measured", "error_bytes", "error_pct"):
        assert key in data
    assert set(data["device"]) >= {"name", "total_bytes"}
    assert set(data["measured"]) >= {"allocated_bytes", "reserved_bytes", "driver_bytes"}
    assert data["predicted_bytes"] == data["measured"]["allocated_bytes"] == estimate_kv("gpt2", 2, 1024)
    assert "max_batch" not in data and "decode" not in data
    code, out, _ = _run_cli(["Qwen/Qwen3-8B", "--device", "cpu", "--find-max-batch", "--memory-budget", "300MiB",
                             "-c", "1k", "--decode", "--repeats", "1", "-f", "json"])
    data = json.loads(out)
    assert code == 0 and set(data["max_batch"]) >= {"predicted", "measured"}
    assert set(data["decode"]) >= {"seconds", "bound_seconds", "peak_workspace_bytes"}


@needs_torch
def test_cli_table_and_exit_status():
    code, out, _ = _run_cli(["deepseek-ai/DeepSeek-V2-Lite", "--device", "cpu", "-b", "2", "-c", "1k",
                             "--engine", "hf", "--kv-dtype", "bf16"])
    assert code == 0 and "mla" in out and "exact" in out
    code, out, _ = _run_cli(["google/gemma-3-27b-it", "--device", "cpu", "-b", "1", "-c", "2k"])
    assert code == 0 and "pool padding" in out


@needs_torch
@pytest.mark.skipif(not HAS_TORCH or not __import__("torch").cuda.is_available(), reason="no CUDA device")
def test_cuda_allocated_matches_and_returns_to_start():
    import torch

    from kvplan.verify import verify

    start = torch.cuda.memory_allocated(0)
    r = verify("meta-llama/Llama-3.1-8B", batch=4, context=4096, device="cuda:0", decode=True, repeats=2)
    assert r.exact and r.allocated_bytes == r.allocator_bytes
    assert r.reserved_bytes is not None and r.reserved_bytes >= r.allocated_bytes
    assert torch.cuda.memory_allocated(0) == start and r.released


@pytest.mark.slow
@needs_torch
def test_verify_matrix_script_writes_every_point(tmp_path):
    # benchmarks/verify_matrix.py is what a GPU session runs; its CPU quick pass must work end to end
    import importlib.util as iu
    import json as _json

    spec = iu.spec_from_file_location("verify_matrix", os.path.join(REPO, "benchmarks", "verify_matrix.py"))
    module = iu.module_from_spec(spec)
    spec.loader.exec_module(module)
    out, js = tmp_path / "m.md", tmp_path / "m.json"
    ranks = importlib.util.find_spec("numpy") is not None  # torch's object collectives need it
    code = module.main(["--device", "cpu", "--quick", "--models", "openai-community/gpt2",
                        *(["--ranks"] if ranks else []),
                        "--memory-budget", str(256 << 20), "--out", str(out), "--json", str(js)])
    report = _json.loads(js.read_text())
    assert code == 0 and len(report["runs"]) == 6 and len(report["find_max_batch"]) == 2
    # --ranks: tp 2 and pp 2, two processes each, every rank exact
    assert [(e["tp"], e["pp"]) for e in report["ranks"]] == ([(2, 1), (1, 2)] if ranks else [])
    assert all(e["result"]["exact"] and len(e["result"]["ranks"]) == 2 for e in report["ranks"])
    assert ("--tp 2 --pp 1 --launch 2" in out.read_text()) == ranks
    assert all(r["result"]["exact"] for r in report["runs"])
    text = out.read_text()
    assert "kvplan verify openai-community/gpt2 --device cpu --engine vllm --kv-dtype fp8 --batch 2" in text
    for entry in report["find_max_batch"]:
        mb = entry["result"]["max_batch"]
        assert mb["measured"] == mb["predicted"] == mb["from_estimate"] > 0
