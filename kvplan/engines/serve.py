"""The engines' serve flags, looked up: ``kvplan check`` reaches an engine's launcher only through them.

Each engine package with a server kvplan reads defines one ``ServeFlags`` (the type, and what a reader of a
launch command is written with, is ``engines/serve_format.py``, re-exported here); ``kvplan.deploy.flags``
finds launchers and parses flags through these objects only.
"""

from __future__ import annotations

import re

from kvplan.engines.serve_format import (SHOWN_CHARS, ServeFlags, ServeMerge, ServeReading, ServeRemark, json_object,
                                         plain_int, shown)

__all__ = ["SHOWN_CHARS", "ServeFlags", "ServeMerge", "ServeReading", "ServeRemark", "json_object", "plain_int",
           "host_modules", "hosted_by", "launch_pattern", "serve_flags", "serving_engines", "shown",
           "unread_host_modules"]


def serving_engines() -> list[ServeFlags]:
    """Every engine's serve flags, for launcher detection (computed once per registry: ``kvplan check`` asks
    for them several times per file, and each ``get_engine`` goes through ``importlib``)."""
    from kvplan import engines

    names = engines.ENGINE_NAMES
    cached = _SERVING.get(names)
    if cached is None:
        cached = []
        for engine in (engines.get_engine(name) for name in names if name not in engines.NO_SERVER):
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


def hosted_by(host: str) -> ServeFlags:
    """The engine a serving framework starts with its own configuration (``ServeFlags.hosts``)."""
    found = [serve for serve in serving_engines() if host in serve.hosts]
    if len(found) != 1:  # a reader names only frameworks an engine package declares
        raise LookupError(f"internal: {len(found)} engines are hosted by {host}")
    return found[0]


def host_modules(host: str) -> dict[str, str]:
    """A framework's ``python -m`` modules that take an engine's flags -> that engine's name."""
    return {module: serve.engine for serve in serving_engines()
            for framework, module in serve.host_modules if framework == host}


def unread_host_modules(host: str) -> tuple[str, ...]:
    """A framework's engine workers whose flags are the framework's own (kvplan does not read them)."""
    return tuple(module for serve in serving_engines() for framework, module in serve.unread_host_modules
                 if framework == host)


def launch_pattern() -> re.Pattern[str]:
    """Text that starts an engine's server: a command (``<command> serve``, or the command alone where its
    default command serves) or ``-m`` with a module of the engine's package."""
    words: list[str] = []
    packages: list[str] = []
    for serve in serving_engines():
        words += [re.escape(c) + (r"\s" if serve.default_serve else r"\s+serve") for c in serve.commands]
        packages += [m.split(".")[0] for m in serve.modules if m.split(".")[0] not in packages]
    modules = r"-m\s+(" + "|".join(map(re.escape, packages)) + r")\."
    return re.compile(r"(^|\s)(" + "|".join([*words, modules]) + ")")


_SERVING: dict[tuple[str, ...], list[ServeFlags]] = {}
_FLAGS: dict[tuple[str, tuple[str, ...]], ServeFlags | None] = {}
