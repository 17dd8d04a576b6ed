"""Shared result type of the layout modules."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenCost:
    """Bytes one layer stores for one token (attention) or one sequence (recurrent state)."""

    bytes: int
    formula: str
    """How ``bytes`` is made, e.g. '8 kv heads x (128 + 128) x 2 B'."""


