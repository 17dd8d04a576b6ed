"""The estimate fast path (no typer import) must behave exactly like the typer command."""

from __future__ import annotations

import pytest

from kvplan.cli import main
from kvplan.cli.estimate import OPTIONS, parse_fast

SAME = [
    ["estimate", "gpt2"],
    ["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k,32k", "-b", "1,8", "-d", "bf16,fp8", "-f", "json"],
    ["estimate", "--context=4k", "Qwen/Qwen3-8B", "--format=csv", "--by-layer"],
    ["estimate", "openai/gpt-oss-20b", "-c4k", "-fmarkdown", "--explain", "--by-layer"],
    ["estimate", "deepseek-ai/DeepSeek-V3", "-e", "hf", "--engine-version", "4.57", "-c", "1k", "-f", "json"],
    ["estimate", "deepseek-ai/DeepSeek-V3", "--block-size", "16", "-c", "1000", "-f", "json"],
    ["estimate", "gpt2", "-c", "1k", "-c", "2k", "-f", "json"],  # the last repeat wins
    ["estimate", "gpt2", "-c", "1k..4k", "--plot"],
    ["estimate", "gpt2", "-c", "0"],  # kvplan's own error, exit 2
    ["estimate", "no/such-model"],
    ["estimate", "gpt2", "-e", "tgi"],
    ["estimate", "gpt2", "--block-size", "x"],  # values are converted by run(), the same for both parsers
    ["estimate", "gpt2", "-c", "1k", "-e", "vllm,sglang", "-f", "json"],
]


@pytest.mark.parametrize("args", SAME, ids=lambda a: " ".join(a[1:]))
def test_fast_path_and_typer_agree(capsys, args):
    assert parse_fast(args[1:]) is not None, "this invocation should take the fast path"
    fast = (main(args), *capsys.readouterr())
    slow = (main(args, fast=False), *capsys.readouterr())
    assert fast == slow


@pytest.mark.parametrize("args", [
    [], ["--help"], ["-h"], ["gpt2", "--help"], ["gpt2", "--bogus"], ["gpt2", "extra"], ["gpt2", "-c"],
    ["gpt2", "--by-layer=yes"], ["gpt2", "--", "-c"],
])
def test_anything_unusual_goes_to_typer(args):
    assert parse_fast(args) is None


def test_every_option_has_a_long_name_and_help():
    assert all(opt.names[0].startswith("--") and opt.help for opt in OPTIONS)


def test_the_typer_command_is_built_from_the_same_table():
    """One options table: the typer command declares exactly OPTIONS (names, defaults, switches)."""
    import typer

    from kvplan.cli.app import app

    command = typer.main.get_command(app).commands["estimate"]
    options = {p.name: p for p in command.params if p.param_type_name == "option"}
    assert set(options) == {opt.dest for opt in OPTIONS}
    for opt in OPTIONS:
        assert set(options[opt.dest].opts) == set(opt.names), opt.dest
        assert options[opt.dest].default == opt.default, opt.dest
        assert bool(options[opt.dest].is_flag) == opt.flag, opt.dest
