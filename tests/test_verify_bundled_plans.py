"""Every bundled model's tensor plan, for every engine verify allocates, holds what ``kvplan estimate``
counts (no torch needed: the plan is arithmetic; the allocations are checked per engine elsewhere)."""

from __future__ import annotations

import os

import pytest

from kvplan.estimate import estimate
from kvplan.sources.resolve import load_model
from kvplan.verify.errors import VerifyError
from kvplan.verify.shapes import plan_cache, resolve_layout

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(REPO, "model_specs")
SPECS = sorted(name for name in os.listdir(FOLDER) if name.endswith(".yaml"))


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_every_bundled_model_plans_the_estimate(engine):
    for name in SPECS:
        spec = load_model(os.path.join(FOLDER, name))
        try:
            layout = resolve_layout(spec, engine, None, "auto", None)
        except VerifyError:
            continue  # a layout this engine's verify does not lay out says so by field (tested per engine)
        for batch, context in ((1, 1), (3, 5000)):
            plan = plan_cache(spec, layout, batch, context)
            kv = estimate(spec, contexts=[context], batches=[batch], engine=engine).rows[0].kv_bytes
            assert plan.buffer_bytes == plan.predicted_bytes == kv, (engine, spec.id, batch)
