"""What a start-up log says, as typed values: unknown is None, never a guess."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvplan.logs.core import Line, Logged, logged_size, to_int

MEMORY_ITEMS = ("total", "budget", "weights", "activation", "non_torch", "cudagraph", "kv_cache")
"""The waterfall's memory items, in order (bytes per GPU)."""


@dataclass(frozen=True)
class LogSettings:
    """The settings the log names (None where it does not)."""

    model: str | None = None
    engine_version: str | None = None
    gpu_name: str | None = None
    tp: int | None = None
    pp: int | None = None
    dtype: str | None = None
    kv_dtype: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    block_size: int | None = None
    enforce_eager: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class ParsedLog:
    engine: str | None
    """vllm, sglang, trtllm, llamacpp; None: not a log kvplan reads."""
    format: str | None
    """Which of the engine's log formats (e.g. 'vllm-v1', 'vllm-v0-profile')."""
    settings: LogSettings
    memory: dict[str, Logged]
    """Memory items per GPU (MEMORY_ITEMS and engine-specific extras), as logged."""
    derived: tuple[str, ...] = ()
    """Memory items worked out from logged ones (how: in notes), not printed by the engine."""
    num_gpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    concurrency_len: int | None = None
    """The request length the logged concurrency is for (vLLM prints it)."""
    ranks: tuple[int, ...] = ()
    lines_read: int = 0
    bytes_read: int = 0
    cut: bool = False
    """The log was longer than kvplan reads (core.MAX_LOG_BYTES)."""
    complete: bool = False
    """The log reaches the KV-cache allocation."""
    notes: tuple[str, ...] = ()
    lines: dict[str, int] = field(default_factory=dict)
    """Item -> the line number it was read from."""
    detected: str | None = None
    """The engine whose lines the log holds (``parse.detect``), whichever reader was asked for."""
    impossible: tuple[str, ...] = ()
    """Values no start-up can log ('line 12: weights -3.00 GiB is negative'): the log is corrupted or not what it
    seems, and is not to be used (``kvplan log`` refuses it, exit 2)."""
    startups: tuple[int, ...] = ()
    """The first line of each start-up the log holds (a restarted container's log holds several); the last is
    read."""
    size: int | None = None
    """The file's size in bytes (None: a stream)."""

    def item(self, name: str) -> int | None:
        value = self.memory.get(name)
        return value.bytes if value is not None else None


class Collector:
    """Values as a parser finds them, per rank; the first rank-0 (or unlabelled) value wins."""

    def __init__(self) -> None:
        self.values: dict[str, list[tuple[int | None, Any, int]]] = {}
        self.workers: set[int] = set()
        """Line numbers of lines from a worker whose rank is not printed (Ray workers): never rank 0's."""
        self.ranks: set[int] = set()
        self.notes: list[str] = []
        self.skipped: list[tuple[int, str]] = []
        """(line number, why) of the first lines that could not be read: left out, never a reason to drop the
        log (``skipped_count`` counts them all)."""
        self.skipped_count = 0

    def skip(self, line: int, why: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < 100:
            self.skipped.append((line, why))

    def put_size(self, name: str, number: str, unit: str, line: Line) -> None:
        """A logged size, or the line listed as unreadable (a number kvplan cannot read whole is never read in
        part)."""
        value = logged_size(number, unit)
        if value is None:
            shown = number if len(number) <= 24 else f"{number[:12]}... ({len(number):,} characters)"
            self.skip(line.number, f"'{shown} {unit}' is not a size kvplan reads")
        self.put(name, value, line)

    def put_int(self, name: str, text: str, line: Line) -> None:
        """A logged count, or the line listed as unreadable."""
        value = to_int(text)
        if value is None:
            self.skip(line.number,
                      f"a count of {len(text):,} characters" if len(text) > 24 else f"'{text}' is not a count")
        self.put(name, value, line)

    def read_something(self) -> bool:
        """Whether any memory reading, token or block count was taken (a start-up that got somewhere)."""
        return any(isinstance(v, Logged) or name in ("kv_cache_tokens", "num_gpu_blocks", "cells")
                   for name, seen in self.values.items() for _, v, _ in seen)

    def skipped_note(self) -> str | None:
        if not self.skipped:
            return None
        first = "; ".join(f"line {n:,}: {why}" for n, why in sorted(self.skipped)[:3])
        more = f"; and {self.skipped_count - 3:,} more" if self.skipped_count > 3 else ""
        return f"{self.skipped_count:,} line(s) could not be read and were left out ({first}{more})"

    def put(self, name: str, value: Any, line: Line) -> None:
        if value is None:
            return
        if line.rank is not None:
            self.ranks.add(line.rank)
        seen = self.values.setdefault(name, [])
        worker = line.rank is None and "Worker" in line.label
        if worker:
            self.workers.add(line.number)
        if len(seen) < 64 and not any(r == line.rank and ((n in self.workers) == worker) for r, _, n in seen):
            seen.append((line.rank, value, line.number))

    def has(self, name: str) -> bool:
        return name in self.values

    def get(self, name: str) -> Any:
        chosen = self._chosen(name)
        return chosen[1] if chosen else None

    def line_of(self, name: str) -> int | None:
        chosen = self._chosen(name)
        return chosen[2] if chosen else None

    def _chosen(self, name: str) -> tuple[int | None, Any, int] | None:
        seen = self.values.get(name)
        if not seen:
            return None
        return min(seen, key=lambda v: (v[2] in self.workers, v[0] or 0, v[2]))

    def rank_notes(self) -> list[str]:
        out = []
        for name, seen in self.values.items():
            shown = {(v.text if isinstance(v, Logged) else str(v)) for _, v, _ in seen}
            if len(shown) > 1:
                per = ", ".join(f"rank {r if r is not None else '-'}: {v.text if isinstance(v, Logged) else v}"
                                for r, v, _ in sorted(seen, key=lambda s: (s[0] or 0))[:8])
                out.append(f"{name} differs between ranks ({per}); rank 0 shown")
        return out
