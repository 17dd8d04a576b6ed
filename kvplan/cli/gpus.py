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
    import json
    import sys

    from kvplan.errors import UsageError
    from kvplan.hardware import load_catalog

    if fmt not in ("table", "json"):
        raise UsageError(f"unknown format '{fmt}' (known: table, json)", field="fmt")
    gpus = load_catalog(catalog)
    if fmt == "json":
        sys.stdout.write(json.dumps({"gpus": [g.to_dict() for g in gpus]}, indent=2) + "\n")
        return
    from rich.table import Table

    from kvplan.render.console import make_console, never_cut

    table = Table(title="GPUs: memory as torch reports it (GiB = 2^30 B; ~ rounded reading, * estimate)",
                  title_justify="left")
    for name in ("name", "GiB", "bytes", "TB/s", "bf16 TFLOP/s"):
        table.add_column(name, justify="left" if name == "name" else "right", no_wrap=True)
    table.add_column("aliases")
    for g in gpus:
        mark = "*" if g.estimate else ("~" if g.memory_precision != "exact" else "")
        table.add_row(
            g.name,
            f"{g.memory_gib:.2f}{mark}",
            f"{g.memory_bytes:,}",
            f"{g.bandwidth / 1e12:.2f}" if g.bandwidth else "-",
            f"{g.tflops:g}" if g.tflops else "-",
            ", ".join(g.aliases),
        )
    make_console().print(never_cut(table))
