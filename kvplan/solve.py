"""``max-batch --solve utilization``: the smallest memory fraction an engine may take that still holds the
workload, so the rest of the GPU can serve something else.

Each engine names its fraction (``Engine.memory_fraction``: vLLM ``--gpu-memory-utilization``, SGLang
``--mem-fraction-static``, TensorRT-LLM ``--kv_cache_free_gpu_memory_fraction``); an engine without one is
refused by name. The KV memory every budget gives grows with the fraction and nothing else in the plan
depends on it (the batch defaults and the activation peak do not), so a bisection over fractions in steps of
``STEP`` finds the least one; the answer is rounded up to that step, as a user would type it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.errors import UsageError
from kvplan.record import replace

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

STEP = 0.001
"""The fraction's resolution: three decimals, as the engines' examples write it."""


def solve_fraction(engine: Any, settings: Any, plan_at: Callable[[Any], Any], sequences: int) -> Any:
    """The plan at the smallest fraction (a multiple of ``STEP``) whose plan fits and holds ``sequences``
    (requests, as ``max_batch`` counts them). ``plan_at(settings)`` plans with the given settings."""
    fraction = engine.memory_fraction
    if fraction is None:
        raise UsageError(f"{engine.title} takes no memory fraction to solve for (its cache is sized by its own "
                         "flags): use --solve batch or context", field="solve")
    field, flag = fraction
    if getattr(settings, field) is not None:
        raise UsageError(f"{field} is what --solve utilization finds: leave it out", field=field)
    if settings.kv_cache_memory_bytes is not None:
        raise UsageError("--kv-cache-memory fixes the KV memory: no fraction to solve for", field="kv_cache_memory")

    def holds(steps: int) -> Any:
        try:
            p = plan_at(replace(settings, **{field: steps * STEP}))
        except UsageError as exc:
            if exc.field in (field, "kv_cache_memory"):  # too small a fraction to plan at all
                return None
            raise
        return p if p.fits and p.max_batch >= sequences else None

    top = round(1 / STEP)
    best = holds(top)
    if best is None:
        raise UsageError(f"{sequences:,} sequence(s) do not fit even with {flag} 1.0: use --solve gpus",
                         field="solve")
    low, high = 0, top  # holds(high); not holds(low) (0 is not a fraction)
    while high - low > 1:
        mid = (low + high) // 2
        found = holds(mid)
        low, high, best = (low, mid, found) if found is not None else (mid, high, best)
    value = round(high * STEP, 3)
    note = (f"smallest {flag} holding {sequences:,} request(s): {value:g} (kvplan's estimate of the budget; the "
            f"engine measures its own at start-up, so leave a margin)")
    return replace(best, assumptions=(note, *best.assumptions), solved={"setting": field, "flag": flag,
                                                                        "value": value})
