"""``python -m sglang.launch_server`` flags (``python/sglang/srt/server_args.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.engines.serve import ServeFlags, ServeReading, ServeRemark


def read_serve(settings: Mapping[str, Any], version: str | None) -> ServeReading:
    """The hierarchical cache, the radix cache and speculation from the settings the flags gave.

    ``ServerArgs``: ``--enable-hierarchical-cache`` (store_true) turns the host pool on; ``--hicache-ratio``
    (float, default 2.0) and ``--hicache-size`` (int GB per rank, 0 = use the ratio) size it and do nothing
    without it. ``--disable-radix-cache`` turns prefix sharing off. ``--speculative-algorithm`` (EAGLE,
    EAGLE3, NEXTN, STANDALONE, NGRAM) with ``--speculative-num-draft-tokens`` and
    ``--speculative-draft-model-path``: kvplan has no SGLang speculation rule, so the check says the plan
    leaves the draft out. ``--cpu-offload-gb`` (int GiB per GPU, the same ``set_cpu_offload_max_bytes`` as
    vLLM in ``model_executor/model_runner.py``) is not in kvplan's SGLang budget: said likewise.
    """
    options: dict[str, Any] = {}
    remarks: list[ServeRemark] = []
    sizing = [k for k in ("hicache_ratio", "hicache_size") if k in settings]
    if settings.get("enable_hierarchical_cache"):
        size = settings.get("hicache_size")
        if size:  # 0 (the default) means: size the pool by the ratio
            options["hicache_size_gb"] = float(size)
        else:
            options["hicache_ratio"] = float(settings.get("hicache_ratio", 2.0))
    elif sizing:
        remarks.append(ServeRemark("note", "not-read", f"--{sizing[0].replace('_', '-')} without "
                                   "--enable-hierarchical-cache: SGLang keeps no host KV pool", sizing[0]))
    sharing = not settings.get("disable_radix_cache")
    if not sharing:
        remarks.append(ServeRemark("note", "prefix-caching", "--disable-radix-cache: requests share no KV, a shared "
                                   "prefix is stored once per request", "disable_radix_cache"))
    algorithm = settings.get("speculative_algorithm")
    if algorithm is not None:
        tokens = settings.get("speculative_num_draft_tokens")
        draft = settings.get("speculative_draft_model_path")
        what = ", ".join([str(algorithm)] + ([f"{tokens} draft tokens"] if tokens is not None else [])
                         + ([f"draft {draft}"] if draft else []))
        remarks.append(ServeRemark("warning", "speculation-not-planned", f"the deployment speculates ({what}); "
                                   "kvplan has no SGLang speculative-decoding rule: the draft's KV pool, weights and "
                                   "slots are not in this plan, which is optimistic", "speculative_algorithm"))
    if settings.get("cpu_offload_gb"):
        remarks.append(ServeRemark("warning", "offload-not-planned", f"--cpu-offload-gb {settings['cpu_offload_gb']}: "
                                   "kvplan's SGLang budget does not take weight offload: the plan counts every "
                                   "weight on the GPU (pessimistic)", "cpu_offload_gb"))
    return ServeReading(engine_options=tuple(sorted(options.items())), sharing=sharing, remarks=tuple(remarks))


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
        ("--enable-hierarchical-cache", "enable_hierarchical_cache"), ("--hicache-ratio", "hicache_ratio"),
        ("--hicache-size", "hicache_size"), ("--disable-radix-cache", "disable_radix_cache"),
        ("--speculative-algorithm", "speculative_algorithm"),
        ("--speculative-num-draft-tokens", "speculative_num_draft_tokens"),
        ("--speculative-draft-model-path", "speculative_draft_model_path"), ("--cpu-offload-gb", "cpu_offload_gb"),
    ),
    booleans=("enforce_eager", "enable_hierarchical_cache", "disable_radix_cache"),
    floats=("hicache_ratio",),
    fp8_kv_flag="--kv-cache-dtype fp8_e4m3",
    reader=read_serve,
)
