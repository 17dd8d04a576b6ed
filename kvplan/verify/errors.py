"""The one error ``kvplan verify`` reports (one line, exit status 2, like every kvplan error).

It is defined beside the engines' tensor plans, which raise it too."""

from __future__ import annotations

from kvplan.engines.tensors import VerifyError

__all__ = ["VerifyError"]
