"""SGLang sharing: the radix cache stores a common prefix once, at token granularity.

Rules and where they come from (sgl-project/sglang):
- ``RadixCache.match_prefix`` (``python/sglang/srt/mem_cache/radix_cache.py``) matches token by
  token (``page_size`` 1, the default), or whole pages when the page size is larger; matched KV
  indices are referenced by the request, not copied.
- ``Req.init_next_round_input`` / ``_compute_max_prefix_len`` (``managers/schedule_batch.py``): the
  match is at most ``input_len - 1`` tokens, so the prompt's last token is each request's own.
- Parallel sampling (``TokenizerManager._handle_batch_request``, ``parallel_sample_num > 1``): the
  prompt is first prefilled once to cache it, then the n copies are sent; each matches the cached
  prompt (up to ``input_len - 1``) and holds only its own last prompt token and output.
- Sliding layers in the hybrid SWA pool keep only their window; recurrent state is per sequence.
"""

from __future__ import annotations

from kvplan.engines.layout import GroupRule
from kvplan.engines.sharing import (
    NOTHING_SHARED,
    SharedSpans,
    SharingRule,
    Workload,
    floor_to,
)
from kvplan.errors import UsageError
from kvplan.record import dataclass


@dataclass(frozen=True)
class RadixTokens(SharingRule):
    """SGLang's radix cache: pages of ``page`` tokens (1: any token), match capped at input - 1."""

    title: str = "SGLang"

    def check(self, workload: Workload) -> None:
        if workload.beam_width > 1:
            raise UsageError("kvplan has no beam-search rule for SGLang (its scheduler has no beam search)",
                             field="beam_width")

    def spans(self, group: GroupRule, workload: Workload) -> SharedSpans:
        if not group.layer.caches_tokens:
            return NOTHING_SHARED
        page = getattr(group.tokens, "page", 1)
        hit = floor_to(workload.prompt_len - 1, page)
        prefix = min(floor_to(workload.shared_prefix, page), hit)
        return SharedSpans(prefix, hit if workload.n > 1 else prefix)

    def notes(self, workload: Workload) -> tuple[str, ...]:
        notes = []
        if workload.shared_prefix:
            notes.append("SGLang radix cache: the common prefix is stored once at token granularity (whole pages "
                         "with a page size above 1); a match covers at most prompt - 1 tokens")
        if workload.n > 1:
            notes.append(f"SGLang parallel sampling: the prompt is cached once and the n = {workload.n} copies "
                         "share it (up to prompt - 1 tokens); each holds its own output")
        return tuple(notes)


SHARING = RadixTokens()
