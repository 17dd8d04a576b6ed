"""Sliding-window attention: a layer only ever attends to the last ``window`` tokens.

Bytes per token are those of full attention; what differs is how many tokens are kept, which
each engine decides (transformers keeps window - 1, vLLM the blocks that cover the window).
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
class SlidingWindow(LocalAttention):
    """Layers that attend to the last ``window`` tokens only."""

    kind: Literal["sliding"] = "sliding"
    """sliding: attention over a window of the latest tokens."""
    window: PositiveInt
    """Sliding-window length in tokens."""

    @property
    def span(self) -> int:
        return self.window


def tokens_kept(context: int, keep: int) -> int:
    """Tokens a layer holds when it keeps at most ``keep`` of a ``context``-token sequence."""
    return context if context < keep else keep
