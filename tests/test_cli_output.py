"""What the commands print: never cut when piped (issue 15 item 13), a check table that fits the
terminal (item 17), engines compared in one table (item 16), suggestions as ids are spelled (item 19)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvplan.cli import main
from conftest import REPO


def piped(*args: str, columns: str = "40") -> subprocess.CompletedProcess[str]:
    """``kvplan ARGS | cat``: stdout is a pipe; COLUMNS says the terminal is narrow."""
    env = {**os.environ, "COLUMNS": columns, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, env=env,
                          cwd=REPO)


def test_models_piped_shows_every_id_whole():
    from kvplan.sources.bundled import bundled_ids

    done = piped("models")
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    for model_id in bundled_ids():
        assert model_id in done.stdout, model_id


def test_big_estimate_table_piped_keeps_exact_bytes():
    done = piped("estimate", "meta-llama/Llama-3.1-405B", "-c", "128k", "-b", "1024", "-d", "fp32,auto")
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    data = json.loads(piped("estimate", "meta-llama/Llama-3.1-405B", "-c", "128k", "-b", "1024", "-d", "fp32,auto",
                            "-f", "json").stdout)
    for row in data["rows"]:
        assert f"{row['kv_bytes']:,}" in done.stdout


def test_terminal_tables_fold_instead_of_ellipsis():
    from rich.console import Console
    from rich.table import Table

    from kvplan.render.console import never_cut

    table = Table()
    table.add_column("id")
    table.add_column("n")
    table.add_row("meta-llama/Llama-3.1-8B-Instruct", "549,755,813,888")
    console = Console(width=20, record=True, force_terminal=True, color_system=None)
    console.print(never_cut(table))
    text = console.export_text()
    assert "…" not in text and "Instruct" in text.replace("\n", "").replace("│", "").replace(" ", "")


def test_explain_keeps_bracketed_text(capsys):
    code = main(["estimate", "gpt2", "-c", "1k", "--explain"])
    out = capsys.readouterr().out
    assert code == 0 and "[auto] 12 full layers" in out  # rich markup used to eat '[auto]'


def test_engines_compared_in_one_table(capsys):
    code = main(["estimate", "meta-llama/Llama-3.1-8B", "-c", "1000", "-e", "vllm,sglang,hf"])
    out = capsys.readouterr().out
    assert code == 0 and "by engine" in out and "engine" in out
    assert "vllm" in out and "sglang" in out and "hf " in out
    # vLLM holds whole 16-token blocks: 1,008 tokens; SGLang's pages are 1 token; hf holds 1000
    assert "132,120,576" in out and "131,072,000" in out  # 1008 x 131072, 1000 x 131072


def test_engines_json_one_result_per_engine(capsys):
    code = main(["estimate", "meta-llama/Llama-3.1-8B", "-c", "1000", "-e", "vllm,sglang", "-f", "json"])
    many = json.loads(capsys.readouterr().out)
    code1 = main(["estimate", "meta-llama/Llama-3.1-8B", "-c", "1000", "-e", "vllm", "-f", "json"])
    one = json.loads(capsys.readouterr().out)
    assert code == code1 == 0
    assert set(many) == {"kvplan_version", "results"} and [r["engine"] for r in many["results"]] == ["vllm", "sglang"]
    assert many["results"][0] == one  # each result is the single-engine document, unchanged
    assert {"kvplan_version", "engine", "model", "rows", "assumptions"} <= set(one) and "results" not in one


def test_engines_csv_one_header(capsys):
    code = main(["estimate", "gpt2", "-c", "1k", "-e", "vllm,hf", "-f", "csv"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[0].startswith("model,engine,") and len(lines) == 3
    assert lines[1].split(",")[1] == "vllm" and lines[2].split(",")[1] == "hf"


def test_engine_list_mistakes_name_the_flag(capsys):
    assert main(["estimate", "gpt2", "-e", "vllm,,hf"]) == 2
    assert capsys.readouterr().err.startswith("kvplan: error: --engine: empty item")


def _check_report():
    from kvplan.deploy import check

    examples = REPO / "examples"
    return check([str(p) for p in sorted(examples.rglob("*.yaml"))], specs=examples / "specs")


def test_check_table_fits_the_terminal_and_says_what_fits():
    from kvplan.render.check_out import render

    report = _check_report()
    wide = render(report, "table")
    assert "longest that fits" in wide.splitlines()[0] and "concurrency" in wide.splitlines()[0]
    for width in (60, 80, 100):
        text = render(report, "table", width)
        # a line is wider only where one word (a long path) cannot be broken without cutting it
        assert all(len(line) <= width or len(line.split()) == 1 for line in text.splitlines()), width
        for d in report.deployments:  # nothing is lost, only laid out
            assert d.name in text and (d.model or "-") in text
    assert render(report, "table", 10_000) == wide


@pytest.mark.parametrize("typed,want,never", [
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3-30B-A3B", "480B"),
    ("llama-3.1-8", "meta-llama/Llama-3.1-8B", None),
    ("gemma-3-27b", "google/gemma-3-27b-it", None),
])
def test_suggestions_keep_case_once_and_same_size(typed, want, never):
    from kvplan.sources.resolve import close_bundled

    close = close_bundled(typed)
    assert want in close and len(close) == len(set(close)) <= 3
    if never:
        assert not any(never.lower() in c.lower() for c in close), close
