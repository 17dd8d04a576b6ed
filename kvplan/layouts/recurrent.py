"""Constant-size recurrent state (Mamba, Mamba-2, gated delta net / linear attention).

Per sequence and layer: a causal-convolution window of ``conv_dim`` channels plus the SSM (or
linear-attention) state of shape ``ssm_state``. Engines differ in the conv window kept (transformers
keeps ``conv_kernel`` columns, vLLM ``conv_kernel - 1``) and in dtypes (transformers keeps the SSM
state in fp32, vLLM in the model dtype): the engine passes those in.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import ClassVar, Literal

from kvplan.layouts.base import LayerSpec, PositiveInt, TokenCost, register
from kvplan.record import dataclass

if TYPE_CHECKING:
    from kvplan.dtypes import KVDType


@register
@dataclass(frozen=True, kw_only=True)
class Recurrent(LayerSpec):
    """Layers that keep a fixed-size state per sequence instead of per-token K/V."""

    kind: Literal["recurrent"] = "recurrent"
    """recurrent: a Mamba / linear-attention state."""
    mixer: str | None = None
    """Recurrent mixer family: mamba, mamba2, gated_delta_net, ..."""
    conv_dim: PositiveInt
    """Channels of the causal-convolution state."""
    conv_kernel: PositiveInt
    """Causal-convolution kernel width."""
    ssm_state: tuple[PositiveInt, ...]
    """Shape of the SSM / linear-attention state per sequence."""

    bounded: ClassVar[tuple[str, ...]] = ("conv_dim", "conv_kernel")

    def token_cost(self, dtype: KVDType | None = None) -> TokenCost:
        return TokenCost(0, "no cache")  # its bytes are per sequence: state_cost

    def state_cost(self, *, conv_columns: int, conv_elem_bytes: int, ssm_elem_bytes: int) -> TokenCost:
        return state_cost(self, conv_columns=conv_columns, conv_elem_bytes=conv_elem_bytes,
                          ssm_elem_bytes=ssm_elem_bytes)


def state_cost(layer: Recurrent, *, conv_columns: int, conv_elem_bytes: int, ssm_elem_bytes: int) -> TokenCost:
    from math import prod  # here: math is an extension module to load, and most models hold no recurrent layer

    conv = layer.conv_dim * conv_columns * conv_elem_bytes
    ssm_elems = prod(layer.ssm_state)
    ssm = ssm_elems * ssm_elem_bytes
    shape = "x".join(str(d) for d in layer.ssm_state)
    formula = (f"conv {layer.conv_dim} x {conv_columns} x {conv_elem_bytes} B"
               f" + state {shape} x {ssm_elem_bytes} B")
    return TokenCost(conv + ssm, formula)
