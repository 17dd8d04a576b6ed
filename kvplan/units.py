"""Parsing and formatting of counts and byte sizes.

Counts (``--context``, ``--batch``): ``8192``, ``8k`` (k = 1024, as context lengths are quoted),
``1k,4k,32k``, ``1k..128k`` (doubling), ``1k..8k:1k`` (step). Bytes are always printed with binary
units (GiB = 2^30 B); a bare "GB" is never printed.
"""

from __future__ import annotations

from _collections_abc import Iterable  # collections.abc's own module: no import of collections
from itertools import islice
from operator import lt

from kvplan.errors import UsageError

_COUNT_SUFFIX = {"": 1, "k": 1 << 10, "m": 1 << 20}
MAX_SWEEP_POINTS = 10_000_000
MAX_COUNT = 1 << 40
_MAX_TEXT = 10_000  # characters of one count list: far beyond any sweep a person types


def _field(what: str) -> str:
    """The library parameter name (``max_model_len``) for a name given either way."""
    return what.lstrip("-").replace("-", "_")


def parse_count(text: str, what: str) -> int:
    """One count: ``8192``, ``8k`` (k = 1024), ``1m``. ``what`` names the parameter (``field``)."""
    field = _field(what)
    raw = text.strip().lower()
    suffix = raw[-1:] if raw[-1:] in ("k", "m") else ""
    number = raw[: len(raw) - len(suffix)]
    if len(number) > 20:  # int() of thousands of digits is slow and never a count
        raise UsageError(f"'{text[:40]}...' is not a count (examples: 4096, 4k, 1k..128k)", field=field)
    try:
        value = float(number) * _COUNT_SUFFIX[suffix] if "." in number else int(number) * _COUNT_SUFFIX[suffix]
    except (ValueError, OverflowError):
        raise UsageError(f"'{text}' is not a count (examples: 4096, 4k, 1k..128k)", field=field) from None
    if value != value or value in (float("inf"), float("-inf")) or value != int(value):
        raise UsageError(f"'{text}' is not a whole number of tokens", field=field)
    value = int(value)
    if value <= 0:
        raise UsageError(f"{text} must be positive", field=field)
    if value > MAX_COUNT:
        raise UsageError(f"{text} is absurdly large", field=field)
    return value


def parse_count_list(text: str, what: str) -> list[int]:
    """'1,8,32' / '4k' / '1k..128k' (doubling) / '1k..8k:1k' (step), in the order given, repeats dropped."""
    field = _field(what)
    if len(text) > _MAX_TEXT:
        raise UsageError(f"a list of {len(text):,} characters is too long", field=field)
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise UsageError(f"empty item in '{text}'", field=field)
        if ".." in part:
            values.extend(_parse_range(part, field))
        else:
            values.append(parse_count(part, field))
        if len(values) > MAX_SWEEP_POINTS:
            raise UsageError(f"more than {MAX_SWEEP_POINTS:,} values", field=field)
    return _unique(values)


def _unique(values: list[int]) -> list[int]:
    """``values`` without repeats, in order; a rising list (any one range) as it is, with no set of it built
    (a sweep of 10^6 points would hold one)."""
    if all(map(lt, values, islice(values, 1, None))):  # map, not a generator: a 10^5-point sweep is checked twice
        return values
    return list(dict.fromkeys(values))


def parse_counts(value: int | str | Iterable[int | str], field: str) -> list[int]:
    """Counts as a program or a person gives them, for the library's ``contexts=`` / ``batches=``.

    ``8192``, ``"8k"`` (k = 1024), ``"1k..8k"`` (doubling), ``"1k..8k:1k"`` (step), ``"1,8,32"``, or a
    list / tuple / range of those; repeats are dropped, the order kept. Anything else (a bool, a float,
    zero, a negative, an empty list) raises ``UsageError(field=field)``.
    """
    if isinstance(value, str):
        return parse_count_list(value, field)
    if isinstance(value, int) and not isinstance(value, bool):
        return [_positive(value, field)]
    if isinstance(value, (bytes, dict)) or not isinstance(value, Iterable):
        raise UsageError(f"expected a count, a text such as '1k..8k' or a list of those, got "
                         f"{type(value).__name__}", field=field)
    if isinstance(value, (list, tuple, range)) and 0 < len(value) <= MAX_SWEEP_POINTS and \
            set(map(type, value)) == {int} and min(value) > 0 and max(value) <= MAX_COUNT:
        return _unique(list(value))  # a sweep the CLI parsed already: checked whole, not item by item
    values: list[int] = []
    for item in value:
        if isinstance(item, str):
            values.extend(parse_count_list(item, field))
        elif isinstance(item, int) and not isinstance(item, bool):
            values.append(_positive(item, field))
        else:
            raise UsageError(f"{item!r} is not a count (an int or a text such as '8k')", field=field)
        if len(values) > MAX_SWEEP_POINTS:
            raise UsageError(f"more than {MAX_SWEEP_POINTS:,} values", field=field)
    if not values:
        raise UsageError("needs at least one value", field=field)
    return list(dict.fromkeys(values))


def _positive(value: int, field: str) -> int:
    if value <= 0:
        raise UsageError(f"{value} must be positive", field=field)
    if value > MAX_COUNT:
        raise UsageError(f"{value} is absurdly large", field=field)
    return value


def _parse_range(part: str, field: str) -> list[int]:
    lo_text, _, rest = part.partition("..")
    hi_text, _, step_text = rest.partition(":")
    lo, hi = parse_count(lo_text, field), parse_count(hi_text, field)
    if hi < lo:
        raise UsageError(f"range '{part}' runs backwards", field=field)
    if step_text:
        step = parse_count(step_text, field)
        if (hi - lo) // step + 1 > MAX_SWEEP_POINTS:
            raise UsageError(f"range '{part}' has more than {MAX_SWEEP_POINTS:,} values", field=field)
        return list(range(lo, hi + 1, step))
    values, v = [], lo
    while v <= hi:
        values.append(v)
        v *= 2
    if values[-1] != hi:
        values.append(hi)
    return values


def parse_name_list(text: str, what: str) -> list[str]:
    names = [p.strip() for p in text.split(",")]
    if not all(names):
        raise UsageError(f"empty item in '{text}'", field=_field(what))
    return names


_BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def format_bytes(n: int | float, digits: int = 2) -> str:
    """Binary units: '4.00 GiB', '512.00 MiB', '896 B'."""
    for unit, size in _BINARY:
        if abs(n) >= size:
            return f"{n / size:.{digits}f} {unit}"
    return f"{int(n)} B"


def format_bytes_many(values: Iterable[int]) -> list[str]:
    """``format_bytes`` of each of ``values`` (digits 2): a sweep's column at once, the unit picked by comparisons
    in one expression; anything but an int of 0 or more goes to ``format_bytes`` itself."""
    tib, gib, mib, kib = (size for _, size in _BINARY)
    return [("%.2f TiB" % (n / tib) if n >= tib else "%.2f GiB" % (n / gib) if n >= gib else
             "%.2f MiB" % (n / mib) if n >= mib else "%.2f KiB" % (n / kib) if n >= kib else "%d B" % n)
            if type(n) is int and n >= 0 else format_bytes(n) for n in values]


def format_count(n: int) -> str:
    """Token counts as people write them: 8k, 128k, 1000 stays 1,000."""
    if n >= 1024 and n % 1024 == 0:
        k = n // 1024
        return f"{k // 1024}M" if k % 1024 == 0 else f"{k}k"
    return f"{n:,}"
