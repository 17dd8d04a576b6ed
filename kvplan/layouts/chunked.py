"""Chunked local attention (Llama 4): a token attends only within its chunk of ``chunk`` tokens.

Bytes per token are those of full attention; the tokens kept are the current chunk's (engines
differ: transformers caches it like a sliding window of ``chunk``, vLLM frees whole past chunks).
"""

from __future__ import annotations

from kvplan.dtypes import KVDType
from kvplan.layouts import full
from kvplan.layouts.base import TokenCost
from kvplan.spec import LayerSpec


def token_cost(layer: LayerSpec, dtype: KVDType) -> TokenCost:
    return full.token_cost(layer, dtype)


def chunk_start(position: int, chunk: int) -> int:
    """First position of the chunk that ``position`` belongs to."""
    return position // chunk * chunk
