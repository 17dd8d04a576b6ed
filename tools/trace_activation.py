"""Which tensors are alive at a transformers prefill's activation peak: the derivation aid behind
kvplan/engines/hf/activation.py (run by hand; not part of kvplan).

    python tools/trace_activation.py CONFIG.json DEVICE BATCH TOKENS [LAYERS]

Builds the model from CONFIG (random weights, bf16, SDPA where the model has it) on DEVICE, runs
``forward(input_ids, use_cache=True, logits_to_keep=1)`` under a TorchDispatchMode that follows every storage an op
returns, and prints one JSON line: the live bytes' peak, the same less the cache's storage (what ``kvplan verify
--activation`` calls the activation peak), the op at the peak, on CUDA ``max_memory_allocated``'s growth (which
also holds workspaces no op returns: the cuBLAS workspace of a process's first product), and the storages alive at
the peak grouped by dtype, shape and the op that made them, largest first (``kvplan.verify.live``). LAYERS
overrides num_hidden_layers.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main(argv: list[str]) -> int:
    import torch
    import transformers as tf

    from kvplan.verify.activation import cache_bytes
    from kvplan.verify.live import trace

    path, dev, batch, tokens = argv[0], argv[1], int(argv[2]), int(argv[3])
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data.pop("quantization_config", None)
    if len(argv) > 4:
        data["num_hidden_layers"] = int(argv[4])
        data.pop("layer_types", None)
    cfg = tf.AutoConfig.for_model(data.pop("model_type"), **data)
    torch.manual_seed(0)
    with torch.device(dev):
        try:
            net = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.bfloat16).eval()
        except ValueError:  # no SDPA path (gemma2: logit softcapping)
            net = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.bfloat16).eval()
    vocab = int(getattr(cfg, "vocab_size", None) or getattr(cfg.get_text_config(), "vocab_size", 1000))
    ids = torch.randint(0, min(vocab, 1000), (batch, tokens), device=dev)
    cuda = dev.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    with torch.inference_mode():
        out, peak = trace(torch, lambda: net(input_ids=ids, use_cache=True, logits_to_keep=1),
                          (*net.parameters(), *net.buffers(), ids), record=True)
    cache = getattr(out, "cache", None)
    cache = cache if cache is not None else out.past_key_values
    storage = cache_bytes(torch, cache)[1]
    result: dict[str, Any] = {
        "config": path, "device": dev, "batch": batch, "tokens": tokens, "transformers": tf.__version__,
        "torch": torch.__version__, "live_peak": peak.bytes, "cache_storage": storage,
        "live_peak_less_cache": peak.bytes - storage, "peak_op": peak.op}
    if cuda:
        result["cuda_peak_growth"] = torch.cuda.max_memory_allocated() - base
    result["at_peak"] = [list(row) for row in peak.held]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
