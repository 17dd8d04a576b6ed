"""The vLLM budget judged on logs it was not fitted to (benchmarks/crossval.py): a change may not make the
leave-one-source-out error worse than the stored baseline (benchmarks/crossval_baseline.json, rewritten with
``python benchmarks/crossval.py --baseline`` when a change improves it)."""

from __future__ import annotations

import json
import math
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO))

from benchmarks import crossval  # noqa: E402


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return crossval.run()[0]


def test_cross_validated_error_is_not_worse(rows: list[dict]) -> None:
    baseline = json.loads(crossval.BASELINE.read_text())
    now = crossval.summary(rows)
    name = "cross-validated (held-out sources)"
    for stat in ("median", "p90"):
        assert now[name][stat] <= baseline[name][stat] + 1e-9, (name, stat, now[name][stat], baseline[name][stat])
    assert now[name]["n"] >= baseline[name]["n"], "fewer logs judged than the baseline"


def test_refit_reproduces_a_reading() -> None:
    """The refit is the median of the readings of a size; sizes nobody read keep the shipped value."""
    fit, unread = crossval.refit([{"non_torch_tp1": 1.0 * (1 << 30)}, {"non_torch_tp1": 3.0 * (1 << 30)},
                                  {"non_torch_pp": 5.0 * (1 << 30)}])
    assert fit.non_torch_tp1 == 2 << 30 and fit.non_torch_pp == 5 << 30
    assert "non_torch_tp" in unread and fit.non_torch_tp == crossval.fitted.FIT.non_torch_tp


def test_judged_on_independent_sources(rows: list[dict]) -> None:
    """A fitted constant is judged on at least 3 independent sources, every error a number."""
    assert rows and all(math.isfinite(r["heldout_error_pct"]) for r in rows)
    sources = {r["source"] for r in rows}
    assert len(sources) >= 3, "cross-validation needs at least 3 independent sources"


def test_swapping_the_fit_is_undone() -> None:
    shipped = crossval.fitted.FIT
    with crossval.using(crossval.fitted.VllmFit(non_torch_tp1=1)):
        assert crossval.fitted.FIT.non_torch_tp1 == 1
    assert crossval.fitted.FIT is shipped


def test_intervals_cover_nine_in_ten_held_out_logs_and_are_current(rows: list[dict]) -> None:
    """The intervals kvplan prints (budget_error.json) are the ones the held-out errors give now, and cover at
    least 90 % of those logs (rewrite with ``python benchmarks/crossval.py --intervals`` when the rules move)."""
    table = crossval.intervals(rows)
    assert json.loads(crossval.INTERVALS.read_text()) == json.loads(json.dumps(table))
    assert crossval.coverage(rows, table) >= 0.9  # the goal; COVER is 0.95 nominal
    for band in (*table["bands"].values(), table["pooled"]):
        assert band["low"] <= 0 <= band["high"] or band["low"] <= band["high"]


def test_no_start_up_is_judged_twice() -> None:
    """One start-up is one log: a log collected twice (the same lines at the same times) carries ``duplicate_of``
    and is left out, so that it does not weigh twice in the medians and intervals."""
    import re

    seen: dict[tuple, str] = {}
    for case in crossval.cases():
        inp, _ = crossval.inputs(case)
        stamps = tuple(re.findall(r"\d\d-\d\d \d\d:\d\d:\d\d", case.get("log_excerpt") or ""))[:3]
        if inp is None or len(stamps) < 3:
            continue
        key = (stamps, case["reported"].get("available_kv_gib"))
        assert key not in seen, (case["id"], seen.get(key))
        seen[key] = case["id"]


@pytest.mark.parametrize(("text", "want"), [
    ("A10G", "A10/A10G/T4"), ("T4", "A10/A10G/T4"),  # TensorRT-LLM's rows: the catalog name
    ("2x Tesla T4 (the notebook prints 'GPU 0 : Tesla T4 (14.6 GB)')", "A10/A10G/T4"),  # vLLM's: the log's text
    ("24 GB AWS card (total_gpu_memory 22.07GiB = NVIDIA A10G, inferred)", "A10/A10G/T4"),
    ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA RTX A4000 (16 GB)", "consumer"), ("NVIDIA L4", "L40S/L4")])
def test_a_t4_or_an_a10g_is_one_class_in_every_engine_table(text: str, want: str) -> None:
    assert crossval.gpu_class(text) == want
