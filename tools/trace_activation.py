"""Which tensors are alive at a transformers prefill's activation peak: the derivation aid behind
kvplan/engines/hf/activation.py (run by hand; not part of kvplan).

    python tools/trace_activation.py CONFIG.json DEVICE BATCH TOKENS [LAYERS]

Builds the model from CONFIG (random weights, bf16, SDPA where the model has it) on DEVICE, runs
``forward(input_ids, use_cache=True, logits_to_keep=1)`` under a TorchDispatchMode that follows every storage an op
returns, and prints one JSON line: the live bytes' peak, the same less the cache's storage (what ``kvplan verify
--activation`` calls the activation peak), the op at the peak, on CUDA ``max_memory_allocated``'s growth (which
also holds workspaces no op returns: the cuBLAS workspace of a process's first product), and the storages alive at
the peak grouped by dtype, shape and the op that made them, largest first. LAYERS overrides num_hidden_layers.
"""

from __future__ import annotations

import collections
import json
import sys
import weakref
from typing import Any


def main(argv: list[str]) -> int:
    import torch
    import transformers as tf
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

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
    before = {t.untyped_storage().data_ptr() for t in (*net.parameters(), *net.buffers(), ids)}

    class Live(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.held: dict[int, list[Any]] = {}  # storage address -> [bytes, live tensors, op, shape, dtype]
            self.seen: set[int] = set()
            self.now = self.peak = 0
            self.at_peak: list[tuple[int, str, tuple[int, ...], str]] = []
            self.op = ""

        def _gone(self, ptr: int, tid: int) -> None:
            self.seen.discard(tid)
            entry = self.held.get(ptr)
            if entry is not None:
                entry[1] -= 1
                if not entry[1]:
                    self.now -= entry[0]
                    del self.held[ptr]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor) or id(t) in self.seen:
                    continue
                storage = t.untyped_storage()
                ptr = storage.data_ptr()
                if ptr in before or not ptr:
                    continue
                entry = self.held.setdefault(ptr, [int(storage.nbytes()), 0, str(func), tuple(t.shape), str(t.dtype)])
                if not entry[1]:
                    self.now += entry[0]
                entry[1] += 1
                self.seen.add(id(t))
                weakref.finalize(t, self._gone, ptr, id(t))
            if self.now > self.peak:
                self.peak, self.op = self.now, str(func)
                self.at_peak = sorted(((e[0], e[4], e[3], e[2]) for e in self.held.values()), reverse=True)
            return out

    cuda = dev.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    mode = Live()
    with torch.inference_mode(), mode:
        out = net(input_ids=ids, use_cache=True, logits_to_keep=1)
    cache = getattr(out, "cache", None)
    cache = cache if cache is not None else out.past_key_values
    tensors = {id(x): x for layer in cache.layers for x in (layer.keys, layer.values) if x is not None}
    storage = sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors.values()}.values())
    result: dict[str, Any] = {
        "config": path, "device": dev, "batch": batch, "tokens": tokens, "transformers": tf.__version__,
        "torch": torch.__version__, "live_peak": mode.peak, "cache_storage": storage,
        "live_peak_less_cache": mode.peak - storage, "peak_op": mode.op}
    if cuda:
        result["cuda_peak_growth"] = torch.cuda.max_memory_allocated() - base
    count: collections.Counter[str] = collections.Counter()
    size: dict[str, int] = collections.defaultdict(int)
    for nbytes, dtype, shape, op in mode.at_peak:
        key = f"{dtype} {list(shape)} {op}"
        count[key] += 1
        size[key] += nbytes
    result["at_peak"] = [[size[k], n, k] for k, n in sorted(count.items(), key=lambda kv: -size[kv[0]])]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
