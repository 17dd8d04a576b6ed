"""verify --engine sglang: SGLang's token-slot pools allocated with torch hold what estimate predicts.

Shapes from sglang 0.5.23 ``python/sglang/srt/mem_cache/memory_pool.py`` (MHATokenToKVPool
``_create_buffers_normal``: per layer one ``[2, slots, heads, head_dim]`` allocation when K and V
agree; MLATokenToKVPool: ``[slots, 1, kv_lora_rank + qk_rope_head_dim]``; fp8 stored as uint8;
SWAKVPool: a full and a window pool; MambaPool: conv in bf16, state in float32). The planner needs
no torch; allocations run on the CPU (torch.empty touches no page).
"""

from __future__ import annotations

import importlib.util
import os
from functools import partial

import pytest
from hypothesis import given, settings, strategies as st

from kvplan.engines.sharing import Workload
from kvplan.sources.resolve import load_model
from kvplan.verify.errors import VerifyError
from kvplan.verify.shapes import plan_cache, resolve_layout
from conftest import REPO, estimate_kv

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed: pip install 'kvplan[verify]'")

LLAMA = "meta-llama/Llama-3.1-8B"     # full attention: 32 layers, 8 KV heads of 128 (GQA)
GPT2 = "gpt2"                         # full attention, MHA: 12 layers, 12 heads of 64
MLA = "deepseek-ai/DeepSeek-V2-Lite"  # 27 MLA layers, latent 512 + rope 64
GPT_OSS = "openai/gpt-oss-20b"        # 12 sliding (128) + 12 full: SGLang's hybrid SWA pool
GEMMA = "google/gemma-3-1b-it"        # sliding layers served without the SWA pool (whole sequence)
JAMBA = "ai21labs/AI21-Jamba-1.5-Mini"  # Mamba state + 4 full layers
MLA_MTP = os.path.join(REPO, "tests", "data", "mla_mtp_fixture.yaml")  # V2-Lite's cache + 1 MTP layer (a fixture)


_estimate = partial(estimate_kv, engine="sglang")  # every estimate in this file is sglang's


def _plan(model, batch, context, kv_dtype="auto", block_size=None, workload=None):
    spec = load_model(model)
    return plan_cache(spec, resolve_layout(spec, "sglang", None, kv_dtype, block_size), batch, context, workload)


# ------------------------------------------------------------------------------ planner (no torch)

def test_golden_llama_pool_is_one_kv_allocation_per_layer():
    # 32 layers x 2 (K, V) x 8 heads x 128 x 2 B = 131,072 B a token; 2 x 1,024 tokens = 256 MiB
    p = _plan(LLAMA, 2, 1024)
    assert p.predicted_bytes == p.buffer_bytes == 268_435_456 == _estimate(LLAMA, 2, 1024)
    assert len(p.buffers) == 32
    buf = p.buffers[0]
    assert buf.dtype == "bfloat16" and buf.shape == (2, 2048, 8, 128)
    k, v = buf.views
    assert (k.role, k.shape, k.offset) == ("K", (2048, 1, 8, 128), 0)
    assert (v.role, v.shape, v.offset) == ("V", (2048, 1, 8, 128), 2048 * 8 * 128 * 2)
    (table,) = p.block_tables
    assert table.layers == tuple(range(32)) and table.per_sequence == 1024 and p.num_blocks == 2048
    assert any("slot 0" in n and "131,072 B" in n for n in p.notes)  # 32 layers x one 4 KiB slot, said


def test_fp8_is_stored_as_uint8_and_read_as_fp8():
    p = _plan(LLAMA, 1, 100, kv_dtype="fp8_e5m2")
    buf = p.buffers[0]
    assert buf.dtype == "uint8" and {v.dtype for v in buf.views} == {"float8_e5m2"}
    assert p.buffer_bytes == 32 * 2 * 8 * 128 * 100 == _estimate(LLAMA, 1, 100, kv_dtypes=["fp8_e5m2"])


def test_golden_mla_latent_per_layer_and_pages():
    # DeepSeek-V2-Lite: 27 layers x 576 x 2 B = 31,104 B a token
    p = _plan(MLA, 2, 100, block_size=64)  # pages of 64: 2 sequences x 2 pages
    assert p.buffer_bytes == 27 * 576 * 2 * 256 == _estimate(MLA, 2, 100, block_size=64)
    assert len(p.buffers) == 27 and p.buffers[0].shape == (256, 1, 576)
    (view,) = p.buffers[0].views
    assert view.role == "latent" and view.shape == (4, 64, 576)


def test_swa_pool_keeps_the_window_apart():
    p = _plan(GPT_OSS, 2, 1000)
    assert p.buffer_bytes == _estimate(GPT_OSS, 2, 1000)
    full, window = sorted(p.block_tables, key=lambda t: -t.per_sequence)
    assert full.per_sequence == 1000 and window.per_sequence == 128 and len(full.layers) == len(window.layers) == 12
    assert window.first_block == full.blocks  # its own indices, numbered after the full pool's
    sliding_layer = window.layers[0]
    (buf,) = [b for b in p.buffers if b.views[0].layer == sliding_layer]
    assert buf.shape[1] == 2 * 128


def test_sliding_layers_without_the_swa_pool_hold_the_sequence():
    p = _plan(GEMMA, 1, 2000)
    (table,) = p.block_tables
    assert table.per_sequence == 2000 and p.buffer_bytes == _estimate(GEMMA, 1, 2000)


def test_radix_prefix_is_token_indices_every_request_references():
    # prompt 3,072 of which 2,048 common; n = 2 samples share the prompt up to its last token
    w = Workload(3072, 1024, 2048, 2, 1, None)
    p = _plan(LLAMA, 4, w.context, workload=w)
    (t,) = p.block_tables
    assert (t.once, t.per_request, t.per_sequence) == (2048, 3071 - 2048, 1 + 1024)
    assert t.row(0, 0)[:2048] == t.row(3, 1)[:2048]  # the same slots in every table
    assert p.buffer_bytes == t.blocks * 131_072 == _estimate(LLAMA, 4, prompt_len=3072, output_len=1024,
                                                            shared_prefix=2048, n=2)


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 4), prompt=st.integers(2, 900), output=st.integers(0, 300),
       prefix=st.integers(0, 900), n=st.integers(1, 3), page=st.sampled_from([None, 16, 64]),
       model=st.sampled_from([LLAMA, MLA, GPT_OSS]))
def test_planned_pool_is_the_estimate_with_sharing(batch, prompt, output, prefix, n, page, model):
    w = Workload(prompt, output, min(prefix, prompt), n, 1, None)
    try:
        p = _plan(model, batch, w.context, block_size=page, workload=w)
    except VerifyError as e:  # a window that left part of the prefix: refused by name, never wrong
        assert e.field in ("shared_prefix", "n") and model == GPT_OSS
        return
    assert p.buffer_bytes == _estimate(model, batch, prompt_len=prompt, output_len=output,
                                       shared_prefix=w.shared_prefix, n=n, block_size=page)


def test_nvfp4_is_refused_by_field():
    with pytest.raises(VerifyError, match="nvfp4") as e:
        _plan(LLAMA, 1, 10, kv_dtype="nvfp4")
    assert e.value.field == "kv_dtype"


# ------------------------------------------------------------------------------ allocated on the CPU

CASES = [
    (GPT2, "auto", None, 2, 1000),
    (LLAMA, "auto", None, 2, 1024),
    (LLAMA, "fp8_e4m3", None, 3, 700),
    (MLA, "auto", None, 2, 1024),
    (MLA, "fp8_e4m3", 64, 2, 1000),
    (GPT_OSS, "auto", None, 2, 1024),
    (GEMMA, "auto", 16, 1, 1000),
    (JAMBA, "auto", None, 2, 300),
]


@needs_torch
@pytest.mark.parametrize("model,dtype,page,batch,context", CASES)
def test_measured_storage_equals_the_estimate_on_cpu(model, dtype, page, batch, context):
    from kvplan.verify import verify
    from kvplan.verify.allocate import live_tensors

    r = verify(model, batch=batch, context=context, engine="sglang", kv_dtype=dtype, block_size=page, device="cpu")
    expected = _estimate(model, batch, context, kv_dtypes=[dtype], block_size=page)
    assert r.predicted_bytes == r.measured_storage_bytes == r.allocated_bytes == expected
    assert r.exact and all(c.error_bytes == 0 for c in r.components)
    assert r.released and live_tensors() == 0


@needs_torch
@pytest.mark.parametrize("model,kw", [
    (LLAMA, dict(batch=4, prompt_len=3072, output_len=1024, shared_prefix=2048, n=2)),
    (MLA, dict(batch=3, prompt_len=1000, output_len=200, shared_prefix=700)),
    (GPT_OSS, dict(batch=2, prompt_len=400, output_len=112, shared_prefix=256)),
    (JAMBA, dict(batch=2, prompt_len=900, output_len=100, shared_prefix=512, n=2)),
    (MLA_MTP, dict(batch=2, context=1024, speculative_method="mtp")),
    (LLAMA, dict(batch=2, context=512, speculative_method="eagle", num_speculative_tokens=3,
                 speculative_model=LLAMA)),
])
def test_shared_and_speculative_pools_are_exact(model, kw):
    from kvplan.verify import verify

    r = verify(model, engine="sglang", device="cpu", **kw)
    assert r.exact and r.released and r.sharing is not None
    assert r.measured_storage_bytes == r.predicted_bytes == r.sharing.referenced_bytes
    est = {k: v for k, v in kw.items() if k not in ("batch", "context")}
    if "context" in kw:
        est["contexts"] = [kw["context"]]
    assert r.predicted_bytes == _estimate(model, kw["batch"], **est)
    for t in r.sharing.block_tables:
        assert t.referenced_blocks == t.blocks


@needs_torch
def test_speculative_draft_layers_get_their_own_buffers_and_slots():
    from kvplan.verify import verify

    # MTP: one more MLA layer (the draft worker's pool) of the same token count; 4 slots a request
    r = verify(MLA_MTP, batch=2, context=1024, engine="sglang", device="cpu", speculative_method="mtp")
    assert r.sharing.extra_slots == 4
    assert r.predicted_bytes == 28 * 576 * 2 * 2 * (1024 + 4)


@pytest.mark.slow
@needs_torch
@pytest.mark.parametrize("model,dtype", [(LLAMA, "auto"), (MLA, "auto"), (GPT_OSS, "fp8_e4m3")])
def test_decode_step_reads_the_pool(model, dtype):
    from kvplan.verify import verify
    from kvplan.verify.allocate import live_tensors

    r = verify(model, batch=2, context=70, engine="sglang", kv_dtype=dtype, device="cpu", decode=True, repeats=2,
               gpu="H100")
    assert r.exact and r.decode is not None and r.decode.read_bytes > 0
    assert live_tensors() == 0


@pytest.mark.slow
@needs_torch
def test_decode_with_a_shared_prefix_pages_by_the_sglang_page():
    from kvplan.verify import verify

    r = verify(GPT_OSS, batch=2, engine="sglang", device="cpu", decode=True, repeats=1, prompt_len=100,
               output_len=20, shared_prefix=64)
    assert r.exact and r.decode.steps and all(s.exact for s in r.decode.steps)
