"""The launch-command reader's small patterns, matched by hand (no pattern compiled on a check's start): each helper
answers as the regular expression it stands for, on chosen and random words."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.deploy import flags

TEXT = st.text(alphabet="aZ_9=/.-pythonPY3 \t\r\n'\"\\#;&|$é", max_size=14)
WORDS = ["A=1", "_x=", "a1=b=c", "1a=2", "=x", "a-b=1", "é=1", "A=1\n", "A\n=1", "python", "python3.11", "/usr/bin/python3",
         "./python", "py", "pythonx", "python3\n", "a\n/python", "x/python3/y", "", "/"]


@settings(max_examples=1500, deadline=None)
@given(TEXT)
def test_assignment_splits_as_the_pattern(word: str) -> None:
    m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", word, re.S)
    assert flags._assignment(word) == (m.groups() if m else None)


@settings(max_examples=1500, deadline=None)
@given(TEXT)
def test_python_is_told_as_the_pattern_tells_it(word: str) -> None:
    assert flags._is_python(word) == bool(re.match(r"^(.*/)?python[0-9.]*$", word))


def test_chosen_words() -> None:
    for word in WORDS:
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", word, re.S)
        assert flags._assignment(word) == (m.groups() if m else None), word
        assert flags._is_python(word) == bool(re.match(r"^(.*/)?python[0-9.]*$", word)), word


@settings(max_examples=1500, deadline=None)
@given(TEXT, st.integers(min_value=0, max_value=16))
def test_first_of_finds_what_a_search_finds(line: str, start: int) -> None:
    for chars, pattern in (("'\"\\#", r"['\"\\#]"), ('"\\', r'["\\]')):
        m = re.compile(pattern).search(line, start)
        assert flags._first_of(line, chars, start) == (m.start() if m else -1)


@settings(max_examples=1500, deadline=None)
@given(TEXT)
def test_plain_lines_split_as_on_shlex_blanks(text: str) -> None:
    words = flags._split_words(text)
    if re.fullmatch(r"[^'\"\\#;&|]*", text):
        assert words == [w for w in re.split(r"[ \t\r\n]+", text) if w]
