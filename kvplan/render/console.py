"""The rich console every command prints tables with: data is never cut.

rich assumes 80 columns when stdout is not a terminal and, by default, ellipsizes cells that do not
fit ("meta-lla…"). Piped or redirected, kvplan's console is as wide as its content (lines are not
padded, so nothing grows but the long ones); in a terminal, tables fit its width and cells fold
onto more lines rather than losing characters.
"""

from __future__ import annotations

from typing import IO

from rich.console import Console
from rich.table import Table

WIDE = 100_000  # columns when not a terminal: wider than any row kvplan prints


def make_console(file: IO[str] | None = None) -> Console:
    console = Console(file=file)
    if console.is_terminal:
        return console
    return Console(file=file, width=WIDE)


def never_cut(table: Table) -> Table:
    """Cells fold onto further lines instead of ending in an ellipsis."""
    for column in table.columns:
        column.overflow = "fold"
        column.no_wrap = False
    return table
