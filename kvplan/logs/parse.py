"""``parse_log``: detect the engine from the content, run its reader, assemble a :class:`ParsedLog`.

Engine-neutral: each engine's patterns, and the items its log prints only in combination, are in its
package (``kvplan/engines/<engine>/log.py``, reached through ``Engine.log``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

import re

from kvplan.logs.core import MAX_LOG_BYTES, Line, Logged, read_bounded, split_lines
from kvplan.logs.model import COUNT_ITEMS, MEMORY_ITEMS, Collector, LogSettings, ParsedLog
from kvplan.logs.reader import Draft, LogReader, log_reader, log_readers, titles

if TYPE_CHECKING:
    from typing import BinaryIO

_SETTING_KEYS = ("model", "engine_version", "gpu_name", "tp", "pp", "dtype", "kv_dtype", "max_model_len",
                 "gpu_memory_utilization", "mem_fraction_static", "max_num_batched_tokens", "max_num_seqs",
                 "block_size", "enforce_eager", "vllm_sampler")
_EXTRAS = ("peak_torch", "free_after_weights", "free_before_weights", "free_before_kv", "free_after_kv",
           "free_after_graphs",
           "kv_cache_needed", "cudagraph_estimate", "cudagraph_capture", "k_size", "v_size", "free_before_graphs",
           "free_at_start", "free_at_load", "weights_non_torch", "weights_host", "kv_host", "compute_host",
           "output_host", "free_at_init", "non_torch_at_init", "non_kv",
           "kv_cache_to_fit", "kv_cache_full", "cudagraph_piecewise_first", "cudagraph_piecewise_each",
           "cudagraph_full_first", "cudagraph_full_each", "recurrent_state", "engine_size", "execution_context",
           "runtime_buffers", "decoder", "weights_profile", "weights_summary", "used_before_profile",
           "used_after_profile", "cudagraph_pool", "cudagraph_piecewise", "cudagraph_prefill", "cudagraph_decode",
           "free_after_capture", "init_distributed", "mamba_conv_state", "mamba_ssm_state", "kv_cache_estimation",
           "build_weights", "build_activation", "trt_managed")
"""Memory readings some engines print besides the waterfall's items (kept under their own names)."""
_LABELS = {"total": "total GPU memory", "budget": "the engine's share of it", "weights": "weights",
           "activation": "activation peak", "non_torch": "non-torch memory", "cudagraph": "CUDA graphs",
           "kv_cache": "KV cache memory"}
_NEVER_NEGATIVE = ("total", "budget", "weights", "activation", "peak_torch", "free_before_weights",
                   "free_after_weights", "free_before_kv", "free_after_kv", "free_after_graphs", "kv_cache_needed", "cudagraph_estimate",
                   "k_size", "v_size", "free_before_graphs", "free_at_start", "weights_non_torch",
                   "free_at_load", "weights_host", "kv_host", "compute_host", "output_host",
                   "free_at_init", "non_torch_at_init", "non_kv", "kv_cache_full", "cudagraph_piecewise_first",
                   "cudagraph_piecewise_each", "cudagraph_full_first", "cudagraph_full_each", "recurrent_state",
                   "engine_size", "execution_context", "runtime_buffers", "decoder", "weights_profile",
                   "weights_summary", "used_before_profile", "used_after_profile", "cudagraph_pool",
                   "kv_cache_available", "cudagraph_piecewise", "cudagraph_prefill", "cudagraph_decode",
                   "free_after_capture", "init_distributed", "mamba_conv_state", "mamba_ssm_state",
                   "kv_cache_estimation",
           "build_weights", "build_activation", "trt_managed")
"""Memory readings no start-up logs below 0. The KV memory of a model that does not fit, CUDA graphs and non-torch
memory (differences of free-memory readings: vLLM ``capture_model``, ``memory_profiling``) may be negative."""
_COUNTS = ("tp", "pp", "max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size")
_FRACTIONS = ("gpu_memory_utilization", "mem_fraction_static")
_OTHER_DP = re.compile(r"DP0*[1-9]")  # "EngineCore_DP1": another data-parallel engine's start line, not a restart


def detect(text: str) -> str | None:
    """The engine whose markers the text holds most often (None: none of them)."""
    best, score = None, 0
    for reader in log_readers():
        found = sum(min(text.count(marker), 50) for marker in reader.markers)
        if found > score:
            best, score = reader.engine, found
    return best


def parse_log(source: str | BinaryIO, engine: str | None = None, limit: int = MAX_LOG_BYTES) -> ParsedLog:
    """Read a log file (path) or binary stream: at most ``limit`` bytes. A file that cannot be read (missing, a
    directory, a named pipe, a device) is a one-line ``ConfigError``; the content itself never makes this raise."""
    source_read = read_bounded(source, limit)
    return parse_text(source_read.text, engine=engine, cut=source_read.cut, size=source_read.size)


def parse_text(text: str, engine: str | None = None, cut: bool = False, size: int | None = None) -> ParsedLog:
    if len(text) > MAX_LOG_BYTES:
        text, cut = text[:MAX_LOG_BYTES], True
    try:
        return _parse(text, engine, cut, size)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not turn a log into a traceback
        return ParsedLog(engine=None, format=None, settings=LogSettings(), memory={}, bytes_read=len(text),
                         cut=cut, size=size,
                         notes=(f"kvplan could not read this log ({type(exc).__name__}); please report it",))


def cut_note(text: str, size: int | None) -> str:
    """Where the log was cut: '... cut at 4 MiB (line 52,113 of a 9.3 MiB file) ...'."""
    line = text.count("\n") + 1  # the line the cut falls in
    of = f" of a {size / 2**20:,.1f} MiB file" if size is not None else ""
    return (f"the log was cut at {MAX_LOG_BYTES >> 20} MiB (line {line:,}{of}): kvplan reads the first "
            f"{MAX_LOG_BYTES >> 20} MiB of a log")


def _first_rank(line: Line) -> bool:
    return (line.rank or 0) == 0 and not _OTHER_DP.search(line.label)


def startups(reader: LogReader, lines: list[Line]) -> list[int]:
    """Indexes in ``lines`` where a start-up begins: the lines of the first of the engine's start patterns that
    the log holds (rank 0's); [] where it holds none."""
    for pattern in reader.startups:
        found = [i for i, line in enumerate(lines) if _first_rank(line) and pattern.search(line.text)]
        if found:
            return found
    return []


def _parse(text: str, engine: str | None, cut: bool, size: int | None) -> ParsedLog:
    skipped: list[tuple[int, str]] = []
    lines = split_lines(text, skipped)
    read_bytes = len(text.encode("utf-8", "replace"))
    detected = detect(text)
    reader = log_reader(engine or detected)
    if reader is None:
        found = f"no {titles(log_readers())} start-up lines found"
        return ParsedLog(engine=None, format=None, settings=LogSettings(), memory={}, lines_read=len(lines),
                         bytes_read=read_bytes, cut=cut, size=size,
                         notes=(f"{found} in its first {MAX_LOG_BYTES >> 20} MiB: {cut_note(text, size)}" if cut
                                else found,))
    starts = startups(reader, lines)
    # a restarted container's log: the last start-up is what runs now (the earlier ones are said, not read)
    segment = lines[starts[-1]:] if len(starts) > 1 else lines
    first_line = segment[0].number if segment else 0
    out = Collector()
    for number, why in skipped:
        if number >= first_line:
            out.skip(number, why)
    fmt = reader.read(segment, out)
    out.ranks.update(line.rank for line in segment if line.rank is not None)
    shown_starts = tuple(lines[i].number for i in starts)
    if engine is not None and detected is None and not out.read_something():  # -e vllm on a file of no engine
        return ParsedLog(engine=None, format=None, settings=LogSettings(), memory={}, lines_read=len(lines),
                         bytes_read=read_bytes, cut=cut, size=size,
                         notes=(f"no {reader.title} start-up lines found" + (
                             f" in its first {MAX_LOG_BYTES >> 20} MiB: {cut_note(text, size)}" if cut else ""),))
    if engine is not None and detected not in (None, reader.engine) and not out.read_something():
        other = log_reader(detected)
        other_title = other.title if other is not None else detected
        return ParsedLog(engine=reader.engine, format=fmt, settings=LogSettings(), memory={}, lines_read=len(lines),
                         bytes_read=read_bytes, cut=cut, size=size, detected=detected, startups=shown_starts,
                         notes=(f"this is a {other_title} log, not {reader.title}: none of {reader.title}'s "
                                "start-up lines were found",))
    memory: dict[str, Logged] = {}
    line_of: dict[str, int] = {}

    def take(name: str, *sources: str) -> None:
        for source in sources:
            value = out.get(source)
            if isinstance(value, Logged):
                memory[name] = value
                line = out.line_of(source)
                if line:
                    line_of[name] = line
                return

    for item in MEMORY_ITEMS:
        take(item, *reader.sources_of(item))
    for extra in _EXTRAS:
        take(extra, extra)
    draft = Draft(out=out, settings=LogSettings(**{k: out.get(k) for k in _SETTING_KEYS}), memory=memory,
                  derived=[], notes=list(out.notes), line_of=line_of, tokens=out.get("kv_cache_tokens"))
    if reader.finish is not None:  # items the log prints only in combination: worked out, and said so
        reader.finish(draft)
    settings, derived, notes, tokens = draft.settings, draft.derived, draft.notes, draft.tokens
    complete = "kv_cache" in memory or tokens is not None or out.get("num_gpu_blocks") is not None
    if len(starts) > 1:
        shown = ", ".join(f"{n:,}" for n in shown_starts[:6]) + (", ..." if len(starts) > 6 else "")
        notes.insert(0, f"the log holds {len(starts)} start-ups (from lines {shown}): the last one, from line "
                        f"{shown_starts[-1]:,}, is read; the earlier ones are left out")
    missing = [_LABELS[k] for k in MEMORY_ITEMS if k not in memory]
    if missing:
        notes.append("not in the log (unknown): " + ", ".join(missing))
    if not complete:
        notes.append(f"the first {MAX_LOG_BYTES >> 20} MiB of the log end before the KV cache was allocated" if cut
                     else "the log ends before the KV cache was allocated (truncated, or the engine failed earlier)")
    kv = memory.get("kv_cache")
    if kv is not None and kv.bytes < 0:
        notes.append(f"the KV cache memory is negative ({kv.text}): the engine had no memory left for it and "
                     "stopped (the model does not fit at these settings)")
    if cut:
        notes.append(cut_note(text, size))
    if (said := out.skipped_note()) is not None:
        notes.append(said)
    notes.extend(out.rank_notes())
    counts = {k: v for k in COUNT_ITEMS if isinstance(v := out.get(k), (int, float)) and not isinstance(v, bool)}
    for key in ("num_gpu_blocks", "kv_cache_tokens", "max_concurrency", *counts):
        line = out.line_of(key)
        if line:
            line_of[key] = line
    return ParsedLog(
        engine=reader.engine, format=fmt, settings=settings, memory=memory, derived=tuple(derived),
        num_gpu_blocks=out.get("num_gpu_blocks"), kv_cache_tokens=tokens, max_concurrency=out.get("max_concurrency"),
        concurrency_len=out.get("concurrency_len"), counts=counts, ranks=tuple(sorted(out.ranks)), lines_read=len(lines),
        bytes_read=read_bytes, cut=cut, complete=complete, notes=tuple(dict.fromkeys(notes)), lines=line_of,
        detected=detected, impossible=tuple(impossible(memory, derived, settings, line_of, out)),
        startups=shown_starts, size=size, per_device=tuple(out.devices), per_rank=tuple(out.per_rank),
    )


def impossible(memory: dict[str, Logged], derived: list[str], settings: LogSettings, line_of: dict[str, int],
               out: Collector) -> list[str]:
    """What no start-up logs: a negative reading, an item larger than the GPU, a setting the engine refuses."""
    found: list[str] = []
    total = memory.get("total")
    total_at = f" (line {line_of['total']:,})" if "total" in line_of else ""

    def at(line: int | None) -> str:
        return f"line {line:,}: " if line else ""

    for name, value in memory.items():
        label = _LABELS.get(name, name.replace("_", " "))
        slack = value.step_bytes if name in derived else 0  # a difference of rounded readings may round below 0
        if name == "total" and value.bytes <= 0:
            found.append(f"{at(line_of.get(name))}{label} {value.text} is not positive")
        elif name in _NEVER_NEGATIVE and value.bytes < -slack:
            found.append(f"{at(line_of.get(name))}{label} {value.text} is negative")
        elif (total is not None and name != "total" and total.bytes > 0
              and abs(value.bytes) > total.bytes + total.step_bytes + value.step_bytes):
            found.append(f"{at(line_of.get(name))}{label} {value.text} is more than the GPU's total memory "
                         f"{total.text}{total_at}")
    for name in _COUNTS:
        count = getattr(settings, name)
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            found.append(f"{at(out.line_of(name))}{name} {count} is not a setting the engine accepts (at least 1)")
    for name in _FRACTIONS:
        fraction = getattr(settings, name)
        if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, float)
                                     or not 0 < fraction <= 1):
            found.append(f"{at(out.line_of(name))}{name} {fraction} is not a setting the engine accepts "
                         "(more than 0, at most 1)")
    return found
