"""vLLM's KV-cache groups for one rank (``vllm/v1/core/kv_cache_utils.py``).

- When the layers are not all of one spec type, ``unify_kv_cache_spec_page_size`` first makes every
  page the largest: an attention layer with a smaller page that divides it gets a proportionally
  larger block, one that does not divide it keeps its block and pads the page (backends that index by
  block stride; older releases refuse), and Mamba state pages are padded.
- ``_get_kv_cache_groups_uniform_page_size`` then cuts each spec type's layers into groups of
  ``group_size`` (the smallest type's layer count, or the largest's when that is under 1.5x the
  smallest); a type whose count is not a multiple gets padding slots: its groups still take
  ``group_size`` pages per block, so the empty slots cost memory.
- Pipeline stages (``get_kv_cache_configs``): the groups are made once for the whole model, then
  every stage keeps each group's layers it owns (``_project_kv_cache_groups_to_worker``): the same
  number of groups on every stage, each ``group_size`` = the longest projected group.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.engines.rules import TokenRule
from kvplan.errors import UsageError
from kvplan.layouts.base import TokenCost
from kvplan.record import dataclass, replace
from kvplan.spec import LayerSpec, LocalAttention, Recurrent

DEFAULT_BLOCK_SIZE = 16


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
    in_flight_batches: int = 2
    """Batches scheduled but not computed: 2 with async scheduling, 1 synchronous (admission)."""
    state_pages: int = 1
    """Pages a Mamba group is admitted with: 1 (``mamba_cache_mode`` 'none'), 2 + checkpoint blocks
    ('align', with prefix caching)."""
    reserved_blocks: int = 1
    """Blocks the pool never hands out: ``BlockPool``'s null block (V1)."""

    @property
    def padding_per_type(self) -> tuple[int, ...]:
        if not self.hybrid:
            return tuple(0 for _ in self.types)
        return tuple(g * self.group_size - t.layers for t, g in zip(self.types, self.groups_per_type))


def paged(layer: LayerSpec, first: int, token: TokenCost, block: int, tokens: TokenRule,
          cache_kind: str | None = None) -> GroupRule:
    """An attention group holding whole blocks of ``block`` tokens, as ``tokens`` says (the rule of its kind, or of
    ``cache_kind`` where vLLM gives the layers another kind of cache)."""
    return GroupRule(layer, first, token, tokens, block_size=block, cache_kind=cache_kind)


PoolTypeKey = tuple[str, int | None, int, int, int | None]
"""(kind, window or chunk, bytes per token, state bytes, block size): ``pool_type_key``."""


def pool_type_key(group: GroupRule) -> PoolTypeKey:
    """Layers with equal keys have equal vLLM KV-cache specs (kind, window or chunk, sizes, block)."""
    layer, kind = group.layer, group.cache_kind or group.kind
    span = layer.span if isinstance(layer, LocalAttention) and group.cache_kind is None else None
    state = group.state.bytes if group.state is not None else 0
    return (kind, span, group.token.bytes, state, group.block_size)


def page_bytes(group: GroupRule) -> int:
    if isinstance(group.layer, Recurrent):
        return group.state.bytes if group.state is not None else 0
    return group.token.bytes * (group.block_size or DEFAULT_BLOCK_SIZE)


def _cached(group: GroupRule) -> bool:
    return not group.padding and group.layer.own_cache


def pool_grouping(groups: Iterable[GroupRule]) -> PoolGrouping:
    """vLLM's ``get_kv_cache_groups`` for one rank: one group when every layer has one spec type,
    else groups of ``group_size`` layer slots (``_get_kv_cache_groups_uniform_page_size``)."""
    counts: dict[PoolTypeKey, list[Any]] = {}  # [layers, the first group of the type]
    for group in groups:
        if not _cached(group):
            continue
        entry = counts.setdefault(pool_type_key(group), [0, group])
        entry[0] += group.count
    types = tuple(PoolType(key[0], key[1], key[4] or DEFAULT_BLOCK_SIZE, page_bytes(rule), n, rule)
                  for key, (n, rule) in counts.items())
    # UniformTypeKVCacheSpecs: one spec class (and window / chunk) for all layers, sizes may differ
    if len({(t.kind, t.span) for t in types}) <= 1:
        return PoolGrouping(types, sum(t.layers for t in types), tuple(1 for _ in types), False)
    smallest = min(t.layers for t in types)
    biggest = max(t.layers for t in types)
    size = biggest if biggest < 1.5 * smallest else smallest
    return PoolGrouping(types, size, tuple(-(-t.layers // size) for t in types), True)


def unify_pages(groups: tuple[GroupRule, ...], assumptions: list[str]) -> tuple[GroupRule, ...]:
    """``unify_kv_cache_spec_page_size``: make every page of a hybrid model the largest one."""
    grouping = pool_grouping(groups)
    if not grouping.hybrid or len({t.page_bytes for t in grouping.types}) <= 1:
        return groups
    largest = max(t.page_bytes for t in grouping.types)
    out = []
    raised, padded = set(), set()
    for group in groups:
        if not group.layer.own_cache:
            out.append(group)
            continue
        page = page_bytes(group)
        block = group.block_size or DEFAULT_BLOCK_SIZE
        if page == largest:
            out.append(group)
        elif isinstance(group.layer, Recurrent):
            assert group.state is not None
            state = TokenCost(largest, f"{group.state.formula}, padded to one {largest:,} B page")
            out.append(replace(group, state=state))
            padded.add(f"recurrent state pages ({page:,} B)")
        elif largest % page == 0:
            bigger = block * (largest // page)
            out.append(replace(group, tokens=group.tokens.with_block(bigger), block_size=bigger))
            raised.add(f"{group.kind} layers of {group.token.bytes:,} B per token: blocks of {bigger}")
        elif largest % block == 0:
            token = TokenCost(largest // block, f"{group.token.formula}, page padded to {largest:,} B")
            out.append(replace(group, token=token))
            padded.add(f"{group.kind} pages of {page:,} B (needs an attention backend that indexes KV by "
                       "block stride; older vLLM refuses the model)")
        else:
            raise UsageError(f"vLLM cannot unify the page sizes of this model ({page:,} B and {largest:,} B)")
    if raised:
        assumptions.append(f"vLLM unifies page sizes to {largest:,} B: " + "; ".join(sorted(raised)))
    if padded:
        assumptions.append(f"vLLM pads smaller pages to {largest:,} B: " + "; ".join(sorted(padded)))
    return tuple(out)


def padding_groups(grouping: PoolGrouping, num_layers: int) -> tuple[GroupRule, ...]:
    """The unused layer slots of each type's groups: allocated like the type's layers, read by none.
    They are numbered after the model's layers."""
    out, index = [], num_layers
    for layer_type, padding in zip(grouping.types, grouping.padding_per_type):
        if padding:
            rule = layer_type.rule
            out.append(replace(rule, layer=replace(rule.layer, count=padding), first_layer=index, padding=True))
            index += padding
    return tuple(out)


def project_stages(whole: CacheLayout, num_layers: int, partitions: list[int]) -> list[CacheLayout]:
    """What each pipeline stage holds of the whole model's groups (``get_kv_cache_configs``)."""
    real = tuple(g for g in whole.groups if not g.padding)
    assert isinstance(whole.pool, PoolGrouping)
    members: dict[PoolTypeKey, list[int]] = {}
    for g in real:
        if _cached(g):
            members.setdefault(pool_type_key(g), []).extend(range(g.first_layer, g.first_layer + g.count))
    out, start = [], 0
    for size in partitions:
        end = start + size
        groups = tuple(_slice(g, start, end) for g in real if g.first_layer < end and g.first_layer + g.count > start)
        types, lengths = [], []
        for t, n in zip(whole.pool.types, whole.pool.groups_per_type):
            layers = members[pool_type_key(t.rule)]
            # _get_kv_cache_groups_uniform_page_size strides each type's layers over its n groups
            projected = [sum(1 for i in layers[k::n] if start <= i < end) for k in range(n)]
            lengths += projected
            types.append(replace(t, layers=sum(projected)))
        size = max(lengths) if whole.pool.hybrid else sum(t.layers for t in types)
        pool = replace(whole.pool, types=tuple(types), group_size=size)
        out.append(replace(whole, groups=groups + padding_groups(pool, num_layers), pool=pool))
        start = end
    return out


def _slice(group: GroupRule, start: int, end: int) -> GroupRule:
    """The part of a run of identical layers inside layers [start, end)."""
    first = max(group.first_layer, start)
    last = min(group.first_layer + group.count, end)
    return replace(group, layer=replace(group.layer, count=last - first), first_layer=first)
