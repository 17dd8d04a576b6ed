"""Tables and lines written without rich, in the bytes rich's console prints them when not in a terminal.

rich lays out a table from all its cells, held at once, and costs about 0.6 ms a row: a sweep of 10^5 rows
took a minute and 440 MiB. Here a table's rows come from a maker called once per pass: the first pass
measures the columns, the second writes each row as it comes, so memory stays flat. What comes out is
what ``make_console`` + ``never_cut`` print piped: rich's heavy-headed box, columns as wide as their
widest cell plus one space each side, the title padded to the table's width, the caption centred.

Whatever rich would print differently from its plain text (markup or emoji codes, control or wide
characters, a title longer than the table, which rich wraps) is handed to rich itself, so the bytes
never depend on which path printed them. In a terminal, short output stays rich's (it fits the terminal's
width); output longer than the terminal is written here, at its natural width.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import IO, Any

from kvplan.record import dataclass

Row = tuple[Sequence[str], bool]
"""A row's cells, and whether a line follows it (rich's ``end_section``)."""

_CACHE_ROWS = 8192
"""Rows the measuring pass keeps for the writing pass; longer tables are made again (bounded memory)."""

_WIDE = 100_000  # render/console.py: the width of a console that is not a terminal


def _emoji_code(text: str) -> bool:
    """Whether ``text`` holds what rich's emoji codes could match (``:smile:``; rich then replaces it): the pattern
    ``:\\S*?:``, two colons with no whitespace between them, found without importing re (~6 ms a start)."""
    return any(word.count(":") > 1 for word in text.split())


@dataclass(frozen=True)
class TableSpec:
    """A table as ``render/table.py`` describes it, for rich or for the plain writer."""

    title: str
    columns: tuple[tuple[str, str], ...]
    """(header, justify: 'left' or 'right')."""
    rows: Callable[[], Iterable[Row]]
    """Made again for each pass: (cells, a line after this row)."""
    caption: str | None = None


def plain_target(stream: IO[str]) -> bool:
    """True where rich would certainly not treat ``stream`` as a terminal (decided without importing rich):
    no tty, none of the variables that make rich call a pipe a terminal, no notebook."""
    if os.environ.get("TTY_COMPATIBLE") is not None or os.environ.get("FORCE_COLOR") is not None:
        return False
    if "IPython" in sys.modules or sys.platform == "win32":  # rich's notebook and legacy-console paths
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return isatty is not None and not isatty()
    except ValueError:  # a closed stream: rich says "not a terminal" too
        return True


def utf_stream(stream: IO[str]) -> bool:
    """rich draws its box characters only on a UTF encoding (ASCII boxes otherwise)."""
    return (getattr(stream, "encoding", "utf-8") or "utf-8").lower().startswith("utf")


def text_safe(text: str) -> bool:
    """rich prints ``text`` (markup off) as it is: no control characters, no emoji code, no line longer than
    the console."""
    return text.isprintable() and not (":" in text and _emoji_code(text)) and 2 * len(text) < _WIDE


def cell_safe(text: str) -> bool:
    """rich prints ``text`` as a table cell or title (markup on) as it is, one character a column."""
    return text.isascii() and text.isprintable() and "[" not in text and not (":" in text and _emoji_code(text))


class RichOut:
    """Lines and tables through a rich console (a terminal, or where the plain writer cannot be exact)."""

    def __init__(self, console: Any) -> None:
        self.console = console

    def line(self, text: str, bold: bool = False) -> None:
        self.console.print(text, style="bold" if bold else None, markup=False, highlight=False)

    def table(self, spec: TableSpec) -> None:
        from rich.table import Table

        from kvplan.render.console import never_cut

        table = Table(title=spec.title, caption=spec.caption, title_justify="left")
        for name, justify in spec.columns:
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for cells, end_section in spec.rows():
            table.add_row(*cells, end_section=end_section)
        self.console.print(never_cut(table))


class PlainOut:
    """Lines and tables written straight to ``stream``; what cannot be written exactly goes to rich."""

    def __init__(self, stream: IO[str], console: Any = None) -> None:
        self.stream = stream
        self._console = console

    @property
    def rich(self) -> RichOut:
        if self._console is None:
            from kvplan.render.console import make_console

            self._console = make_console(self.stream)
        return RichOut(self._console)

    def line(self, text: str, bold: bool = False) -> None:
        if text_safe(text):
            self.stream.write(text + "\n")
        else:
            self.rich.line(text, bold)

    def table(self, spec: TableSpec) -> None:
        if not utf_stream(self.stream) or not all(cell_safe(name) for name, _ in spec.columns):
            self.rich.table(spec)
            return
        widths, kept = _measure(spec)
        if widths is None:  # a cell rich would print otherwise
            self.rich.table(spec)
            return
        out: list[str] = [self._annotation(spec.title, "left", widths),
                          "┏" + "┳".join("━" * w for w in widths) + "┓\n"]
        header = tuple(name for name, _ in spec.columns)
        row_format = "│" + "│".join(f" %{'-' if justify == 'left' else ''}{w - 2}s "
                                    for (_, justify), w in zip(spec.columns, widths)) + "│\n"
        out.append(row_format.replace("│", "┃") % header)
        out.append("┡" + "╇".join("━" * w for w in widths) + "┩\n")
        section = "├" + "┼".join("─" * w for w in widths) + "┤\n"
        rows = kept if kept is not None else spec.rows()
        pending = ""  # a section line waits for the next row: rich draws none after the last
        for cells, end_section in rows:
            out.append(pending + row_format % tuple(cells))
            pending = section if end_section else ""
            if len(out) >= 1024:
                self.stream.write("".join(out))
                out.clear()
        out.append("└" + "┴".join("─" * w for w in widths) + "┘\n")
        if spec.caption:
            out.append(self._annotation(spec.caption, "center", widths))
        self.stream.write("".join(out))

    def _annotation(self, text: str, justify: str, widths: list[int]) -> str:
        """A title (left) or caption (centred) at the table's width, as rich's table prints it."""
        if not text:
            return ""
        width = sum(widths) + len(widths) + 1
        if cell_safe(text) and len(text) <= width and text == text.strip():
            if justify == "left":
                return text.ljust(width) + "\n"
            left = (width - len(text)) // 2
            return " " * left + text + " " * (width - len(text) - left) + "\n"
        return _rich_annotation(self.rich.console, text, justify, widths)


def _measure(spec: TableSpec) -> tuple[list[int] | None, list[Row] | None]:
    """(each column's width with its padding, or None where a cell is not plain text; the rows, where there
    are at most ``_CACHE_ROWS``). Measured a block of rows at a time, column by column."""
    widths = [len(name) for name, _ in spec.columns]
    kept: list[Row] | None = []
    block: list[Sequence[str]] = []

    def measure() -> bool:
        for i, column in enumerate(zip(*block)):
            text = "".join(column)
            if not (text.isascii() and text.isprintable()) or "[" in text or (":" in text and _emoji_code(text)):
                return False
            widths[i] = max(widths[i], *map(len, column))
        block.clear()
        return True

    for row in spec.rows():
        block.append(row[0])
        if kept is not None:
            kept.append(row)
            if len(kept) > _CACHE_ROWS:
                kept = None
        if len(block) == 1024 and not measure():
            return None, None
    if not measure():
        return None, None
    return [w + 2 for w in widths], kept


def _rich_annotation(console: Any, text: str, justify: str, widths: list[int]) -> str:
    """What rich prints as the title (``justify`` 'left') or caption ('center') of a table whose columns have
    ``widths``: a table with one header of each width, its annotation lines cut out of rich's output."""
    from rich.table import Table

    def lines(annotated: bool) -> list[str]:
        table = Table(title=text if annotated and justify == "left" else None,
                      caption=text if annotated and justify != "left" else None, title_justify="left")
        for w in widths:
            table.add_column("x" * (w - 2))
        with console.capture() as capture:
            console.print(table)
        return capture.get().splitlines(keepends=True)

    bare, annotated = lines(False), lines(True)
    extra = annotated[:len(annotated) - len(bare)] if justify == "left" else annotated[len(bare):]
    return "".join(extra)
