"""verify --engine trtllm: TensorRT-LLM's KV-cache pools allocated with torch hold what estimate predicts.

Shapes from NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``
(``WindowBlockManager::allocatePools``: per window size and KV head count one pool
``[blocks, layers, kv_factor, tokens_per_block x heads x size_per_head]``; kv_factor 1 for the MLA
latent) and ``_torch/pyexecutor/mamba_cache_manager.py`` (conv and SSM state, all layers in one
tensor each). The planner needs no torch; allocations run on the CPU.
"""

from __future__ import annotations

import importlib.util
import os
from functools import partial

import pytest

from kvplan.engines.sharing import Workload
from kvplan.sources.resolve import load_model
from kvplan.verify.errors import VerifyError
from kvplan.verify.shapes import plan_cache, resolve_layout
from conftest import REPO, estimate_kv

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed: pip install 'kvplan[verify]'")

LLAMA = "meta-llama/Llama-3.1-8B"     # 32 layers, 8 KV heads of 128
MLA = "deepseek-ai/DeepSeek-V2-Lite"  # 27 MLA layers, latent 512 + rope 64
GPT_OSS = "openai/gpt-oss-20b"        # 12 sliding (128) + 12 full: two window block managers
JAMBA = "ai21labs/AI21-Jamba-1.5-Mini"  # Mamba state + 4 full layers


_estimate = partial(estimate_kv, engine="trtllm")  # every estimate in this file is trtllm's


def _plan(model, batch, context, kv_dtype="auto", block_size=None, workload=None):
    spec = load_model(model)
    return plan_cache(spec, resolve_layout(spec, "trtllm", None, kv_dtype, block_size), batch, context, workload)


def test_golden_llama_pool_is_blocks_layers_kv_factor():
    # 2 sequences x ceil(1000 / 32) = 32 blocks; a block of one layer's K: 32 tokens x 8 heads x 128
    p = _plan(LLAMA, 2, 1000)
    (buf,) = p.buffers
    assert buf.dtype == "bfloat16" and buf.shape == (64, 32, 2, 32 * 8 * 128)
    assert p.buffer_bytes == 64 * 32 * 2 * 32 * 8 * 128 * 2 == _estimate(LLAMA, 2, 1000)
    v = next(v for v in buf.views if v.layer == 1 and v.role == "V")  # layer 1's V: the 4th plane of a block
    assert v.shape == (64, 8, 32, 128) and v.offset == 3 * 32 * 8 * 128 * 2 and v.pitch == 32 * 2 * 32 * 8 * 128 * 2


def test_mla_pool_has_one_latent_per_layer():
    p = _plan(MLA, 1, 64, kv_dtype="fp8")
    (buf,) = p.buffers
    assert buf.dtype == "float8_e4m3fn" and buf.shape == (2, 27, 1, 32 * 576)
    assert p.buffer_bytes == 27 * 576 * 64 == _estimate(MLA, 1, 64, kv_dtypes=["fp8"])


def test_each_window_has_its_own_pool_and_block_ids():
    p = _plan(GPT_OSS, 2, 1000)
    full, window = p.block_tables
    assert (full.per_sequence, window.per_sequence) == (32, 4) and window.first_block == full.blocks
    assert [b.shape[:2] for b in p.buffers] == [(64, 12), (8, 12)]
    assert p.buffer_bytes == _estimate(GPT_OSS, 2, 1000)


def test_reused_prefix_and_beams_are_blocks_referenced_once():
    w = Workload(1000, 100, 0, 1, 3, None)  # beams share the prompt's blocks but the last
    (t,) = _plan(LLAMA, 2, w.context, workload=w).block_tables
    assert (t.once, t.per_request, t.per_sequence) == (0, 31, 35 - 31)
    w = Workload(3072, 1024, 2048, 1, 1, None)
    (t,) = _plan(LLAMA, 4, w.context, workload=w).block_tables
    assert (t.once, t.per_sequence) == (64, 64)
    assert _plan(LLAMA, 4, w.context, workload=w).buffer_bytes == _estimate(
        LLAMA, 4, prompt_len=3072, output_len=1024, shared_prefix=2048)


def test_nvfp4_is_refused_by_field():
    with pytest.raises(VerifyError, match="nvfp4") as e:
        _plan(LLAMA, 1, 10, kv_dtype="nvfp4")
    assert e.value.field == "kv_dtype"


CASES = [
    (LLAMA, dict(batch=2, context=1024)),
    (LLAMA, dict(batch=2, context=1000, kv_dtype="int8")),
    (MLA, dict(batch=2, context=1024, kv_dtype="fp8")),
    (GPT_OSS, dict(batch=2, context=1024)),
    (JAMBA, dict(batch=2, context=300)),
    (LLAMA, dict(batch=4, prompt_len=3072, output_len=1024, shared_prefix=2048)),
    (LLAMA, dict(batch=2, prompt_len=1000, output_len=100, beam_width=3)),
    (GPT_OSS, dict(batch=2, prompt_len=1000, output_len=100, shared_prefix=512)),
    (os.path.join(REPO, "tests", "data", "mla_mtp_fixture.yaml"),  # V2-Lite's cache + 1 MTP layer (a fixture)
     dict(batch=2, context=1024, speculative_method="mtp")),
]


@needs_torch
@pytest.mark.parametrize("model,kw", CASES)
def test_measured_storage_equals_the_estimate_on_cpu(model, kw):
    from kvplan.verify import verify
    from kvplan.verify.allocate import live_tensors

    r = verify(model, engine="trtllm", device="cpu", **kw)
    est = {k: v for k, v in kw.items() if k not in ("batch", "context", "kv_dtype")}
    if "kv_dtype" in kw:
        est["kv_dtypes"] = [kw["kv_dtype"]]
    assert r.predicted_bytes == r.measured_storage_bytes == _estimate(model, kw["batch"], kw.get("context"), **est)
    assert r.exact and r.released and live_tensors() == 0
    if r.sharing is not None:
        assert r.sharing.referenced_bytes == r.predicted_bytes


@needs_torch
def test_decode_is_refused_before_allocating():
    from kvplan.verify import verify
    from kvplan.verify.allocate import live_tensors

    with pytest.raises(VerifyError) as e:
        verify(LLAMA, batch=1, context=64, engine="trtllm", device="cpu", decode=True)
    assert e.value.field == "decode" and live_tensors() == 0
