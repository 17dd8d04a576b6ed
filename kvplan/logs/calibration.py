"""Calibration files: the items an engine measured, and the settings it measured them under.

``from_log`` turns a :class:`ParsedLog` into a :class:`Calibration` (pydantic, written as YAML by
``kvplan log --save``); ``calibrate`` gives ``max-batch`` and ``check`` the Settings that use those items
when the model, GPU, engine, its version and the parallelism match, with one line per item said.

vLLM's own rule (``gpu_worker.py::determine_available_memory``): KV = ceil(total x util) - weights -
activation peak - non-torch (- the CUDA-graph estimate from v0.21). The logged items are rounded to
0.01 GiB, so the activation kvplan uses is the one that makes the logged items add up to the logged KV
memory (refined to the logged block count when there is one); the difference to the printed activation
is the rounding, and is said. The activation peak is profiled over ``max_num_batched_tokens`` tokens: for
other settings it is scaled by kvplan's activation model (the same ratio), and that is said too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kvplan.logs.model import MEMORY_ITEMS, ParsedLog

FORMAT_VERSION = 1
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
    engine: Literal["vllm", "sglang", "trtllm", "llamacpp"]
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
    if engine == "vllm" and cal.engine == "vllm":  # the deployment's own profile size, unless given
        for name in ("max_num_batched_tokens", "max_num_seqs"):
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
    if engine == "vllm":
        return _vllm(cal, model, here, total, gpu_total_text, version, settings, common, notes, used)
    if engine == "sglang":
        s = settings
        if "weights" in m:
            s = replace(s, weights_bytes=m["weights"].bytes)
            used.append("weights")
            notes.append(f"calibration: weights {m['weights'].logged} (measured)")
        if "free_after_weights" in m and "weights" in m:
            non_torch = total - m["weights"].bytes - m["free_after_weights"].bytes
            s = replace(s, non_torch_bytes=max(non_torch, 0))
            used.append("non_torch")
            notes.append(f"calibration: memory outside the weights before SGLang's free-memory reading "
                         f"{non_torch / 2**30:.2f} GiB (total - weights - logged avail mem)")
        if s.mem_fraction_static is None and cal.settings.mem_fraction_static is not None:
            s = replace(s, mem_fraction_static=cal.settings.mem_fraction_static)
            notes.append(f"calibration: mem_fraction_static {cal.settings.mem_fraction_static:g} as logged")
        if not used:
            return _kv_only(cal, settings, version, gpu_total_text, notes)
        return Calibrated(s, version, gpu_total_text, tuple(used), tuple(notes))
    return _kv_only(cal, settings, version, gpu_total_text, notes)


def _clean(version: str | None) -> str | None:
    m = re.match(r"^v?(\d+(?:\.\d+){0,2})", (version or "").strip())
    return m.group(1) if m else None


def _kv_only(cal: Calibration, settings: Any, version: str | None, gpu_total: str | None,
             notes: list[str]) -> Calibrated:
    from kvplan.errors import UsageError

    kv = cal.measured.get("kv_cache")
    if kv is None or kv.bytes <= 0:
        raise UsageError("--calibration: the file holds no KV-cache memory kvplan can use")
    notes.append(f"calibration: KV cache memory {kv.logged} as logged (the log has no breakdown to rescale: "
                 "valid for the settings it was measured under)")
    return Calibrated(replace(settings, kv_cache_memory_bytes=kv.bytes), version, gpu_total, ("kv_cache",),
                      tuple(notes))


def _vllm(cal: Calibration, model: Any, here: Any, total: int, gpu_total: str | None, version: str | None,
          settings: Any, common: dict[str, Any], notes: list[str], used: list[str]) -> Calibrated:
    import kvplan

    m = cal.measured
    if "weights" not in m or "kv_cache" not in m:
        return _kv_only(cal, settings, version, gpu_total, notes)
    c = cal.settings
    util = c.gpu_memory_utilization
    if util is None:
        util = here.engine_defaults.get("gpu_memory_utilization")
        notes.append(f"calibration: the log names no utilization; vLLM's default {util:g} assumed")
    weights = m["weights"].bytes
    non_torch = m["non_torch"].bytes if "non_torch" in m else None
    graphs = m["cudagraph"].bytes if "cudagraph" in m else None
    measured_at = dict(gpu_memory=str(total), engine_version=version, max_model_len=c.max_model_len or here.max_model_len,
                       **common)
    base = kvplan.Settings(gpu_memory_utilization=util, max_num_batched_tokens=c.max_num_batched_tokens,
                           max_num_seqs=c.max_num_seqs, enforce_eager=bool(c.enforce_eager), weights_bytes=weights,
                           non_torch_bytes=non_torch, cudagraph_bytes=graphs)
    kv_target = _kv_target(cal, model, measured_at, base, notes)
    # the activation that makes the measured items add up to the measured KV memory (vLLM's identity)
    without = kvplan.max_batch(model, settings=replace(base, activation_bytes=0), **measured_at)
    activation = without.per_gpu.kv_cache_bytes - kv_target
    printed = m.get("activation")
    if printed is not None:
        slack = sum(i.step_bytes for i in m.values()) + 2 * (1 << 20)
        if abs(activation - printed.bytes) <= slack:
            notes.append(f"calibration: activation peak {activation / 2**30:.3f} GiB (logged {printed.logged}; "
                         "the logged items' rounding folded in so that they add up to the logged KV memory)")
        else:
            notes.append(f"calibration: the logged items do not add up to the logged KV memory "
                         f"({(activation - printed.bytes) / 2**30:+.2f} GiB): the logged activation "
                         f"{printed.logged} is used")
            activation = printed.bytes
    else:
        notes.append(f"calibration: activation peak {activation / 2**30:.3f} GiB = what the logged budget, weights"
                     + (", non-torch" if non_torch is not None else " (and kvplan's non-torch estimate)")
                     + " and KV memory leave")
    modelled = kvplan.max_batch(model, settings=replace(base, non_torch_bytes=None), **measured_at)
    a0 = modelled.per_gpu.activation_bytes
    a1 = here.per_gpu.activation_bytes
    t0 = modelled.engine_defaults.get("max_num_batched_tokens")
    t1 = here.engine_defaults.get("max_num_batched_tokens")
    s0, s1 = modelled.engine_defaults.get("max_num_seqs"), here.engine_defaults.get("max_num_seqs")
    if (t0, s0) != (t1, s1) and a0 > 0:
        scaled = round(activation * a1 / a0)
        notes.append(f"calibration: activation scaled by vLLM's profile size (max_num_batched_tokens {t0:,} -> "
                     f"{t1:,}, max_num_seqs {s0} -> {s1}) with kvplan's activation model: "
                     f"{activation / 2**30:.2f} -> {scaled / 2**30:.2f} GiB")
        activation = scaled
    s = replace(settings, weights_bytes=weights, activation_bytes=max(activation, 0), non_torch_bytes=non_torch,
                cudagraph_bytes=graphs)
    if s.gpu_memory_utilization is None and c.gpu_memory_utilization is not None:
        s = replace(s, gpu_memory_utilization=c.gpu_memory_utilization)
    used += ["weights", "activation"] + (["non_torch"] if non_torch is not None else []) + \
        (["cudagraph"] if graphs is not None else [])
    notes.insert(0, f"calibration: weights {m['weights'].logged}"
                 + (f", non-torch {m['non_torch'].logged}" if non_torch is not None else "")
                 + (f", CUDA graphs {m['cudagraph'].logged}" if graphs is not None else "")
                 + f" measured by {cal.engine} {cal.engine_version or ''}".rstrip() + f" on {cal.model}")
    return Calibrated(s, version, gpu_total, tuple(dict.fromkeys(used)), tuple(notes))


def _kv_target(cal: Calibration, model: Any, measured_at: dict[str, Any], base: Any, notes: list[str]) -> int:
    """The logged KV memory, narrowed to the logged block count where the log has one."""
    import kvplan

    kv = cal.measured["kv_cache"]
    low, high = kv.bytes - kv.step_bytes // 2, kv.bytes + kv.step_bytes // 2
    blocks = cal.num_gpu_blocks
    probe_bytes = 1 << 44
    probe = kvplan.max_batch(model, settings=replace(base, kv_cache_memory_bytes=probe_bytes), **measured_at)
    if not probe.num_blocks:
        return kv.bytes
    per_block = probe_bytes // probe.num_blocks
    if blocks is None and cal.kv_cache_tokens and probe.block_size:
        # a single-group pool logs blocks x block_size tokens (vLLM <= 0.23)
        if probe.kv_cache_tokens == probe.num_blocks * probe.block_size and cal.kv_cache_tokens % probe.block_size == 0:
            blocks = cal.kv_cache_tokens // probe.block_size
    if blocks is None or blocks <= 0:
        return kv.bytes
    lo, hi = max(low, blocks * per_block), min(high, (blocks + 1) * per_block - 1)
    if lo > hi:
        notes.append(f"calibration: the logged {blocks:,} blocks and {kv.logged} disagree by more than the "
                     "rounding; the logged memory is used")
        return kv.bytes
    notes.append(f"calibration: KV memory narrowed to {blocks:,} blocks x {per_block:,} B, within the logged "
                 f"{kv.logged}")
    return (lo + hi) // 2
