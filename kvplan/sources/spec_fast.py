"""A user's model spec (a pinned YAML file, an inline ``model.spec``) validated without pydantic where it is valid.

pydantic (``yaml_spec.validate_spec``: ``TypeAdapter(ModelSpec)``, strict, from JSON) defines what a spec may hold
and words every problem; importing it costs ~185 ms, most of ``kvplan check`` on a folder with one pinned spec.
This reader takes only what strict validation takes as it is (a JSON value of the field's type within its bounds,
no unknown key) and builds the spec from it, as the bundled specs are built; on anything else, and on a value the
classes themselves refuse (``__post_init__``), it answers None and pydantic validates. tests/test_spec_fast.py
holds its tables to the JSON schema pydantic makes of the classes, and its answers to pydantic's.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from collections.abc import Callable

from kvplan.errors import KvplanError
from kvplan.spec import KINDS, ModelSpec, RopeScaling


class _Refused(Exception):
    """Not sure that strict validation takes it: pydantic decides."""


def _str(value: Any) -> str:
    if type(value) is not str or (not value.isascii() and not _utf8(value)):  # lone surrogates: pydantic's call
        raise _Refused
    return value


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _positive(value: Any) -> int:
    if type(value) is not int or value <= 0:
        raise _Refused
    return value


def _non_negative(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise _Refused
    return value


def _number(value: Any) -> float:
    # strict JSON takes an integer for a float; one beyond 2**53 would round: pydantic's call
    if type(value) is float or (type(value) is int and -(1 << 53) <= value <= 1 << 53):
        return float(value)
    raise _Refused


def _tuple_of(item: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:
    def read(value: Any) -> tuple[Any, ...]:
        if type(value) is not list:  # a JSON array
            raise _Refused
        return tuple(item(v) for v in value)
    return read


def _dtype(value: Any) -> str:
    if type(value) is not str or value not in ("float32", "bfloat16", "float16"):
        raise _Refused
    return value


def _rope(value: Any) -> RopeScaling:
    return RopeScaling(**_fields(value, ROPE))


def _layer(value: Any) -> Any:
    kind = value.get("kind") if isinstance(value, dict) else None
    table = LAYERS.get(kind) if type(kind) is str else None
    if table is None:
        raise _Refused
    return KINDS[kind](**_fields(value, table))


# field: (reader, None allowed, required); the classes' defaults fill what a spec leaves out
if TYPE_CHECKING:  # an alias for type checkers only (typing is not imported at run time)
    Field = tuple[Callable[[Any], Any], bool, bool]
_KV = {"kv_heads": (_positive, False, True), "head_dim": (_positive, False, True),
       "v_head_dim": (_positive, True, False)}
LAYERS: dict[str, dict[str, Field]] = {
    "full": _KV,
    "sliding": _KV | {"window": (_positive, False, True)},
    "chunked": _KV | {"chunk": (_positive, False, True)},
    "mla": {"v_head_dim": (_positive, True, False), "kv_lora_rank": (_positive, False, True),
            "qk_rope_head_dim": (_positive, False, True), "qk_nope_head_dim": (_positive, True, False),
            "num_heads": (_positive, True, False)},
    "recurrent": {"mixer": (_str, True, False), "conv_dim": (_positive, False, True),
                  "conv_kernel": (_positive, False, True), "ssm_state": (_tuple_of(_positive), False, True)},
    "shared": {"shares_with": (_non_negative, False, True)},
    "none": {},
}
for _kind, _table in LAYERS.items():  # every kind: its tag and its count first, as the classes list them
    LAYERS[_kind] = {"kind": (_str, False, True), "count": (_positive, False, False), **_table}
ROPE: dict[str, Field] = {"type": (_str, False, True), "factor": (_number, True, False),
                          "original_max_position_embeddings": (_positive, True, False),
                          "extends_to": (_positive, True, False)}
_SIZE: Field = (_positive, True, False)
SPEC: dict[str, Field] = {
    "id": (_str, False, True), "model_type": (_str, False, True), "layers": (_tuple_of(_layer), False, True),
    "dtype": (_dtype, False, False), "source": (_str, True, False), "revision": (_str, True, False),
    "max_position_embeddings": _SIZE, "rope_scaling": (_rope, True, False), "num_attention_heads": _SIZE,
    "hidden_size": _SIZE, "vocab_size": _SIZE, "mlp_width": _SIZE, "num_experts": _SIZE,
    "experts_per_token": _SIZE, "routed_expert_params": _SIZE, "mtp_layers": (_non_negative, False, False),
    "params": _SIZE, "weights_bytes": _SIZE, "mtp_weights_bytes": (_non_negative, True, False),
    "expert_weights_bytes": (_non_negative, True, False), "weights_dtype": (_str, True, False),
    "weights_source": (_str, True, False), "aliases": (_tuple_of(_str), False, False),
    "assumptions": (_tuple_of(_str), False, False),
}


def _fields(data: Any, table: dict[str, Field]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _Refused
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = table.get(key) if type(key) is str else None
        if field is None:  # unknown (extra="forbid"), or a key JSON would turn into a text
            raise _Refused
        read, optional, _ = field
        out[key] = None if value is None and optional else read(value)
    if any(required and key not in out for key, (_, _, required) in table.items()):
        raise _Refused
    return out


def read(data: Any) -> ModelSpec | None:
    """The spec strict validation makes of ``data``, or None where this reader is not sure it takes it."""
    try:
        return ModelSpec(**_fields(data, SPEC))
    except (_Refused, KvplanError):  # a class's own check (SpecError): pydantic words it
        return None
