"""The pydantic-free reader of user model specs (kvplan/sources/spec_fast.py) against pydantic's strict validation
(kvplan/sources/yaml_spec.py), which defines the format: its tables are the JSON schema pydantic makes of the spec
classes, and whatever it accepts pydantic accepts as the same spec (types included: 8 is not 8.0). What it is not
sure of it leaves to pydantic (None), so a refusal and its wording are always pydantic's."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from conftest import REPO
from kvplan.sources import spec_fast
from kvplan.sources.yaml_spec import spec_adapter, validate_spec
from kvplan.spec import KINDS

ADAPTER = spec_adapter()  # built once: a TypeAdapter costs milliseconds
SCHEMA = ADAPTER.json_schema()
SPECS = sorted([*(REPO / "model_specs").glob("*.yaml"), *(REPO / "examples" / "specs").glob("*.yaml")])
_READERS = {spec_fast._str: {"type": "string"}, spec_fast._positive: {"type": "integer", "exclusiveMinimum": 0},
            spec_fast._non_negative: {"type": "integer", "minimum": 0}, spec_fast._number: {"type": "number"},
            spec_fast._dtype: {"type": "string", "enum": ["float32", "bfloat16", "float16"]},
            spec_fast._rope: {"$ref": "#/$defs/RopeScaling"}}


def _expected(read: Any) -> dict[str, Any]:
    if read in _READERS:
        return _READERS[read]
    item = read.__closure__[0].cell_contents  # _tuple_of(item)
    if item is spec_fast._layer:
        return {"type": "array", "items": "one of the kinds"}
    return {"type": "array", "items": _READERS[item]}


def _fragment(prop: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(the schema of a field's value, whether null is allowed), without words and defaults."""
    parts = prop.get("anyOf", [prop])
    value = [p for p in parts if p.get("type") != "null"]
    assert len(value) == 1
    out = {k: v for k, v in value[0].items() if k not in ("description", "title", "default")}
    if "items" in out and "oneOf" in out["items"]:
        out["items"] = "one of the kinds"
    return out, len(parts) > len(value)


def _check_table(table: dict[str, spec_fast.Field], definition: dict[str, Any]) -> None:
    props = definition["properties"]
    assert list(table) == list(props)
    assert {k for k, (_, _, required) in table.items() if required} == set(definition.get("required", []))
    assert definition["additionalProperties"] is False
    for key, (read, optional, _) in table.items():
        fragment, nullable = _fragment(props[key])
        assert optional == nullable, key
        if key == "kind":
            assert read is spec_fast._str and fragment["type"] == "string" and "const" in fragment
        else:
            assert _expected(read) == fragment, key


def test_the_tables_are_pydantics_schema() -> None:
    defs = SCHEMA["$defs"]
    _check_table(spec_fast.SPEC, SCHEMA)
    _check_table(spec_fast.ROPE, defs["RopeScaling"])
    assert set(spec_fast.LAYERS) == set(KINDS)
    for kind, cls in KINDS.items():
        _check_table(spec_fast.LAYERS[kind], defs[cls.__name__])
        assert defs[cls.__name__]["properties"]["kind"]["const"] == kind


def _slow(data: Any) -> Any:
    try:
        return ADAPTER.validate_json(json.dumps(data, allow_nan=False), strict=True)
    except ValidationError:
        return None


def _agree(data: Any) -> bool:
    """The fast reader's answer is pydantic's (where it gives one); True when it gave one."""
    fast, slow = spec_fast.read(data), _slow(data)
    if slow is None:
        assert fast is None, data
    elif fast is not None:
        assert repr(fast) == repr(slow) and fast == slow and type(fast) is type(slow), data
        assert [type(g) for g in fast.layers] == [type(g) for g in slow.layers]
    return fast is not None


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_every_bundled_and_example_spec_is_read_without_pydantic(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    assert _agree(data)
    assert validate_spec(data, str(path)) == _slow(data)


BASE = {"id": "m", "model_type": "llama", "layers": [{"kind": "full", "kv_heads": 8, "head_dim": 128}]}
LAYER_BASE = {"full": {"kv_heads": 8, "head_dim": 128}, "sliding": {"kv_heads": 8, "head_dim": 128, "window": 4096},
              "chunked": {"kv_heads": 8, "head_dim": 128, "chunk": 8192},
              "mla": {"kv_lora_rank": 512, "qk_rope_head_dim": 64}, "shared": {"shares_with": 0},
              "recurrent": {"conv_dim": 8192, "conv_kernel": 4, "ssm_state": [64, 128]}, "none": {}}
PROBES = [0, 1, 2, -1, 8, 2**31, 2**60, 2**70, 1 << 20, (1 << 20) + 1, 0.0, 1.0, 8.5, -2.5, True, False, None, "",
          "8", "full", "bfloat16", "float8", "llama", "é", "\ud800", [], [1], [0], [64, 128], ["a"], [1.0], {},
          {"type": "yarn"}, {"type": "yarn", "factor": 8}, {"kind": "full"}]


@pytest.mark.parametrize("where", ["spec", "rope", *LAYER_BASE])
def test_every_field_and_probe_value_agree(where: str) -> None:
    """Each field set to each probe value (right, wrong, of a near type) in a spec otherwise valid, and each field
    left out: the fast reader agrees wherever it answers, and answers for some."""
    table = spec_fast.SPEC if where == "spec" else spec_fast.ROPE if where == "rope" else spec_fast.LAYERS[where]
    answered = 0
    for key in table:
        for value in [*PROBES, "drop"]:
            data = copy.deepcopy(BASE)
            if where == "spec":
                target = data
            elif where == "rope":
                target = data["rope_scaling"] = {"type": "yarn", "factor": 4.0}
            else:
                target = {"kind": where, **copy.deepcopy(LAYER_BASE[where])}
                data["layers"].append(target)  # after a full layer: a shared layer reads an earlier one
            if value == "drop":
                target.pop(key, None)
            else:
                target[key] = value
            answered += _agree(data)
    assert answered >= len(table)


def test_unknown_keys_and_non_json_values_are_left_to_pydantic() -> None:
    assert spec_fast.read(BASE | {"bogus": 1}) is None
    assert spec_fast.read(BASE | {1: 2}) is None
    assert spec_fast.read(BASE | {"aliases": ("a",)}) is None  # not a JSON array: pydantic's call
    assert spec_fast.read(BASE) is not None


@st.composite
def _changed_spec(draw: st.DrawFn) -> dict[str, Any]:
    """A bundled spec with one to three values replaced by a probe or left out, at any depth."""
    data = yaml.safe_load(draw(st.sampled_from(SPECS)).read_text())
    for _ in range(draw(st.integers(1, 3))):
        target = data
        if draw(st.booleans()) and isinstance(data.get("layers"), list) and data["layers"]:
            target = draw(st.sampled_from(data["layers"]))
            if not isinstance(target, dict):
                continue
        key = draw(st.sampled_from(sorted({*target, "bogus", "count", "v_head_dim", "rope_scaling"})))
        if key in target and draw(st.integers(0, 3)) == 0:
            del target[key]
        else:
            target[key] = draw(st.sampled_from(PROBES))
    return data


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_changed_spec())
def test_changed_bundled_specs_agree(data: dict[str, Any]) -> None:
    _agree(data)
