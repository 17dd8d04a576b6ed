"""Full (global) attention: every past token keeps a K and a V vector per KV head.

MHA, GQA and MQA are the same arithmetic with kv_heads = heads, a divisor of heads, or 1.
``KVAttention`` is what full, sliding and chunked layers share: per-head K and V vectors per token;
``LocalAttention`` what sliding and chunked layers share: a bounded span of tokens attended.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Annotated, ClassVar, Literal

from kvplan.layouts.base import Doc, LayerSpec, PositiveInt, TokenCost, register
from kvplan.record import dataclass

if TYPE_CHECKING:
    from kvplan.dtypes import KVDType


@dataclass(frozen=True, kw_only=True)
class KVAttention(LayerSpec):
    """Attention that caches a K and a V vector per KV head and token (full, sliding, chunked)."""

    kv_heads: Annotated[PositiveInt, Doc("Key/value heads.")]
    head_dim: Annotated[PositiveInt, Doc("Key head dimension.")]
    v_head_dim: Annotated[PositiveInt | None, Doc("Value head dimension when it differs from the key's.")] = None

    caches_tokens: ClassVar[bool] = True
    bounded: ClassVar[tuple[str, ...]] = ("kv_heads", "head_dim", "v_head_dim")

    @property
    def v_dim(self) -> int:
        """The value head dimension (the key's when none is given)."""
        return self.v_head_dim if self.v_head_dim is not None else self.head_dim

    def token_cost(self, dtype: KVDType) -> TokenCost:
        return token_cost(self, dtype)

    def cache_shape(self) -> tuple[object, ...]:
        return ("kv", self.kv_heads, self.head_dim, self.v_dim)


@dataclass(frozen=True, kw_only=True)
class LocalAttention(KVAttention):
    """K/V attention over a bounded span of recent tokens (sliding window, chunked local)."""

    @property
    def span(self) -> int:
        """Tokens a layer attends over at most: the window or the chunk."""
        raise NotImplementedError


@register
@dataclass(frozen=True, kw_only=True)
class FullAttention(KVAttention):
    """Layers that attend to every past token."""

    kind: Literal["full"] = "full"
    """full: global attention over the whole sequence."""

    attends_all: ClassVar[bool] = True


def _plain_elem_size(dtype: KVDType) -> str:
    """'2 B' for dtypes stored as whole bytes per element with no scales, else ''."""
    if dtype.block_elems == 1 and dtype.scale_bytes_per_vector == 0:
        return f"{dtype.block_bytes} B"
    return ""


def token_cost(layer: KVAttention, dtype: KVDType) -> TokenCost:
    """Bytes per token of one K/V attention layer: kv_heads x (K vector + V vector)."""
    heads = layer.kv_heads
    k_bytes = dtype.vector_bytes(layer.head_dim)
    v_bytes = dtype.vector_bytes(layer.v_dim)
    elem = _plain_elem_size(dtype)
    if elem:
        formula = f"{heads} kv heads x ({layer.head_dim} + {layer.v_dim}) x {elem}"
    else:
        formula = (f"{heads} kv heads x ({k_bytes} B K[{layer.head_dim}] + {v_bytes} B V[{layer.v_dim}]"
                   f" in {dtype.name})")
    return TokenCost(heads * (k_bytes + v_bytes), formula)
