"""The PyTorch flow's KV sizing terms read from TensorRT-LLM's code (kvplan/engines/trtllm/warmup.py): the dry run's
dummy context requests and the CUDA-graph pool captured before the estimation (default from 1.0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.budgets import Settings
from kvplan.budgets.base import activation_bytes
from kvplan.engines.trtllm.warmup import (
    DryRun,
    attention_workspace,
    block_offset_table,
    kv_pools,
)
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
    table = next(i.bytes for i in plan.items if i.name == "block_offsets")
    assert g.cudagraph_bytes > 0
    assert g.kv_cache_bytes == int((g.budget_bytes - g.weights_bytes - g.activation_bytes - g.cudagraph_bytes
                                    - table - g.non_torch_bytes) * 0.9)


def test_block_offset_table_is_the_logged_blocks_per_sequence_times_the_rows():
    # trtllm-lm7-smollm2-135m-rtx4070super-121-f090 (tests/data/engine_logs_issue21i.yaml), --max_seq_len 2048:
    # "Max KV cache blocks per sequence: 65 [window size=2049], tokens per block=32"; max_batch_size 2,048 (default)
    smollm = Path(__file__).parent / "data" / "hf_configs_transcribed" / "HuggingFaceTB__SmolLM2-135M-Instruct.json"
    table = block_offset_table(load_model(str(smollm)), 2048, None, 1)
    assert (table.name, table.tag) == ("block_offsets", "computed")
    assert table.bytes == 1 * 2048 * 2 * 65 * 4


@pytest.mark.parametrize(("seq", "batch", "beams", "expected"), [
    (40960, None, 1, 2048 * 2 * 1281 * 4),  # Qwen3's 40,960 positions: 1,281 blocks of 32 (20 MiB)
    (131072, 64, 1, 64 * 2 * 4097 * 4),  # the rows are max_batch_size x beams
    (2048, 8, 4, 32 * 2 * 65 * 4),
])
def test_block_offset_table_grows_with_the_sequence_and_the_batch(seq, batch, beams, expected):
    assert block_offset_table(load_model("Qwen/Qwen3-0.6B"), seq, batch, beams).bytes == expected


def test_block_offset_table_has_a_pool_per_window():
    spec = load_model("google/gemma-3-1b-it")  # sliding 512 and full layers: two pools
    assert kv_pools(spec, 32768) == 2
    assert kv_pools(spec, 512) == 1  # a window as long as the sequence shares the full pool
    assert block_offset_table(spec, 32768, 1, 1).bytes == 2 * 1 * 2 * 1025 * 4


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
