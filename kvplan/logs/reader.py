"""The engines' log readers, looked up: ``kvplan.logs`` reaches engines only through these objects.

Each engine with a log format kvplan reads defines one :class:`LogReader` in
``kvplan/engines/<engine>/log.py``; the type, and what a reader is written with, is the engines' log format
(``kvplan.engines.log_format``, re-exported here). ``log_readers`` lists them in the registry's order, as
``kvplan.deploy.flags`` reaches ``ServeFlags``.
"""

from __future__ import annotations

from kvplan.engines.log_format import Draft, LogReader

__all__ = ["Draft", "LogReader", "log_reader", "log_readers", "titles"]


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
