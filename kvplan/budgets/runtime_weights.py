"""The weights an engine holds when it changes them at load time: ``--dtype`` and runtime quantization.

A checkpoint's ``weights_bytes`` is what is on disk. An engine started with ``--dtype float32`` holds every
unquantized parameter in 4 bytes, and one started with ``--quantization fp8`` or ``bitsandbytes`` on a
bf16 checkpoint quantizes its linear layers as it loads them and keeps the rest (embeddings, lm_head, norms)
in the model dtype. The engines' rules (which method, which modules) live in ``kvplan/engines/<e>/flags.py``;
the byte arithmetic they share is here.

The spec does not say which parameters are linear weights: they are the parameters less the embedding, the
lm_head (its own matrix unless tied to the embedding) and the norms. Whether the lm_head is tied is found by
rebuilding a dense model's parameter count both ways; where that cannot be done, an untied head is assumed
and said (tied: vocab x hidden parameters more in the low precision than planned: kvplan over-counts).
"""

from __future__ import annotations

from kvplan.record import dataclass, replace
from kvplan.spec import MODEL_DTYPE_BYTES, KVAttention, ModelSpec

FLOAT_DTYPES = frozenset(MODEL_DTYPE_BYTES)
"""Checkpoint storage dtypes that are not a quantization (``ModelSpec.weights_dtype``)."""

# bitsandbytes quantize_4bit(blocksize=64, compress_statistics=True, quant_type="nf4") (vLLM
# bitsandbytes_loader.py _unquantized_generator; bitsandbytes functional.py quantize_4bit): two 4-bit values a
# byte; each block of 64 has an absmax, itself quantized to uint8 (double quantization, blocks of 256) with one
# fp32 absmax per 256 blocks: 0.5 + 1/64 + 4/(64 x 256) bytes a weight
NF4_BYTES_PER_WEIGHT = 0.5 + 1 / 64 + 4 / (64 * 256)
FP8_BYTES_PER_WEIGHT = 1.0  # float8_e4m3fn; per-tensor / per-channel fp32 scales (under 0.1 %) not counted


@dataclass(frozen=True)
class ParamSplit:
    linear: int
    """Parameters of the linear layers (attention, MLP, experts): what runtime quantization converts."""
    other: int
    """Embedding, lm_head and norms: kept in the model dtype."""
    how: str


def is_unquantized(spec: ModelSpec) -> bool:
    return spec.weights_dtype is None or spec.weights_dtype in FLOAT_DTYPES


def checkpoint_dtype(spec: ModelSpec) -> str:
    """The checkpoint's float dtype (the spec's model dtype where the storage dtype is not given)."""
    return spec.weights_dtype if spec.weights_dtype in FLOAT_DTYPES else spec.dtype  # type: ignore[return-value]


def _dense_body(spec: ModelSpec) -> int | None:
    """Parameters of the decoder layers and final norm of a dense, llama-like model (q, k, v, o projections, a
    gated MLP of three matrices, two norms a layer); None where the spec cannot say (MoE, other layer kinds)."""
    h, width, heads = spec.hidden_size, spec.mlp_width, spec.num_attention_heads
    if spec.num_experts or not (h and width and heads):
        return None
    total = 0
    for layer in spec.layers:
        if not isinstance(layer, KVAttention):
            return None
        q = heads * layer.head_dim
        kv = layer.kv_heads * (layer.head_dim + layer.v_dim)
        total += layer.count * (h * q + h * kv + q * h + 3 * h * width + 2 * h)
    return total + h


def tied_lm_head(spec: ModelSpec) -> bool | None:
    """Whether the checkpoint's lm_head is its embedding (one vocab x hidden matrix, not two), found by rebuilding a
    dense model's parameter count both ways; None where the spec cannot say (no count, MoE, other layer kinds)."""
    params, vocab, hidden = spec.params, spec.vocab_size, spec.hidden_size
    body = _dense_body(spec)
    if not (params and vocab and hidden) or body is None:
        return None
    embed = vocab * hidden
    untied_err, tied_err = abs(body + 2 * embed - params), abs(body + embed - params)
    if min(untied_err, tied_err) > 0.02 * params:  # the two differ by vocab x hidden, far above 2 %
        return None
    return tied_err < untied_err


def split_params(spec: ModelSpec) -> ParamSplit | None:
    """The spec's parameters split into linear weights and the rest; None where the spec gives no count."""
    params, vocab, hidden = spec.params, spec.vocab_size, spec.hidden_size
    if not (params and vocab and hidden):
        return None
    embed = vocab * hidden
    norms = (2 * spec.num_layers + 1) * hidden
    tied = tied_lm_head(spec)
    heads = 1 if tied else 2
    other = min(params, heads * embed + norms)
    if tied is None:
        how = (f"embedding and lm_head ({vocab:,} x {hidden:,} each; an lm_head tied to the embedding is assumed "
               "not to be: then kvplan over-counts by vocab x hidden bytes) and norms")
    else:
        how = (f"embedding {'(tied to the lm_head)' if tied else 'and lm_head'} ({vocab:,} x {hidden:,}"
               f"{'' if tied else ' each'}) and norms")
    return ParamSplit(params - other, other, how)


def loaded_weights(spec: ModelSpec, dtype: str, method: str | None, source: str) -> tuple[ModelSpec, str]:
    """The spec with the weights (and model dtype) the engine loads: ``dtype`` for every unquantized parameter,
    ``method`` ('fp8', 'nf4') for the linear weights of an unquantized checkpoint. ``source`` cites the engine's
    rule. Returns the spec and a note saying how the bytes were counted."""
    size = MODEL_DTYPE_BYTES[dtype]
    ckpt = checkpoint_dtype(spec)
    if spec.weights_bytes is None:
        return replace(spec, dtype=dtype), ""  # type: ignore[arg-type]
    if not is_unquantized(spec):
        # a quantized checkpoint: its quantized tensors load as stored; only its float part follows --dtype
        note = (f"weights: the {spec.weights_dtype} checkpoint's {spec.weights_bytes / 2**30:.2f} GiB as stored"
                + (f" (its unquantized tensors in {dtype} rather than {ckpt}: not re-counted)"
                   if dtype != ckpt else ""))
        return replace(spec, dtype=dtype), note  # type: ignore[arg-type]
    split = split_params(spec)
    if method is None:
        if dtype == ckpt:
            return spec, ""
        total = spec.weights_bytes * size // MODEL_DTYPE_BYTES[ckpt]
        note = (f"weights: the {ckpt} checkpoint loaded as {dtype} ({source}): {spec.weights_bytes:,} B x "
                f"{size}/{MODEL_DTYPE_BYTES[ckpt]} = {total / 2**30:.2f} GiB")
        return replace(spec, dtype=dtype, weights_bytes=total, weights_dtype=dtype,  # type: ignore[arg-type]
                       mtp_weights_bytes=_scaled(spec.mtp_weights_bytes, total, spec.weights_bytes),
                       **_experts(spec, size / MODEL_DTYPE_BYTES[ckpt])), note
    if split is None:
        return spec, (f"weights: {method} at load time ({source}) not counted: the spec gives no parameter count; "
                      f"planned at the checkpoint's {spec.weights_bytes / 2**30:.2f} GiB")
    per = FP8_BYTES_PER_WEIGHT if method == "fp8" else NF4_BYTES_PER_WEIGHT
    # parameters beyond the count (router biases kept in fp32, ...) stay as the checkpoint stores them
    extra = max(spec.weights_bytes - spec.params * MODEL_DTYPE_BYTES[ckpt], 0)  # type: ignore[operator]
    total = int(split.linear * per) + split.other * size + extra
    what = "fp8 (1 B, per-tensor scales not counted)" if method == "fp8" else \
        f"nf4 ({NF4_BYTES_PER_WEIGHT:.4f} B: 4 bits + a uint8 absmax per 64, an fp32 one per 256 blocks)"
    note = (f"weights: quantized at load time ({source}): {split.linear:,} linear weights x {what} + "
            f"{split.other:,} other parameters, {split.how}, x {size} B ({dtype}) = {total / 2**30:.2f} GiB "
            f"(the checkpoint holds {spec.weights_bytes / 2**30:.2f} GiB)")
    return replace(spec, dtype=dtype, weights_bytes=total, weights_dtype=method,  # type: ignore[arg-type]
                   mtp_weights_bytes=_scaled(spec.mtp_weights_bytes, total, spec.weights_bytes),
                   **_experts(spec, per / MODEL_DTYPE_BYTES[ckpt])), note


def _scaled(part: int | None, total: int, whole: int) -> int | None:
    """A part of the weights (the MTP layers) scaled as the whole was."""
    if part is None:
        return None
    return min(total, part * total // whole) if whole else part


def _experts(spec: ModelSpec, factor: float) -> dict[str, int]:
    """The routed experts' bytes (``expert_weights_bytes``, which expert parallelism spreads) as the engine loads
    them: linear weights all, so they scale by the bytes a weight now takes over the checkpoint's."""
    experts = getattr(spec, "expert_weights_bytes", None)
    return {} if experts is None else {"expert_weights_bytes": int(experts * factor)}
