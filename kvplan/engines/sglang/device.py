"""SGLang on a GPU that other processes use too (``Engine.device_share``).

SGLang sizes everything from the memory *free* when it starts, not from the GPU's total: ``pre_model_load_memory``
and the free memory after the weights both come from ``get_available_gpu_memory`` (``torch.cuda.mem_get_info``'s
free bytes; 0.5.17 ``srt/mem_cache/kv_cache_configurator.py`` ``_profile_available_bytes``: rest = free after the
weights - free before x (1 - mem_fraction_static)). So a second instance's fraction is of what the first left
(``budget.py`` subtracts ``device_used_bytes`` from the free memory before the weights), and it has no start-up
check of its own beyond "rest <= 0" (the plan's fit). Started, it holds its CUDA context and its static part
(weights and KV pool); its activations and CUDA graphs come out of the (1 - mem_fraction_static) it leaves free.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.budgets.base import MemoryItem
from kvplan.engines.device import DeviceShare, gib


def device_share(items: Sequence[MemoryItem], total_bytes: int, used_bytes: int) -> DeviceShare:
    def item(name: str) -> int:
        return sum(i.bytes for i in items if i.name == name)

    context, static, reserve = item("non_torch"), item("static"), item("activation")
    if used_bytes + context >= total_bytes:
        return DeviceShare(0, f"SGLang finds no free memory: others hold {gib(used_bytes)} of {gib(total_bytes)}")
    return DeviceShare(context + static, notes=(
        f"SGLang's activations and CUDA graphs use part of the {gib(reserve)} it leaves free (1 - "
        "mem_fraction_static of the memory free at its start): a process started after it must not take all of it",))
