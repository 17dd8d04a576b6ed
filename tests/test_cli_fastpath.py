"""The table-driven reader (no typer import) must behave exactly like the typer command built from the same table,
for every command it runs."""

from __future__ import annotations

import importlib

import pytest

from conftest import REPO
from kvplan.cli import COMMANDS, main
from kvplan.cli.parse import read

LOG = str(REPO / "tests/data/logs/vllm-0.6-10517-llama31-8b-3090-29k.log")
PASS, SPECS = str(REPO / "examples/pass"), str(REPO / "examples/specs")
FAIL = str(REPO / "examples/fail")

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
    ["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4"],
    ["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "L4", "--max-model-len", "128k", "-f", "json"],  # exit 1
    ["max-batch", "Qwen/Qwen3-8B", "-g", "H100", "-e", "sglang", "--mem-fraction-static", "0.8", "-f", "json"],
    ["max-batch", "Qwen/Qwen3-8B", "-g", "H100", "-e", "vllm", "--mem-fraction-static", "0.8"],  # foreign flag
    ["max-batch", "Qwen/Qwen3-8B", "-g", "H100", "--solve", "gpus", "--concurrency", "64", "-c", "32k"],
    ["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-e", "llamacpp", "--dp", "2", "-ep"],  # -ep: one name
    ["max-batch", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "H100", "--tp", "2", "-ep", "-f", "json"],
    ["estimate", "gpt2", "-c=1k", "-f", "json"],  # click reads '=1k' as -c's value: both refuse it alike
    ["check", PASS, "--specs", SPECS, "-f", "json"],
    ["check", FAIL, "--specs", SPECS],  # exit 1
    ["check", "--gpu", "L4", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "131072"],
    ["log", LOG, "-f", "json"],
    ["log", LOG, "--compare", "--tp", "1"],
    ["log", LOG, "--engine", "nope"],
    ["models", "-f", "json"],
    ["gpus", "--format", "json"],
    ["schema", "deployment"],
    ["schema"],
    ["schema", "nope"],
    ["spec", "gpt2"],
    ["fit", "meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "16", "--gpus", "L4,H100", "-f", "json"],
]


@pytest.mark.parametrize("args", SAME, ids=lambda a: " ".join(a).replace(str(REPO) + "/", ""))
def test_the_reader_and_typer_agree(capsys, args):
    module = importlib.import_module(f"kvplan.cli.{COMMANDS[args[0]]}")
    assert read(module, args[1:]) is not None, "this invocation should take the fast path"
    fast = (main(args), *capsys.readouterr())
    slow = (main(args, fast=False), *capsys.readouterr())
    assert fast == slow


@pytest.mark.parametrize("args", [
    ["estimate"], ["estimate", "--help"], ["estimate", "-h"], ["estimate", "gpt2", "--help"],
    ["estimate", "gpt2", "--bogus"], ["estimate", "gpt2", "extra"], ["estimate", "gpt2", "-c"],
    ["estimate", "gpt2", "--by-layer=yes"], ["estimate", "gpt2", "--", "-c"],
    ["check"], ["check", "--strict"], ["log", LOG, "--tp", "x"], ["log", LOG, LOG], ["models", "extra"],
    ["fit", "gpt2", "-c", "8k"], ["report", "gpt2", "-c", "1k", "--concurrency", "1"], ["schema", "a", "b"],
])
def test_anything_unusual_goes_to_typer(args):
    module = importlib.import_module(f"kvplan.cli.{COMMANDS[args[0]]}")
    assert read(module, args[1:]) is None


@pytest.mark.parametrize("args", [
    ["estimate", "gpt2", "--bogus"], ["check"], ["log", LOG, "--tp", "x"], ["fit", "gpt2", "-c", "8k"],
    ["models", "extra"],
])
def test_what_the_reader_leaves_is_one_line_and_exit_2(capsys, args):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1


RUN_BY_THE_READER = list(COMMANDS)


def test_every_command_is_read_from_its_table():
    for name in RUN_BY_THE_READER:
        module = importlib.import_module(f"kvplan.cli.{COMMANDS[name]}")
        assert hasattr(module, "run") and hasattr(module, "options") and module.DOC, name


@pytest.mark.parametrize("name", RUN_BY_THE_READER)
def test_every_option_has_a_long_name_and_help(name):
    module = importlib.import_module(f"kvplan.cli.{COMMANDS[name]}")
    assert all(opt.names[0].startswith("--") and opt.help for opt in module.options())


@pytest.mark.parametrize("name", RUN_BY_THE_READER)
def test_the_typer_command_is_built_from_the_same_table(name):
    """One options table: the typer command declares exactly the table (names, defaults, switches, required)."""
    import typer

    from kvplan.cli.app import app

    module = importlib.import_module(f"kvplan.cli.{COMMANDS[name]}")
    command = typer.main.get_command(app).commands[name]
    options = {p.name: p for p in command.params if p.param_type_name == "option"}
    table = module.options()
    assert set(options) == {opt.dest for opt in table}
    for opt in table:
        assert set(options[opt.dest].opts) == set(opt.names), opt.dest
        assert bool(options[opt.dest].required) == opt.required, opt.dest
        if not opt.required:
            assert options[opt.dest].default == opt.default, opt.dest
        assert bool(options[opt.dest].is_flag) == opt.flag, opt.dest
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    argument = getattr(module, "ARGUMENT", None)
    assert [p.name for p in arguments] == ([argument.dest] if argument else [])


def test_the_top_level_help_lists_every_command_without_the_parser(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f"\n  {name} " in out, name
    assert "--version" in out and max(map(len, out.splitlines())) <= 130  # never wider than a command's summary
    assert main([]) == 2 and capsys.readouterr().out == out  # bare `kvplan`: the same help, status 2
    assert main(["--help"], fast=False) == 0 and "max-batch" in capsys.readouterr().out  # typer's, as before


def test_plot_takes_a_file_name_or_draws_in_the_terminal(tmp_path):
    from kvplan.cli import estimate

    svg = str(tmp_path / "kv.svg")
    for args, plot, plot_file in [
        (["gpt2", "--plot", svg], False, svg),
        (["gpt2", f"--plot={svg}"], False, svg),
        (["--plot", svg, "gpt2"], False, svg),
        (["gpt2", "--plot"], True, None),
        (["gpt2", "--plot", "-c", "1k"], True, None),
        (["gpt2", "--plot-file", svg], False, svg),
    ]:
        values = read(estimate, args)
        assert values is not None and (values["plot"], values["plot_file"], values["model"]) == (plot, plot_file,
                                                                                               "gpt2"), args
    assert read(estimate, ["gpt2", "--plot", "kv.txt"]) is None  # a second MODEL: left to typer, which refuses it


def test_check_of_a_name_too_long_for_the_system_is_one_line(capsys):
    assert main(["check", "a" * 5000, "-f", "json"]) == 2  # found by the fuzz test: the literal-command probe raised
    assert "Traceback" not in capsys.readouterr().err  # the file is reported as not read, like any missing file


def test_check_leaves_the_collectors_thresholds_as_it_found_them() -> None:
    """check collects less often while it runs (cli/check.py), and restores the caller's thresholds after."""
    import contextlib
    import gc
    import io

    before = gc.get_threshold()
    with contextlib.redirect_stdout(io.StringIO()):
        main(["check", str(REPO / "examples" / "pass" / "compose.yaml"), "-f", "json"])
    assert gc.get_threshold() == before
