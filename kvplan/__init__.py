"""kvplan: KV-cache memory capacity planner for LLM serving.

Library use::

    import kvplan
    result = kvplan.estimate("meta-llama/Llama-3.1-8B", contexts=[8192], batches=[1, 8])
    result.rows[0].kv_bytes

Attributes are imported lazily so that ``kvplan estimate`` starts fast and never imports torch.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "estimate": ("kvplan.estimate", "estimate"),
    "EstimateResult": ("kvplan.estimate", "EstimateResult"),
    "load_model": ("kvplan.sources.resolve", "load_model"),
    "max_batch": ("kvplan.plan", "max_batch"),
    "verify": ("kvplan.verify", "verify"),
    "check": ("kvplan.deploy", "check"),
    "CapacityPlan": ("kvplan.plan", "CapacityPlan"),
    "Settings": ("kvplan.budgets", "Settings"),
    "ModelSpec": ("kvplan.spec", "ModelSpec"),
    "LayerSpec": ("kvplan.spec", "LayerSpec"),
    "KvplanError": ("kvplan.errors", "KvplanError"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module_name, attr = _LAZY[name]
        value = getattr(importlib.import_module(module_name), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
