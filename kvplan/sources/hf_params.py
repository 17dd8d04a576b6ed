"""Analytic parameter count from a Hugging Face ``config.json``, for sizing weights without a checkpoint.

Used when no ``model.safetensors.index.json`` / safetensors header is at hand. The count is built
tensor by tensor, following the module layout of the transformers modeling file of each family (the
file named in each builder's docstring), so that the FP8 block-scale and MXFP4 rules of
:func:`weights_bytes` can be applied per weight matrix.

- :func:`count_params` -> :class:`ParamCount` (``total``, ``by_component``, ``assumptions``).
  ``total`` counts model parameters, not the scale tensors of a quantized checkpoint (the Hub's
  "Model size" figure for FP8 checkpoints counts those as well, so it is ~0.01 % higher).
- :func:`weights_bytes` -> ``(bytes, description)``: checkpoint bytes in the dtype the config names.

Families with their own rules: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe,
qwen3_next, gemma, gemma2, gemma3(_text), gemma4(_text), phi3, cohere, olmo2, glm4_moe, deepseek_v2,
deepseek_v3, kimi_k2, llama4, gpt_oss, gpt2, gptj, falcon, mamba, mamba2, jamba. Anything else is counted
with the llama-like rule and says so in ``assumptions``.

Only the standard library is imported (no torch, no pydantic).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvplan.errors import ConfigError

COMPONENTS = (
    "embed", "attention", "ssm", "mlp", "experts", "shared_experts", "router", "norms", "lm_head",
    "mtp", "vision", "audio", "other",
)
"""Keys of ``ParamCount.by_component`` (always all present). ``ssm``: Mamba / linear-attention
mixers; ``mtp``: multi-token-prediction layers a checkpoint ships beside the main model; ``vision``:
vision tower and multimodal projector; ``audio``: audio tower and its projector (gemma4)."""

_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8": 1,
}

# model_types whose transformers config class defaults tie_word_embeddings to True.
_TIED_BY_DEFAULT = {
    "gemma", "gemma2", "gemma3", "gemma3_text", "gpt2", "falcon", "mamba", "cohere", "cohere2",
    "opt", "bloom", "gpt_bigcode",
}


@dataclass(frozen=True)
class ParamCount:
    total: int
    by_component: dict[str, int]
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Tensor:
    """One weight (or ``count`` identical ones, e.g. the experts of a layer)."""

    component: str
    module: str
    """Module path in transformers naming (``model.layers.3.self_attn.q_proj``), for matching
    ``quantization_config.modules_to_not_convert``."""
    shape: tuple[int, ...]
    """``(out_features, in_features)`` for a linear weight."""
    count: int = 1
    linear: bool = False
    """A weight matrix of a decoder layer that FP8 / MXFP4 checkpoints quantize."""
    fp32: bool = False
    """Stored as float32 whatever the checkpoint dtype (DeepSeek-style ``e_score_correction_bias``)."""

    @property
    def numel(self) -> int:
        return math.prod(self.shape) * self.count


class _Builder:
    """Config accessor plus the tensor list being built."""

    def __init__(self, config: dict):
        if not isinstance(config, dict):
            raise ConfigError(f"config is {type(config).__name__}, expected a JSON object")
        self.top = config
        text = config.get("text_config")
        self.cfg: dict = text if isinstance(text, dict) else config
        self.model_type = str(config.get("model_type") or self.cfg.get("model_type") or "")
        self.text_type = str(self.cfg.get("model_type") or self.model_type)
        self.tensors: list[_Tensor] = []
        self.notes: list[str] = []

    # ---- config access ----
    def get(self, *names: str, default: Any = None) -> Any:
        for name in names:
            if name in self.cfg and self.cfg[name] is not None:
                return self.cfg[name]
        return default

    def int(self, *names: str, default: int | None = None, why: str | None = None) -> int:
        value = self.get(*names)
        if value is None:
            if default is None:
                raise ConfigError(f"config has no {names[0]} (needed to count parameters)")
            if why:
                self.note(f"{names[0]} absent: assumed {default} ({why})")
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
            raise ConfigError(f"{names[0]}={value!r} is not a non-negative integer")
        return int(value)

    def flag(self, name: str, default: bool) -> bool:
        value = self.cfg.get(name)
        return default if value is None else bool(value)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # ---- common dimensions ----
    @property
    def hidden(self) -> int:
        return self.int("hidden_size", "n_embd", "n_embed", "d_model")

    @property
    def layers(self) -> int:
        return self.int("num_hidden_layers", "n_layer", "num_layers", "n_layers")

    @property
    def vocab(self) -> int:
        return self.int("vocab_size", "padded_vocab_size")

    @property
    def heads(self) -> int:
        return self.int("num_attention_heads", "n_head", "n_heads")

    @property
    def kv_heads(self) -> int:
        return self.int("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                        default=self.heads)

    @property
    def head_dim(self) -> int:
        explicit = self.get("head_dim")
        if explicit is not None:
            return self.int("head_dim")
        return self.hidden // self.heads

    def tied(self) -> bool:
        value = self.top.get("tie_word_embeddings", self.cfg.get("tie_word_embeddings"))
        if value is None:
            return self.model_type in _TIED_BY_DEFAULT or self.text_type in _TIED_BY_DEFAULT
        return bool(value)

    # ---- tensor helpers ----
    def add(self, component: str, module: str, *shape: int, count: int = 1, linear: bool = False,
            fp32: bool = False) -> None:
        self.tensors.append(_Tensor(component, module, tuple(int(s) for s in shape), count, linear, fp32))

    def linear(self, component: str, module: str, n_in: int, n_out: int, *, bias: bool = False,
               count: int = 1, quantizable: bool = True) -> None:
        self.add(component, module, n_out, n_in, count=count, linear=quantizable)
        if bias:
            self.add(component, module + ".bias", n_out, count=count)

    def norm(self, module: str, dim: int, *, bias: bool = False, component: str = "norms") -> None:
        self.add(component, module, dim)
        if bias:
            self.add(component, module + ".bias", dim)

    def embed(self, module: str = "model.embed_tokens") -> None:
        self.add("embed", module, self.vocab, self.hidden)

    def lm_head(self, *, bias: bool = False) -> None:
        if self.tied():
            self.note("tie_word_embeddings: lm_head shares the embedding matrix (not counted twice)")
            return
        self.add("lm_head", "lm_head", self.vocab, self.hidden)
        if bias:
            self.add("lm_head", "lm_head.bias", self.vocab)


# ------------------------------------------------------------------------------------------------
# Shared pieces


def _gqa_attention(b: _Builder, prefix: str, *, q_bias: bool, kv_bias: bool, o_bias: bool,
                   component: str = "attention", q_out_factor: int = 1) -> None:
    """q/k/v/o projections (``LlamaAttention``); phi3's fused qkv_proj has the same element count."""
    h, nh, nkv, hd = b.hidden, b.heads, b.kv_heads, b.head_dim
    b.linear(component, f"{prefix}.q_proj", h, nh * hd * q_out_factor, bias=q_bias)
    b.linear(component, f"{prefix}.k_proj", h, nkv * hd, bias=kv_bias)
    b.linear(component, f"{prefix}.v_proj", h, nkv * hd, bias=kv_bias)
    b.linear(component, f"{prefix}.o_proj", nh * hd, h, bias=o_bias)


def _gated_mlp(b: _Builder, prefix: str, intermediate: int, *, component: str = "mlp",
               bias: bool = False, count: int = 1) -> None:
    """gate_proj / up_proj / down_proj (SwiGLU / GeGLU)."""
    h = b.hidden
    b.linear(component, f"{prefix}.gate_proj", h, intermediate, bias=bias, count=count)
    b.linear(component, f"{prefix}.up_proj", h, intermediate, bias=bias, count=count)
    b.linear(component, f"{prefix}.down_proj", intermediate, h, bias=bias, count=count)


def _intermediate(b: _Builder) -> int:
    return b.int("intermediate_size", "ffn_hidden_size", "n_inner", default=4 * b.hidden,
                 why="4 x hidden_size")


# ------------------------------------------------------------------------------------------------
# Llama-like families


def _llama_like(b: _Builder) -> None:
    """llama, mistral, mixtral, qwen2(_moe), qwen3(_moe), phi3, gemma 1/2/3, cohere, olmo2, glm4_moe.

    transformers ``models/<family>/modeling_<family>.py``. Per family:
    - biases: llama/mistral/qwen3 ``attention_bias`` on q/k/v/o; qwen2 and qwen2_moe always bias
      q/k/v, never o (``Qwen2Attention``); glm4_moe ``attention_bias`` on q/k/v only; llama
      ``mlp_bias`` on the MLP.
    - norms: 2 RMSNorms per layer; gemma2/gemma3 add pre/post-feedforward norms (4 per layer);
      qwen3(_moe), gemma3 and glm4_moe (``use_qk_norm``) add q_norm/k_norm of head_dim; olmo2 has
      post-attention/post-feedforward norms and q_norm/k_norm over the whole projection; cohere has
      one LayerNorm per layer (parallel attention and MLP) and q/k norms per head if ``use_qk_norm``.
    - MoE: mixtral ``num_local_experts``; qwen2_moe/qwen3_moe ``num_experts`` on layers where
      ``(i + 1) % decoder_sparse_step == 0`` and ``i not in mlp_only_layers``, with qwen2_moe's
      ``shared_expert`` + ``shared_expert_gate`` (Linear(hidden, 1)); glm4_moe DeepSeek-style
      ``first_k_dense_replace`` / ``n_routed_experts`` / ``n_shared_experts`` and a router with
      ``e_score_correction_bias``.
    """
    mt = b.text_type
    h, n_layers, hd, nh, nkv = b.hidden, b.layers, b.head_dim, b.heads, b.kv_heads
    attn_bias = b.flag("attention_bias", False)
    q_bias = kv_bias = o_bias = attn_bias
    if mt in ("qwen2", "qwen2_moe", "qwen2_vl_text", "qwen2_5_vl_text"):
        q_bias = kv_bias = True
        o_bias = False
    if mt == "qwen3_moe" and b.get("qkv_bias") is not None:  # Qwen3-Coder configs spell it qkv_bias
        q_bias = kv_bias = bool(b.get("qkv_bias"))
    if mt == "glm4_moe":
        o_bias = False
    mlp_bias = b.flag("mlp_bias", False)

    qk_norm = mt in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text") or (
        mt in ("glm4_moe", "cohere", "cohere2") and b.flag("use_qk_norm", False))
    if mt == "qwen3_moe" and b.get("use_qk_norm") is False:
        qk_norm = False
    norms_per_layer = {"gemma2": 4, "gemma3": 4, "gemma3_text": 4, "cohere": 1, "cohere2": 1}.get(mt, 2)
    layer_norm_bias = False  # cohere's LayerNorm has no bias; others are RMSNorms

    b.embed()
    if mt == "phi3":
        b.note("phi3: fused qkv_proj / gate_up_proj counted as separate q/k/v and gate/up (same size)")

    # MoE layout
    experts = 0
    moe_inter = 0
    shared_inter = 0
    sparse: Callable[[int], bool] = lambda i: False
    router_bias = False
    if mt == "mixtral" or (b.get("num_local_experts") and mt not in ("llama4_text", "gpt_oss")):
        experts = b.int("num_local_experts")
        moe_inter = _intermediate(b)
        sparse = lambda i: True
    elif mt in ("qwen2_moe", "qwen3_moe") or (b.get("num_experts") and b.get("moe_intermediate_size")
                                              and mt not in ("glm4_moe",)):
        experts = b.int("num_experts")
        moe_inter = b.int("moe_intermediate_size")
        if mt == "qwen2_moe":
            shared_inter = b.int("shared_expert_intermediate_size", default=0)
        step = b.int("decoder_sparse_step", default=1)
        only = set(b.get("mlp_only_layers", default=[]) or [])
        sparse = lambda i: experts > 0 and i not in only and (i + 1) % max(step, 1) == 0
    elif mt == "glm4_moe" or (b.get("n_routed_experts") and b.get("first_k_dense_replace") is not None):
        experts = b.int("n_routed_experts")
        moe_inter = b.int("moe_intermediate_size")
        shared_inter = b.int("n_shared_experts", default=0) * moe_inter
        first_dense = b.int("first_k_dense_replace", default=0)
        sparse = lambda i: i >= first_dense
        router_bias = True  # Glm4MoeTopkRouter.e_score_correction_bias

    def layer(prefix: str, i: int, component_override: str | None = None) -> None:
        def comp(c: str) -> str:
            return component_override or c

        if mt == "olmo2":
            qn, kn = nh * hd, nkv * hd
        else:
            qn = kn = hd
        _gqa_attention(b, f"{prefix}.self_attn", q_bias=q_bias, kv_bias=kv_bias, o_bias=o_bias,
                       component=comp("attention"))
        if qk_norm:
            if mt in ("cohere", "cohere2"):
                b.add(comp("norms"), f"{prefix}.self_attn.q_norm", nh, hd)
                b.add(comp("norms"), f"{prefix}.self_attn.k_norm", nkv, hd)
            else:
                b.add(comp("norms"), f"{prefix}.self_attn.q_norm", qn)
                b.add(comp("norms"), f"{prefix}.self_attn.k_norm", kn)
        elif mt == "olmo2":
            b.add(comp("norms"), f"{prefix}.self_attn.q_norm", qn)
            b.add(comp("norms"), f"{prefix}.self_attn.k_norm", kn)
        names = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                 "post_feedforward_layernorm")
        if mt == "olmo2":
            names = ("post_attention_layernorm", "post_feedforward_layernorm")
        for name in names[:norms_per_layer]:
            b.norm(f"{prefix}.{name}", h, bias=layer_norm_bias, component=comp("norms"))
        if sparse(i):
            b.linear(comp("router"), f"{prefix}.mlp.gate", h, experts, quantizable=False)
            if router_bias:
                b.add(comp("router"), f"{prefix}.mlp.gate.e_score_correction_bias", experts, fp32=True)
            _gated_mlp(b, f"{prefix}.mlp.experts", moe_inter, component=comp("experts"), count=experts)
            if shared_inter:
                _gated_mlp(b, f"{prefix}.mlp.shared_expert", shared_inter, component=comp("shared_experts"))
                if mt == "qwen2_moe":
                    b.linear(comp("shared_experts"), f"{prefix}.mlp.shared_expert_gate", h, 1,
                             quantizable=False)
        else:
            _gated_mlp(b, f"{prefix}.mlp", _intermediate(b), component=comp("mlp"), bias=mlp_bias)

    for i in range(n_layers):
        layer(f"model.layers.{i}", i)
    b.norm("model.norm", h, bias=layer_norm_bias)
    b.lm_head()

    if mt == "glm4_moe":
        _mtp_layers(b, n_layers, lambda prefix, i: layer(prefix, i, "mtp"))


def _mtp_layers(b: _Builder, first_index: int, layer: Callable[[str, int], None]) -> None:
    """``num_nextn_predict_layers`` multi-token-prediction layers, counted under ``mtp``.

    DeepSeek-V3's checkpoint stores them as ``model.layers.61.*``: a full decoder layer plus
    ``enorm``, ``hnorm``, ``eh_proj`` (Linear(2h, h), kept in bf16), ``shared_head.norm`` and its own
    copies of ``embed_tokens`` and ``shared_head.head`` (DeepSeek-V3 README: "685B ... includes 671B
    of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module weights"; vLLM
    ``model_executor/models/deepseek_mtp.py``). glm4_moe checkpoints follow the same layout
    (vLLM ``glm4_moe_mtp.py``).
    """
    n = b.int("num_nextn_predict_layers", default=0)
    if not n:
        return
    h, v = b.hidden, b.vocab
    for k in range(n):
        i = first_index + k
        prefix = f"model.layers.{i}"
        layer(prefix, i)
        b.add("mtp", f"{prefix}.enorm", h)
        b.add("mtp", f"{prefix}.hnorm", h)
        b.linear("mtp", f"{prefix}.eh_proj", 2 * h, h, quantizable=False)
        b.add("mtp", f"{prefix}.shared_head.norm", h)
        b.add("mtp", f"{prefix}.shared_head.head", v, h)
        b.add("mtp", f"{prefix}.embed_tokens", v, h)
    b.note(f"{n} MTP layer(s) (num_nextn_predict_layers) counted under 'mtp', with their own "
           "embed_tokens and shared_head copies as the published checkpoint stores them")


# ------------------------------------------------------------------------------------------------
# DeepSeek V2 / V3 / Kimi K2 (MLA)


def _deepseek(b: _Builder) -> None:
    """deepseek_v2, deepseek_v3, kimi_k2: transformers ``modeling_deepseek_v3.py`` / the remote
    ``modeling_deepseek.py``.

    MLA: q_a_proj (h -> q_lora_rank) + q_a_layernorm + q_b_proj (q_lora_rank -> heads x
    (qk_nope + qk_rope)), or a plain q_proj when ``q_lora_rank`` is null; kv_a_proj_with_mqa
    (h -> kv_lora_rank + qk_rope), kv_a_layernorm (kv_lora_rank), kv_b_proj (kv_lora_rank -> heads x
    (qk_nope + v_head_dim)), o_proj (heads x v_head_dim -> h). Layers ``i >= first_k_dense_replace``
    with ``i % moe_layer_freq == 0`` are MoE: ``n_routed_experts`` experts of
    ``moe_intermediate_size``, one shared MLP of ``n_shared_experts x moe_intermediate_size``, router
    weight (experts x h) plus ``e_score_correction_bias`` when ``topk_method == "noaux_tc"``.
    """
    h, n_layers, nh = b.hidden, b.layers, b.heads
    nope = b.int("qk_nope_head_dim")
    rope = b.int("qk_rope_head_dim")
    v_dim = b.int("v_head_dim")
    kv_lora = b.int("kv_lora_rank")
    if "q_lora_rank" in b.cfg:
        q_lora = b.cfg["q_lora_rank"]
    else:
        q_lora = 1536  # DeepseekV2Config / DeepseekV3Config default
        b.note("q_lora_rank absent: assumed 1536 (the transformers config-class default); "
               "a Hub config with q_lora_rank null would have a plain q_proj")
    attn_bias = b.flag("attention_bias", False)
    experts = b.int("n_routed_experts", default=0)
    moe_inter = b.int("moe_intermediate_size", default=0)
    shared = b.int("n_shared_experts", default=0)
    first_dense = b.int("first_k_dense_replace", default=0)
    freq = b.int("moe_layer_freq", default=1)
    noaux = b.get("topk_method") == "noaux_tc" or (
        b.text_type in ("deepseek_v3", "kimi_k2") and b.get("topk_method") is None)

    def layer(prefix: str, i: int, override: str | None = None) -> None:
        def comp(c: str) -> str:
            return override or c

        a = f"{prefix}.self_attn"
        if q_lora:
            b.linear(comp("attention"), f"{a}.q_a_proj", h, int(q_lora), bias=attn_bias)
            b.add(comp("norms"), f"{a}.q_a_layernorm", int(q_lora))
            b.linear(comp("attention"), f"{a}.q_b_proj", int(q_lora), nh * (nope + rope))
        else:
            b.linear(comp("attention"), f"{a}.q_proj", h, nh * (nope + rope))
        b.linear(comp("attention"), f"{a}.kv_a_proj_with_mqa", h, kv_lora + rope, bias=attn_bias)
        b.add(comp("norms"), f"{a}.kv_a_layernorm", kv_lora)
        b.linear(comp("attention"), f"{a}.kv_b_proj", kv_lora, nh * (nope + v_dim))
        b.linear(comp("attention"), f"{a}.o_proj", nh * v_dim, h, bias=attn_bias)
        b.norm(f"{prefix}.input_layernorm", h, component=comp("norms"))
        b.norm(f"{prefix}.post_attention_layernorm", h, component=comp("norms"))
        if experts and i >= first_dense and i % max(freq, 1) == 0:
            b.linear(comp("router"), f"{prefix}.mlp.gate", h, experts, quantizable=False)
            if noaux:
                b.add(comp("router"), f"{prefix}.mlp.gate.e_score_correction_bias", experts, fp32=True)
            _gated_mlp(b, f"{prefix}.mlp.experts", moe_inter, component=comp("experts"), count=experts)
            if shared:
                _gated_mlp(b, f"{prefix}.mlp.shared_experts", shared * moe_inter,
                           component=comp("shared_experts"))
        else:
            _gated_mlp(b, f"{prefix}.mlp", _intermediate(b), component=comp("mlp"))

    b.embed()
    for i in range(n_layers):
        layer(f"model.layers.{i}", i)
    b.norm("model.norm", h)
    b.lm_head()
    _mtp_layers(b, n_layers, lambda prefix, i: layer(prefix, i, "mtp"))


# ------------------------------------------------------------------------------------------------
# Llama 4


def _llama4(b: _Builder) -> None:
    """llama4 / llama4_text: transformers ``modeling_llama4.py``.

    MoE layers (``moe_layers``, else every ``interleave_moe_layer_step``-th layer counting from
    step-1): ``num_local_experts`` experts (gate_up_proj E x h x 2I, down_proj E x I x h with
    I = ``intermediate_size``), router Linear(h, E), one shared expert MLP of ``intermediate_size``;
    other layers a dense MLP of ``intermediate_size_mlp``. q/k norm is a weightless L2 norm.
    """
    h, n_layers = b.hidden, b.layers
    experts = b.int("num_local_experts", default=0)
    inter = b.int("intermediate_size")
    inter_mlp = b.int("intermediate_size_mlp", default=inter)
    step = b.int("interleave_moe_layer_step", default=1)
    moe_layers = b.get("moe_layers")
    if moe_layers is None:
        moe_layers = list(range(step - 1, n_layers, step)) if step else []
    moe_set = set(moe_layers)
    bias = b.flag("attention_bias", False)
    b.embed()
    for i in range(n_layers):
        p = f"model.layers.{i}"
        _gqa_attention(b, f"{p}.self_attn", q_bias=bias, kv_bias=bias, o_bias=bias)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        if experts and i in moe_set:
            b.linear("router", f"{p}.feed_forward.router", h, experts, quantizable=False)
            _gated_mlp(b, f"{p}.feed_forward.experts", inter, component="experts", count=experts)
            _gated_mlp(b, f"{p}.feed_forward.shared_expert", inter, component="shared_experts")
        else:
            _gated_mlp(b, f"{p}.feed_forward", inter_mlp)
    b.norm("model.norm", h)
    b.lm_head()
    _vision(b)


# ------------------------------------------------------------------------------------------------
# gpt-oss


def _gpt_oss(b: _Builder) -> None:
    """gpt_oss: transformers ``modeling_gpt_oss.py``.

    Attention q/k/v/o with biases (``attention_bias``) and one learned ``sinks`` logit per head;
    router Linear(h, E) with bias; experts gate_up_proj (E x h x 2I) + bias (E x 2I) and down_proj
    (E x I x h) + bias (E x h).
    """
    h, n_layers, nh = b.hidden, b.layers, b.heads
    experts = b.int("num_local_experts")
    inter = b.int("intermediate_size")
    bias = b.flag("attention_bias", True)
    b.embed()
    for i in range(n_layers):
        p = f"model.layers.{i}"
        _gqa_attention(b, f"{p}.self_attn", q_bias=bias, kv_bias=bias, o_bias=bias)
        b.add("attention", f"{p}.self_attn.sinks", nh)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.post_attention_layernorm", h)
        b.linear("router", f"{p}.mlp.router", h, experts, bias=True, quantizable=False)
        b.linear("experts", f"{p}.mlp.experts.gate_up_proj", h, 2 * inter, bias=True, count=experts)
        b.linear("experts", f"{p}.mlp.experts.down_proj", inter, h, bias=True, count=experts)
    b.norm("model.norm", h)
    b.lm_head()


# ------------------------------------------------------------------------------------------------
# GPT-2 / GPT-J / Falcon


def _gpt2(b: _Builder) -> None:
    """gpt2: transformers ``modeling_gpt2.py`` (Conv1D layers carry biases; LayerNorms weight + bias).

    wte, wpe; per block ln_1, c_attn (h -> 3h), attn c_proj, ln_2, mlp c_fc (h -> n_inner, default 4h),
    mlp c_proj; ln_f; lm_head tied to wte.
    """
    h, n_layers = b.hidden, b.layers
    inner = b.int("n_inner", default=4 * h)
    b.add("embed", "transformer.wte", b.vocab, h)
    b.add("embed", "transformer.wpe", b.int("n_positions", "max_position_embeddings"), h)
    for i in range(n_layers):
        p = f"transformer.h.{i}"
        b.norm(f"{p}.ln_1", h, bias=True)
        b.linear("attention", f"{p}.attn.c_attn", h, 3 * h, bias=True)
        b.linear("attention", f"{p}.attn.c_proj", h, h, bias=True)
        b.norm(f"{p}.ln_2", h, bias=True)
        b.linear("mlp", f"{p}.mlp.c_fc", h, inner, bias=True)
        b.linear("mlp", f"{p}.mlp.c_proj", inner, h, bias=True)
    b.norm("transformer.ln_f", h, bias=True)
    b.lm_head()


def _gptj(b: _Builder) -> None:
    """gptj: transformers ``modeling_gptj.py``: bias-free q/k/v/out_proj, fc_in/fc_out with biases,
    one LayerNorm per block (parallel attention + MLP), lm_head with bias."""
    h, n_layers = b.hidden, b.layers
    inner = b.int("n_inner", default=4 * h)
    b.add("embed", "transformer.wte", b.vocab, h)
    for i in range(n_layers):
        p = f"transformer.h.{i}"
        b.norm(f"{p}.ln_1", h, bias=True)
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            b.linear("attention", f"{p}.attn.{name}", h, h)
        b.linear("mlp", f"{p}.mlp.fc_in", h, inner, bias=True)
        b.linear("mlp", f"{p}.mlp.fc_out", inner, h, bias=True)
    b.norm("transformer.ln_f", h, bias=True)
    b.lm_head(bias=True)


def _falcon(b: _Builder) -> None:
    """falcon: transformers ``modeling_falcon.py``.

    query_key_value: h -> (heads + 2 x kv_heads) x head_dim with ``new_decoder_architecture``,
    h -> h + 2 x head_dim with ``multi_query``, else 3h; dense h -> h; MLP dense_h_to_4h /
    dense_4h_to_h (``ffn_hidden_size``, default 4h); biases iff ``bias``. LayerNorms (weight + bias):
    new architecture ln_attn + ln_mlp (``num_ln_in_parallel_attn``, default 2); otherwise
    input_layernorm, plus post_attention_layernorm unless ``parallel_attn``. lm_head tied by default.
    """
    h, n_layers, nh = b.hidden, b.layers, b.heads
    hd = h // nh
    bias = b.flag("bias", False)
    new_arch = b.flag("new_decoder_architecture", False)
    ffn = b.int("ffn_hidden_size", default=4 * h)
    if new_arch:
        nkv = b.int("num_kv_heads", "n_head_kv", default=nh)
        qkv_out = (nh + 2 * nkv) * hd
    elif b.flag("multi_query", True):
        qkv_out = h + 2 * hd
    else:
        qkv_out = 3 * h
    b.add("embed", "transformer.word_embeddings", b.vocab, h)
    for i in range(n_layers):
        p = f"transformer.h.{i}"
        if new_arch:
            n_ln = b.int("num_ln_in_parallel_attn", default=2)
            b.norm(f"{p}.ln_attn", h, bias=True)
            if n_ln == 2:
                b.norm(f"{p}.ln_mlp", h, bias=True)
        else:
            b.norm(f"{p}.input_layernorm", h, bias=True)
            if not b.flag("parallel_attn", True):
                b.norm(f"{p}.post_attention_layernorm", h, bias=True)
        b.linear("attention", f"{p}.self_attention.query_key_value", h, qkv_out, bias=bias)
        b.linear("attention", f"{p}.self_attention.dense", h, h, bias=bias)
        b.linear("mlp", f"{p}.mlp.dense_h_to_4h", h, ffn, bias=bias)
        b.linear("mlp", f"{p}.mlp.dense_4h_to_h", ffn, h, bias=bias)
    b.norm("transformer.ln_f", h, bias=True)
    b.lm_head()


# ------------------------------------------------------------------------------------------------
# Mamba / Mamba-2 / Jamba


def _mamba1_mixer(b: _Builder, p: str, *, h: int, inner: int, state: int, conv: int, dt_rank: int,
                  proj_bias: bool, conv_bias: bool) -> None:
    """``MambaMixer`` (transformers ``modeling_mamba.py``): in_proj (h -> 2I), depthwise conv1d
    (I x 1 x k, bias), x_proj (I -> dt_rank + 2N), dt_proj (dt_rank -> I, bias), A_log (I x N),
    D (I), out_proj (I -> h)."""
    b.linear("ssm", f"{p}.in_proj", h, 2 * inner, bias=proj_bias)
    b.add("ssm", f"{p}.conv1d", inner, 1, conv)
    if conv_bias:
        b.add("ssm", f"{p}.conv1d.bias", inner)
    b.linear("ssm", f"{p}.x_proj", inner, dt_rank + 2 * state)
    b.linear("ssm", f"{p}.dt_proj", dt_rank, inner, bias=True)
    b.add("ssm", f"{p}.A_log", inner, state)
    b.add("ssm", f"{p}.D", inner)
    b.linear("ssm", f"{p}.out_proj", inner, h, bias=proj_bias)


def _dt_rank(b: _Builder, value: Any, h: int) -> int:
    if value is None or value == "auto":
        return math.ceil(h / 16)
    return int(value)


def _mamba(b: _Builder) -> None:
    """mamba: transformers ``modeling_mamba.py``: embeddings, per layer an RMSNorm + MambaMixer,
    norm_f, lm_head tied by default (``MambaConfig.tie_word_embeddings=True``)."""
    h, n_layers = b.hidden, b.layers
    inner = b.int("intermediate_size", default=b.int("expand", default=2) * h)
    state = b.int("state_size", default=16)
    conv = b.int("conv_kernel", default=4)
    dt_rank = _dt_rank(b, b.get("time_step_rank"), h)
    vocab = b.vocab
    pad = b.int("pad_vocab_size_multiple", default=1)
    if pad > 1 and vocab % pad:
        b.note(f"vocab_size {vocab} is not a multiple of pad_vocab_size_multiple {pad}; counted unpadded")
    b.embed("backbone.embeddings")
    for i in range(n_layers):
        p = f"backbone.layers.{i}"
        b.norm(f"{p}.norm", h)
        _mamba1_mixer(b, f"{p}.mixer", h=h, inner=inner, state=state, conv=conv, dt_rank=dt_rank,
                      proj_bias=b.flag("use_bias", False), conv_bias=b.flag("use_conv_bias", True))
    b.norm("backbone.norm_f", h)
    b.lm_head()


def _mamba2(b: _Builder) -> None:
    """mamba2: transformers ``modeling_mamba2.py``: in_proj (h -> 2I + 2 x n_groups x N + heads),
    conv1d over I + 2 x n_groups x N channels (bias), dt_bias / A_log / D per head, gated RMSNorm (I),
    out_proj (I -> h)."""
    h, n_layers = b.hidden, b.layers
    inner = b.int("intermediate_size", default=b.int("expand", default=2) * h)
    state = b.int("state_size", default=128)
    groups = b.int("n_groups", default=1)
    heads = b.int("num_heads")
    conv = b.int("conv_kernel", default=4)
    proj_bias = b.flag("use_bias", False)
    conv_dim = inner + 2 * groups * state
    b.embed("backbone.embeddings")
    for i in range(n_layers):
        p = f"backbone.layers.{i}"
        m = f"{p}.mixer"
        b.norm(f"{p}.norm", h)
        b.linear("ssm", f"{m}.in_proj", h, 2 * inner + 2 * groups * state + heads, bias=proj_bias)
        b.add("ssm", f"{m}.conv1d", conv_dim, 1, conv)
        if b.flag("use_conv_bias", True):
            b.add("ssm", f"{m}.conv1d.bias", conv_dim)
        b.add("ssm", f"{m}.dt_bias", heads)
        b.add("ssm", f"{m}.A_log", heads)
        b.add("ssm", f"{m}.D", heads)
        b.add("ssm", f"{m}.norm", inner)
        b.linear("ssm", f"{m}.out_proj", inner, h, bias=proj_bias)
    b.norm("backbone.norm_f", h)
    b.lm_head()


def _jamba(b: _Builder) -> None:
    """jamba: transformers ``modeling_jamba.py``. Attention on layers with
    ``i % attn_layer_period == attn_layer_offset``, Mamba elsewhere (mixer with dt/B/C RMSNorms);
    MoE (``num_experts``, router Linear(h, E)) on ``i % expert_layer_period == expert_layer_offset``,
    dense MLP elsewhere; input_layernorm + pre_ff_layernorm per layer."""
    h, n_layers = b.hidden, b.layers
    a_period, a_offset = b.int("attn_layer_period", default=8), b.int("attn_layer_offset", default=4)
    e_period, e_offset = b.int("expert_layer_period", default=2), b.int("expert_layer_offset", default=1)
    experts = b.int("num_experts", default=1)
    inter = _intermediate(b)
    m_inner = b.int("mamba_expand", default=2) * h
    state = b.int("mamba_d_state", default=16)
    conv = b.int("mamba_d_conv", default=4)
    dt_rank = _dt_rank(b, b.get("mamba_dt_rank"), h)
    b.embed()
    for i in range(n_layers):
        p = f"model.layers.{i}"
        if i % a_period == a_offset:
            _gqa_attention(b, f"{p}.self_attn", q_bias=False, kv_bias=False, o_bias=False)
        else:
            m = f"{p}.mamba"
            _mamba1_mixer(b, m, h=h, inner=m_inner, state=state, conv=conv, dt_rank=dt_rank,
                          proj_bias=b.flag("mamba_proj_bias", False),
                          conv_bias=b.flag("mamba_conv_bias", True))
            b.add("norms", f"{m}.dt_layernorm", dt_rank)
            b.add("norms", f"{m}.b_layernorm", state)
            b.add("norms", f"{m}.c_layernorm", state)
        b.norm(f"{p}.input_layernorm", h)
        b.norm(f"{p}.pre_ff_layernorm", h)
        if experts > 1 and i % e_period == e_offset:
            b.linear("router", f"{p}.feed_forward.router", h, experts, quantizable=False)
            _gated_mlp(b, f"{p}.feed_forward.experts", inter, component="experts", count=experts)
        else:
            _gated_mlp(b, f"{p}.feed_forward", inter)
    b.norm("model.final_layernorm", h)
    b.lm_head()


# ------------------------------------------------------------------------------------------------
# Qwen3-Next


def _qwen3_next(b: _Builder) -> None:
    """qwen3_next: transformers ``modeling_qwen3_next.py``.

    Every ``full_attention_interval``-th layer (or per ``layer_types``) is gated full attention
    (q_proj doubled for the output gate, q_norm/k_norm of head_dim); the others Gated DeltaNet:
    in_proj_qkvz (h -> 2 x key_dim + 2 x value_dim), in_proj_ba (h -> 2 x v_heads), conv1d
    (2 x key_dim + value_dim channels, no bias), dt_bias / A_log per v-head, gated RMSNorm
    (v_head_dim), out_proj (value_dim -> h). MoE as qwen2_moe (experts, shared_expert,
    shared_expert_gate). The checkpoint's ``mtp.*`` tensors are not in the config and not counted.
    """
    h, n_layers = b.hidden, b.layers
    interval = b.int("full_attention_interval", default=4)
    types = b.get("layer_types")
    full = [(t == "full_attention") for t in types] if isinstance(types, list) and len(types) == n_layers \
        else [(i + 1) % interval == 0 for i in range(n_layers)]
    k_heads, k_dim = b.int("linear_num_key_heads"), b.int("linear_key_head_dim")
    v_heads, v_dim = b.int("linear_num_value_heads"), b.int("linear_value_head_dim")
    conv = b.int("linear_conv_kernel_dim", default=4)
    key_dim, value_dim = k_heads * k_dim, v_heads * v_dim
    experts = b.int("num_experts", default=0)
    moe_inter = b.int("moe_intermediate_size", default=0)
    shared_inter = b.int("shared_expert_intermediate_size", default=0)
    step = b.int("decoder_sparse_step", default=1)
    only = set(b.get("mlp_only_layers", default=[]) or [])
    hd = b.head_dim

    def layer(p: str, i: int, is_full: bool, override: str | None = None) -> None:
        def comp(c: str) -> str:
            return override or c

        if is_full:
            _gqa_attention(b, f"{p}.self_attn", q_bias=False, kv_bias=False, o_bias=False, q_out_factor=2,
                           component=comp("attention"))
            b.add(comp("norms"), f"{p}.self_attn.q_norm", hd)
            b.add(comp("norms"), f"{p}.self_attn.k_norm", hd)
        else:
            m = f"{p}.linear_attn"
            b.linear("ssm", f"{m}.in_proj_qkvz", h, 2 * key_dim + 2 * value_dim)
            b.linear("ssm", f"{m}.in_proj_ba", h, 2 * v_heads)
            b.add("ssm", f"{m}.conv1d", 2 * key_dim + value_dim, 1, conv)
            b.add("ssm", f"{m}.dt_bias", v_heads)
            b.add("ssm", f"{m}.A_log", v_heads)
            b.add("ssm", f"{m}.norm", v_dim)
            b.linear("ssm", f"{m}.out_proj", value_dim, h)
        b.norm(f"{p}.input_layernorm", h, component=comp("norms"))
        b.norm(f"{p}.post_attention_layernorm", h, component=comp("norms"))
        if experts and i not in only and (i + 1) % max(step, 1) == 0:
            b.linear(comp("router"), f"{p}.mlp.gate", h, experts, quantizable=False)
            _gated_mlp(b, f"{p}.mlp.experts", moe_inter, component=comp("experts"), count=experts)
            if shared_inter:
                _gated_mlp(b, f"{p}.mlp.shared_expert", shared_inter, component=comp("shared_experts"))
                b.linear(comp("shared_experts"), f"{p}.mlp.shared_expert_gate", h, 1, quantizable=False)
        else:
            _gated_mlp(b, f"{p}.mlp", _intermediate(b), component=comp("mlp"))

    b.embed()
    for i in range(n_layers):
        layer(f"model.layers.{i}", i, full[i])
    b.norm("model.norm", h)
    b.lm_head()

    # MTP: vLLM model_executor/models/qwen3_next_mtp.py: mtp.fc (Linear(2h, h)), pre_fc_norm_embedding,
    # pre_fc_norm_hidden, full-attention MoE decoder layer(s) mtp.layers.N, mtp.norm; embeddings and
    # lm_head are shared with the main model. Qwen3-Next configs do not state the count; vLLM reads
    # num_nextn_predict_layers and the Qwen3-Next-80B-A3B checkpoints ship one such layer.
    if "num_nextn_predict_layers" in b.cfg:
        n_mtp = b.int("num_nextn_predict_layers", default=0)
    else:
        n_mtp = 1
        b.note("qwen3_next: num_nextn_predict_layers absent: 1 MTP layer (mtp.*) assumed, as the "
               "Qwen3-Next-80B-A3B checkpoints ship")
    for k in range(n_mtp):
        b.linear("mtp", "mtp.fc", 2 * h, h, quantizable=False)
        b.add("mtp", "mtp.pre_fc_norm_embedding", h)
        b.add("mtp", "mtp.pre_fc_norm_hidden", h)
        layer(f"mtp.layers.{k}", n_layers + k, True, "mtp")
        b.add("mtp", "mtp.norm", h)


# ------------------------------------------------------------------------------------------------
# Gemma 4


_GEMMA4_GLOBAL_HEAD_DIM = 512  # Gemma4TextConfig global_head_dim default


def _gemma4(b: _Builder) -> None:
    """gemma4 / gemma4_text: transformers ``modeling_gemma4.py`` (``Gemma4ForConditionalGeneration``).

    Counted as the published checkpoints store it (names ``model.language_model.*``; every tensor,
    persistent buffers included, since ``total_size`` counts them):
    - layer geometry as kvplan's config reader (``hf_families._gemma4``): ``layer_types`` (default
      every 6th layer global, last layer forced global); global layers use ``global_head_dim``
      (default 512, null -> ``head_dim``) and, only with ``attention_k_eq_v``,
      ``num_global_key_value_heads``; ``per_layer_config`` overrides both.
    - attention: q_proj, k_proj, v_proj (none on global layers when ``attention_k_eq_v``), o_proj
      (biases iff ``attention_bias``), q_norm / k_norm of the layer's head_dim (v_norm has no weight).
      The last ``num_kv_shared_layers`` layers compute no K/V, yet the checkpoints still store their
      k_proj / v_proj / k_norm (transformers skips them on load; vLLM's qkv_proj loads them).
    - per layer: input / post-attention / pre- and post-feedforward RMSNorms, a ``layer_scalar``
      buffer (1 value), a GeGLU MLP of ``intermediate_size`` (twice that on kv-shared layers when
      ``use_double_wide_mlp``).
    - ``enable_moe_block`` (26B-A4B): beside the dense MLP, router (proj Linear(h, E), ``scale`` (h),
      ``per_expert_scale`` (E)), experts ``gate_up_proj`` (E x 2I x h) and ``down_proj`` (E x h x I)
      with I = ``moe_intermediate_size``, and 3 more RMSNorms.
    - per-layer embeddings when ``hidden_size_per_layer_input`` > 0 (E2B / E4B): the table
      ``embed_tokens_per_layer`` (``vocab_size_per_layer_input`` x layers x that width),
      ``per_layer_model_projection`` (h -> layers x width) and its norm; in each layer
      ``per_layer_input_gate`` (h -> width), ``per_layer_projection`` (width -> h) and
      ``post_per_layer_input_norm``.
    - embed_tokens, final norm, lm_head only if not tied; the vision tower (``_gemma4_vision``) and
      the audio tower (``_gemma4_audio``) with their ``embed_vision`` / ``embed_audio`` projections.
    """
    h, n_layers, nh, hd = b.hidden, b.layers, b.heads, b.head_dim
    nkv = b.kv_heads
    top = "model.language_model" if b.cfg is not b.top else "model"
    bias = b.flag("attention_bias", False)
    k_eq_v = b.flag("attention_k_eq_v", False)

    types = b.get("layer_types")
    if types is None:
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n_layers)]
        b.note("layer_types absent: transformers Gemma4 default, every 6th layer global")
    types = list(types)
    if len(types) != n_layers or any(t not in ("sliding_attention", "full_attention") for t in types):
        raise ConfigError(f"gemma4 layer_types does not list {n_layers} sliding/full attention layers")
    if types[-1] != "full_attention":
        types[-1] = "full_attention"  # Gemma4TextConfig.__post_init__ forces the last layer global

    per_layer = b.get("per_layer_config")
    overrides: dict[int, dict] = {}
    if per_layer is not None:
        if not isinstance(per_layer, dict):
            raise ConfigError("gemma4 per_layer_config is not an object keyed by layer index")
        overrides = {int(k): v for k, v in per_layer.items() if isinstance(v, dict)}
        global_hd, global_kv = hd, nkv
    else:
        if "global_head_dim" not in b.cfg:
            global_hd = _GEMMA4_GLOBAL_HEAD_DIM
            b.note(f"global_head_dim absent: transformers Gemma4TextConfig default {global_hd}")
        else:
            global_hd = b.int("global_head_dim") if b.cfg["global_head_dim"] else hd
        global_kv = nkv
        if k_eq_v:
            global_kv = b.int("num_global_key_value_heads", default=nkv,
                              why="attention_k_eq_v without it: global layers use num_key_value_heads")

    shared = b.int("num_kv_shared_layers", default=0)
    first_shared = n_layers - shared
    double_wide = b.flag("use_double_wide_mlp", False)
    inter = b.int("intermediate_size")
    ple = b.int("hidden_size_per_layer_input", default=256,
                why="transformers Gemma4TextConfig default; released configs set it")
    moe = b.flag("enable_moe_block", False)
    if moe:
        experts = b.int("num_experts")
        moe_inter = b.int("moe_intermediate_size", "expert_intermediate_size")

    b.embed(f"{top}.embed_tokens")
    if ple:
        ple_vocab = b.int("vocab_size_per_layer_input", default=262_144,
                          why="transformers Gemma4TextConfig default")
        b.add("embed", f"{top}.embed_tokens_per_layer", ple_vocab, n_layers * ple)
        b.linear("other", f"{top}.per_layer_model_projection", h, n_layers * ple, quantizable=False)
        b.add("norms", f"{top}.per_layer_projection_norm", ple)
    shared_kv = 0
    for i, layer_type in enumerate(types):
        p = f"{top}.layers.{i}"
        full = layer_type == "full_attention"
        layer_hd, layer_kv = (global_hd, global_kv) if full else (hd, nkv)
        if i in overrides:
            layer_hd = int(overrides[i].get("head_dim") or layer_hd)
            layer_kv = int(overrides[i].get("num_key_value_heads") or layer_kv)
        a = f"{p}.self_attn"
        b.linear("attention", f"{a}.q_proj", h, nh * layer_hd, bias=bias)
        b.linear("attention", f"{a}.k_proj", h, layer_kv * layer_hd, bias=bias)
        if not (k_eq_v and full):
            b.linear("attention", f"{a}.v_proj", h, layer_kv * layer_hd, bias=bias)
        b.linear("attention", f"{a}.o_proj", nh * layer_hd, h, bias=bias)
        b.add("norms", f"{a}.q_norm", layer_hd)
        b.add("norms", f"{a}.k_norm", layer_hd)
        if i >= first_shared:
            shared_kv += layer_kv * layer_hd * h * (1 if k_eq_v and full else 2) + layer_hd
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            b.norm(f"{p}.{name}", h)
        b.add("other", f"{p}.layer_scalar", 1)
        _gated_mlp(b, f"{p}.mlp", inter * (2 if double_wide and i >= first_shared else 1))
        if ple:
            b.linear("other", f"{p}.per_layer_input_gate", h, ple)
            b.linear("other", f"{p}.per_layer_projection", ple, h)
            b.norm(f"{p}.post_per_layer_input_norm", h)
        if moe:
            b.linear("router", f"{p}.router.proj", h, experts, quantizable=False)
            b.add("router", f"{p}.router.scale", h)
            b.add("router", f"{p}.router.per_expert_scale", experts)
            b.linear("experts", f"{p}.experts.gate_up_proj", h, 2 * moe_inter, count=experts)
            b.linear("experts", f"{p}.experts.down_proj", moe_inter, h, count=experts)
            for name in ("post_feedforward_layernorm_1", "post_feedforward_layernorm_2",
                         "pre_feedforward_layernorm_2"):
                b.norm(f"{p}.{name}", h)
    b.norm(f"{top}.norm", h)
    b.lm_head()
    if shared_kv:
        b.note(f"the {shared} kv-shared layers' k_proj/v_proj/k_norm ({shared_kv:,} parameters) are counted: "
               "the published checkpoints store them, though transformers does not load them")
    _gemma4_vision(b)
    _gemma4_audio(b)


def _tower_config(b: _Builder, key: str, model_type: str, ints: tuple[str, ...],
                  what: str) -> dict | None:
    """The ``vision_config`` / ``audio_config`` of a gemma4 config if its tower can be counted exactly."""
    tc = b.top.get(key)
    if tc is None:
        if b.cfg is not b.top and key not in b.top:
            b.note(f"gemma4 config without {key}: {what} not counted")
        return None
    if not isinstance(tc, dict):
        raise ConfigError(f"gemma4 {key} is not an object")
    if tc.get("model_type", model_type) != model_type:
        b.note(f"{key} model_type {tc.get('model_type')!r} is not {model_type}: {what} not counted")
        return None
    missing = [name for name in ints if not isinstance(tc.get(name), int) or isinstance(tc.get(name), bool)]
    if missing:
        b.note(f"{key} lacks {', '.join(missing)}: {what} not counted")
        return None
    return tc


def _tower_flag(b: _Builder, tc: dict, key: str, name: str, default: bool) -> bool:
    value = tc.get(name)
    if value is None:
        b.note(f"{key}.{name} absent: transformers default {default}")
        return default
    return bool(value)


def _clippable(b: _Builder, component: str, module: str, n_in: int, n_out: int, clipped: bool) -> None:
    """``Gemma4ClippableLinear``: a bias-free Linear plus, with ``use_clipped_linears``, four scalar
    buffers (input_min/max, output_min/max) that the checkpoints store."""
    b.add(component, f"{module}.linear", n_out, n_in)
    if clipped:
        b.add(component, f"{module}.clip_bounds", 4)


def _gemma4_vision(b: _Builder) -> None:
    """``Gemma4VisionModel`` + ``embed_vision`` (modeling_gemma4.py).

    patch_embedder.input_proj (3 x patch^2 -> h), position_embedding_table (2 x
    ``position_embedding_size`` x h); per encoder layer q/k/v/o (``Gemma4ClippableLinear``, heads x
    head_dim), q_norm / k_norm (head_dim), 4 RMSNorms, GeGLU MLP gate/up/down (clippable);
    ``std_bias`` / ``std_scale`` (h each) when ``standardize``; the pooler has no weights;
    embed_vision.embedding_projection (h -> text h, no bias; its pre-projection norm has no weight).
    """
    tc = _tower_config(b, "vision_config", "gemma4_vision",
                       ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
                        "num_key_value_heads", "head_dim", "patch_size", "position_embedding_size"),
                       "vision tower")
    if tc is None:
        return
    vh, vl, vi = tc["hidden_size"], tc["num_hidden_layers"], tc["intermediate_size"]
    vnh, vkv, vhd = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
    patch = tc["patch_size"]
    clipped = _tower_flag(b, tc, "vision_config", "use_clipped_linears", False)
    standardize = _tower_flag(b, tc, "vision_config", "standardize", False)
    v = "model.vision_tower"
    b.add("vision", f"{v}.patch_embedder.input_proj", vh, 3 * patch * patch)
    b.add("vision", f"{v}.patch_embedder.position_embedding_table", 2, tc["position_embedding_size"], vh)
    for i in range(vl):
        p = f"{v}.encoder.layers.{i}"
        for name, n_in, n_out in (("q_proj", vh, vnh * vhd), ("k_proj", vh, vkv * vhd),
                                  ("v_proj", vh, vkv * vhd), ("o_proj", vnh * vhd, vh)):
            _clippable(b, "vision", f"{p}.self_attn.{name}", n_in, n_out, clipped)
        b.add("vision", f"{p}.self_attn.q_norm", vhd)
        b.add("vision", f"{p}.self_attn.k_norm", vhd)
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            b.add("vision", f"{p}.{name}", vh)
        for name, n_in, n_out in (("gate_proj", vh, vi), ("up_proj", vh, vi), ("down_proj", vi, vh)):
            _clippable(b, "vision", f"{p}.mlp.{name}", n_in, n_out, clipped)
    if standardize:
        b.add("vision", f"{v}.std_bias", vh)
        b.add("vision", f"{v}.std_scale", vh)
    b.add("vision", "model.embed_vision.embedding_projection", b.hidden, vh)


def _gemma4_audio(b: _Builder) -> None:
    """``Gemma4AudioModel`` + ``embed_audio`` (modeling_gemma4.py), a conformer on 128-bin mel frames.

    subsample_conv_projection: two bias-free 3x3 Conv2d (1 -> c0 -> c1 channels,
    c = ``subsampling_conv_channels``) each with a bias-free LayerNorm, input_proj_linear
    ((c0 // 4) x c1 -> h); per layer two feed-forward blocks (pre/post RMSNorm, h -> 4h -> h
    clippable linears), self-attention (q/k/v/post clippable h x h, relative_k_proj h x h,
    per_dim_scale of h / heads), a light conv block (pre RMSNorm, linear_start h -> 2h, depthwise
    conv1d h x 1 x ``conv_kernel_size``, conv RMSNorm, linear_end h -> h) and 3 RMSNorms;
    output_proj (h -> ``output_proj_dims``, with bias); embed_audio.embedding_projection
    (``output_proj_dims`` -> text h, no bias).
    """
    tc = _tower_config(b, "audio_config", "gemma4_audio",
                       ("hidden_size", "num_hidden_layers", "num_attention_heads", "conv_kernel_size",
                        "output_proj_dims"),
                       "audio tower")
    if tc is None:
        return
    channels = tc.get("subsampling_conv_channels")
    if not (isinstance(channels, (list, tuple)) and len(channels) == 2
            and all(isinstance(c, int) and not isinstance(c, bool) for c in channels)):
        b.note("audio_config lacks subsampling_conv_channels [c0, c1]: audio tower not counted")
        return
    ah, al, anh = tc["hidden_size"], tc["num_hidden_layers"], tc["num_attention_heads"]
    kernel, out_dims = tc["conv_kernel_size"], tc["output_proj_dims"]
    c0, c1 = channels
    clipped = _tower_flag(b, tc, "audio_config", "use_clipped_linears", True)
    a = "model.audio_tower"
    s = f"{a}.subsample_conv_projection"
    b.add("audio", f"{s}.layer0.conv", c0, 1, 3, 3)
    b.add("audio", f"{s}.layer0.norm", c0)
    b.add("audio", f"{s}.layer1.conv", c1, c0, 3, 3)
    b.add("audio", f"{s}.layer1.norm", c1)
    b.add("audio", f"{s}.input_proj_linear", ah, (c0 // 4) * c1)
    for i in range(al):
        p = f"{a}.layers.{i}"
        for ff in ("feed_forward1", "feed_forward2"):
            b.add("audio", f"{p}.{ff}.pre_layer_norm", ah)
            _clippable(b, "audio", f"{p}.{ff}.ffw_layer_1", ah, 4 * ah, clipped)
            _clippable(b, "audio", f"{p}.{ff}.ffw_layer_2", 4 * ah, ah, clipped)
            b.add("audio", f"{p}.{ff}.post_layer_norm", ah)
        for name in ("q_proj", "k_proj", "v_proj", "post"):
            _clippable(b, "audio", f"{p}.self_attn.{name}", ah, ah, clipped)
        b.add("audio", f"{p}.self_attn.relative_k_proj", ah, ah)
        b.add("audio", f"{p}.self_attn.per_dim_scale", ah // anh)
        b.add("audio", f"{p}.lconv1d.pre_layer_norm", ah)
        _clippable(b, "audio", f"{p}.lconv1d.linear_start", ah, 2 * ah, clipped)
        b.add("audio", f"{p}.lconv1d.depthwise_conv1d", ah, 1, kernel)
        b.add("audio", f"{p}.lconv1d.conv_norm", ah)
        _clippable(b, "audio", f"{p}.lconv1d.linear_end", ah, ah, clipped)
        for name in ("norm_pre_attn", "norm_post_attn", "norm_out"):
            b.add("audio", f"{p}.{name}", ah)
    b.add("audio", f"{a}.output_proj", out_dims, ah)
    b.add("audio", f"{a}.output_proj.bias", out_dims)
    b.add("audio", "model.embed_audio.embedding_projection", b.hidden, out_dims)


# ------------------------------------------------------------------------------------------------
# Vision towers of multimodal configs


def _vision(b: _Builder) -> None:
    vc = b.top.get("vision_config")
    if not isinstance(vc, dict):
        if b.cfg is not b.top:
            b.note("multimodal config without vision_config: vision tower not counted")
        return
    try:
        vh = int(vc["hidden_size"])
        vl = int(vc["num_hidden_layers"])
        vi = int(vc["intermediate_size"])
        patch = int(vc["patch_size"])
        image = int(vc["image_size"])
        chans = int(vc.get("num_channels", 3))
    except (KeyError, TypeError, ValueError):
        b.note("vision_config lacks hidden/layer/intermediate/patch/image sizes: vision tower not counted")
        return
    th = b.hidden
    vt = vc.get("model_type", "")
    grid = (image // patch) ** 2
    # Pre-LN ViT block: q/k/v/o with biases, fc1/fc2 with biases, two LayerNorms (weight + bias).
    per_layer = 4 * (vh * vh + vh) + 2 * vh * vi + vi + vh + 4 * vh
    if vt == "siglip_vision_model":
        # transformers modeling_siglip.py: Conv2d patch embedding (bias), learned position embedding per
        # patch, encoder, post_layernorm; gemma3's projector (modeling_gemma3.py
        # Gemma3MultiModalProjector): mm_input_projection_weight (vision h x text h) + mm_soft_emb_norm.
        b.add("vision", "vision_tower.patch_embedding", vh, chans, patch, patch)
        b.add("vision", "vision_tower.patch_embedding.bias", vh)
        b.add("vision", "vision_tower.position_embedding", grid, vh)
        b.add("vision", "vision_tower.layers", per_layer, count=vl)
        b.add("vision", "vision_tower.post_layernorm", 2 * vh)
        if vc.get("vision_use_head"):
            b.note("siglip vision_use_head: attention-pooling head not counted")
        if b.model_type == "gemma3":
            b.add("vision", "multi_modal_projector.mm_input_projection_weight", vh, th)
            b.add("vision", "multi_modal_projector.mm_soft_emb_norm", vh)
        else:
            b.note("vision projector of this family not counted")
    elif vt == "llama4_vision_model":
        # transformers modeling_llama4.py Llama4VisionModel: unfold patch embedding (bias-free Linear
        # C*p*p -> h), class embedding, positional embedding (grid + 1), layernorm_pre/post, encoder,
        # pixel-shuffle adapter MLP (h / ratio^2 -> projector_input_dim -> projector_output_dim, no
        # bias), multi_modal_projector.linear_1 (vision_output_dim -> text h, no bias).
        ratio = float(vc.get("pixel_shuffle_ratio", 0.5))
        b.add("vision", "vision_model.patch_embedding", vh, chans * patch * patch)
        b.add("vision", "vision_model.class_embedding", vh)
        b.add("vision", "vision_model.positional_embedding_vlm", grid + 1, vh)
        b.add("vision", "vision_model.layernorm_pre_post", 4 * vh)
        b.add("vision", "vision_model.model.layers", per_layer, count=vl)
        p_in = int(vc.get("projector_input_dim", vh))
        p_out = int(vc.get("projector_output_dim", p_in))
        b.add("vision", "vision_model.vision_adapter.mlp.fc1", p_in, int(vh / (ratio * ratio)))
        b.add("vision", "vision_model.vision_adapter.mlp.fc2", p_out, p_in)
        b.add("vision", "multi_modal_projector.linear_1", th, int(vc.get("vision_output_dim", p_out)))
    else:
        b.add("vision", "vision_tower.patch_embedding", vh, chans * patch * patch + 1)
        b.add("vision", "vision_tower.position_embedding", grid, vh)
        b.add("vision", "vision_tower.layers", per_layer, count=vl)
        b.add("vision", "multi_modal_projector", th, vh)
        b.note(f"vision tower ({vt or 'unknown type'}) counted as a generic pre-LN ViT plus one "
               "projection to the text width (approximate)")


# ------------------------------------------------------------------------------------------------
# Registry


_FAMILIES: dict[str, Callable[[_Builder], None]] = {
    **{t: _llama_like for t in (
        "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "gemma",
        "gemma2", "gemma3", "gemma3_text", "cohere", "cohere2", "olmo2", "glm4_moe", "granite")},
    "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "kimi_k2": _deepseek,
    "llama4": _llama4, "llama4_text": _llama4,
    "gpt_oss": _gpt_oss,
    "gpt2": _gpt2, "gptj": _gptj, "falcon": _falcon,
    "mamba": _mamba, "mamba2": _mamba2, "jamba": _jamba,
    "qwen3_next": _qwen3_next,
    "gemma4": _gemma4, "gemma4_text": _gemma4,
}


def _build(config: dict) -> _Builder:
    b = _Builder(config)
    fn = _FAMILIES.get(b.model_type) or _FAMILIES.get(b.text_type)
    if fn is None:
        b.note(f"model_type {b.model_type or '(none)'!r} has no parameter rule of its own: counted "
               "with the llama-like rule (gated MLP, q/k/v/o, 2 RMSNorms per layer)")
        fn = _llama_like
    try:
        fn(b)
    except ConfigError:
        raise
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
        raise ConfigError(f"cannot count parameters of this {b.model_type or 'unknown'} config: {exc}") from exc
    if fn not in (_llama4, _gemma4) and b.cfg is not b.top:
        _vision(b)
    return b


def count_params(config: dict) -> ParamCount:
    """Parameter count of the model a ``config.json`` dict describes (see module docstring)."""
    b = _build(config)
    by = dict.fromkeys(COMPONENTS, 0)
    for t in b.tensors:
        by[t.component] += t.numel
    total = sum(by.values())
    if total <= 0:
        raise ConfigError("config describes a model with no parameters")
    return ParamCount(total=total, by_component=by, assumptions=tuple(b.notes))


# ------------------------------------------------------------------------------------------------
# Bytes


def _checkpoint_dtype(config: dict, quantized: bool = False) -> tuple[str, int, str | None]:
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
    b = _build(config)
    if count is None:
        count = count_params(config)
    q = config.get("quantization_config")
    if not isinstance(q, dict):
        q = (config.get("text_config") or {}).get("quantization_config") if isinstance(
            config.get("text_config"), dict) else None
    quantized = isinstance(q, dict) and bool(q.get("quant_method"))
    dname, dbytes, dnote = _checkpoint_dtype(config, quantized)
    suffix = f" ({dnote})" if dnote else ""
    # e_score_correction_bias is float32 in DeepSeek-V3's checkpoint: the Hub's safetensors metadata
    # gives F32 41,555,600 = 41,540,496 block scales + 256 x 59 biases (assumed alike for glm4_moe).
    fp32_el = sum(t.numel for t in b.tensors if t.fp32)
    fp32_extra = fp32_el * max(4 - dbytes, 0)
    if not quantized:
        extra = f" + {fp32_el:,} float32 router biases" if fp32_extra else ""
        return (count.total * dbytes + fp32_extra,
                f"{count.total:,} parameters x {dbytes} B ({dname}){extra}{suffix}")
    assert isinstance(q, dict)

    method = str(q.get("quant_method")).lower()
    skip = [p for p in (q.get("modules_to_not_convert") or q.get("ignore") or []) if isinstance(p, str)]
    # Parameters the config does not describe tensor by tensor (none today) stay in the checkpoint dtype.
    listed = sum(t.numel for t in b.tensors)
    rest = max(count.total - listed, 0) * dbytes

    if method == "fp8":
        block = q.get("weight_block_size")
        quant_el = 0
        scales = 0
        for t in b.tensors:
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
        quant_el = sum(t.numel for t in b.tensors
                       if t.linear and t.component == "experts" and not _excluded(t.module, skip))
        other = listed - quant_el
        # 4-bit values (n/2 bytes) + one e8m0 scale byte per 32 values along the input dimension.
        q_bytes = sum(t.count * t.shape[0] * (math.ceil(t.shape[1] / 32) * 17)
                      for t in b.tensors if t.linear and t.component == "experts"
                      and not _excluded(t.module, skip))
        total = q_bytes + other * dbytes + rest + fp32_extra
        return total, (f"mxfp4: {quant_el:,} expert weights x 4.25 bits (e2m1 + e8m0 scale per 32); "
                       f"{other:,} other parameters x {dbytes} B ({dname}){suffix}")

    bits = q.get("bits") or q.get("w_bit")
    if isinstance(bits, (int, float)) and not isinstance(bits, bool) and 0 < bits <= 16:
        quant_el = sum(t.numel for t in b.tensors if t.linear and not _excluded(t.module, skip))
        other = listed - quant_el
        total = math.ceil(quant_el * bits / 8) + other * dbytes + rest + fp32_extra
        return total, (f"{method}: {quant_el:,} linear weights x {bits} bits (scales/zeros not counted); "
                       f"{other:,} other parameters x {dbytes} B ({dname}){suffix}")
    return count.total * dbytes, (f"quant_method {method!r} not modelled: {count.total:,} parameters x "
                                  f"{dbytes} B ({dname}){suffix}")
