"""Engine versions: the release whose rules apply, as a tuple of ints."""

from __future__ import annotations

from kvplan.errors import UsageError

Version = tuple[int, ...]
# 'latest' / 'current': newer than every numbered release, so every ">= since" rule applies.
LATEST: Version = (1_000_000,)
_MAX_PARTS = 3
_MAX_PART = 10_000


_PARSED: dict[str, Version] = {}
"""Releases parsed so far (every plan parses its engine's release: ``kvplan check`` makes thousands)."""


def parse_version(text: str) -> Version:
    """'0.33', 'v0.33.1', '4.57' -> (0, 33), (0, 33, 1), (4, 57); 'latest' / 'current' -> LATEST.

    Refuses what cannot be a release: empty text, more than three parts, all zeros, huge parts."""
    found = _PARSED.get(text) if type(text) is str else None
    if found is None:
        found = _parse_version(text)
        if type(text) is str and len(_PARSED) < 4096:
            _PARSED[text] = found
    return found


def _parse_version(text: str) -> Version:
    cleaned = text.strip()
    if cleaned.lower() in ("latest", "current"):
        return LATEST
    bad = UsageError(f"'{text}' is not a version number like 0.33 or 4.57", field="engine_version")
    cleaned = cleaned.lstrip("vV")
    try:
        parts = tuple(int(p) for p in cleaned.split("."))
    except ValueError:
        raise bad from None
    if not parts or len(parts) > _MAX_PARTS or not any(parts) or any(not 0 <= p < _MAX_PART for p in parts):
        raise bad
    return parts


def render_version(version: Version) -> str:
    return "latest" if version == LATEST else ".".join(map(str, version))


def unstated_version(title: str, given: str | None, chosen: str) -> list[str]:
    """The note owed when no release was given: the rules of ``chosen`` are an assumption, and they move."""
    if given is not None:
        return []
    return [f"{title} release not given: {chosen} rules assumed (the engine's default in kvplan; pass "
            "--engine-version for the release you run: block sizes, scheduling and budgets differ by release)"]


def newer_than_known(title: str, version: Version, newest: Version) -> list[str]:
    """The note kvplan owes when asked for a release newer than the rules it knows."""
    if version == LATEST or version <= newest:
        return []
    return [f"{title} {render_version(version)} is newer than the newest rules kvplan knows "
            f"({render_version(newest)}): those rules are used"]
