"""Layers that hold no cache of their own: cross-layer KV sharing (Gemma-3n, YOCO) or no attention."""

from __future__ import annotations

from kvplan.layouts.base import TokenCost
from kvplan.spec import LayerSpec


def token_cost(layer: LayerSpec) -> TokenCost:
    if layer.kind == "shared":
        return TokenCost(0, f"reuses layer {layer.shares_with}'s cache")
    return TokenCost(0, "no cache")
