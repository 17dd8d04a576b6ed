"""``python -m sglang.launch_server`` flags (``python/sglang/srt/server_args.py``)."""

from __future__ import annotations

from kvplan.engines.serve import ServeFlags

SERVE = ServeFlags(
    engine="sglang",
    modules=("sglang.launch_server",),
    flags=(
        ("--model-path", "model"), ("--model", "model"), ("--tp-size", "tp"), ("--tp", "tp"),
        ("--tensor-parallel-size", "tp"), ("--pp-size", "pp"), ("--pipeline-parallel-size", "pp"),
        ("--dp-size", "dp"), ("--dp", "dp"), ("--data-parallel-size", "dp"), ("--context-length", "max_model_len"),
        ("--max-running-requests", "max_num_seqs"), ("--mem-fraction-static", "mem_fraction_static"),
        ("--kv-cache-dtype", "kv_cache_dtype"), ("--chunked-prefill-size", "max_num_batched_tokens"),
        ("--page-size", "block_size"), ("--disable-cuda-graph", "enforce_eager"), ("--config", "config"),
    ),
    fp8_kv_flag="--kv-cache-dtype fp8_e4m3",
)
