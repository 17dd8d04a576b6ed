"""``kvplan report``: everything kvplan knows about serving one model, gathered for one shareable page.

The page (``kvplan/render/html_report.py``) shows what this gathers: the model and its per-layer cache with
formulas (``estimate``), the GPU divided by each engine for each GPU asked (``max_batch`` on the smallest
deployment that holds the workload), the fit table (``fit``), every assumption, and the command that made it.
The JSON documents are the ones ``-f json`` prints for the same questions, embedded in the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvplan.engines import DEFAULT_ENGINE
from kvplan.record import dataclass


@dataclass(frozen=True)
class ReportData:
    command: str
    estimates: tuple[Any, ...]
    """One ``EstimateResult`` per engine: contexts up to the workload's, batch 1 and the concurrency."""
    plans: tuple[Any, ...]
    """The fit rows' plans (``CapacityPlan``), one per GPU type x engine x KV dtype."""
    fit: Any
    gpu: Any
    """The first GPU asked for (its memory is drawn on the KV chart)."""

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "estimates": [e.to_dict(explain=True) for e in self.estimates],
                "plans": [p.to_dict() for p in self.plans], "fit": self.fit.to_dict()}


def build(model: Any, *, context: int, concurrency: int, gpus: Sequence[str] | None = None,
          engines: Sequence[str] = (DEFAULT_ENGINE,), kv_dtypes: Sequence[str] = ("auto",),
          engine_version: str | None = None, command: str = "", progress: Any = None) -> ReportData:
    from kvplan.estimate import estimate
    from kvplan.fit import fit
    from kvplan.hardware import find_gpu, load_catalog
    from kvplan.sources.resolve import load_model

    spec = load_model(model) if isinstance(model, str) else model
    contexts = _sweep(context)
    estimates = tuple(estimate(spec, contexts=contexts, batches=sorted({1, concurrency}), kv_dtypes=list(kv_dtypes),
                               engine=e, engine_version=engine_version, by_layer=False) for e in engines)
    result = fit(spec, context=context, concurrency=concurrency, gpus=gpus, engines=engines, kv_dtypes=kv_dtypes,
                 engine_version=engine_version, progress=progress)
    first = find_gpu(gpus[0], load_catalog(None)) if gpus else None
    return ReportData(command, estimates, tuple(r.plan for r in result.rows), result, first)


def _sweep(context: int) -> list[int]:
    """Doubling contexts from 1,024 up to the workload's (which is always the last point)."""
    points, c = [], 1024
    while c < context:
        points.append(c)
        c *= 2
    return [*points, context]
