"""The common core of the log readers: bounded reading, line cleaning, logged quantities.

Engines print memory rounded (vLLM ``%.2f GiB``, SGLang ``%.2f GB`` meaning GiB, llama.cpp
``%7.2f MiB``); a :class:`Logged` keeps the value in bytes together with its rounding step so that the
precision of the log stays visible and nothing claims more digits than were printed.

Every pattern over a log line is linear in the line (a log is anyone's text): no two adjacent or nested
quantifiers that can take the same digits, and a number searched anywhere in a line starts where a run of
digits starts (``NUMBER``'s look-behind), so that a run of n digits is tried once, not n times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import BinaryIO

MAX_LOG_BYTES = 4 << 20
"""Read at most 4 MiB of a log: start-up (where the memory lines are) is at its beginning."""
MAX_LINE_CHARS = 16_384
"""Longer lines (a huge engine config dump) are cut: the values kvplan reads are near their start."""
MAX_INT_DIGITS = 18
"""The longest count a log line holds that kvplan reads (a rank, tokens, blocks): longer ones are unreadable."""

NUMBER = r"(?<![\w.,\-])(-?(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+(?![\d,]))(?:\.\d+(?!\d))?(?:[eE][+-]?\d+(?!\d))?)"
"""A number as engines print it (``3.81``, ``-0.5``, ``1,234.5``, ``1.5e3``), read whole: it starts where a run of
digits starts (``e3`` of ``1.5e3`` is not a number, nor ``5`` of ``1.5``), its parts are separated by a character
that is not a digit (``,``, ``.``, ``e``), so that no two quantifiers share digits, and each run of digits ends
where the digits end (the look-aheads: a shorter run is refused at once, not tried against the rest)."""
COUNT = r"(\d{1,3}(?:,\d{3})+|\d+)"
"""An integer with or without thousands separators (vLLM prints ``f"{tokens:,}"``), after a literal prefix."""

_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
# rank labels: vLLM "(RayWorkerWrapper pid=12)", "(Worker_TP1 pid=9)", "(VllmWorker rank=1 pid=9)",
# "(EngineCore_DP0 pid=3)"; SGLang "[2025-10-16 09:06:22 TP5]" / "[... DP0 TP5 EP5]"
_PAREN_RANK = re.compile(r"^\((?P<label>[A-Za-z_]\w*(?: rank=\d+)?) pid=\d+\)\s?")
_TP_IN_LABEL = re.compile(r"(?:TP|rank=)(\d+)")
_SGL_RANK = re.compile(r"^\[[0-9:\- ]+(?P<label>(?:(?:DP|PP|TP|EP)\d+ ?)+)\]\s?")
_TP = re.compile(r"TP(\d+)")


@dataclass(frozen=True)
class Logged:
    """A memory size as a log printed it: ``bytes`` (the printed value, in bytes) +/- ``step_bytes / 2``."""

    bytes: int
    step_bytes: int
    text: str
    """As printed, e.g. '3.81 GiB' (GB normalised to what the engine meant)."""

    @property
    def low(self) -> int:
        return self.bytes - self.step_bytes // 2

    @property
    def high(self) -> int:
        return self.bytes + self.step_bytes // 2


def logged_size(number: str, unit: str) -> Logged | None:
    """'3.81', 'GiB' -> Logged(bytes, step of one last printed digit). None if it is not a number of at most
    32 characters, or is more than 1 PiB (no device holds that: a corrupted or hostile line)."""
    text = number.replace(",", "").strip()
    scale = _UNITS.get(unit.strip().lower())
    if scale is None or not text or len(text) > 32:
        return None
    try:
        value = Decimal(text)
        if not value.is_finite() or value.adjusted() > 18 or abs(value) * scale > Decimal(1 << 50):
            return None
        exponent = value.as_tuple().exponent
        decimals = min(-exponent, 30) if isinstance(exponent, int) and exponent < 0 else 0
        step = int(Decimal(scale) / (Decimal(10) ** decimals)) if decimals else scale
        size = int(value * scale)
    except ArithmeticError:  # decimal's InvalidOperation, Overflow: '1.2.3', '1e999999'
        return None
    unit_name = {1: "B", 1 << 10: "KiB", 1 << 20: "MiB", 1 << 30: "GiB"}[scale]
    return Logged(size, max(step, 1), f"{text} {unit_name}")


def exact_bytes(number: str) -> Logged | None:
    value = to_int(number)
    return None if value is None else Logged(value, 1, f"{value:,} B")


def to_int(text: str) -> int | None:
    """A count as printed ('4,096'); None for anything else or more than 18 digits (never a ValueError)."""
    cleaned = text.replace(",", "").strip()
    if not cleaned.isascii() or not cleaned.isdigit() or len(cleaned) > MAX_INT_DIGITS:
        return None
    return int(cleaned)


def to_float(text: str) -> float | None:
    cleaned = text.replace(",", "").strip()
    if len(cleaned) > 32:
        return None
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if value == value and abs(value) < 1e18 else None


@dataclass(frozen=True)
class Line:
    number: int
    rank: int | None
    """Tensor-parallel rank the line names (None: no rank label, i.e. the driver or rank 0)."""
    label: str
    text: str


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
