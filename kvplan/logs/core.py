"""The common core of the log readers: bounded reading and line cleaning.

What a line and its values are (:class:`Line`, :class:`Logged`, the number patterns) is the engines' log
format (``kvplan.engines.log_format``), which the engine readers are written with; the names are
re-exported here for code that read them from this module.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

import re

from kvplan.engines.log_format import (
    COUNT,
    MAX_INT_DIGITS,
    NUMBER,
    Line,
    Logged,
    exact_bytes,
    logged_size,
    to_float,
    to_int,
)
from kvplan.record import dataclass

if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["COUNT", "MAX_INT_DIGITS", "MAX_LINE_CHARS", "MAX_LOG_BYTES", "NUMBER", "Line", "Logged", "Source",
           "exact_bytes", "logged_size", "read_bounded", "split_lines", "to_float", "to_int"]

MAX_LOG_BYTES = 4 << 20
"""Read at most 4 MiB of a log: start-up (where the memory lines are) is at its beginning."""
MAX_LINE_CHARS = 16_384
"""Longer lines (a huge engine config dump) are cut: the values kvplan reads are near their start."""
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
# rank labels: vLLM "(RayWorkerWrapper pid=12)", "(Worker_TP1 pid=9)", "(VllmWorker rank=1 pid=9)",
# "(EngineCore_DP0 pid=3)"; SGLang "[2025-10-16 09:06:22 TP5]" / "[... DP0 TP5 EP5]"
_PAREN_RANK = re.compile(r"^\((?P<label>[A-Za-z_]\w*(?: rank=\d+)?) pid=\d+\)\s?")
_TP_IN_LABEL = re.compile(r"(?:TP|rank=)(\d+)")
_SGL_RANK = re.compile(r"^\[[0-9:\- ]+(?P<label>(?:(?:DP|PP|TP|EP)\d+ ?)+)\]\s?")
_TP = re.compile(r"TP(\d+)")


@dataclass(frozen=True)
class Source:
    """What was read of a log: its text (at most ``MAX_LOG_BYTES``), whether the log was longer, and how long
    the file was (None: a stream)."""

    text: str
    cut: bool
    size: int | None = None


def read_bounded(source: str | BinaryIO, limit: int = MAX_LOG_BYTES) -> Source:
    """At most ``limit`` bytes of a log file (a regular file: a named pipe, a device or a directory is a
    ConfigError, through ``kvplan.safe_io``) or of a binary stream, decoded leniently."""
    from kvplan.safe_io import read_head

    if isinstance(source, str):
        data, size = read_head(source, limit=limit)
    else:
        data, size = source.read(limit + 1), None
    cut = len(data) > limit or (size is not None and size > limit)
    return Source(data[:limit].decode("utf-8", errors="replace"), cut, size)


def split_lines(text: str, skipped: list[tuple[int, str]] | None = None) -> list[Line]:
    """Clean lines: colours and carriage-return progress bars removed, rank prefixes taken off. A line whose
    rank label cannot be read (a rank of 5,000 digits) is left out and listed in ``skipped``."""
    out: list[Line] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        raw = raw[:MAX_LINE_CHARS]
        if "\r" in raw:  # a progress bar redrawn in place: keep what was drawn last
            raw = raw.rstrip("\r").rsplit("\r", 1)[-1]
        line = _ANSI.sub("", raw).strip()
        if not line:
            continue
        rank: int | None = None
        label = ""
        m = _PAREN_RANK.match(line) or _SGL_RANK.match(line)
        if m:
            label = m.group("label").strip()
            line = line[m.end():]
            tp = (_TP_IN_LABEL if m.re is _PAREN_RANK else _TP).search(label)
            if tp:
                rank = to_int(tp.group(1))
                if rank is None:
                    if skipped is not None:
                        skipped.append((number, f"a rank label of {len(tp.group(1)):,} digits"))
                    continue
        out.append(Line(number, rank, label, line))
    return out
