"""``kvplan log``: an engine's start-up log as a memory waterfall, kvplan's prediction beside it, a calibration.

Exit status: 0 the log was read (complete or not: the notes say); 2 one line on stderr: not a start-up log kvplan
reads, another engine's log than ``--engine`` names, a value no start-up logs, a file that cannot be read or
written, a bad flag. Never 1, which ``max-batch`` and ``check`` reserve for "does not fit" (docs/logs.md, ci.md).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.cli.options import Arg, Opt

if TYPE_CHECKING:
    from typing import Any


def _engine_help() -> str:
    """--engine's help: the registered engines with a log reader (``Engine.log``), never listed by hand."""
    import kvplan.engines as engines

    named = [n for n in engines.ENGINE_NAMES if "log" in vars(type(engines.get_engine(n)))]
    return f"{', '.join(named)} (default: detected)."


ARGUMENT = Arg("file", "The engine's start-up log, or - for standard input.")
FIELDS: dict[str, str] = {"format": "fmt", "kv_dtype": "kv_cache_dtype"}
"""Library parameter -> this command's parameter, where they differ."""


def options(helped: bool = True) -> tuple[Opt, ...]:
    """The options; --engine's help names the engines with a log reader (``helped``: read them, which imports
    every engine; the fast reader needs only the names of the options)."""
    return (
        Opt("compare", ("--compare",), False, "Put kvplan's prediction for the same settings beside each item.",
            flag=True),
        Opt("save", ("--save",), None, "Write the measured items to a calibration file (YAML).", path=True),
        Opt("fmt", ("--format", "-f"), "table", "table or json."),
        Opt("engine", ("--engine", "-e"), None, _engine_help() if helped else ""),
        Opt("model", ("--model", "-m"), None, "The model, where the log names none (or another id for it)."),
        Opt("gpu", ("--gpu", "-g"), None, "GPU type for --compare (default: the total memory the log printed)."),
        Opt("gpu_memory", ("--gpu-memory",), None, "GPU total memory for --compare, e.g. 79.19GiB."),
        Opt("tp", ("--tp",), None, "Tensor-parallel size, where the log names none.", integer=True),
        Opt("pp", ("--pp",), None, "Pipeline-parallel size, where the log names none.", integer=True),
        Opt("engine_version", ("--engine-version",), None, "The engine release, where the log names none."),
        Opt("kv_cache_dtype", ("--kv-cache-dtype", "--kv-dtype"), None, "KV dtype, where the log names none."),
        Opt("max_model_len", ("--max-model-len",), None, "Max model len, where the log names none."),
    )


def fast_options() -> tuple[Opt, ...]:
    return options(helped=False)


DOC = """Read a vLLM, SGLang, TensorRT-LLM or llama.cpp start-up log: where the GPU's memory went.

    Examples:

      kvplan log vllm-startup.log

      kvplan log vllm-startup.log --compare

      kvplan log vllm-startup.log --save calib.yaml

      docker logs vllm 2>&1 | kvplan log -

    A calibration file written by --save is read back by `kvplan max-batch --calibration`.
    """


def run(file: str, compare: bool, save: Any, fmt: str, engine: str | None, model: str | None, gpu: str | None,
        gpu_memory: str | None, tp: int | None, pp: int | None, engine_version: str | None,
        kv_cache_dtype: str | None, max_model_len: str | None) -> None:
    import sys

    from kvplan.errors import UsageError
    from kvplan.logs import MAX_LOG_BYTES, parse_log
    from kvplan.logs.reader import log_readers
    from kvplan.units import parse_count

    from kvplan.render.formats import check_format, write

    check_format("ParsedLog", fmt)
    known = [reader.engine for reader in log_readers()]
    if engine is not None and engine not in known:
        raise UsageError(f"--engine: unknown engine '{engine}' (known: {', '.join(known)})")
    for name, given in (("tp", tp), ("pp", pp)):  # 0 is refused by name, never read as "not given"
        if given is not None and given < 1:
            raise UsageError(f"{given} must be at least 1", field=name)
    mml = parse_count(max_model_len, "max-model-len") if max_model_len else None
    name = "standard input" if file == "-" else file
    try:  # a file through kvplan.safe_io (regular files only: a named pipe or a device is one line, exit 2)
        log = parse_log(sys.stdin.buffer if file == "-" else file, engine=engine, limit=MAX_LOG_BYTES)
    except OSError as exc:
        raise UsageError(f"{name}: cannot read ({exc.strerror or exc})") from None
    refuse(log, name)
    comparison = None
    if compare:
        from kvplan.calibrate import compare as run_compare

        comparison = run_compare(log, model=model, gpu=gpu, gpu_memory=gpu_memory, tp=tp, pp=pp,
                                 engine_version=engine_version, kv_dtype=kv_cache_dtype, max_model_len=mml)
    if save is not None:
        from kvplan.logs.calibration import dump, from_log

        # from_log validates what it gathered as ``load`` would (kvplan.logs.calibration.validate), dump reads it
        # back: a value no calibration holds is one line naming the field, and nothing is written
        cal = from_log(log, source=None if file == "-" else file, model=model, tp=tp, pp=pp,
                       engine_version=engine_version)
        write_save(save, dump(cal), _identity(file))
    write(log, fmt, sys.stdout, comparison=comparison, save=save)
    # exit 0: the log was read (complete or not). Never 1 (``max-batch`` and ``check``'s "does not fit"): a log is
    # a measurement, not a verdict. 2: everything above that raised (docs/logs.md, docs/ci.md)



def refuse(log: Any, name: str) -> None:
    """A log kvplan does not read, as one UsageError: not a start-up log, another engine's log than the one
    asked for, or values no start-up logs."""
    from kvplan.errors import UsageError
    from kvplan.logs.reader import log_reader

    if log.engine is None:
        why = log.notes[0] if log.notes else "no start-up lines found"
        raise UsageError(f"{name}: not a start-up log kvplan reads: {why}")
    if log.detected not in (None, log.engine) and not log.memory and log.kv_cache_tokens is None \
            and log.num_gpu_blocks is None:
        other, asked = log_reader(log.detected), log_reader(log.engine)
        said = other.title if other is not None else log.detected
        raise UsageError(f"{name} is a {said} log, not {asked.title if asked else log.engine} (leave --engine out, "
                         f"or pass --engine {log.detected})", field="engine")
    if log.impossible:
        more = f" (and {len(log.impossible) - 1} more)" if len(log.impossible) > 1 else ""
        raise UsageError(f"{name}: {log.impossible[0]}{more}: no engine logs that at start-up (a corrupted or "
                         "edited log?), so the log is not read")


def _identity(file: str) -> tuple[int, int] | None:
    """(device, inode) of the log being read: standard input's where it is a file (``< calib.yaml``)."""
    import os
    import sys

    try:
        info = os.fstat(sys.stdin.fileno()) if file == "-" else os.stat(file)
    except (OSError, ValueError, AttributeError):  # a stream without a file descriptor (tests, pipes closed)
        return None
    return info.st_dev, info.st_ino


def write_save(save: Any, text: str, reading: tuple[int, int] | None) -> None:
    """Write the calibration to a regular file that is not the log being read (never truncated before both are
    checked on the opened file: no race between the check and the write)."""
    import os
    import stat

    from kvplan.errors import UsageError

    where = str(save)
    try:
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0),
                     0o666)
    except OSError as exc:  # a directory, no permission, a named pipe nobody reads (ENXIO)
        raise UsageError(f"{where}: cannot write ({exc.strerror or exc})", field="save") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{where}: not a regular file: kvplan writes a calibration only to a file", field="save")
        if reading is not None and (info.st_dev, info.st_ino) == reading:
            raise UsageError(f"{where} is the log being read: it would be overwritten (choose another file)",
                             field="save")
        os.ftruncate(fd, 0)
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    except OSError as exc:
        raise UsageError(f"{where}: cannot write ({exc.strerror or exc})", field="save") from None
    finally:
        os.close(fd)
