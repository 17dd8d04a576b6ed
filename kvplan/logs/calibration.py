"""Calibration files: the items an engine measured, and the settings it measured them under.

``from_log`` turns a :class:`ParsedLog` into a :class:`Calibration` (pydantic, written as YAML by
``kvplan log --save``); ``load`` reads one back, strictly; ``mismatch`` says why a calibration does not
describe a deployment. This module reads and writes the files and plans nothing: ``kvplan.calibrate.calibrate``
gives ``max-batch`` and ``check`` the Settings that use the measured items when the model, GPU, engine, its
version and the parallelism match, with one line per item said.

How measured items become Settings is the engine's rule (``LogReader.calibrate`` in
``kvplan/engines/<engine>/log.py``: vLLM re-derives the activation peak, SGLang the memory outside its
free-memory reading); an engine without one carries the logged KV-cache memory as it is
(``kvplan.engines.log_format.kv_only``).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kvplan.logs.model import MEMORY_ITEMS, ParsedLog
from kvplan.logs.reader import log_readers

FORMAT_VERSION = 1
MAX_FILE_BYTES = 1 << 20
"""The most a calibration file may hold: a saved one is a few KB, and every field below is bounded so that
one ``kvplan log --save`` writes always stays far under this."""
MAX_BYTES = 1 << 50  # 1 PiB: far beyond any one device (kvplan.hardware.MAX_BYTES)
MAX_COUNT = 1 << 40  # tokens, blocks, lengths (kvplan.units.MAX_COUNT)
MAX_RANKS = 1 << 16
MAX_NAME = 1024  # a model id or path, a GPU name
MAX_NOTE = 2000
MAX_NOTES = 200
_SHORT = 64  # a dtype, an engine version, a key of `source`
_LOGGED = 200  # a value as the log printed it (a longer number is refused as more than MAX_BYTES anyway)
if TYPE_CHECKING:
    EngineName = str
else:  # the engines with a log format, in the registry's order: the schema's enum
    EngineName = Literal[tuple(reader.engine for reader in log_readers())]
ItemName = Literal["total", "budget", "weights", "activation", "non_torch", "cudagraph", "kv_cache",
                   "free_after_weights"]
POSITIVE_ITEMS = ("total", "budget")
"""Items no engine can log at 0 or below: a GPU and its budget hold memory."""
NON_NEGATIVE_ITEMS = ("free_after_weights", "weights")
"""A free-memory reading, and the weights (a tiny model's are logged as "took 0.00 GiB": 0 within the step).
The other items are differences of readings and may be logged below 0: the KV
memory of a model that does not fit, CUDA graphs and non-torch memory when memory was freed between the
readings (vLLM ``capture_model``: start free - end free; ``memory_profiling``: non_torch_increase)."""
CLAMPED_AT_USE = ("cudagraph", "non_torch")
"""Measured items a plan takes as Settings (which hold no negative memory): a negative one is used as 0."""

Bytes = Annotated[int, Field(ge=-MAX_BYTES, le=MAX_BYTES)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
PositiveCount = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Ranks = Annotated[int, Field(ge=1, le=MAX_RANKS)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Short = Annotated[str, Field(max_length=_SHORT)]


class MeasuredItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    bytes: Bytes = Field(description="The logged value in bytes (may be negative: a KV cache that does not fit, "
                                     "or a difference of memory readings).")
    step_bytes: int = Field(ge=1, le=MAX_BYTES,
                            description="The log's rounding step: the value is bytes +/- step_bytes / 2.")
    logged: str = Field(max_length=_LOGGED, description="As the log printed it.")
    derived: bool = Field(False, description="Worked out from logged items (e.g. peak - weights), not printed.")


class CalibrationGpu(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str | None = Field(None, max_length=MAX_NAME)
    total_bytes: int | None = Field(None, gt=0, le=MAX_BYTES)
    total_step_bytes: int | None = Field(None, ge=1, le=MAX_BYTES)


class CalibrationSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tp: Ranks = 1
    pp: Ranks = 1
    dtype: Short | None = None
    kv_dtype: Short | None = None
    max_model_len: PositiveCount | None = None
    gpu_memory_utilization: Fraction | None = None
    mem_fraction_static: Fraction | None = None
    max_num_batched_tokens: PositiveCount | None = None
    max_num_seqs: PositiveCount | None = None
    enforce_eager: bool | None = None
    vllm_sampler: Literal["sort", "flashinfer", "triton"] | None = None


SourceValue = Annotated[str, Field(max_length=4096)] | Annotated[int, Field(ge=-MAX_COUNT, le=MAX_COUNT)] | None


class Calibration(BaseModel):
    """kvplan calibration file: measured per-GPU memory items of one deployment."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="kvplan calibration")
    kvplan_calibration: Literal[1] = Field(1, description="Format version.")
    engine: EngineName
    engine_version: Short | None = None
    model: str = Field(min_length=1, max_length=MAX_NAME)
    gpu: CalibrationGpu = CalibrationGpu()
    settings: CalibrationSettings = CalibrationSettings()
    measured: dict[ItemName, MeasuredItem] = Field(default_factory=dict)
    num_gpu_blocks: Count | None = None
    kv_cache_tokens: Count | None = None
    source: dict[Short, SourceValue] = Field(default_factory=dict, max_length=16,
                                             description="The log: file, format, lines.")
    notes: list[Annotated[str, Field(max_length=MAX_NOTE)]] = Field(default_factory=list, max_length=MAX_NOTES)

    @field_validator("kvplan_calibration", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: Any) -> Any:
        from kvplan.errors import UsageError

        if isinstance(value, bool):  # True == 1 in Python, and Literal[1] takes it even strictly
            raise UsageError(f"{str(value).lower()} is a boolean, not the format version 1")
        return value

    @model_validator(mode="after")
    def _possible(self) -> Calibration:
        """What no log of a real start-up holds (the field constraints say the rest)."""
        from kvplan.errors import UsageError

        m = self.measured
        for name, item in m.items():
            where = f"measured.{name}.bytes"
            if name in POSITIVE_ITEMS and item.bytes <= 0:
                raise UsageError(f"{item.bytes:,} must be positive", field=where)
            if name in NON_NEGATIVE_ITEMS and item.bytes < 0:
                raise UsageError(f"{item.bytes:,} must not be negative", field=where)
        total = m.get("total")
        if total is not None:  # every item is per GPU: none is larger than the GPU (its rounding allowed)
            for name, item in m.items():
                if name != "total" and abs(item.bytes) > total.bytes + total.step_bytes + item.step_bytes:
                    raise UsageError(f"{item.bytes:,} is more than the GPU's {total.bytes:,} (measured.total)",
                                     field=f"measured.{name}.bytes")
        return self


def schema() -> dict[str, Any]:
    out = Calibration.model_json_schema()
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return out


# ------------------------------------------------------------------------------------------ validation

def _shown(value: Any) -> str:
    """A value as the file spells it, cut short (a hostile file may hold 4,000 digits or 1 MB of text)."""
    import json

    try:
        text = json.dumps(value, ensure_ascii=False) if isinstance(value, (bool, type(None), str)) else str(value)
    except ValueError:  # pragma: no cover - an int past the str() digit limit: refused by the reader first
        text = type(value).__name__
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text):,} characters)"


# pydantic's names for union members and wrapped validators, not the file's
_TAGS = ("str", "int", "bool", "float", "none", "constrained-str", "constrained-int")


def _said(err: Any) -> tuple[str, str]:
    """(where, what) of one pydantic error, in kvplan's words (pydantic's own wording changes between
    releases): ``settings.tp``, ``true is a boolean, not a number``."""
    from kvplan.errors import KvplanError
    from kvplan.safe_io import json_kind

    loc = [p for p in err["loc"] if not (isinstance(p, str) and (p in _TAGS or p.startswith(
        ("function-", "literal[", "nullable[", "union[", "constrained-"))))]
    where = ".".join(str(p) if len(str(p)) <= 40 else str(p)[:30] + "..." for p in loc) or "the file"
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, KvplanError):  # the model's own rule (Calibration._possible)
        return cause.field or where, cause.message
    shown = _shown(value)
    if isinstance(value, bool) and kind in ("int_type", "int_parsing", "float_type", "float_parsing",
                                            "literal_error", "string_type"):
        return where, f"{shown} is a boolean, not {'a number' if kind != 'string_type' else 'text'}"
    limits = {"greater_than": "more than {gt}", "greater_than_equal": "at least {ge}",
              "less_than": "less than {lt}", "less_than_equal": "at most {le}"}
    if kind in limits:
        bound = limits[kind].format(**{k: f"{v:,}" if isinstance(v, int) else f"{v:g}" if isinstance(v, float)
                                       else v for k, v in ctx.items()})
        return where, f"{shown} must be {bound}"
    said = {
        "int_type": f"{shown} is not a whole number", "int_from_float": f"{shown} is not a whole number",
        "int_parsing": f"{shown} is not a whole number", "float_type": f"{shown} is not a number",
        "float_parsing": f"{shown} is not a number", "bool_type": f"{shown} is not true or false",
        "bool_parsing": f"{shown} is not true or false", "string_type": f"{shown} is not text",
        "string_too_short": "must not be empty",
        "string_too_long": f"longer than {ctx.get('max_length', 0):,} characters",
        "too_long": f"more than {ctx.get('max_length', 0):,} entries",
        "literal_error": f"{shown} is not one of {ctx.get('expected', '?')}",
        "extra_forbidden": "not a field of a calibration file (kvplan schema calibration)",
        "missing": "missing (a calibration file names it)",
        "model_type": f"expected a mapping, got {json_kind(value)}",
        "model_attributes_type": f"expected a mapping, got {json_kind(value)}",
        "dict_type": f"expected a mapping, got {json_kind(value)}",
        "list_type": f"expected a list, got {json_kind(value)}",
    }
    return where, said.get(kind, str(err.get("msg", kind)).removeprefix("Value error, "))


def validate(data: Any, where: str, *, field: str | None = "calibration") -> Calibration:
    """A Calibration from untrusted data (a loaded file, or what ``from_log`` gathered), strictly: a boolean is
    not a number, ``"8"`` is not 8, 1.5 is not a whole number; the first problem is one UsageError
    ``{where}: {field path}: {what}`` with ``field`` (the library parameter: ``calibration``)."""
    import json

    from kvplan.errors import UsageError
    from kvplan.safe_io import json_kind

    def not_json(value: Any) -> Any:  # YAML's dates, sets, binary: not a value a calibration holds
        raise UsageError(f"{where}: {_shown(value)} ({type(value).__name__}) is not a value a calibration holds",
                         field=field)

    if not isinstance(data, dict):
        raise UsageError(f"{where}: a calibration file is a YAML mapping (engine, model, measured, ...), "
                         f"not {json_kind(data) if data is not None else 'an empty file'}", field=field)
    try:  # as JSON, strictly (kvplan.sources.yaml_spec.validate_spec does the same for model specs)
        text = json.dumps(data, default=not_json, allow_nan=False)
    except ValueError as exc:
        if isinstance(exc, UsageError):
            raise
        raise UsageError(f"{where}: NaN or infinity in a calibration", field=field) from None
    try:
        return Calibration.model_validate_json(text, strict=True)
    except ValidationError as exc:
        at, what = _said(exc.errors()[0])
        raise UsageError(f"{where}: {at}: {what}", field=field) from None


def from_log(log: ParsedLog, *, source: str | None = None, model: str | None = None, tp: int | None = None,
             pp: int | None = None, engine_version: str | None = None) -> Calibration:
    """The measured items of a parsed log (flags name what the log lacks).

    Whatever a file ``load`` would refuse is refused here, before anything is written: a UsageError whose
    field is ``save`` (``--save``) and whose message names the calibration's field (``settings.max_num_seqs``),
    or ``tp`` / ``pp`` where those were given.
    """
    from kvplan.errors import UsageError

    for name, given in (("tp", tp), ("pp", pp)):  # 0 is refused by name, never read as "not given"
        if given is not None and not 1 <= given <= MAX_RANKS:
            raise UsageError(f"{given} must be at least 1" if given < 1 else f"{given:,} is more than {MAX_RANKS:,}",
                             field=name)
    if log.engine is None:
        raise UsageError("not a start-up log kvplan reads: nothing to save")
    s = log.settings
    model = model or s.model
    if model is None:
        raise UsageError("the log names no model: pass --model to save a calibration")
    measured = {name: {"bytes": v.bytes, "step_bytes": v.step_bytes, "logged": v.text, "derived": name in log.derived}
                for name, v in log.memory.items() if name in (*MEMORY_ITEMS, "free_after_weights")}
    if not measured:
        raise UsageError("the log holds no memory item to save")
    total = log.memory.get("total")
    from kvplan.logs.compare import version_of

    version, note = version_of(log)
    notes = list(log.notes) + ([note] if note and not engine_version else [])
    # the notes are kvplan's own words: shortened to fit the file, never a reason to refuse it
    notes = [n if len(n) <= MAX_NOTE else n[:MAX_NOTE - 3] + "..." for n in notes[:MAX_NOTES]]
    data = {
        "kvplan_calibration": FORMAT_VERSION, "engine": log.engine, "engine_version": engine_version or version,
        "model": model,
        "gpu": {"name": s.gpu_name, "total_bytes": total.bytes if total and total.bytes > 0 else None,
                "total_step_bytes": total.step_bytes if total else None},
        "settings": {"tp": tp if tp is not None else (s.tp or 1), "pp": pp if pp is not None else (s.pp or 1),
                     "dtype": s.dtype, "kv_dtype": s.kv_dtype, "max_model_len": s.max_model_len,
                     "gpu_memory_utilization": s.gpu_memory_utilization, "mem_fraction_static": s.mem_fraction_static,
                     "max_num_batched_tokens": s.max_num_batched_tokens, "max_num_seqs": s.max_num_seqs,
                     "enforce_eager": s.enforce_eager, "vllm_sampler": s.vllm_sampler},
        "measured": measured, "num_gpu_blocks": log.num_gpu_blocks, "kv_cache_tokens": log.kv_cache_tokens,
        "source": {"file": source, "format": log.format}, "notes": notes,
    }
    try:
        return validate(data, "the log", field="save")
    except UsageError as exc:
        raise UsageError(f"{exc.message} (nothing saved)", field=exc.field) from None


def dump(cal: Calibration) -> str:
    """The file ``kvplan log --save`` writes; read back through ``load``'s own checks first, so that a file
    written is a file ``max-batch`` and ``check`` take (a UsageError, field ``save``, otherwise)."""
    import yaml

    from kvplan.errors import UsageError

    head = ("# kvplan calibration: measured items of one deployment (kvplan log --save); "
            "schema: kvplan schema calibration\n")
    text = head + yaml.safe_dump(cal.model_dump(mode="json", exclude_none=True), sort_keys=False)
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:  # pragma: no cover - every field is bounded far below
        raise UsageError(f"the calibration would be more than the {MAX_FILE_BYTES >> 20} MiB kvplan reads back "
                         "(nothing saved)", field="save")
    if parse(text, "the calibration to save") != cal:  # pragma: no cover - a YAML round trip that changed a value
        raise UsageError("the calibration does not read back as written (nothing saved)", field="save")
    return text


def parse(text: str, where: str) -> Calibration:
    """A Calibration from the text of a calibration file, with the bounded YAML reader (kvplan.safe_io)."""
    from kvplan.errors import KvplanError, UsageError
    from kvplan.safe_io import load_yaml

    try:
        data = load_yaml(text, where)
    except KvplanError as exc:  # its message names ``where`` already
        raise UsageError(exc.message, field="calibration") from None
    return validate(data, where)


def load(path: str | os.PathLike[str]) -> Calibration:
    """The calibration file at ``path``: a regular file of at most 1 MiB (no device, pipe or directory), YAML
    within kvplan's depth, alias and integer-length limits, and values a start-up can log. Every problem is
    one UsageError naming the file and the field, ``field="calibration"``."""
    from kvplan.errors import KvplanError, UsageError
    from kvplan.safe_io import read_text

    where = os.fspath(path)
    try:
        text = read_text(where, limit=MAX_FILE_BYTES)
    except KvplanError as exc:  # "PATH: a named pipe: kvplan reads only regular files", "... more than 1 MiB ..."
        raise UsageError(exc.message, field="calibration") from None
    return parse(text, where)


# ------------------------------------------------------------------------------ which deployment

def _short(name: str) -> str:
    """The model a name or path stands for, as kvplan names a model read from a path
    (``kvplan.sources.resolve.load_path``): a directory's name, a config file's directory
    (``/models/Llama-3.1-8B/config.json`` is Llama-3.1-8B, not config.json); a Hub id's repository name."""
    parts = [p for p in re.split(r"[/\\]", name.strip()) if p not in ("", ".")]
    if not parts:
        return name.strip().lower()
    last = parts[-1]
    if last.lower().endswith(".json"):  # a config file: the model is its directory
        last = parts[-2] if len(parts) > 1 else last[:-5]
    return last.lower()


def _names(model: str) -> set[str]:
    """``_short`` of a name, and of the path it resolves to where it names a file or directory here
    (``./config.json`` run inside the model's directory)."""
    names = {_short(model)}
    if len(model) <= 4096 and os.path.exists(model):
        names.add(_short(os.path.abspath(model)))
    return names


def _major_minor(text: str | None) -> tuple[int, ...] | None:
    m = re.match(r"^v?(\d+)\.(\d+)", (text or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def mismatch(cal: Calibration, *, model_id: str, engine: str, engine_version: str, gpu_total: int, tp: int,
             pp: int, model_arg: str | None = None) -> str | None:
    """Why the calibration does not describe this deployment (None: it does).

    ``model_arg``: the model as the user named it (a path), compared as well as the id kvplan gave it."""
    if cal.engine != engine:
        return f"measured on {cal.engine}, not {engine}"
    here = _names(model_id) | (_names(model_arg) if model_arg else set())
    if not _names(cal.model) & here:
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
