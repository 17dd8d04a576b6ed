"""Chunked local attention (Llama 4): a token attends only within its chunk of ``chunk`` tokens.

Bytes per token are those of full attention; the tokens kept are the current chunk's (engines
differ: transformers caches it like a sliding window of ``chunk``, vLLM frees whole past chunks).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Literal

from kvplan.layouts.base import PositiveInt, register
from kvplan.layouts.full import LocalAttention
from kvplan.record import dataclass


@register
@dataclass(frozen=True, kw_only=True)
class ChunkedLocal(LocalAttention):
    """Layers that attend within their chunk of ``chunk`` tokens only."""

    kind: Literal["chunked"] = "chunked"
    """chunked: local attention within fixed chunks."""
    chunk: PositiveInt
    """Attention chunk length in tokens."""

    @property
    def span(self) -> int:
        return self.chunk


def chunk_start(position: int, chunk: int) -> int:
    """First position of the chunk that ``position`` belongs to."""
    return position // chunk * chunk
