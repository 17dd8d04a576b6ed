"""Mistral's native ``params.json``, read as a transformers-style config."""

from __future__ import annotations

from typing import Any

from kvplan.errors import ConfigError

def config_from_mistral_params(params: dict, where: str, notes: list[str]) -> dict:
    """A transformers-style config for Mistral's native ``params.json`` (dense and MoE decoders).

    Fields: dim, n_layers, n_heads, n_kv_heads, head_dim, hidden_dim, vocab_size, norm_eps,
    rope_theta, sliding_window, max_seq_len / max_position_embeddings, moe {num_experts,
    num_experts_per_tok}. Anything else that changes the cache (an MLA latent, a Mamba mixer) is
    refused: such repos also ship a config.json, which kvplan reads first.
    """
    missing = [k for k in ("dim", "n_layers", "n_heads")
               if not (isinstance(params.get(k), int) and not isinstance(params[k], bool) and params[k] > 0)]
    if missing:
        raise ConfigError(f"{where}: not a Mistral params.json kvplan can read (no positive integer {', '.join(missing)})")
    unknown = [k for k in ("kv_lora_rank", "q_lora_rank", "mla", "ssm", "mamba", "model_type") if k in params]
    if unknown:
        raise ConfigError(f"{where}: params.json with {', '.join(unknown)}: kvplan reads params.json only for "
                          "dense and mixture-of-experts decoders; pass a config.json")
    config: dict[str, Any] = {
        "model_type": "mistral",
        "hidden_size": params["dim"],
        "num_hidden_layers": params["n_layers"],
        "num_attention_heads": params["n_heads"],
        "num_key_value_heads": params.get("n_kv_heads") or params["n_heads"],
        "head_dim": params.get("head_dim") or params["dim"] // params["n_heads"],
        "intermediate_size": params.get("hidden_dim"),
        "vocab_size": params.get("vocab_size"),
        "rms_norm_eps": params.get("norm_eps", 1e-5),
        "rope_theta": params.get("rope_theta", 10000.0),
        "sliding_window": params.get("sliding_window"),
        "tie_word_embeddings": bool(params.get("tied_embeddings", False)),
        "torch_dtype": "bfloat16",
    }
    positions = params.get("max_position_embeddings") or params.get("max_seq_len")
    if positions:
        config["max_position_embeddings"] = positions
    else:
        notes.append(f"{where} declares no max_seq_len: max_position_embeddings unknown")
    moe = params.get("moe")
    if isinstance(moe, dict):
        config["model_type"] = "mixtral"
        config["num_local_experts"] = moe.get("num_experts")
        config["num_experts_per_tok"] = moe.get("num_experts_per_tok")
    notes.append(f"read from {where} (Mistral's native format: no config.json); dtype assumed bfloat16")
    if isinstance(params.get("vision_encoder"), dict):
        notes.append(f"{where}: the vision encoder is not counted; the text decoder is read")
    return {k: v for k, v in config.items() if v is not None}
