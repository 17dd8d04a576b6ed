"""TensorRT-LLM sharing: KV-cache block reuse and beam search.

Rules and where they come from (NVIDIA/TensorRT-LLM, ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``):
- ``WindowBlockManager::addSequence`` keys the prompt's blocks on its first ``inputLength - 1``
  tokens (the last token cannot be reused) and ``loadOrAllocateBlocks`` references every matching
  full block; a partially matching block is copied when someone else holds it
  (``copyOnPartialReuse``), so only whole blocks of a common prefix are stored once.
- Beam search: ``loadOrAllocateBlocks`` shares the context blocks among the beams except the last
  one ("the last block cannot be shared between beams because it will be written to"), and
  generation blocks are one per beam (``allocateBlock`` with ``shareAmongBeams`` false).
- kvplan shares only layers whose cache holds the whole sequence: the cyclic window blocks of
  sliding layers are counted per sequence.
"""

from __future__ import annotations

from kvplan.engines.layout import GroupRule
from kvplan.engines.rules import AllTokens, WholePages
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
class BlockReuse(SharingRule):
    title: str = "TensorRT-LLM"

    def check(self, workload: Workload) -> None:
        if workload.n > 1:
            raise UsageError("kvplan has no parallel-sampling rule for TensorRT-LLM (use a beam width)", field="n")

    def spans(self, group: GroupRule, workload: Workload) -> SharedSpans:
        rule = group.tokens
        if not (isinstance(rule, WholePages) and isinstance(rule.inner, AllTokens)):
            return NOTHING_SHARED
        block = rule.page
        prefix = min(floor_to(workload.shared_prefix, block), floor_to(workload.prompt_len - 1, block))
        if workload.beam_width > 1:
            context_blocks = -(-workload.prompt_len // block)
            return SharedSpans(prefix, max(prefix, (context_blocks - 1) * block))
        return SharedSpans(prefix, prefix)

    def notes(self, workload: Workload) -> tuple[str, ...]:
        notes = []
        if workload.shared_prefix:
            notes.append("TensorRT-LLM KV-cache block reuse (KvCacheConfig.enable_block_reuse, on by default): the "
                         "common prefix's full blocks are stored once (sliding layers' cyclic blocks are not "
                         "counted as shared)")
        if workload.beam_width > 1:
            notes.append(f"TensorRT-LLM beam search: the {workload.beam_width} beams share the prompt's blocks "
                         "except the last; that block and every generation block are one per beam")
        return tuple(notes)


SHARING = BlockReuse()
