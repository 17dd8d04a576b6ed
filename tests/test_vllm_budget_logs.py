"""Regression guard: kvplan's vLLM budget against the real start-up logs in tests/data (benchmarks/accuracy.py).

Given each log's weights, kvplan's KV memory per GPU must stay within the errors reached when the rules
were fitted (docs/accuracy.md): found logs median 0.06 %, worst 0.38 % of GPU memory. The two dev logs (V0 0.6
and 0.7) were guarded at 0.65 % / 1.0 % while V0's non-torch sizes were their own single readings; since those
sizes are fitted on 8 and 11 sources (fitted.py) they are judged at the issue's goal (median <= 1 %) and 1.5 %
at worst (0.24 % and 1.09 % now). The found logs' worst, once 0.38 %, is the TP 2 V0 0.7 log vllm-13061 (-2.40 %):
V0's TP > 1 size was its own reading (0.25 GiB) and is the median of 6 sources now (0.82 GiB; the readings run
from 0.2 to 7.2 GiB by hardware); it is held to the issue's 2.5 %. The guards leave a little room.
"""

from __future__ import annotations

import importlib.util
import statistics

from conftest import DATA


def _accuracy():
    spec = importlib.util.spec_from_file_location("accuracy", DATA.parent.parent / "benchmarks" / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_budget_errors_stay_within_the_goals():
    # In-sample guards (the logs behind the fitted sizes); the cross-validated gate is tests/test_crossval.py.
    # dev: the sampler is derived now (38 B per logit where vLLM sorts), not fitted to these two V0 logs (39 B):
    # the 4060 log's 1.42 GiB peak is 0.04 GiB above the derivation.
    rows, skipped = _accuracy().run()
    for which, count, median_goal, worst_goal in (("dev", 2, 1.0, 1.5), ("found", 57, 0.25, 2.5)):
        errs = [abs(r["error_pct"]) for r in rows if r["set"] == which]
        assert len(errs) >= count, f"{which}: only {len(errs)} logs judged; left out: {skipped}"
        assert statistics.median(errs) <= median_goal, which
        worst = max(rows, key=lambda r: abs(r["error_pct"]) if r["set"] == which else -1)
        assert abs(worst["error_pct"]) <= worst_goal, worst


def test_cudagraph_fit_stays_within_its_error():
    _, rows = _accuracy().cudagraph_fit()
    errs = [abs(r["error_gib"]) for r in rows]
    assert len(errs) >= 50
    assert statistics.median(errs) <= 0.1 and max(errs) <= 0.9
