"""The tables of ``max-batch``, ``log``, ``models``, ``gpus`` and ``fit`` and the lines around them, written without rich
when piped (``kvplan/render/grid.py``), are the bytes rich prints piped: each command is run both ways on real
inputs, and random tables and lines are laid out both ways at random console widths."""

from __future__ import annotations

import io
import random
import subprocess
import sys

import pytest
from conftest import REPO, Terminal

from kvplan.cli import main
from kvplan.render import grid
from kvplan.render.grid import Grid, GridOut, wrap

LOGS = sorted((REPO / "tests/data/logs").glob("*.log"))
COMMANDS = [
    ["gpus"],
    ["models"],
    ["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4"],
    ["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "L4"],  # does not fit: "no" in bold red
    ["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-e", "vllm,sglang,trtllm"],
    ["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-c", "5k", "--prompt-len", "4k", "--n", "4",
     "--shared-prefix", "2k"],
    ["max-batch", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--kv-cache-dtype", "fp8"],
    ["max-batch", "Qwen/Qwen3-8B", "--gpu", "RTX-4090", "--engine", "sglang", "--solve", "context", "--batch", "16"],
    *(["log", str(path)] for path in LOGS),
    *(["log", str(REPO / "tests/data/logs" / name), "--compare", "--model", model] for name, model in (
        ("vllm-0.6-10517-llama31-8b-3090-29k.log", "meta-llama/Llama-3.1-8B"),
        ("vllm-0.6.5-10511-llama3-8b-h100-profile-lines.log", "meta-llama/Llama-3.1-8B"),
        ("trtllm-0.13-2268-primary-pool.log", "meta-llama/Llama-3.1-8B"),
        ("vllm-0.27.1-runner-v2-4090.log", "Qwen/Qwen3-8B"))),
]


def _both(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[str, str]:
    """(what the command prints piped, what rich prints piped for the same command)."""
    code = main(argv)
    assert code in (0, 1)
    plain = capsys.readouterr().out
    with monkeypatch.context() as m:
        m.setattr(grid, "plain_target", lambda stream: False)  # every table and line through rich
        assert main(argv) == code
        rich = capsys.readouterr().out
    return plain, rich


@pytest.mark.parametrize("columns", [None, "47", "100"])
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a).replace(str(REPO) + "/", ""))
def test_each_table_is_what_rich_prints_piped(capsys, monkeypatch, argv, columns):
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)  # rich's width for `log` (the others are never cut)
    plain, rich = _both(capsys, monkeypatch, argv)
    assert plain == rich and "━" in plain


FIT = ["fit", "meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "32", "--gpus", "H100,L4", "-e", "vllm,sglang"]
FIT_COMMANDS = [
    FIT,
    [*FIT, "--prices", "{prices}"],  # priced columns, rows by $/hour
    ["fit", "Qwen/Qwen3-8B", "-c", "32k", "--concurrency", "4", "--gpus", "H100,L4", "--beside", "Qwen/Qwen3-0.6B",
     "--beside-concurrency", "8"],  # a line under each command: fits beside or why not
    ["fit", "meta-llama/Llama-3.1-405B", "-c", "128k", "--concurrency", "1000000", "--gpus", "L4,H100"],  # none holds
]


@pytest.mark.parametrize("argv", FIT_COMMANDS, ids=lambda a: " ".join(a[1:]))
def test_fit_is_what_rich_prints_piped(capsys, monkeypatch, tmp_path, argv):
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    prices = tmp_path / "prices.json"
    prices.write_text('{"currency": "USD", "gpus": {"H100": 2.5, "L4": 0.5}}')
    plain, rich = _both(capsys, monkeypatch, [str(prices) if a == "{prices}" else a for a in argv])
    assert plain == rich and "Notes\n" in plain
    assert ("━" in plain) == ("No GPU type asked for holds this workload." not in plain)


def _words(rng: random.Random) -> str:
    pieces = [rng.choice(["a", "bb", "kv", "1,024", "GiB", "x" * rng.randint(1, 40), "(derived)", "-", "•",
                             "".join(sorted(grid._NARROW))])
              for _ in range(rng.randint(0, 9))]
    text = "".join(p + rng.choice([" ", " ", "  ", ""]) for p in pieces)
    return rng.choice([text, text.strip(), " " + text, text + "   "])


def _rich_console(stream: io.StringIO, width: int) -> object:
    from rich.console import Console

    return Console(file=stream, width=width)


@pytest.mark.parametrize("seed", range(4))
def test_random_tables_and_lines_are_laid_out_as_rich_lays_them_out(seed):
    rng = random.Random(seed)
    for _ in range(150):
        width = rng.choice([20, 33, 40, 60, 80, 121, 100_000])
        count = rng.randint(1, 6)
        table = Grid(rng.choice([None, "", _words(rng), _words(rng) + "\n" + _words(rng)]),
                     tuple((_words(rng) or "h", rng.choice(["left", "right"])) for _ in range(count)),
                     tuple(tuple(_words(rng) for _ in range(count)) for _ in range(rng.randint(0, 5))),
                     show_header=rng.random() < 0.7, fold=rng.random() < 0.5)
        line = _words(rng) * rng.randint(1, 4)
        soft = rng.random() < 0.3  # a line never broken (fit's launch commands)
        plain, rich = io.StringIO(), io.StringIO()
        out = GridOut(plain, wide=width == 100_000)
        out.width, out._console = width, _rich_console(plain, width)  # what it leaves to rich: the same width
        out.grid(table)
        out.line(line, soft_wrap=soft)
        theirs = GridOut(rich, wide=width == 100_000)
        theirs.width, theirs._console = None, _rich_console(rich, width)
        theirs.grid(table)
        theirs.line(line, soft_wrap=soft)
        assert plain.getvalue() == rich.getvalue(), (width, table, line, soft)


def test_wrap_breaks_lines_as_rich_does():
    from rich.console import Console

    rng = random.Random(26)
    for _ in range(2000):
        text, width = _words(rng) * rng.randint(1, 3), rng.randint(1, 50)
        out = io.StringIO()
        Console(file=out, width=width).print(text, markup=False, highlight=False, emoji=False)
        assert "".join(line + "\n" for line in wrap(text, width) or []) == out.getvalue(), (text, width)


def test_what_rich_would_print_otherwise_is_left_to_rich():
    cells = ["[bold]x[/bold] y", "a :smile: b", "wide 漢字 cell", "tab\there", "a" * 30]
    for cell in cells:
        table = Grid("t", (("h", "left"), ("v", "right")), ((cell, "1"),), fold=False)
        plain, rich = io.StringIO(), io.StringIO()
        out = GridOut(plain, wide=False)
        out.width, out._console = 20, _rich_console(plain, 20)
        out.grid(table)
        out.line(cell)  # a line is data: its brackets printed as they are, as rich prints them with markup off
        theirs = GridOut(rich, wide=False)
        theirs.width, theirs._console = None, _rich_console(rich, 20)
        theirs.grid(table)
        theirs.line(cell)
        assert plain.getvalue() == rich.getvalue(), cell


def test_piped_tables_never_import_rich():
    code = ("import io, sys, contextlib\nfrom kvplan.cli import main\n"
            "for argv in (['gpus'], ['models'], ['max-batch', 'Qwen/Qwen3-8B', '--gpu', 'L4'], "
            "['fit', 'Qwen/Qwen3-8B', '-c', '8k', '--concurrency', '4', '--gpus', 'H100,L4'], "
            f"['log', {str(LOGS[-1])!r}, '--compare', '--model', 'meta-llama/Llama-3.1-8B']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n        main(argv)\n"
            "print('rich' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_a_terminal_still_gets_rich(monkeypatch, terminal_env):
    import kvplan
    from kvplan.render.formats import write

    plan = kvplan.max_batch(kvplan.load_model("meta-llama/Llama-3.1-70B"), gpu="L4")  # does not fit: "no" in red
    terminal, piped = Terminal(), io.StringIO()
    write([plan], "table", terminal)
    write([plan], "table", piped)
    assert "\x1b[" in terminal.getvalue() and "\x1b[" not in piped.getvalue()
