"""kvplan.safe_io tells the tag of common plain scalars by their shape (``_plain_tag``: words, digits, a decimal,
a word after ``-``) instead of PyYAML's resolver patterns, which a check used to compile on every start; where it
answers, its answer must be the resolver's (PyYAML's pure-Python safe resolver is the judge)."""

from __future__ import annotations

import random
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan import safe_io

WORDS = ["yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON",
         "off", "Off", "OFF", "null", "Null", "NULL", "~", "", "y", "n", "nO", "tRue", "nil", "none", "~x", "0", "00",
         "07", "08", "0755", "0789", "0x1F", "0b101", "1_000", "1:30", "190:20:30", "2024-01-01", "2024-1-1 1:2:3",
         ".5", "1.", "1.5", "1.5e+3", "1.2.3", "1e3", "-1", "+1", "-.5", "+.inf", "-.INF", ".nan", "-", "+", "--max",
         "-x", "+x", "-_", "<<", "=", "!", "&", "*", "8k", "0.9", "0.95", "v0.10.2", "4096", "١٢", "²", "8k", "32Gi", "10%", "../a.yaml", "1e", "0xfg", "12:30:00",
         "2001-12-14t21:59:43.10-05:00", "2002-12-14", "-.inf", ".Inf", "+12_3", "0b2", "1__2.3_4"]
ALPHABET = "0123456789.-+_:eExXbBoOnNyYtTfFlLuUsSaAiIcCdDkKgGZzvVhHmM~ \t\n<=!&*%/١'\"é"


def _resolver_tag(value: str) -> str:
    return yaml.SafeLoader("").resolve(yaml.ScalarNode, value, (True, False))


def _judge(value: str) -> None:
    fast = safe_io._plain_tag(value)
    if fast is not None:
        assert fast == _resolver_tag(value), value


@pytest.mark.parametrize("value", WORDS + [w + "\n" for w in WORDS])
def test_plain_tags_are_the_resolvers(value: str) -> None:
    _judge(value)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=8))
def test_random_plain_scalars_get_the_resolvers_tag(value: str) -> None:
    _judge(value)


def test_the_shapes_are_answered_without_the_resolver() -> None:
    """The common scalars of deployment files whose first character opens a resolver pattern are answered by shape
    (else the patterns are compiled again; a word like `vllm` opens none and the resolver answers it at once)."""
    for value in ("yes", "null", "", "4096", "0755", "0.9", "-x", "true", "n"):
        assert safe_io._plain_tag(value) is not None, value
    rng = random.Random(7)
    for _ in range(2000):  # words of letters that open no resolver: left to the resolver's own cheap answer or ours
        value = "".join(rng.choice("abcdeghijklmpqrsuvwxz") for _ in range(rng.randint(1, 6)))
        _judge(value)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=8), st.sampled_from([(True, False), (False, True), (False, False)]))
def test_the_loaders_tags_are_the_resolvers(value: str, implicit: tuple[bool, bool]) -> None:
    """What kvplan's loader answers for a scalar, plain or quoted (``'...'``: not implicit), asked twice (the second
    from its memory), is the pure-Python safe resolver's answer."""
    loader = safe_io.yaml_loader_class()("")
    try:
        for _ in range(2):
            assert loader.resolve(yaml.ScalarNode, value, implicit) == \
                yaml.SafeLoader("").resolve(yaml.ScalarNode, value, implicit), (value, implicit)
    finally:
        loader.dispose()


def test_only_pyyamls_own_resolvers_take_the_shortcut() -> None:
    assert safe_io._standard_resolvers(yaml.SafeLoader)

    class Extended(yaml.SafeLoader):
        pass

    Extended.add_implicit_resolver("tag:example.com,2026:version", re.compile(r"^v[0-9]"), list("v"))
    assert not safe_io._standard_resolvers(Extended)
