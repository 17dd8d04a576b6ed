"""The typer application: one module per command; errors become one line and exit status 2."""

from __future__ import annotations

import sys

import typer

from kvplan import __version__

app = typer.Typer(
    name="kvplan",
    help=(
        "Plan KV-cache memory for LLM serving.\n\n"
        "kvplan reads a model's architecture (a bundled model id, a config.json, a model directory or "
        "a YAML spec) and computes exactly how many bytes each serving engine (vLLM, SGLang, "
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
    from kvplan.cli import estimate, models, schema

    app.command("estimate")(estimate.estimate_command)
    app.command("models")(models.models_command)
    app.command("schema")(schema.schema_command)


_register()


def main(argv: list[str] | None = None) -> int:
    """Console entry point: user mistakes print one line on stderr and exit 2."""
    from kvplan.errors import KvplanError

    try:
        app(args=argv, prog_name="kvplan", standalone_mode=False)
    except KvplanError as exc:
        sys.stderr.write(f"kvplan: error: {exc}\n")
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        sys.stderr.write("kvplan: aborted\n")
        return 1
    except _click_exception() as exc:  # usage errors: unknown option, missing argument
        exc.show()
        return exc.exit_code
    except BrokenPipeError:
        return 0
    return 0


def _click_exception() -> type[Exception]:
    import click

    return click.ClickException


if __name__ == "__main__":
    raise SystemExit(main())
