"""transformers speculative decoding (``generate(assistant_model=...)``, ``prompt_lookup_num_tokens``,
``use_mtp``): the caches it holds at the worst point of a step.

Rules read from transformers 5.23 (huggingface/transformers, ``src/transformers/generation/``) and
measured on CPU with two tiny random models (tests/test_speculative_hf.py):

- Every method runs one sequence: ``GenerationMixin._assisted_decoding`` (``utils.py``) raises for
  ``batch_size > 1`` (it has since 4.x) and refuses static caches ("assisted generate is not supported
  with Static cache classes"); the target's cache is a ``DynamicCache`` with past recording on
  (``Cache.activate_past_recording``), so a verify pass keeps every new token until ``crop``.
- A step with ``L`` accepted tokens feeds the target the last accepted token and ``k`` candidates and
  holds ``L + k`` tokens before ``crop(-(k - matches))`` (``_assisted_decoding``, step 4.2).
- Draft model (``AssistedCandidateGenerator``, ``candidate_generator.py``): the assistant's own
  ``DynamicCache``, made by its inner ``generate`` (``_prepare_cache_for_generation`` turns past recording
  on for ``is_assistant``). ``_update_past_and_masks`` crops it to ``L - 2`` tokens, then the assistant
  generates ``k`` candidates, holding ``L + k - 1``; it is cropped only at the next step, so it is held
  through the target's verify pass. ``k`` is ``num_assistant_tokens`` (default 20; schedule
  ``constant`` by default, ``heuristic`` adds 2 after a full acceptance and takes 1 away otherwise), but
  ``_calculate_new_tokens`` caps it at ``max_length - L - 1``: the target never holds more than
  ``max_length - 1`` tokens, what plain ``generate`` holds at its last step (kvplan's context), and the
  draft ``max_length - 2``. The last step reaches both at once (unless the draft stops early on its
  confidence threshold or EOS), whatever ``k`` and the schedule are.
- Prompt lookup (``PromptLookupCandidateGenerator``, method ngram): no draft cache; up to
  ``prompt_lookup_num_tokens`` candidates, not capped by the remaining length (only none at
  ``max_length - 1``), so the target holds up to ``max_length - 2 + k``: context + k - 1.
- MTP (``MTPCandidateGenerator``, ``generate(use_mtp=True)``): ``num_mtp_layers`` (a config's
  ``num_nextn_predict_layers``) layers of the class of the model's last layer (``MtpModel`` in
  ``modeling_layers.py``) in an ``MtpCache`` (a ``DynamicCache``); one candidate per layer, not capped
  (``_assisted_decoding`` trims what passes ``max_length`` only after the verify pass): the target holds
  up to ``max_length - 1 + k`` (context + k), each MTP layer ``max_length - 2`` (context - 1) then.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.engines.protocol import Demand, KvCapacity
from kvplan.engines.rules import AllTokens, TokenRule
from kvplan.engines.speculative import (
    Speculation,
    SpeculativeLayout,
    mtp_count,
    with_mtp_weights,
)
from kvplan.errors import UsageError
from kvplan.record import dataclass, replace
from kvplan.spec import LayerSpec, LocalAttention, ModelSpec, Recurrent

DEFAULT_ASSISTANT_TOKENS = 20
"""transformers' ``GenerationConfig`` default ``num_assistant_tokens`` (generation/configuration_utils.py, the
defaults table: 20 with schedule "constant" in 5.x)."""
_SOURCE = "transformers 5.23"
# kinds whose cache past recording keeps whole until crop (the first verify pass holds the whole prompt
# in a sliding layer, a linear-attention layer its conv history): kvplan has no rule for them yet
_NO_RULE_KINDS = (LocalAttention, Recurrent)


@dataclass(frozen=True)
class AssistedSpec(ModelSpec):
    """A target model and, from layer group ``draft_from`` on, its draft's (or MTP) layers: transformers
    holds them in a cache of their own, ``draft_behind`` tokens behind the target's."""

    draft_from: int = 0
    """Index in ``layers`` of the first draft group (``len(layers)`` where nothing drafts with a cache)."""
    draft_behind: int = 0
    """Tokens the draft's cache holds fewer than the target's at the worst point of a step."""
    method: str = "draft_model"


@dataclass(frozen=True)
class Behind(TokenRule):
    """Every token but the last ``less``: a draft's cache while the target verifies its candidates."""

    less: int

    def held(self, context: int) -> int:
        return max(0, context - self.less)

    def prefix_held(self, context: int, prefix: int) -> int:
        return min(self.held(context), prefix)

    def formula(self) -> str:
        return f"context - {self.less}"


@dataclass(frozen=True)
class AssistedCache:
    """``CacheLayout.pool`` of transformers speculative decoding: one sequence at a time."""

    method: str
    max_batch: int = 1


_ONE_SEQUENCE = f"{_SOURCE} _assisted_decoding raises 'assisted generate is only supported for batch_size = 1'"


def batch_refusal(batch: int) -> str:
    return f"batch {batch}: transformers speculates for one sequence only ({_ONE_SEQUENCE})"


def speculate(spec: ModelSpec, speculation: Speculation, pp: int, *, static: bool) -> SpeculativeLayout:
    if static:
        raise UsageError(f"{_SOURCE} refuses speculative decoding with a StaticCache (_assisted_decoding: "
                         "'assisted generate is not supported with Static cache classes'); use the hf engine",
                         field="speculative_method")
    if pp > 1:
        raise UsageError("kvplan has no rule for transformers speculative decoding with pipeline parallelism",
                         field="pp")
    method = speculation.method
    if method in ("eagle", "eagle3"):
        raise UsageError(f"{_SOURCE} has no {method} proposer (its candidate generators: assistant model, "
                         "prompt lookup, MTP, DFlash, Gemma 4 assistant)", field="speculative_method")
    _refuse_kinds(spec, "the model")
    k = speculation.num_speculative_tokens
    notes = [f"transformers speculative decoding ({method}) runs one sequence at a time (_assisted_decoding "
             "refuses batch_size > 1); the figures are the peak of one generate() call, at its target's "
             "verify pass"]
    if method == "ngram":
        assert k is not None
        notes.append(f"prompt lookup (prompt_lookup_num_tokens = {k}): no draft cache; up to {k} candidates "
                     f"are verified even at the last steps, so the target's cache holds up to context + {k - 1} "
                     "tokens (PromptLookupCandidateGenerator does not cap candidates by max_length)")
        return SpeculativeLayout(_assisted(spec, spec.layers, len(spec.layers), 0, method), k - 1, tuple(notes),
                                 max_batch=1, max_batch_reason=_ONE_SEQUENCE)
    if method == "mtp":
        return _mtp(spec, speculation, notes)
    draft = speculation.draft
    assert draft is not None
    if k is None:  # generate() takes the draft's generation config: num_assistant_tokens 20 unless it says otherwise
        k = DEFAULT_ASSISTANT_TOKENS
        notes.append(f"num_assistant_tokens not given: transformers' default {k} assumed (GenerationConfig's "
                     "defaults: num_assistant_tokens 20, schedule 'constant', unless the draft's generation_config.json "
                     "sets them); the cache figures do not depend on it")
    _refuse_kinds(draft, f"the draft {draft.id}")
    notes.append(
        f"assisted generation: the draft {draft.id} keeps its own DynamicCache; num_assistant_tokens = {k} "
        "(transformers' default 20, schedule 'constant') is capped at max_length - length - 1 "
        "(AssistedCandidateGenerator._calculate_new_tokens), so the target never holds more than plain "
        "generation's context and the draft holds context - 1 tokens at the last verify pass, whatever "
        "num_assistant_tokens and its schedule are")
    if draft.dtype != spec.dtype:
        notes.append(f"the draft's cache is counted in the cache dtype given; transformers keeps it in the "
                     f"dtype the draft is loaded in ({draft.dtype} in its config)")
    notes.append("the draft shares the target's tokenizer (no assistant_tokenizer: same-vocabulary assisted "
                 "generation)")
    if spec.weights_bytes is not None and draft.weights_bytes is not None:
        weights: int | None = spec.weights_bytes + draft.weights_bytes
        notes.append(f"the draft's weights ({draft.weights_bytes / 2**30:.2f} GiB) are in the budget, its "
                     "activations are not")
    else:
        weights = spec.weights_bytes
        notes.append(f"draft {draft.id}: weights size unknown, not counted in the budget")
    combined = _assisted(spec, (*spec.layers, *draft.layers), len(spec.layers), 1, method)
    return SpeculativeLayout(replace(combined, weights_bytes=weights), 0, tuple(notes), max_batch=1,
                             max_batch_reason=_ONE_SEQUENCE)


def _mtp(spec: ModelSpec, speculation: Speculation, notes: list[str]) -> SpeculativeLayout:
    count = mtp_count(spec, speculation, f"{_SOURCE} MTPCandidateGenerator raises 'Could not find `num_mtp_layers` "
                      "in the model config. This model probably has no associated mtp weights.'", notes)
    k = speculation.num_speculative_tokens
    if k is not None and k != count:
        raise UsageError(f"num-speculative-tokens {k}: transformers drafts one token per MTP layer "
                         f"(MTPCandidateGenerator), {count} here", field="num_speculative_tokens")
    last = spec.layers[-1]
    if not last.attends_all:
        raise UsageError(f"kvplan has no transformers MTP rule for a model whose last layer is {last.kind}",
                         field="speculative_method")
    notes.append(f"MTP (generate(use_mtp=True)): {count} layer(s) of the class of the model's last layer "
                 f"cache like its {last.kind} layers in an MtpCache, context - 1 tokens each while the target "
                 f"holds context + {count} (one uncapped candidate per layer)")
    layers = (*spec.layers, replace(last, count=count))
    loaded = with_mtp_weights(spec, "MTPCandidateGenerator (MtpModel.from_pretrained)", notes)
    return SpeculativeLayout(_assisted(loaded, layers, len(spec.layers), count + 1, "mtp"), count, tuple(notes),
                             max_batch=1, max_batch_reason=_ONE_SEQUENCE)


def _assisted(spec: ModelSpec, layers: tuple[LayerSpec, ...], draft_from: int, behind: int,
              method: str) -> AssistedSpec:
    from kvplan.record import fields

    values = {f.name: getattr(spec, f.name) for f in fields(ModelSpec)}
    values["layers"] = layers
    return AssistedSpec(**values, draft_from=draft_from, draft_behind=behind, method=method)


def _refuse_kinds(spec: ModelSpec, what: str) -> None:
    kinds = sorted({layer.kind for layer in spec.layers if isinstance(layer, _NO_RULE_KINDS)})
    if kinds:
        raise UsageError(
            f"kvplan has no rule yet for transformers speculative decoding when {what} has {', '.join(kinds)} "
            "layers: with past recording (on for assisted decoding) they keep every token of a forward pass "
            "until crop, so the first verify pass holds the whole prompt", field="speculative_method")


def is_assisted(spec: ModelSpec) -> bool:
    return isinstance(spec, AssistedSpec)


def draft_groups(spec: ModelSpec, groups: tuple[GroupRule, ...]) -> tuple[tuple[GroupRule, ...], AssistedCache]:
    """The layout's groups with the draft's holding its tokens behind the target's, and the pool marker."""
    assert isinstance(spec, AssistedSpec)
    out = list(groups)
    for index in range(spec.draft_from, len(out)):
        g = out[index]
        if spec.draft_behind and isinstance(g.tokens, AllTokens):  # full and MLA layers: behind by a few
            out[index] = replace(g, tokens=Behind(spec.draft_behind))
        elif spec.draft_behind and g.token.bytes:
            raise UsageError(f"internal: no transformers draft rule for {g.kind} layers", field="speculative_method")
    return tuple(out), AssistedCache(spec.method)


def one_sequence(layouts: Sequence[CacheLayout], demand: Demand, cap: KvCapacity) -> KvCapacity:
    """The capacity of a speculating transformers deployment: at most one sequence (``_assisted_decoding``)."""
    pools = [layout.pool for layout in layouts if isinstance(layout.pool, AssistedCache)]
    if not pools:
        return cap
    most = min(pool.max_batch for pool in pools)
    if demand.batch > most:
        raise UsageError(batch_refusal(demand.batch), field="batch")
    return replace(cap, max_batch=min(cap.max_batch, most), max_concurrency=min(cap.max_concurrency, float(most)),
                   assumptions=(*cap.assumptions, f"{_SOURCE} speculative decoding: one sequence per generate() "
                                "call, so the largest batch is 1"))
