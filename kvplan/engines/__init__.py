"""Engine profiles: one module per serving engine's cache rules; this module only looks them up."""

from __future__ import annotations

from kvplan.engines.base import CacheLayout, Engine, EngineOptions, GroupRule, parse_version
from kvplan.errors import UsageError

__all__ = ["CacheLayout", "Engine", "EngineOptions", "GroupRule", "ENGINE_NAMES", "get_engine", "parse_version"]

# name -> (module, attribute); modules are imported on first use.
_REGISTRY: dict[str, tuple[str, str]] = {
    "vllm": ("kvplan.engines.vllm", "VLLM"),
    "sglang": ("kvplan.engines.sglang", "SGLANG"),
    "trtllm": ("kvplan.engines.trtllm", "TRTLLM"),
    "llamacpp": ("kvplan.engines.llamacpp", "LLAMACPP"),
    "hf": ("kvplan.engines.hf", "HF"),
    "hf-static": ("kvplan.engines.hf", "HF_STATIC"),
}
_ALIASES = {"transformers": "hf", "llama.cpp": "llamacpp", "llama-cpp": "llamacpp",
            "tensorrt-llm": "trtllm", "trt-llm": "trtllm", "tensorrt_llm": "trtllm"}

ENGINE_NAMES: tuple[str, ...] = tuple(_REGISTRY)
DEFAULT_ENGINE = "vllm"


def get_engine(name: str) -> Engine:
    import importlib

    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise UsageError(f"unknown engine '{name}' (known: {', '.join(ENGINE_NAMES)})")
    module, attr = _REGISTRY[key]
    return getattr(importlib.import_module(module), attr)
