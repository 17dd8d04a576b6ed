"""Parsing and formatting of counts and byte sizes.

Counts (``--context``, ``--batch``): ``8192``, ``8k`` (k = 1024, as context lengths are quoted),
``1k,4k,32k``, ``1k..128k`` (doubling), ``1k..8k:1k`` (step). Bytes are always printed with binary
units (GiB = 2^30 B); a bare "GB" is never printed.
"""

from __future__ import annotations

from kvplan.errors import UsageError

_COUNT_SUFFIX = {"": 1, "k": 1 << 10, "m": 1 << 20}
MAX_SWEEP_POINTS = 10_000_000
MAX_COUNT = 1 << 40


def parse_count(text: str, what: str) -> int:
    raw = text.strip().lower()
    suffix = raw[-1:] if raw[-1:] in ("k", "m") else ""
    number = raw[: len(raw) - len(suffix)]
    try:
        value = float(number) * _COUNT_SUFFIX[suffix] if "." in number else int(number) * _COUNT_SUFFIX[suffix]
    except ValueError:
        raise UsageError(f"--{what}: '{text}' is not a count (examples: 4096, 4k, 1k..128k)") from None
    if value != int(value):
        raise UsageError(f"--{what}: '{text}' is not a whole number of tokens")
    value = int(value)
    if value <= 0:
        raise UsageError(f"--{what}: {text} must be positive")
    if value > MAX_COUNT:
        raise UsageError(f"--{what}: {text} is absurdly large")
    return value


def parse_count_list(text: str, what: str) -> list[int]:
    """'1,8,32' / '4k' / '1k..128k' (doubling) / '1k..8k:1k' (step), in the order given."""
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise UsageError(f"--{what}: empty item in '{text}'")
        if ".." in part:
            values.extend(_parse_range(part, what))
        else:
            values.append(parse_count(part, what))
        if len(values) > MAX_SWEEP_POINTS:
            raise UsageError(f"--{what}: more than {MAX_SWEEP_POINTS:,} values")
    return list(dict.fromkeys(values))


def _parse_range(part: str, what: str) -> list[int]:
    lo_text, _, rest = part.partition("..")
    hi_text, _, step_text = rest.partition(":")
    lo, hi = parse_count(lo_text, what), parse_count(hi_text, what)
    if hi < lo:
        raise UsageError(f"--{what}: range '{part}' runs backwards")
    if step_text:
        step = parse_count(step_text, what)
        if (hi - lo) // step + 1 > MAX_SWEEP_POINTS:
            raise UsageError(f"--{what}: range '{part}' has more than {MAX_SWEEP_POINTS:,} values")
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
        raise UsageError(f"--{what}: empty item in '{text}'")
    return names


_BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def format_bytes(n: int | float, digits: int = 2) -> str:
    """Binary units: '4.00 GiB', '512.00 MiB', '896 B'."""
    for unit, size in _BINARY:
        if abs(n) >= size:
            return f"{n / size:.{digits}f} {unit}"
    return f"{int(n)} B"


def format_count(n: int) -> str:
    """Token counts as people write them: 8k, 128k, 1000 stays 1,000."""
    if n >= 1024 and n % 1024 == 0:
        k = n // 1024
        return f"{k // 1024}M" if k % 1024 == 0 else f"{k}k"
    return f"{n:,}"
