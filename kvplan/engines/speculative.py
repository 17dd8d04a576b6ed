"""Speculative decoding as a deployment asks for it: neutral types only.

An engine that has a rule for it (``Engine.speculate``) turns a ``Speculation`` into the model whose
layers its KV pool holds (the target's, plus a draft's or MTP layers where they cache) and the
token slots each sequence holds beyond its context; engines without one refuse it by name.
"""

from __future__ import annotations

from kvplan.errors import UsageError
from kvplan.record import dataclass, replace
from kvplan.spec import ModelSpec

METHODS = ("ngram", "eagle", "eagle3", "mtp", "draft_model")
_NEEDS_DRAFT = frozenset({"eagle", "eagle3", "draft_model"})
MAX_SPECULATIVE_TOKENS = 1 << 10
"""No engine states a bound (proposers use 1 to 10): each draft token is a KV slot of every running request,
so past this the plan is of no deployment (the bound check applies to serve flags too)."""


@dataclass(frozen=True)
class Speculation:
    method: str
    """ngram (no cache), eagle / eagle3 (a draft head), mtp (the model's own MTP layers), draft_model."""
    num_speculative_tokens: int | None
    """k draft tokens per step; None for mtp takes the engine's default (vLLM: the MTP layer count)."""
    draft: ModelSpec | None = None
    """The draft model or EAGLE head (its layers join the pool), for eagle, eagle3 and draft_model."""
    mtp_layers: int | None = None
    """``num_nextn_predict_layers`` for mtp, overriding the model's own count (None: the model's
    ``ModelSpec.mtp_layers``, what its checkpoint ships)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise UsageError(f"speculative method '{self.method}' is not one kvplan knows ({', '.join(METHODS)})",
                             field="speculative_method")
        if self.num_speculative_tokens is None and self.method == "ngram":
            # n-gram proposals have no draft config to take a default from; for the other methods the engine
            # decides (SGLang and transformers have defaults; vLLM and TensorRT-LLM refuse, in their speculate)
            raise UsageError("speculative decoding needs num_speculative_tokens", field="num_speculative_tokens")
        k = self.num_speculative_tokens
        if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
            raise UsageError(f"{k!r} is not a whole number of draft tokens", field="num_speculative_tokens")
        if k is not None and k < 1:
            raise UsageError(f"num-speculative-tokens {k} must be at least 1", field="num_speculative_tokens")
        if k is not None and k > MAX_SPECULATIVE_TOKENS:  # 10^20 drafted slots per request planned exit 0
            raise UsageError(f"{k:,} draft tokens per step: at most {MAX_SPECULATIVE_TOKENS:,}",
                             field="num_speculative_tokens")
        if self.method in _NEEDS_DRAFT and self.draft is None:
            raise UsageError(f"speculative method {self.method} needs the draft model (its config)",
                             field="speculative_model")
        if self.method not in _NEEDS_DRAFT and self.draft is not None:
            raise UsageError(f"speculative method {self.method} takes no draft model", field="speculative_model")
        if self.mtp_layers is not None and (self.method != "mtp" or self.mtp_layers < 1):
            raise UsageError("num_nextn_predict_layers applies to mtp only and must be at least 1",
                             field="num_nextn_predict_layers")


@dataclass(frozen=True)
class SpeculativeLayout:
    """What an engine holds for speculative decoding."""

    spec: ModelSpec
    """The model whose layers the KV pool holds, weights included (target + draft)."""
    extra_tokens: int
    """Slots each running sequence holds beyond its context (draft tokens being verified, lookahead)."""
    notes: tuple[str, ...]
    capped_at_max_model_len: bool = False
    """True where the engine stops a sequence's slots at max_model_len, so one that reaches it holds none beyond
    (vLLM ``KVCacheManager.allocate_slots``); False where the engine sizes each sequence's table for
    max_model_len plus the slots and adds them at every step, so a sequence of max_model_len holds them too
    (TensorRT-LLM, SGLang, transformers: the rule in each engine's ``speculative.py``)."""
    target: ModelSpec | None = None
    """The model without the draft, where an engine's budget or pool treats the draft apart (SGLang
    before 0.5.14 sized the draft's pool outside the target's); its layers come first in ``spec``."""
    speculation: Speculation | None = None
    """What was asked, for engines whose pool rules read its parameters."""
    max_batch: int | None = None
    """The most sequences the engine speculates for at once (transformers: 1); None: no limit."""
    max_batch_reason: str = ""
    """Why, in the engine's words (a refusal of a larger batch quotes it)."""


def mtp_count(spec: ModelSpec, speculation: Speculation, refusal: str, notes: list[str]) -> int:
    """The MTP layers an engine runs for method mtp: the library's ``num_nextn_predict_layers=`` where
    given (said when it is not the model's own count), else the layers the checkpoint ships
    (``ModelSpec.mtp_layers``). A model that ships none is refused with the engine's own reason
    (``refusal``): every engine builds its MTP draft from the checkpoint's MTP layers."""
    given = speculation.mtp_layers
    if given is not None:
        if given != spec.mtp_layers:
            notes.append(f"MTP: {given} layer(s) as given (num_nextn_predict_layers=); {spec.id} ships "
                         f"{spec.mtp_layers}")
        return given
    if spec.mtp_layers < 1:
        raise UsageError(f"{spec.id} ships no MTP layers (num_nextn_predict_layers absent or 0 in its config, "
                         f"mtp_layers in a YAML spec): {refusal}", field="speculative_method")
    return spec.mtp_layers


def with_mtp_weights(spec: ModelSpec, loader: str, notes: list[str]) -> ModelSpec:
    """The spec an MTP-speculating plan budgets: the checkpoint's MTP weights loaded (by ``loader``, the
    engine's MTP draft), so none left out of the weights (``budgets.base.weights_per_gpu``)."""
    if spec.mtp_weights_bytes:
        notes.append(f"MTP weights: {loader} loads the checkpoint's MTP layers ({spec.mtp_weights_bytes:,} B, "
                     f"{spec.mtp_weights_bytes / 2**30:.2f} GiB): in the budget with the rest of the checkpoint")
    else:
        notes.append("MTP weights: assumed in the checkpoint's size (the model description gives no MTP share)")
    return replace(spec, mtp_weights_bytes=None)


def speculation_dict(speculation: Speculation | None, extra_slots: int) -> dict[str, object] | None:
    """The JSON object estimate and max-batch print (the names verify's ``sharing`` object uses for it)."""
    if speculation is None:
        return None
    return {"speculative_method": speculation.method, "num_speculative_tokens": speculation.num_speculative_tokens,
            "extra_slots": extra_slots, "draft": speculation.draft.id if speculation.draft is not None else None}


def parse_speculation(method: str | None, tokens: int | None, draft: ModelSpec | None,
                      mtp_layers: int | None) -> Speculation | None:
    """The library's keyword arguments as one value (None when no speculation is asked)."""
    if method is None and draft is not None:
        method = infer_method(draft.id)
    if method is None:
        if tokens or mtp_layers is not None:
            raise UsageError("name the speculative method (ngram, eagle, eagle3, mtp, draft_model)",
                             field="speculative_method")
        return None
    return Speculation(method.strip().lower(), tokens, draft, mtp_layers)


def infer_method(model_id: str) -> str:
    """The method vLLM's ``SpeculativeConfig`` picks for a draft given without one: EAGLE-3 or EAGLE
    heads by their name, any other model a draft model (``SpeculativeConfig.__post_init__``)."""
    name = model_id.lower()
    if "eagle3" in name or "eagle-3" in name:
        return "eagle3"
    if "eagle" in name:
        return "eagle"
    return "draft_model"
