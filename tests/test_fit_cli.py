"""``kvplan fit``, ``kvplan report`` and ``kvplan schema prices`` on the command line (in-process)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from conftest import run_cli
from kvplan.fit import fit

ARGS = ["meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "32", "--gpus", "H100,L4", "-e", "vllm,sglang"]


def test_json_is_the_library_result() -> None:
    code, out, _ = run_cli(["fit", *ARGS, "-f", "json"])
    assert code == 0
    lib = fit("meta-llama/Llama-3.1-8B", context=8192, concurrency=32, gpus=["H100", "L4"],
              engines=("vllm", "sglang"))
    assert json.loads(out) == json.loads(json.dumps(lib.to_dict()))


def test_table_csv_and_markdown_carry_every_row() -> None:
    _, out, _ = run_cli(["fit", *ARGS, "-f", "json"])
    rows = json.loads(out)["rows"]
    code, table, _ = run_cli(["fit", *ARGS])
    assert code == 0 and all(r["command"] in table for r in rows)
    _, text, _ = run_cli(["fit", *ARGS, "-f", "csv"])
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["kv_cache_tokens"]) for r in parsed] == [r["kv_cache_tokens"] for r in rows]
    _, md, _ = run_cli(["fit", *ARGS, "-f", "markdown"])
    assert md.count("\n| ") >= len(rows) + 1


def test_prices_and_their_schema(tmp_path: Path) -> None:
    code, out, _ = run_cli(["schema", "prices"])
    assert code == 0 and json.loads(out)["required"] == ["gpus"]
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"currency": "USD", "gpus": {"H100": 2.5, "L4": 0.5}}))
    code, out, _ = run_cli(["fit", *ARGS, "--prices", str(prices), "-f", "json"])
    rows = json.loads(out)["rows"]
    assert code == 0 and [r["usd_per_hour"] for r in rows] == sorted(r["usd_per_hour"] for r in rows)


def test_plot_file_is_written_and_a_bad_name_refused_first(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "fit.svg"
    code, _, _ = run_cli(["fit", *ARGS, "--plot", str(target), "-f", "json"])
    assert code == 0 and target.read_text().lstrip().startswith("<?xml")
    code, _, err = run_cli(["fit", *ARGS, "--plot", str(tmp_path / "fit.pdf")])
    assert code == 2 and "--plot" in err and err.count("\n") == 1


def test_nothing_holds_exits_1_and_a_mistake_2() -> None:
    code, out, _ = run_cli(["fit", "meta-llama/Llama-3.1-405B", "-c", "128k", "--concurrency", "1000000",
                            "--gpus", "L4", "-f", "json"])
    assert code == 1 and json.loads(out)["refused"]
    code, _, err = run_cli(["fit", "meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "0"])
    assert code == 2 and "--concurrency" in err


def test_report_writes_one_page(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = tmp_path / "report.html"
    code, _, _ = run_cli(["report", *ARGS, "-o", str(page)])
    text = page.read_text()
    assert code == 0 and text.startswith("<!doctype html>") and "kvplan report meta-llama/Llama-3.1-8B" in text
    code, _, err = run_cli(["report", *ARGS, "-o", str(tmp_path / "report.pdf")])
    assert code == 2 and "--output" in err
