"""``vllm serve`` flags as vLLM's argparse reads them (``vllm/engine/arg_utils.py``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from kvplan.engines.serve import ServeFlags
from kvplan.errors import UsageError

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


_DRAFTLESS = frozenset({"ngram", "mtp"})


def read_speculation(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``max_batch``'s speculative keywords from ``--speculative-config`` JSON (or the older
    ``--speculative-model`` / ``--num-speculative-tokens`` flags).

    ``SpeculativeConfig`` (``vllm/config/speculative.py``): without a ``method``, a ``model`` of
    ``ngram`` means n-gram, a model whose name says EAGLE-3 / EAGLE is an EAGLE head, any other model
    a draft model; ``*_mtp`` methods (deepseek_mtp, ...) are MTP."""
    raw = settings.get("speculative_config")
    config: Any = {}
    if raw is not None:
        try:
            config = json.loads(str(raw))
        except json.JSONDecodeError:
            raise UsageError(f"--speculative-config {raw}: not JSON", field="speculative_config") from None
        if not isinstance(config, dict):
            raise UsageError("--speculative-config: not a JSON object", field="speculative_config")
    model = config.get("model", settings.get("speculative_model"))
    tokens = config.get("num_speculative_tokens", settings.get("num_speculative_tokens"))
    method = config.get("method")
    if method is None and model is None and tokens is None:
        return {}
    if method is None:
        name = str(model or "").lower()
        method = ("ngram" if name in ("ngram", "[ngram]") else "eagle3" if "eagle3" in name
                  else "eagle" if "eagle" in name else "draft_model")
    method = str(method).lower()
    if method.endswith("_mtp"):
        method = "mtp"
    try:
        count = int(tokens) if tokens is not None else None
    except (TypeError, ValueError):
        raise UsageError(f"num_speculative_tokens {tokens}: not an integer", field="num_speculative_tokens") from None
    return {"speculative_method": method, "num_speculative_tokens": count,
            "speculative_model": None if method in _DRAFTLESS else model}


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
        ("--config", "config"), ("--speculative-config", "speculative_config"),
        ("--speculative-model", "speculative_model"), ("--num-speculative-tokens", "num_speculative_tokens"),
    ),
    underscores=True,
    images=(r"(^|/)vllm-openai(:|@|$)|(^|/)vllm/vllm-openai|(^|/)vllm-tpu(:|$)",),
    fp8_kv_flag="--kv-cache-dtype fp8",
    parse_int=vllm_int,
    speculation=read_speculation,
)
