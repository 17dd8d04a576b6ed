"""Pinned models in a ``--specs`` directory: YAML specs and model directories holding a ``config.json``.

A model directory is named as the Hub names the model, so that ``kvplan check`` finds it by the deployment's
model id without the network:

- ``DIR/<org>__<name>/config.json`` (the ``org__name`` spelling of tests/data/hf_configs and aiconfigurator)
- ``DIR/<org>/<name>/config.json`` (the Hub's own path)
- ``DIR/<name>/config.json`` for an id without an organisation (``gpt2``)

Beside ``config.json`` the directory may hold ``model.safetensors.index.json`` and the safetensors files:
their headers (or the index's ``metadata.total_size``) give the exact weights, as for ``kvplan spec DIR``
(``kvplan.sources.resolve.load_path``). Only these two levels are looked at (a checkpoint's subfolders, such
as a diffusers ``text_encoder/config.json``, name no deployment's model). A directory is read when a
deployment names its model, so a broken one fails that deployment only.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

import os

from kvplan.errors import UsageError

CONFIG_NAME = "config.json"
MAX_ENTRIES = 100_000
"""Directory entries looked at in a --specs directory (two levels): a pinned-spec folder holds a few dozen."""


class PinnedSpecs(dict):  # type: ignore[type-arg]
    """Specs by lower-case id (``get`` as a dict's); a model directory becomes a spec on first ``get``."""

    def __init__(self) -> None:
        super().__init__()
        self.dirs: dict[str, tuple[str, str]] = {}
        """lower-case id -> (id as the directory spells it, the directory)"""

    def get(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        found = self.dirs.pop(key, None) if isinstance(key, str) else None
        if found is None:
            return default
        spec = load_dir(*found)
        self[key] = spec
        return spec


def load_dir(model_id: str, directory: str) -> Any:
    """The spec of a pinned model directory, its id the one its path gives."""
    from kvplan.record import replace
    from pathlib import Path

    from kvplan.sources.resolve import load_path

    return replace(load_path(Path(directory)), id=model_id)


def config_dirs(root: str) -> dict[str, tuple[str, str]]:
    """The model directories under ``root`` (see the module doc): lower-case id -> (id, directory). Two
    directories naming one id are refused (UsageError naming --specs): kvplan does not pick one."""
    found: dict[str, tuple[str, str]] = {}
    budget = [MAX_ENTRIES]

    def listing(path: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(path) as it:
                entries = []
                for entry in it:
                    budget[0] -= 1
                    if budget[0] < 0:
                        raise UsageError(f"{root}: more than {MAX_ENTRIES:,} entries in two levels: not a folder of "
                                         "pinned specs", field="specs")
                    entries.append(entry)
                return entries
        except OSError:  # unreadable: no model directory there
            return []

    def add(model_id: str, directory: str) -> None:
        key = model_id.lower()
        if key in found and found[key][1] != directory:
            raise UsageError(f"{found[key][1]} and {directory} both pin model '{model_id}': keep one",
                             field="specs")
        found[key] = (model_id, directory)

    def is_config(directory: str) -> bool:
        return os.path.isfile(os.path.join(directory, CONFIG_NAME))

    for first in sorted(listing(root), key=lambda e: e.name):
        if first.name.startswith(".") or not first.is_dir():
            continue
        if is_config(first.path):
            # org__name is the Hub's org/name; a plain name is an id without an organisation
            add(first.name.replace("__", "/", 1), first.path)
            continue
        for second in sorted(listing(first.path), key=lambda e: e.name):
            if not second.name.startswith(".") and second.is_dir() and is_config(second.path):
                add(f"{first.name}/{second.name}", second.path)
    return found
