"""The tensors an engine allocates for its KV cache, derived from the same ``CacheLayout`` ``estimate`` reads.

No torch here: a ``CachePlan`` names every buffer (shape, dtype) and every typed view a layer reads,
so the planner is testable without torch and ``kvplan.verify.allocate`` only executes it.

transformers (``hf``: ``DynamicCache``, ``hf-static``: ``StaticCache``): per layer, K and V tensors
``[batch, kv_heads, tokens, head_dim]`` in the cache dtype, ``tokens`` the group's rule (sliding
layers their window). MLA: keys ``[batch, 1, tokens, kv_lora_rank]`` and values
``[batch, 1, tokens, qk_rope_head_dim]`` (5.x latent) or per-head K ``[batch, heads, tokens,
qk_nope + qk_rope]`` and V ``[batch, heads, tokens, v_head_dim]`` (4.x, expanded); which one is
decided by the bytes per token the engine rule gives. Recurrent layers: conv ``[batch, conv_dim,
conv_kernel]`` in the model dtype and the SSM state ``[batch, *ssm_state]`` in float32 (5.x) or the
model dtype (4.x).

vLLM: ``KVCacheTensor``s as ``vllm/v1/worker/gpu_model_runner.py`` allocates them: raw int8 buffers
of ``num_blocks x page`` bytes, viewed per layer in the attention backend's shape. With one layer type
(every layer full, or every layer MLA) each layer owns one buffer. Hybrid models (sliding + full,
attention + Mamba) share buffers: ``kvplan.engines.vllm.pool_grouping`` cuts the layers into groups of
``group_size`` slots (strided, as vLLM does); buffer ``j`` is shared by the ``j``-th slot of every group,
each group uses its own blocks of the pool, and slots a group cannot fill (the layout's ``padding``
groups) get an unused view of their pages. Pages padded to the unified size are laid out block-major. Attention layers view their buffer as K and V planes ``[num_blocks, block_size,
kv_heads, head_dim]`` (then fp32 scale planes ``[num_blocks, block_size, kv_heads]`` for the
``*_per_token_head`` modes, fp8 scale planes for nvfp4); MLA as ``[num_blocks, block_size, 576]``
(``fp8_ds_mla``: 656 uint8 per token); Mamba layers as one state page per block (conv
``[conv_kernel - 1, conv_dim]``, SSM ``ssm_state``, both in the model dtype, then the page padding).
A batch of ``B`` sequences of ``C`` tokens gets ``num_blocks = B x sum over groups of the blocks one
sequence holds`` (sliding layers only the blocks the window keeps; one state block per Mamba group);
sequence ``s`` holds consecutive blocks, so a layer's K for the whole batch is one contiguous view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from kvplan.dtypes import KVDType, canonical_kv_dtype_name, resolve_kv_dtype
from kvplan.engines import CacheLayout, EngineOptions, GroupRule, get_engine, parse_version
from kvplan.layouts import mla as mla_layout
from kvplan.spec import LayerSpec, ModelSpec
from kvplan.verify.errors import VerifyError

#: Storage dtypes verify allocates (torch attribute names) and their element size in bytes.
DTYPE_BYTES: dict[str, int] = {
    "float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1,
}
ENGINES = ("vllm", "hf", "hf-static")
_PLAIN = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}
_FP8 = {"fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "fp8_inc": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


@dataclass(frozen=True)
class ViewSpec:
    """A typed tensor one layer reads, inside a buffer: ``shape`` of ``dtype`` at byte ``offset``.

    With ``pitch`` the rows (``shape[0]``) are ``pitch`` bytes apart (a field of each state page);
    without, the view is contiguous."""

    layer: int
    role: str
    """K, V, K scale, V scale, latent, conv, ssm, page padding."""
    dtype: str
    shape: tuple[int, ...]
    offset: int = 0
    pitch: int | None = None

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * DTYPE_BYTES[self.dtype]

    @property
    def end(self) -> int:
        """One past the last byte the view touches."""
        if self.pitch is None or not self.shape or self.shape[0] == 0:
            return self.offset + self.nbytes
        row = prod(self.shape[1:]) * DTYPE_BYTES[self.dtype]
        return self.offset + (self.shape[0] - 1) * self.pitch + row


@dataclass(frozen=True)
class BufferSpec:
    """One allocation: a typed tensor (transformers) or a raw int8 buffer (vLLM)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    views: tuple[ViewSpec, ...]

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class LayerInfo:
    """One layer with a cache: what the decode step reads."""

    index: int
    kind: str
    component: str
    layer: LayerSpec
    attend: int
    """Tokens per sequence the decode step attends to (0 for recurrent layers)."""
    layout: str
    """'bhtd' (transformers: [batch, heads, tokens, dim]) or 'paged' (vLLM: [blocks, block, heads, dim])."""


@dataclass(frozen=True)
class Component:
    """Layers that share one rule (as ``--explain`` groups them), with the bytes estimate predicts."""

    name: str
    kind: str
    layers: int
    predicted_bytes: int
    formula: str


@dataclass(frozen=True)
class CachePlan:
    model_id: str
    engine: str
    engine_version: str
    kv_dtype: str
    """The dtype's canonical name ('auto' resolved)."""
    block_size: int | None
    batch: int
    context: int
    predicted_bytes: int
    """``CacheLayout.total_bytes(context, batch)``: what ``kvplan estimate`` prints."""
    buffers: tuple[BufferSpec, ...]
    components: tuple[Component, ...]
    layers: tuple[LayerInfo, ...]
    num_blocks: int | None = None
    group_size: int | None = None
    padding_layers: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def buffer_bytes(self) -> int:
        return sum(b.nbytes for b in self.buffers)

    def component_of(self, layer: int) -> str:
        for info in self.layers:
            if info.index == layer:
                return info.component
        raise KeyError(layer)


# --------------------------------------------------------------------------------------- layout

def resolve_layout(spec: ModelSpec, engine: str, engine_version: str | None, kv_dtype: str,
                   block_size: int | None) -> CacheLayout:
    """The engine's CacheLayout, built exactly as ``kvplan.estimate`` builds it (tp = 1)."""
    eng = get_engine(engine)
    if eng.name not in ENGINES:
        raise VerifyError(f"verify allocates the vllm, hf and hf-static layouts; {eng.title}'s "
                          f"(--engine {eng.name}) is not implemented: use `kvplan estimate` for it")
    version = parse_version(engine_version or eng.default_version)
    dtype = resolve_kv_dtype(canonical_kv_dtype_name(kv_dtype), eng.auto_kv_dtype(spec))
    if block_size is not None and block_size <= 0:
        raise VerifyError(f"--block-size {block_size} must be a positive integer")
    return eng.layout(spec, dtype, version, EngineOptions(block_size=block_size, tp=1))


def plan_cache(spec: ModelSpec, layout: CacheLayout, batch: int, context: int) -> CachePlan:
    """Every tensor ``layout.engine`` allocates for ``batch`` sequences of ``context`` tokens."""
    if batch <= 0 or context <= 0:
        raise VerifyError("--batch and --context must be positive")
    names = _component_names(layout)
    components = _components(layout, names, batch, context)
    if layout.engine == "vllm":
        plan = _plan_vllm(spec, layout, names, batch, context)
    elif layout.engine in ("hf", "hf-static"):
        plan = _plan_hf(spec, layout, names, batch, context)
    else:  # resolve_layout refuses the others first
        raise VerifyError(f"verify has no tensor layout for engine '{layout.engine}'")
    plan = CachePlan(
        model_id=spec.id, engine=layout.engine, engine_version=layout.engine_version,
        kv_dtype=layout.kv_dtype.name, block_size=layout.block_size, batch=batch, context=context,
        predicted_bytes=layout.total_bytes(context, batch), components=components, **plan,
    )
    _check(plan)
    return plan


def _component_names(layout: CacheLayout) -> dict[int, str]:
    """Group position -> component name; groups with the same rule and sizes share a component."""
    by_key: dict[tuple, str] = {}
    used: set[str] = {"pool padding"}
    out: dict[int, str] = {}
    for i, g in enumerate(layout.groups):
        if g.kind in ("shared", "none"):
            continue
        if g.padding:  # every unused slot of a vLLM hybrid pool, whatever its type, is one row
            out[i] = "pool padding"
            continue
        state = g.state.bytes if g.state is not None else 0
        key = (g.kind, g.held_formula, g.token.bytes, state)
        if key not in by_key:
            layer = g.layer
            base = {"sliding": f"sliding {layer.window}", "chunked": f"chunked {layer.chunk}"}.get(g.kind, g.kind)
            name, n = base, 2
            while name in used:
                name, n = f"{base} #{n}", n + 1
            used.add(name)
            by_key[key] = name
        out[i] = by_key[key]
    return out


def _components(layout: CacheLayout, names: dict[int, str], batch: int, context: int) -> tuple[Component, ...]:
    acc: dict[str, list] = {}
    for i, g in enumerate(layout.groups):
        if i not in names:
            continue
        entry = acc.setdefault(names[i], ["padding" if g.padding else g.kind, 0, 0, g])
        entry[1] += g.count
        entry[2] += g.count * g.layer_bytes(context, batch)
    out = []
    for name, (kind, count, nbytes, g) in acc.items():
        formula = f"{g.token.formula} per token; tokens {g.held_formula}"
        if g.state is not None:
            formula = f"state {g.state.formula} per sequence"
        if g.padding:
            formula = f"unused layer slots, each a {g.kind} layer's pages: {formula}"
        out.append(Component(name, kind, count, nbytes, formula))
    return tuple(out)


def _check(plan: CachePlan) -> None:
    """Every view inside its buffer, and the views of each component add up to its prediction."""
    by_component: dict[str, int] = {}
    for buf in plan.buffers:
        for view in buf.views:
            if view.offset < 0 or view.end > buf.nbytes:
                raise VerifyError(f"internal: view {view.role} of layer {view.layer} leaves {buf.name}")
            name = plan.component_of(view.layer)
            by_component[name] = by_component.get(name, 0) + view.nbytes
    for comp in plan.components:
        got = by_component.get(comp.name, 0)
        if got != comp.predicted_bytes:
            raise VerifyError(f"internal: the tensors of '{comp.name}' hold {got:,} B but the {plan.engine} rule "
                              f"predicts {comp.predicted_bytes:,} B")


# --------------------------------------------------------------------------------------- transformers

def _plan_hf(spec: ModelSpec, layout: CacheLayout, names: dict[int, str], batch: int, context: int) -> dict:
    dtype = layout.kv_dtype
    if dtype.name not in _PLAIN:
        raise VerifyError(f"transformers caches hold {', '.join(_PLAIN)}; not '{dtype.name}'")
    dt = _PLAIN[dtype.name]
    buffers: list[BufferSpec] = []
    layers: list[LayerInfo] = []

    def tensor(index: int, role: str, dtype_name: str, shape: tuple[int, ...]) -> None:
        view = ViewSpec(index, role, dtype_name, shape)
        buffers.append(BufferSpec(f"layer {index} {role}", dtype_name, shape, (view,)))

    for gi, g in enumerate(layout.groups):
        if gi not in names:
            continue
        layer = g.layer
        tokens = g.tokens_for(context, batch)
        if tokens % batch:
            raise VerifyError(f"internal: {g.kind} layers hold {tokens} tokens for {batch} sequences")
        held = tokens // batch
        for index in range(g.first_layer, g.first_layer + g.count):
            if g.kind in ("full", "sliding", "chunked"):
                assert layer.kv_heads and layer.head_dim
                tensor(index, "K", dt, (batch, layer.kv_heads, held, layer.head_dim))
                tensor(index, "V", dt, (batch, layer.kv_heads, held, layer.v_dim))
                layers.append(LayerInfo(index, g.kind, names[gi], layer, held, "bhtd"))
            elif g.kind == "mla":
                k, v = _hf_mla_shapes(layer, dtype, g)
                tensor(index, "K", dt, (batch, k[0], held, k[1]))
                tensor(index, "V", dt, (batch, v[0], held, v[1]))
                layers.append(LayerInfo(index, "mla", names[gi], layer, held, "bhtd"))
            elif g.kind == "recurrent":
                conv, ssm_dtype = _hf_state(layer, dtype, g)
                tensor(index, "conv", dt, (batch, *conv))
                tensor(index, "ssm", ssm_dtype, (batch, *layer.ssm_state))  # type: ignore[misc]
                layers.append(LayerInfo(index, "recurrent", names[gi], layer, 0, "bhtd"))
    return {"buffers": tuple(buffers), "layers": tuple(layers)}


def _hf_mla_shapes(layer: LayerSpec, dtype: KVDType, g: GroupRule) -> tuple[tuple[int, int], tuple[int, int]]:
    """(heads, width) of K and V: the latent (5.x) or per-head K and V (4.x), as the rule's bytes say."""
    assert layer.kv_lora_rank and layer.qk_rope_head_dim
    if g.token.bytes == mla_layout.split_latent_cost(layer, dtype).bytes:
        return (1, layer.kv_lora_rank), (1, layer.qk_rope_head_dim)
    if layer.num_heads and layer.qk_nope_head_dim and layer.v_head_dim and \
            g.token.bytes == mla_layout.expanded_cost(layer, dtype).bytes:
        return ((layer.num_heads, layer.qk_nope_head_dim + layer.qk_rope_head_dim),
                (layer.num_heads, layer.v_head_dim))
    raise VerifyError(f"internal: no transformers MLA tensor layout stores {g.token.bytes} B per token")


def _hf_state(layer: LayerSpec, dtype: KVDType, g: GroupRule) -> tuple[tuple[int, int], str]:
    assert g.state is not None and layer.conv_dim and layer.conv_kernel and layer.ssm_state
    conv = layer.conv_dim * layer.conv_kernel * dtype.block_bytes
    for ssm_dtype in ("float32", _PLAIN[dtype.name]):
        if conv + prod(layer.ssm_state) * DTYPE_BYTES[ssm_dtype] == g.state.bytes:
            return (layer.conv_dim, layer.conv_kernel), ssm_dtype
    raise VerifyError(f"internal: no transformers state layout stores {g.state.bytes} B per sequence")


# --------------------------------------------------------------------------------------- vLLM

def _vector_layout(dtype: KVDType, n: int) -> tuple[str, int, str | None, int]:
    """How vLLM stores one n-element K or V vector: (data dtype, data elems, scale dtype, scale elems)."""
    name = dtype.name
    if name in _PLAIN:
        out: tuple[str, int, str | None, int] = (_PLAIN[name], n, None, 0)
    elif name in _FP8:
        out = (_FP8[name], n, None, 0)
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


def _mla_row(dtype: KVDType, layer: LayerSpec) -> tuple[str, int]:
    assert layer.kv_lora_rank and layer.qk_rope_head_dim
    width = layer.kv_lora_rank + layer.qk_rope_head_dim
    if dtype.name == "fp8_ds_mla":
        return "uint8", dtype.mla_latent_bytes(layer.kv_lora_rank, layer.qk_rope_head_dim)
    if dtype.name in _PLAIN:
        return _PLAIN[dtype.name], width
    if dtype.name in _FP8:
        return _FP8[dtype.name], width
    raise VerifyError(f"vLLM's MLA cache has no '{dtype.name}' layout")


def _plan_vllm(spec: ModelSpec, layout: CacheLayout, names: dict[int, str], batch: int, context: int) -> dict:
    from kvplan.engines.vllm import page_bytes, pool_grouping, pool_type_key

    grouping = layout.pool or pool_grouping(layout.groups)
    # layers of each spec type, in model order, and the type's padding slots: (index, group position, rule)
    members: dict[tuple, list[tuple[int, int, GroupRule]]] = {}
    padding: dict[tuple, list[tuple[int, int, GroupRule]]] = {}
    for gi, g in enumerate(layout.groups):
        if gi not in names:
            continue
        into = padding if g.padding else members
        for index in range(g.first_layer, g.first_layer + g.count):
            into.setdefault(pool_type_key(g), []).append((index, gi, g))
    # vLLM groups: one per type chunk; buffer `slot` is shared by the slot-th layer of every group and
    # each group uses its own blocks (block regions). Without hybrid grouping, one group of every layer.
    groups: list[list[tuple[int, int, GroupRule]]] = []  # per group: the layer (or padding slot) of each slot
    per_seq_blocks: list[int] = []
    if grouping.hybrid:
        # Each spec type has ``groups_per_type`` groups of ``group_size`` slots. On a pipeline stage
        # (``VLLM.stage_layouts``) those are the whole model's groups projected on the stage's layers,
        # so a type can have fewer layers here than slots, or none at all: the rest are padding slots.
        for t, n in zip(grouping.types, grouping.groups_per_type):
            key = pool_type_key(t.rule)
            layers = members.get(key, [])
            pads = iter(padding.get(key, []))
            for i in range(n):
                # _get_kv_cache_groups_uniform_page_size strides the type's layers over its groups; on a
                # stage the stride runs over the stage's layers (which layer sits in which group does
                # not change a byte: every layer of one type has the same page and blocks per sequence)
                chunk = layers[i::n]
                for _ in range(grouping.group_size - len(chunk)):
                    slot = next(pads, None)
                    if slot is None:
                        raise VerifyError(f"internal: vLLM {t.kind} groups have more empty slots than the "
                                          "layout's padding")
                    chunk.append(slot)
                groups.append(chunk)
                per_seq_blocks.append(_blocks_per_sequence(t.rule, context))
        size = grouping.group_size
        slot_pages = [max(t.page_bytes for t in grouping.types)] * size
    else:
        only = [m for layers in members.values() for m in layers]
        only.sort(key=lambda m: m[0])
        groups.append(only)
        per_seq_blocks.append(_blocks_per_sequence(only[0][2], context))
        size = len(only)
        slot_pages = [page_bytes(rule) for _, _, rule in only]
    regions, offset = [], 0
    for chunk, per_seq in zip(groups, per_seq_blocks):
        regions.append((chunk, offset, batch * per_seq))
        offset += batch * per_seq
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
            if rule.kind != "recurrent":
                block = rule.block_size or 16
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
    return {"buffers": buffers, "layers": tuple(infos), "num_blocks": num_blocks, "group_size": size,
            "padding_layers": pad, "notes": tuple(notes)}


def _blocks_per_sequence(rule: GroupRule, context: int) -> int:
    if rule.kind == "recurrent":
        return 1
    block = rule.block_size or 16
    held = rule.held(context)
    if held % block:
        raise VerifyError(f"internal: vLLM {rule.kind} layers hold {held} tokens, not whole blocks of {block}")
    return held // block


def _vllm_views(spec: ModelSpec, dtype: KVDType, rule: GroupRule, index: int, num_blocks: int,
                slot_page: int, first: int, count: int) -> list[ViewSpec]:
    layer = rule.layer
    block = rule.block_size or 16
    if rule.kind in ("full", "sliding", "chunked"):
        assert layer.kv_heads and layer.head_dim
        heads = layer.kv_heads
        k = _vector_layout(dtype, layer.head_dim)
        v = _vector_layout(dtype, layer.v_dim)
        planes = [("K", k[0], k[1]), ("V", v[0], v[1])]
        if k[2] is not None:
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
    if rule.kind == "mla":
        dt, width = _mla_row(dtype, layer)
        per_block = block * width * DTYPE_BYTES[dt]
        return [ViewSpec(index, "latent", dt, (count, block, width), first * per_block)]
    if rule.kind == "recurrent":
        assert rule.state is not None and layer.conv_dim and layer.conv_kernel and layer.ssm_state
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
