"""The engines' serve flags, looked up: ``kvplan check`` reaches an engine's launcher only through them.

Each engine package with a server kvplan reads defines one ``ServeFlags`` (the type, and what a reader of a
launch command is written with, is ``engines/serve_format.py``, re-exported here); ``kvplan.deploy.flags``
finds launchers and parses flags through these objects only.
"""

from __future__ import annotations

from kvplan.engines.serve_format import (SHOWN_CHARS, ServeFlags, ServeMerge, ServeReading, ServeRemark, json_object,
                                         plain_int, shown)

__all__ = ["SHOWN_CHARS", "ServeFlags", "ServeMerge", "ServeReading", "ServeRemark", "json_object", "plain_int",
           "serve_flags", "serving_engines", "shown"]


def serving_engines() -> list[ServeFlags]:
    """Every engine's serve flags, for launcher detection (computed once per registry: ``kvplan check`` asks
    for them several times per file, and each ``get_engine`` goes through ``importlib``)."""
    from kvplan import engines

    names = engines.ENGINE_NAMES
    cached = _SERVING.get(names)
    if cached is None:
        cached = []
        for engine in engines.all_engines():
            serve = getattr(engine, "serve", None)
            if serve is not None and serve not in cached:
                cached.append(serve)
        _SERVING.clear()
        _SERVING[names] = cached
    return list(cached)


def serve_flags(engine: str) -> ServeFlags | None:
    from kvplan import engines

    key = (engine, engines.ENGINE_NAMES)
    if key not in _FLAGS:
        if len(_FLAGS) > 64:  # engine names come from user files: keep the cache small
            _FLAGS.clear()
        _FLAGS[key] = engines.get_engine(engine).serve
    return _FLAGS[key]


_SERVING: dict[tuple[str, ...], list[ServeFlags]] = {}
_FLAGS: dict[tuple[str, tuple[str, ...]], ServeFlags | None] = {}
