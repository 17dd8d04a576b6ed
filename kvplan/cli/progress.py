"""A progress line on stderr for the commands that count their way through seconds of work (``fit`` over the catalog,
``check`` over a fleet). Plain text redrawn in place, no thread (a check forks its workers while it shows); a wait of
unknown length (a Hub download) has rich's status spinner instead (``sources/hub/progress.py``)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable


def progress_line(what: str, unit: str, *, after: float = 0.0, keep: bool = True) -> Callable[[int, int], None] | None:
    """``show(done, total)`` writing ``kvplan WHAT: done/total UNIT`` over itself on stderr, or None where stderr is
    not a terminal (a log, a pipe: nothing is written). Redrawn at most ten times a second, and first ``after``
    seconds in (a quick run draws nothing); at the end the line stays (``keep``) or is cleared, so that a report
    written next to the same terminal starts on a clean line."""
    import sys
    import time

    if not sys.stderr.isatty():
        return None
    start = time.monotonic()
    drawn = [start + after, False]  # (the next time to draw, whether anything was drawn)

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now < drawn[0]:
            return
        if done >= total:
            if drawn[1]:
                sys.stderr.write(f"\rkvplan {what}: {done:,}/{total:,} {unit}\n" if keep else "\r\x1b[2K")
                sys.stderr.flush()
            elif keep:  # a run quicker than ``after``: the line once, at its end
                sys.stderr.write(f"kvplan {what}: {done:,}/{total:,} {unit}\n")
                sys.stderr.flush()
            return
        drawn[0], drawn[1] = now + 0.1, True
        sys.stderr.write(f"\rkvplan {what}: {done:,}/{total:,} {unit}")
        sys.stderr.flush()

    return show
