"""Serving engines: one package each (``kvplan/engines/<engine>/``) behind the ``Engine`` protocol.

This module only looks engines up by name; what each engine does lives in its package.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.engines.version import LATEST, Version, parse_version
from kvplan.errors import UsageError

if TYPE_CHECKING:
    from types import ModuleType

    from kvplan.engines.layout import CacheLayout, EngineOptions, GroupRule
    from kvplan.engines.protocol import Demand, Engine, KvCapacity

__all__ = ["CacheLayout", "Demand", "Engine", "EngineOptions", "GroupRule", "KvCapacity", "LATEST", "Version",
           "ENGINE_NAMES", "DEFAULT_ENGINE", "LIBRARY_ENGINE", "PACKAGE_ENGINES", "get_engine", "all_engines",
           "parse_version"]

_LAZY = {"CacheLayout": "layout", "EngineOptions": "layout", "GroupRule": "layout", "Demand": "protocol",
         "Engine": "protocol", "KvCapacity": "protocol"}


def __getattr__(name: str) -> Any:
    """The layout and protocol types, imported on first use: the registry alone (names, the default) is read by
    the command line's help without loading any engine's rules."""
    if name in _LAZY:
        return getattr(load_module(f"kvplan.engines.{_LAZY[name]}"), name)
    raise AttributeError(name)


# name -> (module, attribute); packages are imported on first use.
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

if TYPE_CHECKING:  # never imported: mypy checks every registered engine against the protocol
    from kvplan.engines.hf import HF, HF_STATIC
    from kvplan.engines.llamacpp import LLAMACPP
    from kvplan.engines.sglang import SGLANG
    from kvplan.engines.trtllm import TRTLLM
    from kvplan.engines.vllm import VLLM

    _CONFORMING: tuple[Engine, ...] = (VLLM, SGLANG, TRTLLM, LLAMACPP, HF, HF_STATIC)

ENGINE_NAMES: tuple[str, ...] = tuple(_REGISTRY)
NO_SERVER = frozenset({"llamacpp", "hf", "hf-static"})
"""Registered engines whose ``serve`` is None (no launcher kvplan reads; tests/test_check_start.py holds this):
``kvplan check`` tells launchers apart without importing their packages."""
DEFAULT_ENGINE = "vllm"
#: The engine that is the model's own library (transformers' DynamicCache): what ``verify --activation`` runs.
LIBRARY_ENGINE = "hf"
PACKAGE_ENGINES: tuple[str, ...] = tuple({module: name for name, (module, _) in reversed(_REGISTRY.items())}[m]
                                         for m in dict.fromkeys(module for module, _ in _REGISTRY.values()))
"""One name per engine package (its first in the registry; not its variants such as hf-static): the engines a
deployment file names."""


def load_module(name: str) -> ModuleType:
    """``importlib.import_module(name)`` for an absolute name, without importing importlib (and its warnings): the
    engines are looked up on every start."""
    module = sys.modules.get(name)
    if module is None:
        __import__(name)
        module = sys.modules[name]
    return module


def get_engine(name: str) -> Engine:
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise UsageError(f"unknown engine '{name}' (known: {', '.join(ENGINE_NAMES)})", field="engine")
    module, attr = _REGISTRY[key]
    engine: Engine = getattr(load_module(module), attr)  # the package's instance (VLLM, ...)
    return engine


def all_engines() -> list[Engine]:
    return [get_engine(name) for name in ENGINE_NAMES]
