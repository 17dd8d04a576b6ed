"""Layers that hold no cache of their own: cross-layer KV sharing (Gemma-3n, YOCO) or no attention."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import ClassVar, Literal

from kvplan.errors import SpecError
from kvplan.layouts.base import LayerSpec, NonNegativeInt, TokenCost, register
from kvplan.record import dataclass, replace

if TYPE_CHECKING:
    from kvplan.dtypes import KVDType


@register
@dataclass(frozen=True, kw_only=True)
class SharedKV(LayerSpec):
    """Layers that read an earlier layer's cache and keep none of their own."""

    kind: Literal["shared"] = "shared"
    """shared: cross-layer KV sharing."""
    shares_with: NonNegativeInt
    """Index of the layer whose cache this one reuses."""

    own_cache: ClassVar[bool] = False

    def token_cost(self, dtype: KVDType | None = None) -> TokenCost:
        return TokenCost(0, f"reuses layer {self.shares_with}'s cache")

    def check_position(self, index: int) -> None:
        if self.shares_with >= index:
            raise SpecError(f"layer {index} shares the cache of layer {self.shares_with}, which is not an earlier "
                            "layer")

    def in_stage(self, start: int) -> LayerSpec:
        # an owner in an earlier stage leaves no cache here
        return NoCache() if self.shares_with < start else replace(self, shares_with=self.shares_with - start)


@register
@dataclass(frozen=True, kw_only=True)
class NoCache(LayerSpec):
    """Layers that cache nothing."""

    kind: Literal["none"] = "none"
    """none: no cache."""

    own_cache: ClassVar[bool] = False

    def token_cost(self, dtype: KVDType | None = None) -> TokenCost:
        return TokenCost(0, "no cache")

