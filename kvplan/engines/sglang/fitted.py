"""The SGLang budget sizes kvplan takes from start-up logs: the GPU memory already in use when SGLang reads
the free memory before the weights (``init_torch_distributed``: the CUDA context, and at tp > 1 on NVSwitch
GPUs NCCL / all-reduce buffers). SGLang's code gives where it is read, not its size. Everything else in the
budget is computed from SGLang's code (budget.py, fraction.py).

``FIT`` is read by budget.py at each call; benchmarks/crossval_engines.py refits it with one source of logs
held out and judges that source (leave-one-source-out, docs/accuracy.md). Size: the median of
``GPU total - logged free memory before the weights`` over the logs that read that size (GPUs not shared with
other processes).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True

import os

from kvplan.engines.version import Version
from kvplan.record import dataclass

if TYPE_CHECKING:
    from kvplan.budgets.base import KvError

GIB = 1 << 30

# GPUs whose tp > 1 start-up holds NCCL / RCCL and all-reduce buffers before SGLang's first reading: NVSwitch
# boards, and AMD Instinct boards (xGMI; Kimi-K2.5 on MI355X tp 8, 0.5.8: 4.45 GiB in use at load begin)
# B300 (HGX B300, and GB300 by the same name's tail): B200's NVSwitch system with the SM 10.3 die (inferred: no log)
NVSWITCH_GPUS = ("H100-SXM", "H200", "H20-", "B200", "GB200", "B300", "MI300X", "MI325X", "MI355X")


@dataclass(frozen=True)  # kvplan.record's: importing the standard dataclasses costs a check ~10 ms
class SglangFit:
    """Fitted sizes (bytes); the comments name the logs each was first set from."""

    # tp 1, or tp > 1 without NVSwitch / xGMI: the CUDA context. Fitted: the median of 11 logs from 11 sources
    # (benchmarks/crossval_engines.py readings: 0.36 - 0.91 GiB; L4, RTX 3090 / 4090, H100, H200, B200, MI300X,
    # MI355X; SGLang 0.3.3 - 0.5.23). 0.59 GiB on the first 9 of them; 0.4 GiB set from the L4 log alone before.
    context: int = int(0.654 * GIB)
    # tp > 1 on an NVSwitch / xGMI GPU: the context and NCCL / RCCL / all-reduce buffers. Assumed, not fitted:
    # two readings from two sources (H200 tp 8, 0.5.3: 2.51 GiB, "Init torch distributed ends. mem usage=2.01
    # GB"; MI355X tp 8, 0.5.8: 4.45 GiB), under the 3 sources a fit needs; kept at the H200 figure.
    context_nvswitch_tp: int = int(0.4 * GIB) + int(2.1 * GIB)


FIT = SglangFit()
"""The sizes in use. Only benchmarks/crossval_engines.py replaces it (to refit without one source)."""


def context_field(tp: int, gpu_name: str) -> str:
    """Which fitted size the memory in use before SGLang's first free-memory reading is."""
    if tp > 1 and any(name in gpu_name for name in NVSWITCH_GPUS):
        return "context_nvswitch_tp"
    return "context"


RELEASE_BANDS = (((0, 0), "< 0.4.8"), ((0, 4, 8), "0.4.8-0.5.2"), ((0, 5, 3), "0.5.3+"))
"""Release bands of the default-fraction rules (fraction.py) the budget's error is judged and bounded by."""


def release_band(version: Version) -> str:
    return [name for since, name in RELEASE_BANDS if version >= since][-1]


def kv_error(version: Version) -> "KvError":
    """The cross-validated error of the KV memory for this release (budget_error.json, written by
    benchmarks/crossval_engines.py --intervals)."""
    from kvplan.engines.budget_error import kv_error as read

    return read(os.path.join(os.path.dirname(__file__), "budget_error.json"), release_band(version), "SGLang")
