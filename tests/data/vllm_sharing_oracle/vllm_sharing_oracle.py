"""Two requests with a common prefix through vLLM 0.33.0's own KVCacheManager (one sliding-window,
chunked or full group, CPU): how many blocks do both still reference at each context?

Provenance of the golden numbers in tests/test_sharing_plan.py (test_sliding_and_chunked_holdings_match_vllm).
Run with the venv /work/shared/tools/vllm_oracle.py's docstring installs (vllm==0.33.0 --no-deps, torch):
    python vllm_sharing_oracle.py sliding WINDOW PREFIX PROMPT UPTO
    python vllm_sharing_oracle.py chunked CHUNK PREFIX PROMPT UPTO
Synchronous scheduling: each decode step's output is processed before the next step is scheduled, so
``remove_skipped_blocks`` sees every token but the one being written (one token in flight).
Outputs recorded with it are in outputs.txt beside this file."""
import os, sys
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
import torch
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_cache_interface import (KVCacheConfig, KVCacheGroupSpec, SlidingWindowSpec,
                                        ChunkedLocalAttentionSpec, FullAttentionSpec)
from vllm.v1.request import Request

init_none_hash(sha256)
B = 16
kind, span = sys.argv[1], int(sys.argv[2])
prefix, prompt, upto = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if kind == "sliding":
    spec = SlidingWindowSpec(block_size=B, num_kv_heads=1, head_size=64, dtype=torch.bfloat16, sliding_window=span)
elif kind == "chunked":
    spec = ChunkedLocalAttentionSpec(block_size=B, num_kv_heads=1, head_size=64, dtype=torch.bfloat16,
                                     attention_chunk_size=span)
else:
    spec = FullAttentionSpec(block_size=B, num_kv_heads=1, head_size=64, dtype=torch.bfloat16)
cfg = KVCacheConfig(num_blocks=100000, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)])
mgr = KVCacheManager(kv_cache_config=cfg, max_model_len=1 << 16, scheduler_block_size=B, hash_block_size=B,
                     max_in_flight_tokens=1 << 16, enable_caching=True)
hasher = get_request_block_hasher(B, sha256)
common = list(range(1, prefix + 1))
reqs = []
for r in range(2):
    own = [100000 * (r + 1) + i for i in range(prompt - prefix)]
    reqs.append(Request(f"r{r}", common + own, SamplingParams(max_tokens=upto), None, block_hasher=hasher))


def ids(req):
    blocks = mgr.coordinator.single_type_managers[0].req_to_blocks.get(req.request_id, [])
    return {b.block_id for b in blocks if not b.is_null}


# admission one after the other (sync scheduling: each step's output processed before the next)
for req in reqs:
    hit, n_hit, *_ = mgr.get_computed_blocks(req)
    assert mgr.allocate_slots(req, prompt - n_hit, n_hit, hit) is not None
    req.num_computed_tokens = prompt
    req.append_output_token_ids(0)
    print(f"{req.request_id}: hit {n_hit} tokens, blocks {sorted(ids(req))}")
free0 = mgr.block_pool.get_num_free_blocks()
rows = []
context = prompt + 1
while context <= upto:
    for req in reqs:  # one decode step each; the token at position context - 1 is computed
        assert mgr.allocate_slots(req, 1) is not None
        req.num_computed_tokens += 1
        req.append_output_token_ids(0)
    context += 1
    a, b = ids(reqs[0]), ids(reqs[1])
    rows.append((reqs[0].num_computed_tokens, len(a), len(b), len(a & b)))
last = None
for r in rows:
    if last is None or r[3] != last[3]:
        print("computed %d: held %d + %d, common %d" % r)
    last = r
print("computed %d: held %d + %d, common %d" % rows[-1])
