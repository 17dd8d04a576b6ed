"""The typer application: one module per command; errors become one line and exit status 2."""

from __future__ import annotations

import sys

import typer

from kvplan import __version__

app = typer.Typer(
    name="kvplan",
    help=(
        "Plan KV-cache memory for LLM serving.\n\n"
        "kvplan reads a model's architecture (a bundled model id, a config.json, a model directory, "
        "a YAML spec or any Hugging Face Hub model id) and computes exactly how many bytes each serving "
        "engine (vLLM, SGLang, "
        "TensorRT-LLM, llama.cpp, transformers) holds in its KV cache, layer by layer. "
        "Sizes are printed in binary units: GiB = 2^30 bytes."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Plan KV-cache memory for LLM serving."""


def _register() -> None:
    from kvplan.cli import check, estimate, gpus, log, max_batch, models, schema, spec, verify

    app.command("estimate")(estimate.typer_command())
    app.command("models")(models.models_command)
    app.command("schema")(schema.schema_command)
    app.command("spec")(spec.spec_command)
    app.command("max-batch")(max_batch.max_batch_command)
    app.command("gpus")(gpus.gpus_command)
    app.command("check")(check.check_command)
    app.command("verify")(verify.verify_command)
    app.command("log")(log.log_command)


_register()


def run_app(args: list[str]) -> int:
    """Run the typer app on ``args``. Usage errors are typer's (exit 2); kvplan's own errors are
    one line on stderr with exit 2 (``guarded``)."""
    from kvplan.cli import guarded

    def invoke() -> None:
        app(args=args, prog_name="kvplan", standalone_mode=True)

    try:
        return guarded(invoke)
    except SystemExit as exc:  # standalone mode ends every run with SystemExit
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)


if __name__ == "__main__":
    raise SystemExit(run_app(sys.argv[1:]))
