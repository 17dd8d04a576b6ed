"""``vllm serve`` for a planned deployment (flags as vllm/engine/arg_utils.py spells them; read back by flags.py)."""

from __future__ import annotations

from kvplan.engines.launch import Deployment, join


def launch(d: Deployment) -> str:
    words = ["vllm", "serve", d.model, "--tensor-parallel-size", str(d.tp)]
    if d.pp > 1:
        words += ["--pipeline-parallel-size", str(d.pp)]
    if d.dp > 1:
        words += ["--data-parallel-size", str(d.dp)]
    if d.expert_parallel:
        words.append("--enable-expert-parallel")
    if d.max_model_len is not None:
        words += ["--max-model-len", str(d.max_model_len)]
    if d.kv_dtype is not None:
        words += ["--kv-cache-dtype", d.kv_dtype]
    return join(words)
