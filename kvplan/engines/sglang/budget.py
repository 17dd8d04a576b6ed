"""SGLang: ``mem_fraction_static`` of the GPU holds weights and KV; the rest is for activations.

``ModelRunnerKVCacheMixin.profile_max_num_token`` (model_runner_kv_cache_mixin.py): the KV pool gets
``free memory after loading weights - total x (1 - mem_fraction_static)``. The default fraction
(``ServerArgs._handle_gpu_memory_settings``, server_args.py) reserves, in MiB,
``512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2 + tp x pp / 8 x 1024`` (at
least 10,240 on GPUs over 60 GiB) and sets ``mfs = round((gpu_MiB - reserved) / gpu_MiB, 3)``; the
chunked prefill size and CUDA-graph batch come from the GPU's size. Before that rule (PR #10975,
about v0.5.3; the boundary is approximate) the default depended on tp alone: 0.88, 0.87 (tp >= 2),
0.85 (tp >= 4), 0.81 (tp >= 8), 0.79 (tp >= 16). Speculative decoding before 0.5.14: see
``speculative.py`` (the draft's weights and pool outside the fraction, 2 or 6 GiB more reserved for them).
"""

from __future__ import annotations

from kvplan.budgets.base import GIB, GpuBudget, MemoryItem, Settings, kv_item, weights_per_gpu
from kvplan.engines.protocol import Demand
from kvplan.engines.version import LATEST, Version
from kvplan.spec import ModelSpec

GPU_SIZE_RULE_SINCE = (0, 5, 3)

# Assumed: CUDA context and allocator overhead present before the weights' "avail mem" reading.
CONTEXT_BYTES = int(0.6 * GIB)


def _gpu_bucket(gpu_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) SGLang picks for a GPU of this size."""
    small_tp = tp < 4
    if gpu_mib < 20 * 1024:
        return 2048, 8
    if gpu_mib < 35 * 1024:
        return 2048, 24 if small_tp else 80
    if gpu_mib < 60 * 1024:
        return 4096, 32 if small_tp else 160
    if gpu_mib < 160 * 1024:
        return 8192, 256 if small_tp else 512
    return 16384, 512


def default_mem_fraction_static(total_bytes: int, tp: int, pp: int, version: Version = LATEST,
                                speculative_mib: int = 0) -> float:
    """``speculative_mib``: what 0.5.3 - 0.5.13 reserved more for a draft, after the 10 GiB floor."""
    if version < GPU_SIZE_RULE_SINCE:
        return 0.79 if tp >= 16 else 0.81 if tp >= 8 else 0.85 if tp >= 4 else 0.87 if tp >= 2 else 0.88
    gpu_mib = total_bytes / (1 << 20)
    chunked, graph_bs = _gpu_bucket(gpu_mib, tp)
    reserved = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10240)
    reserved += speculative_mib
    return round((gpu_mib - reserved) / gpu_mib, 3)


def budget(spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
           settings: Settings) -> GpuBudget:
    from kvplan.engines.sglang.speculative import DEFAULT_MAX_RUNNING_REQUESTS, draft_apart, reserve_mib

    notes: list[str] = []
    apart = draft_apart(demand.speculative, version)  # before 0.5.14: the draft is sized outside the pool
    reserve = reserve_mib(apart) if apart is not None and version >= GPU_SIZE_RULE_SINCE else 0
    mfs = settings.mem_fraction_static or default_mem_fraction_static(total_bytes, tp, pp, version, reserve)
    if apart is not None and apart.target is not None:
        # the target worker profiled its pool before the draft worker loaded its weights
        spec = apart.target
        notes.append(f"SGLang < 0.5.14: the draft's weights load after the target's pool is sized, out of the "
                     "memory outside mem_fraction_static"
                     + (f" (reserved {reserve} MiB more for it)" if reserve and not settings.mem_fraction_static
                        else ""))
        if version < GPU_SIZE_RULE_SINCE and not settings.mem_fraction_static:
            notes.append("kvplan's SGLang fraction before 0.5.3 has no speculative reserve")
    weights = weights_per_gpu(spec, tp * pp, settings)
    items = [MemoryItem("static", int(total_bytes * mfs), "given" if settings.mem_fraction_static else "computed",
                        f"total x mem_fraction_static {mfs:g}"), weights,
             MemoryItem("non_torch", CONTEXT_BYTES, "assumed", "CUDA context before SGLang's free-memory reading")
             if settings.non_torch_bytes is None else
             MemoryItem("non_torch", settings.non_torch_bytes, "given", "measured (calibration)")]
    free_after_weights = total_bytes - items[-1].bytes - weights.bytes
    kv_memory = kv_item(settings, free_after_weights - int(total_bytes * (1 - mfs)),
                        "free after weights - total x (1 - mem_fraction_static)")
    items.append(kv_memory)
    kv = kv_memory.bytes
    items.append(MemoryItem("activation", int(total_bytes * (1 - mfs)), "computed",
                            "total x (1 - mem_fraction_static): activations and CUDA graphs"))
    defaults: dict[str, float | int] = {"mem_fraction_static": mfs}
    if demand.speculative is not None:  # _handle_speculative_decoding: 48 unless given
        defaults["max_running_requests"] = settings.max_num_seqs or DEFAULT_MAX_RUNNING_REQUESTS
    return GpuBudget(total_bytes, tuple(items), kv, defaults,
                     ("SGLang's free memory after loading weights is kvplan's estimate (total - weights - "
                      "CUDA context)", *notes))
