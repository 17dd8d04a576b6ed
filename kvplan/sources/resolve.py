"""Turn a MODEL argument into a ModelSpec: an existing path, then a bundled spec, then the Hub."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kvplan.errors import NotFoundError, UsageError
from kvplan.spec import ModelSpec

if TYPE_CHECKING:
    from pathlib import Path

_YAML_SUFFIXES = (".yaml", ".yml")


def load_model(name: str, *, revision: str | None = None, hub: bool = False) -> ModelSpec:
    """Resolve ``name``: a config.json / model directory / YAML spec path, then a bundled model, then
    a model on the Hugging Face Hub (``org/name``). ``hub`` skips the bundled specs; a ``revision``
    (or ``org/name@rev``) implies the Hub. The Hub code (and huggingface_hub) is imported only then.
    """
    expanded = os.path.expanduser(name)
    if os.path.exists(expanded):  # os.path, not pathlib: a bundled lookup must not pay for pathlib's import
        if hub or revision is not None:
            raise UsageError(f"{name} is a local path: the Hub and its revisions apply to Hub model ids only",
                             field="hub" if hub else "revision")
        from pathlib import Path

        return load_path(Path(expanded))
    repo, at_rev = name, None
    if "@" in name and not _looks_like_path(name):
        from kvplan.sources.hub import split_revision

        repo, at_rev = split_revision(name)
        if revision is not None and revision != at_rev:
            raise UsageError(f"'{name}' names revision '{at_rev}', and revision '{revision}' is given too: give one",
                             field="revision")
        revision = at_rev
    if not hub and revision is None:
        from kvplan.sources.bundled import load_bundled

        spec = load_bundled(name)
        if spec is not None:
            return spec
    if hub or revision is not None or ("/" in repo and not _looks_like_path(repo)):
        from kvplan.sources.hub import load_hub_model, looks_like_hub_id

        if looks_like_hub_id(repo):
            return load_hub_model(repo, revision, fallback=not hub and revision is None)
        if hub or revision is not None:
            raise UsageError(f"'{repo}' is not a Hugging Face Hub model id (expected org/name)")
    raise NotFoundError(_not_found_message(name))


def load_path(path: Path) -> ModelSpec:
    if path.is_file() and path.suffix.lower() in _YAML_SUFFIXES:
        from kvplan.sources.yaml_spec import load_user_spec

        return load_user_spec(path)
    from kvplan.errors import ConfigError
    from kvplan.sources.hf_config import read_config_file, spec_from_config

    config = read_config_file(path)
    model_id = path.name if path.is_dir() else (path.parent.name or path.stem)
    try:
        return spec_from_config(config, model_id=model_id, source=str(path))
    except ConfigError as exc:  # name the file: the reader only knows the fields
        raise ConfigError(f"{path}: {exc}") from None


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.endswith((".json", ".yaml", ".yml")) or "\\" in name


_SIZE = r"(?<![a-z0-9.])(\d+(?:\.\d+)?)b(?![a-z0-9])"
"""A parameter count in a model id: '30b' in 'qwen3-coder-30b-a3b' (not the active 'a3b', not '8x7b')."""


def close_bundled(name: str, n: int = 3) -> list[str]:
    """Up to ``n`` bundled models close to ``name`` (for 'did you mean'): each named once, as its id is
    spelled, the closest first. Where ``name`` states a size (30B), models of another size are left out:
    a 480B model is no answer to a 30B one."""
    import difflib
    import re

    from kvplan.sources.bundled import index

    query = name.strip().lower()
    tail = query.rpartition("/")[2]
    sizes = set(re.findall(_SIZE, query))
    best: dict[str, float] = {}
    for key, (_, display) in index().items():
        score = max(difflib.SequenceMatcher(None, query, key).ratio(),
                    difflib.SequenceMatcher(None, tail, key.rpartition("/")[2]).ratio() - 0.05)
        if score < 0.6:
            continue
        if key.rpartition("/")[2].startswith(tail):  # what was typed, completed: the likeliest meaning
            score += 0.1
        theirs = set(re.findall(_SIZE, key))
        if sizes and theirs and not sizes & theirs:
            continue
        best[display] = max(score, best.get(display, 0.0))
    return sorted(best, key=lambda display: (-best[display], display))[:n]


def _not_found_message(name: str) -> str:
    if "/" in name and _looks_like_path(name):
        return f"no such file: {name}"
    close = close_bundled(name)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (f"'{name}' is not a file or a bundled model{hint} "
            "(pass a config.json, a model directory or a YAML spec; `kvplan models` lists the bundled ones)")
