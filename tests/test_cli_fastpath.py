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
]


@pytest.mark.parametrize("args", SAME, ids=lambda a: " ".join(a[1:]))
def test_fast_path_and_typer_agree(capsys, args):
    assert parse_fast(args[1:]) is not None, "this invocation should take the fast path"
    fast = (main(args), *capsys.readouterr())
    slow = (main(args, fast=False), *capsys.readouterr())
    assert fast == slow


@pytest.mark.parametrize("args", [
    [], ["--help"], ["-h"], ["gpt2", "--help"], ["gpt2", "--bogus"], ["gpt2", "extra"], ["gpt2", "-c"],
    ["gpt2", "--block-size", "x"], ["gpt2", "--by-layer=yes"], ["gpt2", "--", "-c"],
])
def test_anything_unusual_goes_to_typer(args):
    assert parse_fast(args) is None


def test_every_option_has_a_long_name_and_help():
    assert all(opt.names[0].startswith("--") and opt.help for opt in OPTIONS)
