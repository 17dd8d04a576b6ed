"""TensorRT-LLM: ``free_gpu_memory_fraction`` (0.9; 0.85 before 0.8: fraction.py) of the memory free after weights and
buffers.

The PyTorch backend (the default from 1.0, ``--backend pytorch`` from 0.17: variant.py):
docs/source/reference/memory.md and ``KvCacheCreator`` (tensorrt_llm/_torch/pyexecutor/_util.py): the KV cache takes ``fraction x (total - peak memory after a warm-up
of max_num_tokens)``; the peak's terms, as the code gives them, in warmup.py (the dry run's forward and logits, the
CUDA-graph pool from 1.0, the attention metadata's KV block-offset table); the memory outside torch is the assumed
``non_torch`` item (what the code puts there and why none of it is sized by the model or the settings: warmup.py).

The C++ runtime of a prebuilt TensorRT engine (the default before 1.0): the fraction takes the
memory free after the engine's weights, its execution context, the runtime buffers and the decoder
(``TrtGptModelInflightBatching``'s constructor allocates them before ``createKvCacheManager``; runtime.py).
"""

from __future__ import annotations

from kvplan.budgets.base import GIB, GpuBudget, MemoryItem, Settings, activation_bytes, kv_item, weights_per_gpu
from kvplan.engines.protocol import Demand
from kvplan.engines.version import Version
from kvplan.spec import ModelSpec

DEFAULT_MAX_NUM_TOKENS = 8192
CONTEXT_BYTES = int(0.6 * GIB)


# TensorRT-LLM builds (and so loads) the MTP layers only with an MTP spec_config (NVIDIA/TensorRT-LLM
# tensorrt_llm/_torch/models/modeling_deepseekv3.py DeepseekV3ForCausalLM.__init__ extends model.layers
# with draft_model.mtp_layers only then; load_weights fills its own modules only)
MTP_NOT_LOADED = "TensorRT-LLM does not load without MTP speculation (modeling_deepseekv3.py load_weights)"



def _default_fraction(version: Version) -> float:
    """0.85 before 0.8, then 0.9 (fraction.py: imported only for a deployment that gives no fraction)."""
    from kvplan.engines.trtllm.fraction import default_fraction

    return default_fraction(version)


def budget(spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
           settings: Settings) -> GpuBudget:
    fraction = settings.free_gpu_memory_fraction or _default_fraction(version)
    tokens = settings.max_num_batched_tokens or DEFAULT_MAX_NUM_TOKENS
    from kvplan.engines.trtllm import variant

    # the backend the deployment runs (the release's default: a prebuilt engine before 1.0, PyTorch from 1.0)
    backend = variant.chosen(version, settings.trtllm_backend)
    # a prebuilt engine holds a tied lm_head as its own matrix (tied_head.py)
    checkpoint = weights_per_gpu(spec, tp * pp, settings, MTP_NOT_LOADED)
    weights = checkpoint
    if backend.prebuilt_engine and checkpoint.tag != "given":  # the PyTorch backend's: tied_head.py not read
        from kvplan.engines.trtllm.tied_head import with_lm_head_copy

        weights = with_lm_head_copy(checkpoint, spec, version, tp, backend)
    # the spec's "lm_head shares the embedding" is the checkpoint's: the engine's weights hold the matrix twice
    copied = ("the checkpoint's tied lm_head is held twice by the prebuilt engine: its own copy is in the weights",
              ) if weights.bytes != checkpoint.bytes else ()
    if backend.prebuilt_engine:
        from kvplan.engines.trtllm import runtime

        built: tuple[str, ...] = ()
        if settings.max_num_batched_tokens is None and version < runtime.BUILD_TOKENS_SINCE:
            # the engine's token dimension was the build's batch x input length before 0.11 (runtime.py): known only
            # with the build's batch (the assumed default batch is no engine's, so its product would be none's either)
            if settings.max_num_seqs:
                tokens, how = runtime.default_max_num_tokens(version, settings.max_num_seqs, demand.max_model_len)
                built = (f"The execution context is sized for {how}",)
            else:
                built = (f"The execution context is sized for {tokens:,} tokens, assumed: before 0.11 trtllm-build "
                         "made max_num_tokens max_batch_size x max_input_len, and the build's max_batch_size "
                         "(--max-num-seqs) is not given",)
        items = [weights, *_engine_runtime(spec, tokens, tp, pp, version, demand, settings)]
        what = "memory free after the engine, its context, runtime buffers and decoder"
        when = "before 1.0" if version < variant.PYTORCH_DEFAULT_SINCE else "with --backend tensorrt"
        said = (f"TensorRT-LLM {when} is planned as a prebuilt TensorRT engine (the C++ runtime): its execution "
                "context is kvplan's estimate unless given, its runtime buffers and decoder follow max_batch_size "
                "(--max-num-seqs) and max_seq_len (--max-model-len) of the build", *built, *copied)
    else:
        from kvplan.engines.trtllm.warmup import DryRun, block_offset_table

        # KvCacheCreator's peak: the estimation dry run and the CUDA graphs captured before it, and the executor's
        # KV block-offset table, a torch buffer inside the peak (warmup.py)
        run = DryRun.of(tokens, demand.max_model_len, version, settings.max_num_seqs)
        table = block_offset_table(spec, demand.max_model_len, settings.max_num_seqs, demand.beam_width)
        items = [weights, *run.items(spec, tp), table]
        what = "memory free after warm-up"
        said = ("TensorRT-LLM's warm-up peak is kvplan's estimate",)
    items.append(MemoryItem("non_torch", CONTEXT_BYTES, "assumed", "CUDA context, cuBLAS, NCCL"))
    # others' memory is not free (device.py)
    free = total_bytes - sum(i.bytes for i in items) - settings.device_used_bytes
    kv = kv_item(settings, int(free * fraction), f"{fraction:g} x {what}")
    items.append(kv)
    from kvplan.engines.trtllm.error import kv_error

    # a KV memory given (--kv-cache-memory, a calibration from a log) carries no error band
    error = kv_error(version) if settings.kv_cache_memory_bytes is None else None
    return GpuBudget(total_bytes, tuple(items), kv.bytes, {"free_gpu_memory_fraction": fraction,
                                                     "max_num_tokens": tokens},
                     (*backend.note(version), *said), error)


def _engine_runtime(spec: ModelSpec, tokens: int, tp: int, pp: int, version: Version, demand: Demand,
                    settings: Settings) -> list[MemoryItem]:
    """The C++ runtime's allocations before the KV pool (runtime.py): the execution context, then the runtime
    buffers and the decoder, sized by the build's max_batch_size, the beams, max_seq_len and the vocabulary. The
    decoder runs on the last pipeline rank only; every rank is planned with it (the pool of the fullest rank)."""
    from kvplan.engines.trtllm import runtime

    if settings.activation_bytes is not None:  # the log's "Allocated X MiB for execution context memory"
        context = MemoryItem("activation", settings.activation_bytes, "given", "TensorRT execution context")
    else:  # the engine's I/O logits are the runtime buffers' (below), not the context's
        act, how = activation_bytes(spec, tokens, tp, 0)
        forward = how.split(" + ")[0]  # no logits rows: "N tokens x B B"
        context = MemoryItem("activation", act, "assumed", f"TensorRT execution context, as a forward pass: {forward}")
    given = settings.max_num_seqs is not None
    batch = settings.max_num_seqs or runtime.default_batch(version)
    beams, seq = max(1, demand.beam_width), demand.max_model_len
    vocab = runtime.padded_vocab(spec.vocab_size or 32000, tp * pp)
    shape = (f"max_batch_size {batch:,}{'' if given else ' (trtllm-build default, assumed)'}, {beams} beam(s), "
             f"max_seq_len {seq:,}, vocabulary {vocab:,}")
    if settings.engine_buffer_bytes is not None:  # the log's "... GPU memory for runtime buffers" + "for decoder"
        return [context, MemoryItem("runtime_buffers", settings.engine_buffer_bytes, "given",
                                    "runtime buffers and decoder, as logged")]
    return [context,
            MemoryItem("runtime_buffers", runtime.runtime_buffer_bytes(batch, beams, seq, vocab), "computed",
                       f"logits and cache indirection: {shape}"),
            MemoryItem("decoder", runtime.decoder_bytes(batch, beams, seq, vocab), "computed",
                       f"output ids, log-probs, penalty and sampling workspaces: {shape}")]
