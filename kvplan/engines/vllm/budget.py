"""vLLM's GPU budget: the KV memory a V1 engine finds at start-up.

``vllm/v1/worker/gpu_worker.py::Worker.determine_available_memory`` and ``vllm/utils/mem_utils.py``:
available = ceil(total x gpu_memory_utilization) - (weights + activation peak + non-torch memory)
- CUDA-graph estimate. Defaults: utilization 0.92 from v0.21 (0.90 before); the CUDA-graph estimate
from v0.21 unless --enforce-eager; ``--kv-cache-memory`` replaces the whole calculation.
``max_num_batched_tokens`` (the profiled batch) defaults to 8192 with chunked prefill on GPUs of
70 GiB and more, 2048 below (``EngineArgs._set_default_args``, OpenAI server); before V1 (v0.7),
chunked prefill was off and the profile ran ``max(max_model_len, 2048)`` tokens.
"""

from __future__ import annotations

import math

from kvplan.budgets.base import GIB, GpuBudget, MemoryItem, Settings, activation_bytes, weights_per_gpu
from kvplan.engines.protocol import Demand
from kvplan.engines.version import Version
from kvplan.spec import ModelSpec

UTIL_092_SINCE = (0, 21)
CUDAGRAPH_ESTIMATE_SINCE = (0, 21)
V1_SINCE = (0, 8)  # V1 (chunked prefill on by default) became the default engine in v0.8
# Assumed, from the logs collected in tests/data/engine_logs_dev.yaml (docs/accuracy.md).
NON_TORCH_BYTES = int(0.35 * GIB)
NON_TORCH_TP_BYTES = int(0.6 * GIB)  # NCCL buffers and custom all-reduce with tp > 1
CUDAGRAPH_BYTES = int(0.35 * GIB)


def default_util(version: Version) -> float:
    return 0.92 if version >= UTIL_092_SINCE else 0.90


def default_batched_tokens(total_bytes: int, version: Version, max_model_len: int) -> int:
    if version < V1_SINCE:
        return max(max_model_len, 2048)
    return 8192 if total_bytes >= 70 * GIB else 2048


def default_max_num_seqs(total_bytes: int, version: Version) -> int:
    return 1024 if version >= V1_SINCE and total_bytes >= 70 * GIB else 256


def budget(spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
           settings: Settings) -> GpuBudget:
    max_model_len = demand.max_model_len
    util = settings.gpu_memory_utilization or default_util(version)
    tokens = settings.max_num_batched_tokens or default_batched_tokens(total_bytes, version, max_model_len)
    seqs = settings.max_num_seqs or default_max_num_seqs(total_bytes, version)
    defaults = {"gpu_memory_utilization": util, "max_num_batched_tokens": tokens, "max_num_seqs": seqs}
    requested = math.ceil(total_bytes * util)
    items = [MemoryItem("budget", requested, "given" if settings.gpu_memory_utilization else "computed",
                        f"ceil(total x {util:g})")]
    weights = weights_per_gpu(spec, tp * pp, settings)
    # --- weight offload (--cpu-offload-gb): see offload.py weights_on_gpu ---
    if settings.cpu_offload_bytes:
        from kvplan.engines.vllm.offload import weights_on_gpu

        embedding = (spec.vocab_size or 0) * (spec.hidden_size or 0) * spec.dtype_bytes // tp
        weights = weights_on_gpu(weights, settings.cpu_offload_bytes, embedding)
    # --- end weight offload ---
    items.append(weights)
    if settings.kv_cache_memory_bytes is not None:
        items.append(MemoryItem("kv_cache", settings.kv_cache_memory_bytes, "given", "--kv-cache-memory"))
        return GpuBudget(total_bytes, tuple(items), settings.kv_cache_memory_bytes, defaults,
                         ("--kv-cache-memory given: vLLM skips memory profiling",))
    act, how = activation_bytes(spec, tokens, tp, seqs)
    non_torch = NON_TORCH_BYTES + (NON_TORCH_TP_BYTES if tp > 1 else 0)
    cudagraph = CUDAGRAPH_BYTES
    # measured items (a calibration read from an engine log, kvplan.logs) replace kvplan's estimates
    tags = {"activation": how, "non_torch": "cuBLAS/NCCL/custom all-reduce",
            "cudagraph": "vLLM >= 0.21 subtracts its CUDA-graph estimate"}
    values = {"activation": act, "non_torch": non_torch, "cudagraph": cudagraph}
    for name in values:
        measured = getattr(settings, f"{name}_bytes")
        if measured is not None:
            values[name], tags[name] = measured, "measured (calibration)"
    subtract_graphs = version >= CUDAGRAPH_ESTIMATE_SINCE and not settings.enforce_eager
    for name in ("activation", "non_torch", "cudagraph"):
        if name != "cudagraph" or subtract_graphs:
            measured = tags[name] == "measured (calibration)"
            items.append(MemoryItem(name, values[name], "given" if measured else "assumed", tags[name]))
    act, non_torch = values["activation"], values["non_torch"]
    cudagraph = values["cudagraph"] if subtract_graphs else 0
    kv = requested - weights.bytes - act - non_torch - cudagraph
    items.append(MemoryItem("kv_cache", kv, "computed", "budget - weights - activation - non_torch - cudagraph"))
    estimated = [n.replace("_", "-") for n in values
                 if tags[n] != "measured (calibration)" and (n != "cudagraph" or subtract_graphs)]
    notes = (f"vLLM {', '.join(estimated)} memory: kvplan's estimates; vLLM logs 'Available KV cache memory' at "
             "start-up: pass it as --kv-cache-memory, or calibrate from the log (kvplan log --save), to plan "
             "exactly",) if estimated else ()
    return GpuBudget(total_bytes, tuple(items), kv, defaults, notes)
