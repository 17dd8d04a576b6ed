"""The activation peak of a transformers prefill: what one ``forward(input_ids [batch, tokens], use_cache=True,
logits_to_keep=1)`` holds at its widest moment, less the cache it builds (what ``verify --activation`` measures).

Derived from what transformers 5.17 keeps alive (torch 2.11; every tensor's lifetime traced on the CPU with a
TorchDispatchMode, tiny configs of each architecture at several sizes) and checked against the peaks an H200
measured for the real configs (docs/verification-gpu.md, "--activation"): Llama-3.1-8B and Qwen3-8B to the byte,
Mistral-7B-v0.1 16 KB over (32 eight-byte cache counters the CUDA allocator rounds to 512 B), DeepSeek-V2-Lite
512 B, gpt-oss-20b 1 MiB (0.02 %), falcon-7b-instruct 4 MiB (0.04 %).
Gemma 3 (two rotary tables, q / k norms after the projections, four norms a layer) and Qwen3's q norm were
traced on the CPU the same way, then checked on the H200 against gemma-3-1b (1 x 1k to 1 x 8k, 2 x 4k) and
gemma-3-27b (1 x 4k): within 0.004 %, the int64 scalars transformers keeps and their 512 B blocks.

The pass is a sum of what stays alive through every layer and the widest moment of one layer:

- always alive: the embedding output (``LlamaModel.forward`` keeps ``inputs_embeds`` while the loop rebinds
  ``hidden_states``), the rotary cos / sin of one sequence (``position_ids`` has batch 1), ``cache_position``
  (int64) and the attention masks transformers materializes (``masking_utils``: a bool ``[1, 1, q, k]`` for SDPA,
  bf16 additive for eager; SDPA skips the causal mask, ``_ignore_causal_mask_sdpa``, unless a sliding window is
  at most the sequence length);
- a layer's widest moment: its attention (the rotary of q in ``apply_rotary_pos_emb``: q, q x cos, rotate_half(q)
  x sin, the cat of rotate_half; or a score matrix where no fused kernel runs) or its MLP with the layer input,
  the residual and the normed input beside it (``LlamaDecoderLayer.forward``), or the fp32 copies of an RMSNorm,
  or the last norm and the logits.

The layer variants below (one per layer kind, and per model family where transformers' modeling file differs)
say which. The SDPA kernel on CUDA is an assumption the result states: flash / memory-efficient kernels keep no
[q x k] scores; PyTorch's math fallback (falcon's multi-query K / V with an explicit mask: no fused kernel takes
K heads that differ from Q's without ``enable_gqa``) upcasts to fp32 (``_scaled_dot_product_attention_math``).
"""

from __future__ import annotations

from collections.abc import Callable

from kvplan.record import dataclass
from kvplan.spec import (
    MLA,
    FullAttention,
    KVAttention,
    LayerSpec,
    ModelSpec,
    SlidingWindow,
)

#: What the derivation traced; other releases may keep other tensors alive.
DERIVED_ON = "transformers 5.17"


@dataclass(frozen=True)
class Pass:
    """One prefill: ``batch`` sequences of ``tokens`` tokens."""

    spec: ModelSpec
    batch: int
    tokens: int

    @property
    def rows(self) -> int:
        return self.batch * self.tokens

    @property
    def pairs(self) -> int:
        """(query, key) pairs of a causal prefill's score matrix, per head (the matrix is full, not a triangle)."""
        return self.batch * self.tokens * self.tokens

    @property
    def d(self) -> int:
        return self.spec.dtype_bytes

    @property
    def hidden(self) -> int:
        return self.spec.hidden_size or 4096

    @property
    def heads(self) -> int:
        return self.spec.num_attention_heads or 32


@dataclass(frozen=True)
class Moment:
    """A candidate peak: bytes above what is always alive, and what they are."""

    bytes: int
    what: str


@dataclass(frozen=True)
class Family:
    """What a transformers modeling file does that the layer kinds do not say."""

    name: str
    attention: str = "sdpa"
    """sdpa; eager_sinks (gpt-oss: ``_supports_sdpa = False``, attention sinks); sdpa_mqa_mask (falcon)."""
    mlp: str = "gated"
    """gated: down(act(gate(x)) x up(x)); gelu: falcon's dense_4h_to_h(gelu(dense_h_to_4h(x))) beside its
    parallel attention output; moe: ``integrations/moe.py grouped_mm_experts_forward``."""
    rope_bytes_per_token: Callable[[Pass, int], int] | None = None
    """Rotary tables of one sequence position (head_dim -> bytes); None: cos and sin of head_dim in the dtype."""
    qk_norm: str = "none"
    """none; before_kv: q is RMS-normed before k and v are projected (``Qwen3Attention.forward``); after_kv: q, k
    and v are projected, then q and k normed (``Gemma3Attention.forward``)."""
    norms: str = "pre"
    """pre: one RMSNorm before attention and one before the MLP (``LlamaDecoderLayer``); sandwich: also after each
    (``Gemma3DecoderLayer``: post_attention / pre_ / post_feedforward_layernorm)."""
    router_weight_bytes: int | None = None
    """Bytes of a routing weight (fp32 where the router's softmax runs in fp32); None: the model dtype."""
    router_logit_bytes: int | None = None
    expert_bias: bool = False
    """gpt-oss: per-row bias gathers, its clamp / sigmoid gate (``GptOssExperts._apply_gate``)."""
    modeled: bool = True
    """False: the model type is not one the derivation traced; the Llama profile is assumed."""


def _complex_rope(p: Pass, head_dim: int) -> int:
    # DeepseekV2RotaryEmbedding: freqs_cis, complex64 [tokens, qk_rope_head_dim / 2]
    rope = next((layer.qk_rope_head_dim for layer in p.spec.layers if isinstance(layer, MLA)), head_dim)
    return rope // 2 * 8


def _two_ropes(p: Pass, head_dim: int) -> int:
    # Gemma3TextModel: a global and a local rotary embedding (rope_theta, rope_local_base_freq), cos and sin each
    return 2 * 2 * head_dim * p.d


def _half_rope(p: Pass, head_dim: int) -> int:
    # GptOssRotaryEmbedding: cos and sin of head_dim / 2 (``_apply_rotary_emb`` splits x in halves)
    return 2 * (head_dim // 2) * p.d


FAMILIES: dict[str, Family] = {
    # modeling_gpt_oss.py: eager_attention_forward (sinks), GptOssExperts via use_experts_implementation
    "gpt_oss": Family("gpt_oss", attention="eager_sinks", mlp="moe", rope_bytes_per_token=_half_rope,
                      expert_bias=True),
    # modeling_falcon.py: FalconAttention calls SDPA with a materialized mask (allow_is_causal_skip=False)
    "falcon": Family("falcon", attention="sdpa_mqa_mask", mlp="gelu"),
    # modeling_deepseek_v2.py: DeepseekV2TopkRouter computes logits and softmax in fp32
    "deepseek_v2": Family("deepseek_v2", mlp="moe", rope_bytes_per_token=_complex_rope, router_weight_bytes=4,
                          router_logit_bytes=4),
    # modeling_qwen3.py: Qwen3Attention norms q (Qwen3RMSNorm, fp32) before it projects k and v
    "qwen3": Family("qwen3", qk_norm="before_kv"),
    # modeling_gemma3.py: two rotary embeddings, q / k norms after the projections, four norms a layer
    # (Gemma3RMSNorm: x.float(), scaled by 1 + weight in fp32); gelu-tanh gated MLP as LlamaMLP's shape
    "gemma3_text": Family("gemma3", rope_bytes_per_token=_two_ropes, qk_norm="after_kv", norms="sandwich"),
    "gemma3": Family("gemma3", rope_bytes_per_token=_two_ropes, qk_norm="after_kv", norms="sandwich"),
}
_DENSE = frozenset({"llama", "mistral", "qwen2"})
"""Model types traced with the Llama code path (LlamaDecoderLayer / LlamaMLP and their copies)."""


def family(spec: ModelSpec) -> Family:
    """The model type's family: traced ones by name; others the Llama profile, said so (``modeled`` False)."""
    if spec.model_type in FAMILIES:
        return FAMILIES[spec.model_type]
    moe = bool(spec.num_experts and spec.experts_per_token)
    return Family("llama", mlp="moe" if moe else "gated", router_weight_bytes=4 if moe else None,
                  router_logit_bytes=4 if moe else None,
                  modeled=spec.model_type in _DENSE)


# --- attention: one variant per layer kind ---------------------------------------------------------------


def _sdpa_attention(layer: KVAttention, p: Pass, fam: Family) -> Moment:
    """q's rotary (q, q x cos, rotate_half(q) x sin, the cat) beside the layer input and its norm."""
    hd, kv = layer.head_dim, layer.kv_heads
    if fam.attention == "sdpa_mqa_mask" and kv < p.heads:
        return _math_attention(layer, p)
    if fam.attention == "eager_sinks":
        return _eager_sinks_attention(layer, p)
    if fam.attention not in ("sdpa", "sdpa_mqa_mask"):
        raise ValueError(f"no attention moment for '{fam.attention}' attention")
    # k and v are alive too, but this layer has not cached them yet: they stand in for the cache the
    # measurement subtracts whole
    per = p.d * (2 * p.hidden + 4 * p.heads * hd)
    rotary = Moment(p.rows * per, f"{layer.kind} attention (q rotary): {p.rows:,} x {per:,} B")
    if fam.qk_norm == "none":
        return rotary
    return max(rotary, _qk_norm(layer, p, fam), key=lambda m: m.bytes)


def _qk_norm(layer: KVAttention, p: Pass, fam: Family) -> Moment:
    """q's RMSNorm beside the layer input and its norm: q, its fp32 copy (none where q is fp32 already), one more
    fp32 q (the squares, or the normed product) and the per-head statistics."""
    h, hd = p.heads, layer.head_dim
    q = p.d * h * hd + (4 * h * hd if p.d != 4 else 0) + 4 * h * hd
    if fam.qk_norm == "before_kv":  # Qwen3RMSNorm: mean and rsqrt alive at the product; k and v not projected
        # yet, so this layer's share of the cache the measurement subtracts is not alive
        per = p.d * 2 * p.hidden + q + 8 * h - 2 * layer.kv_heads * hd * p.d
    elif fam.qk_norm == "after_kv":  # Gemma3RMSNorm._norm: the squares and their mean; k and v stand in
        per = p.d * 2 * p.hidden + q + 4 * h
    else:
        raise ValueError(f"no q / k norm moment for '{fam.qk_norm}'")
    return Moment(p.rows * per, f"{layer.kind} attention (q norm): {p.rows:,} x {per:,} B")


def _math_attention(layer: KVAttention, p: Pass) -> Moment:
    """PyTorch's math SDPA as CUDA runs it for falcon: fp32 q / k / v, fp32 scores, their softmax and the
    isneginf mask of ``_safe_softmax``; the bool mask converted to the dtype; fused qkv, q's rotary."""
    hd, kv, h = layer.head_dim, layer.kv_heads, p.heads
    pair = 9 * h + p.d  # scores 4 + softmax 4 + isneginf 1 per head; the converted mask
    per = (2 * h * hd * 4 + 2 * kv * hd * 4 + (h + 2 * kv) * hd * p.d + h * hd * p.d + 2 * p.hidden * p.d + h)
    return Moment(p.pairs * pair + p.rows * per,
                  f"math SDPA (fp32 scores, assumed: no fused kernel for head-broadcast K/V with a mask): "
                  f"{p.pairs:,} pairs x {pair:,} B + {p.rows:,} x {per:,} B")


def _eager_sinks_attention(layer: KVAttention, p: Pass) -> Moment:
    """gpt-oss eager_attention_forward: scores [heads, q, k], their cat with the sinks and the max-subtracted
    copy [heads, q, k + 1]; K / V repeated to every head (repeat_kv)."""
    h, hd = p.heads, layer.head_dim
    scores = p.batch * h * p.tokens * (3 * p.tokens + 2) * p.d
    per = p.d * (2 * h * hd + h * hd + 2 * p.hidden + h)
    return Moment(scores + p.rows * per, f"eager attention with sinks: {p.batch * h:,} x {p.tokens:,} x "
                                         f"(3 x {p.tokens:,} + 2) x {p.d} B scores + {p.rows:,} x {per:,} B")


def _mla_attention(layer: MLA, p: Pass, fam: Family) -> Moment:
    """DeepseekV2Attention.forward at its SDPA output: q (q_b_proj and the rotated copy), the up-projected
    kv_b_proj [heads x (nope + v)], k [heads x (nope + rope)] and its rope part expanded per head, the output
    and its transposed copy, the latent projection, beside the layer input and its norm."""
    nope, rope, v = layer.qk_nope_head_dim or 128, layer.qk_rope_head_dim, layer.v_head_dim or 128
    h = layer.num_heads or p.heads
    per = p.d * (2 * p.hidden + h * ((nope + v) + 3 * (nope + rope) + 2 * v + rope) + layer.kv_lora_rank + rope)
    return Moment(p.rows * per, f"mla attention: {p.rows:,} x {per:,} B")


ATTENTION: dict[type[LayerSpec], Callable[[LayerSpec, Pass, Family], Moment]] = {
    FullAttention: _sdpa_attention,  # type: ignore[dict-item]
    SlidingWindow: _sdpa_attention,  # type: ignore[dict-item]
    MLA: _mla_attention,  # type: ignore[dict-item]
}
"""The attention moment of each layer kind transformers' prefill was traced for."""


def _mask_bytes(p: Pass, fam: Family) -> tuple[int, str]:
    """The masks one forward materializes (SDPA's bool [1, 1, q, k] without a padding mask: not per sequence)."""
    kinds = {type(layer) for layer in p.spec.layers}
    square = p.tokens * p.tokens
    if fam.attention == "eager_sinks":  # eager: an additive mask [batch, 1, q, k] in the dtype per attention type
        n = len(kinds & {FullAttention, SlidingWindow})
        return n * p.batch * square * p.d, f"{n} eager mask(s) {p.batch} x {p.tokens:,}^2 x {p.d} B"
    if fam.attention == "sdpa_mqa_mask":  # falcon: allow_is_causal_skip=False
        return square, f"bool mask {p.tokens:,}^2 B"
    # SDPA skips the causal mask; a sliding window no longer than the sequence needs one
    windows = any(isinstance(layer, SlidingWindow) and layer.window <= p.tokens for layer in p.spec.layers)
    return (square, f"bool sliding mask {p.tokens:,}^2 B") if windows else (0, "")


# --- the MLP moment ---------------------------------------------------------------------------------------


def _mlp(p: Pass, fam: Family, held: int) -> Moment:
    """The MLP's widest moment beside the layer input, the residual and the normed input (3 x hidden), plus
    what the attention left alive (``held``: eager's returned weights, bound to ``_`` in the decoder layer)."""
    h, d, width = p.hidden, p.d, p.spec.mlp_width or int(3.5 * p.hidden)
    if fam.mlp == "gelu":  # FalconDecoderLayer (parallel attention): dense_h_to_4h, gelu, attention output
        per = d * (2 * width + 3 * h)
        return Moment(p.rows * per + held, f"gelu MLP: {p.rows:,} x {per:,} B")
    if fam.mlp == "moe":
        return _moe(p, fam, held)
    if fam.mlp != "gated":
        raise ValueError(f"no MLP moment for a '{fam.mlp}' MLP")
    per = d * (3 * width + 3 * h)  # gate act, up, their product (LlamaMLP.forward)
    return Moment(p.rows * per + held, f"gated MLP: {p.rows:,} x {per:,} B")


def _moe(p: Pass, fam: Family, held: int) -> Moment:
    """``grouped_mm_experts_forward``: every (token, expert) row gathered, projected, gated, weighted and put
    back; its widest moment is the up projection (and gate) or the weighted tail."""
    spec, h, d = p.spec, p.hidden, p.d
    k, experts = spec.experts_per_token or 1, spec.num_experts or 1
    width = (spec.mlp_width or 4 * h) // k  # an expert's width; shared experts counted in: an upper bound
    w = fam.router_weight_bytes or d
    routed = p.rows * k
    small = 8 + 8 + 4 + w + 1  # sort values and permutation (int64), histc input (fp32), weights, sentinel mask
    per_token = 8 * k + w * k + (fam.router_logit_bytes or d) * experts + 3 * h * d  # top-k, router, 3 x hidden
    if fam.expert_bias:  # bias gather [2 x width], masked up [2 x width], 5 gate temporaries (clamp, sigmoid...)
        up = d * (h + 9 * width)
    else:  # masked up [2 x width] beside the projection, then act(gate) x up
        up = d * (h + 4 * width)
    tail = 2 * h * d + 2 * h * w + 8  # gathered input, masked down, weighted and reordered rows, inverse perm
    row = max(up, tail) + small
    what = "up projection" if up >= tail else "weighted tail"
    return Moment(routed * row + p.rows * per_token + held,
                  f"MoE grouped_mm {what}: {routed:,} rows x {row:,} B + {p.rows:,} x {per_token:,} B")


def _norm(p: Pass, fam: Family) -> Moment:
    """RMSNorm in fp32 (x.to(float32), its square, the scaled copy) beside the layer input and residual."""
    if fam.norms == "pre":
        per = 2 * p.hidden * p.d + 8 * p.hidden
        return Moment(p.rows * per, f"fp32 RMSNorm: {p.rows:,} x {per:,} B")
    if fam.norms == "sandwich":  # post_feedforward_layernorm: the MLP output beside the layer input and the
        # residual; two fp32 copies and 1 + weight in fp32
        per = 3 * p.hidden * p.d + 8 * p.hidden
        return Moment(p.rows * per + 4 * p.hidden, f"fp32 RMSNorm after the MLP: {p.rows:,} x {per:,} B")
    raise ValueError(f"no norm moment for '{fam.norms}' norms")


def _head(p: Pass, logit_rows: int) -> Moment:
    """The last norm and the logits of the kept positions (``logits_to_keep=1``: one per sequence, in the dtype)."""
    vocab = p.spec.vocab_size or 32000
    per = p.hidden * p.d + 8 * p.hidden
    return Moment(p.rows * per + logit_rows * vocab * p.d,
                  f"last norm and {logit_rows} x {vocab:,} logits: {p.rows:,} x {per:,} B + logits")


# --- the whole pass ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    bytes: int
    formula: str
    assumptions: tuple[str, ...]


def prefill_activation(spec: ModelSpec, batch: int, tokens: int, logit_rows: int | None = None) -> Estimate:
    """The activation peak of one prefill of ``batch`` x ``tokens`` with ``logit_rows`` logits (default
    ``batch``), or the generic profile, said so, for layer kinds whose pass was not traced."""
    from kvplan.budgets.base import activation_bytes

    rows = batch if logit_rows is None else logit_rows
    fam = family(spec)
    p = Pass(spec, batch, tokens)
    untraced = sorted({layer.kind for layer in spec.layers if type(layer) not in ATTENTION})
    if untraced:
        act, how = activation_bytes(spec, batch * tokens, 1, rows)
        note = f"transformers' prefill was not traced for {', '.join(untraced)} layers: kvplan's generic activation profile"
        return Estimate(act, how, (note,))
    assumptions = [f"activation: what {DERIVED_ON} keeps alive in a prefill (logits_to_keep=1)"]
    if not fam.modeled:
        path = "grouped_mm experts (integrations/moe.py)" if fam.mlp == "moe" else "LlamaMLP"
        assumptions.append(f"activation: model_type {spec.model_type} not traced: assumed to keep what "
                           f"LlamaDecoderLayer and {path} keep")
    if fam.attention == "sdpa_mqa_mask":
        assumptions.append("activation: SDPA falls back to PyTorch's math kernel (fp32 [heads x q x k] scores) for "
                           "multi-query K/V with a mask, as on CUDA; flash / memory-efficient kernels elsewhere")
    else:
        assumptions.append("activation: SDPA runs a flash or memory-efficient kernel (no [q x k] scores)"
                           if fam.attention == "sdpa" else
                           "activation: eager attention materializes [heads x q x k] scores (no SDPA for sinks)")
    hd = next((layer.head_dim for layer in spec.layers if isinstance(layer, KVAttention)), p.hidden // p.heads)
    rope = fam.rope_bytes_per_token(p, hd) if fam.rope_bytes_per_token else 2 * hd * p.d
    mask, mask_what = _mask_bytes(p, fam)
    always = p.rows * p.hidden * p.d + tokens * (rope + 8) + mask
    moments: list[Moment] = [_norm(p, fam), _head(p, rows)]
    for layer in spec.layers:
        attn = ATTENTION[type(layer)](layer, p, fam)
        moments.append(attn)
        held = 0
        if fam.attention == "eager_sinks":  # the softmax [heads, q, k + 1] stays bound to ``_`` through the MLP
            held = p.batch * p.heads * tokens * (tokens + 1) * p.d
        moments.append(_mlp(p, fam, held))
    peak = max(moments, key=lambda m: m.bytes)
    parts = [f"embeddings {p.rows:,} x {p.hidden * p.d:,} B", f"rotary + positions {tokens:,} x {rope + 8:,} B"]
    if mask:
        parts.append(mask_what)
    return Estimate(always + peak.bytes, f"{' + '.join(parts)} + {peak.what}", tuple(assumptions))
