"""Output that streams (issue 26): an estimate's rows made lazily (``RowSweep``), JSON, CSV, markdown and the
piped table written a block of rows at a time, in the very bytes the whole-document writers print."""

from __future__ import annotations

import io
import json
import random
import weakref
from collections.abc import Iterator
from dataclasses import fields, replace

import pytest

from kvplan.estimate import EstimateResult, EstimateRow, LayerRow, RowSweep, estimate
from kvplan.render.formats import write
from kvplan.render.json_out import dumps, encode_at, estimates_dict, write_items

from conftest import Terminal


def _value(rng: random.Random, depth: int = 0) -> object:
    r = rng.random()
    if depth < 4 and r < 0.2:
        return {rng.choice(["a", "b", "é", "k\n", "},\n  {"]) + str(i): _value(rng, depth + 1)
                for i in range(rng.randint(0, 4))}
    if depth < 4 and r < 0.3:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if depth < 4 and r < 0.35:
        return [{"x": _value(rng, 9), "y}, {": _value(rng, 9)} for _ in range(rng.randint(0, 4))]
    if depth < 4 and r < 0.4:
        return tuple(_value(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    if depth < 4 and r < 0.42:
        return {1: 2, None: 3, 2.5: "x"}
    return rng.choice([None, True, False, 0, -5, 10**30, 1.5, float("nan"), float("inf"), 1e-300, "x",
                       "é\u2028\"", "", "},\n      {"])


def test_json_pieces_are_json_dumps_indent_2_at_their_depth():
    rng = random.Random(26)
    for _ in range(3000):
        value = _value(rng)
        for level in (0, 1, 3):
            assert encode_at(value, level) == json.dumps(value, indent=2).replace("\n", "\n" + "  " * level)
        items = [_value(rng) if rng.random() < 0.1 else {"a": _value(rng, 9), "b": _value(rng, 9)}
                 for _ in range(rng.randint(0, 8))]
        out = io.StringIO()
        wrote = write_items(out, "", items, 3)
        want = json.dumps({"r": {"rows": items}}, indent=2)
        got = '{\n  "r": {\n    "rows": [\n      ' + out.getvalue() + "\n    ]\n  }\n}" if items else \
            '{\n  "r": {\n    "rows": []\n  }\n}'
        assert wrote == bool(items) and got == want


def _results() -> list[list[EstimateResult]]:
    llama = "meta-llama/Llama-3.1-8B"
    return [
        [estimate("gpt2", contexts="1k..8k", batches=[1, 8], lazy=True)],
        [estimate("gpt2", contexts=[1024, 3000], by_layer=True, lazy=True)],
        [estimate(llama, prompt_len=6144, output_len=2048, shared_prefix=4096, batches=[8, 64], lazy=True)],
        [estimate(llama, contexts=[2048, 8192], n=4, by_layer=True, lazy=True)],
        [estimate(llama, contexts=[8192], speculative_method="ngram", num_speculative_tokens=5, lazy=True)],
        [estimate("google/gemma-3-27b-it", contexts=[1024, 65536], engine=e, by_layer=True, lazy=True)
         for e in ("vllm", "sglang", "hf")],
        [estimate(llama, contexts="1..300:7", kv_dtypes="auto,fp8", engine=e, lazy=True) for e in ("vllm", "hf")],
    ]


@pytest.mark.parametrize("explain", [False, True])
def test_streamed_json_is_the_whole_document(explain):
    for results in _results():
        out = io.StringIO()
        write(results, "json", out, explain=explain)
        assert out.getvalue() == dumps(estimates_dict(results, explain=explain))
    empty = [replace(results[0], rows=()), replace(results[0], rows=())]  # no rows: '"rows": []', as json prints it
    for some in (empty[:1], empty):
        out = io.StringIO()
        write(some, "json", out, explain=explain)
        assert out.getvalue() == dumps(estimates_dict(some, explain=explain))


def _rich_table(results: list[EstimateResult], by_layer: bool, explain: bool) -> str:
    from kvplan.render.console import make_console
    from kvplan.render.plain import RichOut
    from kvplan.render.table import write_estimates

    out = io.StringIO()
    write_estimates(RichOut(make_console(out)), results, by_layer, explain)
    return out.getvalue()


@pytest.mark.parametrize("by_layer,explain", [(False, False), (True, True)])
def test_piped_table_is_what_rich_prints_piped(by_layer, explain):
    for results in _results():
        out = io.StringIO()  # not a terminal: the plain writer
        write(results, "table", out, by_layer=by_layer, explain=explain)
        assert out.getvalue() == _rich_table(results, by_layer, explain)


@pytest.mark.parametrize("model_id", [
    "an-organisation-with-a-long-name/a-model-whose-name-is-longer-than-the-table-it-heads-by-far",
    "org/[bold]model", "org/model:smile:", "org/modèle", "org/model\twith tab"])
def test_titles_rich_would_change_are_left_to_rich(model_id):
    result = estimate("gpt2", contexts=[1024], lazy=True)
    result = replace(result, model=replace(result.model, id=model_id,
                                           layer_kinds={"full": 6, "a kind named at such length that the caption is wider than the table": 6}))
    out = io.StringIO()
    write([result], "table", out, by_layer=True)
    assert out.getvalue() == _rich_table([result], True, False)


def _watched(rows: Iterator[EstimateRow], window: int, made: list[int]) -> Iterator[EstimateRow]:
    """``rows``, failing once more than ``window`` of them are alive at a time (a writer holding them all)."""
    alive: weakref.WeakSet[EstimateRow] = weakref.WeakSet()
    for row in rows:
        alive.add(row)
        made[0] += 1
        if len(alive) > window:
            raise AssertionError(f"{len(alive)} rows held at once")
        yield row


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown", "table"])
def test_writers_hold_a_window_of_rows_not_the_sweep(fmt):
    result = estimate("gpt2", contexts="1..20000:1", lazy=True)
    assert isinstance(result.rows, RowSweep)
    made = [0]
    sweep = result.rows
    watched = replace(result, rows=RowSweep(lambda: _watched(iter(sweep), 3000, made), len(sweep)))
    out = io.StringIO()
    write([watched], fmt, out)
    assert made[0] >= 20000
    whole = io.StringIO()
    write([replace(result, rows=tuple(sweep))], fmt, whole)
    assert out.getvalue() == whole.getvalue()


def test_row_sweep_reads_like_the_tuple():
    lazy = estimate("gpt2", contexts=[1024, 2048, 4096], batches=[1, 3], kv_dtypes="auto,fp8", lazy=True)
    whole = estimate("gpt2", contexts=[1024, 2048, 4096], batches=[1, 3], kv_dtypes="auto,fp8")
    rows = lazy.rows
    assert isinstance(rows, RowSweep) and isinstance(whole.rows, tuple)
    assert len(rows) == len(whole.rows) == 12
    assert tuple(rows) == tuple(rows) == whole.rows and rows == whole.rows and lazy == whole
    assert rows[0] == whole.rows[0] and rows[-1] == whole.rows[-1] and rows[5] == whole.rows[5]
    assert rows[2:7:2] == whole.rows[2:7:2]
    with pytest.raises(IndexError):
        rows[12]
    made = EstimateRow(**{f.name: getattr(whole.rows[0], f.name) for f in fields(EstimateRow)})
    assert vars(made) == vars(whole.rows[0])  # the fast construction sets every field, as __init__ does
    layer = estimate("gpt2", contexts=[1024], by_layer=True).rows[0].layers[0]
    assert vars(LayerRow(**vars(layer))) == vars(layer)


def test_a_layout_that_refuses_points_is_computed_whole():
    # transformers' HQQ packing may refuse one (batch, tokens): the refusal must come before any output
    result = estimate("meta-llama/Llama-3.1-8B", contexts=[1000], engine="hf", lazy=True,
                      engine_options={"kv_cache": "quantized", "backend": "hqq", "nbits": 2, "prompt_len": 1000})
    assert isinstance(result.rows, tuple)


def test_piped_table_never_imports_rich():
    import subprocess
    import sys

    code = ("import io, sys; from kvplan.estimate import estimate; from kvplan.render.formats import write; "
            "write([estimate('gpt2', contexts=[1024, 2048], lazy=True)], 'table', io.StringIO(), by_layer=True, "
            "explain=True); print('rich' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_table_longer_than_the_terminal_is_the_plain_one(monkeypatch, terminal_env):
    monkeypatch.setenv("LINES", "20")
    monkeypatch.setenv("COLUMNS", "120")
    long = [estimate("gpt2", contexts="1..40:1", lazy=True)]
    terminal, piped = Terminal(), io.StringIO()
    write(long, "table", terminal)
    write(long, "table", piped)
    assert terminal.getvalue() == piped.getvalue()  # no colour, no fitting: the plain writer
    short = Terminal()
    write([estimate("gpt2", contexts=[1024], lazy=True)], "table", short)
    assert "\x1b[" in short.getvalue()  # a table that fits the screen stays rich's, styled
