"""Analytic parameter count from a Hugging Face ``config.json``, for sizing weights without a checkpoint.

Used when no safetensors header is at hand. The count is built tensor by tensor by each family's
parameter rule in ``kvplan.sources.families`` (the same registry, and the same config reader, that
build the cached layers), following the module layout of the transformers modeling file each rule
cites, so that the FP8 block-scale and MXFP4 rules of :func:`weights_bytes` apply per weight matrix.

- :func:`count_params` -> :class:`ParamCount` (``total``, ``by_component``, ``assumptions``).
  ``total`` counts model parameters, not the scale tensors of a quantized checkpoint (the Hub's
  "Model size" figure for FP8 checkpoints counts those as well, so it is ~0.01 % higher).
  ``assumptions`` are the count's own; the geometry's (a transformers default for an absent field)
  are the ModelSpec's, which the same config gives.
- :func:`weights_bytes` -> ``(bytes, description)``: checkpoint bytes in the dtype the config names.

A model_type without a parameter rule is counted with the llama-like rule and says so in
``assumptions``. Only the standard library is imported (no torch, no pydantic).
"""

from __future__ import annotations

import fnmatch
import math

from kvplan.errors import ConfigError
from kvplan.sources.families import count as _count
from kvplan.sources.families.tensors import COMPONENTS, ParamCount, Tensor

__all__ = ["COMPONENTS", "ParamCount", "Tensor", "checkpoint_dtype", "count_params", "expert_weights_bytes",
           "mtp_weights_bytes", "weights_bytes"]

_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8": 1,
}


def count_params(config: dict) -> ParamCount:
    """Parameter count of the model a ``config.json`` dict describes (see module docstring)."""
    return _count(config)[1]


# ------------------------------------------------------------------------------------------------
# Bytes


def checkpoint_dtype(config: dict, quantized: bool = False) -> tuple[str, int, str | None]:
    for where in (config, config.get("text_config") if isinstance(config.get("text_config"), dict) else {}):
        for key in ("torch_dtype", "dtype"):
            value = where.get(key)
            if isinstance(value, str) and value != "auto":
                name = value.removeprefix("torch.").lower()
                if name in _DTYPE_BYTES:
                    return name, _DTYPE_BYTES[name], None
    if quantized:
        # gpt-oss's config names no dtype; its unquantized tensors are bf16 in the checkpoint.
        return "bfloat16", 2, "no torch_dtype: unquantized tensors assumed bfloat16"
    # transformers materializes float32 weights when the config names no dtype, and checkpoints from
    # before torch_dtype existed (gpt2, ...) are float32 on the Hub.
    return "float32", 4, "no torch_dtype: assumed float32"


def _excluded(module: str, patterns: list[str]) -> bool:
    """Whether ``module`` is listed in ``modules_to_not_convert``.

    transformers matches these as substrings of the module name (``integrations/finegrained_fp8.py``)
    and, for MXFP4, as ``*`` wildcards (``integrations/mxfp4.py``). Here a pattern matches when it
    equals a dotted sub-path of the module or matches it as an fnmatch wildcard, so that
    ``model.layers.1.mlp.gate`` does not also catch ``model.layers.1.mlp.gate_proj``.
    """
    dotted = "." + module + "."
    for p in patterns:
        if not isinstance(p, str):
            continue
        if ("." + p + ".") in dotted or fnmatch.fnmatchcase(module, p) or fnmatch.fnmatchcase(module, p + ".*"):
            return True
    return False


def weights_bytes(config: dict, count: ParamCount | None = None) -> tuple[int, str]:
    """Checkpoint size in bytes and a one-line description of how it was worked out.

    - no ``quantization_config``: every parameter in the checkpoint dtype (``torch_dtype`` /
      ``dtype``, float32 when absent).
    - ``quant_method: fp8`` with ``weight_block_size [bo, bi]`` (Qwen3-*-FP8, DeepSeek-V3/R1, Kimi-K2):
      each quantized linear weight (out x in) is 1 byte per element plus a float32 ``weight_scale_inv``
      of ceil(out/bo) x ceil(in/bi) (transformers ``integrations/finegrained_fp8.py`` FP8Linear;
      DeepSeek-V3 README "fp8 ... 128x128 block scaling"). Quantized: the linear weights of decoder
      layers (attention, MLP, experts, shared experts) not named in ``modules_to_not_convert``;
      embeddings, norms, biases, router, lm_head and the MTP eh_proj stay in the checkpoint dtype.
    - ``quant_method: fp8`` without blocks: 1 byte per weight + one float32 scale per tensor.
    - ``quant_method: mxfp4`` (gpt-oss): expert weights (not biases) are ``*_blocks`` (4-bit e2m1, two
      per byte) plus ``*_scales`` (one e8m0 byte per 32 values) = 4.25 bits per weight (OCP MX spec v1.0;
      transformers ``integrations/mxfp4.py``); everything in ``modules_to_not_convert`` (attention,
      router, embeddings, lm_head) and all norms/biases in bf16.
    - any other ``quant_method`` with a ``bits`` field: quantized weights at ``bits``/8 bytes (scales and
      zero points not counted, an underestimate); without ``bits``: checkpoint dtype.
    """
    if count is None:
        count = _count(config)[1]
    tensors = count.tensors or _count(config)[1].tensors  # a ParamCount made elsewhere lists none
    q = config.get("quantization_config")
    if not isinstance(q, dict):
        q = (config.get("text_config") or {}).get("quantization_config") if isinstance(
            config.get("text_config"), dict) else None
    quantized = isinstance(q, dict) and bool(q.get("quant_method"))
    dname, dbytes, dnote = checkpoint_dtype(config, quantized)
    suffix = f" ({dnote})" if dnote else ""
    # e_score_correction_bias is float32 in DeepSeek-V3's checkpoint: the Hub's safetensors metadata
    # gives F32 41,555,600 = 41,540,496 block scales + 256 x 59 biases (assumed alike for glm4_moe).
    fp32_el = sum(t.numel for t in tensors if t.fp32)
    fp32_extra = fp32_el * max(4 - dbytes, 0)
    if not quantized:
        extra = f" + {fp32_el:,} float32 router biases" if fp32_extra else ""
        return (count.total * dbytes + fp32_extra,
                f"{count.total:,} parameters x {dbytes} B ({dname}){extra}{suffix}")
    assert isinstance(q, dict)

    method = str(q.get("quant_method")).lower()
    listed_skip = q.get("modules_to_not_convert") or q.get("ignore") or []
    skip = [p for p in listed_skip if isinstance(p, str)] if isinstance(listed_skip, list) else []
    # Parameters the config does not describe tensor by tensor (none today) stay in the checkpoint dtype.
    listed = sum(t.numel for t in tensors)
    rest = max(count.total - listed, 0) * dbytes

    if method == "fp8":
        block = q.get("weight_block_size")
        if block is not None and not (isinstance(block, list) and len(block) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in block)):
            raise ConfigError(f"quantization_config.weight_block_size={block!r} is not two positive integers")
        quant_el = 0
        scales = 0
        for t in tensors:
            if t.linear and not _excluded(t.module, skip):
                quant_el += t.numel
                if block and len(block) == 2:
                    bo, bi = int(block[0]), int(block[1])
                    scales += math.ceil(t.shape[0] / bo) * math.ceil(t.shape[1] / bi) * t.count
                else:
                    scales += t.count
        other = listed - quant_el
        total = quant_el + 4 * scales + other * dbytes + rest + fp32_extra
        how = (f"fp8 block {block[0]}x{block[1]}" if block and len(block) == 2 else "fp8 per-tensor")
        return total, (f"{how}: {quant_el:,} quantized linear weights x 1 B + {scales:,} fp32 scales; "
                       f"{other:,} other parameters x {dbytes} B ({dname}){suffix}")

    if method == "mxfp4":
        quant_el = sum(t.numel for t in tensors
                       if t.linear and t.component == "experts" and not _excluded(t.module, skip))
        other = listed - quant_el
        # 4-bit values (n/2 bytes) + one e8m0 scale byte per 32 values along the input dimension.
        q_bytes = sum(t.count * t.shape[0] * (math.ceil(t.shape[1] / 32) * 17)
                      for t in tensors if t.linear and t.component == "experts"
                      and not _excluded(t.module, skip))
        total = q_bytes + other * dbytes + rest + fp32_extra
        return total, (f"mxfp4: {quant_el:,} expert weights x 4.25 bits (e2m1 + e8m0 scale per 32); "
                       f"{other:,} other parameters x {dbytes} B ({dname}){suffix}")

    bits = q.get("bits") or q.get("w_bit")
    if isinstance(bits, (int, float)) and not isinstance(bits, bool) and 0 < bits <= 16:
        quant_el = sum(t.numel for t in tensors if t.linear and not _excluded(t.module, skip))
        other = listed - quant_el
        total = math.ceil(quant_el * bits / 8) + other * dbytes + rest + fp32_extra
        return total, (f"{method}: {quant_el:,} linear weights x {bits} bits (scales/zeros not counted); "
                       f"{other:,} other parameters x {dbytes} B ({dname}){suffix}")
    return count.total * dbytes, (f"quant_method {method!r} not modelled: {count.total:,} parameters x "
                                  f"{dbytes} B ({dname}){suffix}")


def mtp_weights_bytes(config: dict, count: ParamCount | None = None) -> int:
    """Bytes of :func:`weights_bytes` that are the MTP layers' (the tensors counted under ``mtp``).

    The total less the same rule applied to the count without them, so that the share follows the
    total's dtype and quantization rule (FP8 blocks, bf16 eh_proj, fp32 router biases); 0 when the
    config has no MTP layers.
    """
    if count is None:
        count = _count(config)[1]
    tensors = count.tensors or _count(config)[1].tensors
    mtp = [t for t in tensors if t.component == "mtp"]
    if not mtp:
        return 0
    main = ParamCount(count.total - sum(t.numel for t in mtp),
                      {k: v for k, v in count.by_component.items() if k != "mtp"}, count.assumptions,
                      tuple(t for t in tensors if t.component != "mtp"))
    return weights_bytes(config, count)[0] - weights_bytes(config, main)[0]


def expert_weights_bytes(config: dict, count: ParamCount | None = None) -> int:
    """Bytes of :func:`weights_bytes` that are the routed experts of the decoder layers (the tensors counted
    under ``experts``; an MTP layer's experts are under ``mtp``), as :func:`mtp_weights_bytes` works out its
    share: the total less the same rule applied without them (FP8 block scales, MXFP4 blocks follow the
    experts). 0 for a dense model. Expert parallelism spreads this share over tp x dp GPUs."""
    if count is None:
        count = _count(config)[1]
    tensors = count.tensors or _count(config)[1].tensors
    experts = [t for t in tensors if t.component == "experts"]
    if not experts:
        return 0
    rest = ParamCount(count.total - sum(t.numel for t in experts),
                      {k: v for k, v in count.by_component.items() if k != "experts"}, count.assumptions,
                      tuple(t for t in tensors if t.component != "experts"))
    return weights_bytes(config, count)[0] - weights_bytes(config, rest)[0]


_checkpoint_dtype = checkpoint_dtype  # the name kvplan.sources.hub imports
