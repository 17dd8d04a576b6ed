"""TensorRT-LLM's settings as kvplan plans them (``TRTLLM.settings``): the command line is generated from this
table."""

from __future__ import annotations

from kvplan.engines.settings import (MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS, OFFLOAD_LINK, Setting, choice,
                                     engine_int, expert_parallel, number)

SETTINGS: tuple[Setting, ...] = (
    Setting("free_gpu_memory_fraction", ("--free-gpu-memory-fraction",), "The KV fraction (0.9).", "settings",
            convert=number, serve=("free_gpu_memory_fraction",)),
    MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS, expert_parallel("enable_attention_dp"), OFFLOAD_LINK,
    # KvCacheConfig.max_tokens: calculateMaxNumBlocks keeps the smaller of it and the fraction's tokens
    Setting("max_kv_tokens", ("--kv-max-tokens",), "A cap on the KV pool's tokens: the pool holds the smaller of it "
            "(rounded up to whole blocks) and what the memory allows.", "settings", convert=engine_int,
            serve=("kv_cache_config.max_tokens",)),
    # --backend of trtllm-serve / trtllm-bench, LLM(backend=...): PyTorch from 0.17, the default from 1.0 (variant.py)
    Setting("trtllm_backend", ("--trtllm-backend",), "TensorRT-LLM's backend, pytorch (PyExecutor, from 0.17) or "
            "engine (a prebuilt TensorRT engine, the C++ runtime). Default: the release's (engine before 1.0, "
            "pytorch from 1.0).", "settings", convert=choice("pytorch", "engine"), serve=("--backend",)),
)
