"""GPT-2, GPT-J, Phi-1/1.5/2, Falcon and GPT-BigCode (StarCoder): the multi-head and multi-query classics."""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.llama import generic_layers
from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.sources.families.tensors import Counter
from kvplan.spec import FullAttention, LayerSpec


def gpt2_params(b: Counter) -> None:
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


def gptj_params(b: Counter) -> None:
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


def phi_params(b: Counter) -> None:
    """phi (Phi-1, Phi-1.5, Phi-2): transformers ``modeling_phi.py``.

    Parallel attention and MLP after one LayerNorm (weight + bias) per layer; q/k/v_proj and ``dense``
    (the output projection) with biases; optional q/k LayerNorms over head_dim (``qk_layernorm``); a
    non-gated MLP fc1/fc2 with biases; ``final_layernorm``; lm_head with a bias. Partial rotary
    (``partial_rotary_factor``) changes no tensor and no cached K/V (keys are cached whole).
    """
    h, n_layers, nh, nkv, hd = b.hidden, b.layers, b.heads, b.kv_heads, b.head_dim
    inner = b.int("intermediate_size", "n_inner", default=4 * h)
    qk_norm = b.flag("qk_layernorm", False)
    b.embed()
    for i in range(n_layers):
        p = f"model.layers.{i}"
        b.norm(f"{p}.input_layernorm", h, bias=True)
        b.linear("attention", f"{p}.self_attn.q_proj", h, nh * hd, bias=True)
        b.linear("attention", f"{p}.self_attn.k_proj", h, nkv * hd, bias=True)
        b.linear("attention", f"{p}.self_attn.v_proj", h, nkv * hd, bias=True)
        b.linear("attention", f"{p}.self_attn.dense", nh * hd, h, bias=True)
        if qk_norm:
            b.norm(f"{p}.self_attn.q_layernorm", hd, bias=True)
            b.norm(f"{p}.self_attn.k_layernorm", hd, bias=True)
        b.linear("mlp", f"{p}.mlp.fc1", h, inner, bias=True)
        b.linear("mlp", f"{p}.mlp.fc2", inner, h, bias=True)
    b.norm("model.final_layernorm", h, bias=True)
    b.lm_head(bias=True)


def falcon_layers(reader: ConfigReader) -> list[LayerSpec]:
    # modeling_falcon.py FalconAttention: num_kv_heads = config.num_kv_heads if
    # (new_decoder_architecture or not multi_query) else 1; FalconConfig defaults multi_query=True,
    # num_kv_heads (older configs: n_head_kv) to num_attention_heads; head_dim = hidden // heads.
    n = reader.num_layers()
    heads = reader.num_heads()
    new_arch = reader.bool_field("new_decoder_architecture", False)
    multi_query = reader.bool_field("multi_query", True)
    hidden = reader.hidden_size()
    assert hidden is not None
    if hidden % heads:
        raise ConfigError(f"hidden_size={hidden} is not divisible by num_attention_heads={heads}")
    if new_arch or not multi_query:
        found = reader.raw("num_kv_heads", "n_head_kv", "num_key_value_heads")
        kv = reader.int_of(found[0], found[1]) if found else heads
        if found is None and new_arch:
            reader.note(f"falcon new_decoder_architecture without num_kv_heads: assumed {heads} (MHA)")
        if heads % kv:
            name = found[0] if found else "num_kv_heads"
            raise ConfigError(f"num_attention_heads={heads} is not a multiple of {name}={kv}")
    else:
        kv = 1  # legacy multi-query Falcon (7B): one K/V head shared by all query heads
    return [FullAttention(kv_heads=kv, head_dim=hidden // heads)] * n


def gpt_bigcode_layers(reader: ConfigReader) -> list[LayerSpec]:
    # GPTBigCodeConfig (StarCoder, SantaCoder): multi_query=True (default) caches one K/V head.
    n = reader.num_layers()
    heads = reader.num_heads()
    hd = reader.head_dim()
    kv = 1 if reader.bool_field("multi_query", True) else heads
    return [FullAttention(kv_heads=kv, head_dim=hd)] * n


def falcon_params(b: Counter) -> None:
    """falcon: transformers ``modeling_falcon.py``.

    query_key_value: h -> (heads + 2 x kv_heads) x head_dim with ``new_decoder_architecture``,
    h -> h + 2 x head_dim with ``multi_query``, else 3h; dense h -> h; MLP dense_h_to_4h /
    dense_4h_to_h (``ffn_hidden_size``, default 4h); biases iff ``bias``. LayerNorms (weight + bias):
    new architecture ln_attn + ln_mlp (``num_ln_in_parallel_attn``, default 2); otherwise
    input_layernorm, plus post_attention_layernorm unless ``parallel_attn``. lm_head tied by default.
    """
    h, n_layers, nh = b.hidden, b.layers, b.heads
    cached = falcon_layers(b.reader)[0]  # the KV heads and head size the cache rule reads
    assert isinstance(cached, FullAttention)
    nkv, hd = cached.kv_heads, cached.head_dim
    bias = b.flag("bias", False)
    new_arch = b.flag("new_decoder_architecture", False)
    ffn = b.int("ffn_hidden_size", default=4 * h)
    if new_arch:
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


# GPT2Config: n_layer / n_head / n_embd / n_positions; GPTJConfig: the same aliases.
register("gpt2", layers=generic_layers, params=gpt2_params, mha=True, tied_by_default=True)
register("gptj", layers=generic_layers, params=gptj_params, mha=True)
# PhiConfig: num_key_value_heads defaults to num_attention_heads (MHA); every layer caches full K/V.
register("phi", layers=generic_layers, params=phi_params, mha=True)
register("falcon", layers=falcon_layers, params=falcon_params, tied_by_default=True)
register("RefinedWeb", "RefinedWebModel", layers=falcon_layers)
register("gpt_bigcode", layers=gpt_bigcode_layers, tied_by_default=True)
