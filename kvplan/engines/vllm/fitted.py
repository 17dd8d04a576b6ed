"""The vLLM budget constants kvplan fits to start-up logs, because vLLM's code gives their structure but not
their size (what cuBLAS, NCCL and the custom all-reduce take). The sampler's part is derived: sampler.py.

They are one frozen value, ``FIT``, read by budget.py at each call, with the rule that selects each one
(``non_torch_field``) beside it: benchmarks/crossval.py refits them with one source of logs held out and judges
that source (leave-one-source-out, docs/accuracy.md), so each constant's error is measured on logs it was not
fitted to. Sizes: the median of what the logs of the band print for the item (benchmarks/crossval.py ``refit``).
"""

from __future__ import annotations

import functools

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.engines.version import Version
from kvplan.engines.vllm.defaults import V1_SINCE
from kvplan.record import dataclass

if TYPE_CHECKING:
    from kvplan.budgets.base import KvError

GIB = 1 << 30

INCREASE_SINCE = (0, 10)
V0_INCREASE_SINCE = (0, 7)


@dataclass(frozen=True)
class VllmFit:
    """Fitted sizes (bytes, or bytes per logit); the comments name the logs each was first fitted on."""

    # 0.10 to 0.33 (structure computed: utils memory_profiling / gpu_worker.determine_available_memory): only the
    # growth since the worker's init snapshot; 0.19.0 H100 logs (llmd-planner-v0190-*): 0.24-0.27 GiB at TP 1,
    # 2.06-2.21 GiB with TP > 1, 0.07 GiB with PP only.
    non_torch_tp1: int = int(0.25 * GIB)
    # TP > 1: what is left of the growth after the collective buffers computed in collectives.py (FlashInfer's
    # all-reduce fusion workspace, NCCL's NVLS buffers): TP 1's growth plus NCCL's ring buffers for torch's
    # lazily created communicator. The median of 20 readings from 4 sources: the 0.19.0 H100 logs leave
    # 0.51-0.61 GiB (17 logs, TP 2 and 4, after 1.5 GiB of workspace and 0.125 GiB of NVLS at TP 4); before 0.11
    # the snapshot precedes vLLM's own communicator too (collectives.py item 3), so a 0.10.x log reads TP 1's
    # growth + two communicators, taken as (reading - computed + non_torch_tp1) / 2: the 0.10.2 L40S TP 4 log
    # 0.23 GiB, the 0.10.2 2 x H200 TP 2 log 0.81, the 0.10.0 4 x H200 TP 4 log 1.01. Leave-one-source-out:
    # 0.57 GiB without any one source but the llm-d logs (0.72 without them).
    non_torch_tp: int = int(0.57 * GIB)
    non_torch_pp: int = int(0.07 * GIB)
    # 0.8 / 0.9 V1 (0.8.5 Worker.determine_available_memory): all non-torch memory, the CUDA context included:
    # the 0.19.0 logs' init snapshot (0.51 GiB TP 1, 1.4-2.05 GiB with TP or PP > 1) plus the growth above;
    # 3.5 GiB with TP matches the 3.58 GiB an old TP build logged (issue 11).
    non_torch_all_tp1: int = int(0.76 * GIB)
    non_torch_all_tp: int = int(3.5 * GIB)
    non_torch_all_pp: int = int(1.47 * GIB)
    # V0 0.6.x, all of it (TP 1 readings, used for TP too): the median of 8 logs from 8 sources. V0 0.7-0.10 the
    # growth since the profile's baseline (NCCL included: V0 takes the baseline before the distributed set-up):
    # TP 1 the median of 13 logs from 11 sources, TP > 1 of 6 logs from 6 sources (0.2 to 7.2 GiB: the hardware's
    # NCCL and custom all-reduce buffers, PCIe cards low, NVLink high). benchmarks/crossval.py's refit on all logs;
    # first set from single readings (vllm-10517 0.35, vllm-13882 0.03, vllm-13061 0.25 GiB).
    non_torch_v06: int = int(0.26 * GIB)
    non_torch_v0_tp1: int = int(0.05 * GIB)
    non_torch_v0_tp: int = int(0.82 * GIB)


RELEASE_BANDS = (((0, 0), "V0 < 0.7"), ((0, 7), "V0 0.7"), ((0, 8), "V1 0.8-0.9"), ((0, 10), "0.10-0.16"),
                 ((0, 17), "0.17-0.20"), ((0, 21), "0.21+"))
"""Release bands the budget's error is judged and bounded by (benchmarks/crossval.py, budget_error.json)."""


V0_AT_V1_BAND = ((0, 8), "V0 0.8-0.10")
"""The V0 engine at the releases whose default was V1 (VLLM_USE_V1=0, variant.py): V0 0.7's rules, judged apart."""
JUDGED_BANDS = (*RELEASE_BANDS, V0_AT_V1_BAND)
"""Every band an error interval may be written for (benchmarks/crossval.py --intervals)."""


def release_band(version: Version) -> str:
    """The band of the release's default engine (V0 at 0.8-0.10: ``V0_AT_V1_BAND``, by variant.py)."""
    return [name for since, name in RELEASE_BANDS if version >= since][-1]


FIT = VllmFit()
"""The constants in use. Only benchmarks/crossval.py replaces it (to refit without one source)."""


def non_torch_field(version: Version, tp: int, pp: int) -> tuple[str, str]:
    """Which fitted non-torch size applies to this release and parallelism, and what it stands for."""
    if version >= INCREASE_SINCE:
        if tp > 1:
            return "non_torch_tp", "growth since the worker's init snapshot, TP > 1 (NCCL, all-reduce buffers)"
        if pp > 1:
            return "non_torch_pp", "growth since the worker's init snapshot, PP only"
        return "non_torch_tp1", "growth since the worker's init snapshot"
    if version >= V1_SINCE:
        how = "all non-torch memory, CUDA context included"
        return ("non_torch_all_tp" if tp > 1 else "non_torch_all_pp" if pp > 1 else "non_torch_all_tp1"), how
    return v0_non_torch_field(version, tp)


def v0_non_torch_field(version: Version, tp: int) -> tuple[str, str]:
    """The V0 engine's, to 0.10 (variant.py: its accounting did not change from 0.7 on)."""
    if version < V0_INCREASE_SINCE:
        return "non_torch_v06", "V0: all non-torch memory, CUDA context included"
    return ("non_torch_v0_tp" if tp > 1 else "non_torch_v0_tp1"), "V0: growth since the profile's baseline"


def kv_error(version: Version, band: str | None = None) -> "KvError":
    """The cross-validated error of the KV memory for this release (budget_error.json, written by
    benchmarks/crossval.py --intervals): its band's (``band``, else the release's) where it has enough held-out
    logs, else all bands'."""
    from kvplan.budgets.base import KvError

    table = _error_table()
    name = band or release_band(version)
    row = table["bands"].get(name)
    which = f"vLLM {name}" if row else f"all vLLM releases (too few independent logs for {name})"
    row = row or table["pooled"]
    return KvError(row["low"], row["high"], f"{which}: {row['logs']} logs from {row['sources']} sources, "
                                            "each judged with its source held out")


@functools.lru_cache(maxsize=1)
def _error_table() -> dict[str, Any]:
    import os

    from kvplan.jsontext import loads  # json's own reader, without importing json (and re)

    # os.path, not pathlib: max-batch reads this on every run, and pathlib's import costs some 8 ms
    with open(os.path.join(os.path.dirname(__file__), "budget_error.json"), encoding="utf-8") as f:
        table: dict[str, Any] = loads(f.read())
    return table
