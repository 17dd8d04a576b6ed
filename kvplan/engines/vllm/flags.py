"""``vllm serve`` flags as vLLM's argparse reads them (``vllm/engine/arg_utils.py``)."""

from __future__ import annotations

import re

from kvplan.engines.serve import ServeFlags

_HUMAN = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT])$")


def vllm_int(text: str) -> int:
    """vLLM's human-readable integers (``human_readable_int``): '32768', '32k' (10^3), '32K' (2^10), '1M'."""
    m = _HUMAN.match(text.strip())
    if m:
        number, suffix = m.groups()
        if suffix.islower():
            return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
        if "." in number:
            raise ValueError(text)
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(text.strip())


SERVE = ServeFlags(
    engine="vllm",
    commands=("vllm",),
    modules=("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"),
    flags=(
        ("--model", "model"), ("--tensor-parallel-size", "tp"), ("-tp", "tp"), ("--pipeline-parallel-size", "pp"),
        ("-pp", "pp"), ("--data-parallel-size", "dp"), ("-dp", "dp"), ("--max-model-len", "max_model_len"),
        ("--max-num-seqs", "max_num_seqs"), ("--gpu-memory-utilization", "gpu_memory_utilization"),
        ("--kv-cache-dtype", "kv_cache_dtype"), ("--max-num-batched-tokens", "max_num_batched_tokens"),
        ("--block-size", "block_size"), ("--enforce-eager", "enforce_eager"),
        ("--kv-cache-memory-bytes", "kv_cache_memory"), ("--kv-cache-memory", "kv_cache_memory"),
        ("--config", "config"),
    ),
    underscores=True,
    images=(r"(^|/)vllm-openai(:|@|$)|(^|/)vllm/vllm-openai|(^|/)vllm-tpu(:|$)",),
    fp8_kv_flag="--kv-cache-dtype fp8",
    parse_int=vllm_int,
)
