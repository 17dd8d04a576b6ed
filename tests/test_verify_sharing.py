"""verify allocates the shared-prefix, parallel-sampling, beam and speculative layouts (docs/sharing.md).

vLLM: the pool holds each group's shared blocks once and every sequence's block table references
them; transformers: n samples or beams are batch x samples rows. The planner needs no torch; the
allocations run on the CPU (torch.empty touches no page, so large pools cost nothing).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from kvplan.engines.sharing import Workload
from kvplan.errors import KvplanError, UsageError
from kvplan.sources.resolve import load_model
from kvplan.verify.errors import VerifyError
from kvplan.verify.shapes import plan_cache, resolve_layout

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed: pip install 'kvplan[verify]'")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LLAMA = "meta-llama/Llama-3.1-8B"           # full attention, 32 layers, 8 KV heads of 128
GPT_OSS = "openai/gpt-oss-20b"              # sliding 128 + full, vLLM hybrid groups
GEMMA = "google/gemma-3-1b-it"              # sliding 512 + full, padded hybrid groups
MLA = "deepseek-ai/DeepSeek-V2-Lite"        # MLA latents, FlashMLA blocks of 64
MAMBA = "Qwen/Qwen3-Next-80B-A3B-Thinking"  # linear attention (state) + full
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"


def _estimate(model, batch, **kw):
    from kvplan.estimate import estimate

    return estimate(model, batches=[batch], **kw).rows[0]


def _plan(model, engine, batch, workload):
    spec = load_model(model)
    return plan_cache(spec, resolve_layout(spec, engine, None, "auto", None), batch, workload.context, workload)


# (batch, prompt, output, shared prefix, n, beams): prefixes that are not whole blocks, batch > 1
WORKLOADS = [
    (3, 1000, 200, 700, 1, 1),
    (4, 1000, 0, 0, 3, 1),
    (2, 999, 50, 0, 1, 3),
    (5, 4000, 1000, 3000, 2, 1),
    (3, 1000, 200, 1000, 1, 1),
    (2, 1000, 200, 333, 1, 2),
]


@pytest.mark.parametrize("engine", ["vllm", "hf"])
@pytest.mark.parametrize("model", [LLAMA, GPT_OSS, MLA, MAMBA])
@pytest.mark.parametrize("case", WORKLOADS)
def test_planned_pool_holds_the_estimate_with_sharing(engine, model, case):
    batch, prompt, output, prefix, n, beams = case
    plan = _plan(model, engine, batch, Workload(prompt, output, prefix, n, beams))
    row = _estimate(model, batch, engine=engine, prompt_len=prompt, output_len=output, shared_prefix=prefix,
                    n=n, beam_width=beams)
    assert plan.predicted_bytes == plan.buffer_bytes == row.kv_bytes
    if engine == "hf":  # transformers shares nothing: batch x samples full rows
        assert row.kv_bytes == row.sharing.kv_bytes_plain and not plan.block_tables
    else:
        assert sum(t.blocks for t in plan.block_tables) == plan.num_blocks
        if prefix or n > 1 or beams > 1:
            assert row.kv_bytes < row.sharing.kv_bytes_plain


def test_golden_common_prefix_blocks_once():
    # issue 12: 64 requests with a 4,096-token common prefix store its 256 blocks of 16 once
    # (KVCacheManager.get_computed_blocks: full blocks; BlockPool.touch: referenced, not copied)
    plan = _plan(LLAMA, "vllm", 64, Workload(6144, 2048, 4096))
    (table,) = plan.block_tables
    assert (table.once, table.per_request, table.per_sequence) == (256, 0, 512 - 256)
    assert plan.num_blocks == 256 + 64 * 256
    assert plan.predicted_bytes == plan.num_blocks * 16 * 131072
    rows = [table.row(r, 0) for r in range(64)]
    assert all(row[:256] == list(range(256)) for row in rows)  # the same block ids in every table
    owned = [set(row[256:]) for row in rows]
    assert len(set().union(*owned)) == 64 * 256  # the rest are each sequence's own


def test_golden_parallel_samples_share_prompt_blocks_less_the_last():
    # n = 4 at 4k prompt + 1k output: children share floor((4096 - 1) / 16) = 255 prompt blocks
    # (ParallelSampling, then prefix caching capped at prompt - 1); the block with the last prompt token
    # and the 64 output blocks are each child's own
    plan = _plan(LLAMA, "vllm", 2, Workload(4096, 1024, 0, n=4))
    (table,) = plan.block_tables
    assert (table.once, table.per_request, table.per_sequence) == (0, 255, 320 - 255)
    assert plan.num_blocks == 2 * 255 + 8 * 65
    assert table.row(0, 0)[:255] == table.row(0, 3)[:255] != table.row(1, 0)[:255]


def test_beams_share_every_full_prompt_block():
    # LLM.beam_search: every beam's request is the prompt + its tokens, so all full prompt blocks hit
    plan = _plan(LLAMA, "vllm", 1, Workload(1000, 100, 0, beam_width=4))
    (table,) = plan.block_tables
    assert table.per_request == 1000 // 16 and table.per_sequence == 69 - 62


def test_mla_prefix_not_a_whole_number_of_blocks():
    # FlashMLA pages of 64: a 700-token prefix shares 10 blocks; the 60 tokens after them are per request
    plan = _plan(MLA, "vllm", 3, Workload(1000, 200, 700))
    (table,) = plan.block_tables
    assert (table.once, table.per_request, table.per_sequence) == (10, 0, 19 - 10)


def test_sliding_groups_share_only_blocks_still_in_the_window():
    # gpt-oss sliding 128: at 5,000 tokens the window has left a 3,000-token prefix; the full layers share it
    plan = _plan(GPT_OSS, "vllm", 5, Workload(4000, 1000, 3000, n=2))
    onces = {t.once for t in plan.block_tables}
    assert onces == {0, 3000 // 16}


def test_sliding_prefix_blocks_in_the_scheduling_gap_stay_shared():
    # gemma-3-1b (sliding 512), 3 requests of 1,000 + 200 with a 700-token common prefix: under async
    # scheduling the prefix block in the one-step gap is still the shared one (WindowBlocks.prefix_held
    # frees as held() does, lag included). Found by verify: estimate had counted it once per request
    # (48,037,888 B); the block tables hold 47,251,456 B.
    plan = _plan(GEMMA, "vllm", 3, Workload(1000, 200, 700))
    assert plan.predicted_bytes == 47_251_456
    from kvplan.estimate import estimate

    row = estimate(GEMMA, batches=3, prompt_len=1000, output_len=200, shared_prefix=700).rows[0]
    assert row.kv_bytes == plan.predicted_bytes


def test_block_tables_without_a_workload_are_per_sequence():
    spec = load_model(LLAMA)
    plan = plan_cache(spec, resolve_layout(spec, "vllm", None, "auto", None), 3, 100)
    (table,) = plan.block_tables
    assert (table.once, table.per_request, table.per_sequence, table.sequences) == (0, 0, 7, 3)


# ------------------------------------------------------------------------------ allocated (torch, CPU)

def _verify(model, **kw):
    from kvplan.verify import verify

    return verify(model, device="cpu", **kw)


@needs_torch
@pytest.mark.parametrize(("model", "kw"), [
    (LLAMA, dict(batch=3, prompt_len=1000, output_len=200, shared_prefix=700)),
    (LLAMA, dict(batch=2, context=1100, prompt_len=1000, n=4)),
    (GPT_OSS, dict(batch=4, prompt_len=900, output_len=300, shared_prefix=850)),
    (GPT_OSS, dict(batch=2, prompt_len=999, output_len=50, beam_width=3)),
    (GEMMA, dict(batch=3, context=2000, prompt_len=1000, n=3)),
    (MLA, dict(batch=3, prompt_len=1000, output_len=200, shared_prefix=700)),
    (MLA, dict(batch=2, prompt_len=500, output_len=100, beam_width=2)),
    (MAMBA, dict(batch=2, prompt_len=600, output_len=100, shared_prefix=300, n=2)),
])
def test_allocated_pool_is_exact_and_tables_reference_every_block(model, kw):
    r = _verify(model, **kw)
    row = _estimate(model, kw["batch"], **{k: v for k, v in kw.items() if k not in ("batch", "context")},
                    **({"contexts": [kw["context"]]} if "context" in kw else {}))
    assert r.exact and r.released
    assert r.measured_storage_bytes == r.predicted_bytes == row.kv_bytes
    assert r.sharing.referenced_bytes == r.predicted_bytes
    assert r.sharing.kv_bytes_plain == row.sharing.kv_bytes_plain > r.predicted_bytes
    for t in r.sharing.block_tables:
        assert t.referenced_blocks == t.blocks
    assert r.sharing.sequences == kw["batch"] * kw.get("n", 1) * kw.get("beam_width", 1)


@needs_torch
@pytest.mark.parametrize("model", [LLAMA, GPT_OSS, MLA])
def test_transformers_expands_rows(model):
    r = _verify(model, batch=2, context=300, n=3, engine="hf")
    assert r.exact and r.predicted_bytes == _estimate(model, 6, contexts=[300], engine="hf").kv_bytes
    assert r.sharing.referenced_bytes is None and r.sharing.sequences == 6


@needs_torch
@pytest.mark.parametrize(("model", "kw", "extra"), [
    # Scheduler.__init__: lookahead k for draft models, EAGLE and MTP, none for n-gram
    (LLAMA, dict(speculative_method="draft_model", num_speculative_tokens=3, speculative_model=DRAFT), 6),
    (LLAMA, dict(speculative_method="ngram", num_speculative_tokens=5), 5),
    (MLA, dict(speculative_method="mtp", num_speculative_tokens=2), 4),
    (GPT_OSS, dict(speculative_method="eagle", num_speculative_tokens=2, speculative_model=DRAFT), 4),
])
def test_speculative_layers_and_slots_are_allocated(model, kw, extra):
    for sharing in ({}, dict(prompt_len=700, output_len=100, shared_prefix=500)):
        context = None if sharing else 800
        r = _verify(model, batch=2, context=context, **kw, **sharing)
        est = _estimate(model, 2, **({"contexts": [800]} if context else {}), **kw, **sharing)
        assert r.exact and r.predicted_bytes == est.kv_bytes and r.context == 800
        assert r.sharing.extra_slots == extra and r.sharing.speculative_method == kw["speculative_method"]
        spec = load_model(model)
        draft = load_model(DRAFT).num_layers if "speculative_model" in kw else 1 if kw["speculative_method"] == "mtp" else 0
        layers = {layer for t in r.sharing.block_tables for layer in t.layers}
        assert len(layers) >= spec.num_layers + draft  # the draft's layers have their own views in the pool
        assert r.sharing.referenced_bytes == r.predicted_bytes


def test_refusals_name_the_field():
    with pytest.raises(UsageError) as err:
        _verify(LLAMA, batch=1, context=800, speculative_method="ngram", num_speculative_tokens=2, engine="llamacpp")
    assert err.value.field == "speculative_method"
    for flag in ("find_max_batch", "decode"):
        with pytest.raises(KvplanError) as err:
            _verify(LLAMA, batch=1, context=800, n=2, memory_budget=2**30, **{flag: True})
        assert err.value.field == flag
    with pytest.raises(UsageError) as err:
        _verify(LLAMA, batch=1, prompt_len=800, shared_prefix=900)
    assert err.value.field == "shared_prefix"
    with pytest.raises(UsageError) as err:
        _verify(LLAMA, batch=1, context=800, prompt_len=600, output_len=100)
    assert err.value.field == "contexts"


@needs_torch
def test_cli_parses_like_estimate_and_reports_the_plain_figure():
    cmd = [sys.executable, "-m", "kvplan", "verify", LLAMA, "--device", "cpu", "-b", "4", "--prompt-len", "3k",
           "--output-len", "1k", "--shared-prefix", "2k", "--n", "2", "-f", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    sh = data["sharing"]
    assert data["context"] == 4096 and data["exact"]
    assert sh["prompt_len"] == 3072 and sh["shared_prefix"] == 2048 and sh["n"] == 2 and sh["sequences"] == 8
    assert sh["referenced_bytes"] == data["predicted_bytes"] < sh["kv_bytes_plain"]
    assert sh["block_tables"][0]["once"] == 128
    bad = subprocess.run([sys.executable, "-m", "kvplan", "verify", GEMMA, "--device", "cpu", "--prompt-len", "1000",
                          "--output-len", "200", "--shared-prefix", "2000"], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--shared-prefix" in bad.stderr


@pytest.mark.parametrize(("args", "flag"), [
    (["-c", "800", "--prompt-len", "600", "--output-len", "100"], "--context"),
    (["-c", "800", "--n", "2", "--tp", "2", "--launch", "2"], "--n"),
    (["-c", "800", "--n", "2", "--decode"], "--decode"),
])
def test_cli_refusals_are_one_line_naming_the_flag(args, flag):
    out = subprocess.run([sys.executable, "-m", "kvplan", "verify", LLAMA, "--device", "cpu", *args],
                         capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and out.stderr.startswith(f"kvplan: error: {flag}")


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from([LLAMA, MLA, GPT_OSS, MAMBA]), batch=st.integers(1, 9), prompt=st.integers(1, 3000),
       output=st.integers(0, 3000), prefix_share=st.floats(0, 1), samples=st.integers(1, 4),
       beams=st.booleans())
def test_any_workload_is_laid_out_exactly_or_refused_by_field(model, batch, prompt, output, prefix_share, samples,
                                                              beams):
    prefix = int(prompt * prefix_share)
    workload = Workload(prompt, output, prefix, 1 if beams else samples, samples if beams else 1)
    try:
        plan = _plan(model, "vllm", batch, workload)
    except VerifyError as err:  # only windowed groups can meet the prefix_held gap (docs/verification.md)
        assert model == GPT_OSS and err.field in ("shared_prefix", "n", "beam_width")
        return
    row = _estimate(model, batch, engine="vllm", prompt_len=prompt, output_len=output, shared_prefix=prefix,
                    n=workload.n, beam_width=workload.beam_width)
    assert plan.predicted_bytes == plan.buffer_bytes == row.kv_bytes <= row.sharing.kv_bytes_plain
    assert sum(t.blocks for t in plan.block_tables) == plan.num_blocks
