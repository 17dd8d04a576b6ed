"""vLLM (V1 engine): paged KV cache, one page per block of ``block_size`` tokens per layer.

Rules and where they come from (vllm-project/vllm):
- Page sizes: ``vllm/v1/kv_cache_interface.py``. Full / sliding / chunked layers store
  ``block_size x kv_heads x (head_size + head_size_v)`` elements per page (plus fp32 scales for the
  per-token-head modes); ``MLAAttentionSpec`` stores one ``kv_lora_rank + qk_rope_head_dim`` (576)
  latent per token, no factor 2; ``MambaSpec`` pages hold one sequence's conv + SSM state.
- A sequence holds whole blocks: ``ceil(context / block_size)`` per full-attention layer.
- Sliding-window layers (``SlidingWindowManager.get_num_skipped_tokens`` in
  ``vllm/v1/core/single_type_kv_cache_manager.py``): tokens before ``context - window + 1`` are
  skipped and the blocks made only of skipped tokens are freed, so a sequence holds the blocks
  from ``(context - window + 1) // block_size`` to the last.
- Chunked local attention (``ChunkedLocalAttentionManager``): tokens before the current chunk's
  start are skipped likewise.
- Block size: ``CacheConfig`` default 16; ``vllm/platforms/cuda.py`` forces 64 for the FlashMLA
  backend (the MLA default on Hopper); hybrid attention + Mamba models raise the attention block
  so one attention page is at least one Mamba page (``HybridAttentionMambaModelConfig``).
- Recurrent state in the model dtype (``mamba_ssm_cache_dtype='auto'``) with a conv window of
  ``conv_kernel - 1`` columns (``MambaStateShapeCalculator`` in
  ``vllm/model_executor/layers/mamba/mamba_utils.py``); in hybrid models the state page is padded
  up to one attention page of the raised block size.
- Hybrid models (``get_kv_cache_groups`` in ``vllm/v1/core/kv_cache_utils.py``): when the layers are
  not all of one spec type, ``unify_kv_cache_spec_page_size`` first makes every page the largest:
  an attention layer with a smaller page that divides it gets a proportionally larger block, one that
  does not divide it keeps its block and pads the page (backends that index by block stride; older
  releases refuse), and Mamba state pages are padded. ``_get_kv_cache_groups_uniform_page_size`` then
  cuts each spec type's layers into groups of ``group_size`` (the smallest type's layer count, or the
  largest's when that is under 1.5x the smallest); a type whose count is not a multiple gets padding
  slots: its groups still take ``group_size`` pages per block, so the empty slots cost memory.
- Llama 4's chunked layers: ``VllmConfig.__post_init__`` turned the hybrid KV-cache manager off for
  ``attention_chunk_size`` models while ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE``
  defaulted to false (about v0.10 to v0.12): every layer then holds the whole sequence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from kvplan.dtypes import KVDType
from kvplan.engines.base import (
    CacheLayout,
    EngineOptions,
    GroupRule,
    PoolGrouping,
    PoolType,
    Version,
    build_groups,
    cacheless_group,
    ceil_to,
    check_kv_dtype,
)
from kvplan.errors import UsageError
from kvplan.parallel import shard_spec
from kvplan.layouts import full, mla, recurrent
from kvplan.layouts.base import TokenCost
from kvplan.spec import LayerSpec, ModelSpec

DEFAULT_BLOCK_SIZE = 16
FLASHMLA_BLOCK_SIZE = 64
# Attention block sizes for hybrid Mamba models are multiples of this (kernel alignment).
_HYBRID_BLOCK_ALIGN = 16
# Quantised layouts vLLM defines for K/V heads only (kv_cache_interface.py), not for the MLA latent.
_NO_MLA_LAYOUT = frozenset({"int8_per_token_head", "fp8_per_token_head", "int4_per_token_head", "nvfp4"})
# Releases in which chunked local attention fell back to full attention by default (approximate
# bounds: the env default flipped to true after 0.12).
_CHUNKED_AS_FULL = ((0, 10), (0, 13))



def full_blocks_tokens(context: int, block: int) -> int:
    return ceil_to(context, block)


def window_blocks_tokens(context: int, block: int, window: int) -> int:
    """Tokens of the blocks a sliding layer still holds once the skipped blocks are freed."""
    skipped = context - window + 1
    freed_blocks = skipped // block if skipped > 0 else 0
    return (-(-context // block) - freed_blocks) * block


def chunk_blocks_tokens(context: int, block: int, chunk: int) -> int:
    """Tokens of the blocks a chunked-local layer holds: from the current chunk's first block."""
    freed_blocks = (context // chunk * chunk) // block
    return (-(-context // block) - freed_blocks) * block


@dataclass(frozen=True)
class VLLMEngine:
    name: str = "vllm"
    title: str = "vLLM"
    default_version: str = "0.33"
    kv_dtypes: frozenset[str] = frozenset({
        "float32", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
        "int8_per_token_head", "fp8_per_token_head", "int4_per_token_head", "nvfp4",
    })

    def auto_kv_dtype(self, spec: ModelSpec) -> str:
        return spec.dtype

    def layout(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
        check_kv_dtype(self, kv_dtype)
        spec = shard_spec(spec, options.tp)
        assumptions: list[str] = []
        state_costs = {
            id(layer): self._state_cost(layer, spec) for layer in spec.layers if layer.kind == "recurrent"
        }
        block = self._block_size(spec, kv_dtype, options, state_costs, assumptions)
        chunked_as_full = _CHUNKED_AS_FULL[0] <= version < _CHUNKED_AS_FULL[1]
        if chunked_as_full and "chunked" in spec.layer_kind_counts():
            assumptions.append(
                f"vLLM {'.'.join(map(str, version))} turns the hybrid KV-cache manager off for chunked "
                "local attention by default: chunked layers hold the whole sequence"
            )
        groups = build_groups(
            spec, lambda layer, first: self._group(layer, first, kv_dtype, block, state_costs.get(id(layer)), chunked_as_full))
        groups = _unify_pages(groups, assumptions)
        pool = pool_grouping(groups)
        groups = groups + _padding_groups(pool, spec.num_layers)
        if state_costs:
            assumptions.append(
                "vLLM holds one recurrent state per sequence (prefix caching in 'align' mode keeps up to 2 more)"
            )
        return CacheLayout(self.name, ".".join(map(str, version)), kv_dtype, block, groups, tuple(assumptions), pool)

    def stage_layouts(self, spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions,
                      partitions: list[int]) -> list[CacheLayout]:
        """What each pipeline stage holds (``get_kv_cache_configs``): the KV-cache groups are made once
        for the whole model, then every stage keeps each group's layers it owns
        (``_project_kv_cache_groups_to_worker``): the same number of groups on every stage, each
        ``group_size`` = the longest projected group, the rest of every group padding."""
        whole = self.layout(spec, kv_dtype, version, options)
        real = tuple(g for g in whole.groups if not g.padding)
        assert whole.pool is not None
        members: dict[tuple, list[int]] = {}
        for g in real:
            if g.kind not in ("shared", "none"):
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
            if whole.pool.hybrid:
                pool = PoolGrouping(tuple(types), max(lengths), whole.pool.groups_per_type, True)
            else:
                pool = PoolGrouping(tuple(types), sum(t.layers for t in types), whole.pool.groups_per_type, False)
            out.append(replace(whole, groups=groups + _padding_groups(pool, spec.num_layers), pool=pool))
            start = end
        return out

    @staticmethod
    def _state_cost(layer: LayerSpec, spec: ModelSpec) -> TokenCost:
        elem = spec.dtype_bytes
        return recurrent.state_cost(layer, conv_columns=(layer.conv_kernel or 1) - 1,
                                    conv_elem_bytes=elem, ssm_elem_bytes=elem)

    def _block_size(self, spec: ModelSpec, dtype: KVDType, options: EngineOptions,
                    state_costs: dict[int, TokenCost], assumptions: list[str]) -> int:
        if options.block_size is not None:
            return options.block_size
        kinds = spec.layer_kind_counts()
        if "mla" in kinds:
            assumptions.append(
                "vLLM block size 64: FlashMLA, the MLA backend on Hopper GPUs (Ampere: 16, Blackwell "
                "CUTLASS MLA: 128; pass --block-size to change)"
            )
            return FLASHMLA_BLOCK_SIZE
        attention = [layer for layer in spec.layers if layer.kind in ("full", "sliding", "chunked")]
        if state_costs and attention:
            mamba_page = max(cost.bytes for cost in state_costs.values())
            attn_per_token = max(full.token_cost(layer, dtype).bytes for layer in attention)
            align = _HYBRID_BLOCK_ALIGN
            block = align * -(-mamba_page // (align * attn_per_token))
            assumptions.append(
                f"vLLM raises the attention block to {block} tokens so one attention page holds a "
                f"recurrent state page ({mamba_page:,} B)"
            )
            return max(block, DEFAULT_BLOCK_SIZE)
        return DEFAULT_BLOCK_SIZE

    def _group(self, layer: LayerSpec, first: int, dtype: KVDType, block: int,
               state: TokenCost | None, chunked_as_full: bool) -> GroupRule:
        kind = layer.kind
        if kind == "chunked" and chunked_as_full:
            # the hybrid manager is off: vLLM gives these layers a FullAttentionSpec
            return _paged(layer, first, full.token_cost(layer, dtype), block, cache_kind="full")
        if kind == "full":
            return _paged(layer, first, full.token_cost(layer, dtype), block)
        if kind == "sliding":
            return _paged(layer, first, full.token_cost(layer, dtype), block)
        if kind == "chunked":
            return _paged(layer, first, full.token_cost(layer, dtype), block)
        if kind == "mla":
            if dtype.name in _NO_MLA_LAYOUT:
                raise UsageError(f"vLLM's MLA cache has no '{dtype.name}' layout (MLA takes auto, fp8 or fp8_ds_mla)")
            return _paged(layer, first, mla.latent_cost(layer, dtype), block)
        if kind == "recurrent":
            return replace(cacheless_group(layer, first, state), block_size=block)
        return cacheless_group(layer, first)


def _paged(layer: LayerSpec, first: int, token: TokenCost, block: int, cache_kind: str | None = None) -> GroupRule:
    """An attention group holding whole blocks of ``block`` tokens, by its (cache) kind's rule."""
    kind = cache_kind or layer.kind
    if kind == "sliding":
        window = layer.window
        assert window is not None
        held, text = (lambda c, b=block, w=window: window_blocks_tokens(c, b, w)), \
            f"blocks of {block} covering the last {window} - 1 tokens"
    elif kind == "chunked":
        chunk = layer.chunk
        assert chunk is not None
        held, text = (lambda c, b=block, k=chunk: chunk_blocks_tokens(c, b, k)), \
            f"blocks of {block} from the start of the current {chunk}-token chunk"
    else:
        held, text = (lambda c, b=block: full_blocks_tokens(c, b)), f"ceil(context / {block}) x {block}"
    return GroupRule(layer, first, token, held, text, block_size=block, cache_kind=cache_kind)


# ------------------------------------------------------------------------------------ hybrid pools

def pool_type_key(group: GroupRule) -> tuple:
    """Layers with equal keys have equal vLLM KV-cache specs (kind, window or chunk, sizes, block)."""
    layer, kind = group.layer, group.cache_kind or group.kind
    span = layer.window if kind == "sliding" else layer.chunk if kind == "chunked" else None
    state = group.state.bytes if group.state is not None else 0
    return (kind, span, group.token.bytes, state, group.block_size)


def page_bytes(group: GroupRule) -> int:
    if group.kind == "recurrent":
        return group.state.bytes if group.state is not None else 0
    return group.token.bytes * (group.block_size or DEFAULT_BLOCK_SIZE)


def pool_grouping(groups: Iterable[GroupRule]) -> PoolGrouping:
    """vLLM's ``get_kv_cache_groups`` for one rank: one group when every layer has one spec type,
    else groups of ``group_size`` layer slots (``_get_kv_cache_groups_uniform_page_size``)."""
    counts: dict[tuple, list] = {}
    for group in groups:
        if group.padding or group.kind in ("shared", "none"):
            continue
        entry = counts.setdefault(pool_type_key(group), [0, group])
        entry[0] += group.count
    types = tuple(PoolType(key[0], key[1], key[4] or DEFAULT_BLOCK_SIZE, page_bytes(rule), n, rule)
                  for key, (n, rule) in counts.items())
    # UniformTypeKVCacheSpecs: one spec class (and window / chunk) for all layers, sizes may differ
    if len({(t.kind, t.span) for t in types}) <= 1:
        return PoolGrouping(types, sum(t.layers for t in types), tuple(1 for _ in types), False)
    smallest = min(t.layers for t in types)
    largest = max(t.layers for t in types)
    size = largest if largest < 1.5 * smallest else smallest
    return PoolGrouping(types, size, tuple(-(-t.layers // size) for t in types), True)


def _unify_pages(groups: tuple[GroupRule, ...], assumptions: list[str]) -> tuple[GroupRule, ...]:
    """``unify_kv_cache_spec_page_size``: make every page of a hybrid model the largest one."""
    grouping = pool_grouping(groups)
    if not grouping.hybrid or len({t.page_bytes for t in grouping.types}) <= 1:
        return groups
    largest = max(t.page_bytes for t in grouping.types)
    out = []
    raised, padded = set(), set()
    for group in groups:
        if group.kind in ("shared", "none"):
            out.append(group)
            continue
        page = page_bytes(group)
        block = group.block_size or DEFAULT_BLOCK_SIZE
        if page == largest:
            out.append(group)
        elif group.kind == "recurrent":
            assert group.state is not None
            state = TokenCost(largest, f"{group.state.formula}, padded to one {largest:,} B page")
            out.append(replace(group, state=state))
            padded.add(f"recurrent state pages ({page:,} B)")
        elif largest % page == 0:
            bigger = block * (largest // page)
            out.append(_paged(group.layer, group.first_layer, group.token, bigger, group.cache_kind))
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


def _slice(group: GroupRule, start: int, end: int) -> GroupRule:
    """The part of a run of identical layers inside layers [start, end)."""
    first = max(group.first_layer, start)
    last = min(group.first_layer + group.count, end)
    return replace(group, layer=replace(group.layer, count=last - first), first_layer=first)


def _padding_groups(grouping: PoolGrouping, num_layers: int) -> tuple[GroupRule, ...]:
    """The unused layer slots of each type's groups: allocated like the type's layers, read by none.
    They are numbered after the model's layers."""
    out, index = [], num_layers
    for layer_type, padding in zip(grouping.types, grouping.padding_per_type):
        if padding:
            rule = layer_type.rule
            out.append(replace(rule, layer=replace(rule.layer, count=padding), first_layer=index, padding=True))
            index += padding
    return tuple(out)


VLLM = VLLMEngine()
