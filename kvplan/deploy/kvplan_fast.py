"""The kvplan deployment file read without pydantic, for the files it accepts as they are.

``kvplan check`` over a folder holding one deployment file paid ~185 ms to import pydantic and build the models of
``kvplan.deploy.kvplan_models``, which stay the definition of the format. This reader takes only inputs it is sure
those models accept (values of their exact type, within their bounds) and returns what they would make of them;
anything else (a wrong type, a value out of range, an unknown key, a value pydantic would convert, such as ``"3"``
for a count) gets ``None``, and the caller validates with pydantic, whose findings name the problem. So accept /
refuse and every message stay pydantic's; tests/test_kvplan_fast.py holds this table to the models (fields,
defaults, bounds) and the reader to them on random valid and invalid files.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from collections.abc import Callable

from kvplan.engines import DEFAULT_ENGINE, PACKAGE_ENGINES


class Parsed:
    """One validated mapping: each field of its model as an attribute (defaults filled in), and the fields the
    file gave in ``model_fields_set``, as a pydantic model shows them."""

    def __init__(self, values: dict[str, Any], given: set[str]) -> None:
        self.__dict__.update(values)
        self.model_fields_set = given


class _Refused(Exception):
    """The input is not one this reader is sure of: pydantic decides (and words the problem)."""


def _int(value: Any) -> int:
    if type(value) is not int:  # bools, floats and texts are converted (or refused) by pydantic
        raise _Refused
    return value


def _float(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int and -(1 << 53) <= value <= 1 << 53:  # exact as a float
        return float(value)
    raise _Refused


def _str(value: Any) -> str:
    if type(value) is not str:
        raise _Refused
    return value


def _bool(value: Any) -> bool:
    if type(value) is not bool:  # pydantic's lax mode also reads "yes", 1, ...: it decides those
        raise _Refused
    return value


def _count(value: Any) -> int:
    if type(value) is str:
        from kvplan.units import parse_count

        try:
            return parse_count(value, "count")
        except ValueError:  # UsageError: pydantic words it
            raise _Refused from None
    return _int(value)


def _prefix_count(value: Any) -> int:
    if type(value) is str and value.strip() == "0":
        return 0
    return _count(value)


def _fraction(value: Any) -> float:
    if type(value) is str:
        text = value.strip()
        try:
            return float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            raise _Refused from None
    return _float(value)


def _one_of(*choices: Any) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if type(value) is not type(choices[0]) or value not in choices:
            raise _Refused
        return value
    return check


def _devices(value: Any) -> list[int | str]:
    if not isinstance(value, list) or not value:
        raise _Refused
    return [item if type(item) in (int, str) else _int(item) for item in value]


def _spec(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or any(type(key) is not str for key in value):
        raise _Refused
    return dict(value)  # pydantic's dict[str, Any] is a new plain dict of the same values


_engine_name = _one_of(*PACKAGE_ENGINES)
_MAX_HOST_GIB = 1 << 20

# field: (reader, None allowed, (ge, gt, le, lt), default); a default of ... is a required field
if TYPE_CHECKING:  # an alias for type checkers only (typing is not imported at run time)
    Field = tuple[Callable[[Any], Any], bool, tuple[Any, Any, Any, Any], Any]
_NO: tuple[Any, Any, Any, Any] = (None, None, None, None)
_GE1: tuple[Any, Any, Any, Any] = (1, None, None, None)
_UNIT: tuple[Any, Any, Any, Any] = (None, 0, 1, None)
_HOST: tuple[Any, Any, Any, Any] = (0, None, _MAX_HOST_GIB, None)

MODEL_REF: dict[str, Field] = {
    "id": (_str, True, _NO, None), "path": (_str, True, _NO, None), "spec": (_spec, True, _NO, None),
}
GPU: dict[str, Field] = {
    "type": (_str, True, _NO, None), "memory": (_str, True, _NO, None), "count": (_int, False, _GE1, 1),
    "devices": (_devices, True, _NO, None),
}
ENGINE: dict[str, Field] = {
    "name": (_engine_name, False, _NO, DEFAULT_ENGINE), "version": (_str, True, _NO, None),
    "tp": (_int, False, _GE1, 1), "pp": (_int, False, _GE1, 1), "dp": (_int, False, _GE1, 1),
    "max_model_len": (_count, True, _GE1, None), "max_num_seqs": (_int, True, _GE1, None),
    "gpu_memory_utilization": (_float, True, _UNIT, None), "kv_cache_dtype": (_str, False, _NO, "auto"),
    "max_num_batched_tokens": (_count, True, _GE1, None), "block_size": (_int, True, _GE1, None),
    "enforce_eager": (_bool, False, _NO, False), "mem_fraction_static": (_float, True, _UNIT, None),
    "free_gpu_memory_fraction": (_float, True, _UNIT, None), "kv_cache_memory": (_str, True, _NO, None),
    "weights_bytes": (_str, True, _NO, None), "kv_offloading_size": (_float, True, _HOST, None),
    "kv_offloading_backend": (_one_of("native", "lmcache"), True, _NO, None),
    "swap_space": (_float, True, _HOST, None), "cpu_offload_gb": (_float, True, _HOST, None),
    "enable_prefix_caching": (_bool, True, _NO, None), "enable_hierarchical_cache": (_bool, True, _NO, None),
    "hicache_ratio": (_float, True, (None, 0, 10**4, None), None),
    "hicache_size": (_int, True, (0, None, 10**6, None), None), "disable_radix_cache": (_bool, True, _NO, None),
}
REQUIREMENTS: dict[str, Field] = {
    "min_concurrency": (_int, True, _GE1, None), "at_context": (_count, True, _GE1, None),
    "min_context": (_count, True, _GE1, None), "headroom": (_fraction, True, (0, None, None, 1), None),
    "max_num_seqs_reachable": (_bool, False, _NO, False), "shared_prefix": (_prefix_count, True, (0, None, None, None), None),
    "n": (_int, True, _GE1, None),
}


def _within(value: Any, bounds: tuple[Any, Any, Any, Any]) -> bool:
    ge, gt, le, lt = bounds
    return ((ge is None or value >= ge) and (gt is None or value > gt)
            and (le is None or value <= le) and (lt is None or value < lt))


def _section(data: Any, table: dict[str, Field]) -> Parsed:
    if not isinstance(data, dict):
        raise _Refused
    values: dict[str, Any] = {}
    for key, raw in data.items():
        spec = table.get(key) if type(key) is str else None
        if spec is None:  # an unknown key (extra="forbid"): pydantic names it
            raise _Refused
        read, optional, bounds, _ = spec
        if raw is None and optional:
            values[key] = None
            continue
        value = read(raw)
        if not _within(value, bounds):
            raise _Refused
        values[key] = value
    given = set(values)
    for key, (_, _, _, default) in table.items():
        if key not in values:
            if default is ...:
                raise _Refused
            values[key] = default
    return Parsed(values, given)


def defaults(table: dict[str, Field], **values: Any) -> Parsed:
    """A section the file gave as one word (``gpu: L4``, ``engine: sglang``): its defaults and that value, with
    no field given (as pydantic's ``GpuSpec(type="L4")`` shows it to the reader)."""
    return Parsed({key: default for key, (_, _, _, default) in table.items()} | values, set())


def _deployment(data: Any) -> Parsed:
    if not isinstance(data, dict) or not set(data) <= {"name", "model", "gpu", "engine", "requirements"} \
            or not {"name", "model", "gpu"} <= set(data):
        raise _Refused
    name = _str(data["name"])
    if not name:
        raise _Refused
    model: str | Parsed = data["model"] if type(data["model"]) is str else _section(data["model"], MODEL_REF)
    if isinstance(model, Parsed) and sum(x is not None for x in (model.id, model.path, model.spec)) != 1:
        raise _Refused
    gpu: str | Parsed = data["gpu"] if type(data["gpu"]) is str else _section(data["gpu"], GPU)
    if isinstance(gpu, Parsed) and (gpu.type is None) == (gpu.memory is None):
        raise _Refused
    engine: str | Parsed = DEFAULT_ENGINE
    if "engine" in data:
        engine = data["engine"] if type(data["engine"]) is str else _section(data["engine"], ENGINE)
        if isinstance(engine, str):
            _engine_name(engine)
    requirements = _section(data["requirements"], REQUIREMENTS) if "requirements" in data \
        else defaults(REQUIREMENTS)
    values = {"name": name, "model": model, "gpu": gpu, "engine": engine, "requirements": requirements}
    return Parsed(values, set(data))


def read(data: Any) -> Parsed | None:
    """The file as the pydantic models would validate it (``DeploymentFile``), or None where this reader is not
    sure they accept it: pydantic decides."""
    try:
        if not isinstance(data, dict) or not set(data) <= {"version", "deployments"} or "deployments" not in data:
            raise _Refused
        if "version" in data:
            _one_of(1)(data["version"])
        deployments = data["deployments"]
        if not isinstance(deployments, list) or not deployments:
            raise _Refused
        return Parsed({"version": 1, "deployments": [_deployment(d) for d in deployments]}, set(data))
    except _Refused:
        return None
