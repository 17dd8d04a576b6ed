"""``kvplan fit --beside``: a second model on each row's GPUs, both at their least memory fraction, the row's
model started first; every verdict is the pair planned again with ``kvplan.share``."""

from __future__ import annotations

import json
import math

import pytest

from conftest import run_cli
from kvplan.budgets.base import GIB, Settings
from kvplan.errors import UsageError
from kvplan.fit import Beside, fit
from kvplan.plan import max_batch
from kvplan.share import Tenant, share_gpu

MODEL, OTHER = "Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B"


@pytest.fixture(scope="module")
def result():
    return fit(MODEL, context=32768, concurrency=4, gpus=["H100", "L4", "A100-80GB"], engines=["vllm", "sglang"],
               beside=Beside(OTHER, 8192, 8))


def test_rows_are_unchanged_by_beside(result) -> None:
    alone = fit(MODEL, context=32768, concurrency=4, gpus=["H100", "L4", "A100-80GB"], engines=["vllm", "sglang"])
    assert [(r.gpu, r.engine, r.gpus, r.kv_cache_tokens) for r in result.rows] == \
        [(r.gpu, r.engine, r.gpus, r.kv_cache_tokens) for r in alone.rows]
    assert all("beside" not in r.to_dict() for r in alone.rows) and "beside" not in alone.to_dict()


def test_each_verdict_is_the_pair_planned_again(result) -> None:
    seen = set()
    for row in result.rows:
        b = row.beside
        seen.add(b.fits)
        if b.fraction is None or b.beside_fraction is None:
            continue
        field = b.setting
        common = dict(gpu=row.gpu, engine=row.engine, tp=row.tp, pp=row.pp, dp=row.dp)
        per = -(-4 // row.dp)
        first = Tenant(MODEL, row.engine, Settings(**{field: b.fraction}), lambda s: max_batch(
            MODEL, max_model_len=32768, batch=per, settings=s, **common))
        second = Tenant(OTHER, row.engine, Settings(**{field: b.beside_fraction}), lambda s: max_batch(
            OTHER, max_model_len=8192, batch=-(-8 // row.dp), settings=s, **common))
        again = share_gpu([first, second], fixes=False)
        assert again.orders[0].all_fit == b.fits
        if b.fits:  # each holds its workload at the fraction given, and a fraction 0.001 lower does not (least)
            started = again.orders[0].deployments
            assert max_batch(MODEL, max_model_len=32768, batch=per, settings=Settings(**{field: b.fraction}),
                             **common).max_batch >= 4
            lower = max_batch(MODEL, max_model_len=32768, batch=per,
                              settings=Settings(**{field: round(b.fraction - 0.001, 3)}), **common)
            assert lower.max_batch < 4 or not lower.fits
            assert started[1].used_before_bytes == started[0].takes_bytes
    assert seen == {True, False}  # H100s hold both; a pair of L4s at vLLM's 0.917 leaves no room


def test_vllm_on_h100_in_numbers(result) -> None:
    (row,) = [r for r in result.rows if r.gpu == "H100-SXM-80GB" and r.engine == "vllm"]
    b = row.beside
    total = 85017755648
    mine, theirs = b.share.orders[0].deployments
    assert mine.takes_bytes == int(0.51 * GIB) + math.ceil(total * b.fraction)
    assert theirs.takes_bytes == int(0.51 * GIB) + math.ceil(total * b.beside_fraction)
    assert b.fits and b.share.orders[0].left_bytes == total - mine.takes_bytes - theirs.takes_bytes


def test_cli_json_and_bad_values() -> None:
    code, out, _ = run_cli(["fit", MODEL, "-c", "32k", "--concurrency", "4", "--gpus", "H100", "--beside", OTHER,
                            "--beside-concurrency", "8", "-f", "json"])
    assert code == 0
    data = json.loads(out)
    assert data["beside"] == {"model": OTHER, "context": 32768, "concurrency": 8}
    assert data["rows"][0]["beside"]["fits"] is True
    with pytest.raises(UsageError) as exc:
        fit(MODEL, context=32768, concurrency=4, gpus=["H100"], beside=Beside(OTHER, 8192, 0))
    assert exc.value.field == "beside_concurrency"
