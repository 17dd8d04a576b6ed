"""``kvplan gpus``: the GPU catalog (memory as torch reports it, spec-sheet bandwidth and compute)."""

from __future__ import annotations

from collections.abc import Callable

from pathlib import Path
from typing import Optional

import typer

FIELDS: dict[str, str] = {"format": "fmt"}
"""Library parameter -> this command's parameter, where they differ."""


def command() -> Callable[..., None]:
    """The typer command function."""
    return gpus_command


def gpus_command(
    fmt: str = typer.Option("table", "--format", "-f", help="table or json."),
    catalog: Optional[Path] = typer.Option(  # noqa: UP045, B008 - typer evaluates Optional[...]
        None, "--catalog", help="A YAML GPU catalog (kvplan/data/gpus.yaml format) that adds or replaces GPUs."),
) -> None:
    """List the GPUs kvplan knows: memory as torch reports it (not the marketing GB), with sources."""
    import sys

    from kvplan.hardware import GPU, load_catalog
    from kvplan.render.formats import check_format, write

    check_format(GPU, fmt)
    write(load_catalog(catalog), fmt, sys.stdout, kind=GPU)
