"""TensorRT-LLM (PyTorch backend) speculative decoding: the layers its KV cache holds and the slots of
each sequence.

Rules (NVIDIA/TensorRT-LLM, ``tensorrt_llm/_torch/``; read in several 1.x versions of these files and the
2026 main branch: they moved between releases, and kvplan follows the newest where they differ):
- One-model drafts (MTP, EAGLE-3 with ``eagle3_one_model``, its default) run inside the target's engine:
  ``get_num_spec_layers`` (``speculative/utils.py``) adds ``num_nextn_predict_layers`` (MTP) or
  ``num_eagle_layers`` (EAGLE-3; 1 when unset) to the layers of the target's ``KVCacheManager``
  (``_create_kv_cache_manager`` in ``pyexecutor/_util.py``), which has one head count and head size
  for all its layers: the draft layers cache like the target's.
- ``get_num_extra_kv_tokens`` (``speculative/utils.py``): one-model modes hold ``max_draft_len - 1`` extra
  tokens per sequence, and ``KVCacheManager.prepare_resources`` (``pyexecutor/resource_manager.py``) adds a
  slot for each of the request's draft tokens (``max_draft_len``) after its context and on every
  generation step; rejected ones are rewound. A sequence of ``context`` tokens holds
  ``context + 2 x max_draft_len - 1`` slots (one-model), ``context + max_draft_len`` (two-model, n-gram).
  A sequence of max_seq_len holds them too (``SpeculativeLayout.capped_at_max_model_len`` False):
  ``create_py_executor`` (``pyexecutor/py_executor_creator.py``) gives the ``KVCacheManager`` max_seq_len +
  ``get_num_extra_kv_tokens`` + ``max_total_draft_tokens`` (+ 1 + the draft tokens again with the overlap
  scheduler) while requests are held to the user's (``net_max_seq_len``), and the n-gram drafter pads its
  list to max_draft_len (``speculative/ngram.py``). The capacity scheduler's reservation
  (``KVCacheManager.get_needed_resource_to_completion``) counts prompt + max_new_tokens only.
- MTP: ``max_draft_len`` is the MTP config's ``num_nextn_predict_layers`` (``update_spec_config_from_model_config``),
  the checkpoint's MTP layers (``ModelSpec.mtp_layers``; a model that ships none is refused).
  A checkpoint with one MTP layer runs MTP-Eagle one-model (``MTPDecodingConfig.spec_dec_mode``), and
  ``get_num_spec_layers`` gives it that one layer however many tokens it drafts (main; earlier 1.x gave
  it ``num_nextn_predict_layers``, the draft length: said in the notes).
- Draft-target (``DraftTargetDecodingConfig``): the draft gets a ``KVCacheManager`` of its own and
  ``KvCacheCreator._get_kv_size_per_token`` (``pyexecutor/_util.py``) adds its bytes per token (its own
  config, the target's mapping) to the target's: both caches get the same token count out of one
  budget. 1.x ran it two-model (k slots); main runs it one-model by default (``_draft_target_one_model``),
  which adds ``max_draft_len - 1`` extra tokens: kvplan counts k and says so.
- N-gram (``NGramDecodingConfig``): no model, no cache; ``max_draft_len`` slots per sequence.
- EAGLE-1/2 heads run only in the TensorRT engine backend: refused.
"""

from __future__ import annotations

from kvplan.engines.speculative import (
    Speculation,
    SpeculativeLayout,
    mtp_count,
    with_mtp_weights,
)
from kvplan.errors import UsageError
from kvplan.record import replace
from kvplan.spec import LayerSpec, ModelSpec


def one_model_slots(max_draft_len: int) -> int:
    """Slots beyond the context: ``num_extra_kv_tokens`` (max_draft_len - 1) + the draft tokens."""
    return 2 * max_draft_len - 1


def speculate(spec: ModelSpec, speculation: Speculation, pp: int) -> SpeculativeLayout:
    method = speculation.method
    if method == "eagle":
        raise UsageError("TensorRT-LLM's PyTorch backend runs EAGLE-3 heads (Eagle3DecodingConfig), not EAGLE-1/2: "
                         "use eagle3", field="speculative_method")
    if pp > 1 and method != "ngram":
        raise UsageError("kvplan has no rule for TensorRT-LLM speculative decoding with pipeline parallelism",
                         field="pp")
    k = speculation.num_speculative_tokens
    if k is None and method != "mtp":  # MTP defaults to the checkpoint's layers; kvplan plans the others as given
        raise UsageError(f"TensorRT-LLM {method}: give --num-speculative-tokens (its decoding config's max_draft_len)",
                         field="num_speculative_tokens")
    notes: list[str] = []
    if method == "ngram":
        assert k is not None
        notes.append(f"TensorRT-LLM n-gram speculation (max_draft_len {k}): no model and no KV cache; each sequence "
                     f"holds {k} draft-token slots beyond its context")
        return SpeculativeLayout(spec, k, tuple(notes))
    if method == "draft_model":
        assert k is not None and speculation.draft is not None
        draft = speculation.draft
        notes.append(f"TensorRT-LLM draft-target (max_draft_len {k}): draft {draft.id} has a KV cache of its own with "
                     "the target's token count, its bytes per token added to the target's (KvCacheCreator); each "
                     f"sequence holds {k} draft-token slots beyond its context, as 1.x's two-model mode does (the "
                     f"one-model default of newer releases holds {k - 1} more)")
        return SpeculativeLayout(_combined(spec, draft.layers, draft, notes), k, tuple(notes))
    count = 0
    if method == "mtp":  # a model without MTP layers is refused first, whatever its layers
        count = mtp_count(spec, speculation, "TensorRT-LLM's MTP runs the checkpoint's num_nextn_predict_layers "
                          "layers (update_spec_config_from_model_config) and has none to run", notes)
    target = _uniform_layer(spec)
    if method == "mtp":
        k = k or count
        layers = (replace(target, count=count),)
        notes.append(f"TensorRT-LLM MTP (one-model, max_draft_len {k}): {count} MTP layer(s) join the target's "
                     "KV cache manager")
        if k > count:
            notes.append(f"MTP: {k} draft tokens from {count} layer(s) is MTP-Eagle mode, the layer reused; "
                         f"TensorRT-LLM 1.x before the fix in get_num_spec_layers gave the cache {k} MTP layers")
        # the MTP layers are built, so loaded, with an MTP spec_config (modeling_deepseekv3.py __init__)
        combined = replace(with_mtp_weights(spec, "TensorRT-LLM's MTP worker", notes), layers=(*spec.layers, *layers))
    else:  # eagle3: one-model by default
        assert k is not None and speculation.draft is not None
        draft = speculation.draft
        count = draft.num_layers
        notes.append(f"TensorRT-LLM EAGLE-3 one-model (eagle3_one_model, the default; max_draft_len {k}): the head's "
                     f"{count} layer(s) join the target's KV cache manager and cache like its layers; two-model "
                     "EAGLE-3 gives the head a cache of its own at its own size and k slots, which kvplan does "
                     "not plan")
        own = {(g.kind, *g.cache_shape()) for g in draft.layers}
        if own != {(target.kind, *target.cache_shape())}:
            notes.append(f"draft {draft.id}: its layers are declared with another cache shape; the target's manager "
                         "holds them at the target's")
        combined = _combined(spec, (replace(target, count=count),), draft, notes)
    extra = one_model_slots(k)
    notes.append(f"each sequence holds {extra} slots beyond its context: num_extra_kv_tokens {k - 1} "
                 f"(max_draft_len - 1) + {k} draft tokens (get_num_extra_kv_tokens, prepare_resources)")
    return SpeculativeLayout(combined, extra, tuple(notes))


def _combined(spec: ModelSpec, layers: tuple[LayerSpec, ...], draft: ModelSpec, notes: list[str]) -> ModelSpec:
    weights = spec.weights_bytes
    if weights is not None and draft.weights_bytes is not None:
        weights += draft.weights_bytes
    else:
        notes.append(f"draft {draft.id}: weights size unknown, not counted in the budget")
    return replace(spec, layers=(*spec.layers, *layers), weights_bytes=weights)


def _uniform_layer(spec: ModelSpec) -> LayerSpec:
    """The target's cache layer that one-model draft layers copy (one head count and size per manager)."""
    shapes = {g.cache_shape() for g in spec.layers}
    if not all(g.caches_tokens for g in spec.layers) or len(shapes) != 1:
        raise UsageError(f"kvplan's TensorRT-LLM one-model speculation rule covers targets whose layers all cache "
                         f"alike; {spec.id} does not", field="speculative_method")
    return spec.layers[-1]
