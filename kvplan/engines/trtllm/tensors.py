"""The tensors TensorRT-LLM's KV-cache manager allocates, for ``verify``.

Read in NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp`` (2025-26 main):
- ``BlockManager`` keeps one ``WindowBlockManager`` per attention window size
  (``groupLayersByWindowSize``), each with its own primary block count and block ids.
- ``WindowBlockManager::allocatePools``: one pool per distinct KV head count among its layers, shaped
  ``[num_primary_blocks, pool_layers, kv_factor, tokens_per_block x kv_heads x size_per_head]`` in the
  cache dtype (``kv_factor`` 2 for K and V, 1 for the MLA latent of ``kv_lora_rank + qk_rope_head_dim``
  with one head). Inside a block the kernels read ``[kv_heads, tokens_per_block, size_per_head]``.
- The Mamba state (``MambaCacheManager``, ``tensorrt_llm/_torch/pyexecutor/mamba_cache_manager.py``):
  one conv tensor ``[layers, sequences, conv_dim, conv_kernel - 1]`` and one SSM tensor ``[layers,
  sequences, *ssm_state]``, in the model dtype as kvplan's layout assumes.

``num_primary_blocks`` here is what ``batch`` sequences of ``context`` tokens hold in each window (the
prefix blocks reused once, ``sharing.py``), the figure ``kvplan estimate -e trtllm`` counts; the pools
TensorRT-LLM sizes from free memory hold more blocks of the same shape.
"""

from __future__ import annotations

from math import prod

from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.engines.rules import TokenRule
from kvplan.engines.sharing import SharingRule, Workload
from kvplan.engines.tensors import (
    DTYPE_BYTES,
    PLAIN,
    BlockTable,
    BufferSpec,
    LayerInfo,
    TensorPlan,
    VerifyError,
    ViewSpec,
    component_names,
    held_units,
)
from kvplan.spec import MLA, KVAttention, ModelSpec, Recurrent

_DTYPES = {**PLAIN, "fp8": "float8_e4m3fn", "int8": "int8"}


def plan_tensors(spec: ModelSpec, layout: CacheLayout, batch: int, context: int,
                 workload: Workload | None = None) -> TensorPlan:
    """The pools for ``batch`` requests of ``context`` tokens (with a ``workload``: its beams, and the
    reused prefix blocks allocated once)."""
    if workload is not None and workload.context != context:
        raise VerifyError(f"internal: a workload of {workload.context} tokens planned at {context}")
    name = layout.kv_dtype.name
    if name not in _DTYPES:
        raise VerifyError(f"verify has no tensor layout for TensorRT-LLM kv dtype '{name}' (its FP4 pools keep "
                          "block scales apart)", field="kv_dtype")
    dtype = _DTYPES[name]
    samples = workload.samples if workload is not None else 1
    block = layout.block_size or 32
    names = component_names(layout)
    from kvplan.engines.trtllm.sharing import SHARING

    rule = SHARING.bind(layout)
    windows: dict[TokenRule, list[tuple[int, GroupRule]]] = {}  # token rule (window) -> its groups
    states: list[tuple[int, GroupRule]] = []
    for gi, g in enumerate(layout.groups):
        if gi not in names:
            continue
        if isinstance(g.layer, Recurrent):
            states.append((gi, g))
        elif g.layer.caches_tokens:
            windows.setdefault(g.tokens, []).append((gi, g))
        else:
            raise VerifyError(f"internal: no TensorRT-LLM tensors for '{g.kind}' layers")
    buffers: list[BufferSpec] = []
    infos: list[LayerInfo] = []
    tables: list[BlockTable] = []
    first = 0
    # the full-attention window first (the largest), as BlockManager iterates its map of window sizes
    for key in sorted(windows, key=lambda k: int(k.windowed)):
        members = windows[key]
        counts = _blocks(members[0][1], context, block, workload, rule)
        layers = tuple(i for _, g in members for i in range(g.first_layer, g.first_layer + g.count))
        table = BlockTable(layers, first, batch, samples, *counts)
        tables.append(table)
        first += table.blocks
        pools: dict[tuple[int, int, int], list[tuple[int, GroupRule]]] = {}  # (kv_factor, heads, size) -> layers
        for gi, g in members:
            pools.setdefault(_pool_key(g, DTYPE_BYTES[dtype]), []).append((gi, g))
        for (factor, heads, size), pool in pools.items():
            indices = [(gi, g, i) for gi, g in pool for i in range(g.first_layer, g.first_layer + g.count)]
            per_block = block * heads * size  # elements of one layer's K (or latent) in one block
            shape = (table.blocks, len(indices), factor, per_block)
            pitch = len(indices) * factor * per_block * DTYPE_BYTES[dtype]
            views = []
            for slot, (gi, g, index) in enumerate(indices):
                roles = ("latent",) if factor == 1 else ("K", "V")
                for f, role in enumerate(roles):
                    offset = ((slot * factor) + f) * per_block * DTYPE_BYTES[dtype]
                    views.append(ViewSpec(index, role, dtype, (table.blocks, heads, block, size), offset, pitch))
                if factor * heads * size * DTYPE_BYTES[dtype] != g.token.bytes:
                    raise VerifyError(f"internal: TensorRT-LLM layer {index} stores "
                                      f"{factor * heads * size * DTYPE_BYTES[dtype]} B a token, the rule says "
                                      f"{g.token.bytes} B")
                infos.append(LayerInfo(index, g.kind, names[gi], g.layer, 0, "paged-hnd"))
            buffers.append(BufferSpec(f"window pool {len(tables)}: {heads} heads x {size} ({len(indices)} layers)",
                                      dtype, shape, tuple(views)))
    if states:
        buffers.extend(_states(spec, states, batch * samples, names, infos))
        tables.append(BlockTable(tuple(i for _, g in states for i in range(g.first_layer, g.first_layer + g.count)),
                                 first, batch, samples, 0, 0, 1))
        first += batch * samples
    infos.sort(key=lambda info: info.index)
    notes = [f"TensorRT-LLM pools of {first:,} blocks as the sequences hold them: the engine sizes its primary "
             "pools from free memory (more blocks of the same shape)"]
    if len(windows) > 1:
        notes.append("TensorRT-LLM variable sliding window: one WindowBlockManager per window size, each with its "
                     "own block ids (numbered one after another here)")
    if workload is not None and any(t.once or t.per_request for t in tables):
        notes.append("TensorRT-LLM block reuse: the prefix blocks are allocated once and every sequence's block "
                     "list references the same ids")
    return TensorPlan(tuple(buffers), tuple(infos), first, None, 0, tuple(notes), tuple(tables))


def _pool_key(g: GroupRule, itemsize: int) -> tuple[int, int, int]:
    """(kv_factor, KV heads on this rank, size per head) of a layer's pool."""
    layer = g.layer
    if isinstance(layer, MLA):
        return 1, 1, layer.kv_lora_rank + layer.qk_rope_head_dim
    assert isinstance(layer, KVAttention)  # the kinds that cache tokens: K/V attention or MLA
    if layer.v_dim != layer.head_dim:
        raise VerifyError(f"internal: TensorRT-LLM pools one size per head; layer {g.first_layer} has K "
                          f"{layer.head_dim} and V {layer.v_dim}")
    # the rank's K values a token (layout.py: head_dim x kv_heads // tp, the rule's bytes)
    values = g.token.bytes // (2 * itemsize)
    if values % layer.head_dim:
        return 2, 1, values  # fewer values than a head on this rank: one partial head
    return 2, values // layer.head_dim, layer.head_dim


def _blocks(g: GroupRule, context: int, block: int, workload: Workload | None,
            rule: SharingRule) -> tuple[int, int, int]:
    """(blocks every request shares, blocks a request's beams share, blocks each sequence owns)."""
    return held_units(g, context, block, workload, rule, "TensorRT-LLM").counted(block)


def _states(spec: ModelSpec, states: list[tuple[int, GroupRule]], sequences: int, names: dict[int, str],
            infos: list[LayerInfo]) -> list[BufferSpec]:
    """MambaCacheManager: one conv and one SSM tensor for all recurrent layers, in the model dtype."""
    dt = spec.dtype
    if dt not in DTYPE_BYTES:
        raise VerifyError(f"internal: no torch dtype '{dt}' for TensorRT-LLM's recurrent state")
    layer0 = states[0][1].layer
    assert isinstance(layer0, Recurrent)
    conv = (layer0.conv_dim, layer0.conv_kernel - 1)
    ssm = tuple(layer0.ssm_state)
    indices = [(gi, g, i) for gi, g in states for i in range(g.first_layer, g.first_layer + g.count)]
    conv_views, ssm_views = [], []
    for slot, (gi, g, index) in enumerate(indices):
        layer = g.layer
        assert isinstance(layer, Recurrent)
        if (layer.conv_dim, layer.conv_kernel - 1) != conv or tuple(layer.ssm_state) != ssm:
            raise VerifyError("internal: TensorRT-LLM's Mamba cache holds one state shape for all its layers")
        if (prod(conv) + prod(ssm)) * DTYPE_BYTES[dt] != (g.state.bytes if g.state is not None else -1):
            raise VerifyError(f"internal: TensorRT-LLM state of layer {index} differs from the rule")
        row = sequences * DTYPE_BYTES[dt]  # one layer's slice of each tensor: [sequences, *shape]
        conv_views.append(ViewSpec(index, "conv", dt, (sequences, *conv), slot * row * prod(conv)))
        ssm_views.append(ViewSpec(index, "ssm", dt, (sequences, *ssm), slot * row * prod(ssm)))
        infos.append(LayerInfo(index, "recurrent", names[gi], layer, 0, "paged-hnd"))
    n = len(indices)
    return [BufferSpec("mamba conv_states", dt, (n, sequences, *conv), tuple(conv_views)),
            BufferSpec("mamba ssm_states", dt, (n, sequences, *ssm), tuple(ssm_views))]
