"""From estimate's and max_batch's keyword arguments to what requests share, and the figures of a
row with the engine's sharing applied (docs/sharing.md). The rules themselves are the engines'."""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

from kvplan.engines.layout import CacheLayout
from kvplan.engines.sharing import (
    SharingRule,
    Workload,
    group_bytes,
    group_tokens,
    plain_bytes,
    shared_bytes,
)
from kvplan.errors import UsageError
from kvplan.record import dataclass
from kvplan.spec import ModelSpec


@dataclass(frozen=True)
class RowSharing:
    prompt_len: int
    output_len: int
    sequences: int
    """batch x samples (n) or beams: the sequences the engine holds."""
    kv_bytes_plain: int
    """The same sequences with nothing stored once (each its own cache)."""


@dataclass(frozen=True)
class SharingTerm:
    """``--explain``: how one rule's tokens add up for the first row of a dtype, sharing applied."""

    kv_dtype: str
    count: int
    kind: str
    tokens_held_formula: str
    once_tokens: int
    """Tokens per layer stored once for the whole batch (the common prefix)."""
    per_request_tokens: int
    """Tokens per layer stored once per request (the prompt its samples or beams share)."""
    per_sequence_tokens: int
    """Tokens per layer every sequence holds on its own."""
    tokens: int
    plain_tokens: int


_DEFAULT_CONTEXT = 8192


def speculation_from(method: str | None, tokens: int | None, draft: str | ModelSpec | None,
                     mtp_layers: int | None) -> Any:
    """A ``Speculation`` from the keyword arguments (the draft loaded by name), or None."""
    from kvplan.engines.speculative import parse_speculation

    if isinstance(draft, str):
        from kvplan.sources.resolve import load_model

        draft = load_model(draft)
    return parse_speculation(method, tokens, draft, mtp_layers)


def split_contexts(contexts: Iterable[int] | None, prompt_len: int | None,
                   output_len: int | None) -> tuple[list[int], list[tuple[int, int]] | None]:
    """The contexts, and with a prompt or an output length each context's (prompt, output) split."""
    if prompt_len is not None and output_len is not None:
        total = prompt_len + output_len
        given = list(contexts) if contexts is not None else [total]
        if given != [total]:
            raise UsageError(f"context {', '.join(map(str, given))} is not prompt-len + output-len ({total})",
                             field="contexts")
        return [total], [(prompt_len, output_len)]
    chosen = list(contexts) if contexts is not None else (
        [prompt_len] if prompt_len is not None else [_DEFAULT_CONTEXT])
    if prompt_len is not None:
        if any(c < prompt_len for c in chosen):
            raise UsageError(f"a context is shorter than prompt-len {prompt_len:,}", field="prompt_len")
        return chosen, [(prompt_len, c - prompt_len) for c in chosen]
    if output_len is not None:
        if any(c <= output_len for c in chosen):
            raise UsageError(f"output-len {output_len:,} leaves no prompt in a context of {min(chosen):,}",
                             field="output_len")
        return chosen, [(c - output_len, output_len) for c in chosen]
    return chosen, None




def shared_figures(layout: CacheLayout, rule: SharingRule, workload: Workload, batch: int,
                   by_layer: bool) -> tuple[int, int, list[tuple[int, str, int, int]] | None]:
    """(kv bytes with sharing, plain bytes, per layer (index, kind, tokens, bytes) with ``by_layer``)."""
    rule = rule.bind(layout)
    kv = shared_bytes(layout, rule, workload, batch)
    plain = plain_bytes(layout, workload, batch)
    layers = None
    if by_layer:
        layers = []
        for g in layout.groups:
            spans = rule.spans(g, workload)
            tokens = group_tokens(g, spans, workload.context, batch, workload.samples)
            nbytes = group_bytes(g, spans, workload.context, batch, workload.samples)
            kind = "padding" if g.padding else g.kind
            layers.extend((g.first_layer + i, kind, tokens, nbytes) for i in range(g.count))
    return kv, plain, layers


def sharing_terms(dtype_name: str, layout: CacheLayout, rule: SharingRule, workload: Workload,
                   batch: int) -> Iterable[SharingTerm]:
    rule = rule.bind(layout)
    merged: dict[tuple, list[Any]] = {}
    for g in layout.groups:
        spans = rule.spans(g, workload)
        key = (g.padding, g.kind, g.tokens, spans)
        if key in merged:
            merged[key][0] += g.count
        else:
            merged[key] = [g.count, g, spans]
    context, samples = workload.context, workload.samples
    for count, g, spans in merged.values():
        if g.tokens.held(context) == 0:
            continue
        held = g.tokens.held(context)
        once = g.tokens.prefix_held(context, spans.across_requests)
        per_request = g.tokens.prefix_held(context, max(spans.across_samples, spans.across_requests))
        yield SharingTerm(
            kv_dtype=dtype_name, count=count, kind="padding" if g.padding else g.kind,
            tokens_held_formula=g.held_formula, once_tokens=once, per_request_tokens=per_request - once,
            per_sequence_tokens=held - per_request,
            tokens=group_tokens(g, spans, context, batch, samples),
            plain_tokens=g.tokens.batch_tokens(context, batch * samples))
