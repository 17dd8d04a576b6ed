"""The one error ``kvplan verify`` reports (one line, exit status 2, like every kvplan error)."""

from __future__ import annotations

from kvplan.errors import KvplanError


class VerifyError(KvplanError):
    """verify cannot run here (no torch, no CUDA, not enough memory) or refuses what was asked."""
