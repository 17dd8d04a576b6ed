"""llama.cpp sharing, as llama-server runs it.

What the code does (ggml-org/llama.cpp):
- ``llama_kv_cache::seq_cp`` (``src/llama-kv-cache.cpp``): with the unified cache both sequences
  live in one stream, and a copy only adds the destination's id to the source's cells ("no data copy
  is necessary"): a prompt copied this way is stored once. Programs that decode a common prompt
  once and ``seq_cp`` it to every sequence (``examples/parallel``, ``examples/batched``) share it.
- llama-server gives each slot its own sequence and reuses only that slot's previous prompt
  (``cache_prompt``); it does not copy one request's prompt cells into another slot, so a prefix
  common to different requests is stored per slot.
kvplan models llama-server: nothing is stored once, and it has no rule for samples or beams.
"""

from __future__ import annotations

from kvplan.engines.sharing import SharingRule

SHARING = SharingRule(
    title="llama.cpp",
    prefix_note="llama-server stores a common prefix once per slot (its prompt cache is per slot); only "
                "programs that seq_cp one decoded prompt into every sequence of the unified cache store it once",
)
