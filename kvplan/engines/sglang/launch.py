"""``python -m sglang.launch_server`` for a planned deployment (flags as srt/server_args.py spells them; read
back by flags.py). ``--dp-size`` without ``--enable-dp-attention`` runs dp whole replicas of ``--tp-size`` GPUs
(the data-parallel controller); with expert parallelism SGLang's DP attention shares the experts instead."""

from __future__ import annotations

from kvplan.engines.launch import Deployment, join


def launch(d: Deployment) -> str:
    words = ["python", "-m", "sglang.launch_server", "--model-path", d.model, "--tp-size", str(d.tp)]
    if d.pp > 1:
        words += ["--pp-size", str(d.pp)]
    if d.dp > 1:
        words += ["--dp-size", str(d.dp)]
    if d.expert_parallel:
        words.append("--enable-dp-attention")
    if d.max_model_len is not None:
        words += ["--context-length", str(d.max_model_len)]
    if d.kv_dtype is not None:
        words += ["--kv-cache-dtype", d.kv_dtype]
    return join(words)
