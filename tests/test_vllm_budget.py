"""vLLM's budget rules, one at a time, with the facts of docs/research-vllm.md (vLLM's own code) as goldens."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.budgets.base import GIB, Settings
from kvplan.engines.version import parse_version
from kvplan.engines.vllm.budget import non_torch_bytes, sampler_bytes_per_logit
from kvplan.engines.vllm.defaults import batch_defaults, capture_sizes
from kvplan.errors import UsageError

MIB = 1 << 20
H100 = int(79.19 * GIB)  # what torch reports for an H100 80GB (the 0.19.0 logs)
V = parse_version


def pair(total, name, version, mml=8192, ctx="serve"):
    d = batch_defaults(total, name, V(version), mml, ctx)
    return d.max_num_batched_tokens, d.max_num_seqs


def test_h100_serve_and_llm_class():
    # engine/arg_utils.py get_batch_defaults; all 61 0.19.0 H100 logs: 8192 / 1024 for OPENAI_API_SERVER
    assert pair(H100, "H100-SXM-80GB", "0.19.0") == (8192, 1024)
    assert pair(H100, "H100-SXM-80GB", "0.19.0", ctx="llm") == (16384, 1024)


def test_a100_takes_the_lower_tier_from_0_10():
    a100 = int(79.25 * GIB)
    # 0.10.1.1 _set_default_args_v1: ">= 70 GiB and not A100"; an A100-80GB log prints 2048
    assert pair(a100, "A100-SXM4-80GB", "0.10.1") == (2048, 256)
    assert pair(a100, "A100-SXM4-80GB", "0.33.0", ctx="llm") == (8192, 256)
    # 0.8.5: no A100 exception; max_num_seqs 1024 for every context
    assert pair(a100, "A100-SXM4-80GB", "0.8.5") == (8192, 1024)


def test_160_gib_tier_and_small_cards():
    b200 = int(178.35 * GIB)
    assert pair(b200, "B200-180GB", "0.33.0") == (16384, 1024)
    assert pair(b200, "B200-180GB", "0.33.0", ctx="llm") == (16384, 1024)
    assert pair(int(47.5 * GIB), "RTX-A6000", "0.33.0") == (2048, 256)
    assert pair(int(47.5 * GIB), "RTX-A6000", "0.33.0", ctx="llm") == (8192, 256)
    # GB10 (DGX Spark, 128 GB, compute capability 12.1) is excluded from the >= 70 GiB tier
    assert pair(int(119.7 * GIB), "GB10", "0.33.0") == (2048, 256)


def test_defaulted_tokens_capped_at_seqs_times_max_model_len():
    # get_batch_defaults' last step: a defaulted budget is at most max_num_seqs x max_model_len
    assert pair(H100, "H100-SXM-80GB", "0.33.0", mml=4) == (4096, 1024)


def test_v0_rules():
    # V0 (0.8.5 _set_default_args_v0 + SchedulerConfig.__post_init__): chunked prefill above 32,768 tokens
    assert pair(int(23.58 * GIB), "RTX-3090", "0.6.4", mml=20000) == (20000, 256)
    assert pair(int(23.58 * GIB), "RTX-3090", "0.6.4", mml=1024) == (2048, 256)
    assert pair(int(23.5 * GIB), "RTX-4090", "0.7", mml=131072) == (2048, 256)


def test_capture_sizes():
    # config/vllm.py _set_cudagraph_sizes: 51 sizes for 1024 sequences; gpt-oss raises the top to 1024: 83
    assert capture_sizes(1024, 8192, "llama", "H100-SXM-80GB") == 51
    assert capture_sizes(1024, 8192, "gpt_oss", "H100-SXM-80GB") == 83
    assert capture_sizes(1024, 8192, "llama", "B200-180GB") == 83  # SM100: 1024 as well
    assert capture_sizes(1024, 256, "llama", "H100-SXM-80GB") == 35  # capped by max_num_batched_tokens
    assert capture_sizes(4, 8192, "llama", "H100-SXM-80GB") == 4  # 1, 2, 4, 8


def test_non_torch_by_version_and_parallelism():
    # 0.19.0 logs: growth since the init snapshot 0.24-0.27 GiB TP 1, 2.06-2.21 TP > 1, 0.07 PP only; at TP > 1
    # the fitted part (no GPU named: nothing computed) is what is left after the collective buffers
    assert non_torch_bytes(V("0.19.0"), 1, 1)[0] == int(0.25 * GIB)
    assert non_torch_bytes(V("0.19.0"), 4, 1)[0] == int(0.57 * GIB)
    # on an H100 SXM: + FlashInfer's fusion workspace (3 x 512 MiB) + NCCL's NVLS buffers (16 x 2 x 1 MiB x 4)
    size, how = non_torch_bytes(V("0.19.0"), 4, 1, "H100-SXM-80GB", 8192, 8192)
    assert size == int(0.57 * GIB) + 1536 * MIB + 128 * MIB
    assert "fitted" in how and "FlashInfer all-reduce fusion workspace" in how and "NVLS" in how
    assert non_torch_bytes(V("0.19.0"), 4, 1, "A100-SXM4-80GB", 8192, 8192)[0] == int(0.57 * GIB)
    assert non_torch_bytes(V("0.19.0"), 1, 2)[0] == int(0.07 * GIB)
    # 0.8/0.9 V1 and V0 <= 0.6 all non-torch memory (init snapshot 0.51 + growth 0.25; V0 0.6: the median of 8
    # sources' logs, 0.26); V0 0.7 the growth (the median of 11 sources, 0.05; at TP > 1 of 6 sources, 0.82)
    assert non_torch_bytes(V("0.9"), 1, 1)[0] == int(0.76 * GIB)
    assert non_torch_bytes(V("0.9"), 2, 1)[0] > non_torch_bytes(V("0.19.0"), 2, 1)[0]
    assert non_torch_bytes(V("0.6.4"), 1, 1)[0] == int(0.26 * GIB)
    assert non_torch_bytes(V("0.7.3"), 1, 1)[0] == int(0.05 * GIB)
    assert non_torch_bytes(V("0.7.3"), 2, 1)[0] == int(0.82 * GIB)


def test_sampler_step_at_0_17():
    # llmd-planner sweep, Qwen3-14B on an H100: 5.64 GiB activation in 0.15/0.16, 2.23 GiB from 0.17
    assert sampler_bytes_per_logit(V("0.16.0")) > 2 * sampler_bytes_per_logit(V("0.17.0"))
    for version, logged in (("0.16.0", 5.64), ("0.17.0", 2.23)):
        plan = kvplan.max_batch("Qwen/Qwen3-14B", gpu="H100", engine_version=version, max_model_len=8192)
        assert plan.per_gpu.activation_bytes / GIB == pytest.approx(logged, abs=0.15)


def test_moe_buffers_stay_while_the_sampler_runs():
    # 0.19.0 H100 logs: Qwen3-30B-A3B peaks at 2.68 GiB, the derived sampler alone (14 B per logit and the
    # Triton buffer) is 2.10; gpt-oss-20b 2.87 (2.78). The MoE excess is a fitted term (3 values per token of MLP
    # width): the 5 MoE logs imply 2 to 12, so it misses Qwen3-30B-A3B by 0.3 GiB (docs/accuracy.md)
    moe = kvplan.max_batch("Qwen/Qwen3-30B-A3B", gpu="H100", engine_version="0.19.0", max_model_len=8192)
    oss = kvplan.max_batch("openai/gpt-oss-20b", gpu="H100", engine_version="0.19.0", max_model_len=8192)
    sampler_only = kvplan.max_batch("Qwen/Qwen3-8B", gpu="H100", engine_version="0.19.0", max_model_len=8192)
    assert moe.per_gpu.activation_bytes / GIB == pytest.approx(2.68, abs=0.35)
    assert moe.per_gpu.activation_bytes > 1.1 * sampler_only.per_gpu.activation_bytes  # same vocabulary, + MoE
    assert oss.per_gpu.activation_bytes / GIB == pytest.approx(2.87, abs=0.15)


def test_gpu_name_reaches_the_budget():
    a100 = kvplan.max_batch("Qwen/Qwen3-8B", gpu="A100-80GB", engine_version="0.19.0")
    h100 = kvplan.max_batch("Qwen/Qwen3-8B", gpu="H100", engine_version="0.19.0")
    assert a100.engine_defaults["max_num_batched_tokens"] == 2048
    assert h100.engine_defaults["max_num_batched_tokens"] == 8192
    llm = kvplan.max_batch("Qwen/Qwen3-8B", gpu="H100", engine_version="0.19.0",
                           settings=Settings(usage_context="llm"))
    assert llm.engine_defaults["max_num_batched_tokens"] == 16384
    assert any("LLM class" in a for a in llm.assumptions)
    assert any("`vllm serve`" in a for a in h100.assumptions)


def test_cudagraph_subtracted_from_0_21_unless_eager():
    old = kvplan.max_batch("Qwen/Qwen3-8B", gpu="H100", engine_version="0.19.0")
    new = kvplan.max_batch("Qwen/Qwen3-8B", gpu="H100", engine_version="0.21.0")
    eager = kvplan.max_batch("Qwen/Qwen3-8B", gpu="H100", engine_version="0.21.0",
                             settings=Settings(enforce_eager=True))
    assert old.per_gpu.cudagraph_bytes == 0 and eager.per_gpu.cudagraph_bytes == 0
    # fitted: 256 MiB + 2 x 50 x 36 layers x 0.18 MiB; the 0.19.0 Qwen3-8B log estimates 0.84 GiB
    assert new.per_gpu.cudagraph_bytes / GIB == pytest.approx(0.84, abs=0.1)


def test_usage_context_is_checked():
    with pytest.raises(UsageError) as err:
        Settings(usage_context="batch")  # type: ignore[arg-type]
    assert err.value.field == "usage_context"
