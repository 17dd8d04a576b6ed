"""TensorRT-LLM's settings as kvplan plans them (``TRTLLM.settings``): the command line is generated from this
table."""

from __future__ import annotations

from kvplan.engines.settings import (EXPERT_PARALLEL, MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS, OFFLOAD_LINK, Setting,
                                     number)

SETTINGS: tuple[Setting, ...] = (
    Setting("free_gpu_memory_fraction", ("--free-gpu-memory-fraction",), "The KV fraction (0.9).", "settings",
            convert=number, serve=("free_gpu_memory_fraction",)),
    MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS, EXPERT_PARALLEL, OFFLOAD_LINK,
)
