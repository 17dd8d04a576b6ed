"""The tensors transformers allocates for its caches (``src/transformers/cache_utils.py``).

Per layer, K and V tensors ``[batch, kv_heads, tokens, head_dim]`` in the cache dtype, ``tokens`` the
group's rule (sliding layers their window). MLA: keys ``[batch, 1, tokens, kv_lora_rank]`` and values
``[batch, 1, tokens, qk_rope_head_dim]`` (5.x latent) or per-head K ``[batch, heads, tokens,
qk_nope + qk_rope]`` and V ``[batch, heads, tokens, v_head_dim]`` (4.x, expanded); which one is
decided by the bytes per token the layout rule gives. Recurrent layers: conv ``[batch, conv_dim,
conv_kernel]`` in the model dtype and the SSM state ``[batch, *ssm_state]`` in float32 (5.x) or the
model dtype (4.x).
"""

from __future__ import annotations

from math import prod

from kvplan.dtypes import KVDType
from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.engines.sharing import Workload
from kvplan.engines.tensors import (
    DTYPE_BYTES,
    PLAIN,
    BufferSpec,
    LayerInfo,
    TensorPlan,
    VerifyError,
    ViewSpec,
    component_names,
)
from kvplan.layouts import mla as mla_layout
from kvplan.spec import MLA, KVAttention, ModelSpec, Recurrent


def plan_tensors(spec: ModelSpec, layout: CacheLayout, batch: int, context: int,
                 workload: Workload | None = None) -> TensorPlan:
    """Every row's tensors. ``n`` samples or ``beam_width`` beams expand the batch to ``batch x
    samples`` rows, each a full cache (``sharing.py``: ``_expand_inputs_for_generation``); a common
    prefix is stored in every row."""
    if workload is not None:
        if workload.context != context:
            raise VerifyError(f"internal: a workload of {workload.context} tokens planned at {context}")
        batch *= workload.samples
    from kvplan.engines.hf.speculative import AssistedCache, batch_refusal

    if isinstance(layout.pool, AssistedCache) and batch > 1:  # _assisted_decoding runs one sequence
        raise VerifyError(batch_refusal(batch), field="batch")
    names = component_names(layout)
    dtype = layout.kv_dtype
    from kvplan.engines.hf.quantized import QuantizedGroup, quantized_tensors

    if any(isinstance(g, QuantizedGroup) for g in layout.groups):
        return quantized_tensors(layout, names, batch, context)
    if dtype.name not in PLAIN:
        raise VerifyError(f"transformers caches hold {', '.join(PLAIN)}; not '{dtype.name}'")
    dt = PLAIN[dtype.name]
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
            if isinstance(layer, KVAttention):
                tensor(index, "K", dt, (batch, layer.kv_heads, held, layer.head_dim))
                tensor(index, "V", dt, (batch, layer.kv_heads, held, layer.v_dim))
                layers.append(LayerInfo(index, g.kind, names[gi], layer, held, "bhtd"))
            elif isinstance(layer, MLA):
                k, v = _hf_mla_shapes(layer, dtype, g)
                tensor(index, "K", dt, (batch, k[0], held, k[1]))
                tensor(index, "V", dt, (batch, v[0], held, v[1]))
                layers.append(LayerInfo(index, "mla", names[gi], layer, held, "bhtd"))
            elif isinstance(layer, Recurrent):
                conv, ssm_dtype = _hf_state(layer, dtype, g)
                tensor(index, "conv", dt, (batch, *conv))
                tensor(index, "ssm", ssm_dtype, (batch, *layer.ssm_state))
                layers.append(LayerInfo(index, "recurrent", names[gi], layer, 0, "bhtd"))
    return TensorPlan(tuple(buffers), tuple(layers))


def _hf_mla_shapes(layer: MLA, dtype: KVDType, g: GroupRule) -> tuple[tuple[int, int], tuple[int, int]]:
    """(heads, width) of K and V: the latent (5.x) or per-head K and V (4.x), as the rule's bytes say."""
    if g.token.bytes == mla_layout.split_latent_cost(layer, dtype).bytes:
        return (1, layer.kv_lora_rank), (1, layer.qk_rope_head_dim)
    if layer.num_heads and layer.qk_nope_head_dim and layer.v_head_dim and \
            g.token.bytes == mla_layout.expanded_cost(layer, dtype).bytes:
        return ((layer.num_heads, layer.qk_nope_head_dim + layer.qk_rope_head_dim),
                (layer.num_heads, layer.v_head_dim))
    raise VerifyError(f"internal: no transformers MLA tensor layout stores {g.token.bytes} B per token")


def _hf_state(layer: Recurrent, dtype: KVDType, g: GroupRule) -> tuple[tuple[int, int], str]:
    assert g.state is not None
    conv = layer.conv_dim * layer.conv_kernel * dtype.block_bytes
    for ssm_dtype in ("float32", PLAIN[dtype.name]):
        if conv + prod(layer.ssm_state) * DTYPE_BYTES[ssm_dtype] == g.state.bytes:
            return (layer.conv_dim, layer.conv_kernel), ssm_dtype
    raise VerifyError(f"internal: no transformers state layout stores {g.state.bytes} B per sequence")
