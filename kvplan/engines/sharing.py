"""What requests share in the KV cache: a common prompt prefix, the prompt of parallel samples, beams.

Neutral types only; each engine's rule (what it stores once, at which granularity) lives in its own
package (``kvplan/engines/<engine>/sharing.py``) as a small frozen ``SharingRule``.

The arithmetic, per layer of one group, for ``batch`` requests of ``samples`` sequences each
(n parallel samples or beams), every sequence ``context`` tokens long:

    tokens = P + batch x (S - P) + batch x samples x (H - S)

where ``H`` is what one sequence holds (its ``TokenRule``), ``S`` the part of it inside the span the
samples of one request share and ``P`` the part inside the span every request shares (the common
prefix); both are positions from the sequence's start, so a sliding window that has moved past the
prefix shares nothing. Recurrent state stays per sequence.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.errors import UsageError
from kvplan.record import dataclass

MAX_SAMPLES = 16384
"""Most sequences one request may have (``n`` samples or ``beam_width`` beams): vLLM's bound, the one
engine kvplan plans that states one (``VLLM_MAX_N_SEQUENCES``, 16,384 by default: vllm/envs.py, checked for
``SamplingParams.n`` and ``BeamSearchParams.beam_width`` by ``_verify_num_sequences`` in
vllm/sampling_params.py). Past it a request is no deployment's, and ``batch x n`` only grows the work."""

@dataclass(frozen=True)
class Workload:
    """Requests of ``prompt_len`` + ``output_len`` tokens whose first ``shared_prefix`` tokens are
    common to all, each generating ``n`` samples or ``beam_width`` beams."""

    prompt_len: int
    output_len: int = 0
    shared_prefix: int = 0
    n: int = 1
    beam_width: int = 1
    proposer: str | None = None
    """The speculative method, where one runs (vLLM's EAGLE proposers give up the last hit block)."""

    def __post_init__(self) -> None:
        for name in ("prompt_len", "output_len", "shared_prefix", "n", "beam_width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):  # 2.5 samples gave a max batch of 3.0
                raise UsageError(f"{name.replace('_', '-')} {value!r} is not a whole number", field=name)
        for name in ("prompt_len", "n", "beam_width"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name.replace('_', '-')} {getattr(self, name)} must be at least 1", field=name)
        for name in ("output_len", "shared_prefix"):
            if getattr(self, name) < 0:
                raise UsageError(f"{name.replace('_', '-')} {getattr(self, name)} must not be negative", field=name)
        if self.shared_prefix > self.prompt_len:
            raise UsageError(f"shared-prefix {self.shared_prefix:,} is longer than the prompt "
                             f"({self.prompt_len:,} tokens)", field="shared_prefix")
        for name in ("n", "beam_width"):
            if getattr(self, name) > MAX_SAMPLES:
                raise UsageError(f"{getattr(self, name):,} sequences per request: at most {MAX_SAMPLES:,} (vLLM refuses "
                                 f"{name} above VLLM_MAX_N_SEQUENCES, {MAX_SAMPLES:,} by default)", field=name)
        if self.n > 1 and self.beam_width > 1:
            raise UsageError("give parallel samples (n) or a beam width, not both", field="beam_width")

    @property
    def context(self) -> int:
        return self.prompt_len + self.output_len

    @property
    def samples(self) -> int:
        """Sequences per request: the n samples or the beams."""
        return self.n * self.beam_width

    @property
    def plain(self) -> bool:
        """Nothing to share: no common prefix, one sequence per request."""
        return self.shared_prefix == 0 and self.samples == 1


@dataclass(frozen=True)
class SharedSpans:
    """For one group of layers: the leading positions an engine stores once."""

    across_requests: int
    """Leading tokens every request of the batch shares (the common prefix, as the engine aligns it)."""
    across_samples: int
    """Leading tokens the samples or beams of one request share (at least ``across_requests``)."""


NOTHING_SHARED = SharedSpans(0, 0)


@dataclass(frozen=True)
class SharingRule:
    """Base rule: the engine stores nothing once, and has no rule kvplan knows for samples or beams
    (it refuses ``n`` and ``beam_width``, naming them, never ignoring them)."""

    title: str = "this engine"
    prefix_note: str = ""
    """Said when a common prefix is asked of an engine that stores it per request."""

    def check(self, workload: Workload) -> None:
        """Refuse what the engine has no rule for."""
        if workload.n > 1:
            raise UsageError(f"kvplan has no parallel-sampling rule for {self.title}", field="n")
        if workload.beam_width > 1:
            raise UsageError(f"kvplan has no beam-search rule for {self.title}", field="beam_width")

    def bind(self, layout: CacheLayout) -> SharingRule:
        """The rule for one layout (vLLM aligns a hit to all its groups' block sizes)."""
        return self

    def spans(self, group: GroupRule, workload: Workload) -> SharedSpans:
        return NOTHING_SHARED

    def notes(self, workload: Workload) -> tuple[str, ...]:
        if workload.shared_prefix and self.prefix_note:
            return (self.prefix_note,)
        return ()

    def decode_kv_bytes(self, layout: CacheLayout, workload: Workload, batch: int) -> tuple[int, str]:
        """KV bytes one decode step of ``batch`` requests reads, and how: paged attention kernels walk each
        sequence's own block table, so a block several sequences share is read once per sequence."""
        return plain_bytes(layout, workload, batch), "each sequence's KV, shared blocks read once per sequence"


def group_tokens(group: GroupRule, spans: SharedSpans, context: int, batch: int, samples: int) -> int:
    """Tokens ``batch`` requests of ``samples`` sequences occupy in one layer of ``group``."""
    rule = group.tokens
    sequences = batch * samples
    if spans == NOTHING_SHARED:
        return rule.batch_tokens(context, sequences)
    if not rule.per_sequence:  # a rule for a whole batch's cells shares nothing position by position
        raise AssertionError(f"{rule} is not per sequence: its engine cannot share spans")
    held = rule.held(context)
    once = rule.prefix_held(context, spans.across_requests)
    per_request = rule.prefix_held(context, max(spans.across_samples, spans.across_requests))
    return once + batch * (per_request - once) + sequences * (held - per_request)


def group_bytes(group: GroupRule, spans: SharedSpans, context: int, batch: int, samples: int) -> int:
    """Bytes one layer of ``group`` holds; recurrent state stays one per sequence."""
    if spans == NOTHING_SHARED:  # the group's own rule: a QuantizedCache layer prices its residual apart
        return group.layer_bytes(context, batch * samples)
    state = batch * samples * group.state.bytes if group.state is not None else 0
    return group.token.bytes * group_tokens(group, spans, context, batch, samples) + state


def shared_bytes(layout: CacheLayout, rule: SharingRule, workload: Workload, batch: int) -> int:
    """What the engine holds for ``batch`` requests of ``workload``, its sharing applied."""
    rule = rule.bind(layout)
    return sum(g.count * group_bytes(g, rule.spans(g, workload), workload.context, batch, workload.samples)
               for g in layout.groups)


def plain_bytes(layout: CacheLayout, workload: Workload, batch: int) -> int:
    """The same sequences with nothing shared (each its own cache)."""
    return layout.total_bytes(workload.context, batch * workload.samples)


def shares(demand: Any) -> bool:
    """Whether the requests of a capacity ``Demand`` share anything (``demand_workload`` is not None)."""
    return bool(demand.shared_prefix or demand.n != 1 or demand.beam_width != 1)


def demand_workload(demand: Any, context: int | None = None) -> Workload | None:
    """The requests a capacity ``Demand`` describes at ``context`` (default its own), or None when each
    is one sequence sharing nothing (the plain count applies)."""
    if not shares(demand):
        return None
    context = demand.context if context is None else context
    prompt = max(1, min(demand.prompt_len or context, context))
    return Workload(prompt, max(0, context - prompt), min(demand.shared_prefix, prompt), demand.n,
                    demand.beam_width, demand.proposer)


def floor_to(value: int, multiple: int) -> int:
    return value // multiple * multiple
