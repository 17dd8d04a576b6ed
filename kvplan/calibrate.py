"""Where a start-up log meets a plan: ``compare`` (the waterfall beside kvplan's prediction) and ``calibrate``
(the Settings that plan a deployment from a calibration's measured items).

The one module above the planner that reads logs: ``kvplan.logs`` only reads logs and calibration files, and
an engine's calibration rule (``LogReader.calibrate``) receives the planner as ``CalibrationCase.probe``, so
that the floors below the planner never reach up to it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

import re

from kvplan.budgets import Settings
from kvplan.engines.log_format import Calibrated, CalibrationCase, kv_only
from kvplan.logs.compare import Comparison, biggest, rows, version_of
from kvplan.logs.model import ParsedLog
from kvplan.logs.reader import log_reader
from kvplan.plan import max_batch
from kvplan.record import replace

if TYPE_CHECKING:
    from typing import Any

    from kvplan.logs.calibration import Calibration


def compare(log: ParsedLog, *, model: str | None = None, gpu: str | None = None, gpu_memory: str | None = None,
            tp: int | None = None, pp: int | None = None, engine_version: str | None = None,
            kv_dtype: str | None = None, max_model_len: int | None = None, settings: Any = None) -> Comparison:
    """kvplan.max_batch for the settings the log names (flags fill what it lacks; each such value is said)."""
    from kvplan.errors import KvplanError, UsageError

    for name, given in (("tp", tp), ("pp", pp)):  # 0 is refused by name, never read as "not given"
        if given is not None and (isinstance(given, bool) or not isinstance(given, int) or given < 1):
            raise UsageError(f"{given!r} must be a whole number, at least 1", field=name)
    if log.engine is None:
        raise UsageError("not a start-up log kvplan reads: nothing to compare")
    s = log.settings
    notes: list[str] = []
    model = model or s.model
    if model is None:
        raise UsageError("the log names no model: pass --model (a bundled id, config.json or YAML spec)")
    if gpu is None and gpu_memory is None:
        total = log.memory.get("total")
        if total is None:
            raise UsageError("the log names no total GPU memory: pass --gpu or --gpu-memory")
        gpu_memory = str(total.bytes)
        notes.append(f"GPU: the total memory the log printed, {total.text}")
    version, inferred = version_of(log)
    version = engine_version or version
    if inferred and not engine_version:
        notes.append(inferred)
    elif version is None:
        notes.append("engine version not logged: kvplan's newest rules used (pass --engine-version)")
    for name, value in (("tp", tp if tp is not None else s.tp), ("pp", pp if pp is not None else s.pp)):
        if value is None:
            notes.append(f"{name} not logged: 1 used (pass --{name})")
    mml = max_model_len if max_model_len is not None else s.max_model_len
    if mml is None:
        notes.append("max model len not logged: the model's limit used (pass --max-model-len)")
    base = settings or Settings()

    # the engine's own knobs the log names (vLLM: utilization, batched tokens, max seqs; SGLang: the static
    # fraction) are carried into the plan unless given
    reader = log_reader(log.engine)
    carried = reader.carried if reader is not None else ()
    settings = replace(base, enforce_eager=base.enforce_eager or bool(s.enforce_eager),
                       **{name: getattr(base, name) or getattr(s, name) for name in carried})
    if reader is not None:  # what the logged run implies (vLLM: the V0 engine), unless given
        implied = reader.logged_settings(log.format, version)
        settings = replace(settings, **{k: v for k, v in implied.items() if getattr(settings, k) is None})
    kv = kv_dtype or s.kv_dtype or "auto"
    # values the log gave, not a flag: a refusal names the log, not a flag the user did not pass
    from_log = {name for name, given, logged in (("tp", tp, s.tp), ("pp", pp, s.pp), ("kv_dtype", kv_dtype, s.kv_dtype),
                                                 ("max_model_len", max_model_len, s.max_model_len))
                if given is None and logged is not None}
    tp = tp if tp is not None else (s.tp or 1)
    pp = pp if pp is not None else (s.pp or 1)
    try:
        plan = max_batch(model, gpu=gpu, gpu_memory=gpu_memory, tp=tp, pp=pp,
                         engine=log.engine, engine_version=version, kv_dtype=kv, max_model_len=mml,
                         settings=settings)
    except KvplanError as exc:
        if exc.field in from_log:
            raise UsageError(f"the log's {exc.field} {getattr(s, exc.field)}: {exc.message}") from None
        raise
    table = rows(log, plan)
    biggest_item, line = biggest(table, plan)
    return Comparison(model=plan.model_id, gpu=plan.gpu_name, engine_version=plan.engine_version, plan=plan,
                      assumptions=tuple(notes), biggest=line, biggest_item=biggest_item)


def calibrate(cal: Calibration, model: Any, *, gpu: Any, gpu_memory: str | int | None, tp: int, pp: int,
              engine: str, engine_version: str | None, kv_dtype: str, max_model_len: int | None, settings: Any,
              catalog: Any = None, strict: bool = True) -> Calibrated | None:
    """Settings that plan this deployment from the calibration's measured items.

    ``strict``: a calibration that does not match raises UsageError (max-batch); otherwise None (check).
    """
    from kvplan.errors import UsageError
    from kvplan.logs.calibration import mismatch

    version = engine_version or cal.engine_version
    version = _clean(version)
    common = dict(tp=tp, pp=pp, engine=engine, kv_dtype=kv_dtype, catalog=catalog)
    taken: list[str] = []
    reader = log_reader(engine)
    if reader is not None and cal.engine == reader.engine:  # the deployment's own profile size, unless given
        for name in reader.profile_settings:
            if getattr(settings, name) is None and getattr(cal.settings, name) is not None:
                settings = replace(settings, **{name: getattr(cal.settings, name)})
                taken.append(f"{name} {getattr(cal.settings, name):,}")
        implied = reader.logged_settings((cal.source or {}).get("format"), version)
        for name, value in implied.items():  # the logged run's (vLLM: the V0 engine), unless given
            if getattr(settings, name) is None:
                settings = replace(settings, **{name: value})
                taken.append(f"{name} {value}")
    here = max_batch(model, gpu=gpu, gpu_memory=gpu_memory, engine_version=version,
                     max_model_len=max_model_len, settings=settings, **common)
    why = mismatch(cal, model_id=here.model_id, engine=here.engine, engine_version=here.engine_version,
                   gpu_total=here.gpu_total_bytes, tp=tp, pp=pp, model_arg=model if isinstance(model, str) else None)
    if why is not None:
        if strict:
            raise UsageError(f"--calibration: {why}")
        return None
    cal, clamped = _clamped(cal)
    m = cal.measured
    if engine_version is None and version is not None:
        taken.append(f"engine version {version}")
    notes: list[str] = [f"calibration: {', '.join(taken)} as logged"] if taken else []
    if cal.engine_version is None:
        notes.append("calibration: it names no engine version; the release was not checked")
    notes += clamped
    used: list[str] = []
    total = cal.gpu.total_bytes or here.gpu_total_bytes
    gpu_total_text = None
    if cal.gpu.total_bytes is not None and cal.gpu.total_bytes != here.gpu_total_bytes:
        gpu_total_text = str(cal.gpu.total_bytes)
        used.append("total")
        notes.append(f"calibration: GPU total memory as logged, {m['total'].logged if 'total' in m else total}")
    case = CalibrationCase(cal=cal, model=model, here=here, total=total, gpu_total=gpu_total_text, version=version,
                           settings=settings, common=common, notes=notes, used=used,
                           probe=max_batch)
    if reader is not None and reader.calibrate is not None:
        return reader.calibrate(case)
    return kv_only(case)


_WHY_NEGATIVE = {
    "cudagraph": "vLLM logs the free memory before the capture less the free memory after it, "
                 "gpu_model_runner.py::capture_model, and memory freed meanwhile makes that negative",
    "non_torch": "vLLM logs the growth of the memory outside torch between two readings, "
                 "mem_utils.py::memory_profiling non_torch_increase, and memory freed meanwhile makes that negative",
}


def _clamped(cal: Calibration) -> tuple[Calibration, list[str]]:
    """The calibration with CUDA-graph and non-torch memory logged below 0 taken as 0, and a note for each.

    No memory is negative: a negative figure is a difference of two readings across which memory was freed.
    The file keeps the value as logged; a plan takes 0, and vLLM's calibration derives the activation that
    makes the items add up to the logged KV memory, so the measured run is still reproduced."""
    from kvplan.logs.calibration import CLAMPED_AT_USE

    notes: list[str] = []
    measured = dict(cal.measured)
    for name in CLAMPED_AT_USE:
        item = measured.get(name)
        if item is not None and item.bytes < 0:
            measured[name] = item.model_copy(update={"bytes": 0})
            label = "CUDA-graph" if name == "cudagraph" else "non-torch"
            notes.append(f"calibration: {label} memory logged as {item.logged}; 0 used ({_WHY_NEGATIVE[name]}; "
                         "the activation derived from the logged items absorbs the difference)")
    return (cal.model_copy(update={"measured": measured}) if notes else cal), notes


def _clean(version: str | None) -> str | None:
    m = re.match(r"^v?(\d+(?:\.\d+){0,2})", (version or "").strip())
    return m.group(1) if m else None
