"""Sliding-window attention: a layer only ever attends to the last ``window`` tokens.

Bytes per token are those of full attention; what differs is how many tokens are kept, which
each engine decides (transformers keeps window - 1, vLLM the blocks that cover the window).
"""

from __future__ import annotations

from kvplan.dtypes import KVDType
from kvplan.layouts import full
from kvplan.layouts.base import TokenCost
from kvplan.spec import LayerSpec


def token_cost(layer: LayerSpec, dtype: KVDType) -> TokenCost:
    return full.token_cost(layer, dtype)


def tokens_kept(context: int, keep: int) -> int:
    """Tokens a layer holds when it keeps at most ``keep`` of a ``context``-token sequence."""
    return context if context < keep else keep
