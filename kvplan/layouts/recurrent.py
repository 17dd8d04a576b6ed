"""Constant-size recurrent state (Mamba, Mamba-2, gated delta net / linear attention).

Per sequence and layer: a causal-convolution window of ``conv_dim`` channels plus the SSM (or
linear-attention) state of shape ``ssm_state``. Engines differ in the conv window kept (transformers
keeps ``conv_kernel`` columns, vLLM ``conv_kernel - 1``) and in dtypes (transformers keeps the SSM
state in fp32, vLLM in the model dtype): the engine passes those in.
"""

from __future__ import annotations

from math import prod

from kvplan.layouts.base import TokenCost
from kvplan.spec import LayerSpec


def state_cost(layer: LayerSpec, *, conv_columns: int, conv_elem_bytes: int, ssm_elem_bytes: int) -> TokenCost:
    assert layer.conv_dim is not None and layer.ssm_state is not None
    conv = layer.conv_dim * conv_columns * conv_elem_bytes
    ssm_elems = prod(layer.ssm_state)
    ssm = ssm_elems * ssm_elem_bytes
    shape = "x".join(str(d) for d in layer.ssm_state)
    formula = (f"conv {layer.conv_dim} x {conv_columns} x {conv_elem_bytes} B"
               f" + state {shape} x {ssm_elem_bytes} B")
    return TokenCost(conv + ssm, formula)
