"""kvplan: KV-cache memory capacity planner for LLM serving.

Library use::

    import kvplan
    result = kvplan.estimate("meta-llama/Llama-3.1-8B", contexts=[8192], batches=[1, 8])
    result.rows[0].kv_bytes

Every name in ``__all__`` is imported lazily, on first use, so that ``import kvplan`` and
``kvplan estimate`` start fast and never import torch. Errors are ``kvplan.KvplanError`` (a
``ValueError``) or one of its subclasses, each with ``.field``: the parameter at fault.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any
else:
    ModuleType = type(sys)  # types.ModuleType, without importing types at every start

from kvplan._version import __version__  # written once, in _version.py (pyproject.toml reads it)

_LAZY = {
    # what kvplan computes
    "estimate": ("kvplan.estimate", "estimate"),
    "EstimateResult": ("kvplan.estimate", "EstimateResult"),
    "max_batch": ("kvplan.plan", "max_batch"),
    "CapacityPlan": ("kvplan.plan", "CapacityPlan"),
    "Settings": ("kvplan.budgets", "Settings"),
    "verify": ("kvplan.verify", "verify"),
    "VerifyResult": ("kvplan.verify", "VerifyResult"),
    "check": ("kvplan.deploy", "check"),
    "CheckReport": ("kvplan.deploy.report", "CheckReport"),
    # what it reads
    "load_model": ("kvplan.sources.resolve", "load_model"),
    "ModelSpec": ("kvplan.spec", "ModelSpec"),
    "LayerSpec": ("kvplan.spec", "LayerSpec"),
    "GPU": ("kvplan.hardware", "GPU"),
    "load_catalog": ("kvplan.hardware", "load_catalog"),
    "find_gpu": ("kvplan.hardware", "find_gpu"),
    # values as people write them
    "parse_counts": ("kvplan.units", "parse_counts"),
    "parse_bytes": ("kvplan.hardware", "parse_bytes"),
    "format_bytes": ("kvplan.units", "format_bytes"),
    # errors
    "KvplanError": ("kvplan.errors", "KvplanError"),
    "UsageError": ("kvplan.errors", "UsageError"),
    "SpecError": ("kvplan.errors", "SpecError"),
    "ModelSpecError": ("kvplan.errors", "ModelSpecError"),
    "ConfigError": ("kvplan.errors", "ConfigError"),
    "NotFoundError": ("kvplan.errors", "NotFoundError"),
    "HubError": ("kvplan.errors", "HubError"),
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:  # for type checkers and editors; at run time the names load on first use
    from kvplan.budgets import Settings
    from kvplan.deploy import check
    from kvplan.deploy.report import CheckReport
    from kvplan.errors import (ConfigError, HubError, KvplanError, ModelSpecError, NotFoundError, SpecError,
                               UsageError)
    from kvplan.estimate import EstimateResult, estimate
    from kvplan.hardware import GPU, find_gpu, load_catalog, parse_bytes
    from kvplan.plan import CapacityPlan, max_batch
    from kvplan.sources.resolve import load_model
    from kvplan.spec import LayerSpec, ModelSpec
    from kvplan.units import format_bytes, parse_counts
    from kvplan.verify import VerifyResult, verify


# Functions that share their name with the submodule that defines them: the package attribute is that
# submodule, made callable, so ``kvplan.estimate(...)``, ``kvplan.estimate.EstimateResult`` and
# ``import kvplan.verify.distributed`` all work whichever was imported first.
_CALLABLE_MODULES = frozenset({"estimate", "verify"})


class _CallableModule(ModuleType):
    """A submodule that, called, calls its function of the same name."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, self.__name__.rpartition(".")[2])(*args, **kwargs)


def __getattr__(name: str) -> Any:
    if name in _CALLABLE_MODULES:
        import importlib

        return importlib.import_module(f"kvplan.{name}")  # the import sets the (callable) attribute
    if name in _LAZY:
        import importlib

        module_name, attr = _LAZY[name]
        value = getattr(importlib.import_module(module_name), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kvplan' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


class _Package(ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name in _CALLABLE_MODULES and isinstance(value, ModuleType) and value.__name__ == f"kvplan.{name}":
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
