"""``kvplan gpus``: the GPU catalog (memory as torch reports it, spec-sheet bandwidth and compute)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.cli.options import Arg, Opt

if TYPE_CHECKING:
    from typing import Any

FIELDS: dict[str, str] = {"format": "fmt"}
"""Library parameter -> this command's parameter, where they differ."""

ARGUMENT: Arg | None = None
OPTIONS: tuple[Opt, ...] = (
    Opt("fmt", ("--format", "-f"), "table", "table or json."),
    Opt("catalog", ("--catalog",), None, "A YAML GPU catalog (kvplan/data/gpus.yaml format) that adds or replaces "
        "GPUs.", path=True),
)
DOC = "List the GPUs kvplan knows: memory as torch reports it (not the marketing GB), with sources."


def options() -> tuple[Opt, ...]:
    return OPTIONS



def run(fmt: str, catalog: Any) -> None:
    import sys

    from kvplan.hardware import GPU, load_catalog
    from kvplan.render.formats import check_format, write

    check_format(GPU, fmt)
    write(load_catalog(catalog), fmt, sys.stdout, kind=GPU)
