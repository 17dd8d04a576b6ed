"""``parse_log``: detect the engine from the content, run its reader, assemble a :class:`ParsedLog`.

Engine-neutral: each engine's patterns, and the items its log prints only in combination, are in its
package (``kvplan/engines/<engine>/log.py``, reached through ``Engine.log``).
"""

from __future__ import annotations

from typing import BinaryIO

from kvplan.logs.core import MAX_LOG_BYTES, Logged, read_bounded, split_lines
from kvplan.logs.model import MEMORY_ITEMS, Collector, LogSettings, ParsedLog
from kvplan.logs.reader import Draft, log_reader, log_readers, titles

_SETTING_KEYS = ("model", "engine_version", "gpu_name", "tp", "pp", "dtype", "kv_dtype", "max_model_len",
                 "gpu_memory_utilization", "mem_fraction_static", "max_num_batched_tokens", "max_num_seqs",
                 "block_size", "enforce_eager")
_EXTRAS = ("peak_torch", "free_after_weights", "free_before_weights", "free_after_kv", "free_after_graphs",
           "kv_cache_needed", "cudagraph_estimate", "cudagraph_capture")
"""Memory readings some engines print besides the waterfall's items (kept under their own names)."""
_LABELS = {"total": "total GPU memory", "budget": "the engine's share of it", "weights": "weights",
           "activation": "activation peak", "non_torch": "non-torch memory", "cudagraph": "CUDA graphs",
           "kv_cache": "KV cache memory"}


def detect(text: str) -> str | None:
    """The engine whose markers the text holds most often (None: none of them)."""
    best, score = None, 0
    for reader in log_readers():
        found = sum(min(text.count(marker), 50) for marker in reader.markers)
        if found > score:
            best, score = reader.engine, found
    return best


def parse_log(source: str | BinaryIO, engine: str | None = None, limit: int = MAX_LOG_BYTES) -> ParsedLog:
    """Read a log file (path) or binary stream: at most ``limit`` bytes. OSError propagates (a missing file);
    the content itself never makes this raise."""
    text, cut = read_bounded(source, limit)
    return parse_text(text, engine=engine, cut=cut)


def parse_text(text: str, engine: str | None = None, cut: bool = False) -> ParsedLog:
    text = text[:MAX_LOG_BYTES]
    try:
        return _parse(text, engine, cut)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not turn a log into a traceback
        return ParsedLog(engine=None, format=None, settings=LogSettings(), memory={}, bytes_read=len(text),
                         cut=cut, notes=(f"kvplan could not read this log ({type(exc).__name__}); please report it",))


def _parse(text: str, engine: str | None, cut: bool) -> ParsedLog:
    lines = split_lines(text)
    reader = log_reader(engine or detect(text))
    if reader is None:
        return ParsedLog(engine=None, format=None, settings=LogSettings(), memory={}, lines_read=len(lines),
                         bytes_read=len(text.encode("utf-8", "replace")), cut=cut,
                         notes=(f"no {titles(log_readers())} start-up lines found",))
    out = Collector()
    fmt = reader.read(lines, out)
    out.ranks.update(line.rank for line in lines if line.rank is not None)
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
    missing = [_LABELS[k] for k in MEMORY_ITEMS if k not in memory]
    if missing:
        notes.append("not in the log (unknown): " + ", ".join(missing))
    if not complete:
        notes.append("the log ends before the KV cache was allocated (truncated, or the engine failed earlier)")
    if cut:
        notes.append(f"only the first {MAX_LOG_BYTES >> 20} MiB of the log were read")
    notes.extend(out.rank_notes())
    for key in ("num_gpu_blocks", "kv_cache_tokens", "max_concurrency"):
        line = out.line_of(key)
        if line:
            line_of[key] = line
    return ParsedLog(
        engine=reader.engine, format=fmt, settings=settings, memory=memory, derived=tuple(derived),
        num_gpu_blocks=out.get("num_gpu_blocks"), kv_cache_tokens=tokens, max_concurrency=out.get("max_concurrency"),
        concurrency_len=out.get("concurrency_len"), ranks=tuple(sorted(out.ranks)), lines_read=len(lines),
        bytes_read=len(text.encode("utf-8", "replace")), cut=cut, complete=complete,
        notes=tuple(dict.fromkeys(notes)), lines=line_of,
    )
