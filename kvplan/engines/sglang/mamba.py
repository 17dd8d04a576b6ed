"""SGLang's split of a hybrid model's pool between recurrent-state slots and full-attention tokens.

Hybrid models (Mamba / Mamba-2 / gated-delta-net layers beside full-attention layers: Qwen3-Next, Qwen3.5,
Nemotron-H, Falcon-H1, granite-4-h, ...) keep one ``MambaPool`` row per request slot (conv + SSM state of every
recurrent layer, ``mamba_cache_per_req``, ``configs/mamba_utils.py`` ``BaseLinearStateParams``) and a token pool for
the full-attention layers only. ``profile_max_num_token`` takes the same ``rest`` as for any model (budget.py),
subtracts the state slots (``handle_max_mamba_cache``) and divides what is left by the full-attention cell size.

By release (read in the wheels):
- 0.5.3 and older (``model_runner.py`` ``ModelRunner.__init__``, hybrid GDN): ``max_mamba_cache_size`` is
  ``--max-running-requests`` when given, else 512, whatever the memory; running requests <= that.
- 0.5.4 - 0.5.16 (``model_runner.py`` 0.5.4 - 0.5.6, ``model_runner_kv_cache_mixin.py`` 0.5.7 - 0.5.15,
  ``mem_cache/kv_cache_configurator.py`` 0.5.16; ``handle_max_mamba_cache``): the state gets
  ``rest x r / (1 + r)`` with ``r = --mamba-full-memory-ratio`` (0.9), ``max_mamba_cache_size =
  int(that x 2^30 // mamba_cache_per_req)``, and ``max_mamba_cache_size x mamba_cache_per_req`` leaves the
  tokens' share.
- 0.5.17 (``kv_cache_configurator.py`` ``_handle_max_mamba_cache``): the pool's padding row is paid from the same
  share: ``max_mamba_cache_size = int((share - per_req) // per_req)``, ``(max_mamba_cache_size + 1) x per_req``
  subtracted.
``_resolve_max_num_reqs`` (0.5.4 on) caps running requests at ``max_mamba_cache_size // 3``
(``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO``: the radix cache keeps states of cached prefixes in the rest).
0.5.17's ``--mamba-radix-cache-strategy auto`` (``arg_groups/overrides.py``) picks ``extra_buffer`` with the overlap
scheduler for the models that support it (ping-pong buffers: slots // 5); kvplan keeps // 3 and says so.
SGLang does this arithmetic in float GiB; kvplan repeats it in floats so the counts agree to the slot and token.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.engines.layout import CacheLayout
from kvplan.engines.version import Version
from kvplan.record import dataclass, replace
from kvplan.spec import Recurrent

GIB = 1 << 30
MAMBA_FULL_MEMORY_RATIO = 0.9
"""``ServerArgs.mamba_full_memory_ratio``: state memory / full-attention KV memory (0.5.4 on)."""
RUNNING_REQUESTS_RATIO = 3
"""``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO``: state slots per running request (0.5.4 on)."""
FIXED_SLOTS = 512
"""0.5.3 and older: the state slots when --max-running-requests is not given."""
SPECULATIVE_NOTE = ("SGLang also keeps intermediate recurrent states for speculative decoding (handle_max_mamba_cache: "
                    "per-request state x running requests x draft tokens, out of the same pool); kvplan does not "
                    "take them out: the tokens and slots are optimistic")
RATIO_SINCE: Version = (0, 5, 4)
PADDING_ROW_SINCE: Version = (0, 5, 17)


@dataclass(frozen=True)
class MambaSplit:
    """How SGLang divides one GPU's pool (``kv_bytes``) between state slots and full-attention tokens."""

    per_request: int
    """``mamba_cache_per_req``: bytes of every recurrent layer's conv + SSM state for one request slot."""
    slots: int
    """``max_mamba_cache_size``: the state slots (the log's 'Mamba Cache is allocated' line)."""
    state_bytes: int
    """The memory the state takes out of the pool."""
    token_bytes: int
    """What is left for the full-attention layers' tokens."""
    max_running_requests: int
    """The cap the slots put on running requests."""
    rule: str


def per_request_bytes(layouts: Sequence[CacheLayout]) -> int:
    """``mamba_cache_per_req`` on the GPU holding the most state (0 when the model has no recurrent layer)."""
    return max(sum(g.count * g.state.bytes for g in layout.groups
                   if isinstance(g.layer, Recurrent) and g.state is not None) for layout in layouts)


def has_tokens(layouts: Sequence[CacheLayout]) -> bool:
    """Some layer holds tokens beside the state (a hybrid, not a pure Mamba model)."""
    return any(g.layer.caches_tokens for layout in layouts for g in layout.groups
               if not isinstance(g.layer, Recurrent))


def split(kv_bytes: int, per_request: int, version: Version, max_running_requests: int | None) -> MambaSplit:
    """The split of ``kv_bytes`` by ``version``'s rule (``per_request`` > 0)."""
    rest = kv_bytes / GIB  # SGLang's rest_memory, GiB as a float
    if version < RATIO_SINCE:
        slots = max_running_requests or FIXED_SLOTS
        state = slots * per_request
        rule = (f"SGLang < 0.5.4: {slots:,} state slots (--max-running-requests, else 512; model_runner.py "
                "ModelRunner.__init__), taken from the pool before the tokens")
        cap = slots
    else:
        share = rest * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO) * GIB
        if version < PADDING_ROW_SINCE:
            slots = max(0, int(share // per_request))
            state = slots * per_request
        else:  # the padding row is paid from the same share
            slots = max(0, int((share - per_request) // per_request))
            state = (slots + 1) * per_request
        rule = (f"SGLang splits the pool as --mamba-full-memory-ratio {MAMBA_FULL_MEMORY_RATIO} says (state : "
                f"full-attention KV; handle_max_mamba_cache): {slots:,} state slots (max_mamba_cache_size) of "
                f"{per_request:,} B, the rest for the full-attention tokens; running requests <= slots // "
                f"{RUNNING_REQUESTS_RATIO} (the radix cache keeps cached prefixes' states in the others)")
        cap = slots // RUNNING_REQUESTS_RATIO
        if version >= PADDING_ROW_SINCE:
            rule += ("; from 0.5.17 the auto strategy may pick extra_buffer (slots // 5) for the models that "
                     "support it")
    tokens = max(0, int((rest - state / GIB) * GIB))
    return MambaSplit(per_request, slots, state, tokens, cap, rule)


def token_layouts(layouts: Sequence[CacheLayout]) -> tuple[CacheLayout, ...]:
    """The layouts without their recurrent groups: what the token pool holds."""
    return tuple(replace(layout, groups=tuple(g for g in layout.groups if not isinstance(g.layer, Recurrent)))
                 for layout in layouts)
