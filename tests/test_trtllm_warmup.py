"""The PyTorch flow's KV sizing terms read from TensorRT-LLM's code (kvplan/engines/trtllm/warmup.py): the dry run's
dummy context requests and the CUDA-graph pool captured before the estimation (default from 1.0)."""

from __future__ import annotations

import pytest

from kvplan.budgets import Settings
from kvplan.budgets.base import activation_bytes
from kvplan.engines.trtllm.warmup import DryRun, attention_workspace
from kvplan.plan import max_batch
from kvplan.sources.resolve import load_model


@pytest.mark.parametrize(("tokens", "seq", "requests"), [
    (8192, 40960, 1),  # one request of max_num_tokens when a sequence can hold them
    (8192, 2048, 5),  # 2,047 tokens each (max_seq_len - 1): four full and one of 4 tokens
    (23552, 157, 151),  # trtllm-bench's short sequences: 156 tokens each
    (8192, 1, 8192),  # never an empty request
])
def test_dummy_requests_fill_max_num_tokens(tokens, seq, requests):
    assert DryRun.of(tokens, seq, (1, 2), None).requests == requests


@pytest.mark.parametrize(("version", "max_batch_size", "graph"), [
    ((0, 20), None, 0), ((0, 18), 64, 0),  # use_cuda_graph defaulted to False
    ((1, 0), None, 128), ((1, 2), 2048, 128),  # CudaGraphConfig(): max_batch_size 0 -> 128
    ((1, 2), 64, 64), ((1, 2), 8, 8),  # sizes above the executor's max_batch_size are skipped
])
def test_cuda_graph_batch_by_release(version, max_batch_size, graph):
    assert DryRun.of(8192, 4096, version, max_batch_size).graph_batch == graph


def test_items_sum_the_forward_and_the_largest_graph():
    spec = load_model("Qwen/Qwen3-0.6B")
    act, cudagraph = DryRun.of(8192, 40960, (1, 2), None).items(spec, 1)
    forward, _ = activation_bytes(spec, 8192, 1, 1)
    workspace, _ = attention_workspace(spec, 8192, 1)
    step, _ = activation_bytes(spec, 128, 1, 0)
    assert (act.name, act.bytes) == ("activation", forward + workspace)
    assert (cudagraph.name, cudagraph.bytes) == ("cudagraph", step + 128 * spec.vocab_size * (spec.dtype_bytes + 4))
    assert [i.name for i in DryRun.of(8192, 40960, (0, 20), None).items(spec, 1)] == ["activation"]


def test_the_plan_subtracts_the_graph_pool_at_1_x():
    plan = max_batch("Qwen/Qwen3-0.6B", gpu="H100-SXM-80GB", engine="trtllm", engine_version="1.2.1",
                     settings=Settings(free_gpu_memory_fraction=0.9))
    g = plan.per_gpu
    assert g.cudagraph_bytes > 0
    assert g.kv_cache_bytes == int((g.budget_bytes - g.weights_bytes - g.activation_bytes - g.cudagraph_bytes
                                    - g.non_torch_bytes) * 0.9)


def test_attention_workspace_is_the_logged_one_less_its_small_buffers():
    # trtllm-dgxspark-gptoss120b-111rc3-pytorch (tests/data/engine_logs_issue21g.yaml), 1.1.0rc3, max_num_tokens 8,192:
    # "Attention workspace size is not enough, increase the size from 0 bytes to 100738816 bytes"
    size, _ = attention_workspace(load_model("openai/gpt-oss-120b"), 8192, 1)
    assert 0 <= 100738816 - size < 10 * 1024


def test_attention_workspace_splits_the_query_heads_over_tp():
    spec = load_model("Qwen/Qwen3-0.6B")  # 16 query heads x 128
    one, _ = attention_workspace(spec, 8192, 1)
    two, _ = attention_workspace(spec, 8192, 2)
    assert one - two == 8192 * 8 * 128 * spec.dtype_bytes
