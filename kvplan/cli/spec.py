"""``kvplan spec``: write a model's resolved description as YAML, to pin it for offline use."""

from __future__ import annotations

from collections.abc import Callable

from pathlib import Path

import typer

from kvplan.cli.estimate import MODEL_HELP

FIELDS: dict[str, str] = {"name": "model"}
"""Library parameter -> this command's parameter, where they differ."""


def command() -> Callable[..., None]:
    """The typer command function."""
    return spec_command


def spec_command(
    model: str = typer.Argument(..., help=MODEL_HELP, show_default=False),
    revision: str | None = typer.Option(None, "--revision",
                                        help="Hugging Face Hub revision (branch, tag or commit); implies the Hub."),
    hub: bool = typer.Option(False, "--hub", help="Read MODEL from the Hub even when a bundled spec has its id."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout.",
                                       show_default=False),
) -> None:
    """Print the model description kvplan computes with, as a YAML spec (the format of model_specs/).

    The spec names its source, the Hub commit and the weights bytes; `kvplan estimate spec.yaml` reads
    it back without network, so CI can pin a model:

      kvplan spec Qwen/Qwen3-32B --hub > qwen3-32b.yaml
    """
    import sys

    from kvplan.sources.resolve import load_model
    from kvplan.sources.yaml_spec import dump_spec_yaml

    spec = load_model(model, revision=revision, hub=hub)
    where = f"{spec.source or spec.id}" + (f" at commit {spec.revision}" if spec.revision else "")
    text = (f"# {spec.id}: written by `kvplan spec` from {where}.\n"
            "# `kvplan estimate THIS_FILE` reads it back offline.\n") + dump_spec_yaml(spec)
    if output is None:
        sys.stdout.write(text)
        return
    from kvplan.errors import UsageError

    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{output}: cannot write ({exc.strerror or exc})", field="output") from None
