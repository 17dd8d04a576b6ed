"""What TensorRT-LLM's C++ runtime (a prebuilt TensorRT engine: releases before 1.0, ``--backend tensorrt``)
allocates before it sizes the KV pool, as kvplan plans it.

``TrtGptModelInflightBatching``'s constructor (cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp)
deserializes the engine ("Loaded engine size": the weights), creates the execution context ("Allocated X MiB for
execution context memory": TensorRT's activation memory, fixed at build time by max_batch_size / max_num_tokens /
max_seq_len, docs/source/reference/memory.md "Activation size"), then ``createBuffers`` ("Allocated X GB GPU memory
for runtime buffers") and ``createDecoder`` ("... for decoder"), and only then ``createKvCacheManager``, which
takes ``free_gpu_memory_fraction`` of the memory still free. The two buffer sets are sized by the runtime's
max_batch_size B, max_beam_width W, max_seq_len S and the padded vocabulary V (``getVocabSizePadded``: the
vocabulary rounded up to a multiple of the world size); this module sums the tensors the code shapes from them:

runtime buffers (batch_manager/runtimeBuffers.cpp ``RuntimeBuffers::reshape`` and the decoder's I/O buffers):
  the engine's ``logits`` output [B x W, V] and the decoder's copy of it, in the logits dtype (fp32: assumed,
  trtllm-build's default ``logits_dtype``), and the cache indirection of beam search, input and output
  [B, W, S] int32.
decoder (runtime/gptDecoderBatched.cpp ``GptDecoderBatched::setup`` and the layers ``IGptDecoder::create`` makes):
  ids, parentIds, logProbs [B, W, S] and logProbsTiled [S, B, W] (4 B each; gatheredIds too when W > 1);
  the embedding bias [B, V] in the logits dtype; the occurrence-penalty workspace (layers/penaltyLayer.cpp
  ``allocateWorkspace``: B x W x V int32, twice for beam search); the sampling workspace (kernels/samplingTopPKernels
  ``getTopPWorkspaceSizes``: sorted log-probs and sorted ids of B x V, and cub's radix-sort copies of both).

Against the two logs that print these lines with a known build (tests/data/engine_logs_*.yaml): the 0.12 trtllm-bench
H100 log (B 4,096, S 4,098, GPT-J-6B's 50,400 tokens: the doc names Llama-2-7B, but the log's KV bytes per token and
weights are GPT-J-6B's, its case's derived.model_identified) logs 1.14 + 4.35 GiB, the sum below gives 6.53 GiB (119 %);
TensorRT-LLM#1188 (Qwen2.5-0.5B, trtllm-build's defaults read as B 2,048, S 32,768) logs 2.66 + 5.76 GiB, the sum
gives 10.8 GiB (128 %). The terms are computed from the code's shapes; the logits dtype and the cub copies are
assumptions, and the layers this sum leaves out (stop / bad words, beam-search hypotheses) are small next to B x V.
"""

from __future__ import annotations

from kvplan.engines.version import Version

LOGITS_BYTES = 4  # fp32 logits: trtllm-build's default logits_dtype (assumed; the 0.12 log's 1.14 GiB of runtime
# buffers hold one fp32 [B, V] copy of GPT-J's vocabulary, not the two summed below)
INT32 = 4
# The build's max_batch_size where it is not given (assumed), newest band first: 2,048 from the BuildConfig of 0.11
# (TensorRT-LLM#1188: "default value was used"); 256 before (the examples' build scripts). trtllm-build's own
# --max_batch_size default was 1 in 0.7 - 0.10 (parse_arguments of tensorrt_llm/commands/build.py, read in a 0.7-era
# and a 0.8-era copy and at 0.10.0.dev2024043000), an engine no one serves: the older logs' engines took far more.
BUILD_BATCH_DEFAULTS = (((0, 11), 2048), ((0, 0), 256))
# trtllm-build's default max_num_tokens: the engine's token dimension, which sizes its execution context (TllmRuntime's
# constructor allocates the engine's getDeviceMemorySize(), TensorRT's activation memory at the profile's largest
# shapes). 8,192 from 0.11 (BuildConfig; docs/source/features/paged-attention-ifb-scheduler.md: "8192 by default
# starting from v0.11"). Before, --max_num_tokens defaulted to None and build.py main (0.8 - 0.10) passed it to
# check_max_num_tokens (tensorrt_llm/_common.py, read at 0.10.0.dev2024043000; djl-serving#1922 cites v0.9.0's),
# which sets max_batch_size x max_input_len with the input padding removed (a padded engine's token dimension is that
# product too). --max_input_len defaulted to 1,024 (the same parse_arguments) and stays below max_seq_len, which was
# max_input_len + max_output_len in those releases.
BUILD_TOKENS_SINCE = (0, 11)
BUILD_TOKENS_DEFAULT = 8192
BUILD_INPUT_LEN_DEFAULT = 1024


def default_batch(version: Version) -> int:
    return next(batch for since, batch in BUILD_BATCH_DEFAULTS if version >= since)


def default_max_num_tokens(version: Version, batch: int, max_seq_len: int) -> tuple[int, str]:
    """The build's max_num_tokens where it is not given, for a build of ``batch`` sequences: trtllm-build's default of
    the release, and how it is made."""
    if version >= BUILD_TOKENS_SINCE:
        return BUILD_TOKENS_DEFAULT, f"max_num_tokens {BUILD_TOKENS_DEFAULT:,} (trtllm-build default from 0.11, assumed)"
    input_len = min(BUILD_INPUT_LEN_DEFAULT, max_seq_len)
    return batch * input_len, (f"max_num_tokens {batch * input_len:,} = max_batch_size {batch:,} x max_input_len "
                               f"{input_len:,} (trtllm-build's rule before 0.11, max_input_len assumed)")


def padded_vocab(vocab: int, world: int) -> int:
    """ModelConfig::getVocabSizePadded: the vocabulary rounded up to a multiple of the world size."""
    return -(-vocab // world) * world


def runtime_buffer_bytes(batch: int, beams: int, seq_len: int, vocab_padded: int) -> int:
    logits = 2 * batch * beams * vocab_padded * LOGITS_BYTES  # the engine's logits and the decoder's copy
    indirection = 2 * batch * beams * seq_len * INT32  # cache indirection, decoder input and output
    return logits + indirection


def decoder_bytes(batch: int, beams: int, seq_len: int, vocab_padded: int) -> int:
    per_token = (5 if beams > 1 else 4) * batch * beams * seq_len * INT32  # ids, parentIds, logProbs(+Tiled)
    bias = batch * vocab_padded * LOGITS_BYTES  # embeddingBias [B, V]
    penalty = (2 if beams > 1 else 1) * batch * beams * vocab_padded * INT32  # PenaltyLayer::allocateWorkspace
    sampling = 2 * batch * vocab_padded * (LOGITS_BYTES + INT32)  # sorted log-probs + ids, and cub's copies
    return per_token + bias + penalty + sampling
