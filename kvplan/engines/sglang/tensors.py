"""The tensors SGLang allocates for its token-slot KV pools, for ``verify``.

Read in sglang 0.5.23, ``python/sglang/srt/mem_cache/memory_pool.py``:
- ``MHATokenToKVPool._create_buffers_normal``: per layer, K ``[size + page_size, head_num, head_dim]``
  and V ``[size + page_size, head_num, v_head_dim]``; when the two shapes are equal they are the two
  halves of ONE allocation ``[2, rows, head_num, head_dim]`` (K = ``buf[0]``, V = ``buf[1]``), else
  two allocations. fp8 is stored as uint8 (``KVCache.__init__``: ``store_dtype``) and read as fp8.
- ``MLATokenToKVPool._create_buffers``: per layer ``[size + page_size, 1, kv_lora_rank +
  qk_rope_head_dim]``.
- Every layer of a pool addresses the same token indices (one allocator per pool); ``SWAKVPool``
  keeps a full pool and a window pool, each its own indices (``full_to_swa_index_mapping``). The
  speculative draft worker has a pool of its own with the target's indices (``speculative.py``), so
  its layers read the target's token table.
- ``MambaPool``: per layer a conv state ``[size, conv_dim, conv_kernel - 1]`` (bf16) and a temporal
  state ``[size, *ssm_state]`` (float32), one row per running request (``configs/mamba_utils.py``).

What ``kvplan estimate -e sglang`` counts, and so what this allocates: the token slots the sequences
occupy (``size`` = those tokens), and one state row per sequence. Left out, and said in the notes:
the padded page at slot 0 of every K/V/latent buffer (``page_size`` rows per layer that absorb
padded-token writes), MambaPool's spare row, and the ``ReqToTokenPool`` index table (int32
``[max_running_requests + 1, context_len]``, a server setting, not the KV cache).

Views follow the paged shape ``verify`` reads for every paged engine: ``[pages, page_size, heads,
dim]`` (``[tokens, 1, heads, dim]`` at the default page size 1), the same bytes as SGLang's
``[slots, heads, dim]``; a shared prefix is token (page) indices every request's table references
once (``RadixCache``, ``sharing.py``).
"""

from __future__ import annotations

from math import prod

from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.engines.rules import TokenRule
from kvplan.engines.sharing import SharingRule, Workload
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
    held_units,
)
from kvplan.spec import MLA, KVAttention, ModelSpec, Recurrent


def _dtypes(name: str) -> tuple[str, str]:
    """(store dtype of the allocation, dtype the kernels read)."""
    if name in PLAIN:
        return PLAIN[name], PLAIN[name]
    if name in FP8:  # KVCache.__init__: fp8 is stored as uint8 (index_put has no fp8 kernel)
        return "uint8", FP8[name]
    raise VerifyError(f"verify has no tensor layout for SGLang kv dtype '{name}' (its FP4 pools pack "
                      "values and scales apart)", field="kv_dtype")


def plan_tensors(spec: ModelSpec, layout: CacheLayout, batch: int, context: int,
                 workload: Workload | None = None) -> TensorPlan:
    """The pools for ``batch`` requests of ``context`` tokens (with a ``workload``: its ``n`` samples
    each, the radix cache's shared tokens allocated once)."""
    if workload is not None and workload.context != context:
        raise VerifyError(f"internal: a workload of {workload.context} tokens planned at {context}")
    samples = workload.samples if workload is not None else 1
    sequences = batch * samples
    names = component_names(layout)
    store, read = _dtypes(layout.kv_dtype.name)
    page = layout.block_size or 1
    from kvplan.engines.sglang.sharing import SHARING

    rule = SHARING.bind(layout)
    # one token table per pool: layers with the same token rule share the pool's indices
    pools: dict[TokenRule | str, list[tuple[int, GroupRule]]] = {}  # token rule, or "state"
    for gi, g in enumerate(layout.groups):
        if gi in names:
            pools.setdefault("state" if isinstance(g.layer, Recurrent) else g.tokens, []).append((gi, g))
    buffers: list[BufferSpec] = []
    infos: list[LayerInfo] = []
    tables: list[BlockTable] = []
    first = 0
    padded_bytes = 0
    # the full pool first, then the window pool (SWAKVPool), then the Mamba state
    order = sorted(pools, key=lambda k: 2 if isinstance(k, str) else int(k.windowed))  # the str key: "state"
    for key in order:
        members = pools[key]
        g0 = members[0][1]
        if key == "state":
            once, per_request, per_sequence = 0, 0, 1
        else:
            once, per_request, per_sequence = _pages(g0, context, page, workload, rule)
        table = BlockTable(tuple(i for _, g in members for i in range(g.first_layer, g.first_layer + g.count)),
                           first, batch, samples, once, per_request, per_sequence)
        tables.append(table)
        first += table.blocks
        for gi, g in members:
            for index in range(g.first_layer, g.first_layer + g.count):
                if isinstance(g.layer, Recurrent):
                    buffers.extend(_state(g, index, sequences))
                    infos.append(LayerInfo(index, "recurrent", names[gi], g.layer, 0, "paged"))
                    padded_bytes += g.state.bytes if g.state is not None else 0
                    continue
                if not g.layer.caches_tokens:
                    raise VerifyError(f"internal: no SGLang tensors for '{g.kind}' layers")
                buffers.extend(_kv(g, index, table.blocks, page, store, read))
                padded_bytes += page * g.token.bytes
                attend = g.held(context) - (-(-context // page) * page - context)
                infos.append(LayerInfo(index, g.kind, names[gi], g.layer, attend, "paged"))
    infos.sort(key=lambda info: info.index)
    spare = "the padded page at slot 0 of every layer's buffer" + (" and MambaPool's spare row" if "state" in pools
                                                                     else "")
    notes = [f"SGLang pools as memory_pool.py allocates them, less what kvplan estimate does not count: {spare} "
             f"({padded_bytes:,} B in all, whatever the batch) and the ReqToTokenPool index table (int32, "
             "max_running_requests + 1 rows of the context length)"]
    if len(pools) > 1 and "state" not in pools:
        notes.append("SGLang SWAKVPool: the full and sliding-window pools have their own token indices "
                     "(the window pool's numbered after the full pool's here)")
    if workload is not None and any(t.once or t.per_request for t in tables):
        notes.append("SGLang radix cache: the shared tokens are allocated once and every request's token table "
                     "references the same slot indices (RadixCache.match_prefix: no copy)")
    return TensorPlan(tuple(buffers), tuple(infos), first, None, 0, tuple(notes), tuple(tables))


def _pages(g: GroupRule, context: int, page: int, workload: Workload | None,
           rule: SharingRule) -> tuple[int, int, int]:
    """(pages every request shares, pages a request's samples share, pages each sequence owns)."""
    units = held_units(g, context, page, workload, rule, "SGLang")
    if workload is None:
        return units.counted(page)
    spans, held, once, shared = units.spans, units.held, units.once, units.shared
    assert spans is not None
    # a table lists the pages a sequence still holds, in position order: the shared ones must be the
    # first of them, or no table expresses the rule (a window that left part of the prefix)
    last = -(-context // page)
    for span, tokens in ((spans.across_requests, once), (max(spans.across_requests, spans.across_samples), shared)):
        overlap = max(0, min(last, span // page) - (last - held // page))
        if overlap * page != tokens:
            field = "shared_prefix" if span == spans.across_requests and workload.shared_prefix else "n"
            raise VerifyError(f"verify cannot lay out SGLang's {g.kind} token table with it: kvplan's rule shares "
                              f"{tokens:,} of the {overlap * page:,} tokens of the first {span:,} a sequence still "
                              "holds", field=field)
    return units.counted(page)


def _kv(g: GroupRule, index: int, pages: int, page: int, store: str, read: str) -> list[BufferSpec]:
    """One layer's buffers and views: K and V (one fused allocation when their shapes agree), or the latent."""
    layer = g.layer
    if isinstance(layer, MLA):
        width = layer.kv_lora_rank + layer.qk_rope_head_dim
        view = ViewSpec(index, "latent", read, (pages, page, width))
        _same(g, view.nbytes // (pages * page) if pages else g.token.bytes, index)
        return [BufferSpec(f"layer {index} kv_buffer", store, (pages * page, 1, width), (view,))]
    assert isinstance(layer, KVAttention)  # the kinds that cache tokens: K/V attention or MLA
    heads, k_dim, v_dim = layer.kv_heads, layer.head_dim, layer.v_dim
    k = ViewSpec(index, "K", read, (pages, page, heads, k_dim))
    if pages:
        _same(g, (k.nbytes + prod((pages, page, heads, v_dim)) * DTYPE_BYTES[read]) // (pages * page), index)
    if k_dim == v_dim:  # _create_buffers_normal: K and V, the halves of one [2, rows, heads, dim] allocation
        v = ViewSpec(index, "V", read, (pages, page, heads, v_dim), k.nbytes)
        return [BufferSpec(f"layer {index} k/v_buffer", store, (2, pages * page, heads, k_dim), (k, v))]
    v = ViewSpec(index, "V", read, (pages, page, heads, v_dim))
    return [BufferSpec(f"layer {index} k_buffer", store, (pages * page, heads, k_dim), (k,)),
            BufferSpec(f"layer {index} v_buffer", store, (pages * page, heads, v_dim), (v,))]


def _same(g: GroupRule, per_token: int, index: int) -> None:
    if per_token != g.token.bytes:
        raise VerifyError(f"internal: SGLang layer {index} stores {per_token} B per token, the rule says "
                          f"{g.token.bytes} B")


def _state(g: GroupRule, index: int, sequences: int) -> list[BufferSpec]:
    """MambaPool rows of one layer: conv [conv_dim, conv_kernel - 1] in bf16, the SSM state in float32."""
    layer = g.layer
    assert g.state is not None and isinstance(layer, Recurrent)
    conv = (sequences, layer.conv_dim, layer.conv_kernel - 1)
    ssm = (sequences, *layer.ssm_state)
    if prod(conv[1:]) * 2 + prod(ssm[1:]) * 4 != g.state.bytes:
        raise VerifyError(f"internal: SGLang state of layer {index} is not {g.state.bytes} B per sequence")
    return [BufferSpec(f"layer {index} conv_state", "bfloat16", conv, (ViewSpec(index, "conv", "bfloat16", conv),)),
            BufferSpec(f"layer {index} temporal_state", "float32", ssm, (ViewSpec(index, "ssm", "float32", ssm),))]
