"""The SGLang and TensorRT-LLM budgets judged on logs they were not fitted to (benchmarks/crossval_engines.py): a
change may not make either engine's leave-one-source-out error worse than the stored baseline
(benchmarks/crossval_engines_baseline.json, rewritten with ``python benchmarks/crossval_engines.py --baseline``
when a change improves it); the error bands the plans carry are the ones the held-out errors give now."""

from __future__ import annotations

import json
import math
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO))

from benchmarks import crossval_engines as cv  # noqa: E402
from kvplan.budgets import Settings  # noqa: E402
from kvplan.plan import max_batch  # noqa: E402

NAME = "cross-validated (held-out sources)"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return cv.run()[0]


@pytest.mark.parametrize("engine", cv.ENGINES)
def test_cross_validated_error_is_not_worse(rows: list[dict], engine: str) -> None:
    baseline = json.loads(cv.BASELINE.read_text())[engine][NAME]
    now = cv.summary(rows)[engine][NAME]
    for stat in ("median", "p90"):
        assert now[stat] <= baseline[stat] + 1e-9, (engine, stat, now[stat], baseline[stat])
    assert now["n"] >= baseline["n"], "fewer logs judged than the baseline"


@pytest.mark.parametrize("engine", cv.ENGINES)
def test_judged_on_independent_sources(rows: list[dict], engine: str) -> None:
    mine = [r for r in rows if r["engine"] == engine]
    assert mine and all(math.isfinite(r["heldout_error_pct"]) for r in mine)
    assert len({r["source"] for r in mine}) >= 3


def test_a_size_is_refitted_from_three_sources_only() -> None:
    gib = 1 << 30
    fit, unread = cv.refit([("a", {"context": 0.5 * gib}), ("b", {"context": 0.7 * gib}),
                            ("c", {"context": 0.6 * gib}), ("a", {"context_nvswitch_tp": 9.0 * gib}),
                            ("b", {"context_nvswitch_tp": 9.0 * gib})])
    assert fit.context == int(0.6 * gib)
    assert "context_nvswitch_tp" in unread and fit.context_nvswitch_tp == cv.sglang_fitted.FIT.context_nvswitch_tp


def test_swapping_the_fit_is_undone() -> None:
    shipped = cv.sglang_fitted.FIT
    with cv.using(cv.sglang_fitted.SglangFit(context=1)):
        assert cv.sglang_fitted.FIT.context == 1
    assert cv.sglang_fitted.FIT is shipped


def test_the_shipped_context_is_the_median_of_every_source(rows: list[dict]) -> None:
    """The shipped size is what the refit on all logs gives (to the 0.01 GiB it is written at)."""
    usable = []
    for case in cv.cases():
        inp, _ = cv.inputs(case) if cv.ENGINE_OF.get(str(case.get("engine"))) == "sglang" else (None, "")
        if inp is not None:
            usable.append((cv.source_of(case), cv.readings(case, inp)))
    fit, unread = cv.refit(usable)
    assert "context" not in unread
    assert abs(fit.context - cv.sglang_fitted.FIT.context) < 0.01 * (1 << 30)


@pytest.mark.parametrize("engine", cv.ENGINES)
def test_intervals_are_current_and_cover_the_held_out_logs(rows: list[dict], engine: str) -> None:
    """budget_error.json is what the held-out errors give now (rewrite with ``--intervals``), and covers at least
    90 % of them; a pool under 10 logs from 3 sources says so (``too_few``) instead of claiming a 90 % band."""
    table = cv.intervals(rows, engine)
    assert json.loads(cv.INTERVALS[engine].read_text()) == json.loads(json.dumps(table))
    assert cv.coverage(rows, engine, table) >= 0.9
    pooled = table["pooled"]
    assert pooled.get("too_few", False) == (pooled["logs"] < cv.MIN_LOGS or pooled["sources"] < cv.MIN_SOURCES)


@pytest.mark.parametrize("engine", cv.ENGINES)
def test_plans_carry_the_engines_band_and_given_memory_none(engine: str) -> None:
    p = max_batch("Qwen/Qwen3-8B", gpu="H100", engine=engine, max_model_len=16384)
    assert p.interval is not None
    table = json.loads(cv.INTERVALS[engine].read_text())
    # the default release's band where it has enough logs of its own, else the pooled one
    named = [b for name, b in table["bands"].items() if f" {name}: " in p.interval["basis"]]
    band = named[0] if named else table["pooled"]
    # the default (latest) release's band is in the table for SGLang (0.5.3+); TensorRT-LLM's 1.0+ has too few logs,
    # so its plans take the pooled band even though its < 1.0 band has enough
    own = {"sglang": ["0.5.3+"], "trtllm": []}[engine]
    assert [name for name in table["bands"] if f" {name}: " in p.interval["basis"]] == own
    assert named or p.interval["basis"].startswith("all ")
    low, high = p.interval["kv_cache_bytes"]
    assert (low, high) == (int(p.per_gpu.kv_cache_bytes - band["high"] * p.gpu_total_bytes),
                           int(p.per_gpu.kv_cache_bytes - band["low"] * p.gpu_total_bytes))
    assert f"{band['logs']} logs from {band['sources']} sources" in p.interval["basis"]
    if band.get("too_few"):
        assert p.interval["few_logs"] and "not a 90 % band" in p.interval["basis"]
    given = Settings(kv_cache_memory_bytes=20 << 30)
    assert max_batch("Qwen/Qwen3-8B", gpu="H100", engine=engine, settings=given).interval is None


def test_amd_aiter_fraction_reproduces_the_mi355x_logs(rows: list[dict]) -> None:
    """SGLang >= 0.4.7 on ROCm (aiter backend, context > 8,192) takes mem_fraction_static x 0.85: both 0.5.17
    MI355X logs are reproduced to their printed decimals; the same plan on an NVIDIA GPU or 0.4.6 keeps it."""
    for case in ("sglang-rocmbringup-qwen3-06b-llm-mi355x-mfs06",
                 "sglang-rocmbringup-qwen3-reranker-06b-mi355x-mfs05-gap"):
        row = next(r for r in rows if r["case"] == case)
        assert abs(row["heldout_error_pct"]) < 0.05, row

    def mfs(gpu: str, version: str, context: int) -> float:
        p = max_batch("Qwen/Qwen3-0.6B", gpu=gpu, engine="sglang", engine_version=version, max_model_len=context,
                      settings=Settings(mem_fraction_static=0.6))
        return float(p.engine_defaults["mem_fraction_static"])

    assert mfs("MI300X", "0.5.17", 40960) == pytest.approx(0.6 * 0.85)
    assert mfs("MI300X", "0.5.17", 8192) == pytest.approx(0.6)
    assert mfs("MI300X", "0.4.6", 40960) == pytest.approx(0.6)
    assert mfs("H100", "0.5.17", 40960) == pytest.approx(0.6)


def test_multimodal_fraction_reproduces_the_gemma3_log(rows: list[dict]) -> None:
    """SGLang 0.4.4 multiplies a multimodal model's fraction by 0.95 (model_runner.py): the Gemma 3 4B log on an
    H200 is reproduced; 0.4.9 has no such rule; 0.4.10 on lowers only the default fraction."""
    row = next(r for r in rows if r["case"] == "sglang-pr4826-gemma3-4b-h200")
    assert abs(row["heldout_error_pct"]) < 0.1, row

    def mfs(model: str, version: str, given: float | None = None) -> float:
        p = max_batch(model, gpu="H100", engine="sglang", engine_version=version, max_model_len=8192,
                      settings=Settings(mem_fraction_static=given))
        return float(p.engine_defaults["mem_fraction_static"])

    assert mfs("google/gemma-3-4b-it", "0.4.4", 0.8) == pytest.approx(0.8 * 0.95)
    assert mfs("google/gemma-3-4b-it", "0.4.5", 0.8) == pytest.approx(0.8 * 0.90)
    # 0.4.6 on: Gemma 3 and Llama 4 are served text-only unless --enable-multimodal (mm_disabled_models)
    assert mfs("google/gemma-3-4b-it", "0.4.6", 0.8) == pytest.approx(0.8)
    assert mfs("google/gemma-4-E4B-it", "0.4.9", 0.8) == pytest.approx(0.8)
    assert mfs("google/gemma-4-E4B-it", "0.5.8", 0.8) == pytest.approx(0.8)  # given: adjust_mem_fraction_for_vlm skips
    # default: x 0.95 x (1 - 0.1 x (16 x 768^2 / (24 x 1024^2) - 1)), the second factor at most 1.05, for Gemma 4
    # E4B's 16-layer, 768-wide tower (1.0625 -> 1.05)
    ratio = 16 * 768**2 / (24 * 1024**2)
    default = mfs("google/gemma-3-1b-it", "0.5.8")  # a text-only model on the same GPU and settings
    assert mfs("google/gemma-4-E4B-it", "0.5.8") == pytest.approx(default * 0.95 * min(1.05, 1 - 0.1 * (ratio - 1)))


def test_check_warns_an_sglang_deployment_that_fits_only_above_the_low_end(tmp_path) -> None:
    """check's may-not-fit works for SGLang as for vLLM (and says so where the band is the spread of a few logs)."""
    from kvplan.deploy import check

    settings = Settings(mem_fraction_static=0.85)
    plan = max_batch("meta-llama/Llama-3.1-8B", gpu="L4", engine="sglang", max_model_len=8192, settings=settings)
    low, high = plan.interval["kv_cache_tokens"]
    assert low < plan.kv_cache_tokens
    context = (low + plan.kv_cache_tokens) // 2  # fits at kvplan's estimate, not at the low end

    def findings(length: int) -> list:
        path = tmp_path / f"serve-{length}.sh"
        path.write_text("# kvplan/gpu: L4\npython -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B "
                        f"--context-length {length} --mem-fraction-static 0.85\n")
        report = check([str(path)])
        return report.deployments[0].findings

    warned = [f for f in findings(context) if f.code == "may-not-fit"]
    assert warned and warned[0].severity == "warning"
    assert ("few logs" if plan.interval.get("few_logs") else "9 in 10 deployments") in warned[0].message
    assert not [f for f in findings(low // 2) if f.code == "may-not-fit"]
