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
from hypothesis import example, given, settings, strategies as st

from kvplan.engines.sharing import Workload
from kvplan.errors import KvplanError, UsageError
from kvplan.sources.resolve import load_model
from kvplan.verify.errors import VerifyError
from kvplan.verify.shapes import plan_cache, resolve_layout
from conftest import REPO, estimate_row, run_cli

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed: pip install 'kvplan[verify]'")

LLAMA = "meta-llama/Llama-3.1-8B"           # full attention, 32 layers, 8 KV heads of 128
GPT_OSS = "openai/gpt-oss-20b"              # sliding 128 + full, vLLM hybrid groups
GEMMA = "google/gemma-3-1b-it"              # sliding 512 + full, padded hybrid groups
MLA = "deepseek-ai/DeepSeek-V2-Lite"        # MLA latents, FlashMLA blocks of 64
MLA_MTP = os.path.join(REPO, "tests", "data", "mla_mtp_fixture.yaml")  # its cache + 1 MTP layer (V2-Lite has none)
MAMBA = "Qwen/Qwen3-Next-80B-A3B-Thinking"  # linear attention (state) + full
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"
SMALL = DRAFT  # 16 layers, 8 KV heads of 64: 2,048 B a token and layer in bf16, 512 KiB a block of 16


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
    row = estimate_row(model, batch, engine=engine, prompt_len=prompt, output_len=output, shared_prefix=prefix,
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
    row = estimate_row(model, kw["batch"], **{k: v for k, v in kw.items() if k not in ("batch", "context")},
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
    assert r.exact and r.predicted_bytes == estimate_row(model, 6, contexts=[300], engine="hf").kv_bytes
    assert r.sharing.referenced_bytes is None and r.sharing.sequences == 6


@needs_torch
@pytest.mark.parametrize(("model", "kw", "extra"), [
    # Scheduler.__init__: lookahead k for draft models, EAGLE and MTP, none for n-gram
    (LLAMA, dict(speculative_method="draft_model", num_speculative_tokens=3, speculative_model=DRAFT), 6),
    (LLAMA, dict(speculative_method="ngram", num_speculative_tokens=5), 5),
    (MLA_MTP, dict(speculative_method="mtp", num_speculative_tokens=2), 4),
    (GPT_OSS, dict(speculative_method="eagle", num_speculative_tokens=2, speculative_model=DRAFT), 4),
])
def test_speculative_layers_and_slots_are_allocated(model, kw, extra):
    for sharing in ({}, dict(prompt_len=700, output_len=100, shared_prefix=500)):
        context = None if sharing else 800
        r = _verify(model, batch=2, context=context, **kw, **sharing)
        est = estimate_row(model, 2, **({"contexts": [800]} if context else {}), **kw, **sharing)
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
    with pytest.raises(UsageError) as err:
        _verify(LLAMA, batch=1, prompt_len=800, shared_prefix=900)
    assert err.value.field == "shared_prefix"
    with pytest.raises(UsageError) as err:
        _verify(LLAMA, batch=1, context=800, prompt_len=600, output_len=100)
    assert err.value.field == "contexts"


@needs_torch
def test_a_decode_too_long_to_step_is_refused_before_allocating():
    with pytest.raises(KvplanError) as err:  # bounded: refused before anything is allocated
        _verify(SMALL, batch=64, prompt_len=60_000, output_len=4_000, n=8, decode=True)
    assert err.value.field == "decode"


@pytest.mark.slow
@needs_torch
def test_cli_parses_like_estimate_and_reports_the_plain_figure():
    code, out, err = run_cli(["verify", LLAMA, "--device", "cpu", "-b", "4", "--prompt-len", "3k", "--output-len", "1k",
                              "--shared-prefix", "2k", "--n", "2", "-f", "json"], seconds=300)
    assert code == 0, err
    data = json.loads(out)
    sh = data["sharing"]
    assert data["context"] == 4096 and data["exact"]
    assert sh["prompt_len"] == 3072 and sh["shared_prefix"] == 2048 and sh["n"] == 2 and sh["sequences"] == 8
    assert sh["referenced_bytes"] == data["predicted_bytes"] < sh["kv_bytes_plain"]
    assert sh["block_tables"][0]["once"] == 128
    code, _, err = run_cli(["verify", GEMMA, "--device", "cpu", "--prompt-len", "1000", "--output-len", "200",
                            "--shared-prefix", "2000"], seconds=300)
    assert code == 2 and err.count("\n") == 1 and "--shared-prefix" in err


@pytest.mark.parametrize(("args", "flag"), [
    (["-c", "800", "--prompt-len", "600", "--output-len", "100"], "--context"),
    (["-c", "800", "--speculative-method", "ngram", "--num-speculative-tokens", "2", "--pp", "2", "--launch", "2"],
     "--pp"),
    pytest.param(["-b", "64", "--prompt-len", "60k", "--output-len", "4k", "--n", "8", "--decode"], "--decode",
                 marks=[needs_torch, pytest.mark.slow]),  # the bound is checked on the plan, after verify finds torch
])
def test_cli_refusals_are_one_line_naming_the_flag(args, flag):
    code, _, err = run_cli(["verify", LLAMA, "--device", "cpu", *args], seconds=300)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"kvplan: error: {flag}")


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
    row = estimate_row(model, batch, engine="vllm", prompt_len=prompt, output_len=output, shared_prefix=prefix,
                    n=workload.n, beam_width=workload.beam_width)
    assert plan.predicted_bytes == plan.buffer_bytes == row.kv_bytes <= row.sharing.kv_bytes_plain
    assert sum(t.blocks for t in plan.block_tables) == plan.num_blocks


# ------------------------------------------------------------------------------ --find-max-batch with sharing

def _max_batch(model, budget, **kw):
    r = _verify(model, find_max_batch=True, memory_budget=budget, **kw)
    assert r.exact and r.released
    return r


@needs_torch
def test_golden_find_max_batch_stores_the_prefix_once():
    # Llama-3.2-1B, 1,024 tokens, 512 common, 66 MiB = 132 blocks of 512 KiB (131 once vLLM's BlockPool
    # keeps its null block): the prefix's 32 blocks once (KVCacheManager.get_computed_blocks: full
    # blocks), 32 more per request -> (131 - 32) // 32 = 3 requests, where nothing shared fits 131 // 64 = 2
    r = _max_batch(SMALL, 66 << 20, context=1024, shared_prefix=512)
    mb = r.max_batch
    assert (mb.measured, mb.predicted, mb.from_estimate, r.batch) == (3, 3, 3, 3)
    assert len(mb.probes) == 2  # max-batch's answer fits, one more does not
    assert r.sharing.block_tables[0].once == 32 and r.sharing.referenced_bytes == r.predicted_bytes == 64 << 20
    plain = _max_batch(SMALL, 66 << 20, context=1024)
    assert plain.max_batch.measured == plain.max_batch.predicted == 2


@needs_torch
def test_find_max_batch_at_an_exact_fit_differs_by_vllm_null_block():
    # 64 MiB = 128 blocks: the probes fit 2 x 64 (verify allocates no null block); vLLM hands out 127
    # (BlockPool keeps one as its null block), so max-batch says 1
    plain = _max_batch(SMALL, 64 << 20, context=1024)
    assert (plain.max_batch.measured, plain.max_batch.predicted) == (2, 1)


@needs_torch
@pytest.mark.parametrize("kw", [
    dict(prompt_len=1000, output_len=200, shared_prefix=700),
    dict(context=1000, speculative_method="ngram", num_speculative_tokens=5),
    dict(prompt_len=900, output_len=100, shared_prefix=600, speculative_method="draft_model",
         num_speculative_tokens=3, speculative_model=DRAFT),
])
def test_find_max_batch_equals_max_batch_with_the_same_sharing(kw):
    # full attention: max-batch (given the same KV memory, the prefix and the speculative slots) counts
    # exactly the blocks the probes allocate
    r = _max_batch(SMALL, 100 << 20, **kw)
    mb = r.max_batch
    assert mb.measured == mb.predicted == mb.from_estimate > 1
    assert r.sharing.sequences == r.batch


@needs_torch
def test_find_max_batch_mla_with_mtp_and_a_prefix():
    # 72 MiB: more than a block (2,064,384 B: 64 tokens x 576 x 2 B x 28 layers, MTP's included) to spare
    r = _max_batch(MLA_MTP, 72 << 20, prompt_len=900, output_len=100, shared_prefix=600, speculative_method="mtp",
                   num_speculative_tokens=1)
    assert r.max_batch.measured == r.max_batch.predicted == r.max_batch.from_estimate > 1


@needs_torch
def test_find_max_batch_sliding_model_documented_difference():
    # gpt-oss (sliding 128): max-batch follows vLLM's admission (window + tokens in flight per request),
    # the probes allocate what a computed sequence holds: more fit, as many as the estimate's bytes allow
    r = _max_batch(GPT_OSS, 256 << 20, context=1024, shared_prefix=700)
    mb = r.max_batch
    assert mb.measured == mb.from_estimate > mb.predicted > 0
    assert any("admission rule" in note for note in r.notes)


@needs_torch
@pytest.mark.parametrize("kw", [dict(prompt_len=900, output_len=100, n=3), dict(prompt_len=900, output_len=100,
                                                                                beam_width=2)])
def test_find_max_batch_counts_requests_of_samples(kw):
    import inspect

    from kvplan.plan import max_batch

    r = _max_batch(SMALL, 100 << 20, **kw)
    mb = r.max_batch
    samples = kw.get("n", 1) * kw.get("beam_width", 1)
    assert mb.measured == mb.from_estimate and r.sharing.sequences == r.batch * samples
    if mb.measured:  # one more request does not fit: the probes allocated requests of all their samples
        assert any(b == mb.measured + 1 and not fits for b, fits, _, _ in mb.probes)
    name = "n" if "n" in kw else "beam_width"
    if name in inspect.signature(max_batch).parameters:
        assert mb.predicted == mb.measured
    else:
        assert mb.predicted is None and any(f"max-batch takes no {name}" in note for note in r.notes)


# ------------------------------------------------------------------------------ --decode with sharing

def _decoded(model, **kw):
    r = _verify(model, decode=True, repeats=1, **kw)
    steps = r.decode.steps
    assert steps and steps[0].step == 0 and steps[-1].step == kw.get("output_len", 0)
    for s in steps:
        assert s.referenced_bytes == s.predicted_bytes and s.tokens_ok, s
        est = estimate_row(model, kw["batch"], prompt_len=kw["prompt_len"], output_len=s.step,
                        shared_prefix=kw.get("shared_prefix", 0), n=kw.get("n", 1),
                        beam_width=kw.get("beam_width", 1),
                        **{k: v for k, v in kw.items() if k.startswith(("speculative", "num_spec"))})
        assert s.predicted_bytes == est.kv_bytes  # the estimate at every step, not only the last
    assert r.exact and r.released
    assert steps[-1].referenced_bytes == r.predicted_bytes == r.measured_storage_bytes
    return r


@pytest.mark.slow
@needs_torch
@pytest.mark.parametrize(("model", "kw"), [
    (SMALL, dict(batch=3, prompt_len=100, output_len=60, shared_prefix=70)),
    (SMALL, dict(batch=2, prompt_len=96, output_len=40, beam_width=2)),
    (SMALL, dict(batch=2, prompt_len=100, output_len=30, shared_prefix=64, speculative_method="ngram",
                 num_speculative_tokens=3)),
    (GPT_OSS, dict(batch=2, prompt_len=200, output_len=150, shared_prefix=150, n=2)),  # window 128 passes the prefix
    (GEMMA, dict(batch=2, prompt_len=600, output_len=60, shared_prefix=300, n=2)),      # padded hybrid groups
    (MLA, dict(batch=2, prompt_len=300, output_len=70, shared_prefix=200)),             # latent blocks of 64
    (MLA_MTP, dict(batch=2, prompt_len=300, output_len=20, n=2, speculative_method="mtp", num_speculative_tokens=1)),
    (MAMBA, dict(batch=2, prompt_len=600, output_len=40, shared_prefix=300, n=2)),      # state per sequence
])
def test_decode_with_sharing_is_exact_at_every_checked_step(model, kw):
    r = _decoded(model, **kw)
    assert len(r.decode.steps) >= 2 and r.decode.read_bytes > 0
    assert r.to_dict()["decode"]["steps"][-1]["exact"]


@needs_torch
def test_golden_n_children_each_recompute_the_block_with_the_last_prompt_token():
    # n = 4, prompt 100 = 6 full blocks + 4 tokens: the children share the 6 blocks (hit capped at
    # prompt - 1, ParallelSampling + prefix caching); block 6 (tokens 96-99) is each child's own copy,
    # recomputed, and they append their tokens into it: at the prefill 2 x 6 + 8 x 1 = 20 blocks of
    # 512 KiB; 8 own prompt blocks at every step
    r = _decoded(SMALL, batch=2, prompt_len=100, output_len=40, n=4)
    first = r.decode.steps[0]
    assert (first.blocks, first.predicted_bytes) == (20, 20 * 512 * 1024)
    assert {s.own_prompt_blocks for s in r.decode.steps} == {8}
    # at 140 tokens: 6 shared per request + 3 blocks (tokens 96-143) per child
    assert r.decode.steps[-1].blocks == 2 * 6 + 8 * 3


@needs_torch
def test_beams_share_the_last_full_prompt_block_once_they_decode():
    # LLM.beam_search re-sends prompt + beam tokens: at the prefill the hit stops at prompt - 1 (the 6th
    # block is each beam's), from the first generated token every full prompt block is shared
    r = _decoded(SMALL, batch=1, prompt_len=96, output_len=20, beam_width=3)
    steps = {s.step: s for s in r.decode.steps}
    assert steps[0].own_prompt_blocks == 3 and steps[20].own_prompt_blocks == 0


@needs_torch
def test_a_rule_sharing_the_partial_block_is_caught():
    # a wrong rule: the children also share the block with the prompt's last token (tokens 96-111);
    # their first generated token would be appended into a block 4 sequences reference
    from kvplan.engines.sharing import SharedSpans
    from kvplan.verify import allocate as al
    from kvplan.verify.decode_shared import decode_shared
    from kvplan.verify.shapes import resolve_workload

    class Overshares:
        def spans(self, group, workload):
            return SharedSpans(0, 112)

    spec = load_model(SMALL)
    work = resolve_workload(spec, "vllm", None, prompt_len=100, output_len=10, n=4)
    layout = resolve_layout(spec, "vllm", None, "auto", None)
    plan = plan_cache(spec, layout, 1, work.alloc_context, work.workload)
    alloc = al.allocate(plan, al.resolve_device("cpu"), fill=True)
    try:
        with pytest.raises(VerifyError, match="copy-on-write"):
            decode_shared(alloc, plan, layout, work, 1, Overshares())
    finally:
        alloc.release()


@needs_torch
def test_a_rule_sharing_a_block_whose_tokens_differ_is_read_back_wrong():
    # a wrong rule: 3 blocks (48 tokens) shared by every request though only 40 are common: the first
    # request writes its tokens 40-47 into the shared block, the others read them through their tables
    from kvplan.engines.sharing import SharedSpans
    from kvplan.verify import allocate as al
    from kvplan.verify.decode_shared import decode_shared
    from kvplan.verify.shapes import resolve_workload

    class Overshares:
        def spans(self, group, workload):
            return SharedSpans(48, 48)

    spec = load_model(SMALL)
    work = resolve_workload(spec, "vllm", None, prompt_len=100, output_len=10, shared_prefix=40)
    layout = resolve_layout(spec, "vllm", None, "auto", None)
    plan = plan_cache(spec, layout, 3, work.alloc_context, work.workload)
    alloc = al.allocate(plan, al.resolve_device("cpu"), fill=True)
    try:
        checks, _ = decode_shared(alloc, plan, layout, work, 3, Overshares())
    finally:
        alloc.release()
    assert checks and not any(c.tokens_ok for c in checks)


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from([LLAMA, MLA, GPT_OSS, GEMMA, MAMBA]), batch=st.integers(1, 4),
       prompt=st.integers(1, 1200), output=st.integers(0, 200), prefix_share=st.floats(0, 1),
       samples=st.integers(1, 3), beams=st.booleans())
# beams: the sliding group's prompt-end block turns shared at step 1 while the window drops one; every
# beam frees before any allocates, else the first one needs a block more than the estimate
@example(model=GPT_OSS, batch=1, prompt=176, output=1, prefix_share=0.0, samples=2, beams=True)
def test_stepped_tables_hold_the_estimate_at_every_checked_step(model, batch, prompt, output, prefix_share,
                                                                samples, beams):
    # no torch: the reference-counted tables kvplan.verify.paging steps hold, block for block, what
    # the estimate counts for the same requests at that length
    from kvplan.engines import get_engine
    from kvplan.verify.paging import steps
    from kvplan.verify.shapes import predicted_bytes

    workload = Workload(prompt, output, int(prompt * prefix_share), 1 if beams else samples, samples if beams else 1)
    spec = load_model(model)
    layout = resolve_layout(spec, "vllm", None, "auto", None)
    try:
        plan = plan_cache(spec, layout, batch, workload.context, workload)
    except VerifyError as err:
        assert model in (GPT_OSS, GEMMA) and err.field in ("shared_prefix", "n", "beam_width")
        return
    per_block = [sum(v.nbytes // v.shape[0] for b in plan.buffers for v in b.views
                     if v.layer in set(t.layers) and v.shape[0]) for t in plan.block_tables]
    checked = 0
    for step in steps(layout, plan.block_tables, workload, 0, get_engine("vllm").sharing.bind(layout)):
        if step.checked:
            checked += 1
            now = Workload(prompt, step.step, workload.shared_prefix, workload.n, workload.beam_width)
            held = sum(g.distinct * per_block[g.table_index] for g in step.groups)
            assert held == predicted_bytes(layout, batch, step.length, now)
    assert checked >= 1


# ------------------------------------------------------------------------------ every rank with sharing

@pytest.mark.parametrize(("model", "tp", "pp", "kw"), [
    (LLAMA, 2, 1, dict(prompt_len=1000, output_len=200, shared_prefix=700, n=2)),
    (LLAMA, 4, 2, dict(prompt_len=1000, output_len=200, beam_width=2)),
    (MLA_MTP, 2, 1, dict(prompt_len=900, output_len=100, shared_prefix=512, speculative_method="mtp",
                     num_speculative_tokens=2)),
    (LLAMA, 2, 1, dict(context=800, speculative_method="draft_model", num_speculative_tokens=3,
                       speculative_model=DRAFT)),
    (GPT_OSS, 2, 2, dict(prompt_len=900, output_len=300, shared_prefix=850)),
    (MAMBA, 2, 2, dict(prompt_len=600, output_len=100, shared_prefix=300, n=2)),
    (GEMMA, 1, 2, dict(context=500, n=3, engine="hf")),
])
def test_every_rank_plans_its_shard_of_the_shared_layout(model, tp, pp, kw):
    from kvplan.verify.ranks import plan_ranks

    spec = load_model(model)
    plans = plan_ranks(spec, tp=tp, pp=pp, batch=3, **kw)
    assert len(plans) == tp * pp
    for rp in plans:
        assert rp.plan.predicted_bytes == rp.plan.buffer_bytes
        if rp.plan.block_tables:
            assert sum(t.blocks for t in rp.plan.block_tables) == rp.plan.num_blocks
    engine = kw.pop("engine", "vllm")
    context = kw.pop("context", None)
    if pp == 1:  # the rank's bytes are what `kvplan estimate --tp` prints for the same requests
        est = estimate_row(model, 3, engine=engine, tp=tp, **({"contexts": [context]} if context else {}), **kw)
        assert plans[0].plan.predicted_bytes == est.kv_bytes
        single = estimate_row(model, 3, engine=engine, **({"contexts": [context]} if context else {}), **kw)
        # the KV heads are split; MLA's latent is replicated on every rank
        assert est.kv_bytes < single.kv_bytes or (model in (MLA, MLA_MTP) and est.kv_bytes == single.kv_bytes)
    if engine == "vllm" and kw.get("shared_prefix") or kw.get("n", 1) > 1 and engine == "vllm":
        # the same tables on every rank: sharing goes by token position, the shard changes each block's bytes
        shapes = {tuple((t.once, t.per_request, t.per_sequence) for t in rp.plan.block_tables) for rp in plans
                  if rp.pp_rank == 0}
        assert len(shapes) == 1


def test_speculation_with_pipeline_stages_is_refused_by_field():
    from kvplan.verify.ranks import plan_ranks

    with pytest.raises(KvplanError) as err:
        plan_ranks(load_model(LLAMA), pp=2, context=800, speculative_method="ngram", num_speculative_tokens=2)
    assert err.value.field == "pp"


HAS_NUMPY = importlib.util.find_spec("numpy") is not None
needs_dist = pytest.mark.skipif(not (HAS_TORCH and HAS_NUMPY), reason="torch and numpy needed: pip install 'kvplan[verify]'")


@pytest.mark.slow
@needs_dist
def test_two_tp_ranks_allocate_their_shard_of_shared_blocks():
    from kvplan.verify.distributed import launch

    kw = dict(prompt_len=1000, output_len=200, shared_prefix=700, n=2)
    result = launch(SMALL, nprocs=2, tp=2, device="cpu", timeout_s=120, batch=3, **kw)
    half = estimate_row(SMALL, 3, tp=2, **kw).kv_bytes
    assert result.exact and not result.errors
    assert [r.predicted_bytes for r in result.ranks] == [half, half]
    for r in result.ranks:
        assert r.measured_storage_bytes == r.referenced_bytes == r.predicted_bytes
    assert result.context == 1200 and result.sharing["sequences"] == 6 and result.sharing["n"] == 2
    data = result.to_dict()
    assert data["sharing"]["shared_prefix"] == 700 and data["ranks"][0]["referenced_bytes"] == half


@pytest.mark.slow
@needs_dist
def test_cli_launch_with_speculation_every_rank_exact():
    cmd = [sys.executable, "-m", "kvplan", "verify", MLA_MTP, "--device", "cpu", "--tp", "2", "--launch", "2", "-b", "2",
           "--prompt-len", "300", "--output-len", "60", "--shared-prefix", "200", "--speculative-method", "mtp",
           "--num-speculative-tokens", "1", "--timeout", "120", "-f", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert data["exact"] and data["context"] == 360 and data["sharing"]["extra_slots"] == 2
    assert all(r["referenced_bytes"] == r["predicted_bytes"] == r["measured"]["storage_bytes"] for r in data["ranks"])
