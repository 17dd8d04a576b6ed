"""How one engine's start-up log reads: the object an engine package exposes as ``Engine.log``.

Each engine with a log format kvplan reads defines one :class:`LogReader` in
``kvplan/engines/<engine>/log.py`` (its patterns, what each line means, how its items map to the waterfall,
which settings it carries into a plan and how a calibration from it applies). ``kvplan.logs`` reaches
engines only through these objects (``log_readers``), as ``kvplan.deploy.flags`` reaches ``ServeFlags``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan.logs.core import Line, Logged
from kvplan.logs.model import Collector, LogSettings

if TYPE_CHECKING:
    from kvplan.logs.calibration import Calibrated, CalibrationCase


@dataclass
class Draft:
    """A log being assembled (``parse._parse``): the items taken so far, for the engine's ``finish`` step."""

    out: Collector
    settings: LogSettings
    memory: dict[str, Logged]
    derived: list[str]
    notes: list[str]
    line_of: dict[str, int]
    tokens: Any
    """The KV-cache token count the engine logged (None: not logged)."""


def _no_version(fmt: str | None) -> tuple[str, str] | None:
    return None


@dataclass(frozen=True)
class LogReader:
    engine: str
    """The kvplan engine name whose logs these are."""
    title: str
    """The engine as people write it (for notes)."""
    markers: tuple[str, ...]
    """Text only this engine's logs hold; detection counts them (each at most 50 times)."""
    read: Callable[[list[Line], Collector], str] = field(compare=False)
    """Fill the collector from the cleaned lines; returns the format name (e.g. 'vllm-v1')."""
    sources: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Waterfall item -> the collected names it is read from, first found wins (default: the item itself)."""
    finish: Callable[[Draft], None] | None = field(default=None, compare=False)
    """Items the log prints only in combination, worked out after the items are taken (and said)."""
    implied_version: Callable[[str | None], tuple[str, str] | None] = field(default=_no_version, compare=False)
    """(version, note) a log format implies when the log names no version."""
    carried: tuple[str, ...] = ()
    """``LogSettings`` fields that ``--compare`` carries into ``kvplan.Settings`` (the engine's own knobs)."""
    profile_settings: tuple[str, ...] = ()
    """Settings a calibration's measured items depend on: taken from the file when the plan does not set them."""
    calibrate: Callable[[CalibrationCase], Calibrated] | None = field(default=None, compare=False)
    """How measured items become Settings (None: the logged KV-cache memory as it is)."""
    startups: tuple[re.Pattern[str], ...] = field(default=(), compare=False)
    """Lines the engine prints once per start-up (on rank 0), in order of preference: the first that the log
    holds splits a restarted container's log into its start-ups, and the last start-up is read. Empty: the whole
    log is read as one start-up (an engine whose every rank prints its start line)."""

    def sources_of(self, item: str) -> tuple[str, ...]:
        return dict(self.sources).get(item, (item,))


def log_readers() -> list[LogReader]:
    """Every engine's log reader, in the registry's order (detection prefers the first on a tie)."""
    from kvplan.engines import all_engines

    found: list[LogReader] = []
    for engine in all_engines():
        reader = engine.log
        if reader is not None and reader not in found:
            found.append(reader)
    return found


def log_reader(engine: str | None) -> LogReader | None:
    """The reader of a named engine (aliases accepted); None for an unknown engine or one without a log format."""
    if engine is None:
        return None
    from kvplan.engines import get_engine
    from kvplan.errors import UsageError

    try:
        return get_engine(engine).log
    except UsageError:
        return None


def titles(readers: list[LogReader]) -> str:
    """'vLLM, SGLang, TensorRT-LLM or llama.cpp'."""
    names = [r.title for r in readers]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
