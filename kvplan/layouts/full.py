"""Full (global) attention: every past token keeps a K and a V vector per KV head.

MHA, GQA and MQA are the same arithmetic with kv_heads = heads, a divisor of heads, or 1.
"""

from __future__ import annotations

from kvplan.dtypes import KVDType
from kvplan.layouts.base import TokenCost
from kvplan.spec import LayerSpec


def _plain_elem_size(dtype: KVDType) -> str:
    """'2 B' for dtypes stored as whole bytes per element with no scales, else ''."""
    if dtype.block_elems == 1 and dtype.scale_bytes_per_vector == 0:
        return f"{dtype.block_bytes} B"
    return ""


def token_cost(layer: LayerSpec, dtype: KVDType) -> TokenCost:
    """Bytes per token of one K/V attention layer: kv_heads x (K vector + V vector)."""
    heads = layer.kv_heads
    assert heads is not None and layer.head_dim is not None
    k_bytes = dtype.vector_bytes(layer.head_dim)
    v_bytes = dtype.vector_bytes(layer.v_dim)
    elem = _plain_elem_size(dtype)
    if elem:
        formula = f"{heads} kv heads x ({layer.head_dim} + {layer.v_dim}) x {elem}"
    else:
        formula = (f"{heads} kv heads x ({k_bytes} B K[{layer.head_dim}] + {v_bytes} B V[{layer.v_dim}]"
                   f" in {dtype.name})")
    return TokenCost(heads * (k_bytes + v_bytes), formula)
