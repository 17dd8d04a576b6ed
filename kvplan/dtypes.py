"""KV-cache element types and their exact storage size, scale overhead included.

Sizes are computed per *vector* (one head's K or V for one token, or one MLA latent), because
that is the unit scales attach to: ``bytes = ceil(n / block_elems) * block_bytes + scale_bytes``.
Integers throughout, so totals are exact.

Sources:
- vLLM ``vllm/v1/kv_cache_interface.py`` (AttentionSpec.page_size_bytes adds 2 x block_size x
  num_kv_heads x 4 B of fp32 scales for the ``*_per_token_head`` modes, i.e. one fp32 scale per K and
  per V vector; NVFP4 stores D/2 packed bytes plus one fp8 scale per 16 elements);
  ``vllm/config/cache.py`` (CacheDType list). fp8 / fp8_e4m3 / fp8_e5m2 / fp8_inc use per-tensor
  scales held as layer parameters, so the cache itself has no overhead.
- vLLM ``fp8_ds_mla`` (DeepSeek FlashMLA fp8 layout): 512 fp8 latent values + 4 fp32 tile scales
  (one per 128 values) + 64 bf16 rope values = 656 B per token and layer.
- ggml block formats (``ggml/src/ggml-common.h``): q8_0 34 B / 32, q4_0 18 B / 32, q4_1 20 B / 32,
  q5_0 22 B / 32, q5_1 24 B / 32, iq4_nl 18 B / 32.
"""

from __future__ import annotations

from kvplan.errors import UsageError
from kvplan.record import dataclass


@dataclass(frozen=True)
class KVDType:
    name: str
    """Canonical name (vLLM / ggml spelling)."""
    block_elems: int
    """Elements stored together in one block of ``block_bytes``."""
    block_bytes: int
    scale_bytes_per_vector: int = 0
    """Scale bytes stored beside every vector (per token, per head, per K or V)."""
    description: str = ""

    def vector_bytes(self, elems: int) -> int:
        """Bytes to store one vector of ``elems`` elements, scales included."""
        blocks = -(-elems // self.block_elems)
        return blocks * self.block_bytes + self.scale_bytes_per_vector

    @property
    def bits_per_element(self) -> float:
        return 8 * self.block_bytes / self.block_elems

    def mla_latent_bytes(self, kv_lora_rank: int, rope_dim: int) -> int:
        """Bytes of one MLA latent (compressed KV + rotary key) in this dtype."""
        return self.vector_bytes(kv_lora_rank + rope_dim)


@dataclass(frozen=True)
class DeepSeekFP8MLA(KVDType):
    """vLLM's ``fp8_ds_mla``: fp8 latent with one fp32 scale per 128 values, rope kept in bf16."""

    def vector_bytes(self, elems: int) -> int:
        raise UsageError("kv dtype 'fp8_ds_mla' applies only to MLA layers (DeepSeek-style models)")

    def mla_latent_bytes(self, kv_lora_rank: int, rope_dim: int) -> int:
        tiles = -(-kv_lora_rank // 128)
        return kv_lora_rank + tiles * 4 + rope_dim * 2


_TABLE: tuple[KVDType, ...] = (
    KVDType("float32", 1, 4, description="fp32"),
    KVDType("bfloat16", 1, 2, description="bf16"),
    KVDType("float16", 1, 2, description="fp16"),
    KVDType("fp8", 1, 1, description="fp8 (e4m3 in vLLM), per-tensor scale"),
    KVDType("fp8_e4m3", 1, 1, description="fp8 e4m3, per-tensor scale"),
    KVDType("fp8_e5m2", 1, 1, description="fp8 e5m2, per-tensor scale"),
    KVDType("fp8_inc", 1, 1, description="fp8 (Intel Gaudi INC), per-tensor scale"),
    KVDType("int8", 1, 1, description="int8, per-tensor scale (TensorRT-LLM)"),
    KVDType("int8_per_token_head", 1, 1, 4, "int8 + one fp32 scale per token, head and K/V"),
    KVDType("fp8_per_token_head", 1, 1, 4, "fp8 + one fp32 scale per token, head and K/V"),
    KVDType("int4_per_token_head", 2, 1, 4, "int4 packed + one fp32 scale per token, head and K/V"),
    KVDType("nvfp4", 16, 9, description="fp4 e2m1 packed + one fp8 scale per 16 elements (0.5625 B)"),
    DeepSeekFP8MLA("fp8_ds_mla", 1, 1, description="DeepSeek FlashMLA fp8: 656 B per token (MLA only)"),
    KVDType("q8_0", 32, 34, description="ggml q8_0: 34 B per 32 elements"),
    KVDType("q5_1", 32, 24, description="ggml q5_1: 24 B per 32 elements"),
    KVDType("q5_0", 32, 22, description="ggml q5_0: 22 B per 32 elements"),
    KVDType("q4_1", 32, 20, description="ggml q4_1: 20 B per 32 elements"),
    KVDType("q4_0", 32, 18, description="ggml q4_0: 18 B per 32 elements"),
    KVDType("iq4_nl", 32, 18, description="ggml iq4_nl: 18 B per 32 elements"),
)

KV_DTYPES: dict[str, KVDType] = {d.name: d for d in _TABLE}

ALIASES: dict[str, str] = {
    "fp32": "float32", "f32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16", "f16": "float16", "half": "float16",
    "e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2",
    "int4": "int4_per_token_head",
    "fp4_e2m1": "nvfp4",
}

# The model dtype a kv dtype of "auto" resolves to.
AUTO = "auto"


def resolve_kv_dtype(name: str, model_dtype: str) -> KVDType:
    """Look up a KV dtype by name or alias; 'auto' means the model's own dtype."""
    key = name.strip().lower()
    if key == AUTO:
        key = model_dtype
    key = ALIASES.get(key, key)
    try:
        return KV_DTYPES[key]
    except KeyError:
        known = ", ".join(["auto", *KV_DTYPES])
        raise UsageError(f"unknown kv dtype '{name}' (known: {known})", field="kv_dtype") from None


FP8_E4M3 = frozenset({"fp8", "fp8_e4m3"})
"""The two spellings of the one fp8 KV format every engine has (OCP e4m3, one byte, per-tensor scale): vLLM
calls it ``fp8`` (= ``fp8_e4m3``), SGLang only ``fp8_e4m3``, TensorRT-LLM only ``fp8``."""


def engine_fp8(kv_dtype: KVDType, accepted: frozenset[str], own: str, label: str) -> tuple[KVDType, str]:
    """``kv_dtype`` as the engine names it, so that ``--kv-dtype fp8`` (or ``fp8_e4m3``) means the same bytes
    on every engine: either spelling becomes the engine's own e4m3 dtype ``own`` where the engine does not
    take the one given. Returns (the engine's dtype, the assumption line saying which one it is; "" for any
    other dtype). ``label``: how the engine calls and selects it, for the line."""
    if kv_dtype.name not in FP8_E4M3:
        return kv_dtype, ""
    chosen = kv_dtype if kv_dtype.name in accepted else KV_DTYPES[own]
    return chosen, f"kv dtype {kv_dtype.name} is {label}: OCP e4m3, 1 byte per value, per-tensor scale"


def canonical_kv_dtype_name(name: str) -> str:
    """The canonical spelling of a dtype name ('auto' kept as is)."""
    key = name.strip().lower()
    if key == AUTO:
        return AUTO
    key = ALIASES.get(key, key)
    if key not in KV_DTYPES:
        resolve_kv_dtype(name, "bfloat16")  # raises the one-line error
    return key
