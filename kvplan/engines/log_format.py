"""What an engine's start-up log reader is made of: the object an engine package exposes as ``Engine.log``.

Each engine with a log format kvplan reads defines one :class:`LogReader` in
``kvplan/engines/<engine>/log.py`` (its patterns, what each line means, how its items map to the waterfall,
which settings it carries into a plan and how a calibration from it applies), written with what this module
holds: a cleaned :class:`Line`, a :class:`Logged` size with its rounding step, the number patterns, the
:class:`Collector` it fills, and the :class:`CalibrationCase` its ``calibrate`` rule receives.

Engines import this module, never ``kvplan.logs``: ``kvplan.logs`` reads a log through the engines' readers
(``kvplan.logs.reader.log_readers``), as ``kvplan.deploy.flags`` reaches ``ServeFlags``; ``kvplan.calibrate``
is where a calibration meets a plan, and hands a rule the planner as ``CalibrationCase.probe``.

Engines print memory rounded (vLLM ``%.2f GiB``, SGLang ``%.2f GB`` meaning GiB, llama.cpp
``%7.2f MiB``); a :class:`Logged` keeps the value in bytes together with its rounding step so that the
precision of the log stays visible and nothing claims more digits than were printed.

Every pattern over a log line is linear in the line (a log is anyone's text): no two adjacent or nested
quantifiers that can take the same digits, and a number searched anywhere in a line starts where a run of
digits starts (``NUMBER``'s look-behind), so that a run of n digits is tried once, not n times.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

import re
from collections.abc import Callable
from decimal import Decimal

from kvplan.lazy_re import LazyPattern as LazyPattern, lazy_pattern as lazy_pattern  # the log readers import them from here
from kvplan.record import dataclass, field, replace

if TYPE_CHECKING:
    from typing import Any


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


_ADDED_LATER = frozenset({"vllm_sampler"})


@dataclass(frozen=True)
class DeviceReading:
    """One reading a log printed for one device (a buffer, the free memory), as printed: the waterfall shows each
    buffer summed over the devices."""

    device: str
    """As the log names it ('CUDA0', 'ROCm1', 'Metal')."""
    item: str
    """``DEVICE_ITEMS``: weights, kv_cache, activation (a compute buffer), recurrent_state, free_at_load."""
    value: Logged
    line: int


DEVICE_ITEMS = {"weights": "weights", "kv_cache": "KV cache", "activation": "compute buffer",
                "recurrent_state": "recurrent state", "free_at_load": "free at load"}
"""What a per-device reading is of (its label)."""
MAX_DEVICE_READINGS = 256
"""At most this many per-device readings are kept (a log repeating buffer lines is anyone's text)."""


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
    vllm_sampler: str | None = None
    """vLLM: the top-k/top-p path its start-up line names (sort, flashinfer)."""

    def to_dict(self) -> dict[str, Any]:
        # a field added later is left out where unknown: the stable JSON of older logs stays as it was
        return {k: v for k, v in vars(self).items() if v is not None or k not in _ADDED_LATER}


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
        self.devices: list[DeviceReading] = []
        """Per-device readings in the order printed (``put_device``)."""
        self.per_rank: list[DeviceReading] = []
        """Each pipeline rank's memory items where the ranks' differ (vLLM with PP > 1): ``device`` names the rank,
        ``item`` a waterfall item. A reader's ``finish`` fills it."""
        self.shown_per_rank: set[str] = set()
        """Collected names whose ranks' values ``per_rank`` shows (``rank_notes`` leaves them out)."""

    def put_device(self, device: str, item: str, value: Logged, line: Line) -> None:
        if item not in DEVICE_ITEMS:  # a reader's typo must not make a reading no one can label
            raise ValueError(f"unknown per-device item {item!r}")
        if len(self.devices) < MAX_DEVICE_READINGS:
            self.devices.append(DeviceReading(device, item, value, line.number))

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
            if name in self.shown_per_rank:
                continue
            shown = {(v.text if isinstance(v, Logged) else str(v)) for _, v, _ in seen}
            if len(shown) > 1:
                per = ", ".join(f"rank {r if r is not None else '-'}: {v.text if isinstance(v, Logged) else v}"
                                for r, v, _ in sorted(seen, key=lambda s: (s[0] or 0))[:8])
                out.append(f"{name} differs between ranks ({per}); rank 0 shown")
        return out


@dataclass
class Draft:
    """A log being assembled (``kvplan.logs.parse``): the items taken so far, for the engine's ``finish`` step."""

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


def _no_settings(fmt: str | None, version: str | None) -> dict[str, Any]:
    return {}


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
    logged_settings: Callable[[str | None, str | None], dict[str, Any]] = field(default=_no_settings, compare=False)
    """``kvplan.Settings`` fields the log's own run implies, from its format and release (vLLM: the V0 engine
    that printed a V0 summary at a release whose default is V1); --compare and a calibration plan the logged run
    with them unless given."""
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


# ------------------------------------------------------------------------------- calibration rules

@dataclass(frozen=True)
class Calibrated:
    """What max_batch needs to plan from measured items."""

    settings: Any
    engine_version: str | None
    """The release whose rules apply: the one given, else the calibration's."""
    gpu_memory: str | None
    """The GPU total as logged (replaces the catalog's) or None."""
    used: tuple[str, ...]
    """Items taken from the calibration."""
    notes: tuple[str, ...]


@dataclass(frozen=True)
class CalibrationCase:
    """A calibration that matches the deployment, for the engine's ``LogReader.calibrate``."""

    cal: Any
    """The calibration file (``kvplan.logs.calibration.Calibration``), its negative items taken as 0."""
    model: Any
    here: Any
    """kvplan.max_batch for the deployment with kvplan's own items (the CapacityPlan)."""
    total: int
    """The GPU's total memory: as logged, else the catalog's."""
    gpu_total: str | None
    """The logged total where it replaces the catalog's (Calibrated.gpu_memory)."""
    version: str | None
    settings: Any
    """The deployment's Settings (with the profile settings the calibration carried)."""
    common: dict[str, Any]
    """tp, pp, engine, kv_dtype, catalog: the keyword arguments of kvplan.max_batch for this deployment."""
    notes: list[str]
    used: list[str]
    probe: Callable[..., Any]
    """kvplan.max_batch, for a rule that plans the measured deployment under other settings (vLLM's re-derives
    the activation peak): the planner stands above the engines and is handed down, never imported."""


def kv_only(case: CalibrationCase) -> Calibrated:
    """The logged KV-cache memory as it is (no breakdown to rescale)."""
    from kvplan.errors import UsageError

    kv = case.cal.measured.get("kv_cache")
    if kv is None or kv.bytes <= 0:
        raise UsageError("--calibration: the file holds no KV-cache memory kvplan can use")
    case.notes.append(f"calibration: KV cache memory {kv.logged} as logged (the log has no breakdown to rescale: "
                      "valid for the settings it was measured under)")
    return Calibrated(replace(case.settings, kv_cache_memory_bytes=kv.bytes), case.version, case.gpu_total,
                      ("kv_cache",), tuple(case.notes))
