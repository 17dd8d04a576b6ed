"""Exact checkpoint weights from safetensors headers: bytes and parameter counts by dtype.

A safetensors file starts with an 8-byte little-endian header length and a JSON header naming every
tensor's dtype, shape and ``data_offsets`` (byte range in the data part). The header alone gives the
checkpoint's exact size: kvplan reads headers only (``kvplan.sources.hub`` fetches them with range
requests) and never the weights.

- bytes: the span of each tensor's ``data_offsets``, checked against ``prod(shape) x`` the element
  size of its dtype (F64 8, F32 4, F16/BF16 2, F8_*/I8/U8/BOOL 1, I32/U32 4, I64/U64 8, F4 1/2,
  F6_* 3/4 byte). These are storage bytes, so packed formats are counted as stored.
- parameters: a plain tensor holds ``prod(shape)`` parameters. Packed storage holds several values
  per element: AWQ/GPTQ ``qweight`` and compressed-tensors ``weight_packed`` int32 hold ``32 / bits``
  values (8 for int4), MXFP4 ``*_blocks`` and bitsandbytes 4-bit / NVFP4 ``weight`` bytes hold two
  4-bit values. Quantization metadata (scales, zero points, ``g_idx``, absmax, quant maps, shapes)
  is counted in bytes but not as parameters.

Only the standard library is imported.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from kvplan.errors import ConfigError

# Bits per element of every safetensors dtype (safetensors ``Dtype::bitsize``).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}

# What a dominant storage dtype is called in ModelSpec.weights_dtype.
DTYPE_NAMES: dict[str, str] = {
    "BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64",
    "F8_E4M3": "fp8", "F8_E5M2": "fp8_e5m2", "I8": "int8", "U8": "uint8", "F4": "fp4",
}

MAX_HEADER_BYTES = 100 * 1024 * 1024  # safetensors refuses larger headers (N_MAX_HEADER)

# Tensor-name suffixes that are quantization metadata, never model parameters.
_META_SUFFIXES = (
    ".weight_scale_inv", ".weight_scale", ".weight_scale_2", ".input_scale", ".output_scale",
    ".activation_scale", ".k_scale", ".v_scale", ".q_scale", ".prob_scale",
    ".weight_zero_point", ".weight_global_scale", ".input_global_scale", ".weight_shape", ".weight_g_idx",
    ".qzeros", ".g_idx",  # AWQ / GPTQ (".scales" below, with a qweight beside it)
    ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map", ".SCB", ".weight_format",  # bitsandbytes
    "_scales",  # MXFP4 e8m0 scales beside *_blocks
)


_PACKED_INT_METHODS = ("awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "autoround")


@dataclass(frozen=True)
class QuantScheme:
    """What the config's ``quantization_config`` says about packed storage."""

    method: str | None = None
    bits: int | None = None  # bits per quantized value (AWQ/GPTQ/compressed-tensors)
    four_bit_bytes: bool = False  # U8 'weight' tensors hold two 4-bit values (bitsandbytes 4-bit, NVFP4)
    name: str | None = None  # weights_dtype to report


def quant_scheme(config: dict) -> QuantScheme:
    """The packing rules the config's ``quantization_config`` (top level or text_config) implies."""
    q = config.get("quantization_config")
    text = config.get("text_config")
    if not isinstance(q, dict) and isinstance(text, dict):
        q = text.get("quantization_config")
    if not isinstance(q, dict):
        return QuantScheme()
    method = str(q.get("quant_method") or "").lower() or None
    bits = _int(q.get("bits") if q.get("bits") is not None else q.get("w_bit"))
    if method in _PACKED_INT_METHODS:
        bits = bits or 4
        return QuantScheme(method, bits, name=f"int{bits}")
    if method == "fp8":
        return QuantScheme(method, 8, name="fp8")
    if method == "mxfp4":
        return QuantScheme(method, 4, name="mxfp4")
    if method == "bitsandbytes":
        if q.get("load_in_4bit") or q.get("_load_in_4bit"):
            kind = str(q.get("bnb_4bit_quant_type") or "fp4").lower()
            return QuantScheme(method, 4, four_bit_bytes=True, name=kind)
        return QuantScheme(method, 8, name="int8")
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        for group in groups.values() if isinstance(groups, dict) else ():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict):
                nbits = _int(weights.get("num_bits")) or 8
                kind = str(weights.get("type") or "int").lower()
                fmt = str(q.get("format") or group.get("format") or "")
                if kind == "float" and nbits == 4:
                    return QuantScheme(method, 4, four_bit_bytes="nvfp4" in fmt, name="nvfp4")
                name = f"fp{nbits}" if kind == "float" else f"int{nbits}"
                return QuantScheme(method, nbits, name=name)
        return QuantScheme(method, bits, name=method)
    if method == "modelopt":
        algo = str(q.get("quant_algo") or "").upper()
        if "FP4" in algo:
            return QuantScheme(method, 4, four_bit_bytes=True, name="nvfp4")
        if "FP8" in algo:
            return QuantScheme(method, 8, name="fp8")
    return QuantScheme(method, bits, name=method)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


# ------------------------------------------------------------------------------------------------
# One header


def header_length(prefix: bytes, where: str) -> int:
    """The JSON header's length from a file's first 8 bytes."""
    if len(prefix) < 8:
        raise ConfigError(f"{where}: truncated safetensors file ({len(prefix)} bytes, the header length needs 8)")
    n = int.from_bytes(prefix[:8], "little")
    if not 2 <= n <= MAX_HEADER_BYTES:
        raise ConfigError(f"{where}: not a safetensors file (header length {n})")
    return n


def parse_header(raw: bytes, where: str) -> dict[str, dict[str, Any]]:
    """The tensors of a safetensors JSON header (``__metadata__`` left out), validated."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: safetensors header is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: invalid safetensors header JSON at byte {exc.pos}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: safetensors header is not a JSON object")
    tensors = {}
    for name, info in data.items():
        if name == "__metadata__":
            continue
        if not (isinstance(info, dict) and isinstance(info.get("dtype"), str)
                and isinstance(info.get("shape"), list) and isinstance(info.get("data_offsets"), list)
                and len(info["data_offsets"]) == 2
                and all(_is_count(v) for v in info["shape"]) and all(_is_count(v) for v in info["data_offsets"])
                and info["data_offsets"][1] >= info["data_offsets"][0]):
            raise ConfigError(f"{where}: tensor {name!r} has no valid dtype, shape and data_offsets")
        tensors[name] = info
    return tensors


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def classify(name: str, dtype: str, scheme: QuantScheme, names: set[str] | frozenset[str] = frozenset()) -> tuple[str, int]:
    """``(role, values per stored element)``: role is ``param``, ``packed`` or ``quant_meta``."""
    if name.endswith(".qweight") and dtype in ("I32", "U32"):
        return "packed", 32 // (scheme.bits or 4)
    if name.endswith(".weight_packed") and dtype in DTYPE_BITS:
        return "packed", max(DTYPE_BITS[dtype] // (scheme.bits or 4), 1)
    if name.endswith("_blocks") and dtype == "U8":  # MXFP4 (gpt-oss): two e2m1 values per byte
        return "packed", 2
    if name.endswith(".scales") and (scheme.method in _PACKED_INT_METHODS
                                     or name[: -len(".scales")] + ".qweight" in names):
        return "quant_meta", 1  # a shard may hold the scales and the next one the qweight
    if name.endswith(_META_SUFFIXES) or ".quant_state." in name:
        return "quant_meta", 1
    if scheme.four_bit_bytes and name.endswith(".weight") and dtype == "U8":
        return "packed", 2  # bitsandbytes 4-bit, NVFP4: two 4-bit values per byte
    return "param", 1


def summarize_header(tensors: dict[str, dict[str, Any]], scheme: QuantScheme, where: str) -> dict[str, Any]:
    """A file's summary: ``{"tensors", "bytes", "entries": [[dtype, role, per_element, elements, bytes], ...]}``.

    Bytes are the ``data_offsets`` spans; each is checked against the shape and dtype.
    """
    names = set(tensors)
    groups: dict[tuple[str, str, int], list[int]] = {}
    total = 0
    for name, info in tensors.items():
        dtype = info["dtype"]
        elements = math.prod(info["shape"])
        start, end = info["data_offsets"]
        span = end - start
        bits = DTYPE_BITS.get(dtype)
        if bits is not None and elements * bits != span * 8:
            raise ConfigError(f"{where}: tensor {name!r} is {dtype} {info['shape']} = {elements * bits / 8:g} bytes "
                              f"but its data_offsets span {span} bytes")
        role, per = classify(name, dtype, scheme, names)
        acc = groups.setdefault((dtype, role, per), [0, 0])
        acc[0] += elements
        acc[1] += span
        total += span
    entries = [[d, r, p, e, b] for (d, r, p), (e, b) in sorted(groups.items())]
    return {"tensors": len(tensors), "bytes": total, "entries": entries}


# ------------------------------------------------------------------------------------------------
# A checkpoint


@dataclass
class Weights:
    """A checkpoint's weights summed over its files."""

    files: int
    tensors: int
    bytes: int
    params: int
    bytes_by_dtype: dict[str, int]
    params_by_dtype: dict[str, int]
    meta_bytes: int
    packed: list[tuple[str, int, int]]  # (dtype, values per element, elements)
    notes: list[str] = field(default_factory=list)

    def dominant_dtype(self) -> str:
        """The storage dtype holding most of the bytes, by ModelSpec name."""
        dtype = max(self.bytes_by_dtype.items(), key=lambda kv: kv[1])[0]
        return DTYPE_NAMES.get(dtype, dtype.lower())


def combine(summaries: dict[str, dict[str, Any]], scheme: QuantScheme) -> Weights:
    """Sum the per-file summaries; the notes say how packed formats were counted."""
    bytes_by: dict[str, int] = {}
    params_by: dict[str, int] = {}
    packed: dict[tuple[str, int], int] = {}
    meta = params = total = tensors = 0
    for summary in summaries.values():
        total += summary["bytes"]
        tensors += summary["tensors"]
        for dtype, role, per, elements, nbytes in summary["entries"]:
            bytes_by[dtype] = bytes_by.get(dtype, 0) + nbytes
            if role == "quant_meta":
                meta += nbytes
                continue
            params += elements * per
            params_by[dtype] = params_by.get(dtype, 0) + elements * per
            if role == "packed":
                packed[(dtype, per)] = packed.get((dtype, per), 0) + elements
    notes = []
    for (dtype, per), elements in sorted(packed.items()):
        bits = DTYPE_BITS.get(dtype, 0) // per if per else 0
        notes.append(f"weights: {elements:,} packed {dtype} elements hold {per} {bits}-bit values each "
                     f"({elements * per:,} parameters); the bytes are the stored {dtype} bytes")
    if meta:
        notes.append(f"weights: {meta:,} bytes of quantization metadata (scales, zero points, indices) "
                     "are in weights_bytes but not in params")
    unknown = sorted(d for d in bytes_by if d not in DTYPE_BITS)
    if unknown:
        notes.append(f"weights: safetensors dtype {', '.join(unknown)} unknown to kvplan: bytes from data_offsets")
    return Weights(files=len(summaries), tensors=tensors, bytes=total, params=params,
                   bytes_by_dtype=dict(sorted(bytes_by.items())), params_by_dtype=dict(sorted(params_by.items())),
                   meta_bytes=meta, packed=[(d, p, e) for (d, p), e in sorted(packed.items())], notes=notes)


def weights_dtype(weights: Weights, scheme: QuantScheme) -> str:
    """``ModelSpec.weights_dtype``: the quantization's name, else the dominant storage dtype."""
    return scheme.name or weights.dominant_dtype()
