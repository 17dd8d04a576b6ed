"""Charts as a person sees them: PNG and SVG files opened and parsed, their numbers (carried in the file)
equal to the results' JSON, colours and hatches that keep series apart in grey."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvplan.errors import UsageError
from kvplan.estimate import estimate
from kvplan.fit import fit
from kvplan.hardware import find_gpu, load_catalog
from kvplan.plan import max_batch
from kvplan.render import charts

pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def estimates():
    return [estimate("Qwen/Qwen3-8B", contexts="1k..64k", batches=[1, 8], kv_dtypes=["auto", "fp8"], engine=e)
            for e in ("vllm", "sglang")]


@pytest.fixture(scope="module")
def plans():
    return [max_batch("meta-llama/Llama-3.1-70B", gpu="H100", tp=4, engine=e, max_model_len=32768)
            for e in ("vllm", "sglang", "trtllm")]


def _open(path: Path) -> None:
    if path.suffix == ".png":
        with Image.open(path) as img:
            img.load()
            assert img.size[0] >= 1000 and img.size[1] >= 300  # readable at a document's width
            assert sum(1 for n in img.convert("L").histogram() if n) > 8  # something drawn, not a blank page
    else:
        root = ET.parse(path).getroot()
        assert root.tag.endswith("svg")
        texts = [t.text or "" for t in root.iter() if t.tag.endswith("text")]
        assert texts, "SVG text is kept as text"


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_estimate_chart_carries_the_json_numbers(estimates, tmp_path: Path, suffix: str) -> None:
    gpu = find_gpu("H100", load_catalog(None))
    path = charts.save(charts.estimate_chart(estimates, gpu), tmp_path / f"kv{suffix}")
    _open(path)
    data = charts.read_data(path)
    want = {(r.engine, row.batch, row.context, row.kv_bytes) for r in estimates for row in r.rows}
    got = {(p["engine"], p["batch"], p["context"], p["kv_bytes"]) for p in data["points"]}
    assert got == want
    assert data["gpu"]["memory_bytes"] == gpu.memory_bytes


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_budget_chart_carries_each_plans_items(plans, tmp_path: Path, suffix: str) -> None:
    path = charts.save(charts.budget_chart(plans), tmp_path / f"budget{suffix}")
    _open(path)
    data = charts.read_data(path)
    for plan, drawn in zip(plans, data["plans"]):
        doc = plan.to_dict()
        items = {i["name"]: i["bytes"] for i in doc["breakdown"]}
        assert drawn["weights"] == items["weights"] and drawn["kv_cache"] == max(items["kv_cache"], 0)
        parts = sum(drawn[k] for k in ("weights", "activation", "non_torch", "cudagraph", "kv_cache", "left_over"))
        assert parts == doc["gpu"]["total_bytes"]  # the bar is the whole GPU


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_max_batch_chart_draws_concurrency_against_context(plans, tmp_path: Path, suffix: str) -> None:
    """The second panel: each engine's max batch at each context up to max-model-len, planned again by
    max_batch itself, with the engine's range where it has one."""
    path = charts.save(charts.budget_chart(plans), tmp_path / f"mb{suffix}")
    _open(path)
    curves = charts.read_data(path)["curves"]
    assert [c["engine"] for c in curves] == [p.engine for p in plans]
    for plan, curve in zip(plans, curves):
        contexts = [q["context"] for q in curve["points"]]
        assert contexts == [1024, 2048, 4096, 8192, 16384, 32768]  # doubling, up to --max-model-len
        batches = [q["max_batch"] for q in curve["points"]]
        assert batches == sorted(batches, reverse=True) and batches[0] > 10 * batches[-1]
        assert curve["points"][-1]["max_batch"] == plan.max_batch  # the plan asked is the curve's last point
        for q in curve["points"][1::2]:
            again = max_batch("meta-llama/Llama-3.1-70B", gpu="H100", tp=4, engine=plan.engine, max_model_len=32768,
                              context=q["context"]).to_dict()
            assert q["max_batch"] == again["max_batch"] and q["max_concurrency"] == again["max_concurrency"]
            assert q["max_batch_interval"] == (again["interval"]["max_batch"] if "interval" in again else None)
    assert any(q["max_batch_interval"] for c in curves for q in c["points"])  # vLLM's range is drawn
    if suffix == ".svg":
        texts = " ".join(t.text or "" for t in ET.parse(path).getroot().iter() if t.tag.endswith("text"))
        assert "against context" in texts and "One GPU's memory" in texts  # both panels, in one file


def test_a_plan_made_without_max_batch_draws_the_bars_alone(plans) -> None:
    from dataclasses import replace

    chart = charts.budget_chart([replace(p, asked=None) for p in plans])
    assert chart.below is None and "curves" not in chart.data


def test_the_sweep_reaches_max_model_len_and_holds_the_context_asked() -> None:
    assert charts.sweep(32000, 5000) == [1024, 2048, 4096, 5000, 8192, 16384, 32000]
    assert charts.sweep(131072) == [1024 << k for k in range(8)]
    assert charts.sweep(2048) == [256, 512, 1024, 2048]  # a short max-model-len starts lower


def test_the_asked_workload_is_marked(tmp_path: Path) -> None:
    plan = max_batch("Qwen/Qwen3-8B", gpu="H100", solve="utilization", concurrency=8, context=4096,
                     max_model_len=32768)
    chart = charts.budget_chart([plan]).below
    assert chart is not None and chart.vertical == ("context asked: 4k", 4096.0)
    assert chart.reference is not None and chart.reference[1] == 8.0
    point = next(q for q in chart.data["curves"][0]["points"] if q["context"] == 4096)
    assert point["max_batch"] >= 8  # the fraction solved for holds the concurrency asked, at the context asked


def test_contexts_where_none_fits_are_kept_and_marked() -> None:
    """Up to the model's limit: the contexts where not one sequence fits stay in the data (max batch 0) and are
    marked on the foot of the log axis, not dropped from it."""
    plan = max_batch("meta-llama/Llama-3.1-70B", gpu="H100", tp=2, engine="vllm")
    chart = charts.budget_chart([plan]).below
    assert chart is not None
    points = chart.data["curves"][0]["points"]
    assert points[-1]["context"] == plan.max_model_len and points[-1]["max_batch"] == plan.max_batch == 0
    unfit = [q["context"] for q in points if q["max_batch"] == 0]
    assert unfit and chart.series[0].none == tuple(float(c) for c in unfit)
    assert chart.y_floor is not None and chart.y_floor < min(chart.series[0].y)


def test_fit_chart_carries_the_rows(tmp_path: Path) -> None:
    res = fit("meta-llama/Llama-3.1-8B", context=8192, concurrency=64, gpus=["H100", "L4", "A100-40GB"],
              engines=("vllm", "sglang"))
    path = charts.save(charts.fit_chart(res), tmp_path / "fit.svg")
    _open(path)
    assert charts.read_data(path)["rows"] == [
        {"gpu": r["gpu"], "engine": r["engine"], "kv_dtype": r["kv_dtype"], "gpus": r["gpus"],
         "usd_per_hour": r["usd_per_hour"]} for r in res.to_dict()["rows"]]


def test_series_differ_in_grey_too() -> None:
    """Colours of distinct lightness, each with its own hatch and line style: a black-and-white print keeps them."""
    def lightness(hex_colour: str) -> float:
        r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        return 0.299 * r + 0.587 * g + 0.114 * b

    levels = sorted(lightness(c) for c in charts.COLOURS[:6])
    assert min(b - a for a, b in zip(levels, levels[1:])) > 8
    assert len(set(charts.HATCHES)) == len(charts.HATCHES)


def test_the_same_chart_gives_the_same_svg(plans, tmp_path: Path) -> None:
    a = charts.save(charts.budget_chart(plans), tmp_path / "a.svg").read_bytes()
    b = charts.save(charts.budget_chart(plans), tmp_path / "b.svg").read_bytes()
    assert a == b


@pytest.mark.parametrize("name", ["chart.pdf", "chart", "no/such/dir/chart.png"])
def test_a_bad_file_name_is_refused_by_field(name: str) -> None:
    with pytest.raises(UsageError) as exc:
        charts.check_path(name)
    assert exc.value.field == "plot"


def test_without_matplotlib_one_line_says_what_to_install(monkeypatch: pytest.MonkeyPatch, plans,
                                                           tmp_path: Path) -> None:
    import builtins

    real = builtins.__import__

    def no_matplotlib(name: str, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(UsageError) as exc:
        charts.save(charts.budget_chart(plans), tmp_path / "x.png")
    assert exc.value.field == "plot" and "kvplan[plot]" in str(exc.value)


def test_the_cli_draws_what_it_prints(tmp_path: Path) -> None:
    import json

    from conftest import run_cli

    target = tmp_path / "mb.svg"
    code, out, _ = run_cli(["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "-e",
                            "vllm,sglang", "--max-model-len", "32k", "--plot", str(target), "-f", "json"])
    assert code == 0
    docs = json.loads(out)["results"]
    drawn = charts.read_data(target)["plans"]
    for doc, bar in zip(docs, drawn):
        items = {i["name"]: i["bytes"] for i in doc["breakdown"]}
        assert bar["engine"] == doc["engine"] and bar["weights"] == items["weights"]
    curves = charts.read_data(target)["curves"]
    for context in (4096, 16384):  # the concurrency-against-context panel says what max-batch --context says
        code, out, _ = run_cli(["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "-e",
                                "vllm,sglang", "--max-model-len", "32k", "-c", str(context), "-f", "json"])
        assert code == 0
        for doc, curve in zip(json.loads(out)["results"], curves):
            point = next(q for q in curve["points"] if q["context"] == context)
            assert (curve["engine"], point["max_batch"], point["max_concurrency"]) == \
                (doc["engine"], doc["max_batch"], doc["max_concurrency"])
    target = tmp_path / "kv.png"
    code, out, _ = run_cli(["estimate", "Qwen/Qwen3-8B", "-c", "1k..16k", "--plot", str(target), "-f", "json"])
    assert code == 0
    rows = json.loads(out)["rows"]
    assert {(p["context"], p["kv_bytes"]) for p in charts.read_data(target)["points"]} == \
        {(r["context"], r["kv_bytes"]) for r in rows}
