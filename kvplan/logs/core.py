"""The common core of the log readers: bounded reading, line cleaning, logged quantities.

Engines print memory rounded (vLLM ``%.2f GiB``, SGLang ``%.2f GB`` meaning GiB, llama.cpp
``%7.2f MiB``); a :class:`Logged` keeps the value in bytes together with its rounding step so that the
precision of the log stays visible and nothing claims more digits than were printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import BinaryIO

MAX_LOG_BYTES = 4 << 20
"""Read at most 4 MiB of a log: start-up (where the memory lines are) is at its beginning."""
MAX_LINE_CHARS = 16_384
"""Longer lines (a huge engine config dump) are cut: the values kvplan reads are near their start."""

_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
# rank labels: vLLM "(RayWorkerWrapper pid=12)", "(Worker_TP1 pid=9)", "(VllmWorker rank=1 pid=9)",
# "(EngineCore_DP0 pid=3)"; SGLang "[2025-10-16 09:06:22 TP5]" / "[... DP0 TP5 EP5]"
_PAREN_RANK = re.compile(r"^\((?P<label>[A-Za-z_][\w]*(?: rank=\d+)?) pid=\d+\)\s?")
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
    """'3.81', 'GiB' -> Logged(bytes, step of one last printed digit). None if it is not a number."""
    text = number.replace(",", "").strip()
    scale = _UNITS.get(unit.strip().lower())
    if scale is None or not text or len(text) > 32:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    if not value.is_finite() or abs(value) > Decimal(1 << 50):
        return None
    exponent = value.as_tuple().exponent
    decimals = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    step = int(Decimal(scale) / (Decimal(10) ** decimals)) if decimals else scale
    unit_name = {1: "B", 1 << 10: "KiB", 1 << 20: "MiB", 1 << 30: "GiB"}[scale]
    return Logged(int(value * scale), max(step, 1), f"{text} {unit_name}")


def exact_bytes(number: str) -> Logged | None:
    text = number.replace(",", "")
    if not text.isdigit() or len(text) > 18:
        return None
    return Logged(int(text), 1, f"{int(text):,} B")


def to_int(text: str) -> int | None:
    cleaned = text.replace(",", "").strip()
    if not cleaned.isdigit() or len(cleaned) > 18:
        return None
    return int(cleaned)


def to_float(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
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


def read_bounded(source: str | BinaryIO, limit: int = MAX_LOG_BYTES) -> tuple[str, bool]:
    """(text, cut): at most ``limit`` bytes of a file path or binary stream, decoded leniently."""
    if isinstance(source, str):
        with open(source, "rb") as handle:
            data = handle.read(limit + 1)
    else:
        data = source.read(limit + 1)
    cut = len(data) > limit
    return data[:limit].decode("utf-8", errors="replace"), cut


def split_lines(text: str) -> list[Line]:
    """Clean lines: colours and carriage-return progress bars removed, rank prefixes taken off."""
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
        m = _PAREN_RANK.match(line)
        if m:
            label = m.group("label")
            line = line[m.end():]
            tp = _TP_IN_LABEL.search(label)
            rank = int(tp.group(1)) if tp else None
        else:
            m = _SGL_RANK.match(line)
            if m:
                label = m.group("label").strip()
                line = line[m.end():]
                tp = _TP.search(label)
                rank = int(tp.group(1)) if tp else None
        out.append(Line(number, rank, label, line))
    return out
