"""A fleet of files checked by worker processes, one per CPU, the report the same as one process makes.

Each file is checked on its own (``check_file``: its deployments, and those sharing its GPUs, plan within it), and
a plan is a pure function of its inputs, so the files can be split between processes and their results put back in
the order given: the report, and every byte written from it, is the one a single process writes (tests hold the
two equal). Only the time differs: on 2 cores, 1,000 files take a little over half as long (docs/performance.md).

Workers start by ``fork`` where the platform has it safely (Linux) and no other thread runs; elsewhere by
``spawn``, each importing kvplan afresh (a start-up's cost, worth it only for large fleets). Where workers cannot
start or one dies (no ``/dev/shm`` for their queues, a process limit, memory), ``check_in_workers`` stops and
the caller checks the files left in its own process.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from kvplan.deploy.report import FileResult

import os
import sys

MAX_JOBS = 256
"""The most workers ``--jobs`` may ask for (each is a whole Python process)."""

_STATE: dict[str, Any] = {}
"""The worker's checker, context and options, set once by ``_start`` (a module global: the pool calls functions by
name)."""


def cpus() -> int:
    """CPUs this process may run on (its affinity where the platform says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        return os.cpu_count() or 1


def workers_for(jobs: int | None, files: int, parallel_from: int) -> int:
    """Processes to check ``files`` files with: ``jobs`` as asked (1: this process alone), or for None, from
    ``parallel_from`` files on, one per CPU, each with at least half that many files (a worker's start is worth it
    over that many; 64 CPUs do not start 64 workers for 100 files); never more than there are files."""
    if jobs is None:
        jobs = min(cpus(), files // max(parallel_from // 2, 1)) if files >= parallel_from else 1
    return max(1, min(jobs, files))


def check_jobs(jobs: int) -> None:
    """Refuse, by field, a worker count that is not a whole number from 1 to :data:`MAX_JOBS`."""
    from kvplan.errors import UsageError

    if isinstance(jobs, bool) or not isinstance(jobs, int):
        raise UsageError(f"{jobs!r} is not a whole number", field="jobs")
    if not 1 <= jobs <= MAX_JOBS:
        raise UsageError(f"{jobs}: give 1 to {MAX_JOBS} worker processes (1: check in this process)", field="jobs")


def _start_method() -> str:
    """``fork`` on Linux while this process runs one thread (forking a threaded process can copy a held lock);
    ``spawn`` elsewhere (macOS's system libraries are not fork-safe)."""
    import threading

    return "fork" if sys.platform.startswith("linux") and threading.active_count() == 1 else "spawn"


def _start(check_file: Callable[[str, Any, bool], FileResult], ctx: Any, ignore_unrecognized: bool) -> None:
    _STATE["check"], _STATE["ctx"], _STATE["ignore"] = check_file, ctx, ignore_unrecognized


def _check_one(path: str) -> FileResult:
    result = _STATE["check"](path, _STATE["ctx"], _STATE["ignore"])
    for dep in result.deployments:
        dep.tenant = None  # how to plan it again beside its GPU's other tenants: used within its file, and a closure
    return result


def check_in_workers(check_file: Callable[[str, Any, bool], FileResult], files: list[str], ctx: Any,
                     ignore_unrecognized: bool, workers: int, method: str | None = None) -> Iterator[FileResult]:
    """Each file's result, ``check_file(path, ctx, ignore_unrecognized)`` (``deploy.checked_file``, handed over: this
    module imports nothing of the package it serves), in order, from ``workers`` processes, as they come in. Where the
    workers cannot start or one dies it stops early: the caller checks the files left itself."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # chunks of files a worker takes at a time: few enough trips through the queue, small enough to share the
    # tail evenly (files differ in cost: a deployment that does not fit plans its fixes too)
    chunk = max(1, min(32, len(files) // (workers * 8)))
    try:
        context = multiprocessing.get_context(method or _start_method())
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start,
                                   initargs=(check_file, ctx.fresh(), ignore_unrecognized))
    except Exception:  # noqa: BLE001 - no semaphores here (no /dev/shm): this process checks them
        return
    try:
        yield from pool.map(_check_one, files, chunksize=chunk)
    except Exception:  # noqa: BLE001 - a worker killed (BrokenProcessPool: memory, a signal) or one that cannot
        return  # start (a process limit): this process checks the files left
    finally:  # and on Ctrl-C: the files no worker has taken yet are dropped, not checked before the exit
        pool.shutdown(wait=True, cancel_futures=True)
