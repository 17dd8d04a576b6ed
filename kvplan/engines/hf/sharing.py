"""transformers sharing: none; samples and beams expand the batch.

Rules and where they come from (huggingface/transformers, ``src/transformers/generation/utils.py``):
- ``GenerationMixin._expand_inputs_for_generation`` repeats every input row ``expand_size`` times:
  ``num_return_sequences`` for sampling, ``num_beams`` for beam search; the cache is then built for
  ``batch x expand_size`` rows, each a full copy (beam search reorders whole rows with
  ``Cache.reorder_cache`` / ``_reorder_cache``), so n samples or beams hold n times the cache.
- Each row of a batch has its own cache: a prompt prefix common to several rows is stored per row.
"""

from __future__ import annotations

from kvplan.engines.sharing import SharingRule, Workload
from kvplan.record import dataclass


@dataclass(frozen=True)
class ExpandedRows(SharingRule):
    title: str = "transformers"
    prefix_note: str = "transformers stores a common prefix in every row of the batch (nothing is shared)"

    def check(self, workload: Workload) -> None:
        return None

    def notes(self, workload: Workload) -> tuple[str, ...]:
        notes = list(super().notes(workload))
        if workload.samples > 1:
            what = f"num_return_sequences = {workload.n}" if workload.n > 1 else f"num_beams = {workload.beam_width}"
            notes.append(f"transformers expands the batch to batch x {workload.samples} rows ({what}, "
                         "_expand_inputs_for_generation): every row has a full cache")
        return tuple(notes)


SHARING = ExpandedRows()
