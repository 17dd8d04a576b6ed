"""Sharing in every plan path: max-batch with n / beams, vLLM's sliding and chunked groups at admission,
--solve gpus and --solve context with a shared prefix, the decode bound, and check with n."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings as hsettings, strategies as st

import kvplan
from kvplan.budgets import Settings
from kvplan.engines.sharing import Workload
from kvplan.errors import UsageError
from kvplan.plan import max_batch
from kvplan.spec import LayerSpec, ModelSpec
from conftest import dense

LLAMA_31_8B = dense("meta-llama/Llama-3.1-8B", 32, 8, 128, max_pos=131072)
BLOCK_BYTES = 16 * 131072  # 32 layers x 2 (K, V) x 8 heads x 128 x 2 B x 16 tokens
SLIDING = ModelSpec(id="sliding-1k", model_type="mistral", dtype="bfloat16", max_position_embeddings=131072,
                    layers=(LayerSpec(kind="sliding", count=32, kv_heads=8, head_dim=128, window=1024),))
CHUNKED = ModelSpec(id="chunked-8k", model_type="llama4", dtype="bfloat16", max_position_embeddings=131072,
                    layers=(LayerSpec(kind="chunked", count=32, kv_heads=8, head_dim=128, chunk=8192),))


def kv(blocks: int) -> Settings:
    # exactly ``blocks`` vLLM blocks; BlockPool keeps one as the null block, so blocks - 1 are usable.
    # max_num_batched_tokens 8,192 with async scheduling: 16,384 tokens in flight at admission
    return Settings(kv_cache_memory_bytes=blocks * BLOCK_BYTES + 12345, weights_bytes=16 * 2**30,
                    max_num_batched_tokens=8192)


def plan(spec: ModelSpec = LLAMA_31_8B, blocks: int = 1000, mml: int = 16384, **kw):
    return max_batch(spec, gpu_memory="80GiB", max_model_len=mml, settings=kv(blocks), **kw)


# ------------------------------------------------------------------------------------ n and beams

def test_vllm_n_counts_requests_of_n_children_sharing_the_prompt():
    # vLLM ParallelSampling (vllm/v1/engine/parallel_sampling.py) sends n child requests with the same
    # prompt; prefix caching shares its full blocks up to prompt - 1 tokens (get_computed_blocks):
    # floor(4,095 / 16) = 255 blocks per request, each child 320 - 255 = 65 blocks of its own.
    # 999 usable blocks: (999) // (255 + 2 x 65) = 2 requests; plain 999 // 320 = 3 sequences = 1 request
    p = plan(context=5120, prompt_len=4096, n=2)
    assert p.max_batch == 999 // (255 + 2 * 65) == 2
    assert p.max_batch_plain == 999 // 320 // 2 == 1
    doc = p.to_dict()
    assert doc["n"] == 2 and doc["beam_width"] == 1 and doc["max_batch_sequences"] == 4
    assert doc["max_batch_plain"] == 1 and doc["shared_prefix"] == 0
    assert any("n = 2 child requests" in a for a in p.assumptions)


def test_vllm_n_with_a_common_prefix():
    # the 2,048-token prefix's 128 blocks once; each request its prompt's other 255 - 128 = 127 blocks;
    # each of its 4 children 65: (999 - 128) // (127 + 4 x 65) = 2
    p = plan(context=5120, prompt_len=4096, n=4, shared_prefix=2048)
    assert p.max_batch == (999 - 128) // (127 + 4 * 65) == 2
    assert p.max_batch_plain == 999 // 320 // 4 == 0


def test_vllm_beams_share_every_full_prompt_block():
    # LLM.beam_search sends prompt + beam tokens: all floor(4,096 / 16) = 256 prompt blocks hit
    p = plan(context=5120, prompt_len=4096, beam_width=2)
    assert p.max_batch == 999 // (256 + 2 * 64) == 2


def test_n_without_a_prompt_length_takes_the_context_as_prompt_and_says_so():
    p = plan(context=4096, n=2)
    # prompt = context: children share floor(4,095 / 16) = 255 blocks, each holds 1 block
    assert p.max_batch == 999 // (255 + 2 * 1)
    assert any("taken as the prompt" in a for a in p.assumptions)


def test_engines_refuse_what_they_have_no_rule_for_by_field():
    with pytest.raises(UsageError) as err:
        plan(engine="trtllm", context=4096, n=2)
    assert err.value.field == "n"
    with pytest.raises(UsageError) as err:
        plan(engine="sglang", context=4096, beam_width=2)
    assert err.value.field == "beam_width"
    with pytest.raises(UsageError) as err:
        plan(context=4096, n=2, beam_width=2)
    assert err.value.field == "beam_width"
    with pytest.raises(UsageError) as err:
        plan(context=4096, prompt_len=8192, n=2)
    assert err.value.field == "prompt_len"


def test_transformers_expands_rows():
    common = dict(gpu_memory="80GiB", max_model_len=16384, engine="hf", context=4096,
                  settings=Settings(kv_cache_memory_bytes=40 * 2**30, weights_bytes=16 * 2**30))
    one = max_batch(LLAMA_31_8B, **common)
    four = max_batch(LLAMA_31_8B, n=4, **common)
    # _expand_inputs_for_generation: batch x n full rows, nothing shared
    assert four.max_batch == four.max_batch_plain == one.max_batch // 4


def test_sglang_n_shares_the_prompt():
    common = dict(gpu_memory="80GiB", max_model_len=16384, engine="sglang", context=5120,
                  settings=Settings(kv_cache_memory_bytes=40 * 2**30, weights_bytes=16 * 2**30))
    p = max_batch(LLAMA_31_8B, n=4, prompt_len=4096, **common)
    assert p.max_batch > p.max_batch_plain == max_batch(LLAMA_31_8B, **common).max_batch // 4


# ---------------------------------------------------------------- vLLM sliding and chunked groups

def test_vllm_sliding_group_shares_the_prefix_while_its_window_holds_it():
    # SlidingWindowManager: blocks before num_computed_tokens - window + 1 are freed (null blocks in a
    # cache hit too). At 4,096 tokens nothing is computed yet at admission (16,384 in flight): the
    # request is admitted with ceil(4,096 / 16) + 1 = 257 blocks and holds all 128 prefix blocks:
    # (999 - 128) // (257 - 128) = 6 against 999 // 257 = 3
    p = plan(SLIDING, context=4096, shared_prefix=2048, mml=65536)
    assert (p.max_batch, p.max_batch_plain) == ((999 - 128) // 129, 999 // 257) == (6, 3)


def test_vllm_sliding_group_past_the_window_shares_nothing():
    # 32,768 tokens: 16,384 computed, the window starts at block (16,384 - 1,023) // 16 = 960 > 128
    p = plan(SLIDING, blocks=10000, context=32768, shared_prefix=2048, mml=65536)
    assert p.max_batch == p.max_batch_plain == 9999 // (-(-17407 // 16) + 1) == 9


def test_vllm_sliding_group_shares_the_part_of_the_prefix_in_its_window():
    # 18,432 tokens: 2,048 computed, window from block (2,048 - 1,024 + 1) // 16 = 64; of the 4,096-token
    # prefix's 256 blocks 192 are held; admission ceil(17,407 / 16) + 1 = 1,089 blocks
    p = plan(SLIDING, blocks=10000, context=18432, shared_prefix=4096, mml=65536)
    assert p.max_batch == (9999 - 192) // (1089 - 192) == 10
    assert p.max_batch_plain == 9999 // 1089 == 9


def test_vllm_chunked_group_shares_the_prefix_in_its_current_chunk():
    # ChunkedLocalAttentionManager frees blocks before the computed tokens' chunk: at 20,480 tokens 4,096
    # are computed, chunk 0 still open, all 512 prefix blocks held; admission ceil(20,480 / 16) = 1,280
    p = plan(CHUNKED, blocks=10000, context=20480, shared_prefix=8192, mml=65536)
    assert p.max_batch == (9999 - 512) // (1280 - 512) == 12
    assert p.max_batch_plain == 9999 // 1280 == 7
    # at 40,960 tokens 24,576 are computed: chunk 3 from block 1,536, past the prefix
    far = plan(CHUNKED, blocks=10000, context=40960, shared_prefix=8192, mml=65536)
    assert far.max_batch == far.max_batch_plain == 9999 // 1536


@pytest.mark.parametrize(("kind", "span", "prefix", "observed"), [
    # (context when the step's token is written, blocks both requests reference), read off
    # tests/data/vllm_sharing_oracle/outputs.txt: vLLM 0.33.0's KVCacheManager, two requests sharing
    # ``prefix`` tokens, synchronous decode (one token in flight), 16-token blocks
    ("sliding", 64, 128, [(161, 2), (175, 2), (176, 1), (191, 1), (192, 0), (200, 0)]),
    ("sliding", 128, 96, [(101, 6), (143, 6), (144, 5), (160, 4), (208, 1), (224, 0), (300, 0)]),
    ("chunked", 64, 128, [(161, 0), (300, 0)]),
    ("chunked", 256, 128, [(161, 8), (256, 8), (257, 0), (600, 0)]),
])
def test_sliding_and_chunked_holdings_match_vllm(kind, span, prefix, observed):
    from kvplan.engines.vllm.admission import PoolShape
    from kvplan.engines.vllm.pool import PoolType
    from kvplan.engines.vllm.sharing import admitted_span_blocks

    layer_type = PoolType(kind, span, 16, 16 * 256, 1, None)  # type: ignore[arg-type]  # rule unread here
    pool = PoolShape(16, (layer_type,), 1, (1,), 0, 16 * 256)
    for context, common in observed:
        assert admitted_span_blocks(pool, layer_type, context, 1, prefix) == common, context


def test_mamba_state_is_never_shared():
    from kvplan.engines.vllm.admission import PoolShape
    from kvplan.engines.vllm.pool import PoolType
    from kvplan.engines.vllm.sharing import admitted_span_blocks

    state = PoolType("recurrent", None, 16, 1 << 20, 4, None)  # type: ignore[arg-type]  # rule unread here
    pool = PoolShape(16, (state,), 4, (1,), 0, 4 << 20)
    assert admitted_span_blocks(pool, state, 8192, 0, 4096) == 0


# ------------------------------------------------------------------------ --solve gpus / context

def test_solve_gpus_takes_a_shared_prefix():
    # per GPU 1,000 blocks of the whole model's pages; tp t has 1,000 t blocks. 10 requests of 8,192
    # tokens sharing 4,096: tp 4 holds (3,999 - 256) // 256 = 14 >= 10 on 4 GPUs; tp 2 holds 6 (2 x 2
    # GPUs, tp 4 wins the tie); plain needs 8: tp 8 holds 7,999 // 512 = 15, tp 4 only 7
    shared = plan(context=8192, solve="gpus", concurrency=10, shared_prefix=4096)
    plain = plan(context=8192, solve="gpus", concurrency=10)
    assert (shared.gpu_count, shared.tp, shared.dp) == (4, 4, 1) and shared.max_batch == 14
    assert plain.gpu_count == 8 and plain.max_batch == 15
    assert "sharing a 4,096-token prefix" in shared.assumptions[0]


def test_solve_gpus_takes_speculation_and_n():
    spec = plan(context=8192, solve="gpus", concurrency=10, speculative_method="ngram", num_speculative_tokens=4)
    assert spec.max_batch >= 10 and spec.pp == 1  # vLLM refuses pp with speculation: tp only
    n = plan(context=5120, prompt_len=4096, solve="gpus", concurrency=10, n=2)
    assert n.max_batch >= 10 and "requests of 2" in n.assumptions[0]
    with pytest.raises(UsageError) as err:  # the workload refused whatever the GPU count
        plan(engine="trtllm", context=4096, solve="gpus", concurrency=4, n=2)
    assert err.value.field == "n"


def test_max_context_takes_the_shared_prefix():
    # batch 4 sharing 4,096 tokens: 256 blocks once, 4 x (ceil(c / 16) - 256) own <= 999
    p = plan(context=8192, batch=4, shared_prefix=4096, solve="context")
    own = (999 - 256) // 4
    assert p.max_context == (own + 256) * 16
    assert plan(context=8192, batch=4, solve="context").max_context == 999 // 4 * 16


# ----------------------------------------------------------------------------------- decode bound

def _kv_read(p) -> float:
    from kvplan.hardware import find_gpu, load_catalog

    bandwidth = find_gpu("H100-80GB", load_catalog()).bandwidth
    return p.decode_step_seconds_min * bandwidth - 16 * 2**30


def decode_plan(**kw):
    return max_batch(LLAMA_31_8B, gpu="H100-80GB", max_model_len=16384, settings=kv(5000), context=8192, **kw)


def test_decode_bound_reads_a_common_prefix_once_where_cascade_attention_may_run():
    # use_cascade_attention (vllm/v1/attention/backends/flash_attn.py): >= 256 common tokens, >= 8 requests
    p = decode_plan(batch=8, shared_prefix=4096)
    assert _kv_read(p) == pytest.approx(131072 * (4096 + 8 * 4096), rel=1e-9)
    assert any("cascade attention" in a for a in p.assumptions)


def test_decode_bound_reads_shared_blocks_per_sequence_otherwise():
    few = decode_plan(batch=4, shared_prefix=4096)  # 4 requests: no cascade, each block table read
    assert _kv_read(few) == pytest.approx(131072 * 4 * 8192, rel=1e-9)
    samples = decode_plan(batch=2, n=2, prompt_len=8000)  # 4 sequences of 8,192 tokens
    assert _kv_read(samples) == pytest.approx(131072 * 4 * 8192, rel=1e-9)
    assert samples.decode_tokens_per_second_max == pytest.approx(4 / samples.decode_step_seconds_min)


# ------------------------------------------------------------------------------------- invariants

@hsettings(max_examples=40, deadline=None)
@given(context=st.integers(64, 40000), prefix_share=st.floats(0, 1), prompt_share=st.floats(0.01, 1),
       samples=st.integers(1, 4), beams=st.booleans(), model=st.sampled_from([LLAMA_31_8B, SLIDING, CHUNKED]))
def test_vllm_sharing_never_costs_more_and_is_monotone(context, prefix_share, prompt_share, samples, beams, model):
    from kvplan.engines import get_engine
    from kvplan.engines.layout import EngineOptions
    from kvplan.engines.vllm.admission import in_flight_tokens, vllm_pool
    from kvplan.engines.vllm.sharing import shared_admission
    from kvplan.dtypes import resolve_kv_dtype

    eng = get_engine("vllm")
    _, version = eng.version_of(None)
    layout = eng.layout(model, resolve_kv_dtype("bf16", None), version, EngineOptions())
    pool = vllm_pool(layout)
    prompt = max(1, int(context * prompt_share))
    prefix = int(prompt * prefix_share)
    n, width = (1, samples) if beams else (samples, 1)
    workload = Workload(prompt, context - prompt, prefix, n, width)
    need = shared_admission(layout, pool, workload, in_flight_tokens(2, 8192))
    plain = pool.blocks_per_request(context, 8192)
    assert min(need.once, need.per_request, need.per_sequence) >= 0
    for batch in (1, 2, 7):
        assert need.blocks(batch) <= batch * samples * plain  # never more than nothing shared
        assert need.blocks(batch + 1) >= need.blocks(batch)  # monotone in batch
    if prefix == 0 and samples == 1:
        assert need.blocks(3) == 3 * plain  # nothing to share: the plain count
    usable = 9999
    assert need.max_batch(usable) >= usable // (plain * samples)


@hsettings(max_examples=15, deadline=None)
@given(context=st.integers(256, 16384), prefix_share=st.floats(0, 1), engine=st.sampled_from(["vllm", "sglang"]))
def test_max_batch_with_a_prefix_is_at_least_plain(context, prefix_share, engine):
    prefix = int(context * prefix_share)
    p = plan(engine=engine, context=context, shared_prefix=prefix)
    if prefix:
        assert p.max_batch >= p.max_batch_plain
    else:
        assert p.max_batch_plain is None


# -------------------------------------------------------------------------------------- CLI, check

def test_cli_max_batch_n(capsys):
    from kvplan.cli import main

    code = main(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu-memory", "80GiB", "--max-model-len", "8K",
                 "--weights-bytes", "16GiB", "--max-num-batched-tokens", "8192",
                 "--kv-cache-memory", str(1000 * BLOCK_BYTES), "-c", "5k", "--prompt-len", "4k", "--n", "2",
                 "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["max_batch"] == 2 and doc["max_batch_sequences"] == 4 and doc["max_batch_plain"] == 1


def test_cli_refuses_a_bad_n_in_one_line(capsys):
    from kvplan.cli import main

    code = main(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--n", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--n" in err


def _check(tmp_path, requirements: str, serve: str = ""):
    from kvplan.deploy import check

    llama8 = "meta-llama/Llama-3.1-8B"
    path = tmp_path / "kvplan.yaml"
    path.write_text(f"version: 1\ndeployments:\n  - name: chat\n    model: {llama8}\n    gpu: L4\n"
                    f"    engine: {{name: vllm, max_model_len: 16k{serve}}}\n    requirements: {requirements}\n")
    report = check([str(path)])
    return report.deployments[0]


def test_check_plans_n_with_max_batch(tmp_path):
    llama = kvplan.load_model("meta-llama/Llama-3.1-8B")
    n4 = kvplan.max_batch(llama, gpu="L4", engine="vllm", max_model_len=16384, context=8192, n=4)
    result = _check(tmp_path, f"{{min_concurrency: {n4.max_batch + 1}, at_context: 8k, n: 4}}")
    failed = next(f for f in result.findings if f.code == "min-concurrency")
    assert failed.fits == n4.max_batch and "requests of n = 4" in failed.message
    assert not any(f.code == "sampling-not-planned" for f in result.findings)
    ok = _check(tmp_path, f"{{min_concurrency: {n4.max_batch}, at_context: 8k, n: 4}}")
    assert not any(f.severity == "error" for f in ok.findings)


def test_check_max_num_seqs_counts_every_sample(tmp_path):
    # vLLM's scheduler runs each of the n children as a request: max_num_seqs counts sequences
    result = _check(tmp_path, "{min_concurrency: 3, at_context: 1k, n: 4}", ", max_num_seqs: 8")
    capped = next(f for f in result.findings if f.code == "min-concurrency" and "caps concurrency" in f.message)
    assert capped.fits == 12 and "3 x n = 12" in capped.message


def test_check_n_without_prefix_caching_is_n_sequences(tmp_path):
    llama = kvplan.load_model("meta-llama/Llama-3.1-8B")
    plain = kvplan.max_batch(llama, gpu="L4", engine="vllm", max_model_len=16384, context=8192)
    result = _check(tmp_path, f"{{min_concurrency: {plain.max_batch // 4 + 1}, at_context: 8k, n: 4}}",
                    ", enable_prefix_caching: false")
    failed = next(f for f in result.findings if f.code == "min-concurrency")
    assert failed.fits == plain.max_batch // 4
    assert any(f.code == "prefix-caching" and "each sample" in f.message for f in result.findings)
