"""llama.cpp layout rules: a cache of ``n_ctx`` cells sized up front, shared by the parallel sequences.

Rules (ggml-org/llama.cpp, current rules only; see docs/engines.md for their history):
- Cells: ``llama_context`` pads ``n_ctx`` to a multiple of 256 (PR #17046); with the unified KV
  cache (llama-server's default) ``batch`` sequences of ``context`` tokens need
  ``n_ctx = batch x context`` cells. Per layer ``K [n_embd_k_gqa, cells]`` and ``V [n_embd_v_gqa, cells]``
  in ``--cache-type-k`` / ``--cache-type-v`` (default f16) (``src/llama-kv-cache.cpp``).
- Sliding-window layers (``src/llama-kv-cache-iswa.cpp``) get a second cache of
  ``pad256(min(n_ctx, n_swa x n_seq + n_ubatch))`` cells, n_ubatch 512 by default; Llama 4's chunked
  layers use the same cache with n_swa = chunk. With ``--swa-full`` that cache is as large as the
  base one (``size_swa = swa_full ? size_base : ...``); llama-server's default is off
  (``common_params::swa_full``), the C API's ``llama_context_default_params`` turns it on. Only architectures llama.cpp implements SWA for
  have one (gemma2/3/3n, cohere2, gpt-oss, llama4, ...); Mistral's window is ignored.
- MLA (DeepSeek; PR #19067): one 576-wide K row per cell and no V tensor (V is a view of K).
- Recurrent layers (``llama_memory_recurrent``): one slot per sequence, conv ``(d_conv - 1) x conv_dim``
  and SSM state, both float32.
"""

from __future__ import annotations

from kvplan.dtypes import KVDType
from kvplan.engines.layout import (
    HOST_POOL,
    CacheLayout,
    EngineOptions,
    GroupRule,
    KindRules,
    build_groups,
    cacheless_group,
    check_kv_dtype,
    group_by_kind,
    holds_nothing,
    no_tensor_parallel,
)
from kvplan.engines.rules import SlidingCells, UnifiedCells
from kvplan.engines.version import LATEST, Version
from kvplan.errors import UsageError
from kvplan.layouts.base import TokenCost
from kvplan.record import dataclass
from kvplan.spec import (
    MLA,
    ChunkedLocal,
    FullAttention,
    KVAttention,
    LocalAttention,
    ModelSpec,
    NoCache,
    Recurrent,
    SharedKV,
    SlidingWindow,
)

CELL_PAD = 256
DEFAULT_N_UBATCH = 512
# model_types whose llama.cpp architecture has an interleaved sliding-window cache. Not phi3: llama.cpp turned
# Phi's SWA off ("Phi SWA is currently disabled", ggml-org/llama.cpp#13676; src/models/phi3.cpp load_arch_hparams
# sets swa_type NONE and n_swa 0), so its sliding layers hold n_ctx cells like the others and the log says n_swa = 0.
SWA_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "gemma3n", "cohere2", "gpt_oss", "llama4",
                             "exaone4", "olmo3"})
KV_DTYPES = frozenset({"float32", "float16", "bfloat16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"})
_CELLS = UnifiedCells(CELL_PAD)


HOST_KV = HOST_POOL
"""``CacheLayout.pool`` of a llama.cpp cache kept in host memory (``--no-kv-offload``)."""
# llama.cpp src/llama-kv-cache.cpp, llama_kv_cache's constructor: each layer's K and V tensors go to
# ggml_backend_cpu_buffer_type() unless `offload` (cparams.offload_kqv, which -nkvo clears) picks the
# layer's device buffer: with -nkvo the whole cache is plain (pageable) host memory.
HOST_KV_NOTE = ("llama.cpp --no-kv-offload: the KV cache is in host memory (ggml's CPU buffer, not pinned), the GPU "
                "holds none of it; the kv_cache row is host memory")


def layout(spec: ModelSpec, kv_dtype: KVDType, version: Version, options: EngineOptions) -> CacheLayout:
    check_kv_dtype("llama.cpp", KV_DTYPES, kv_dtype)
    no_tensor_parallel("llama.cpp", options)
    if version != LATEST:
        raise UsageError("kvplan models llama.cpp's current rules only: leave out the engine version",
                         field="engine_version")
    if options.block_size is not None:
        raise UsageError("llama.cpp has no block size: its cache is n_ctx cells (padded to 256)", field="block_size")
    assumptions = [
        "llama.cpp unified KV cache (llama-server's default): n_ctx = batch x context cells, padded to 256"
    ]
    has_swa = spec.model_type in SWA_MODEL_TYPES
    if any(isinstance(layer, LocalAttention) for layer in spec.layers):
        if has_swa and options.swa_full:
            assumptions.append("llama.cpp --swa-full: the sliding-window cache has n_ctx cells, like the base cache")
        elif has_swa:
            assumptions.append(f"llama.cpp sliding-window cache: n_swa x batch + n_ubatch ({DEFAULT_N_UBATCH}) cells "
                               "(llama-server's default; --swa-full makes it n_ctx)")
        else:
            assumptions.append(f"llama.cpp implements no sliding window for {spec.model_type}: every layer is full")
    if options.no_kv_offload:
        assumptions.append(HOST_KV_NOTE)
    windowed = has_swa and not options.swa_full
    context = _Context(kv_dtype, windowed)
    groups = build_groups(spec, lambda layer, first: group_by_kind(RULES, layer, first, context, "llama.cpp"))
    return CacheLayout("llamacpp", "current", kv_dtype, None, groups, tuple(assumptions),
                       pool=HOST_KV if options.no_kv_offload else None)


@dataclass(frozen=True)
class _Context:
    """What llama.cpp's rules read besides the layer."""

    dtype: KVDType
    has_swa: bool
    """The architecture has a sliding-window cache and --swa-full is off."""


def _full(layer: KVAttention, first: int, ctx: _Context) -> GroupRule:
    return GroupRule(layer, first, layer.token_cost(ctx.dtype), _CELLS)


def _windowed(layer: LocalAttention, first: int, ctx: _Context) -> GroupRule:
    """Sliding layers, and Llama 4's chunked layers with n_swa = chunk; full where llama.cpp has no SWA cache."""
    if not ctx.has_swa:
        return _full(layer, first, ctx)
    return GroupRule(layer, first, layer.token_cost(ctx.dtype), SlidingCells(layer.span, DEFAULT_N_UBATCH, CELL_PAD))


def _mla(layer: MLA, first: int, ctx: _Context) -> GroupRule:
    width = layer.kv_lora_rank + layer.qk_rope_head_dim
    nbytes = ctx.dtype.vector_bytes(width)
    cost = TokenCost(nbytes, f"K row of {width} ({layer.kv_lora_rank} + {layer.qk_rope_head_dim}) = {nbytes} B, no V")
    return GroupRule(layer, first, cost, _CELLS)


def _recurrent(layer: Recurrent, first: int, ctx: _Context) -> GroupRule:
    state = layer.state_cost(conv_columns=layer.conv_kernel - 1, conv_elem_bytes=4, ssm_elem_bytes=4)
    return cacheless_group(layer, first, state)


RULES: KindRules[_Context] = {
    FullAttention: _full,
    SlidingWindow: _windowed,
    ChunkedLocal: _windowed,
    MLA: _mla,
    Recurrent: _recurrent,
    SharedKV: holds_nothing,
    NoCache: holds_nothing,
}
"""llama.cpp's cache rule for each layer kind (``group_by_kind`` refuses a kind missing here)."""
