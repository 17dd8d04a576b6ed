"""Calibration files: the items an engine measured, and the settings it measured them under.

``from_log`` turns a :class:`ParsedLog` into a :class:`Calibration` (pydantic, written as YAML by
``kvplan log --save``); ``calibrate`` gives ``max-batch`` and ``check`` the Settings that use those items
when the model, GPU, engine, its version and the parallelism match, with one line per item said.

How measured items become Settings is the engine's rule (``LogReader.calibrate`` in
``kvplan/engines/<engine>/log.py``: vLLM re-derives the activation peak, SGLang the memory outside its
free-memory reading); an engine without one carries the logged KV-cache memory as it is (``kv_only``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kvplan.logs.model import MEMORY_ITEMS, ParsedLog
from kvplan.logs.reader import log_reader, log_readers

FORMAT_VERSION = 1
if TYPE_CHECKING:
    EngineName = str
else:  # the engines with a log format, in the registry's order: the schema's enum
    EngineName = Literal[tuple(reader.engine for reader in log_readers())]
ItemName = Literal["total", "budget", "weights", "activation", "non_torch", "cudagraph", "kv_cache",
                   "free_after_weights"]


class MeasuredItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    bytes: int = Field(description="The logged value in bytes (may be negative for a KV cache that does not fit).")
    step_bytes: int = Field(ge=1, description="The log's rounding step: the value is bytes +/- step_bytes / 2.")
    logged: str = Field(description="As the log printed it.")
    derived: bool = Field(False, description="Worked out from logged items (e.g. peak - weights), not printed.")


class CalibrationGpu(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str | None = None
    total_bytes: int | None = Field(None, gt=0)
    total_step_bytes: int | None = Field(None, ge=1)


class CalibrationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    dtype: str | None = None
    kv_dtype: str | None = None
    max_model_len: int | None = Field(None, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    mem_fraction_static: float | None = Field(None, gt=0, le=1)
    max_num_batched_tokens: int | None = Field(None, ge=1)
    max_num_seqs: int | None = Field(None, ge=1)
    enforce_eager: bool | None = None


class Calibration(BaseModel):
    """kvplan calibration file: measured per-GPU memory items of one deployment."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="kvplan calibration")
    kvplan_calibration: Literal[1] = Field(1, description="Format version.")
    engine: EngineName
    engine_version: str | None = None
    model: str
    gpu: CalibrationGpu = CalibrationGpu()
    settings: CalibrationSettings = CalibrationSettings()
    measured: dict[ItemName, MeasuredItem] = Field(default_factory=dict)
    num_gpu_blocks: int | None = Field(None, ge=0)
    kv_cache_tokens: int | None = Field(None, ge=0)
    source: dict[str, str | int | None] = Field(default_factory=dict, description="The log: file, format, lines.")
    notes: list[str] = Field(default_factory=list)


def schema() -> dict[str, Any]:
    out = Calibration.model_json_schema()
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return out


def from_log(log: ParsedLog, *, source: str | None = None, model: str | None = None, tp: int | None = None,
             pp: int | None = None, engine_version: str | None = None) -> Calibration:
    """The measured items of a parsed log (flags name what the log lacks)."""
    from kvplan.errors import UsageError

    if log.engine is None:
        raise UsageError("not a start-up log kvplan reads: nothing to save")
    s = log.settings
    model = model or s.model
    if model is None:
        raise UsageError("the log names no model: pass --model to save a calibration")
    measured = {name: MeasuredItem(bytes=v.bytes, step_bytes=v.step_bytes, logged=v.text,
                                   derived=name in log.derived)
                for name, v in log.memory.items() if name in (*MEMORY_ITEMS, "free_after_weights")}
    if not measured:
        raise UsageError("the log holds no memory item to save")
    total = log.memory.get("total")
    from kvplan.logs.compare import version_of

    version, note = version_of(log)
    notes = list(log.notes) + ([note] if note and not engine_version else [])
    return Calibration(
        engine=log.engine, engine_version=engine_version or version, model=model,
        gpu=CalibrationGpu(name=s.gpu_name, total_bytes=total.bytes if total and total.bytes > 0 else None,
                           total_step_bytes=total.step_bytes if total else None),
        settings=CalibrationSettings(tp=tp or s.tp or 1, pp=pp or s.pp or 1, dtype=s.dtype, kv_dtype=s.kv_dtype,
                                     max_model_len=s.max_model_len, gpu_memory_utilization=s.gpu_memory_utilization,
                                     mem_fraction_static=s.mem_fraction_static,
                                     max_num_batched_tokens=s.max_num_batched_tokens, max_num_seqs=s.max_num_seqs,
                                     enforce_eager=s.enforce_eager),
        measured=measured, num_gpu_blocks=log.num_gpu_blocks,
        kv_cache_tokens=log.kv_cache_tokens, source={"file": source, "format": log.format},
        notes=notes,
    )


def dump(cal: Calibration) -> str:
    import yaml

    head = "# kvplan calibration: measured items of one deployment (kvplan log --save); schema: kvplan schema calibration\n"
    return head + yaml.safe_dump(cal.model_dump(mode="json", exclude_none=True), sort_keys=False)


def load(path: str | Path) -> Calibration:
    import yaml

    from kvplan.errors import UsageError

    try:
        text = Path(path).read_text(encoding="utf-8")[:1 << 20]
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"--calibration {path}: cannot read ({getattr(exc, 'strerror', None) or type(exc).__name__})") from None
    try:
        return Calibration.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        raise UsageError(f"--calibration {path}: {where}: {first['msg']}") from None


# --------------------------------------------------------------------------------------------- use

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


def _short(name: str) -> str:
    return re.split(r"[/\\]", name.rstrip("/\\"))[-1].lower()


def _major_minor(text: str | None) -> tuple[int, ...] | None:
    m = re.match(r"^v?(\d+)\.(\d+)", (text or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def mismatch(cal: Calibration, *, model_id: str, engine: str, engine_version: str, gpu_total: int, tp: int,
             pp: int) -> str | None:
    """Why the calibration does not describe this deployment (None: it does)."""
    if cal.engine != engine:
        return f"measured on {cal.engine}, not {engine}"
    if _short(cal.model) != _short(model_id):
        return f"measured with model {cal.model}, not {model_id}"
    if (cal.settings.tp, cal.settings.pp) != (tp, pp):
        return f"measured with tp {cal.settings.tp} x pp {cal.settings.pp}, not tp {tp} x pp {pp}"
    if cal.gpu.total_bytes is not None:
        tolerance = max(cal.gpu.total_step_bytes or 0, gpu_total // 100)
        if abs(cal.gpu.total_bytes - gpu_total) > tolerance:
            return (f"measured on a GPU of {cal.gpu.total_bytes / 2**30:.2f} GiB, not {gpu_total / 2**30:.2f} GiB")
    if cal.engine_version is not None and _major_minor(cal.engine_version) != _major_minor(engine_version):
        return f"measured with {cal.engine} {cal.engine_version}, not {engine_version}"
    return None


def calibrate(cal: Calibration, model: Any, *, gpu: Any, gpu_memory: str | int | None, tp: int, pp: int,
              engine: str, engine_version: str | None, kv_dtype: str, max_model_len: int | None, settings: Any,
              catalog: Any = None, strict: bool = True) -> Calibrated | None:
    """Settings that plan this deployment from the calibration's measured items.

    ``strict``: a calibration that does not match raises UsageError (max-batch); otherwise None (check).
    """
    import kvplan
    from kvplan.errors import UsageError

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
    here = kvplan.max_batch(model, gpu=gpu, gpu_memory=gpu_memory, engine_version=version,
                            max_model_len=max_model_len, settings=settings, **common)
    why = mismatch(cal, model_id=here.model_id, engine=here.engine, engine_version=here.engine_version,
                   gpu_total=here.gpu_total_bytes, tp=tp, pp=pp)
    if why is not None:
        if strict:
            raise UsageError(f"--calibration: {why}")
        return None
    m = cal.measured
    if engine_version is None and version is not None:
        taken.append(f"engine version {version}")
    notes: list[str] = [f"calibration: {', '.join(taken)} as logged"] if taken else []
    if cal.engine_version is None:
        notes.append("calibration: it names no engine version; the release was not checked")
    used: list[str] = []
    total = cal.gpu.total_bytes or here.gpu_total_bytes
    gpu_total_text = None
    if cal.gpu.total_bytes is not None and cal.gpu.total_bytes != here.gpu_total_bytes:
        gpu_total_text = str(cal.gpu.total_bytes)
        used.append("total")
        notes.append(f"calibration: GPU total memory as logged, {m['total'].logged if 'total' in m else total}")
    case = CalibrationCase(cal=cal, model=model, here=here, total=total, gpu_total=gpu_total_text, version=version,
                           settings=settings, common=common, notes=notes, used=used)
    if reader is not None and reader.calibrate is not None:
        return reader.calibrate(case)
    return kv_only(case)


@dataclass(frozen=True)
class CalibrationCase:
    """A calibration that matches the deployment, for the engine's ``LogReader.calibrate``."""

    cal: Calibration
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


def _clean(version: str | None) -> str | None:
    m = re.match(r"^v?(\d+(?:\.\d+){0,2})", (version or "").strip())
    return m.group(1) if m else None


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
