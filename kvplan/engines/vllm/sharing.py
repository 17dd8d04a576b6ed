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
from typing import TYPE_CHECKING

from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.engines.sharing import (
    NOTHING_SHARED,
    SharedSpans,
    SharingRule,
    Workload,
    floor_to,
    group_bytes,
)
from kvplan.engines.vllm.pool import DEFAULT_BLOCK_SIZE
from kvplan.record import dataclass, replace

if TYPE_CHECKING:
    from kvplan.engines.protocol import Demand
    from kvplan.engines.vllm.admission import PoolShape
    from kvplan.engines.vllm.pool import PoolType


_EAGLE_PROPOSERS = frozenset({"eagle", "eagle3", "mtp"})  # SpeculativeConfig.use_eagle()
_CASCADE_MIN_PREFIX = 256  # use_cascade_attention: "too short common prefix" below 256 tokens
_CASCADE_MIN_REQS = 8  # use_cascade_attention: "too few queries" below 8 requests


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
        if not group.layer.caches_tokens:
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

    def decode_kv_bytes(self, layout: CacheLayout, workload: Workload, batch: int) -> tuple[int, str]:
        """vLLM's FlashAttention kernel reads each sequence's block table (shared blocks once per
        sequence), except cascade attention: ``use_cascade_attention``
        (``vllm/v1/attention/backends/flash_attn.py``) may read the blocks common to every running
        request once, from 256 common tokens and 8 requests, in groups without a sliding window or
        chunked local attention (``GPUModelRunner`` asks ``KVCacheManager.get_num_common_prefix_blocks``).
        A lower bound counts it once where cascade may run; ``group_tokens`` with equal spans gives
        ``common + sequences x (held - common)``."""
        rule = self.bind(layout)
        sequences = batch * workload.samples
        total, cascade = 0, False
        for g in layout.groups:
            spans = rule.spans(g, workload)
            common = spans.across_requests if batch > 1 else max(spans.across_samples, spans.across_requests)
            full = (g.cache_kind or g.kind) == "full" and not g.padding
            if full and common >= _CASCADE_MIN_PREFIX and sequences >= _CASCADE_MIN_REQS:
                cascade = True
                total += g.count * group_bytes(g, SharedSpans(common, common), workload.context, sequences, 1)
            else:
                total += g.count * group_bytes(g, NOTHING_SHARED, workload.context, sequences, 1)
        if cascade:
            return total, ("the common prefix once (vLLM's FlashAttention cascade attention may read it once per "
                           "step; its heuristic, against FlashDecoding for GQA, decides each step) and each "
                           "sequence's own KV")
        return total, "each sequence's KV (vLLM's attention reads every block table: shared blocks once per sequence)"

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


def admitted_span_blocks(pool: PoolShape, layer_type: PoolType, length: int, in_flight: int, span: int) -> int:
    """Blocks of the leading ``span`` tokens (whole blocks) that a request of ``length`` tokens, admitted
    with ``in_flight`` tokens not yet computed, still references in one group of ``layer_type``.

    Full and MLA groups keep every block. A sliding group frees the blocks before
    ``num_computed_tokens - window + 1`` and a chunked group those before the start of the computed
    tokens' chunk (``SlidingWindowManager`` / ``ChunkedLocalAttentionManager.remove_skipped_blocks``;
    their ``find_longest_cache_hit`` hands out null blocks there too), so a request far past the prefix
    references none of it. Mamba state is one per request (``MambaManager``): nothing shared."""
    block = layer_type.block_size
    blocks = span // block
    if layer_type.kind in ("full", "mla"):
        return blocks
    computed = max(0, length - in_flight)
    if layer_type.kind == "sliding" and layer_type.span is not None:
        first = max(0, computed - layer_type.span + 1) // block
    elif layer_type.kind == "chunked" and layer_type.span is not None:
        first = computed // layer_type.span * layer_type.span // block
    else:
        return 0
    return min(max(0, blocks - first), pool.admission_blocks(layer_type, length, in_flight))


@dataclass(frozen=True)
class SharedAdmission:
    """Pool blocks ``batch`` requests of one workload are admitted with: ``once`` for the whole batch,
    ``per_request`` more for each request, ``per_sequence`` for each of its samples or beams."""

    once: int
    per_request: int
    per_sequence: int
    samples: int

    def blocks(self, batch: int) -> int:
        return self.once + batch * (self.per_request + self.samples * self.per_sequence)

    def max_batch(self, usable: int) -> int:
        each = self.per_request + self.samples * self.per_sequence
        return (usable - self.once) // each if each > 0 and usable >= self.once else 0


def shared_admission(layout: CacheLayout, pool: PoolShape, workload: Workload, in_flight: int) -> SharedAdmission:
    """``max_admission_blocks_per_request`` per group, less the blocks the workload's requests share there
    (the spans are the same rule ``estimate`` uses: ``PrefixCachingBlocks.spans``)."""
    rule = SHARING.bind(layout)
    length = workload.context
    once = per_request = per_sequence = 0
    for layer_type, groups in zip(pool.types, pool.groups_per_type):
        admitted = pool.admission_blocks(layer_type, length, in_flight)
        spans = rule.spans(layer_type.rule, workload)
        common = admitted_span_blocks(pool, layer_type, length, in_flight, spans.across_requests)
        request = admitted_span_blocks(pool, layer_type, length, in_flight,
                                       max(spans.across_samples, spans.across_requests))
        once += groups * common
        per_request += groups * (request - common)
        per_sequence += groups * (admitted - request)
    return SharedAdmission(once, per_request, per_sequence, workload.samples)


def shared_capacity(layouts: Sequence[CacheLayout], kv_bytes: int, batched_tokens: int, demand: Demand,
                    max_context: int) -> tuple[int, int]:
    """(requests of ``demand.context`` tokens one replica admits, the longest context ``demand.batch``
    such requests fit) with what they share stored once; ``max_context``: the plain figure, kept where
    one request of one sequence shares nothing with itself."""
    from kvplan.engines.sharing import demand_workload
    from kvplan.engines.vllm.admission import in_flight_tokens, vllm_pool
    from kvplan.monotone import largest

    pools = [(layout, pool) for layout in layouts if (pool := vllm_pool(layout)).bytes_per_block]

    def needs(context: int) -> list[tuple[SharedAdmission, int]]:
        """Per stage (a rank without cache layers never limits): what the requests need, what it has."""
        workload = demand_workload(demand, context)
        assert workload is not None
        return [(shared_admission(layout, pool, workload, in_flight_tokens(pool.in_flight_batches, batched_tokens)),
                 pool.usable_blocks(kv_bytes)) for layout, pool in pools]

    requests = min((need.max_batch(usable) for need, usable in needs(demand.context)), default=0)
    if demand.batch == 1 and demand.n == 1 and demand.beam_width == 1:
        return requests, max_context
    longest = min(demand.limit, largest(lambda c: all(need.blocks(demand.batch) <= usable
                                                      for need, usable in needs(c))))
    return requests, longest


PREFIX_CACHED_NOTE = ("shared prefix: its full blocks are counted once in the pool, assuming it stays cached "
                      "(some running request always references it, so it is never evicted); sliding and chunked "
                      "groups share only the prefix blocks a request of this context still holds (its window "
                      "and the tokens in flight), Mamba state is per request")
