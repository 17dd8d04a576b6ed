"""vLLM on a GPU that other processes use too: what it takes, and whether it starts (``Engine.device_share``).

Read in vLLM's code, by release band:
- 0.9 on (V1; 0.9.2 ``v1/worker/gpu_worker.py`` ``Worker.init_device``, 0.19 on ``v1/worker/utils.py``
  ``request_memory``): after its CUDA context exists the worker snapshots the GPU (``MemorySnapshot``), asks for
  ``requested = total x gpu_memory_utilization`` and raises "Free memory on device ... on startup is less than
  desired GPU memory utilization" when the free memory is below it. Its KV budget is ``requested`` less its own
  growth since that snapshot (``memory_profiling``): other processes do not shrink it, they stop it starting.
  Started, it holds its context plus ``requested``. (0.9.0 and 0.9.1 not read: taken as 0.9.2.)
- 0.8 V1 (0.8.5 ``gpu_worker.py`` ``determine_available_memory``) and V0 before 0.7 (0.6.4 ``worker/worker.py``
  ``determine_num_available_blocks``): KV = total x util - torch's peak - every non-torch byte on the device
  (``mem_get_info`` used - torch allocated), other processes' included, with no start-up check: the others'
  memory comes out of this one's budget (``budget.py``), and it holds ``total x util - used``.
- V0 0.7 (0.7.3 ``worker/worker.py``: ``memory_profiling`` from ``baseline_snapshot``): the budget as from 0.9, no
  check: a cache that the free memory cannot hold fails when it is allocated (CUDA out of memory).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.budgets.base import GIB, MemoryItem
from kvplan.engines.device import DeviceShare, gib
from kvplan.engines.version import Version

CHECK_SINCE = (0, 9)
V1_SINCE = (0, 8)
V0_BASELINE_SINCE = (0, 7)
NCCL_BEFORE_SNAPSHOT_SINCE = (0, 11)  # init_worker_distributed_environment before the snapshot (0.11.0 gpu_worker)

# Assumed: memory the worker's init snapshot already finds in use by itself (CUDA context; from 0.11 with TP or PP
# also NCCL's buffers): the 0.19.0 H100 logs print 0.51 GiB at TP 1, 1.4-2.05 GiB with TP or PP > 1 (fitted.py).
SNAPSHOT_BYTES = int(0.51 * GIB)
SNAPSHOT_PARALLEL_BYTES = int(1.4 * GIB)


def counts_others(version: Version) -> bool:
    """Whether the KV budget subtracts every process's non-torch memory on the device (0.8 V1, V0 < 0.7)."""
    return version < V0_BASELINE_SINCE or V1_SINCE <= version < CHECK_SINCE


def own_context(tp: int, pp: int, version: Version) -> int:
    return SNAPSHOT_PARALLEL_BYTES if (tp > 1 or pp > 1) and version >= NCCL_BEFORE_SNAPSHOT_SINCE else SNAPSHOT_BYTES


def device_share(items: Sequence[MemoryItem], total_bytes: int, tp: int, pp: int, version: Version,
                 used_bytes: int) -> DeviceShare:
    requested = sum(i.bytes for i in items if i.name == "budget")
    util = requested / total_bytes  # the budget item is ceil(total x util), --kv-cache-memory or not
    if counts_others(version):
        takes = max(0, requested - used_bytes)
        return DeviceShare(takes, notes=(f"vLLM {'0.8' if version >= V1_SINCE else '< 0.7'} counts the "
                                         f"{gib(used_bytes)} others hold against its own {util:.3g} of the GPU",)
                           if used_bytes else ())
    context = own_context(tp, pp, version)
    free = total_bytes - used_bytes - context
    takes = context + requested
    if free >= requested:
        return DeviceShare(takes)
    if version >= CHECK_SINCE:
        why = (f"vLLM refuses to start: free memory on the device at start-up ({gib(free)} of {gib(total_bytes)}) "
               f"is less than its gpu_memory_utilization ({util:.3g}, {gib(requested)})")
    else:
        why = (f"vLLM V0 0.7 does not check: its {gib(requested)} do not fit the {gib(free)} free, and allocating "
               "the KV cache runs out of memory")
    return DeviceShare(takes, why)
