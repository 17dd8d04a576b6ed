"""A status line on stderr while the Hub is read, only when stderr is a terminal."""

from __future__ import annotations

import sys


class Progress:
    """A rich status line on stderr while the Hub is read, only when stderr is a terminal."""

    def __init__(self, text: str) -> None:
        self.status = None
        if sys.stderr.isatty():
            from rich.console import Console

            self.status = Console(stderr=True).status(text)

    def update(self, text: str) -> None:
        if self.status is not None:
            self.status.update(text)

    def __enter__(self) -> Progress:
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()
