"""vLLM's settings as kvplan plans them (``VLLM.settings``): the command line is generated from this table."""

from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.engines.settings import (CPU_OFFLOAD_GB, DTYPE, ENFORCE_EAGER, MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS,
                                     OFFLOAD_LINK, QUANTIZATION, Setting, allow_long, expert_parallel, choice, gib,
                                     number)
from kvplan.errors import UsageError


def _lmcache(values: Mapping[str, Any], ranks: int) -> dict[str, Any]:
    """LMCache's settings from --kv-offloading-backend lmcache and --lmcache-config (the flags win over the
    file, as vLLM's kv_connector_extra_config wins over LMCACHE_CONFIG_FILE); the native tier otherwise."""
    backend, size, config = (values.get(k) for k in ("kv_offloading_backend", "kv_offloading_size", "lmcache_config"))
    native = {"kv_offloading_bytes": gib(size, "kv_offloading_size")} if size is not None else {}
    choice_ = "native" if backend is None else backend.strip().lower()  # '' is a mistake, not native
    if choice_ not in ("native", "lmcache"):
        raise UsageError(f"'{backend}': choose native or lmcache", field="kv_offloading_backend")
    if choice_ == "native" and config is None:
        return native
    if choice_ == "lmcache" and size is None:
        raise UsageError("lmcache needs --kv-offloading-size (vLLM refuses the backend without it)",
                         field="kv_offloading_backend")
    if choice_ == "native" and size is not None:
        raise UsageError("native with --lmcache-config: give lmcache to size LMCache's CPU tier",
                         field="kv_offloading_backend")
    from kvplan.engines.vllm import lmcache as lm

    merged: dict[str, object] = lm.read_config_file(config) if config is not None else {}
    if choice_ == "lmcache":
        merged.update(lm.vllm_offloading((gib(size, "kv_offloading_size") or 0) / (1 << 30), ranks))
    return {"lmcache": lm.as_option(merged)}


def combine(values: Mapping[str, Any], ranks: int) -> dict[str, Any]:
    """The ``EngineOptions`` values read from several flags together (the host KV tier), given the raw
    values of this engine's settings and the deployment's tp x pp ranks."""
    return _lmcache(values, ranks)


SETTINGS: tuple[Setting, ...] = (
    Setting("gpu_memory_utilization", ("--gpu-memory-utilization",),
            "Fraction of the GPU (default 0.92; 0.90 before v0.20).", "settings", convert=number,
            serve=("--gpu-memory-utilization",)),
    MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS, ENFORCE_EAGER,
    Setting("usage_context", ("--usage-context",), "How it is started, serve (`vllm serve`, the default) or llm "
            "(the LLM class); the batch defaults differ.", "settings"),
    # envs.VLLM_USE_V2_MODEL_RUNNER (0.12+); unset, config/vllm.py use_v2_model_runner picks by release and model
    Setting("model_runner", ("--model-runner",), "GPU model runner, v1 (gpu_model_runner.py) or v2 (Model Runner "
            "V2, from 0.12; the default for more models from 0.22, for all from 0.29): before 0.29 V2 subtracts no "
            "CUDA-graph memory. Default: the release's choice for the model.", "settings",
            convert=choice("v1", "v2"), serve=("VLLM_USE_V2_MODEL_RUNNER",)),
    # envs.VLLM_USE_V1: V1 the default from 0.8.0, V0 gone in 0.11.0 (variant.py)
    Setting("vllm_engine", ("--vllm-engine",), "vLLM's engine, v0 (VLLM_USE_V1=0, to 0.10) or v1 (the default "
            "from 0.8): V0 plans V0's memory profile at any release that has it. Default: the release's engine.",
            "settings", convert=choice("v0", "v1"), serve=("VLLM_USE_V1",)),
    # the profiling run's top-k/top-p path (sampler.py): envs.VLLM_USE_FLASHINFER_SAMPLER, flashinfer installed or not
    Setting("vllm_sampler", ("--vllm-sampler",), "Top-k/top-p path of the profiling run's sampler: sort (PyTorch, "
            "38 B per logit), flashinfer (14 B) or triton (0.17+). Default: the release's (FlashInfer in "
            "0.9 - 0.11.0, assuming flashinfer is installed as in the vllm/vllm-openai image; a pip install sorts).",
            "settings", convert=choice("sort", "flashinfer", "triton"), serve=("VLLM_USE_FLASHINFER_SAMPLER",)),
    # config/multimodal.py MultiModalConfig.language_model_only: every modality's limit 0, no encoder profiled
    Setting("language_model_only", ("--language-model-only",), "Serve a multimodal model as text only: vLLM "
            "neither loads nor profiles its vision encoder (encoder_profile.py).", "settings", switch=True,
            serve=("--language-model-only",)),
    expert_parallel("--enable-expert-parallel"), QUANTIZATION, DTYPE, allow_long("VLLM_ALLOW_LONG_MAX_MODEL_LEN"),
    # the backend and config come first: a mistake in them is named before the size they read
    Setting("kv_offloading_backend", ("--kv-offloading-backend",), "native (the default) or lmcache: LMCache's "
            "CPU tier gets --kv-offloading-size / (tp x pp) GiB per rank.", "options", field="lmcache",
            file_key="kv_offloading_backend", serve=("--kv-offloading-backend",),
            refusal="kvplan plans LMCache under {owners} only, not {engine}", combined=True),
    Setting("lmcache_config", ("--lmcache-config",), "With LMCache: its YAML config file (what LMCACHE_CONFIG_FILE "
            "names): chunk size, CPU and disk tiers.", "options", field="lmcache",
            refusal="kvplan plans LMCache under {owners} only, not {engine}", combined=True),
    Setting("kv_offloading_size", ("--kv-offloading-size",), "Host KV tier for the whole deployment, e.g. 200GiB "
            "(a bare number is GiB).", "options", field="kv_offloading_bytes", file_key="kv_offloading_size",
            serve=("--kv-offloading-size",), combined=True),
    Setting("swap_space", ("--swap-space",), "V0 (< 0.11): host swap space per GPU, GiB.", "options",
            field="swap_space_bytes", convert=gib, file_key="swap_space", serve=("--swap-space",)),
    CPU_OFFLOAD_GB, OFFLOAD_LINK,
    Setting("enable_prefix_caching", (), "Prefix caching (on by default in V1).", "options",
            file_key="enable_prefix_caching", serve=("--enable-prefix-caching",)),
    Setting("scheduling", ("--scheduling",), "async (two batches in flight, the default from about 0.12) or sync; "
            "sliding and chunked layers free their blocks one step later under async.", "options",
            field="async_scheduling", convert=lambda text, field: choice("async", "sync")(text, field) == "async",
            estimate=True),
)
