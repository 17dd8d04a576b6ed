"""The commands: each one's name -> its module in ``kvplan.cli``, in the order the help lists them (no module is
imported here: the entry point imports only the one it runs), and the top-level help, written from the same list
without the parser (``kvplan``, ``kvplan --help``)."""

from __future__ import annotations

COMMANDS = {"estimate": "estimate", "models": "models", "schema": "schema", "spec": "spec", "max-batch": "max_batch",
            "fit": "fit", "report": "report", "gpus": "gpus", "check": "check", "verify": "verify", "log": "log",
            "mcp": "mcp"}

SUMMARY = "Plan KV-cache memory for LLM serving."
DESCRIPTION = (
    "kvplan reads a model's architecture (a bundled model id, a config.json, a model directory, a YAML spec or any "
    "Hugging Face Hub model id) and computes exactly how many bytes each serving engine (vLLM, SGLang, "
    "TensorRT-LLM, llama.cpp, transformers) holds in its KV cache, layer by layer. Sizes are printed in binary "
    "units: GiB = 2^30 bytes."
)
ROOT_OPTIONS = (("--version", "Print the version and exit."), ("-h, --help", "Show this message and exit."))
WIDTH = 100  # the help's own line width: never cut, whatever the terminal


def top_help() -> str:
    """The top-level help: usage, what kvplan does, each command with the first line of its help, the options."""
    from importlib import import_module

    lines = ["Usage: kvplan [OPTIONS] COMMAND [ARGS]...", "", SUMMARY, "", *_wrapped(DESCRIPTION, WIDTH), "",
             "Commands:"]
    pad = max(map(len, COMMANDS)) + 2
    for name, module in COMMANDS.items():
        first = import_module(f"kvplan.cli.{module}").DOC.strip().splitlines()[0]
        lines.append(f"  {name:<{pad}}{first}")
    lines += ["", "Options:"]
    pad = max(len(flag) for flag, _ in ROOT_OPTIONS) + 2
    lines += [f"  {flag:<{pad}}{text}" for flag, text in ROOT_OPTIONS]
    lines += ["", "`kvplan COMMAND --help` shows a command's options and examples."]
    return "\n".join(lines) + "\n"


def _wrapped(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines
