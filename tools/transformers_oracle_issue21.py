"""transformers' own numbers for the issue-21 configs (meta device, bf16, batch 1) -> tests/data/hf_oracle_issue21.json.

Run from the repository root with transformers and torch installed (about a minute on 2 cores):
    python tools/transformers_oracle_issue21.py
Nothing of kvplan is imported: the numbers are transformers' own.
"""
import json, sys, torch, transformers
from transformers import AutoModelForCausalLM, DynamicCache

CASES = {
    "microsoft__phi-2": ("hf_configs", None),
    "ibm-granite__granite-3.3-8b-instruct": ("hf_configs", None),
    "moonshotai__Kimi-VL-A3B-Instruct": ("hf_configs", "text_config"),
    "google__gemma-7b": ("hf_configs_transcribed", None),
    "google__gemma-2-2b": ("hf_configs_transcribed", None),
}
out = {}
for name, (sub, part) in CASES.items():
    raw = json.load(open(f"tests/data/{sub}/{name}.json"))
    cfg = dict(raw[part]) if part else dict(raw)
    cfg.pop("auto_map", None)
    if part == "text_config":
        c = transformers.DeepseekV3Config(**cfg)
    else:
        mt = cfg.pop("model_type")
        c = transformers.AutoConfig.for_model(mt, **cfg)
    c.torch_dtype = torch.bfloat16
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(c, torch_dtype=torch.bfloat16)
    params = sum({id(p): p.numel() for p in m.parameters()}.values())
    entry = {"config": f"{sub}/{name}.json" + (f" [{part}]" if part else ""),
             "model_class": type(m).__name__, "params": params,
             "cache_layer_classes": [type(l).__name__ for l in DynamicCache(config=c).layers],
             "hf_cache_bytes": {}}
    for L in (1024, 8192):
        ids = torch.zeros((1, L), dtype=torch.long, device="meta")
        with torch.no_grad():
            o = m(input_ids=ids, use_cache=True)
        total = 0
        for layer in o.past_key_values.layers:
            for t in (layer.keys, layer.values):
                if t is not None and t.numel():
                    total += t.numel() * t.element_size()
        entry["hf_cache_bytes"][str(L)] = total
    out[name] = entry
    print(name, entry["params"], entry["hf_cache_bytes"], file=sys.stderr)
json.dump({"about": ("What transformers " + transformers.__version__ + " (torch " + torch.__version__ + ") itself computed for "
                     "the configs named, built with AutoModelForCausalLM.from_config on the meta device in bf16 "
                     "(Kimi-VL: its text_config as DeepseekV3Config, the text model only): params = distinct "
                     "parameters' numel (buffers excluded); cache_layer_classes = DynamicCache(config=...).layers; "
                     "hf_cache_bytes = bytes of every key/value tensor in the DynamicCache after one forward pass over "
                     "L tokens, batch 1. Produced by tools/transformers_oracle_issue21.py."),
           "models": out}, open("tests/data/hf_oracle_issue21.json", "w"), indent=1)
