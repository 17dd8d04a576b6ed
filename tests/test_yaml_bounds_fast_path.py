"""kvplan.safe_io skips its event pass over YAML that provably keeps every bound (``within_bounds``); what a
file reads as, and the error a bad file gets, must be the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan import safe_io
from kvplan.deploy.yaml_lines import load_all
from kvplan.safe_io import MAX_DEPTH, YamlInputError, load_yaml_all, within_bounds

REPO = Path(__file__).resolve().parent.parent

TEXTS = [
    "a: 1\nb: [1, 2, {c: d}]\n",
    "- - - x\n- y\n",
    "a: 2024-01-02\n---\nb: [1, 2\n",           # a syntax error after a valid document
    "a: 2024-13-45\n---\nb: [1, 2\n",           # a date that cannot be built, then a syntax error
    "a: 2024-13-45\n---\nb: 1\n",               # a date that cannot be built
    "a: b: c\n",
    "key: 'unterminated\n",
    "\t- tab\n",
    "--- \n...\n--- x\n",
    "",
    "# only a comment\n",
    "a: !!python/object:os.system x\n",
    "a: {b: [c, {d: e}]}\n" * 3,
    "[" * 40 + "]" * 40 + "\n",
    "x:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 60)) + "  " * 60 + "v\n",
    "a: " + "9" * 5000 + "\n",
    "k: 1_000_000\nf: 1e3\nn: null\nt: yes\n",
]


def _lines(data):
    """The line numbers kvplan.deploy.yaml_lines records, through the whole document."""
    if isinstance(data, dict):
        return (getattr(data, "line", None), getattr(data, "lines", None), [_lines(v) for v in data.values()])
    if isinstance(data, list):
        return (getattr(data, "line", None), getattr(data, "lines", None), [_lines(v) for v in data])
    return None


def _both(text: str, construct, monkeypatch) -> tuple[object, object]:
    def run():
        try:
            docs = load_yaml_all(text, "f.yaml", construct=construct)
            return ("ok", docs, [_lines(d) for d, _ in docs])
        except YamlInputError as exc:
            return ("error", str(exc), exc.line)

    fast = run()
    monkeypatch.setattr(safe_io, "within_bounds", lambda _text: False)
    slow = run()
    monkeypatch.undo()
    return fast, slow


@pytest.mark.parametrize("text", TEXTS + [p.read_text() for p in sorted((REPO / "examples").rglob("*.y*ml"))])
def test_the_same_data_or_error_with_or_without_the_event_pass(text, monkeypatch):
    from kvplan.deploy.yaml_lines import _convert

    for construct in (None, _convert):
        fast, slow = _both(text, construct, monkeypatch)
        assert fast == slow


def test_line_numbers_are_kept_on_the_fast_path():
    (data, first), = load_all("a:\n  b: 1\n  c: [x, y]\n", "f.yaml")
    assert first == 1 and data.line == 1 and data.lines == {"a": 2} and data["a"].lines == {"b": 2, "c": 3}


def test_what_may_break_a_bound_takes_the_event_pass():
    assert within_bounds("a: 1\nb: [c, d]\n")
    assert not within_bounds("a: &x [1]\nb: *x\n")
    assert not within_bounds("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert not within_bounds("- " * MAX_DEPTH + "x\n")
    assert not within_bounds("a: 1\n" * 5000)  # longer than the longest number Python converts
    with pytest.raises(YamlInputError, match="nested more than"):
        load_yaml_all("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "f.yaml")
