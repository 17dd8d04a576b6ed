"""What an engine profile produces: how it holds each group of layers for one model and dtype.

An engine turns a ModelSpec and a KV dtype into a ``CacheLayout``: per group of identical layers,
the bytes per held token, the fixed bytes per sequence (recurrent state) and the rule for how many
tokens a sequence of ``context`` tokens occupies (exact tokens, whole blocks, a window...).
Everything downstream (estimate sweeps, by-layer tables, verify's tensor shapes) reads this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kvplan.dtypes import KVDType
from kvplan.errors import UsageError
from kvplan.layouts.base import TokenCost
from kvplan.spec import LayerSpec, ModelSpec

Version = tuple[int, ...]
# 'latest' / 'current': newer than every numbered release, so every ">= since" rule applies.
LATEST: Version = (1_000_000,)


def parse_version(text: str) -> Version:
    """'0.33', 'v0.33.1', '4.57' -> (0, 33), (0, 33, 1), (4, 57); 'latest' / 'current' -> LATEST."""
    if text.strip().lower() in ("latest", "current"):
        return LATEST
    cleaned = text.strip().lstrip("vV")
    try:
        parts = tuple(int(p) for p in cleaned.split("."))
    except ValueError:
        raise UsageError(f"engine version '{text}' is not a version number like 0.33 or 4.57") from None
    if not parts or any(p < 0 for p in parts):
        raise UsageError(f"engine version '{text}' is not a version number like 0.33 or 4.57")
    return parts


@dataclass(frozen=True)
class GroupRule:
    """How the engine holds ``count`` consecutive identical layers, per sequence."""

    layer: LayerSpec
    first_layer: int
    """Index of the group's first layer in the model."""
    token: TokenCost
    """Bytes per held token per layer (zero for recurrent and cache-less layers)."""
    held: Callable[[int], int]
    """Tokens one sequence of ``context`` tokens occupies in one layer of this group."""
    held_formula: str
    """``held`` as text, e.g. 'ceil(context / 16) x 16' or 'min(context, 4095)'."""
    state: TokenCost | None = None
    """Fixed bytes per sequence per layer (recurrent state)."""
    batch_held: Callable[[int, int], int] | None = None
    """Tokens a whole batch occupies in one layer, where that is not batch x held(context)
    (llama.cpp sizes its sliding-window cache per cache, not per sequence)."""
    block_size: int | None = None
    """Tokens per page of this group, for paged engines (vLLM may page layer types differently)."""
    cache_kind: str | None = None
    """The kind of cache the engine gives these layers where it differs from theirs (vLLM 0.10-0.12
    holds chunked layers as full attention)."""
    padding: bool = False
    """Unused layer slots the engine allocates like ``layer`` but no layer reads (vLLM pads the groups
    of hybrid models): counted in the bytes, shown apart from the model's layers."""

    @property
    def count(self) -> int:
        return self.layer.count

    @property
    def kind(self) -> str:
        return self.layer.kind

    def tokens_for(self, context: int, batch: int) -> int:
        """Tokens ``batch`` sequences of ``context`` tokens occupy in one layer of this group."""
        if self.batch_held is not None:
            return self.batch_held(context, batch)
        return batch * self.held(context)

    def layer_bytes(self, context: int, batch: int) -> int:
        """Bytes ``batch`` sequences of ``context`` tokens hold in one layer of this group."""
        state = batch * self.state.bytes if self.state is not None else 0
        return self.token.bytes * self.tokens_for(context, batch) + state


@dataclass(frozen=True)
class PoolType:
    """Layers of one KV-cache spec: vLLM groups them together and pads their last groups."""

    kind: str
    """'full', 'mla', 'sliding', 'chunked' or 'recurrent'."""
    span: int | None
    """window (sliding) or chunk (chunked)."""
    block_size: int
    page_bytes: int
    """One block of one layer (one state of a recurrent layer)."""
    layers: int
    rule: GroupRule
    """One of the type's groups: its token rule."""


@dataclass(frozen=True)
class PoolGrouping:
    """How vLLM cuts one rank's layers into KV-cache groups sharing one block pool."""

    types: tuple[PoolType, ...]
    group_size: int
    """Layer slots per group (hybrid), or every layer (one spec type: one group)."""
    groups_per_type: tuple[int, ...]
    hybrid: bool

    @property
    def padding_per_type(self) -> tuple[int, ...]:
        if not self.hybrid:
            return tuple(0 for _ in self.types)
        return tuple(g * self.group_size - t.layers for t, g in zip(self.types, self.groups_per_type))


@dataclass(frozen=True)
class CacheLayout:
    engine: str
    engine_version: str
    kv_dtype: KVDType
    block_size: int | None
    """Tokens per page for paged engines; None where the engine does not page."""
    groups: tuple[GroupRule, ...]
    assumptions: tuple[str, ...] = field(default=())
    pool: PoolGrouping | None = None
    """How a paged engine groups these layers in its block pool (vLLM), where the engine built it."""

    def total_bytes(self, context: int, batch: int) -> int:
        """Bytes the engine holds for ``batch`` sequences of ``context`` tokens, all layers."""
        return sum(g.count * g.layer_bytes(context, batch) for g in self.groups)


@dataclass(frozen=True)
class EngineOptions:
    """Per-run knobs an engine's rules depend on."""

    block_size: int | None = None
    """Override the engine's page size in tokens (vLLM --block-size, SGLang --page-size, ...)."""
    tp: int = 1
    """Tensor-parallel ranks: the layout is then what one rank holds."""


class Engine(Protocol):
    name: str
    title: str
    default_version: str
    kv_dtypes: frozenset[str]
    """KV dtype names this engine accepts (canonical names; 'auto' is always accepted)."""

    def auto_kv_dtype(self, spec: ModelSpec) -> str:
        """The dtype 'auto' means for this engine (usually the model's; llama.cpp's f16)."""
        ...

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
        ...


def no_tokens(context: int) -> int:
    return 0


def all_tokens(context: int) -> int:
    return context


def cacheless_group(layer: LayerSpec, first: int, state: TokenCost | None = None) -> GroupRule:
    """A group that holds no tokens: recurrent layers (a fixed ``state`` per sequence), shared or none."""
    from kvplan.layouts import shared

    return GroupRule(layer, first, shared.token_cost(layer), no_tokens, "0", state=state)


def build_groups(spec: ModelSpec, make: Callable[[LayerSpec, int], GroupRule]) -> tuple[GroupRule, ...]:
    """``make(layer, first_layer_index)`` for every group of the model, in order."""
    return tuple(make(layer, first) for layer, first in zip(spec.layers, layer_index_ranges(spec)))


def no_tensor_parallel(engine: Engine, options: EngineOptions) -> None:
    if options.tp != 1:
        raise UsageError(f"{engine.title} does not split the KV cache by tensor parallelism here "
                         "(it places whole layers per GPU): use --pp")


def ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def check_kv_dtype(engine: Engine, kv_dtype: KVDType) -> None:
    if kv_dtype.name not in engine.kv_dtypes:
        known = ", ".join(["auto", *sorted(engine.kv_dtypes)])
        raise UsageError(f"{engine.title} has no '{kv_dtype.name}' KV cache (it accepts: {known})")


def layer_index_ranges(spec: ModelSpec) -> list[int]:
    """First layer index of every group."""
    firsts, index = [], 0
    for group in spec.layers:
        firsts.append(index)
        index += group.count
    return firsts
