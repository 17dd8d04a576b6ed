"""JSON read and written as the standard ``json`` module does, byte for byte, without importing it.

``import json`` imports ``re`` and compiles its patterns (about 9 ms of a 2-core machine's start, half of what a
plain ``kvplan estimate -f json`` spends beyond Python's own start). The work itself is done by the C halves that
``json`` wraps (``_json``: the scanner, the encoder, the string quoting); only the indented writer is Python, as in
``json``. Whatever falls outside the plain cases (a value that is not str, int, float, bool, None, list, tuple or
dict, a key that is not text, a subclass, text that is not one valid JSON document) goes to ``json`` itself, so
results, errors and their words are json's (tests/test_jsontext.py holds both to the same bytes).
"""

from __future__ import annotations

try:
    from _json import encode_basestring_ascii as quote
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner
except ImportError:  # a Python without json's C half (json then runs in Python too): json itself
    from json.encoder import encode_basestring_ascii as quote  # type: ignore[assignment]

    _make_encoder = _make_scanner = None

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["c_encoder", "dumps", "dumps_checked", "dumps_indented", "encoder", "loads", "quote", "scan"]

_WHITESPACE = " \t\n\r"  # json.decoder's WHITESPACE


class _Context:
    """What the C scanner reads from ``json.JSONDecoder()``: its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_scan = None if _make_scanner is None else _make_scanner(_Context())


def loads(text: str) -> Any:
    """``json.loads(text)`` for a str."""
    start = len(text) - len(text.lstrip(_WHITESPACE))
    if _scan is not None and not text.startswith("\ufeff"):
        try:
            value, end = _scan(text, start)
        except StopIteration:
            pass
        else:
            if end == len(text) or not text[end:].strip(_WHITESPACE):
                return value
    import json  # not one valid document: json's own error, in its words

    return json.loads(text)


def scan(text: str, at: int) -> tuple[Any, int]:
    """The JSON value that starts at ``text[at]`` and the index just past it (json's scanner: ``raw_decode`` without
    the whitespace skip); ValueError where none starts there."""
    if _scan is None:
        import json

        try:
            return json.JSONDecoder().raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise ValueError(f"no JSON value at {at}") from exc
    try:
        return _scan(text, at)  # type: ignore[no-any-return]
    except StopIteration:
        raise ValueError(f"no JSON value at {at}") from None


def _default(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")  # JSONEncoder.default's


_ENCODERS: dict[tuple[str, str], Any] = {}


def encoder(item_separator: str = ", ", key_separator: str = ": ") -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(item_separator, key_separator)).encode`` (no indent: the C encoder)."""
    key = (item_separator, key_separator)
    made = _ENCODERS.get(key)
    if made is None and _make_encoder is None:
        import json

        made = _ENCODERS[key] = json.JSONEncoder(separators=(item_separator, key_separator)).encode
    if made is None:
        c_encode = _make_encoder({}, _default, quote, None, key_separator, item_separator, False, False, True)

        def made(value: Any) -> str:
            if isinstance(value, str):
                return quote(value)
            return "".join(c_encode(value, 0))

        _ENCODERS[key] = made
    return made


def c_encoder(item_separator: str, key_separator: str = ": ") -> Any:
    """The C encoder with these separators, no check for circular references: ``(value, 0)`` -> its chunks (None
    where this Python has no C encoder)."""
    if _make_encoder is None:
        return None
    return _make_encoder(None, _default, quote, None, key_separator, item_separator, False, False, True)


def dumps(value: Any) -> str:
    """``json.dumps(value)``."""
    return encoder()(value)


def dumps_checked(value: Any, default: Callable[[Any], Any]) -> str:
    """``json.dumps(value, default=default, allow_nan=False)``: the same C encoder with the same arguments (a
    NaN or infinity is json's ValueError, a circular reference too; ``default`` is called for what is not JSON)."""
    if _make_encoder is None:
        import json

        return json.dumps(value, default=default, allow_nan=False)
    if isinstance(value, str):
        return quote(value)  # type: ignore[no-any-return]
    return "".join(_make_encoder({}, default, quote, None, ": ", ", ", False, False, False)(value, 0))


class _Unusual(Exception):
    """A value the indented writer leaves to ``json``."""


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == float("-inf"):
        return "-Infinity"
    return float.__repr__(value)


def dumps_indented(value: Any) -> str:
    """``json.dumps(value, indent=2)``."""
    parts: list[str] = []
    try:
        _indented(value, "\n", parts.append)
    except (_Unusual, RecursionError):
        import json

        return json.dumps(value, indent=2)
    return "".join(parts)


def _indented(value: Any, newline: str, put: Callable[[str], object]) -> None:
    kind = type(value)
    if kind is str:
        put(quote(value))
    elif value is None:
        put("null")
    elif value is True:
        put("true")
    elif value is False:
        put("false")
    elif kind is int:
        put(int.__repr__(value))
    elif kind is float:
        put(_float(value))
    elif kind is list or kind is tuple:
        if not value:
            put("[]")
            return
        inner = newline + "  "
        put("[" + inner)
        first = True
        for item in value:
            if not first:
                put("," + inner)
            first = False
            _indented(item, inner, put)
        put(newline + "]")
    elif kind is dict:
        if not value:
            put("{}")
            return
        inner = newline + "  "
        put("{" + inner)
        first = True
        for key, item in value.items():
            if type(key) is not str:
                raise _Unusual
            put((quote(key) if first else "," + inner + quote(key)) + ": ")
            first = False
            _indented(item, inner, put)
        put(newline + "}")
    else:
        raise _Unusual
