"""What a Hub model id and a revision look like."""

from __future__ import annotations

import re

from kvplan.errors import UsageError

HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")


def looks_like_hub_id(name: str) -> bool:
    """``org/name`` (or a bare ``name``): what the Hub accepts as a model id."""
    return bool(HUB_ID.match(name)) and "--" not in name and ".." not in name and not name.endswith(".")


def split_revision(name: str) -> tuple[str, str | None]:
    """``org/name@rev`` -> (``org/name``, ``rev``); without ``@``, (name, None)."""
    repo, at, rev = name.partition("@")
    if not at:
        return name, None
    if not rev:
        raise UsageError(f"'{name}': nothing after '@' (expected org/name@revision)")
    return repo, rev
