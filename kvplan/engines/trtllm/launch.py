"""``trtllm-serve`` for a planned deployment (tensorrt_llm/commands/serve.py's click options, underscores only;
read back by flags.py). trtllm-serve has no data-parallel flag: replicas are separate servers, one command each
(said by the caller); the KV dtype has a flag from 2026 (``--kv_cache_dtype``)."""

from __future__ import annotations

from kvplan.engines.launch import Deployment, join


def launch(d: Deployment) -> str:
    words = ["trtllm-serve", d.model, "--tp_size", str(d.tp)]
    if d.pp > 1:
        words += ["--pp_size", str(d.pp)]
    if d.max_model_len is not None:
        words += ["--max_seq_len", str(d.max_model_len)]
    if d.kv_dtype is not None:
        words += ["--kv_cache_dtype", d.kv_dtype]
    return join(words)
