"""vLLM (V1) sharing: prefix caching stores whole blocks of a common prefix once.

Rules and where they come from (vllm-project/vllm):
- ``KVCacheManager.get_computed_blocks`` (``vllm/v1/core/kv_cache_manager.py``): a request reuses
  cached *full* blocks only, and at most ``num_tokens - 1`` of its prompt (the last token is always
  recomputed for its logits), so a common prefix of ``p`` tokens in a ``prompt``-token request is
  shared as ``floor(min(p, prompt - 1) / block)`` blocks; the partial block after it is the
  request's own. Reused blocks are referenced, not copied (``BlockPool.touch``: a ref count).
- Hybrid models (``HybridKVCacheCoordinator`` in ``vllm/v1/core/kv_cache_coordinator.py``): a hit
  is a multiple of the least common multiple of the groups' block sizes (no partial-block hits).
- Sliding-window layers (``SlidingWindowManager`` in ``single_type_kv_cache_manager.py``) free the
  blocks that left the window, so they share only the prefix blocks still inside it.
- Mamba state (``MambaManager``) is one state per sequence.
- EAGLE and MTP proposers (``use_eagle``): ``FullAttentionManager.find_longest_cache_hit`` drops the
  last matched block so the proposer's hidden states are recomputed: one block fewer is shared.
- Parallel sampling: ``ParallelSampling`` (``vllm/v1/engine/parallel_sampling.py``) fans a request
  with ``n > 1`` out into n child requests with the same prompt; the children share the prompt's
  full blocks through prefix caching, capped at ``prompt - 1`` tokens as above, so the block
  holding the prompt's last token is each child's own (V1 has no copy-on-write: each child
  recomputes that block).
- Beam search (``LLM.beam_search``, ``vllm/entrypoints/llm.py``; the OpenAI server likewise) sends
  every beam as a request whose prompt is the original prompt plus the beam's tokens; by then the
  prompt's full blocks are all within ``num_tokens - 1`` and hit the cache: the beams share
  ``floor(prompt / block)`` blocks. Tokens the beams have in common after the prompt are shared
  too in vLLM but depend on the search, so kvplan counts them per beam (an upper bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.engines.version import Version
from kvplan.engines.sharing import NOTHING_SHARED, SharedSpans, SharingRule, Workload, floor_to
from kvplan.engines.vllm.pool import DEFAULT_BLOCK_SIZE


_EAGLE_PROPOSERS = frozenset({"eagle", "eagle3", "mtp"})  # SpeculativeConfig.use_eagle()


@dataclass(frozen=True)
class PrefixCachingBlocks(SharingRule):
    """vLLM V1 prefix caching (on by default since V1): whole blocks, hit capped at prompt - 1."""

    title: str = "vLLM"
    align: int = 0
    """The lcm of the layout's block sizes (0: each group's own block)."""

    def check(self, workload: Workload) -> None:
        return None

    def bind(self, layout: CacheLayout) -> PrefixCachingBlocks:
        return replace(self, align=hit_alignment(layout))

    def spans(self, group: GroupRule, workload: Workload) -> SharedSpans:
        # padding slots share too: a pool block index holds a page of every slot of its group
        if group.kind in ("recurrent", "shared", "none"):
            return NOTHING_SHARED
        block = math.lcm(group.block_size or DEFAULT_BLOCK_SIZE, self.align or 1)
        hit = floor_to(workload.prompt_len - 1, block)  # get_computed_blocks: num_tokens - 1
        prefix = min(floor_to(workload.shared_prefix, block), hit)
        if workload.beam_width > 1:
            # each beam's request is the prompt plus its tokens: every full prompt block hits
            samples = floor_to(workload.prompt_len, block) if workload.output_len else hit
        elif workload.n > 1:
            samples = hit
        else:
            samples = prefix
        if workload.proposer in _EAGLE_PROPOSERS:
            prefix, samples = max(0, prefix - block), max(0, samples - block)
        return SharedSpans(prefix, max(prefix, samples))

    def notes(self, workload: Workload) -> tuple[str, ...]:
        notes = []
        if workload.shared_prefix:
            notes.append("vLLM prefix caching (on by default): the common prefix's full blocks are stored once, "
                         "the partial block after them per request; a hit covers at most prompt - 1 tokens")
        if workload.n > 1:
            notes.append(f"vLLM parallel sampling: n = {workload.n} child requests share the prompt's full blocks "
                         "through prefix caching (on by default; up to prompt - 1 tokens); the block with the "
                         "prompt's last token and the output are each child's own")
        if workload.beam_width > 1:
            notes.append(f"vLLM beam search: {workload.beam_width} beams share the prompt's full blocks through "
                         "prefix caching; tokens "
                         "the beams have in common after the prompt are counted per beam (an upper bound)")
        if workload.proposer in _EAGLE_PROPOSERS and (workload.shared_prefix or workload.samples > 1):
            notes.append(f"vLLM with the {workload.proposer} proposer drops the last block of a prefix-cache hit "
                         "(recomputed for the proposer): one block fewer is shared")
        return tuple(notes)


def hit_alignment(layout: CacheLayout) -> int:
    """The least common multiple of the block sizes of the layout's cached groups."""
    sizes = {g.block_size for g in layout.groups if g.block_size}
    return math.lcm(*sizes) if sizes else layout.block_size or DEFAULT_BLOCK_SIZE


SHARING = PrefixCachingBlocks()


def prefix_max_batch(layouts: Sequence[CacheLayout], kv_bytes: int, version: Version, batched_tokens: int,
                     context: int, prefix: int, proposer: str | None = None) -> int:
    """Requests of ``context`` tokens one replica admits when their first ``prefix`` tokens are common.

    Every KV-cache group of full attention (or MLA) holds the prefix's full blocks once (at most
    ``context - 1`` tokens, ``get_computed_blocks``); the rest of each request is admitted as
    ``max_admission_blocks_per_request`` counts it. Sliding, chunked and Mamba groups are counted
    per request, as admission reserves their window plus the tokens in flight."""
    from kvplan.engines.vllm.admission import vllm_pool

    best = None
    for layout in layouts:
        pool = vllm_pool(layout)
        blocks = pool.num_blocks(kv_bytes)
        per_request = pool.blocks_per_request(context, batched_tokens)  # in flight: the pool's own rule
        align = hit_alignment(layout)
        hit = floor_to(min(prefix, context - 1), align)
        if proposer in _EAGLE_PROPOSERS:
            hit = max(0, hit - align)
        shared = sum(groups * (hit // t.block_size)
                     for t, groups in zip(pool.types, pool.groups_per_type) if t.kind in ("full", "mla"))
        own = per_request - shared
        fits = (blocks - shared) // own if own > 0 and blocks >= shared else 0
        best = fits if best is None else min(best, fits)
    return best or 0


PREFIX_CACHED_NOTE = ("shared prefix: its full blocks are counted once in the pool, assuming it stays cached "
                      "(some running request always references it, so it is never evicted)")
