"""What the PyTorch flow's KV sizing counts as used besides the weights (``KvCacheCreator``), term by term.

Read from NVIDIA/TensorRT-LLM (the 1.1 / 1.2-era files of the code index; find_string ids in brackets, their commits
are not printed by the index: the 1.0 - 1.2 lines all read so):

- ``tensorrt_llm/_torch/pyexecutor/py_executor_creator.py`` (1083207948): the model is loaded, an executor is built
  with a small estimation KV pool, warmed up (autotuner, then the CUDA graphs), then
  ``KvCacheCreator.configure_kv_cache_capacity`` sizes the real pool, and the graphs are released and captured again.
- ``_util.py`` ``configure_kv_cache_capacity`` (843526953): after ``empty_cache`` and ``reset_peak_memory_stats`` it runs
  the dummy requests; peak = torch's ``allocated_bytes.all.peak`` (the weights, every torch buffer the warm-up left,
  the dry run's activations) + the memory used outside torch after ``empty_cache`` (CUDA context, libraries, NCCL,
  the CUDA-graph private pool's reserved blocks, the estimation KV pool); ``_cal_max_memory``: KV = fraction x
  (total - peak + the estimation KV pool). The estimation pool is added back: it is no term here.
- ``_create_dummy_context_requests`` (843526953): context-only requests of ``min(max_num_tokens, max_seq_len - 1)``
  tokens each, ``max_tokens=1``, until ``max_num_tokens`` tokens are queued.
- ``tensorrt_llm/_torch/modules/logits_processor.py`` (708156501, 52556081584): without context logits only each
  request's last token goes through the lm_head, and the logits are made fp32 (``logits.float()``).
- ``llm_args.py`` (1520735490, 1090804222): ``cuda_graph_config`` defaults to ``CudaGraphConfig()`` whose
  ``max_batch_size`` 0 means 128, since commit c9e7f831dc (2025-07-14, "Enable cuda graph by default", #5480: the
  1.0 line); before, the PyTorch flow's ``use_cuda_graph`` defaulted to False.
  ``model_engine.py`` (1034563403) captures the generation-only graphs from the largest batch down, skipping sizes
  above the executor's max_batch_size; ``cuda_graph_runner.py`` (2550723763) keeps each graph's output as a weak
  reference in one shared pool: the pool holds the largest graph's decode step, lm_head output and its fp32 copy.
- ``_util.py`` ``instantiate_sampler`` (843526953, the 1.1-era file): ``sampler_type`` auto takes the C++
  ``TRTLLMSampler`` (decoder buffers) only for beam search, else ``TorchSampler``; ``sampler.py``
  ``TorchSampler._create_store`` (4516135568): with one beam, a few int / float tensors of max_batch_size x (draft
  tokens + 1) (x 20 top-logprobs): kilobytes to a megabyte, no term here. (1.0's default sampler is not read here.)

- ``cpp/tensorrt_llm/common/attentionOp.cpp`` ``getWorkspaceSizeForContext`` (190937516): the attention op's
  workspace, a torch tensor the warm-up grows and keeps (so inside the peak), is for paged context FMHA (separate Q
  and KV, the PyTorch flow's) a cuBLAS workspace (``CUBLAS_WORKSPACE_SIZE``, 32 MiB) + a Q buffer of max_num_tokens x
  the rank's query width (1 B per element with FP8 context FMHA, else the model dtype) + 8 B per token (tokens_info)
  + a few small buffers. Checked on the one log that prints it (trtllm-dgxspark-gptoss120b-111rc3-pytorch,
  tests/data/engine_logs_issue21g.yaml: gpt-oss-120b, 8,192 tokens, 64 x 64 query: "increase the size from 0 bytes
  to 100738816 bytes" = 33,554,432 + 67,108,864 + 65,536 + 9,984 B of small buffers and alignment).

- ``tensorrt_llm/_torch/attention_backend/trtllm.py`` ``TrtllmAttentionMetadata.__post_init__`` (3771944625,
  51955176560, 55410938029): the executor's metadata holds a device KV block-offset table, int32
  ``[num_pools, max_num_sequences, 2, max_blocks_per_seq]`` (``get_empty(..., cache_name="kv_cache_block_offsets")``),
  a torch tensor created with the executor, so inside the measured peak (the weights' reading "inside torch"). Its rows
  are max_batch_size x beams (2,048 by default), its columns the KV manager's blocks per sequence: the one table is as
  wide as the widest window (``getOffsetTableDimensions``, kvCacheManager.h), ``ceil((max_seq_len + 1) / 32)`` (the
  logs' "Max KV cache blocks per sequence: 65 [window size=2049]" at --max_seq_len 2048). 20 MiB at 40,960 tokens,
  64 MiB at 131,072, 512 MiB at 1M: it grows with max_seq_len. The CUDA graphs' own metadata (batch <= 128 rows
  each) and a separate draft table are not planned.

Not derivable from the code: the memory outside torch, ``extra_cost = (total - free) - allocated_bytes.all.current``
read after ``empty_cache`` once the dry run is done (``configure_kv_cache_capacity``). What the code puts there: the
estimation KV pool (``WindowBlockManager::allocatePools``: ``BufferManager::gpuSync``, a plain cudaMalloc; added back
exactly by ``_cal_max_memory``'s ``allocated_bytes`` = ``mAllocatedBytes``, kvCacheManager.cpp), the CUDA-graph pool's
free blocks (the ``cudagraph`` item) and the graph executables themselves (34 by default: batch 1 - 32, 64, 128,
``CudaGraphConfig._generate_cuda_graph_batch_sizes`` without padding, llm_args.py; their size is the driver's), the
context FMHA cubins of the GPU's SM and dtype (``loadXMMAKernels``: ``cuModuleLoadData`` + ``cuModuleGetFunction`` of
every matching entry of fmha_cubin.h; about 14 MiB at SM 9.0 bf16, 9 MiB at SM 8.9 bf16, 17 MiB at SM 8.9 fp16, far
below the logs' 0.7 - 0.9 GiB gaps; decoding's XQA kernel is built by NVRTC, the precompiled XQA cubins load only for
speculative decoding or TRTLLM_ENABLE_XQA_JIT=0), cuBLAS / cuBLASLt handles, the CUDA context, NCCL at tp > 1. None is
sized by the model or the settings: budget.py's assumed ``non_torch`` item (the C++ primary memory pool, release
threshold UINT64_MAX in cudaMemPool.cpp, holds nothing before the estimation with the default TorchSampler).
"""

from __future__ import annotations

from kvplan.budgets.base import MemoryItem, activation_bytes
from kvplan.engines.trtllm.layout import DEFAULT_TOKENS_PER_BLOCK
from kvplan.engines.version import Version
from kvplan.record import dataclass
from kvplan.spec import KVAttention, ModelSpec

CUDA_GRAPHS_DEFAULT_SINCE = (1, 0)  # llm_args.py: cuda_graph_config=CudaGraphConfig() (#5480; use_cuda_graph=False before)
CUDA_GRAPH_MAX_BATCH = 128  # CudaGraphConfig.max_batch_size 0 -> 128 (llm_args.py)
DEFAULT_MAX_BATCH = 2048  # the LLM API's / trtllm-serve's max_batch_size default in the PyTorch flow
CUBLAS_WORKSPACE = 32 << 20  # CUBLAS_WORKSPACE_SIZE: the context workspace's first buffer (attentionOp.cpp)
TOKENS_INFO_BYTES = 8  # int2 (batch index, position) per token (attentionOp.cpp tokens_info_size)
OFFSET_BYTES = 4  # the block-offset table is int32 (trtllm.py kv_cache_block_offsets)


def attention_workspace(spec: ModelSpec, tokens: int, tp: int) -> tuple[int, str]:
    """The attention op's context workspace for ``tokens`` tokens on one of ``tp`` ranks (attentionOp.cpp), less its
    small buffers (under 10 KiB); the Q buffer in the model dtype (FP8 context FMHA's 1 B is not planned)."""
    attn = [layer for layer in spec.layers if isinstance(layer, KVAttention)]
    heads = spec.num_attention_heads or 32
    head_dim = attn[0].head_dim if attn else (spec.hidden_size or 4096) // heads
    width = max(1, heads // tp) * head_dim
    size = CUBLAS_WORKSPACE + tokens * (width * spec.dtype_bytes + TOKENS_INFO_BYTES)
    return size, (f"attention workspace 32 MiB (cuBLAS) + {tokens:,} tokens x ({width:,} query x "
                  f"{spec.dtype_bytes} B + {TOKENS_INFO_BYTES} B)")


def kv_pools(spec: ModelSpec, max_seq_len: int) -> int:
    """The KV manager's pools: one per attention window and KV-head count (``WindowBlockManager``'s pools per
    window, kvCacheManager.cpp); windows at least as long as the sequence share the full-attention pool."""
    keys = set()
    for layer in spec.layers:
        if getattr(layer, "caches_tokens", False):
            span = getattr(layer, "span", None)
            keys.add((span if span is not None and span < max_seq_len else None, getattr(layer, "kv_heads", 1)))
    return len(keys)


def block_offset_table(spec: ModelSpec, max_seq_len: int, max_batch: int | None, beams: int,
                       tokens_per_block: int = DEFAULT_TOKENS_PER_BLOCK) -> MemoryItem:
    """The attention metadata's device KV block-offset table (trtllm.py ``TrtllmAttentionMetadata``): int32
    ``[pools, max_batch_size x beams, 2, blocks per sequence]``; the KV manager's sequence is max_seq_len + 1."""
    rows = (max_batch or DEFAULT_MAX_BATCH) * max(1, beams)
    blocks = -(-(max_seq_len + 1) // tokens_per_block)
    pools = kv_pools(spec, max_seq_len)
    return MemoryItem("block_offsets", pools * rows * 2 * blocks * OFFSET_BYTES, "computed",
                      f"the attention metadata's KV block-offset table: {pools} pool(s) x {rows:,} sequences x "
                      f"K/V x {blocks:,} blocks of {tokens_per_block} tokens x {OFFSET_BYTES} B (trtllm.py)")


@dataclass(frozen=True)
class DryRun:
    """The estimation's shape: the dummy context requests and the largest CUDA graph captured before it."""

    tokens: int  # max_num_tokens queued as dummy context requests
    requests: int  # how many: each gives one fp32 logits row
    graph_batch: int  # the largest generation-only CUDA graph's batch (0: no CUDA graphs)

    @staticmethod
    def of(tokens: int, max_seq_len: int, version: Version, max_batch: int | None) -> DryRun:
        per_request = max(1, min(tokens, max_seq_len - 1))
        graphs = version >= CUDA_GRAPHS_DEFAULT_SINCE
        batch = min(CUDA_GRAPH_MAX_BATCH, max_batch or DEFAULT_MAX_BATCH) if graphs else 0
        return DryRun(tokens, -(-tokens // per_request), batch)

    def items(self, spec: ModelSpec, tp: int) -> list[MemoryItem]:
        forward, how = activation_bytes(spec, self.tokens, tp, self.requests)
        workspace, kept = attention_workspace(spec, self.tokens, tp)
        items = [MemoryItem("activation", forward + workspace, "assumed",
                            f"the estimation dry run: {how} (one per dummy context request, _util.py) + {kept}")]
        if self.graph_batch:
            step, _ = activation_bytes(spec, self.graph_batch, tp, 0)
            vocab = spec.vocab_size or 32000
            logits = self.graph_batch * vocab * (spec.dtype_bytes + 4)  # the lm_head's output and its fp32 copy
            items.append(MemoryItem("cudagraph", step + logits, "computed",
                                    f"the CUDA-graph pool captured before the estimation: the largest graph, a "
                                    f"decode step of batch {self.graph_batch:,} and its {vocab:,}-wide logits "
                                    "(model dtype and fp32)"))
        return items
