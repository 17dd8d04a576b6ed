"""vLLM (V1) speculative decoding: draft layers in the KV pool and the slots each sequence holds.

Rules and where they come from (vllm-project/vllm):
- Draft layers join the pool: the proposer (``EagleProposer.load_model`` in
  ``vllm/v1/spec_decode/eagle.py``; the draft-model proposer likewise) registers its attention layers
  in the same ``static_forward_context`` as the target's, and ``GPUModelRunner.get_kv_cache_spec``
  gives every attention layer of the config a KV-cache spec: draft layers are grouped and paged with
  the target's, at the target's block size and cache dtype, each with its own bytes per token.
  The draft runs at the target's tensor-parallel size (``SpeculativeConfig``'s
  ``draft_tensor_parallel_size`` defaults to it), so kvplan shards its heads the same way.
- MTP (``DeepSeekMTP``, ``vllm/model_executor/models/deepseek_mtp.py``; ``glm4_moe_mtp.py``,
  ``qwen3_next_mtp.py`` alike): ``num_nextn_predict_layers`` decoder layers (``ModelSpec.mtp_layers``)
  whose attention caches like the target's (MLA for DeepSeek). ``SpeculativeConfig.__post_init__``
  (``vllm/config/speculative.py``, read in 0.33): a target ``hf_config_override`` turns into no MTP
  model type is refused ("Unsupported speculative method: 'mtp'"); ``num_speculative_tokens``
  defaults to the layer count (``n_predict``) and above it must be a multiple of it.
- n-gram proposals need no model and no cache.
- Slots: ``Scheduler.__init__`` (``vllm/v1/core/sched/scheduler.py``) sets ``num_lookahead_tokens``
  to ``num_speculative_tokens`` for EAGLE / MTP (``use_eagle``) and draft models
  (``uses_draft_model``), 0 for n-gram; a decoding request schedules its last token plus its k draft
  tokens, and ``KVCacheManager.allocate_slots`` allocates for computed + new + lookahead tokens
  (capped at max_model_len): a sequence of ``context`` tokens holds ``context + k`` slots (n-gram) or
  ``context + 2k`` (EAGLE, MTP, draft model).
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
from kvplan.spec import ModelSpec

_CACHING_PROPOSERS = frozenset({"eagle", "eagle3", "mtp", "draft_model"})


def speculate(spec: ModelSpec, speculation: Speculation) -> SpeculativeLayout:
    notes: list[str] = []
    k = speculation.num_speculative_tokens
    count = 0
    if speculation.method == "mtp":
        count = mtp_count(spec, speculation, "vLLM builds no MTP draft for it (SpeculativeConfig: "
                          "\"Unsupported speculative method: 'mtp'\")", notes)
        if k is not None and k > count and k % count:
            raise UsageError(f"num-speculative-tokens {k}: vLLM runs the {count} MTP layer(s) in turn and needs a "
                             f"multiple of {count} above it (SpeculativeConfig: 'must be divisible by n_predict')",
                             field="num_speculative_tokens")
    if k is None and speculation.method != "mtp":  # SpeculativeConfig.__post_init__: the draft's n_predict, which
        # kvplan's specs do not carry
        raise UsageError(f"vLLM needs num_speculative_tokens for {speculation.method} unless the draft's config has "
                         "n_predict (SpeculativeConfig): give --num-speculative-tokens", field="num_speculative_tokens")
    if k is None:  # SpeculativeConfig: num_speculative_tokens defaults to the MTP model's n_predict
        k = count
        notes.append(f"MTP: k = {k}, vLLM's default (num_nextn_predict_layers) when num_speculative_tokens "
                     "is not given")
    lookahead = k if speculation.method in _CACHING_PROPOSERS else 0
    notes.append(f"vLLM speculative decoding ({speculation.method}, k = {k}): each running sequence holds "
                 f"{k + lookahead} slots beyond its context ({k} draft tokens being verified"
                 + (f" + {lookahead} lookahead for the proposer's KV)" if lookahead else ")"))
    if speculation.method == "ngram":
        notes.append("n-gram proposals use no model and no KV cache")
        return SpeculativeLayout(spec, k + lookahead, tuple(notes), capped_at_max_model_len=True)
    if speculation.method == "mtp":
        last = spec.layers[-1]
        if not last.attends_all:
            raise UsageError(f"kvplan has no MTP rule for a model whose last layer is {last.kind}",
                             field="speculative_method")
        layers = (*spec.layers, replace(last, count=count))
        notes.append(f"MTP: {count} layer(s) caching like the model's {last.kind} layers join the KV pool")
        # the MTP proposer loads the layers the main model skipped (spec_decode/eagle.py load_model)
        loaded = with_mtp_weights(spec, "vLLM's MTP proposer", notes)
        return SpeculativeLayout(replace(loaded, layers=layers), k + lookahead, tuple(notes),
                                 capped_at_max_model_len=True)
    draft = speculation.draft
    assert draft is not None
    weights = None
    if spec.weights_bytes is not None and draft.weights_bytes is not None:
        weights = spec.weights_bytes + draft.weights_bytes
    else:
        notes.append(f"draft {draft.id}: weights size unknown, not counted in the budget")
        weights = spec.weights_bytes
    notes.append(f"draft {draft.id}: its {draft.num_layers} layer(s) join the KV pool at the target's block "
                 f"size, cache dtype and tensor-parallel size; its weights ({(draft.weights_bytes or 0) / 2**30:.2f} "
                 "GiB) are in the budget, its activations are not")
    combined = replace(spec, layers=(*spec.layers, *draft.layers), weights_bytes=weights)
    return SpeculativeLayout(combined, k + lookahead, tuple(notes), capped_at_max_model_len=True)
