"""Multi-head latent attention (DeepSeek-V2/V3/R1, Kimi-K2).

Engines that absorb the up-projections (vLLM, SGLang, TensorRT-LLM, llama.cpp, transformers 5)
cache one latent per token and layer: kv_lora_rank compressed values plus the qk_rope_head_dim
rotary key shared by all heads (512 + 64 = 576 for DeepSeek-V3). transformers 4.x up-projected
first and cached per-head K (qk_nope + qk_rope) and V (v_head_dim) for every query head
(``modeling_deepseek_v3.py::DeepseekV3Attention.forward`` before the 5.0 cache rewrite).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import ClassVar, Literal

from kvplan.errors import SpecError
from kvplan.layouts.base import LayerSpec, PositiveInt, TokenCost, register
from kvplan.record import dataclass

if TYPE_CHECKING:
    from kvplan.dtypes import KVDType


@register
@dataclass(frozen=True, kw_only=True)
class MLA(LayerSpec):
    """Layers that cache one compressed latent per token (kv_lora_rank + qk_rope_head_dim), with the per-head
    sizes engines that expand it need."""

    kind: Literal["mla"] = "mla"
    """mla: multi-head latent attention."""
    v_head_dim: PositiveInt | None = None
    """Per-head value width, for engines that expand MLA per head."""
    kv_lora_rank: PositiveInt
    """Width of the compressed KV latent."""
    qk_rope_head_dim: PositiveInt
    """Width of the shared rotary key cached beside the latent."""
    qk_nope_head_dim: PositiveInt | None = None
    """Per-head non-rotary key width, for engines that expand MLA per head."""
    num_heads: PositiveInt | None = None
    """Query heads, for engines that expand MLA per head."""

    caches_tokens: ClassVar[bool] = True
    attends_all: ClassVar[bool] = True
    bounded: ClassVar[tuple[str, ...]] = ("v_head_dim", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                                          "num_heads")

    def token_cost(self, dtype: KVDType) -> TokenCost:
        return latent_cost(self, dtype)

    def cache_shape(self) -> tuple[object, ...]:
        return ("mla", self.kv_lora_rank, self.qk_rope_head_dim)


def latent_cost(layer: MLA, dtype: KVDType) -> TokenCost:
    """One latent vector per token: kv_lora_rank + qk_rope_head_dim values."""
    nbytes = dtype.mla_latent_bytes(layer.kv_lora_rank, layer.qk_rope_head_dim)
    width = layer.kv_lora_rank + layer.qk_rope_head_dim
    if dtype.block_elems == 1 and dtype.scale_bytes_per_vector == 0 and nbytes == width * dtype.block_bytes:
        formula = f"1 latent x ({layer.kv_lora_rank} + {layer.qk_rope_head_dim}) x {dtype.block_bytes} B"
    else:
        formula = f"1 latent ({layer.kv_lora_rank} + {layer.qk_rope_head_dim}) = {nbytes} B in {dtype.name}"
    return TokenCost(nbytes, formula)


def split_latent_cost(layer: MLA, dtype: KVDType) -> TokenCost:
    """The latent stored as two tensors, keys [kv_lora_rank] and values [qk_rope] (transformers 5)."""
    k = dtype.vector_bytes(layer.kv_lora_rank)
    v = dtype.vector_bytes(layer.qk_rope_head_dim)
    return TokenCost(k + v, f"latent K[{layer.kv_lora_rank}] {k} B + rope V[{layer.qk_rope_head_dim}] {v} B")


def expanded_cost(layer: MLA, dtype: KVDType) -> TokenCost:
    """Per-head K (qk_nope + qk_rope) and V (v_head_dim) for every query head."""
    if layer.num_heads is None or layer.qk_nope_head_dim is None or layer.v_head_dim is None:
        missing = [n for n in ("num_heads", "qk_nope_head_dim", "v_head_dim") if getattr(layer, n) is None]
        raise SpecError(f"expanded MLA cache needs {', '.join(missing)} in the layer description")
    k_dim = layer.qk_nope_head_dim + layer.qk_rope_head_dim
    k = dtype.vector_bytes(k_dim)
    v = dtype.vector_bytes(layer.v_head_dim)
    formula = f"{layer.num_heads} heads x ({k} B K[{k_dim}] + {v} B V[{layer.v_head_dim}])"
    return TokenCost(layer.num_heads * (k + v), formula)
