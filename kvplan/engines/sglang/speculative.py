"""SGLang speculative decoding: the draft worker's KV pool and the slots each request holds.

Rules read in sglang 0.5.14 and 0.5.23 (the PyPI wheels), ``python/sglang/srt/``:
- Algorithms (``--speculative-algorithm``): EAGLE, EAGLE3, NEXTN (an alias of EAGLE: DeepSeek-style MTP
  layers of the target checkpoint), STANDALONE (a small draft model), NGRAM (no model). kvplan's methods
  eagle, eagle3, mtp, draft_model and ngram map onto them one to one.
- The draft worker is a ``ModelRunner`` of its own (``is_draft_worker``) with its own token_to_kv_pool of
  the target's ``max_total_num_tokens`` tokens (the pool config is shared between the workers,
  ``pool_configurator.py``): draft and target address the same token indices.
- The target's token count pays for that pool: ``MemoryPoolConfigurator.__init__``
  (``model_executor/pool_configurator.py``) adds, for EAGLE / STANDALONE, ``int(cell_size x
  draft_layers / target_layers)`` to the target's bytes per token, where ``draft_layers`` is
  ``eagle_draft_num_layers`` (``spec_aux_hidden_state.py``: the draft config's
  ``num_nextn_predict_layers`` for MTP, else ``max(num_hidden_layers, num_attention_layers)``). It scales
  the target's own per-layer size: a draft whose layers cache another shape gets a pool of the same token
  count at its own size, which this count does not see.
- Weights: ``Scheduler.init_model_worker`` loads the target, then the draft worker, then sizes the pools,
  so the draft's weights are out of the memory the pool is carved from.
- Slots per running request: ``spec_decode_alloc_len_per_request`` (``utils/common.py``):
  ``max(speculative_num_steps x speculative_eagle_topk, speculative_num_draft_tokens)`` at page size 1.
  With topk 1 the draft-token count is steps + 1 (``_handle_eagle_family``, ``arg_groups/speculative_hook.py``);
  unset, ``_auto_choose_speculative_params`` picks (steps, topk, draft tokens) = (5, 4, 8) for Llama
  (``LlamaForCausalLM``) and (3, 1, 4) otherwise (before 0.5.8: (5, 4, 8) for architectures outside
  its list, said); NGRAM verifies ``speculative_num_draft_tokens`` (12 by
  default, ``_handle_ngram``) tokens per request. A request of context_len holds them too
  (``SpeculativeLayout.capped_at_max_model_len`` False): ``ModelRunner`` makes the req_to_token rows
  ``context_len + extra_max_context_len`` long, 4 + ``speculative_num_draft_tokens``.
- Before 0.5.14 (read in 0.5.3, 0.5.6, 0.5.8, 0.5.13; ``draft_apart``): the target worker sized its pool
  before the draft worker was built (``Scheduler.init_model_worker``), so the token count left the
  draft's layers and weights out, and ``ServerArgs._handle_gpu_memory_settings`` reserved 2 GiB (EAGLE
  family) or 6 GiB (STANDALONE) more outside ``mem_fraction_static`` for them (budget.py). Up to 0.5.6
  ``ModelRunner.init_memory_pool`` also grew both pools by ``max_running_requests x (steps x topk +
  draft tokens) + 100`` tokens (``headroom_tokens``; 0.5.7 dropped it).
- ``--max-running-requests`` defaults to 48 with speculation (``_handle_speculative_decoding``, 0.5.3;
  ``_handle_eagle_family``, 0.5.23).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.engines.layout import CacheLayout
from kvplan.engines.speculative import (
    Speculation,
    SpeculativeLayout,
    mtp_count,
    with_mtp_weights,
)
from kvplan.engines.version import Version
from kvplan.errors import UsageError
from kvplan.record import replace
from kvplan.spec import LayerSpec, ModelSpec

RULE_SINCE = "0.5.14"
POOL_RULE_SINCE: Version = (0, 5, 14)
"""From this release the target's token count pays for the draft's pool."""
HEADROOM_UNTIL: Version = (0, 5, 7)
"""Before this release both pools grew by the draft and verify tokens of max_running_requests."""
DEFAULT_MAX_RUNNING_REQUESTS = 48
ALGORITHMS = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE", "ngram": "NGRAM"}
NGRAM_DEFAULT_DRAFT_TOKENS = 12
# ModelConfig._config_draft_model (configs/model_config.py) turns only checkpoints with MTP layers into a
# NEXTN draft (DeepseekV3ForCausalLMNextN, Glm4MoeForCausalLMNextN, Qwen3NextForCausalLMMTP, ...), and
# ModelRunner treats num_nextn_predict_layers 0 as absent (model_runner.py)
_NO_NEXTN = "SGLang has no NEXTN draft for it (ModelConfig._config_draft_model)"
# model types whose automatic (steps, topk, draft tokens) every release read agrees on (0.5.3 - 0.5.23)
_SAME_AUTO_SINCE_0_5_3 = frozenset({"llama", "deepseek_v2", "deepseek_v3", "deepseek_v32", "gpt_oss"})


def auto_params(spec: ModelSpec, method: str) -> tuple[int, int, int]:
    """(speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens) SGLang picks when
    none is given (``_auto_choose_speculative_params``; STANDALONE always (3, 1, 4))."""
    if method != "draft_model" and spec.model_type == "llama":
        return 5, 4, 8
    return 3, 1, 4


def slots_per_request(steps: int, topk: int, draft_tokens: int) -> int:
    """Tokens one decode step allocates per request beyond its context (page size 1)."""
    return max(steps * topk, draft_tokens)


def speculate(spec: ModelSpec, speculation: Speculation, pp: int) -> SpeculativeLayout:
    method = speculation.method
    name = ALGORITHMS[method]
    if pp > 1:
        raise UsageError("kvplan has no rule for SGLang speculative decoding with pipeline parallelism",
                         field="pp")
    notes = [f"SGLang speculative decoding ({name})"]
    count = mtp_count(spec, speculation, _NO_NEXTN, notes) if method == "mtp" else 0  # refused first
    k = speculation.num_speculative_tokens
    if method == "ngram":
        assert k is not None  # Speculation requires it for every method but mtp
        notes.append(f"NGRAM: no draft model and no KV pool; each running request holds its {k} draft tokens "
                     "(--speculative-num-draft-tokens) beyond its context while they are verified")
        return SpeculativeLayout(spec, k, tuple(notes), speculation=speculation)
    layer = _uniform_cache_layer(spec)
    steps, topk, tokens = step_params(spec, speculation)
    if k is None:
        notes.append(f"{name}: --speculative-num-steps {steps}, --speculative-eagle-topk {topk}, "
                     f"--speculative-num-draft-tokens {tokens}, SGLang's choice for {spec.model_type} when none "
                     "is given")
        if spec.model_type not in _SAME_AUTO_SINCE_0_5_3:
            notes.append("SGLang before 0.5.8 chose 5 steps, topk 4, 8 draft tokens (20 slots) for architectures "
                         "outside its list: give --num-speculative-tokens to plan a pinned older release")
    else:
        notes.append(f"{name}: num-speculative-tokens {k} read as --speculative-num-steps {k} with "
                     f"--speculative-eagle-topk 1, so --speculative-num-draft-tokens {k + 1}")
    extra = slots_per_request(steps, topk, tokens)
    notes.append(f"each running request holds max({steps} x {topk}, {tokens}) = {extra} slots beyond its context "
                 "(page size 1)")
    notes.append("SGLang caps running requests at 48 with speculative decoding unless --max-running-requests "
                 "is given")
    if method == "mtp":
        notes.append(f"NEXTN: the draft worker's pool holds {count} MTP layer(s) caching like the target's, for "
                     f"as many tokens as the target's pool; from SGLang {RULE_SINCE} the target's token count pays "
                     "for them")
        # the NEXTN draft worker loads the layers the target skipped; it takes the target's embed_tokens
        # and shared_head.head instead of the checkpoint's copies (deepseek_weight_loader.py)
        loaded = with_mtp_weights(spec, "the NEXTN draft worker", notes)
        notes.append("MTP weights: SGLang's draft worker reuses the target's embeddings and head instead of the MTP "
                     "layer's own copies, which kvplan counts (an overestimate of up to 2 x vocab x hidden)")
        return SpeculativeLayout(_with_draft(loaded, layer, count, spec.weights_bytes), extra, tuple(notes),
                                 target=spec, speculation=speculation)
    draft = speculation.draft
    assert draft is not None
    count = draft.num_layers
    weights = spec.weights_bytes
    if weights is not None and draft.weights_bytes is not None:
        weights += draft.weights_bytes
    else:
        notes.append(f"draft {draft.id}: weights size unknown, not counted in the budget")
    notes.append(f"draft {draft.id}: its own KV pool of the target's token count; from SGLang {RULE_SINCE} the "
                 f"target's bytes per token grow by {count} of its own layer(s) for it (pool_configurator.py) and "
                 "the draft's weights are loaded before the pool is sized")
    own = _uniform_cache_layer(draft, role="draft")
    if own.cache_shape() != layer.cache_shape():
        notes.append(f"draft {draft.id}: its layers cache another shape than the target's; SGLang sizes the token "
                     "count as if they were the target's, so the memory its pool really takes differs from this plan")
    return SpeculativeLayout(_with_draft(spec, layer, count, weights), extra, tuple(notes), target=spec,
                             speculation=speculation)


def draft_apart(speculative: SpeculativeLayout | None, version: Version) -> SpeculativeLayout | None:
    """The speculative layout where this release sizes the draft outside the target's pool (before
    0.5.14), else None."""
    if speculative is None or speculative.target is None or version >= POOL_RULE_SINCE:
        return None
    return speculative


def reserve_mib(speculative: SpeculativeLayout) -> int:
    """``_handle_gpu_memory_settings`` (0.5.3 - 0.5.9; 0.5.10 - 0.5.13 keep 4 GiB for EAGLE, see fraction.py):
    MiB more kept outside mem_fraction_static (no longer used by the budget)."""
    assert speculative.speculation is not None
    return 6 * 1024 if speculative.speculation.method == "draft_model" else 2 * 1024


def step_params(target: ModelSpec, speculation: Speculation) -> tuple[int, int, int]:
    """(steps, topk, draft tokens) as ``speculate`` reads them."""
    k = speculation.num_speculative_tokens
    return auto_params(target, speculation.method) if k is None else (k, 1, k + 1)


def headroom_tokens(speculative: SpeculativeLayout, version: Version, max_running_requests: int | None) -> int:
    """Tokens both pools grew by before 0.5.7 (``ModelRunner.init_memory_pool``): max_running_requests x
    (steps x topk + draft tokens) + 100; 0 from 0.5.7."""
    if version >= HEADROOM_UNTIL or speculative.target is None or speculative.speculation is None:
        return 0
    steps, topk, tokens = step_params(speculative.target, speculative.speculation)
    return (max_running_requests or DEFAULT_MAX_RUNNING_REQUESTS) * (steps * topk + tokens) + 100


def target_pool(layouts: Sequence[CacheLayout], kv_bytes: int, speculative: SpeculativeLayout, version: Version,
                max_running_requests: int | None) -> tuple[list[CacheLayout], int, tuple[str, ...]]:
    """Before 0.5.14: the target's layers only (the draft's pool of as many tokens lies outside the KV
    memory), and before 0.5.7 the pool grown by ``headroom_tokens`` of the target's size."""
    assert speculative.target is not None
    first_draft = speculative.target.num_layers
    kept = [replace(lay, groups=tuple(g for g in lay.groups if g.first_layer < first_draft)) for lay in layouts]
    notes = [f"SGLang < {RULE_SINCE}: the token count is the target's alone; the draft's pool of as many tokens "
             "is allocated outside mem_fraction_static's KV memory"]
    headroom = headroom_tokens(speculative, version, max_running_requests)
    if headroom:
        page = kept[0].block_size or 1
        cell = max(lay.total_bytes(page, 1) for lay in kept) // page
        kv_bytes += headroom * cell
        notes.append(f"SGLang < 0.5.7: both pools grow by max_running_requests x (steps x topk + draft tokens) "
                     f"+ 100 = {headroom:,} tokens (ModelRunner.init_memory_pool)")
    return kept, kv_bytes, tuple(notes)


def _with_draft(spec: ModelSpec, layer: LayerSpec, count: int, weights: int | None) -> ModelSpec:
    """The target with ``count`` more layers caching like its own (what the token count divides by)."""
    return replace(spec, layers=(*spec.layers, replace(layer, count=count)), weights_bytes=weights)


def _uniform_cache_layer(spec: ModelSpec, role: str = "target") -> LayerSpec:
    """The one cache shape of a model all of whose layers cache alike; refused otherwise (SGLang's scaling
    by layer count is exact only there, and hybrid pools have rules of their own)."""
    from kvplan.engines.sglang.layout import HYBRID_SWA_MODEL_TYPES

    shapes = {group.cache_shape() for group in spec.layers}
    kinds = {group.kind for group in spec.layers}
    alike = all(group.caches_tokens for group in spec.layers) and len(shapes) == 1
    if not alike or spec.model_type in HYBRID_SWA_MODEL_TYPES:
        raise UsageError(f"kvplan's SGLang speculation rule covers models whose layers all cache alike; the {role} "
                         f"{spec.id} has {', '.join(sorted(kinds))} layers of {len(shapes)} cache shape(s)",
                         field="speculative_method")
    return spec.layers[-1]

