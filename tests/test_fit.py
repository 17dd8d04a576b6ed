"""``kvplan.fit``: every row is the deployment ``max-batch`` plans, the next smaller one does not hold the
workload, and its launch command, read back by ``kvplan check``, plans to the same row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from kvplan.errors import UsageError
from kvplan.fit import Prices, fit, load_prices, prefill_flops
from kvplan.plan import Search, max_batch
from kvplan.sources.resolve import load_model

GPUS = ("H100-SXM-80GB", "A100-SXM4-40GB", "L4", "MI300X", "RTX-4090", "H200-141GB")
CASES = [  # (model, context, concurrency, engines, kv dtypes)
    ("meta-llama/Llama-3.1-8B", 8192, 64, ("vllm", "sglang"), ("auto",)),
    ("Qwen/Qwen3-30B-A3B", 32768, 256, ("vllm",), ("auto", "fp8")),
    ("meta-llama/Llama-3.1-70B", 32768, 16, ("vllm", "trtllm"), ("auto", "fp8")),
    ("Qwen/Qwen3-30B-A3B", 16384, 128, ("vllm", "sglang"), ("auto",)),
]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def result(request: pytest.FixtureRequest):
    model, context, concurrency, engines, dtypes = request.param
    return fit(load_model(model), context=context, concurrency=concurrency, gpus=GPUS, engines=engines,
               kv_dtypes=dtypes)


def _plan(result, row, **kw):
    return max_batch(load_model(result.model_id), gpu=row.gpu, engine=row.engine, kv_dtype=row.kv_dtype,
                     max_model_len=result.context, context=result.context, **kw)


def test_every_row_holds_the_workload_as_max_batch_plans_it(result) -> None:
    assert result.rows
    for row in result.rows:
        plan = _plan(result, row, tp=row.tp, pp=row.pp, dp=row.dp)
        assert plan.fits and plan.max_batch >= result.concurrency, row
        assert (plan.kv_cache_tokens, plan.max_batch, plan.gpu_count) == (row.kv_cache_tokens, row.max_concurrency,
                                                                          row.gpus)
        assert row.kv_left_bytes >= 0


def test_no_smaller_deployment_of_that_gpu_holds_it(result) -> None:
    spec = load_model(result.model_id)
    for row in result.rows:
        for tp, pp in Search(gpus_per_node=result.gpus_per_node).splits(spec.num_layers):
            dp = (row.gpus - 1) // (tp * pp)
            if dp < 1:
                continue
            try:
                smaller = _plan(result, row, tp=tp, pp=pp, dp=dp)
            except UsageError:
                continue  # the engine refuses that split: it holds nothing
            assert not (smaller.fits and smaller.max_batch >= result.concurrency), (row.gpu, row.engine, tp, pp, dp)


def test_rows_are_sorted_by_gpus_then_room(result) -> None:
    keys = [(r.gpus, -r.kv_left_bytes) for r in result.rows]
    assert keys == sorted(keys)


def test_launch_command_read_back_by_check_gives_the_row(result, tmp_path: Path) -> None:
    one_engine = (r for r in result.rows if r.command and ("data-parallel-size" in r.command or "--dp-size" in
                                                           r.command or r.dp == 1))
    for i, row in enumerate(one_engine):
        script = tmp_path / f"deploy{i}.sh"
        script.write_text(f"#!/bin/sh\n{row.command}\n")
        code, out, _ = run_cli(["check", str(script), "--gpu", row.gpu, "-f", "json"])
        doc = json.loads(out)
        dep = doc["deployments"][0]
        assert dep["engine"] == row.engine and dep["kv_dtype"] == row.kv_dtype, row.command
        assert (dep["parallel"]["tp"], dep["parallel"]["pp"], dep["parallel"]["dp"]) == (row.tp, row.pp, row.dp)
        assert dep["kv_cache_tokens"] == row.kv_cache_tokens, row.command
        assert dep["status"] == "pass", row.command


def test_bounds_are_labelled_and_positive(result) -> None:
    assert any("bound" in a for a in result.assumptions)
    for row in result.rows:
        assert row.decode_step_seconds_min and row.decode_step_seconds_min > 0
        assert row.ttft_seconds_min and row.ttft_seconds_min > 0
        assert row.usd_per_hour is None


def test_prefill_flops_is_two_per_parameter_plus_attention() -> None:
    spec = load_model("meta-llama/Llama-3.1-8B")
    one, two = prefill_flops(spec, 1000), prefill_flops(spec, 2000)
    assert one is not None and two is not None
    assert one >= 2 * spec.params * 1000
    assert two > 2 * one  # attention is quadratic in the prompt


def test_moe_prefill_counts_active_experts_only() -> None:
    spec = load_model("Qwen/Qwen3-30B-A3B")
    flops = prefill_flops(spec, 1)
    assert flops is not None and flops < 0.25 * 2 * spec.params  # about 3B of 30B parameters are active


def test_prices_order_the_rows_and_price_the_tokens(tmp_path: Path) -> None:
    f = tmp_path / "prices.yaml"
    f.write_text("currency: EUR\ngpus:\n  H100: 2.5\n  A100-40GB: 1.0\n  L4: 0.4\n")
    prices = load_prices(str(f))
    assert prices.per_gpu_hour == {"H100-SXM-80GB": 2.5, "A100-SXM4-40GB": 1.0, "L4": 0.4}
    res = fit(load_model("meta-llama/Llama-3.1-8B"), context=8192, concurrency=32, prices=prices)
    assert {r.gpu for r in res.rows} <= set(prices.per_gpu_hour) and res.currency == "EUR"
    hourly = [r.usd_per_hour for r in res.rows]
    assert hourly == sorted(hourly)
    for r in res.rows:
        assert r.usd_per_hour == pytest.approx(prices.per_gpu_hour[r.gpu] * r.gpus)
        assert r.usd_per_million_output_tokens == pytest.approx(
            r.usd_per_hour / (r.output_tokens_per_second_max * 3600) * 1e6)


@pytest.mark.parametrize("text, field", [
    ("gpus: {}\n", "prices"), ("gpus:\n  H100: -1\n", "prices"), ("gpus:\n  H100: true\n", "prices"),
    ("gpus:\n  H100: .nan\n", "prices"), ("gpu:\n  H100: 1\n", "prices"), ("gpus:\n  NoSuchGPU: 1\n", "gpu"),
])
def test_bad_prices_are_refused_by_field(tmp_path: Path, text: str, field: str) -> None:
    f = tmp_path / "prices.yaml"
    f.write_text(text)
    with pytest.raises(UsageError) as exc:
        load_prices(str(f))
    assert exc.value.field == field


def test_a_gpu_asked_for_without_a_price_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as exc:
        fit("meta-llama/Llama-3.1-8B", context=8192, concurrency=8, gpus=["H100", "L4"],
            prices=Prices({"H100-SXM-80GB": 2.0}))
    assert exc.value.field == "prices" and "L4" in str(exc.value)


def test_an_engine_that_does_not_run_on_a_gpu_is_said_so() -> None:
    res = fit("meta-llama/Llama-3.1-8B", context=8192, concurrency=8, gpus=["MI300X", "H100"], engines=("trtllm",))
    assert [r.gpu for r in res.rows] == ["H100-SXM-80GB"]
    assert res.refused[0].gpu == "MI300X" and "NVIDIA" in res.refused[0].reason


def test_whole_replicas_are_one_command_each_and_shared_experts_one_engine() -> None:
    dense = fit("meta-llama/Llama-3.1-70B", context=32768, concurrency=64, gpus=["H100"], engines=("vllm",)).rows[0]
    assert dense.dp > 1 and "--data-parallel-size" not in dense.command
    assert any(f"{dense.dp} replicas" in a for a in dense.assumptions)
    moe = fit("Qwen/Qwen3-30B-A3B", context=32768, concurrency=256, gpus=["H100"], engines=("vllm",)).rows[0]
    assert moe.plan.ep > moe.tp and f"--data-parallel-size {moe.dp}" in moe.command


def test_a_workload_no_gpu_type_holds_is_reported_per_type() -> None:
    res = fit("meta-llama/Llama-3.1-405B", context=131072, concurrency=10**6, gpus=["L4"])
    assert not res.rows and res.refused and res.refused[0].gpu == "L4"


@pytest.mark.parametrize("kw, field", [({"context": 0}, "context"), ({"concurrency": True}, "concurrency"),
                                      ({"prompt_len": 10**9}, "prompt_len")])
def test_bad_workload_is_refused_by_field(kw: dict, field: str) -> None:
    args = {"context": 8192, "concurrency": 8, **kw}
    with pytest.raises(UsageError) as exc:
        fit("meta-llama/Llama-3.1-8B", gpus=["H100"], **args)
    assert exc.value.field == field
