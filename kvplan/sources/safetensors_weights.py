"""Exact checkpoint weights from safetensors headers: bytes and parameter counts by dtype.

A safetensors file starts with an 8-byte little-endian header length and a JSON header naming every
tensor's dtype, shape and ``data_offsets`` (byte range in the data part). The header alone gives the
checkpoint's exact size: kvplan reads headers only (``kvplan.sources.hub`` fetches them with range
requests; :func:`local_weights` reads them from a model directory) and never the weights.

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

import math
import os
import re
import stat
from typing import Any

from kvplan.errors import ConfigError
from kvplan.record import dataclass, field
from kvplan.safe_io import parse_json

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
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: safetensors header is not UTF-8") from None
    # the bounded parser: a header may come from anyone's repository (deep nesting, 5,000-digit numbers)
    data = parse_json(text, f"{where}: safetensors header")
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


# ------------------------------------------------------------------------------------------------
# A local model directory

INDEX_NAME = "model.safetensors.index.json"
MAX_INDEX_BYTES = 64 * 1024 * 1024  # a 2,000-shard index is a few MB
MAX_LOCAL_FILES = 10_000
_SHARD = re.compile(r"^(?P<prefix>.+?)-(?P<index>\d{1,9})-of-(?P<count>\d{1,9})\.safetensors$")  # bounded: int() of 5,000 digits raises


def pick_safetensors(files: list[str]) -> tuple[list[str], str | None]:
    """The top-level safetensors files holding the model's weights, or ([], why not).

    ``model.safetensors``, or the complete ``model-XXXXX-of-YYYYY.safetensors`` shards, or Mistral's
    ``consolidated.safetensors``; a single set of any other name; never a guess between sets.
    (The same choice as ``kvplan.sources.hub.pick_safetensors`` makes for a Hub repository.)
    """
    top = sorted(f for f in files if "/" not in f and f.endswith(".safetensors"))
    if not top:
        return [], "no safetensors weight files"
    groups: dict[tuple[str, bool], list[str]] = {}
    declared: dict[str, int] = {}
    for name in top:
        m = _SHARD.match(name)
        if m:
            groups.setdefault((m["prefix"], True), []).append(name)
            declared[m["prefix"]] = int(m["count"])
        else:
            groups.setdefault((name.removesuffix(".safetensors"), False), []).append(name)
    for key in (("model", True), ("model", False), ("consolidated", False), ("consolidated", True)):
        if key in groups:
            chosen = key
            break
    else:
        if len(groups) != 1:
            names = ", ".join(sorted(g[0] for g in groups))
            return [], f"several safetensors sets ({names}) and none is model.safetensors"
        chosen = next(iter(groups))
    shards = groups[chosen]
    if chosen[1] and len(shards) not in (declared[chosen[0]], declared[chosen[0]] + 1):
        return [], f"{chosen[0]}-*-of-{declared[chosen[0]]:05d}.safetensors is incomplete ({len(shards)} files)"
    return shards, None


def local_weight_files(directory: str) -> tuple[list[str], str | None]:
    """The weight files of a model directory: those ``model.safetensors.index.json`` maps (all
    present, plain names), else :func:`pick_safetensors` over the directory; or ([], why not)."""
    index_path = os.path.join(directory, INDEX_NAME)
    if os.path.exists(index_path):
        weight_map = read_index(index_path).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ConfigError(f"{index_path}: weight_map is not an object naming the weight files")
        names = sorted(set(weight_map.values()))
        bad = [n for n in names if not isinstance(n, str) or not n.endswith(".safetensors")
               or os.path.basename(n) != n or n.startswith(".")]
        if bad:
            raise ConfigError(f"{index_path}: weight_map names {bad[0]!r}, not a safetensors file of this directory")
        missing = [n for n in names if not os.path.isfile(os.path.join(directory, n))]
        if missing:
            return [], f"{INDEX_NAME} lists {len(names)} files and {len(missing)} are missing (first: {missing[0]})"
        files = names
    else:
        try:
            listing = os.listdir(directory)
        except OSError as exc:
            raise ConfigError(f"{directory}: cannot list the directory ({exc.strerror or exc})") from None
        files, why = pick_safetensors(listing)
        if not files:
            return [], why
    if len(files) > MAX_LOCAL_FILES:
        raise ConfigError(f"{directory}: {len(files)} safetensors files (kvplan reads at most {MAX_LOCAL_FILES:,})")
    return files, None


def read_index(index_path: str) -> dict[str, Any]:
    """``model.safetensors.index.json`` as a JSON object: a regular file, at most 64 MiB, UTF-8, the bounded
    JSON parser (depth and integer length capped)."""
    from kvplan.sources.hf_config import parse_json_object

    raw = _read_regular(index_path, 0, MAX_INDEX_BYTES, whole=True)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{index_path}: not UTF-8 text") from None
    return parse_json_object(text, index_path)


MAX_TOTAL_SIZE = 1 << 50
"""1 PiB: past any checkpoint (the largest public ones are a few TB); a larger total_size is refused."""


@dataclass(frozen=True)
class IndexTotals:
    """What the index's ``metadata`` states: the checkpoint's bytes and, where written, its parameters."""

    total_size: int
    total_parameters: int | None


def index_totals(directory: str) -> IndexTotals | None:
    """``metadata.total_size`` (and ``metadata.total_parameters``, which newer transformers and huggingface_hub
    write) of the directory's ``model.safetensors.index.json``; None when there is no index or it states no
    size. ``total_size`` is the sum of the tensors' stored bytes (``save_pretrained`` /
    ``huggingface_hub.split_torch_state_dict_into_shards``): the headers' sum without the 8-byte prefixes
    and JSON headers. A size that is not a positive integer (a boolean, a float, past 1 PiB) is refused."""
    index_path = os.path.join(directory, INDEX_NAME)
    if not os.path.exists(index_path):
        return None
    metadata = read_index(index_path).get("metadata")
    if not isinstance(metadata, dict) or metadata.get("total_size") is None:
        return None
    size, params = metadata.get("total_size"), metadata.get("total_parameters")
    if not _is_count(size) or not 0 < size <= MAX_TOTAL_SIZE:
        raise ConfigError(f"{index_path}: metadata.total_size {str(size)[:40]!r} is not a byte count "
                          f"(a positive integer up to {MAX_TOTAL_SIZE:,})")
    if params is not None and (not _is_count(params) or not 0 < params <= MAX_TOTAL_SIZE):
        raise ConfigError(f"{index_path}: metadata.total_parameters {str(params)[:40]!r} is not a parameter count")
    return IndexTotals(size, params)


def read_local_header(path: str) -> dict[str, dict[str, Any]]:
    """The tensors of a local safetensors file, reading its header only (at most 8 + 100 MiB bytes),
    checked to lie within the file."""
    prefix = _read_regular(path, 0, 8)
    n = header_length(prefix, path)
    raw = _read_regular(path, 8, n)
    if len(raw) < n:
        raise ConfigError(f"{path}: truncated safetensors header ({len(raw)} of {n} bytes)")
    tensors = parse_header(raw, path)
    data_bytes = os.path.getsize(path) - 8 - n
    end = max((info["data_offsets"][1] for info in tensors.values()), default=0)
    if end > data_bytes:
        raise ConfigError(f"{path}: the header describes {end:,} bytes of tensors but the file holds {data_bytes:,}")
    return tensors


def _read_regular(path: str, offset: int, length: int, *, whole: bool = False) -> bytes:
    """``length`` bytes of a regular file from ``offset`` (``whole``: the file, refused if longer):
    never a pipe or a device, never more than asked."""
    try:
        # O_NONBLOCK: opening a named pipe must not wait for a writer (regular files ignore the flag).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as f:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ConfigError(f"{path}: not a regular file")
            if whole and info.st_size > length:
                raise ConfigError(f"{path}: {info.st_size:,} bytes, more than kvplan reads ({length:,})")
            f.seek(offset)
            return f.read(length)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None


def local_weights(directory: str, config: dict) -> tuple[Weights | None, str | None]:
    """The checkpoint weights of a model directory from its safetensors headers, or (None, why not)."""
    files, why = local_weight_files(directory)
    if not files:
        return None, why
    scheme = quant_scheme(config)
    summaries = {name: summarize_header(read_local_header(os.path.join(directory, name)), scheme,
                                        os.path.join(directory, name)) for name in files}
    return combine(summaries, scheme), None
