"""kvplan's bundled data files (``kvplan/data/``): edited as YAML, read at start-up as their JSON twins.

``tools/build_data.py`` writes ``gpus.json`` from ``gpus.yaml`` (and ``links.json`` from ``links.yaml``);
tests/test_data_json.py checks each twin loads as exactly what its YAML does. Reading the twin keeps yaml
out of every command that only looks up a GPU (importing yaml and parsing the catalog: ~20 ms a start).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

# os.path, not pathlib: this is on every command's start-up path
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

JSON_TWINS = tuple(os.path.join(DATA_DIR, name) for name in ("gpus.yaml", "links.yaml"))
"""The bundled YAML files that have a JSON twin beside them."""


def json_twin_path(yaml_path: str | os.PathLike[str]) -> str:
    return os.path.splitext(os.fspath(yaml_path))[0] + ".json"


def render_json(data: Any) -> str:
    """The text of a twin: stable (key order as in the YAML), a final newline."""
    import json

    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def read_bundled(yaml_path: str | os.PathLike[str]) -> Any:
    """The data of the bundled ``yaml_path``, read from its JSON twin (from the YAML where no twin was built)."""
    try:
        with open(json_twin_path(yaml_path), encoding="utf-8") as f:
            from kvplan.jsontext import loads

            return loads(f.read())
    except FileNotFoundError:
        from kvplan.safe_io import read_yaml

        return read_yaml(yaml_path)
