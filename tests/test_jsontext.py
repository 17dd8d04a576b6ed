"""``kvplan.jsontext`` reads and writes JSON as the standard ``json`` module does, byte for byte (it wraps the same C
scanner and encoder without importing ``json`` and ``re`` at start-up): here both are run on kvplan's bundled data,
on awkward values and on random documents, and must agree, errors included."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from kvplan import jsontext

BUNDLED = ["model_specs/bundle.json", "model_specs/models.json", "kvplan/data/gpus.json", "kvplan/data/links.json",
           "kvplan/engines/vllm/budget_error.json"]


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_data_reads_and_writes_as_json_does(name: str) -> None:
    text = (REPO / name).read_text(encoding="utf-8")
    data = jsontext.loads(text)
    assert data == json.loads(text)
    assert jsontext.dumps_indented(data) == json.dumps(data, indent=2)
    assert jsontext.dumps(data) == json.dumps(data)
    assert jsontext.encoder(",\n    ", ": ")(data) == json.JSONEncoder(separators=(",\n    ", ": ")).encode(data)


ODD = [1.5, -0.0, 1e300, float("nan"), float("inf"), -float("inf"), [], {}, (), "", "x\u00e9\n\"\\\x00\U0001f600",
       {"a": {}, "b": [[]], "c": (1, 2.0, None, True, False)}, {1: 2}, {None: 1, 2.5: "x", True: 0},
       [{"k": [1, {"z": 3}]}], 2 ** 100, True, None]


@pytest.mark.parametrize("value", ODD, ids=repr)
def test_odd_values_are_written_as_json_writes_them(value: object) -> None:
    assert jsontext.dumps_indented(value) == json.dumps(value, indent=2)
    assert jsontext.dumps(value) == json.dumps(value)


class _Text(str):
    pass


def test_what_json_refuses_is_refused_in_its_words() -> None:
    circular: list[object] = []
    circular.append(circular)
    for value in ({"a": object()}, [1, {1j}], {(1, 2): 3}, circular):
        with pytest.raises((TypeError, ValueError)) as ours:
            jsontext.dumps_indented(value)
        with pytest.raises(type(ours.value)) as theirs:
            json.dumps(value, indent=2)
        assert str(ours.value) == str(theirs.value)
    assert jsontext.dumps_indented({"k": _Text("v")}) == json.dumps({"k": _Text("v")}, indent=2)


@pytest.mark.parametrize("text", ["", "  ", "[1,", "{} x", "\ufeff{}", "nan", "[NaN, Infinity, -Infinity]", " [1] \n",
                                  "\"\\ud800\"", "{\"a\": 1, \"a\": 2}", "[1e400, -0, 0.1]", "\"\x01\""])
def test_text_reads_as_json_reads_it(text: str) -> None:
    def outcome(read: object) -> tuple[object, str]:
        try:
            value = read(text)  # type: ignore[operator]
        except ValueError as exc:
            return type(exc), str(exc)
        return "value", json.dumps(value)

    assert outcome(jsontext.loads) == outcome(json.loads)


SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
DOCS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                                            max_size=4), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(DOCS)
def test_random_documents(doc: object) -> None:
    text = json.dumps(doc, indent=2)
    assert jsontext.dumps_indented(doc) == text
    assert jsontext.dumps(doc) == json.dumps(doc)
    back = jsontext.loads(text)
    assert json.dumps(back) == json.dumps(json.loads(text))
    assert jsontext.encoder(",\n ", ": ")(doc) == json.JSONEncoder(separators=(",\n ", ": ")).encode(doc)


def _checked_outcome(write: object, value: object) -> tuple[object, str]:
    try:
        return "text", write(value)  # type: ignore[operator]
    except (ValueError, TypeError, LookupError) as exc:
        return type(exc), str(exc)


def _refuse(value: object) -> object:
    raise LookupError(f"not JSON: {type(value).__name__}")


@settings(max_examples=200, deadline=None)
@given(DOCS | st.dictionaries(st.integers() | st.floats() | st.booleans() | st.none(), SCALARS, max_size=4)
       | st.lists(st.sets(st.integers(), max_size=2) | st.tuples(st.integers()) | SCALARS, max_size=4))
def test_checked_writer_writes_and_refuses_as_json_dumps(doc: object) -> None:
    """``dumps_checked`` (a model spec's check that it is JSON: no NaN, nothing unusual) is
    ``json.dumps(default=..., allow_nan=False)``: the same text, the same refusals (NaN, infinities, sets)."""
    expected = _checked_outcome(lambda v: json.dumps(v, default=_refuse, allow_nan=False), doc)
    assert _checked_outcome(lambda v: jsontext.dumps_checked(v, _refuse), doc) == expected


def test_checked_writer_refuses_a_circular_document_as_json_does() -> None:
    loop: list[object] = []
    loop.append(loop)
    expected = _checked_outcome(lambda v: json.dumps(v, default=_refuse, allow_nan=False), loop)
    assert _checked_outcome(lambda v: jsontext.dumps_checked(v, _refuse), loop) == expected
    assert expected[0] is ValueError
