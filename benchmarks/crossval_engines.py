"""Leave-one-source-out error of kvplan's SGLang and TensorRT-LLM budgets on every real start-up log kvplan keeps.

    PYTHONPATH=$PWD python benchmarks/crossval_engines.py                 # print, rewrite docs/accuracy.md's block
    PYTHONPATH=$PWD python benchmarks/crossval_engines.py --no-write      # print only
    PYTHONPATH=$PWD python benchmarks/crossval_engines.py --baseline      # rewrite crossval_engines_baseline.json
    PYTHONPATH=$PWD python benchmarks/crossval_engines.py --intervals     # rewrite each engine's budget_error.json

As benchmarks/crossval.py does for vLLM: kvplan's KV memory per GPU minus the logged one, in % of the GPU's
memory, given the logged weights (so the budget rules are judged, not the weight count), on each log whose
model, GPU (or its logged total) and release are known.

SGLang: the budget is SGLang's code (``free before the weights x mem_fraction_static - weights``, the default
fraction by release, the AMD aiter factor) except one size fitted to logs: the memory in use before SGLang's
first free-memory reading (``kvplan/engines/sglang/fitted.py``). It is refitted with each log's *source* held
out (the median of ``total - logged free memory before the weights`` over the other sources' unshared logs),
and that source's logs are predicted with the refit. A log whose size has no other source's reading keeps the
shipped size and is counted apart ("not held out"). On a GPU shared with other processes (the log's free
memory at load begin is far below the card's) kvplan is given that free memory (as a calibration would), so
the log judges the code-derived rules only.

TensorRT-LLM: no size is fitted to logs (the fraction is TensorRT-LLM's default or the one given; the warm-up
activation and the 0.6 GiB context are kvplan's assumptions, set before these logs were read; the PyTorch flow's dry
run and CUDA-graph pool follow its code, kvplan/engines/trtllm/warmup.py; a prebuilt engine's
runtime buffers and decoder are summed from the code's shapes, kvplan/engines/trtllm/runtime.py), so each log's
error is already out of sample: leave-one-source-out is simply the error on each log. A log is given what its source
states of the engine's build (max_batch_size, max_seq_len, max_num_tokens) and, as its weights are, the items it prints
(the execution context, the runtime buffers and decoder); a GptSession run (examples/run.py before 0.10) takes no
buffers or decoder before the pool (GPTSESSION below).

tests/test_crossval_engines.py fails when a change makes an engine's cross-validated median or p90 worse than
``benchmarks/crossval_engines_baseline.json``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.accuracy import read_yaml, replace_block  # noqa: E402
from benchmarks.crossval import DATA, _quantile, _whole, arguments, gpu_class, source_of, stats  # noqa: E402
from benchmarks.crossval import table as _table  # noqa: E402
from kvplan.budgets import Settings  # noqa: E402
from kvplan.engines import parse_version  # noqa: E402
from kvplan.engines.sglang import fitted as sglang_fitted  # noqa: E402
from kvplan.engines.trtllm import error as trtllm_error  # noqa: E402
from kvplan.plan import max_batch  # noqa: E402

GIB = 1 << 30
BASELINE = REPO / "benchmarks" / "crossval_engines_baseline.json"
ENGINES = ("sglang", "trtllm")
TITLES = {"sglang": "SGLang", "trtllm": "TensorRT-LLM"}
INTERVALS = {"sglang": REPO / "kvplan" / "engines" / "sglang" / "budget_error.json",
             "trtllm": REPO / "kvplan" / "engines" / "trtllm" / "budget_error.json"}
BAND_OF = {"sglang": sglang_fitted.release_band, "trtllm": trtllm_error.release_band}
BANDS = {"sglang": sglang_fitted.RELEASE_BANDS, "trtllm": trtllm_error.RELEASE_BANDS}
ENGINE_OF = {"sglang": "sglang", "trtllm": "trtllm", "tensorrt-llm": "trtllm"}

# Checkpoints the logs name that kvplan has no config for -> a bundled one of the same layers, heads and
# vocabulary (the weights are the logged ones, so only the KV geometry matters).
QWEN25_05B = str(REPO / "tests" / "data" / "hf_configs" / "Qwen__Qwen2.5-0.5B.json")  # the Hub config, with provenance
STAND_INS = {
    "Qwen/Qwen2.5-0.5B-Instruct": QWEN25_05B,
    "Qwen/Qwen3-Reranker-0.6B (decoder-only, is_embedding=False)": "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-Reranker-0.6B (Qwen3ForCausalLM, BF16, 28 layers)": "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen/Qwen3-235B-A22B-FP8",
    "llava-hf/llava-1.5-7b-hf (LLM part = Llama-2-7B geometry)": "meta-llama/Llama-2-7b-hf",
    "Qwen/Qwen2.5-0.5B-Instruct (FP16 engine, 'tensorrt_llm_small')": QWEN25_05B,
}
# Logs whose model the collector inferred from the per-token bytes or the source's text (said in the case)
MODEL_OF = {
    "sglang-pr4826-gemma3-4b-h200": "google/gemma-3-4b-it",  # 34 layers x 4 KV heads x 256, 8.13 GB weights
    "sglang-pr11716-tp8-piecewise-cuda-graph": "meta-llama/Llama-3.1-70B",  # 20,480 B of K per token and rank
    "trtllm-docs-memory-md-7b-h100": "meta-llama/Llama-2-7b-hf",  # 262,144 B/token: Llama-2-7B, FP8 KV
    "trtllm-benchdoc-llama3-8b-3090-triton": "meta-llama/Llama-3.1-8B",  # Llama-3-8B: same layers and vocabulary
}
# Free memory at load begin printed by a log kept outside the YAML (benchmarks/accuracy_sglang.py: the PR's log,
# "Load weight begin. avail mem=137.29 GB", the least over the ranks)
FREE_BEFORE = {"sglang-pr11716-tp8-piecewise-cuda-graph": 137.29}
# A TensorRT-LLM execution context read from TensorRT's memory lines in the log's source (outside the YAML's excerpt):
# TllmRuntime's constructor allocates it between the engine's deserialization and the contexts' creation
# (cpp/tensorrt_llm/runtime/tllmRuntime.cpp, read in a 0.7.1 fork), so it is the rise of the GPU in use between them,
# less cuBLAS's own 8 MiB. The 0.8 test run's rise (15,617 -> 15,835 MiB) is not the 1,728 MiB its source's build log
# prints ("Total Activation Memory: 1811942912"): the engine that ran is not that build (the same source's Triton run
# shows another: max batch 32, attention window 2,560), so the context is its reading, not that build's.
CONTEXT_READ_MIB = {"trtllm-080-llama3-8b-bf16-3090-gptsession-testrun": 15_835 - 15_617 - 8}
# A checkpoint whose weights kvplan counts from a config of another precision: judged only with logged weights
QUANTIZED = re.compile(r"fp8|int4|int8|awq|gptq|nvfp4|smoothquant|weight_only|quantiz", re.IGNORECASE)

# What the log does not print but its source or its numbers say (each a reading, stated in the case's
# gpu / engine_version text): the catalog GPU, the release whose rules apply.
GPU_OF = {
    "sglang-pr4760-llama31-8b-h100": "H100-SXM-80GB",  # 80 GB Hopper, FA3 (SM90)
    "sglang-docs-sendrequest-llama31-8b-h100-clip": "H100-SXM-80GB",  # docs CI, 78.81 GB free at load begin
    "sglang-docs-nativeapi-qwen25-05b-h100-capped-20480": "H100-SXM-80GB",  # fa3 default, 78.43 GiB free
    "sglang-pr4826-gemma3-4b-h200": "H200-141GB",  # 139.21 GB after init
    "sglang-pr11716-tp8-piecewise-cuda-graph": "H200-141GB",  # 106.6 GiB of KV per rank: a 141 GB card
    "vllm-21348-qwen3-235b-fp8-4xh100-sglang": "H100-SXM-80GB",
    "trtllm-docs-memory-md-7b-h100": "H100-SXM-80GB",
    "trtllm-bench-doc-012dev-llama2-7b-fp8-h100": "H100-SXM-80GB",
    "trtllm-backend-multimodal-llava15-7b-h100nvl-tp2": "H100-NVL-94GB",
    "trtllm-13rc7-kimi-k25-nvfp4-8xb300-tp8-fp8kv": "B300-288GB",  # the report: NVIDIA B300 SXM6 AC x 8
    "trtllm-dgxspark-gptoss120b-111rc3-pytorch": "GB10",  # DGX Spark; the log prints its total (119.70 GiB)
    "trtllm-lm7-smollm2-135m-rtx4070super-121-f090": "RTX-4070-SUPER",  # stated: RTX 4070 SUPER under WSL2
    "trtllm-lm7-smollm2-135m-rtx4070super-121-f025": "RTX-4070-SUPER",
}
# AMD cards kvplan's catalog lacks: the nearest one with the logged total (rocm-smi 309,220,868,096 B)
AMD_TOTALS = {"MI355X": 309_220_868_096}
VERSION_OF = {
    "sglang-projecta-qwen3-14b-4x4090-tp4": "0.5.23",  # main of June 2026: the newest release read
    "sglang-docs-nativeapi-qwen25-05b-h100-capped-20480": "0.5.8",  # main of early Feb 2026
    "sglang-pr18040-granite4-h-micro-hybrid-16gb": "0.5.8",  # source checkout of late Jan 2026
    "trtllm-backend-multimodal-llava15-7b-h100nvl-tp2": "0.17",  # docs of the 0.17 - 0.20 era
    "trtllm-docs-memory-md-7b-h100": "0.12",  # C++ runtime / Executor docs (0.1x)
    "trtllm-l2lab-qwen25-15b-l4-colocated-f045": "0.13",  # 0.13 - 0.14 era C++ runtime
}
# The GPU held other processes' memory at load begin (the log's free memory is far below the card's): kvplan is
# given that free memory (SGLang), or the log is left out (TensorRT-LLM: its budget has no such input).
SHARED = {
    "sglang-play-qwen25-05b-h100nvl-shared-0510": "only 36.54 GB free of 94 GB at load begin",
    "sglang-gatewaynotes-qwen25-05b-4070tisuper-pd-prefill-mfs015": "1,740 MiB used before start, 4 instances",
    "sglang-notes-qwen3-06b-wsl-shared-gpu": "3.23 GB free at load begin (desktop)",
    "trtllm-l2lab-qwen25-05b-l4-colocated-f025": "second engine on a GPU holding the first one's weights and KV",
    "trtllm-nemotron-nano4b-nvfp4-5070ti-f020": "GPU shared with ASR / TTS models",
    # judged once with its GPU mapped (GB10, the logged 119.70 GiB): +38.29 % (kvplan 51.78 GiB, logged 5.95): the
    # memory is the host's too, and the OS and other processes held 49.28 GiB of it outside torch
    "trtllm-dgxspark-gptoss120b-111rc3-pytorch": "DGX Spark unified memory: 49.28 GiB held by the OS and other processes",
}
# examples/run.py runs GptSession before 0.10 (ModelRunnerCpp; 0.10's release notes move it to the executor API):
# GptSession::setup (cpp/tensorrt_llm/runtime/gptSession.cpp, read in a 0.7.1 fork) creates the contexts and empty
# runtime buffers, then the KV cache manager, and only then the decoders and the buffers' reshape, so nothing but the
# engine and its execution context is taken before the pool
GPTSESSION = re.compile(r"GptSession|run\.py")
GPTSESSION_UNTIL = (0, 10)

# GPUs kvplan's catalog lacks or the log does not name, on logs that print the free memory before the weights:
# kvplan is given that free memory (as on a shared GPU), so the card's size enters only SGLang's default fraction
# and the error's denominator, and the log reads no fitted size. (label, nearest catalog card, MiB, why)
UNCATALOGUED = {
    "sglang-mineru-blackwell-qwen3-06b-5080": (
        "RTX 5080", "RTX-5080", 16303, "nvidia-smi in the source: 16303MiB total (what SGLang's fraction reads)"),
    "sglang-readme-llama31-8b-24gb-docker": (
        "RTX-4090", "RTX-4090", None, "a 24 GB card, not named (22.39 GB free before the weights); RTX-3090 and "
        "RTX-4090, kvplan's 24 GB cards, give 0.4.9's default fraction alike (0.877)"),
    "sglang-gatewaynotes-qwen25-05b-4070tisuper-pd-prefill-mfs015": (
        "RTX 4070 Ti SUPER", "RTX-4090", 16384, "16 GB card (its specification); mem_fraction_static given"),
}


def cases() -> Iterator[dict]:
    """Every case of every tests/data/engine_logs_*.yaml (a new file of logs is read without a change here)."""
    for path in sorted(DATA.glob("engine_logs_*.yaml")):
        for case in read_yaml(path).get("cases") or ():
            yield {**case, "_file": path.name}


def _release(text: object) -> str | None:
    found = re.match(r"\s*~?v?(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return ".".join(g for g in found.groups() if g is not None) if found else None


def _gpu(case: dict) -> Any:
    """The catalog GPU (with the logged total where printed), or None."""
    from kvplan.hardware import find_gpu, load_catalog

    rep = case.get("reported") or {}
    name = case.get("gpu_catalog") or GPU_OF.get(case["id"])
    if case["id"] in UNCATALOGUED:
        label, base, mib, _ = UNCATALOGUED[case["id"]]
        gpu = find_gpu(base, load_catalog(None))
        return gpu if mib is None else dataclasses.replace(gpu, name=label, memory_bytes=mib << 20,
                                                           memory_precision="exact", estimate=False)
    for amd, total in AMD_TOTALS.items():
        if amd in str(case.get("gpu") or ""):
            base = find_gpu("MI300X", load_catalog(None))
            return dataclasses.replace(base, name=amd, memory_bytes=total, memory_precision="exact", estimate=False)
    if name is None:
        return None
    gpu = find_gpu(name, load_catalog(None))
    total = rep.get("total_gpu_memory_gib")
    if total is not None:
        gpu = dataclasses.replace(gpu, memory_bytes=round(total * GIB), memory_precision="exact", estimate=False)
    return gpu


def _gpu_class(name: str) -> str:
    return "AMD Instinct" if name.upper().startswith("MI") else gpu_class(name)


def _model(case: dict) -> Any:
    from kvplan.sources.resolve import load_model

    name = MODEL_OF.get(case["id"]) or case.get("kvplan_model") or STAND_INS.get(str(case.get("model")),
                                                                                   case.get("model"))
    if not name:
        return None
    try:
        return load_model(str(name))
    except Exception:  # noqa: BLE001 - a model kvplan cannot load is reported, not fatal
        return None


def _logged_kv(case: dict) -> float | None:
    """The KV memory the log shows, GiB per GPU (SGLang 'GB' are GiB); None where only a token count is
    printed (``run`` converts it with kvplan's bytes per token, exact for the KV arithmetic)."""
    rep = case.get("reported") or {}
    if rep.get("k_size_gib") is not None and rep.get("v_size_gib") is not None:
        # a hybrid model's "Mamba Cache is allocated" states come out of the same budget as K and V: the pool
        # is both (kvplan's KV memory is that pool too)
        state = sum(rep.get(key) or 0.0 for key in ("mamba_conv_state_gib", "mamba_ssm_state_gib"))
        return rep["k_size_gib"] + rep["v_size_gib"] + state
    for key in ("kv_size_gib", "available_kv_gib", "kv_gib"):
        if rep.get(key) is not None:
            return float(rep[key])
    for key in ("kv_bytes", "kv_cache_bytes"):
        if rep.get(key) is not None:
            return rep[key] / GIB
    return None


def inputs(case: dict) -> tuple[dict | None, str]:
    """kvplan's arguments for an SGLang / TensorRT-LLM log with its weights and KV memory, or why not."""
    engine = ENGINE_OF.get(str(case.get("engine")))
    rep = case.get("reported") or {}
    if engine == "trtllm" and case["id"] in SHARED:
        return None, f"GPU shared ({SHARED[case['id']]}): the free memory is not kvplan's to know"
    want = _logged_kv(case)
    tokens = rep.get("max_total_num_tokens", rep.get("kv_cache_tokens"))
    if want is None and not isinstance(tokens, int):
        return None, "no KV memory logged"
    if case.get("max_total_tokens") is not None:
        return None, "the pool is capped by --max-total-tokens (the budget is not what sized it)"
    cap = rep.get("max_tokens_estimate")
    if isinstance(cap, int) and isinstance(tokens, int) and tokens < cap + 64:
        # trtllm-bench passes its own estimate as max_tokens and the smaller of the two pools is kept: the
        # logged pool is the cap, which says only that the fraction's pool was at least as large.
        return None, "the pool is capped by trtllm-bench's max_tokens (the budget is not what sized it)"
    version = VERSION_OF.get(case["id"]) or _release(case.get("version")) or _release(case.get("engine_version"))
    if version is None:
        return None, "release unknown"
    gpu = _gpu(case)
    if gpu is None:
        return None, "GPU not known"
    spec = _model(case)
    if spec is None:
        return None, "model not loadable"
    weights = rep.get("weights_gib")
    if weights is None and engine == "sglang" and rep.get("avail_before_weights_gib") is not None \
            and rep.get("avail_after_weights_gib") is not None:
        weights = rep["avail_before_weights_gib"] - rep["avail_after_weights_gib"]
    if weights is None and engine == "trtllm" and rep.get("engine_size_mib") is not None:
        weights = rep["engine_size_mib"] / 1024  # the engine file: its weights
    settings: dict[str, Any] = {}
    if weights is not None:
        settings["weights_bytes"] = round(weights * GIB)
    elif QUANTIZED.search(f"{case.get('model')} {case.get('dtype')} {case.get('quantization')}"):
        return None, "quantized checkpoint and its weights not logged"
    derived = case.get("derived") or {}
    free_before = next((v for v in (rep.get("avail_before_weights_gib"), rep.get("avail_before_weights_gib_min"),
                                    derived.get("avail_before_weights_gib"), derived.get("free_at_load_begin_gib"),
                                    FREE_BEFORE.get(case["id"])) if v is not None), None)
    if free_before is None and rep.get("avail_after_weights_gib") is not None and rep.get("weights_gib") is not None:
        # SGLang's "mem usage" of the weights is the fall of the free memory: before = after + weights
        free_before = rep["avail_after_weights_gib"] + rep["weights_gib"]
    if engine == "sglang":
        if case.get("mem_fraction_static") is not None and _given_fraction(case):
            settings["mem_fraction_static"] = case["mem_fraction_static"]
        if case["id"] in SHARED or case["id"] in UNCATALOGUED:
            if free_before is None:
                return None, "GPU shared and its free memory not logged"
            settings["non_torch_bytes"] = gpu.memory_bytes - round(free_before * GIB)
    else:
        # the backend the log shows where it is not the release's default (PyExecutor lines before 1.0: variant.py)
        if case.get("trtllm_backend"):
            settings["trtllm_backend"] = case["trtllm_backend"]
        fraction = case.get("free_gpu_memory_fraction") or case.get("kv_cache_free_gpu_mem_fraction")
        if fraction:
            settings["free_gpu_memory_fraction"] = fraction
        built_tokens = re.search(r"--max_num_tokens[ =](\d+)", str(case.get("command") or ""))
        if isinstance(case.get("max_num_tokens"), int):
            settings["max_num_batched_tokens"] = case["max_num_tokens"]
        elif built_tokens:  # the build's max_num_tokens, as its command states it
            settings["max_num_batched_tokens"] = int(built_tokens[1])
        # the build's sizes the C++ runtime's buffers follow (kvplan/engines/trtllm/runtime.py), where the source
        # gives them, and the execution context the log prints (a logged item, as the engine's weights are)
        built = re.search(r"--max_batch_size[ =](\d+)", str(case.get("command") or ""))
        batch = case.get("max_batch_size") if isinstance(case.get("max_batch_size"), int) else built and int(built[1])
        if batch:
            settings["max_num_seqs"] = batch
        if rep.get("execution_context_mib") is not None:
            settings["activation_bytes"] = round(rep["execution_context_mib"] * (1 << 20))
        elif case["id"] in CONTEXT_READ_MIB:
            settings["activation_bytes"] = CONTEXT_READ_MIB[case["id"]] << 20
        from kvplan.engines.trtllm import variant

        # a prebuilt engine's execution context is sized by its build (max_num_tokens, before 0.11 max_batch_size x
        # max_input_len: runtime.py) and reaches GiBs: with neither the build's sizes nor the context in the log, the
        # plan would judge a guessed build, not the budget's rules
        prebuilt = variant.chosen(parse_version(version), settings.get("trtllm_backend")).prebuilt_engine
        if prebuilt and not ({"activation_bytes", "max_num_batched_tokens", "max_num_seqs"} & set(settings)):
            return None, ("a prebuilt engine of an unknown build (no max_batch_size or max_num_tokens stated, no "
                          "execution context logged): the context it sizes is not known")
        # "Allocated X MB / GB GPU memory for runtime buffers" and "... for decoder" (MemoryCounter: 1024-based units)
        printed = [rep.get(f"{item}_{unit}", 0) * scale for item in ("runtime_buffers", "decoder")
                   for unit, scale in (("mb", 1 << 20), ("gb", 1 << 30))]
        if any(printed):
            settings["engine_buffer_bytes"] = round(sum(printed))
        elif GPTSESSION.search(str(case.get("engine_detail") or "")) and parse_version(version) < GPTSESSION_UNTIL:
            settings["engine_buffer_bytes"] = 0  # GptSession sizes its buffers and decoder after the pool
    args = {"model": spec, "gpu": gpu, "tp": _whole(case.get("tensor_parallel_size")),
            "pp": _whole(case.get("pipeline_parallel_size")), "engine": engine, "engine_version": version}
    context = case.get("context_length") or rep.get("context_len")
    if engine == "sglang" and isinstance(context, int):
        args["max_model_len"] = context
    built_seq = re.search(r"--max_seq_len[ =](\d+)", str(case.get("command") or ""))
    seq = case.get("max_seq_len") or rep.get("max_attention_window") or (built_seq and int(built_seq[1]))  # the build's max_seq_len (the attention window)
    if engine == "trtllm" and isinstance(seq, int):
        args["max_model_len"] = seq
    return {"args": args, "settings": settings, "engine": engine, "version": version, "want": want, "tokens": tokens,
            "free_before": free_before, "weights_logged": weights is not None}, ""


def _given_fraction(case: dict) -> bool:
    """The log's mem_fraction_static was the user's (a flag or a printed server_args value), not derived."""
    text = f"{case.get('command') or ''}"
    if re.search(r"mem_fraction_static=[0-9.]+ \(auto\)", text):  # printed server_args: SGLang's own default
        return False
    return "mem-fraction-static" in text or "mem_fraction_static" in text or "MEMFRAC" in text


@contextmanager
def using(fit: sglang_fitted.SglangFit) -> Iterator[None]:
    """Plan with these fitted sizes (the only writer of sglang fitted.FIT)."""
    saved = sglang_fitted.FIT
    sglang_fitted.FIT = fit
    try:
        yield
    finally:
        sglang_fitted.FIT = saved


def readings(case: dict, inp: dict) -> dict[str, float]:
    """What this log says about each fitted size (bytes): the memory in use at SGLang's first reading."""
    if inp["engine"] != "sglang" or case["id"] in SHARED or case["id"] in UNCATALOGUED or inp["free_before"] is None:
        return {}
    args = inp["args"]
    field = sglang_fitted.context_field(args["tp"], args["gpu"].name)
    return {field: args["gpu"].memory_bytes - inp["free_before"] * GIB}


MIN_FIT_SOURCES = 3  # a size is refitted only from readings of at least this many independent sources


def refit(training: Iterable[tuple[str, dict[str, float]]]) -> tuple[sglang_fitted.SglangFit, set[str]]:
    """Each size: the median of the training readings ((source, readings) pairs); the sizes read by fewer than
    MIN_FIT_SOURCES sources keep the shipped value and are returned apart."""
    values: dict[str, list[float]] = defaultdict(list)
    sources: dict[str, set[str]] = defaultdict(set)
    for source, reading in training:
        for name, value in reading.items():
            values[name].append(value)
            sources[name].add(source)
    fields = {f.name for f in dataclasses.fields(sglang_fitted.SglangFit)}
    new = {name: int(statistics.median(vals)) for name, vals in values.items()
           if name in fields and len(sources[name]) >= MIN_FIT_SOURCES}
    return dataclasses.replace(sglang_fitted.FIT, **new), fields - set(new)


def plan(inp: dict) -> Any:
    return max_batch(settings=Settings(**inp["settings"]), **inp["args"])


def run() -> tuple[list[dict], list[tuple[str, str, str]]]:
    usable, skipped = [], []
    for case in cases():
        engine = ENGINE_OF.get(str(case.get("engine")))
        if engine is None:
            continue
        inp, why = inputs(case)
        if inp is None:
            skipped.append((engine, case["id"], why))
            continue
        usable.append((case, inp, readings(case, inp)))
    rows = []
    for case, inp, _ in usable:
        src = source_of(case)
        args = inp["args"]
        held_out = True
        try:
            shipped = plan(inp)
            if inp["engine"] == "sglang" and "non_torch_bytes" not in inp["settings"]:
                fit, unread = refit((source_of(c), r) for c, i, r in usable
                                    if source_of(c) != src and i["engine"] == "sglang")
                held_out = sglang_fitted.context_field(args["tp"], args["gpu"].name) not in unread
                with using(fit):
                    held = plan(inp).per_gpu.kv_cache_bytes / GIB
            else:
                held = shipped.per_gpu.kv_cache_bytes / GIB
        except Exception as exc:  # noqa: BLE001 - a log kvplan refuses is reported, not fatal
            skipped.append((inp["engine"], case["id"], f"kvplan refuses it: {exc}"))
            continue
        total = shipped.gpu_total_bytes / GIB
        want = inp["want"]
        if want is None:  # tokens x kvplan's bytes per token (the KV arithmetic is exact on logged memory)
            want = inp["tokens"] * shipped.per_gpu.kv_cache_bytes / max(shipped.kv_cache_tokens, 1) / GIB
        rows.append({"engine": inp["engine"], "case": case["id"], "file": case["_file"], "source": src,
                     "version": inp["version"], "band": BAND_OF[inp["engine"]](parse_version(inp["version"])),
                     "gpu_class": _gpu_class(args["gpu"].name), "tp": args["tp"], "logged_kv_gib": want,
                     "kvplan_kv_gib": shipped.per_gpu.kv_cache_bytes / GIB, "heldout_kv_gib": held,
                     "total_gib": total, "held_out": held_out, "shared_gpu": case["id"] in SHARED,
                     "given_free": case["id"] in UNCATALOGUED,
                     "weights_logged": inp["weights_logged"],
                     "error_pct": (shipped.per_gpu.kv_cache_bytes / GIB - want) / total * 100,
                     "heldout_error_pct": (held - want) / total * 100})
    return rows, skipped


def summary(rows: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    out = {}
    for engine in ENGINES:
        rs = [r for r in rows if r["engine"] == engine]
        out[engine] = {"cross-validated (held-out sources)": stats([r["heldout_error_pct"] for r in rs
                                                                    if r["held_out"]]),
                       "in-sample (shipped sizes, all logs)": stats([r["error_pct"] for r in rs])}
    return out


MIN_LOGS, MIN_SOURCES = 10, 3  # fewer held-out logs or sources: no 90 % band of their own
COVER = 0.95  # nominal 2.5th to 97.5th percentile; the whole range under SMALL_SAMPLE logs
SMALL_SAMPLE = 20


def intervals(rows: list[dict], engine: str) -> dict:
    """The engine's error band from its held-out residuals: per release band with enough logs and sources,
    else pooled; a pool under MIN_LOGS / MIN_SOURCES is the whole range of its errors, marked ``too_few``."""
    held = [r for r in rows if r["engine"] == engine and r["held_out"]]

    def band_of(rs: list[dict]) -> dict:
        errs = [r["heldout_error_pct"] / 100 for r in rs]
        tail = (1 - COVER) / 2 if len(errs) >= SMALL_SAMPLE else 0.0
        # rounded outwards, so the band still holds the logs at its ends
        out = {"low": math.floor(_quantile(errs, tail) * 1e5) / 1e5,
               "high": math.ceil(_quantile(errs, 1 - tail) * 1e5) / 1e5,
               "logs": len(rs), "sources": len({r["source"] for r in rs})}
        if len(rs) < MIN_LOGS or out["sources"] < MIN_SOURCES:
            out["too_few"] = True
        return out

    bands: dict[str, list[dict]] = defaultdict(list)
    for r in held:
        bands[r["band"]].append(r)
    table = {"about": (f"kvplan's {TITLES[engine]} KV memory minus the logged one, as a fraction of the GPU's "
                       "memory, on logs judged with their source held out of every fitted size "
                       "(benchmarks/crossval_engines.py --intervals); 'low'/'high' are the "
                       f"{(1 - COVER) / 2:.1%} and {1 - (1 - COVER) / 2:.1%} quantiles (the whole range under "
                       f"{SMALL_SAMPLE} logs); a release band with fewer than {MIN_LOGS} logs from "
                       f"{MIN_SOURCES} sources takes the pooled one ('too_few' where even the pool is that thin)"),
             "min_logs": MIN_LOGS, "min_sources": MIN_SOURCES, "bands": {}, "pooled": band_of(held)}
    for since, name in BANDS[engine]:
        rs = bands.get(name, [])
        if len(rs) >= MIN_LOGS and len({r["source"] for r in rs}) >= MIN_SOURCES:
            table["bands"][name] = {"since": list(since), **band_of(rs)}
    return table


def coverage(rows: list[dict], engine: str, table: dict) -> float:
    held = [r for r in rows if r["engine"] == engine and r["held_out"]]
    inside = sum(table["bands"].get(r["band"], table["pooled"])["low"] - 1e-9 <= r["heldout_error_pct"] / 100
                 <= table["bands"].get(r["band"], table["pooled"])["high"] + 1e-9 for r in held)
    return inside / len(held) if held else float("nan")


def report(rows: list[dict], skipped: list[tuple[str, str, str]]) -> str:
    lines = []
    summ = summary(rows)
    for engine in ENGINES:
        rs = [r for r in rows if r["engine"] == engine]
        held = [r for r in rs if r["held_out"]]
        lines += [f"**{TITLES[engine]}**", "", "| errors, % of GPU memory | logs | median | p90 | worst |",
                  "|---|---:|---:|---:|---:|"]
        for name, s in summ[engine].items():
            lines.append(f"| {name} | {s['n']} | {s['median']:.2f} % | {s['p90']:.2f} % | {s['worst']:.2f} % |")
        not_held = sorted(r["case"] for r in rs if not r["held_out"])
        shared = sorted(r["case"] for r in rs if r["shared_gpu"])
        given = sorted(r["case"] for r in rs if r["given_free"] and not r["shared_gpu"])
        lines += ["", f"{len(rs)} {TITLES[engine]} logs from {len({r['source'] for r in rs})} sources"
                  + (f"; {len(not_held)} not held out (fewer than {MIN_FIT_SOURCES} other sources read their "
                     "size, so it keeps the shipped value: "
                     + ", ".join(not_held) + ")" if not_held else "")
                  + (f"; on a shared GPU, given the logged free memory: {', '.join(shared)}" if shared else "")
                  + (f"; on a GPU kvplan's catalog lacks or the log does not name, given the logged free memory: "
                     f"{', '.join(given)}" if given else "")
                  + "."]
        for key, title in (("band", "release band"), ("gpu_class", "GPU class")):
            groups: dict[str, list[dict]] = defaultdict(list)
            for r in held:
                groups[str(r[key])].append(r)
            lines += ["", *_table(groups, title)]
        lines += ["", "| log | release | GPU | tp | logged KV GiB | kvplan (held out) GiB | error, % of GPU |",
                  "|---|---|---|---:|---:|---:|---:|"]
        for r in sorted(rs, key=lambda r: r["case"]):
            lines.append(f"| {r['case']} | {r['version']} | {r['gpu_class']} | {r['tp']} | {r['logged_kv_gib']:.2f} | "
                         f"{r['heldout_kv_gib']:.2f} | {r['heldout_error_pct']:+.2f} % |")
        table = intervals(rows, engine)
        pooled = table["pooled"]
        few = " (too few for a 90 % band: the range of their errors, said in the basis)" if pooled.get("too_few") \
            else ""
        lines += ["", f"Interval (`kvplan/engines/{engine}/budget_error.json`): "
                  + "".join(f"{name}: {b['low'] * 100:+.2f} % to {b['high'] * 100:+.2f} % ({b['logs']} logs, "
                            f"{b['sources']} sources); " for name, b in table["bands"].items())
                  + f"pooled: {pooled['low'] * 100:+.2f} % to {pooled['high'] * 100:+.2f} % ({pooled['logs']} logs, "
                  f"{pooled['sources']} sources){few}; it covers {coverage(rows, engine, table):.0%} of the "
                  "held-out logs.", ""]
        left = [f"{cid} ({why})" for e, cid, why in skipped if e == engine]
        if left:
            lines += ["Left out: " + "; ".join(left) + ".", ""]
    return "\n".join(lines).rstrip()


def main() -> None:
    opts = arguments("benchmarks/crossval_engines_baseline.json", "each engine's budget_error.json")
    rows, skipped = run()
    text = report(rows, skipped)
    if opts.json:
        Path(opts.json).write_text(json.dumps({"rows": rows, "skipped": skipped}, indent=1) + "\n")
    if opts.baseline:
        BASELINE.write_text(json.dumps(summary(rows), indent=1) + "\n")
    if opts.intervals:
        for engine in ENGINES:
            INTERVALS[engine].write_text(json.dumps(intervals(rows, engine), indent=1) + "\n")
    print(text)
    if not opts.no_write:
        out = REPO / "docs" / "accuracy.md"
        out.write_text(replace_block(out.read_text(), "crossval-engines", text))


if __name__ == "__main__":
    main()
