"""transformers' ``QuantizedCache``: exact bytes of the packed states, scales and zero points.

Sources (read from the released wheels; the code wins over the docs):

- transformers ``src/transformers/cache_utils.py`` (5.23): ``QuantizedCache.__init__`` refuses any model
  whose ``layer_types`` are not all ``full_attention``; ``QuantizedLayer`` defaults ``nbits=4, axis_key=0,
  axis_value=0, q_group_size=64, residual_length=128``; ``QuantizedLayer.update`` quantizes the prefill,
  keeps decoded tokens in full precision (``self.keys``) and re-quantizes the whole layer when
  ``residual + new >= residual_length`` (rule ``QuantizedResidual``); ``Fp8QuantizedLayer`` (5.21+) keeps
  ``float8_e4m3fn`` states with one 0-dim fp32 scale per K and per V, appends new tokens quantized with
  that scale and takes none of the group-wise options. ``generation/utils.py``
  (``_prepare_cache_for_generation``) defaults the backend to ``quanto``.
- optimum-quanto 0.2.7: ``quantize_weight`` -> ``WeightQBitsTensor`` (4-D tensors never take the AWQ /
  TinyGemm paths, which need 2-D); ``tensor/grouped.py`` ``group``: axis 0 reshapes to ``[N / g, g]``
  (``g`` must divide ``numel / shape[0]``), axis -1 to ``[g, N / g]`` (``g`` must divide
  ``numel / shape[-1]``); ``tensor/packed.py`` ``pack_weights`` packs ``8 / bits`` values per uint8 along
  dim 0 (``ceil(rows / (8 / bits))`` rows); ``MaxOptimizer`` keeps one scale and one float shift per
  group in the tensor's dtype (``AffineOptimizer``: an axis of size 1 becomes per-tensor).
- hqq 0.2.8 ``hqq/core/quantize.py`` ``Quantizer.quantize``: ``numel`` must divide by ``g``; axis 1
  reshapes to ``[N / g, g]``, axis 0 to ``[g, N / g]``; scale and zero, one per group, cast to the
  compute dtype by ``Quantizer.cuda`` (``to_inplace``); ``hqq/core/bitpack.py``: 8 bits one uint8 each,
  4 / 2 / 1 bits pack 2 / 4 / 8 rows per uint8 row (rows must divide, or the slices do not line up),
  3 bits pad rows to a multiple of 10 and pack 10 rows per int32 row.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import TYPE_CHECKING, ClassVar

from kvplan.dtypes import KVDType
from kvplan.engines.layout import (
    CacheLayout,
    EngineOptions,
    GroupRule,
    KindRules,
    build_groups,
    group_by_kind,
)
from kvplan.engines.rules import QuantizedResidual
from kvplan.engines.version import Version, render_version
from kvplan.errors import UsageError
from kvplan.layouts.base import TokenCost
from kvplan.record import dataclass
from kvplan.spec import MLA, FullAttention, LayerSpec, ModelSpec

if TYPE_CHECKING:
    from kvplan.engines.tensors import TensorPlan

BACKENDS = ("quanto", "hqq", "fp8")
DEFAULT_BACKEND = "quanto"  # generation/utils.py: cache_config.pop("backend", "quanto")
# QuantizedLayer.__init__ defaults
DEFAULT_NBITS, DEFAULT_AXIS, DEFAULT_GROUP, DEFAULT_RESIDUAL = 4, 0, 64, 128
QUANTO_BITS, QUANTO_AXES = (2, 4), (0, -1)  # QuantoQuantizedLayer.__init__
HQQ_BITS, HQQ_AXES = (1, 2, 3, 4, 8), (0, 1)  # HQQQuantizedLayer.__init__
QUANTIZED_SINCE = (4, 42)  # QuantizedCache first shipped in 4.42.0
FP8_SINCE = (5, 21)  # Fp8QuantizedLayer: absent from 5.20.2, present in 5.21.1
FLOAT_DTYPES = frozenset({"float32", "bfloat16", "float16"})
FP8_DTYPES = frozenset({"fp8", "fp8_e4m3"})
_LATENT_MLA_SINCE = (5, 13)  # as in hf/layout.py: the latent is cached from 5.13
_GROUP_WISE = ("nbits", "axis_key", "axis_value", "q_group_size", "residual_length")


@dataclass(frozen=True)
class QuantoPacking:
    """optimum-quanto ``WeightQBitsTensor``: packed uint8 data, a scale and a shift per group."""

    nbits: int
    axis: int
    group_size: int

    def tensor_bytes(self, shape: tuple[int, ...], elem_bytes: int) -> int:
        n = prod(shape)
        g = self.group_size
        axis_numel = n // shape[0 if self.axis == 0 else -1]
        if g > axis_numel or axis_numel % g:
            which = "batch" if self.axis == 0 else "head_dim"
            raise UsageError(f"optimum-quanto refuses q_group_size {g}: it must divide the {axis_numel:,} elements "
                             f"beside the {which} axis (axis {self.axis}) of a {list(shape)} state",
                             field="q_group_size")
        groups = n // g
        per_byte = 8 // self.nbits
        if self.axis == 0:  # [groups, g], packed along the groups
            data = -(-groups // per_byte) * g
            scales = g if groups == 1 else groups  # one group: the axis is dropped, one scale per column
        else:  # [g, groups], packed along g
            data = -(-g // per_byte) * groups
            scales = groups
        return data + 2 * scales * elem_bytes

    def describe(self) -> str:
        return f"quanto int{self.nbits}, axis {self.axis}, groups of {self.group_size}, scale + shift per group"

    def tensors(self, shape: tuple[int, ...], dtype: str) -> list[tuple[str, str, tuple[int, ...]]]:
        """(role, dtype, shape) of what the backend keeps: _data's packed uint8, _scale, _shift."""
        self.tensor_bytes(shape, 1)  # the same refusals
        g, per_byte = self.group_size, 8 // self.nbits
        groups = prod(shape) // g
        if self.axis == 0:
            data, scale = (-(-groups // per_byte), g), ((1, g) if groups == 1 else (groups, 1))
        else:
            data, scale = (-(-g // per_byte), groups), (1, groups)
        return [("packed", "uint8", data), ("scale", dtype, scale), ("shift", dtype, scale)]


@dataclass(frozen=True)
class HqqPacking:
    """hqq ``Quantizer.quantize``: bit-packed data, a scale and a zero per group in the compute dtype."""

    nbits: int
    axis: int
    group_size: int

    def tensor_bytes(self, shape: tuple[int, ...], elem_bytes: int) -> int:
        n = prod(shape)
        g = self.group_size
        if n % g:
            raise UsageError(f"HQQ refuses q_group_size {g}: it must divide the {n:,} elements of a "
                             f"{list(shape)} state", field="q_group_size")
        groups = n // g
        rows, cols = (groups, g) if self.axis == 1 else (g, groups)
        if self.nbits == 8:
            return rows * cols + 2 * groups * elem_bytes
        if self.nbits == 3:
            data = -(-rows // 10) * cols * 4
        else:
            per_byte = 8 // self.nbits
            if rows % per_byte:
                raise UsageError(f"HQQ's {self.nbits}-bit packing needs the {rows:,} rows of a {list(shape)} state "
                                 f"(axis {self.axis}, groups of {g}) to be a multiple of {per_byte}",
                                 field="q_group_size")
            data = rows // per_byte * cols
        return data + 2 * groups * elem_bytes

    def describe(self) -> str:
        return f"hqq {self.nbits}-bit, axis {self.axis}, groups of {self.group_size}, scale + zero per group"

    def tensors(self, shape: tuple[int, ...], dtype: str) -> list[tuple[str, str, tuple[int, ...]]]:
        """(role, dtype, shape) of W_q and the meta's scale and zero (3-bit int32 rows as 4 uint8 columns)."""
        self.tensor_bytes(shape, 1)  # the same refusals
        g = self.group_size
        groups = prod(shape) // g
        rows, cols = (groups, g) if self.axis == 1 else (g, groups)
        if self.nbits == 8:
            data = (rows, cols)
        elif self.nbits == 3:
            data = (-(-rows // 10), cols * 4)
        else:
            data = (rows // (8 // self.nbits), cols)
        meta = (groups, 1) if self.axis == 1 else (1, groups)
        return [("packed", "uint8", data), ("scale", dtype, meta), ("zero", dtype, meta)]


@dataclass(frozen=True)
class Fp8Packing:
    """transformers ``Fp8QuantizedLayer``: float8_e4m3fn elements and one 0-dim fp32 scale."""

    def tensor_bytes(self, shape: tuple[int, ...], elem_bytes: int) -> int:
        return prod(shape) + 4

    def describe(self) -> str:
        return "fp8 e4m3 per tensor, one fp32 scale"

    def tensors(self, shape: tuple[int, ...], dtype: str) -> list[tuple[str, str, tuple[int, ...]]]:
        return [("fp8", "float8_e4m3fn", shape), ("scale", "float32", ())]


Packing = QuantoPacking | HqqPacking | Fp8Packing


@dataclass(frozen=True)
class QuantizedGroup(GroupRule):
    """A run of layers held by a ``QuantizedLayer``: the quantized states plus the full-precision residual."""

    refuses_points: ClassVar[bool] = True  # HQQ's packing refuses some (batch, tokens) shapes
    keys: Packing = Fp8Packing()
    values: Packing = Fp8Packing()
    k_shape: tuple[int, int] = (0, 0)
    """(heads, width) of one token's K, as transformers caches it."""
    v_shape: tuple[int, int] = (0, 0)
    elem_bytes: int = 2
    """Bytes of one full-precision element (residual, scales, zero points)."""

    def layer_bytes(self, context: int, batch: int) -> int:
        assert isinstance(self.tokens, QuantizedResidual)
        quantized, residual = self.tokens.split(context)
        total = 0
        for packing, (heads, width) in ((self.keys, self.k_shape), (self.values, self.v_shape)):
            total += packing.tensor_bytes((batch, heads, quantized, width), self.elem_bytes)
            total += batch * heads * residual * width * self.elem_bytes
        return total

    def layer_bytes_many(self, contexts: Sequence[int], batch: int, layers: int = 1) -> list[int]:
        return [layers * self.layer_bytes(c, batch) for c in contexts]

    @property
    def cost_key(self) -> tuple[object, ...]:  # type: ignore[override]  # a longer key than GroupRule's 3 fields
        return (self.tokens, self.keys, self.values, self.k_shape, self.v_shape, self.elem_bytes)


@dataclass(frozen=True)
class QuantizedSettings:
    backend: str
    keys: Packing
    values: Packing
    residual_length: int

    def describe(self) -> str:
        if self.backend == "fp8":
            return "transformers QuantizedCache (fp8): K and V in float8_e4m3fn, one fp32 scale each per layer"
        same = self.keys == self.values
        what = f"K and V {self.keys.describe()}" if same else \
            f"K {self.keys.describe()}; V {self.values.describe()}"
        return (f"transformers QuantizedCache ({self.backend}): {what}; up to {self.residual_length} - 1 decoded "
                "tokens in full precision until the layer is re-quantized")


def wants_quantized(options: EngineOptions, kv_dtype: KVDType) -> bool:
    return options.kv_cache is not None or kv_dtype.name in FP8_DTYPES


def settings(options: EngineOptions, kv_dtype: KVDType, version: Version) -> QuantizedSettings:
    """The backend and its packing, transformers' defaults filled in; refusals as transformers raises them."""
    if options.kv_cache not in (None, "quantized"):
        raise UsageError(f"transformers has no '{options.kv_cache}' cache here (kvplan knows: quantized)",
                         field="kv_cache")
    fp8_dtype = kv_dtype.name in FP8_DTYPES
    backend = options.backend or ("fp8" if fp8_dtype else DEFAULT_BACKEND)
    if backend not in BACKENDS:
        raise UsageError(f"transformers' QuantizedCache has no backend '{backend}' (it has: {', '.join(BACKENDS)})",
                         field="backend")
    if version < QUANTIZED_SINCE:
        raise UsageError(f"transformers {render_version(version)} has no QuantizedCache (it arrived in 4.42)",
                         field="engine_version")
    if backend == "fp8":
        if version < FP8_SINCE:
            raise UsageError(f"transformers {render_version(version)} has no fp8 cache: QuantizedCache's fp8 "
                             "backend arrived in 5.21", field="backend" if not fp8_dtype else "kv_dtype")
        given = [name for name in _GROUP_WISE if getattr(options, name) is not None]
        if given:
            raise UsageError(f"transformers' fp8 cache quantizes per tensor and takes no {', '.join(given)} "
                             "(QuantizedCache refuses them)", field=given[0])
        return QuantizedSettings("fp8", Fp8Packing(), Fp8Packing(), 0)
    if fp8_dtype:
        raise UsageError(f"kv dtype '{kv_dtype.name}' is the fp8 backend's; the {backend} backend keeps its "
                         "residual, scales and zero points in the model dtype (use --kv-dtype auto)", field="kv_dtype")
    nbits = DEFAULT_NBITS if options.nbits is None else options.nbits
    axis_key = DEFAULT_AXIS if options.axis_key is None else options.axis_key
    axis_value = DEFAULT_AXIS if options.axis_value is None else options.axis_value
    group = DEFAULT_GROUP if options.q_group_size is None else options.q_group_size
    residual = DEFAULT_RESIDUAL if options.residual_length is None else options.residual_length
    bits, axes, cls = (QUANTO_BITS, QUANTO_AXES, QuantoPacking) if backend == "quanto" else \
        (HQQ_BITS, HQQ_AXES, HqqPacking)
    if nbits not in bits:
        raise UsageError(f"the {backend} backend takes nbits {' or '.join(map(str, bits))}, not {nbits}",
                         field="nbits")
    for name, axis in (("axis_key", axis_key), ("axis_value", axis_value)):
        if axis not in axes:
            raise UsageError(f"the {backend} backend takes {name} {' or '.join(map(str, axes))}, not {axis}",
                             field=name)
    if backend == "hqq" and nbits == 3 and 1 in (axis_key, axis_value):
        # hqq Quantizer.dequantize cuts 3-bit rows at shape[0] * shape[1] // group_size, the rows of a 2-D
        # weight; for a 4-D K / V state along axis 1 that is too few, and the next update fails
        raise UsageError("HQQ's 3-bit packing along axis 1 fails to dequantize 4-D K / V states: use axis 0",
                         field="axis_key" if axis_key == 1 else "axis_value")
    if group <= 0:
        raise UsageError(f"q_group_size {group} must be a positive integer", field="q_group_size")
    if residual < 0:
        raise UsageError(f"residual_length {residual} must be 0 or more", field="residual_length")
    return QuantizedSettings(backend, cls(nbits, axis_key, group), cls(nbits, axis_value, group), residual)


def layout(spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions, *, name: str,
           title: str) -> CacheLayout:
    quant = settings(options, kv_dtype, version)
    if quant.backend != "fp8" and kv_dtype.name not in FLOAT_DTYPES:
        raise UsageError(f"transformers' QuantizedCache computes in the model dtype, not '{kv_dtype.name}'",
                         field="kv_dtype")
    others = sorted({layer.kind for layer in spec.layers if type(layer) not in RULES})
    if others:
        raise UsageError(f"transformers' QuantizedCache takes only models whose layers are all full attention; "
                         f"{spec.id} has {', '.join(others)} layers", field="kv_cache")
    if options.prompt_len is not None and options.prompt_len <= 0:
        raise UsageError(f"prompt_len {options.prompt_len} must be a positive integer", field="prompt_len")
    elem_bytes = spec_elem_bytes(kv_dtype, spec)
    rule = QuantizedResidual(quant.residual_length, options.prompt_len)
    context = _Context(quant, rule, version, elem_bytes)
    groups = build_groups(spec, lambda layer, first: group_by_kind(RULES, layer, first, context, title))
    assumptions = [quant.describe()]
    if quant.residual_length > 1:
        if options.prompt_len is None:
            assumptions.append(f"no prompt length: the largest full-precision residual assumed, "
                               f"{quant.residual_length} - 1 tokens (a prompt length gives the exact state)")
        else:
            assumptions.append(f"a prefill of {options.prompt_len:,} tokens, then one token per decode step")
    assumptions.append("each step dequantizes one layer's whole K and V to full precision while it attends "
                       "(transient, not in kv_bytes)")
    if quant.backend == "fp8":  # the elements are float8_e4m3fn whatever the compute dtype
        from kvplan.dtypes import KV_DTYPES

        kv_dtype = KV_DTYPES["fp8_e4m3"]
    return CacheLayout(name, render_version(version), kv_dtype, None, groups, tuple(assumptions))


def spec_elem_bytes(kv_dtype: KVDType, spec: ModelSpec) -> int:
    """Bytes of one full-precision element: the compute dtype (fp8 backend: the model's, unused)."""
    if kv_dtype.name in FLOAT_DTYPES:
        return kv_dtype.block_bytes
    return 4 if spec.dtype == "float32" else 2


@dataclass(frozen=True)
class _Context:
    """What the quantized cache's rules read besides the layer."""

    quant: QuantizedSettings
    rule: QuantizedResidual
    version: Version
    elem_bytes: int


def _kv_group(layer: FullAttention, first: int, ctx: _Context) -> GroupRule:
    return _group(layer, first, ctx, (layer.kv_heads, layer.head_dim), (layer.kv_heads, layer.v_dim))


def _mla_group(layer: MLA, first: int, ctx: _Context) -> GroupRule:
    if ctx.version >= _LATENT_MLA_SINCE:
        return _group(layer, first, ctx, (1, layer.kv_lora_rank), (1, layer.qk_rope_head_dim))
    assert layer.num_heads and layer.qk_nope_head_dim and layer.v_head_dim
    return _group(layer, first, ctx, (layer.num_heads, layer.qk_nope_head_dim + layer.qk_rope_head_dim),
                  (layer.num_heads, layer.v_head_dim))


RULES: KindRules[_Context] = {FullAttention: _kv_group, MLA: _mla_group}
"""The layer kinds transformers' QuantizedCache takes (a model with any other is refused up front)."""


def _group(layer: LayerSpec, first: int, ctx: _Context, k: tuple[int, int], v: tuple[int, int]) -> GroupRule:
    quant, elem_bytes = ctx.quant, ctx.elem_bytes
    # The steady rate of the quantized part, for --explain; kv_bytes come from QuantizedGroup.layer_bytes.
    sample = 1024 * (getattr(quant.keys, "group_size", 1) or 1)
    rate = sum(p.tensor_bytes((1, h, sample, w), elem_bytes) for p, (h, w) in ((quant.keys, k), (quant.values, v)))
    per_token = rate // sample
    formula = (f"~{per_token} B quantized ({quant.keys.describe()}); residual {k[0]} x ({k[1]} + {v[1]}) x "
               f"{elem_bytes} B")
    return QuantizedGroup(layer, first, TokenCost(per_token, formula), ctx.rule, keys=quant.keys, values=quant.values,
                          k_shape=k, v_shape=v, elem_bytes=elem_bytes)


def quantized_tensors(layout: CacheLayout, names: dict[int, str], batch: int, context: int) -> TensorPlan:
    """What ``verify`` allocates for a QuantizedCache: per layer, each backend tensor and the residual.
    The decode step is not run on them (attend 0): the backend dequantizes them, not kvplan."""
    from kvplan.engines.tensors import BufferSpec, LayerInfo, TensorPlan, ViewSpec

    buffers: list[BufferSpec] = []
    layers: list[LayerInfo] = []
    residual_dtype = {4: "float32", 2: "bfloat16"}
    for gi, g in enumerate(layout.groups):
        if gi not in names or not isinstance(g, QuantizedGroup):
            continue
        assert isinstance(g.tokens, QuantizedResidual)
        quantized, residual = g.tokens.split(context)
        dtype = layout.kv_dtype.name if layout.kv_dtype.name in FLOAT_DTYPES else residual_dtype[g.elem_bytes]
        for index in range(g.first_layer, g.first_layer + g.count):
            for role, packing, (heads, width) in (("K", g.keys, g.k_shape), ("V", g.values, g.v_shape)):
                parts = packing.tensors((batch, heads, quantized, width), dtype)
                if residual:
                    parts.append(("residual", dtype, (batch, heads, residual, width)))
                for part, part_dtype, shape in parts:
                    name = f"{role} {part}"
                    view = ViewSpec(index, name, part_dtype, shape)
                    buffers.append(BufferSpec(f"layer {index} {name}", part_dtype, shape, (view,)))
            layers.append(LayerInfo(index, g.kind, names[gi], g.layer, 0, "bhtd"))
    notes = ("transformers QuantizedCache: the backend's packed states, scales and zero points allocated "
             "as stored; the decode step is not run on them",)
    return TensorPlan(tuple(buffers), tuple(layers), notes=notes)
