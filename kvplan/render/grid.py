"""Small tables held whole (``max-batch``, ``log``, ``models``, ``gpus``, ``fit``) and the lines around them, written
without rich where the output is not a terminal, in the bytes rich prints there.

rich and what it imports cost about 100 ms of start-up, more than these commands' own work. Piped, rich prints
plain text: a table's columns as wide as their widest cell (plus a space each side), narrowed where the console
is narrower than the table (the widest columns first, cells then wrapped at spaces), its title wrapped and padded
to the table's width; a line wrapped at the console's width. That is what ``GridOut`` writes. The console is as
wide as ``make_console`` makes it (``wide``: data never cut), or as rich's own default console (``kvplan log``:
the terminal's width found on stdin, stdout or stderr, ``COLUMNS``, else 80).

Whatever rich would print otherwise (markup, emoji codes, characters wider or narrower than one column, a word
longer than its column where rich would cut it, a terminal) goes to rich itself, so the bytes never depend on the
path that printed them (tests/test_render_grid.py compares the two).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.record import dataclass
from kvplan.render.plain import cell_safe, plain_target, text_safe, utf_stream

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import IO, Any

    Cell = str | tuple[str, str]
    """A cell's text, or (the text rich prints, the markup it is given: ``[bold red]no[/bold red]``)."""

WIDE = 100_000  # render/console.py: a console that is not a terminal, as make_console makes it
_NARROW = frozenset("•×≈≤≥→←–—±·µΣé")  # one column each in rich's tables of widths, as in ASCII


@dataclass(frozen=True)
class Grid:
    """A table as rich's ``Table(title=..., title_justify="left", show_header=...)`` gets it."""

    title: str | None
    columns: tuple[tuple[str, str], ...]
    """(header, justify: 'left' or 'right')."""
    rows: tuple[tuple[Cell, ...], ...]
    show_header: bool = True
    fold: bool = True
    """Words longer than their column fold onto the next line (``never_cut``); False: rich cuts them (left to
    rich)."""


def _markup(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[1]


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]


def rich_width() -> int | None:
    """The width of rich's console on a stream that is not a terminal (``Console(file=stream)``): ``COLUMNS``,
    else the first of stdin, stdout and stderr that is a terminal, else 80; None where rich would take another
    way (a width of 0)."""
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns) or None
    width = 0
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):  # not a terminal
            continue
        break
    return width or 80


def _words(text: str) -> Iterable[tuple[int, str]]:
    """(start, word) of each match of rich's word pattern ``\\s*\\S+\\s*`` in ``text`` (the whitespace before the
    first word, and each word's after it): found without importing re (~6 ms a start) where the only whitespace is
    the space, as in printable text; by the pattern itself otherwise."""
    if not text.isprintable():  # tabs, line breaks, other spaces
        import re

        return ((m.start(), m.group()) for m in re.finditer(r"\s*\S+\s*", text))
    out: list[tuple[int, str]] = []
    start, size = 0, len(text)
    at = size - len(text.lstrip(" "))  # the first word
    while at < size:
        end = text.find(" ", at)
        if end < 0:
            end = size
        while end < size and text[end] == " ":  # the spaces after it
            end += 1
        out.append((start, text[start:end]))
        start = at = end
    return out


def wrap(text: str, width: int, fold: bool = True) -> list[str] | None:
    """``text`` (one line of one-column characters) broken at spaces into lines of at most ``width`` columns, as
    rich wraps it: a word longer than a line is cut into lines of ``width`` (``fold``; otherwise None, rich
    would shorten it with an ellipsis), the spaces ending a line kept up to the width."""
    breaks: list[int] = []
    used = 0
    for start, word in _words(text):
        length = len(word.rstrip())
        if width - used >= length:
            used += len(word)
        elif length > width:
            if not fold:
                return None
            pieces = [word[i:i + width] for i in range(0, len(word), width)]
            for piece in pieces[:-1]:
                if start:
                    breaks.append(start)
                start += len(piece)
            if start:
                breaks.append(start)
            used = len(pieces[-1])
        elif used and start:
            breaks.append(start)
            used = len(word)
    lines = [text[a:b] for a, b in zip([0, *breaks], [*breaks, len(text)])]
    for i, line in enumerate(lines):
        if len(line) > width:  # spaces past the width go (rich's rstrip_end); never more than spaces
            cut = len(line) - len(line.rstrip())
            lines[i] = line[:len(line) - min(cut, len(line) - width)][:width]
    return lines


def _cell_safe(text: str) -> bool:
    """rich prints ``text`` as a cell or title (markup on) as it is, one column a character."""
    return cell_safe(text) or (_one_column(text) and "[" not in text and ":" not in text)


def _one_column(text: str) -> bool:
    """Every character of ``text`` takes one column in rich (ASCII, or a few symbols kvplan prints)."""
    return text.isprintable() and (text.isascii() or all(c.isascii() or c in _NARROW for c in text))


class GridOut:
    """Lines and tables on ``stream``: written here where rich would print them plainly, else by rich."""

    def __init__(self, stream: IO[str], wide: bool = True) -> None:
        self.stream = stream
        self.wide = wide
        self._console: Any = None
        plain = plain_target(stream) and utf_stream(stream)
        self.width: int | None = (WIDE if wide else rich_width()) if plain else None

    @property
    def console(self) -> Any:
        if self._console is None:
            if self.wide:
                from kvplan.render.console import make_console

                self._console = make_console(self.stream)
            else:
                from rich.console import Console

                self._console = Console(file=self.stream)
        return self._console

    def line(self, text: str, bold: bool = False, soft_wrap: bool = False) -> None:
        """A line as ``console.print(text, markup=False, highlight=False, soft_wrap=soft_wrap)`` prints it (``bold``:
        in bold): data, never read as rich markup; ``soft_wrap``: never broken (a command to copy)."""
        lines = self._plain_line(text, soft_wrap)
        if lines is None:
            self.console.print(text, style="bold" if bold else None, markup=False, highlight=False,
                               soft_wrap=soft_wrap)
        else:
            self.stream.write("".join(piece + "\n" for piece in lines))

    def _plain_line(self, text: str, soft_wrap: bool = False) -> list[str] | None:
        if self.width is None or not text_safe(text):
            return None
        if self.width == WIDE or soft_wrap:
            return [text]
        return wrap(text, self.width) if _one_column(text) else None

    def grid(self, grid: Grid) -> None:
        text = self._plain_grid(grid) if self.width is not None else None
        if text is None:
            self._rich_grid(grid)
        else:
            self.stream.write(text)

    def _rich_grid(self, grid: Grid) -> None:
        from rich.table import Table

        from kvplan.render.console import never_cut

        table = Table(title=grid.title, title_justify="left", show_header=grid.show_header)
        for name, justify in grid.columns:
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in grid.rows:
            table.add_row(*map(_markup, row))
        self.console.print(never_cut(table) if grid.fold else table)

    def _plain_grid(self, grid: Grid) -> str | None:
        assert self.width is not None
        heads = [name for name, _ in grid.columns]
        rows = [[_text(cell) for cell in row] for row in grid.rows]
        shown = ([heads] if grid.show_header else []) + rows
        titles = grid.title.split("\n") if grid.title else []
        # a (text, markup) cell says what rich prints for it: only its columns need checking
        given = all(_cell_safe(h) for h in heads) if grid.show_header else True
        if not given or not all(_cell_safe(cell) if isinstance(cell, str) else _one_column(cell[0])
                                for row in grid.rows for cell in row) or \
                not all(_cell_safe(t) and t == t.strip() for t in titles):
            return None
        widths = _widths(shown, len(heads), self.width)
        if widths is None:
            return None
        justify = [j for _, j in grid.columns]
        out: list[str] = []
        width = sum(widths) + len(widths) + 1
        for title in titles:
            lines = wrap(title, width)
            assert lines is not None
            out.extend(line.ljust(width) + "\n" for line in lines)
        edge = (lambda a, b, c, d: a + b.join(d * w for w in widths) + c + "\n")
        if grid.show_header:
            out.append(edge("┏", "┳", "┓", "━"))
            head = _row(heads, widths, justify, "┃", grid.fold, bottom=True)
            if head is None:
                return None
            out.append(head)
            out.append(edge("┡", "╇", "┩", "━"))
        else:
            out.append(edge("┌", "┬", "┐", "─"))
        for cells in rows:
            text = _row(cells, widths, justify, "│", grid.fold)
            if text is None:
                return None
            out.append(text)
        out.append(edge("└", "┴", "┘", "─"))
        return "".join(out)


def _widths(shown: list[list[str]], count: int, console: int) -> list[int] | None:
    """Each column's width with its padding, as rich lays out a table on a console ``console`` wide: the widest
    cell's, the widest columns narrowed in turn while the table is wider than the console, then all evenly."""
    room = console - (count + 1)  # the borders
    if room < 3 * count:  # so narrow that rich measures otherwise
        return None
    widths = [min(room, 2 + max((len(row[i]) for row in shown), default=0)) for i in range(count)]
    natural = widths[:]
    excess = sum(widths) - room
    while excess > 0:
        top = max(widths)
        second = max((w for w in widths if w != top), default=0)
        widest = [w == top for w in widths]
        widths = _reduce(excess, [int(x) for x in widest], [min(excess, top - second)] * count, widths)
        excess = sum(widths) - room
    if sum(widths) > room:  # pragma: no cover - the loop above always ends within the room
        return None
    if min(widths) < 3:
        return None
    return [min(w, n) for w, n in zip(widths, natural)]


def _reduce(total: int, shares: list[int], caps: list[int], values: list[int]) -> list[int]:
    """``total`` taken from ``values`` in proportion to ``shares``, at most ``caps`` from each, rounded as rich
    rounds (each part from what is left, half to even)."""
    shares = [s if c else 0 for s, c in zip(shares, caps)]
    left_shares, left = sum(shares), total
    if not left_shares:
        return values[:]
    out = []
    for share, cap, value in zip(shares, caps, values):
        if share and left_shares > 0:
            taken = min(cap, round(share * left / left_shares))
            out.append(value - taken)
            left -= taken
            left_shares -= share
        else:
            out.append(value)
    return out


def _row(cells: Sequence[str], widths: list[int], justify: list[str], bar: str, fold: bool,
         bottom: bool = False) -> str | None:
    """One row, its cells wrapped to their columns (``None``: a word rich would cut), at the top of the row (the
    header: at its bottom)."""
    columns: list[list[str]] = []
    for cell, width, how in zip(cells, widths, justify):
        lines = wrap(cell, width - 2, fold)
        if lines is None:
            return None
        if how == "right":
            columns.append([" " + line.rstrip().rjust(width - 2) + " " for line in lines])
        else:
            columns.append([" " + line.ljust(width - 2) + " " for line in lines])
    height = max(len(c) for c in columns)
    for column, width in zip(columns, widths):
        blank = [" " * width] * (height - len(column))
        column[:] = blank + column if bottom else column + blank
    return "".join(bar + bar.join(line) + bar + "\n" for line in zip(*columns))
