"""``kvplan max-batch``: what a GPU deployment serves, by the chosen engine's memory rules."""

from __future__ import annotations

from collections.abc import Callable

from pathlib import Path
from typing import Optional

import typer

FIELDS = {"kv_dtype": "kv_cache_dtype", "catalog": "gpu_catalog", "kv_cache_memory_bytes": "kv_cache_memory",
          "name": "model", "format": "fmt", "kv_offloading_bytes": "kv_offloading_size",
          "lmcache": "kv_offloading_backend", "cpu_offload_bytes": "cpu_offload_gb",
          "swap_space_bytes": "swap_space", "hicache_size_gb": "hicache_size"}
"""Library parameter (``kvplan.max_batch``, ``Settings``) -> this command's parameter, where they differ."""


def command() -> Callable[..., None]:
    """The typer command function."""
    return max_batch_command


def max_batch_command(
    model: str = typer.Argument(..., help="Bundled model id, config.json, model directory or YAML spec."),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="GPU type from `kvplan gpus` (H100-80GB, A100-80GB, RTX-4090, ...)."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory", help="Any other GPU: its total memory, e.g. 47.5GiB."),
    gpu_catalog: Optional[Path] = typer.Option(None, "--gpu-catalog", help="A YAML file adding GPUs to the catalog."),
    tp: Optional[str] = typer.Option(None, "--tp", help="Tensor-parallel size (default 1; --solve gpus keeps it when given)."),
    pp: Optional[str] = typer.Option(None, "--pp", help="Pipeline-parallel size (default 1; --solve gpus keeps it when given)."),
    dp: Optional[str] = typer.Option(None, "--dp", help="Data-parallel ranks (default 1), each with its own KV cache for its own requests."),
    enable_expert_parallel: bool = typer.Option(False, "--enable-expert-parallel", "-ep", help="MoE: the --dp ranks "
                                                "share one copy of the routed experts, spread over tp x dp GPUs (vLLM "
                                                "--enable-expert-parallel; SGLang --enable-dp-attention; TensorRT-LLM "
                                                "enable_attention_dp): attention and the KV cache stay per rank."),
    gpus_per_node: Optional[str] = typer.Option(None, "--gpus-per-node", help="--solve gpus: GPUs a node holds "
                                                "(default 8): tp is searched within a node, pipeline stages across nodes."),
    engine: str = typer.Option("vllm", "--engine", "-e", help="vllm, sglang, trtllm, llamacpp or hf; several "
                               "(vllm,sglang,trtllm) compare them, one plan each."),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="Which release's accounting (default: newest)."),
    kv_cache_dtype: str = typer.Option("auto", "--kv-cache-dtype", "--kv-dtype", help="KV cache dtype (auto, fp8, ...)."),
    max_model_len: Optional[str] = typer.Option(None, "--max-model-len", help="Longest request (default: the model's limit). Read as vLLM reads it: 32k = 32,000, 32K = 32,768."),
    context: Optional[str] = typer.Option(None, "--context", "-c", help="Context for the max batch (default: --max-model-len)."),
    batch: str = typer.Option("1", "--batch", "-b", help="Batch for the max context."),
    solve: str = typer.Option("batch", "--solve", help="batch, context or gpus (with --concurrency)."),
    concurrency: Optional[str] = typer.Option(None, "--concurrency", help="Target concurrent sequences for --solve gpus (requests of n with --n or --beam-width)."),
    block_size: Optional[str] = typer.Option(None, "--block-size", help="Engine page size in tokens."),
    gpu_memory_utilization: Optional[str] = typer.Option(None, "--gpu-memory-utilization", help="vLLM: fraction of the GPU (default 0.92; 0.90 before v0.21)."),
    kv_cache_memory: Optional[str] = typer.Option(None, "--kv-cache-memory", help="KV memory per GPU as the engine logged it (e.g. 30.5GiB): skips the budget estimate."),
    max_num_batched_tokens: Optional[str] = typer.Option(None, "--max-num-batched-tokens", help="vLLM: tokens per forward pass."),
    max_num_seqs: Optional[str] = typer.Option(None, "--max-num-seqs", help="vLLM: sequences per batch."),
    enforce_eager: bool = typer.Option(False, "--enforce-eager", help="vLLM: no CUDA graphs."),
    usage_context: str = typer.Option("serve", "--usage-context", help="vLLM: how it is started, serve (`vllm serve`) "
                                      "or llm (the LLM class); the batch defaults differ."),
    mem_fraction_static: Optional[str] = typer.Option(None, "--mem-fraction-static", help="SGLang's static memory fraction."),
    free_gpu_memory_fraction: Optional[str] = typer.Option(None, "--free-gpu-memory-fraction", help="TensorRT-LLM's KV fraction (0.9)."),
    weights_bytes: Optional[str] = typer.Option(None, "--weights-bytes", help="Weights per GPU, e.g. 14.99GiB (default: the checkpoint / ranks)."),
    shared_prefix: Optional[str] = typer.Option(None, "--shared-prefix", help="Leading tokens common to every request "
                                                "(a system prompt): the larger batch the engine's sharing allows."),
    n: Optional[str] = typer.Option(None, "--n", help="Parallel samples per request (default 1, at most 16,384 as vLLM), e.g. 4: "
                                    "--batch, the max batch and --concurrency count requests of n sequences (vLLM, "
                                    "SGLang, transformers)."),
    beam_width: Optional[str] = typer.Option(None, "--beam-width", help="Beams per request (default 1), counted as "
                                             "--n (vLLM, TensorRT-LLM, transformers); not with --n."),
    prompt_len: Optional[str] = typer.Option(None, "--prompt-len", help="The prompt part of --context that samples "
                                             "or beams share (default: all of it)."),
    speculative_method: Optional[str] = typer.Option(None, "--speculative-method", help="Speculative decoding (vLLM, "
                                                     "SGLang, TensorRT-LLM, transformers): ngram, eagle, eagle3, mtp or "
                                                     "draft_model (default with --speculative-model: from its name, as "
                                                     "vLLM infers it)."),
    num_speculative_tokens: Optional[str] = typer.Option(None, "--num-speculative-tokens", help="Draft tokens per step (k), e.g. 5; "
                                                          "needed except with mtp (default: the MTP layer count)."),
    speculative_model: Optional[str] = typer.Option(None, "--speculative-model", help="The draft model or EAGLE head."),
    fmt: str = typer.Option("table", "--format", "-f", help="table, json, csv or markdown."),
    calibration: Optional[Path] = typer.Option(None, "--calibration", help="A calibration file (`kvplan log --save`): "
                                               "plan from the items the engine measured, when model, GPU and engine version match."),
    kv_cache: Optional[str] = typer.Option(None, "--kv-cache", help="hf: quantized (transformers' QuantizedCache)."),
    backend: Optional[str] = typer.Option(None, "--backend", help="hf QuantizedCache backend: quanto, hqq, fp8."),
    nbits: Optional[int] = typer.Option(None, "--nbits", help="hf QuantizedCache bits."),
    residual_length: Optional[int] = typer.Option(None, "--residual-length", help="hf QuantizedCache residual."),
    q_group_size: Optional[int] = typer.Option(None, "--q-group-size", help="hf QuantizedCache group size."),
    axis_key: Optional[int] = typer.Option(None, "--axis-key", help="hf QuantizedCache key axis."),
    axis_value: Optional[int] = typer.Option(None, "--axis-value", help="hf QuantizedCache value axis."),
    evict: Optional[str] = typer.Option(None, "--evict", help="hf: sink=4,window=4092 (StreamingLLM) or heavy=H,recent=R (H2O)."),
    press: Optional[str] = typer.Option(None, "--press", help="hf: an NVIDIA kvpress press (snapkv, pyramidkv, ...)."),
    compression_ratio: Optional[str] = typer.Option(None, "--compression-ratio", help="The press's compression ratio."),
    kv_offloading_size: Optional[str] = typer.Option(None, "--kv-offloading-size", help="vLLM: host KV tier for the whole deployment, e.g. 200GiB (a bare number is GiB)."),
    kv_offloading_backend: Optional[str] = typer.Option(None, "--kv-offloading-backend", help="vLLM: native (the default) or lmcache: LMCache's CPU tier gets --kv-offloading-size / (tp x pp) GiB per rank."),
    lmcache_config: Optional[str] = typer.Option(None, "--lmcache-config", help="vLLM with LMCache: its YAML config file (what LMCACHE_CONFIG_FILE names): chunk size, CPU and disk tiers."),
    swap_space: Optional[str] = typer.Option(None, "--swap-space", help="vLLM V0 (< 0.11): host swap space per GPU, GiB."),
    hicache_ratio: Optional[str] = typer.Option(None, "--hicache-ratio", help="SGLang --enable-hierarchical-cache: host pool = ratio x device pool (SGLang's default 2.0)."),
    hicache_size: Optional[str] = typer.Option(None, "--hicache-size", help="SGLang: host pool GB (10^9 B) per rank, instead of the ratio."),
    scheduling: Optional[str] = typer.Option(None, "--scheduling", help="vLLM: async (the default from about 0.12) or sync."),
    swa_full: bool = typer.Option(False, "--swa-full", help="llama.cpp: a full-size cache for sliding-window layers."),
    cpu_offload_gb: Optional[str] = typer.Option(None, "--cpu-offload-gb", help="vLLM, SGLang: GiB of weights per GPU kept in host memory (the GPU holds the rest)."),
    no_kv_offload: bool = typer.Option(False, "--no-kv-offload", "-nkvo", help="llama.cpp: the KV cache stays in host memory (the GPU holds none of it); give the host memory it may use as --kv-cache-memory."),
    offload_link: Optional[str] = typer.Option(None, "--offload-link", help="GPU-host link of the offload tier: pcie4-x16, pcie5-x16 (default), nvlink-c2c."),
    quantization: Optional[str] = typer.Option(None, "--quantization", "-q", help="vLLM, SGLang: runtime quantization "
                                               "of an unquantized checkpoint, as the engine loads it: fp8 (linear "
                                               "layers 1 byte a weight) or bitsandbytes (4-bit nf4)."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="vLLM, SGLang: the model dtype, as the engine reads "
                                        "--dtype (auto, half, float16, bfloat16, float, float32): weights, "
                                        "activations and the auto KV cache follow it."),
    allow_long_max_model_len: bool = typer.Option(False, "--allow-long-max-model-len", help="Plan a --max-model-len "
                                                  "past the model's limit, as vLLM does with "
                                                  "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (SGLang: "
                                                  "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1); refused without it."),
) -> None:
    """How many concurrent sequences fit (or how long a context, or how many GPUs) under an engine's memory rules.

    Examples:

      kvplan max-batch meta-llama/Llama-3.1-70B --gpu H100-80GB --tp 4 --max-model-len 32k

      kvplan max-batch deepseek-ai/DeepSeek-V3 --gpu H200 --tp 8 --kv-cache-dtype fp8

      kvplan max-batch Qwen/Qwen3-8B --gpu RTX-4090 --engine sglang --solve context --batch 16

      kvplan max-batch Qwen/Qwen3-14B --gpu A100-80GB --kv-cache-memory 30.5GiB

      kvplan max-batch meta-llama/Llama-3.1-8B --gpu H100 -c 5k --prompt-len 4k --n 4 --shared-prefix 2k

    Exit status 1 when not even one sequence of --max-model-len (or request of --n samples) fits: the message says why.
    """
    import sys

    from kvplan.budgets import Settings
    from kvplan.cli.values import engine_int, number, per_request_count, prefix_count, whole
    from kvplan.cli.estimate import cache_options
    from kvplan.errors import UsageError
    from kvplan.hardware import parse_bytes
    from kvplan.plan import max_batch
    from kvplan.units import parse_count

    from kvplan.plan import CapacityPlan
    from kvplan.render.formats import check_format, write
    from kvplan.units import parse_name_list

    fmt = fmt.lower()
    check_format(CapacityPlan, fmt)
    engines = list(dict.fromkeys(parse_name_list(engine, "engine")))
    if len(engines) > 1 and calibration is not None:  # a calibration file is one engine's measurements
        raise UsageError("a calibration file calibrates one engine: give one --engine with it", field="calibration")
    settings = Settings(
        gpu_memory_utilization=number(gpu_memory_utilization, "gpu_memory_utilization"),
        kv_cache_memory_bytes=parse_bytes(kv_cache_memory, "kv_cache_memory") if kv_cache_memory is not None else None,
        max_num_batched_tokens=engine_int(max_num_batched_tokens, "max_num_batched_tokens"),
        max_num_seqs=engine_int(max_num_seqs, "max_num_seqs"), enforce_eager=enforce_eager,
        mem_fraction_static=number(mem_fraction_static, "mem_fraction_static"),
        free_gpu_memory_fraction=number(free_gpu_memory_fraction, "free_gpu_memory_fraction"),
        weights_bytes=parse_bytes(weights_bytes, "weights_bytes") if weights_bytes is not None else None,
        usage_context=usage_context,  # type: ignore[arg-type]  # Settings checks the value
        cpu_offload_bytes=_gib(cpu_offload_gb, "cpu-offload-gb") or None,
    )
    mml = engine_int(max_model_len, "max_model_len")
    tp, pp, dp = whole(tp, "tp"), whole(pp, "pp"), whole(dp, "dp")  # None: the default, or searched
    ranks = (1 if tp is None else tp) * (1 if pp is None else pp)
    node = {"gpus_per_node": whole(gpus_per_node, "gpus_per_node")} if gpus_per_node is not None else {}
    plans = []
    calibrated = None
    for engine in engines:  # one plan per engine, each with the engine's own flags checked
        if cpu_offload_gb is not None and engine not in ("vllm", "sglang"):  # the budgets that take weight offload
            raise UsageError(f"--cpu-offload-gb: kvplan plans weight offload for vLLM and SGLang only, not {engine}",
                             field="cpu_offload_bytes")
        if enable_expert_parallel and engine not in ("vllm", "sglang", "trtllm"):  # the engines with expert parallel
            raise UsageError(f"--enable-expert-parallel: {engine} has no expert parallelism kvplan plans "
                             "(vLLM, SGLang and TensorRT-LLM do)", field="expert_parallel")
        lmcache = _lmcache(kv_offloading_backend, kv_offloading_size, lmcache_config, ranks, engine)
        if calibration is not None:
            from kvplan.calibrate import calibrate
            from kvplan.logs.calibration import load

            cal = load(calibration)
            if gpu is None and gpu_memory is None and cal.gpu.total_bytes:
                gpu_memory = str(cal.gpu.total_bytes)
            calibrated = calibrate(cal, model, gpu=gpu, gpu_memory=gpu_memory, tp=1 if tp is None else tp,
                                   pp=1 if pp is None else pp, engine=engine,
                                   engine_version=engine_version, kv_dtype=kv_cache_dtype, max_model_len=mml,
                                   settings=settings, catalog=gpu_catalog)
            settings, engine_version = calibrated.settings, calibrated.engine_version
            if calibrated.gpu_memory:
                gpu, gpu_memory = None, calibrated.gpu_memory
        loaded, engine_notes = _engine_model(model, engine, engine_version, quantization, dtype, mml,
                                             allow_long_max_model_len)
        result = max_batch(
            loaded, gpu=gpu, gpu_memory=gpu_memory, catalog=gpu_catalog, tp=tp, pp=pp, dp=dp, engine=engine,
            expert_parallel=enable_expert_parallel or None, **node,  # not given: the engine's way with --dp
            engine_version=engine_version, kv_dtype=kv_cache_dtype, max_model_len=mml,
            context=parse_count(context, "context") if context is not None else None, batch=whole(batch, "batch"),
            block_size=whole(block_size, "block_size"), settings=settings, solve=solve,  # type: ignore[arg-type]
            concurrency=whole(concurrency, "concurrency"),
            shared_prefix=prefix_count(shared_prefix),
            # 0 reaches the library, which refuses it by field (``or 1`` would hide it)
            n=per_request_count(n, "n"), beam_width=per_request_count(beam_width, "beam_width"),
            prompt_len=parse_count(prompt_len, "prompt_len") if prompt_len is not None else None,
            speculative_method=speculative_method,
            num_speculative_tokens=whole(num_speculative_tokens, "num_speculative_tokens"),
            speculative_model=speculative_model,
            engine_options=cache_options({
                "kv_cache": kv_cache, "backend": backend, "nbits": nbits, "residual_length": residual_length,
                "q_group_size": q_group_size, "axis_key": axis_key, "axis_value": axis_value, "evict": evict,
                "press": press, "compression_ratio": compression_ratio,
                "kv_offloading_bytes": None if lmcache is not None else _gib(kv_offloading_size, "kv-offloading-size"),
                "lmcache": lmcache,
                "swap_space_bytes": _gib(swap_space, "swap-space"), "offload_link": offload_link,
                "hicache_ratio": number(hicache_ratio, "hicache_ratio"),
                "hicache_size_gb": number(hicache_size, "hicache_size"), "scheduling": scheduling,
                "swa_full": swa_full, "no_kv_offload": no_kv_offload or None}),
        )
        if calibrated is not None or engine_notes:
            from dataclasses import replace

            result = replace(result, assumptions=(*(calibrated.notes if calibrated is not None else ()),
                                                  *engine_notes, *result.assumptions))
        plans.append(result)
    write(plans, fmt, sys.stdout, calibration=None if calibrated is None else
          {"file": str(calibration), "items": list(calibrated.used)})
    if solve == "context" and all(p.max_context > 0 for p in plans):
        return  # the question was the longest context: answered, whatever max-model-len asks
    unfit = [p for p in plans if not p.fits and not (solve == "context" and p.max_context > 0)]
    if unfit:
        for p in unfit:
            who = f" ({p.engine})" if len(plans) > 1 else ""
            sys.stderr.write(f"kvplan: does not fit{who}: {_short_pool_message(p) or p.message}\n")
        raise typer.Exit(1)


def _lmcache(backend: str | None, size: str | None, config: str | None, ranks: int,
             engine: str) -> tuple[tuple[str, object], ...] | None:
    """LMCache's settings from --kv-offloading-backend lmcache and --lmcache-config (the flags win over the
    file, as vLLM's kv_connector_extra_config wins over LMCACHE_CONFIG_FILE)."""
    from kvplan.engines.vllm import lmcache as lm
    from kvplan.errors import UsageError

    choice = "native" if backend is None else backend.strip().lower()  # '' is a mistake, not native
    if choice not in ("native", "lmcache"):
        raise UsageError(f"'{backend}': choose native or lmcache", field="kv_offloading_backend")
    if choice == "native" and config is None:
        return None
    if engine != "vllm":  # named by the flag the user gave
        raise UsageError(f"kvplan plans LMCache under vLLM only, not {engine}",
                         field="kv_offloading_backend" if choice == "lmcache" else "lmcache_config")
    if choice == "lmcache" and size is None:
        raise UsageError("lmcache needs --kv-offloading-size (vLLM refuses the backend without it)",
                         field="kv_offloading_backend")
    if choice == "native" and size is not None:
        raise UsageError("native with --lmcache-config: give lmcache to size LMCache's CPU tier",
                         field="kv_offloading_backend")
    merged: dict[str, object] = lm.read_config_file(config) if config is not None else {}
    if choice == "lmcache":
        gib = _gib(size, "kv-offloading-size") or 0
        merged.update(lm.vllm_offloading(gib / (1 << 30), ranks))
    return lm.as_option(merged)


def _gib(text: str | None, what: str) -> int | None:
    """vLLM takes these sizes in GiB: a bare number is GiB, a size with a unit is read as written."""
    if text is None:
        return None
    from kvplan.hardware import parse_bytes

    from kvplan.errors import UsageError

    bare = text.strip()
    try:
        gib = float(bare)
    except ValueError:
        return parse_bytes(bare, what)
    # nan, inf, 1e300 and negative sizes would overflow int() or plan negative blocks
    if not 0 <= gib <= _MAX_HOST_GIB:
        raise UsageError(f"'{text}' must be a size in GiB from 0 to {_MAX_HOST_GIB:,} (e.g. 200 or 200GiB)",
                         field=what.replace("-", "_"))
    return int(gib * (1 << 30))


_MAX_HOST_GIB = 1 << 20
"""1 PiB: far beyond any host's memory (the bound kvplan.hardware puts on a device's bytes)."""


def _engine_model(model: str, engine: str, engine_version: str | None, quantization: str | None, dtype: str | None,
                  max_model_len: int | None, allow_long: bool) -> tuple[object, tuple[str, ...]]:
    """The model as the engine loads it under --quantization / --dtype, and whether the engine starts with the
    --max-model-len given (the engine's own rule, ``ServeFlags.model_reader``): the spec to plan (the name where
    the engine has no such rule) and the notes to show. An engine that refuses to start is a usage error naming
    the flag (exit 2)."""
    from kvplan.engines.serve import serve_flags
    from kvplan.errors import UsageError

    serve = serve_flags(engine)
    reader = serve.model_reader if serve is not None else None
    if reader is None:
        for flag, value in (("quantization", quantization), ("dtype", dtype)):
            if value is not None:
                raise UsageError(f"kvplan plans the engine's {flag} for vLLM and SGLang only, not {engine}",
                                 field=flag)
        return model, ()
    from kvplan.sources.resolve import load_model

    spec = load_model(model)
    # the settings the engine reads from its flags and environment (engines/<e>/flags.py read_model)
    settings: dict[str, object] = {"quantization": quantization, "dtype": dtype, "max_model_len": max_model_len}
    if allow_long:
        settings.update(VLLM_ALLOW_LONG_MAX_MODEL_LEN="1", SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN="1")
    loaded, remarks = reader(spec, {k: v for k, v in settings.items() if v is not None}, engine_version)

    def ours(text: str) -> str:  # this command's flag where the deployment would set the variable
        for name in ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"):
            text = text.replace(f"set {name}=1", "give --allow-long-max-model-len").replace(
                f"{name}=1", "--allow-long-max-model-len")
        return text

    for r in remarks:
        if r.severity == "error":
            raise UsageError(ours(r.message), field=r.setting)
    return loaded, tuple(ours(r.message) for r in remarks)


def _short_pool_message(plan: object) -> str:
    """What the engine does when not one request of --max-model-len fits its pool, where it still starts
    (SGLang caps requests: ``ServeFlags.short_pool``); empty otherwise (the plan's own message says why)."""
    from kvplan.engines.serve import serve_flags

    serve = serve_flags(str(getattr(plan, "engine")))
    if serve is None or serve.short_pool is None or getattr(plan, "misfit", ""):
        return ""
    remark = serve.short_pool(int(getattr(plan, "kv_cache_tokens")), int(getattr(plan, "max_model_len")), {})
    return remark.message if remark is not None and remark.severity != "error" else ""
