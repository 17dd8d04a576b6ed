"""transformers' own numbers for the configs added for issue 21's "cannot load" logs -> tests/data/hf_oracle_configs.json.

Run from the repository root with transformers and torch installed:
    python tools/transformers_oracle_configs.py
Nothing of kvplan is imported: the numbers are transformers' own. Each model is built from its config with
AutoModelForImageTextToText (multimodal wrappers) or AutoModel (encoders) on the meta device in bf16.
"""
import json, sys, torch, transformers
from transformers import AutoConfig, AutoModel, AutoModelForImageTextToText, DynamicCache

CASES = {  # name: (folder, auto class)
    "Qwen__Qwen3.5-9B": ("hf_configs_transcribed", AutoModelForImageTextToText),
    "Qwen__Qwen3.5-27B": ("hf_configs_transcribed", AutoModelForImageTextToText),
    "Qwen__Qwen3.6-35B-A3B": ("hf_configs_transcribed", AutoModelForImageTextToText),
    "google__embeddinggemma-300m": ("hf_configs_transcribed", AutoModel),  # Gemma3TextModel: an encoder, no lm_head
}
out = {}
for name, (sub, auto) in CASES.items():
    raw = dict(json.load(open(f"tests/data/{sub}/{name}.json")))
    c = AutoConfig.for_model(raw.pop("model_type"), **raw)
    with torch.device("meta"):
        m = auto.from_config(c, dtype=torch.bfloat16)
    params = sum({id(p): p.numel() for p in m.parameters()}.values())
    text = c.get_text_config()
    cache = DynamicCache(config=text)
    entry = {"config": f"{sub}/{name}.json", "model_class": type(m).__name__, "params": params,
             "cache_layer_classes": [type(l).__name__ for l in cache.layers]}
    # the per-sequence state of a linear-attention layer, as the modeling file allocates it
    decoder = getattr(getattr(m, "model", None), "language_model", None)
    mixer = next((l.linear_attn for l in decoder.layers if hasattr(l, "linear_attn")), None) if decoder else None
    if mixer is not None:
        entry["linear_attention_state"] = {
            "conv_state": [mixer.conv_dim, mixer.conv_kernel_size],
            "recurrent_state": [mixer.num_v_heads, mixer.head_k_dim, mixer.head_v_dim]}
    out[name] = entry
    print(name, json.dumps(entry)[:300], file=sys.stderr)
json.dump({"about": ("What transformers " + transformers.__version__ + " (torch " + torch.__version__ + ") itself computed "
                     "for the configs named, built on the meta device in bf16: params = distinct parameters' numel "
                     "(buffers excluded; no MTP layers, which transformers does not build); cache_layer_classes = "
                     "DynamicCache(config=text config).layers; linear_attention_state = the conv and recurrent "
                     "state sizes of the first linear-attention mixer (per sequence). Produced by "
                     "tools/transformers_oracle_configs.py."),
           "models": out}, open("tests/data/hf_oracle_configs.json", "w"), indent=1)
