"""The buffers vLLM allocates for its KV cache, as ``vllm/v1/worker/gpu_model_runner.py`` does.

``KVCacheTensor``s are raw int8 buffers of ``num_blocks x page`` bytes, viewed per layer in the
attention backend's shape. With one layer type (every layer full, or every layer MLA) each layer owns
one buffer. Hybrid models (sliding + full, attention + Mamba) share buffers: the KV-cache groups
(``pool.py``, strided as vLLM strides them) put buffer ``j`` under the ``j``-th slot of every group,
each group uses its own blocks of the pool, and slots a group cannot fill (the layout's ``padding``
groups) get an unused view of their pages. Pages padded to the unified size are laid out block-major.
Attention layers view their buffer as K and V planes ``[num_blocks, block_size, kv_heads, head_dim]``
(then fp32 scale planes ``[num_blocks, block_size, kv_heads]`` for the ``*_per_token_head`` modes, fp8
scale planes for nvfp4); MLA as ``[num_blocks, block_size, 576]`` (``fp8_ds_mla``: 656 uint8 per
token); Mamba layers as one state page per block (conv ``[conv_kernel - 1, conv_dim]``, SSM
``ssm_state``, both in the model dtype, then the page padding). A batch of ``B`` sequences of ``C``
tokens gets ``num_blocks = B x sum over groups of the blocks one sequence holds``; sequence ``s``
holds consecutive blocks, so a layer's K for the whole batch is one contiguous view.
"""

from __future__ import annotations

from math import prod

from kvplan.dtypes import KVDType
from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.engines.sharing import Workload
from kvplan.engines.tensors import (
    DTYPE_BYTES,
    FP8,
    PLAIN,
    BlockTable,
    BufferSpec,
    LayerInfo,
    TensorPlan,
    VerifyError,
    ViewSpec,
    component_names,
)
from kvplan.engines.vllm.pool import (DEFAULT_BLOCK_SIZE, PoolGrouping, PoolTypeKey, page_bytes, pool_grouping,
                                     pool_type_key)
from kvplan.spec import MLA, KVAttention, ModelSpec, Recurrent


def _vector_layout(dtype: KVDType, n: int) -> tuple[str, int, str | None, int]:
    """How vLLM stores one n-element K or V vector: (data dtype, data elems, scale dtype, scale elems)."""
    name = dtype.name
    if name in PLAIN:
        out: tuple[str, int, str | None, int] = (PLAIN[name], n, None, 0)
    elif name in FP8:
        out = (FP8[name], n, None, 0)
    elif name == "int8_per_token_head":
        out = ("int8", n, "float32", 1)
    elif name == "fp8_per_token_head":
        out = ("float8_e4m3fn", n, "float32", 1)
    elif name == "int4_per_token_head":
        out = ("uint8", -(-n // 2), "float32", 1)
    elif name == "nvfp4":
        out = ("uint8", -(-n // 16) * 8, "float8_e4m3fn", -(-n // 16))
    else:
        raise VerifyError(f"verify has no tensor layout for vLLM kv dtype '{name}'")
    data_dtype, data, scale_dtype, scale = out
    size = data * DTYPE_BYTES[data_dtype] + (scale * DTYPE_BYTES[scale_dtype] if scale_dtype else 0)
    if size != dtype.vector_bytes(n):
        raise VerifyError(f"internal: {name} vector of {n} stored in {size} B, the rule says {dtype.vector_bytes(n)} B")
    return out


def _mla_row(dtype: KVDType, layer: MLA) -> tuple[str, int]:
    width = layer.kv_lora_rank + layer.qk_rope_head_dim
    if dtype.name == "fp8_ds_mla":
        return "uint8", dtype.mla_latent_bytes(layer.kv_lora_rank, layer.qk_rope_head_dim)
    if dtype.name in PLAIN:
        return PLAIN[dtype.name], width
    if dtype.name in FP8:
        return FP8[dtype.name], width
    raise VerifyError(f"vLLM's MLA cache has no '{dtype.name}' layout")


def plan_tensors(spec: ModelSpec, layout: CacheLayout, batch: int, context: int,
                 workload: Workload | None = None) -> TensorPlan:
    """The pool for ``batch`` requests of ``context`` tokens; with a ``workload`` each request has
    ``workload.samples`` sequences and the blocks vLLM shares (``sharing.py``) are allocated once."""
    names = component_names(layout)
    tables = _Tables(layout, batch, context, workload)
    grouping = layout.pool if isinstance(layout.pool, PoolGrouping) else pool_grouping(layout.groups)
    # layers of each spec type, in model order, and the type's padding slots: (index, group position, rule)
    members: dict[PoolTypeKey, list[tuple[int, int, GroupRule]]] = {}
    padding: dict[PoolTypeKey, list[tuple[int, int, GroupRule]]] = {}
    for gi, g in enumerate(layout.groups):
        if gi not in names:
            continue
        into = padding if g.padding else members
        for index in range(g.first_layer, g.first_layer + g.count):
            into.setdefault(pool_type_key(g), []).append((index, gi, g))
    # vLLM groups: one per type chunk; buffer `slot` is shared by the slot-th layer of every group and
    # each group uses its own blocks (block regions). Without hybrid grouping, one group of every layer.
    groups: list[list[tuple[int, int, GroupRule]]] = []  # per group: the layer (or padding slot) of each slot
    per_seq_blocks: list[tuple[int, int, int]] = []  # per group: (once, per request, per sequence)
    if grouping.hybrid:
        # Each spec type has ``groups_per_type`` groups of ``group_size`` slots. On a pipeline stage
        # (``VLLM.stage_layouts``) those are the whole model's groups projected on the stage's layers, so
        # a type can have fewer layers here than slots, or none at all: the rest are padding slots.
        for t, n in zip(grouping.types, grouping.groups_per_type):
            key = pool_type_key(t.rule)
            layers = members.get(key, [])
            pads = iter(padding.get(key, []))
            for i in range(n):
                # _get_kv_cache_groups_uniform_page_size strides the type's layers over its groups (on a
                # stage, over the stage's layers: which layer sits in which group changes no byte)
                chunk = layers[i::n]
                for _ in range(grouping.group_size - len(chunk)):
                    spare = next(pads, None)
                    if spare is None:
                        raise VerifyError(f"internal: vLLM {t.kind} groups have more empty slots than the "
                                          "layout's padding")
                    chunk.append(spare)
                groups.append(chunk)
                per_seq_blocks.append(tables.counts(t.rule))
        size = grouping.group_size
        slot_pages = [max(t.page_bytes for t in grouping.types)] * size
    else:
        only = [m for layers in members.values() for m in layers]
        only.sort(key=lambda m: m[0])
        groups.append(only)
        per_seq_blocks.append(tables.counts(only[0][2]))
        size = len(only)
        slot_pages = [page_bytes(rule) for _, _, rule in only]
    regions: list[tuple[list[tuple[int, int, GroupRule]], int, int]] = []  # (group's slots, first block, blocks)
    offset = 0
    block_tables: list[BlockTable] = []
    for chunk, (once, per_request, per_sequence) in zip(groups, per_seq_blocks):
        table = BlockTable(tuple(index for index, _, _ in chunk), offset, batch, tables.samples, once,
                           per_request, per_sequence, DEFAULT_BLOCK_SIZE)
        block_tables.append(table)
        regions.append((chunk, offset, table.blocks))
        offset += table.blocks
    num_blocks = offset
    views: list[list[ViewSpec]] = [[] for _ in range(size)]
    infos: list[LayerInfo] = []
    for chunk, first, count in regions:
        for slot, (index, gi, rule) in enumerate(chunk):
            if rule.padding:
                views[slot].append(ViewSpec(index, "unused slot", "uint8", (count, slot_pages[slot]),
                                            first * slot_pages[slot]))
                infos.append(LayerInfo(index, "padding", names[gi], rule.layer, 0, "paged"))
                continue
            views[slot].extend(_vllm_views(spec, layout.kv_dtype, rule, index, num_blocks, slot_pages[slot],
                                           first, count))
            attend = 0
            if not isinstance(rule.layer, Recurrent):
                block = rule.block_size or DEFAULT_BLOCK_SIZE
                attend = rule.held(context) - (-(-context // block) * block - context)
            infos.append(LayerInfo(index, rule.kind, names[gi], rule.layer, attend, "paged"))
    buffers = tuple(
        BufferSpec(f"kv_cache_tensor {slot}", "int8", (num_blocks * slot_pages[slot],), tuple(views[slot]))
        for slot in range(size)
    )
    pad = sum(len(v) for v in padding.values())
    notes = []
    if pad:
        notes.append(f"vLLM pads its hybrid groups with {pad} unused layer slot(s): their share of every block "
                     "is allocated and never read (the 'pool padding' row, counted in the prediction)")
    infos.sort(key=lambda info: info.index)
    if workload is not None and any(t.once or t.per_request for t in block_tables):
        notes.append("vLLM block tables: the shared blocks are allocated once in the pool and every sequence's "
                     "table references the same block ids (BlockPool.touch: a reference count, no copy)")
    return TensorPlan(buffers, tuple(infos), num_blocks, size, pad, tuple(notes), tuple(block_tables))


class _Tables:
    """Blocks per group: (once, per request, per sequence), from the rule ``estimate`` applies."""

    def __init__(self, layout: CacheLayout, batch: int, context: int, workload: Workload | None) -> None:
        from kvplan.engines.vllm.sharing import SHARING

        if workload is not None and workload.context != context:
            raise VerifyError(f"internal: a workload of {workload.context} tokens planned at {context}")
        self.context, self.workload = context, workload
        self.samples = workload.samples if workload is not None else 1
        self.rule = SHARING.bind(layout)

    def counts(self, rule: GroupRule) -> tuple[int, int, int]:
        """For a group of ``rule``'s type (its padding slots page like it)."""
        held = _blocks_per_sequence(rule, self.context)
        if self.workload is None or isinstance(rule.layer, Recurrent):  # Mamba state: one block per sequence
            return 0, 0, held
        block = rule.block_size or DEFAULT_BLOCK_SIZE
        spans = self.rule.spans(rule, self.workload)
        once = rule.tokens.prefix_held(self.context, spans.across_requests)
        shared = rule.tokens.prefix_held(self.context, max(spans.across_requests, spans.across_samples))
        if once % block or shared % block:
            raise VerifyError(f"internal: vLLM {rule.kind} layers share {once} / {shared} tokens, not whole "
                              f"blocks of {block}")
        # A block table lists the blocks a sequence still holds in position order: the last
        # ``held`` blocks up to the one holding its newest token (sliding layers freed the others).
        # The shared blocks must be the held blocks below the shared span, or no table can express it.
        last = -(-self.context // block)
        for span, tokens in ((spans.across_requests, once),
                             (max(spans.across_requests, spans.across_samples), shared)):
            overlap = max(0, min(last, span // block) - (last - held))
            if overlap * block != tokens:
                field = "shared_prefix" if span == spans.across_requests and self.workload.shared_prefix else (
                    "n" if self.workload.n > 1 else "beam_width")
                # a guard: the sharing rule and the token rule must free the same blocks (both with the
                # scheduling lag), or a table would hold a block both shared and per sequence
                raise VerifyError(f"verify cannot lay out vLLM's {rule.kind} blocks with it yet: kvplan's rule "
                                  f"shares {tokens // block} of the {overlap} block(s) of the first {span:,} "
                                  "tokens a sequence still holds", field=field)
        return once // block, (shared - once) // block, held - shared // block


def _blocks_per_sequence(rule: GroupRule, context: int) -> int:
    if isinstance(rule.layer, Recurrent):
        return 1
    block = rule.block_size or DEFAULT_BLOCK_SIZE
    held = rule.held(context)
    if held % block:
        raise VerifyError(f"internal: vLLM {rule.kind} layers hold {held} tokens, not whole blocks of {block}")
    return held // block


def _vllm_views(spec: ModelSpec, dtype: KVDType, rule: GroupRule, index: int, num_blocks: int,
                slot_page: int, first: int, count: int) -> list[ViewSpec]:
    layer = rule.layer
    block = rule.block_size or DEFAULT_BLOCK_SIZE
    if isinstance(layer, KVAttention):
        heads = layer.kv_heads
        k = _vector_layout(dtype, layer.head_dim)
        v = _vector_layout(dtype, layer.v_dim)
        planes = [("K", k[0], k[1]), ("V", v[0], v[1])]
        if k[2] is not None:
            # the ignore: v's scale dtype is set where k's is (one KV dtype for both)
            planes += [("K scale", k[2], k[3]), ("V scale", v[2], v[3])]  # type: ignore[list-item]
        shapes = [(role, dt, (count, block, heads, elems) if elems != 1 or role in ("K", "V") else (count, block, heads),
                   block * heads * elems * DTYPE_BYTES[dt]) for role, dt, elems in planes]
        natural = sum(per_block for *_, per_block in shapes)
        out = []
        if natural == slot_page:
            # plane-major, as FlashAttention views it: [2, num_blocks, block, heads, dim]
            plane_start = 0
            for role, dt, shape, per_block in shapes:
                out.append(ViewSpec(index, role, dt, shape, plane_start + first * per_block))
                plane_start += num_blocks * per_block
            return out
        if natural > slot_page:
            raise VerifyError(f"internal: layer {index}'s planes exceed its buffer")
        # a page padded to the unified size: block-major, read with a stride of one page
        start = first * slot_page
        for role, dt, shape, per_block in shapes:
            out.append(ViewSpec(index, role, dt, shape, start, slot_page))
            start += per_block
        out.append(ViewSpec(index, "page padding", "uint8", (count, slot_page - natural), start, slot_page))
        return out
    if isinstance(layer, MLA):
        dt, width = _mla_row(dtype, layer)
        per_block = block * width * DTYPE_BYTES[dt]
        return [ViewSpec(index, "latent", dt, (count, block, width), first * per_block)]
    if isinstance(layer, Recurrent):
        assert rule.state is not None
        dt = spec.dtype
        conv = (layer.conv_kernel - 1, layer.conv_dim)
        conv_bytes = prod(conv) * DTYPE_BYTES[dt]
        ssm_bytes = prod(layer.ssm_state) * DTYPE_BYTES[dt]
        padding = rule.state.bytes - conv_bytes - ssm_bytes
        if padding < 0 or rule.state.bytes > slot_page:
            raise VerifyError(f"internal: vLLM state of layer {index} does not fit its {rule.state.bytes} B page")
        base = first * slot_page
        out = [ViewSpec(index, "conv", dt, (count, *conv), base, slot_page),
               ViewSpec(index, "ssm", dt, (count, *layer.ssm_state), base + conv_bytes, slot_page)]
        if padding:
            out.append(ViewSpec(index, "page padding", "uint8", (count, padding), base + conv_bytes + ssm_bytes,
                                slot_page))
        return out
    raise VerifyError(f"internal: no vLLM tensors for '{rule.kind}' layers")
