"""The model specs shipped with kvplan (``model_specs/``), found by Hub id, alias or bare name.

Files are named ``<org>__<name>.yaml`` after the Hub id; ``index.json`` maps every id and alias
(lower-cased) to its file, so a lookup reads one small JSON file and one YAML file.
``python -m kvplan.sources.bundled`` rewrites the index after specs change (a test checks it).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from kvplan.spec import ModelSpec

INDEX_NAME = "index.json"


def specs_dir() -> Path:
    """``kvplan/model_specs`` in an installed wheel, ``model_specs/`` at the top of a checkout."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "model_specs"
    if packaged.is_dir():
        return packaged
    return here.parent / "model_specs"


@lru_cache(maxsize=1)
def index() -> dict[str, str]:
    path = specs_dir() / INDEX_NAME
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def find_file(name: str) -> Path | None:
    key = name.strip().lower()
    file = index().get(key)
    return specs_dir() / file if file else None


def load_bundled(name: str) -> ModelSpec | None:
    path = find_file(name)
    if path is None:
        return None
    from kvplan.sources.yaml_spec import read_yaml_file, spec_from_trusted_dict

    return spec_from_trusted_dict(read_yaml_file(path), str(path))


def bundled_ids() -> list[str]:
    """Canonical ids of the bundled specs (file names), sorted."""
    return sorted({file.removesuffix(".yaml").replace("__", "/") for file in index().values()})


def build_index(directory: Path) -> dict[str, str]:
    """Map ids, aliases and unambiguous bare names (all lower-case) to spec files."""
    from kvplan.sources.yaml_spec import read_yaml_file

    keys: dict[str, str] = {}
    bare: dict[str, set[str]] = {}
    for path in sorted(directory.glob("*.yaml")):
        data = read_yaml_file(path)
        names = [data["id"], *data.get("aliases", [])]
        for name in names:
            key = name.lower()
            if key in keys and keys[key] != path.name:
                raise ValueError(f"{name} is claimed by {keys[key]} and {path.name}")
            keys[key] = path.name
            bare.setdefault(key.rsplit("/", 1)[-1], set()).add(path.name)
    for short, files in bare.items():
        if len(files) == 1 and short not in keys:
            keys[short] = next(iter(files))
    return dict(sorted(keys.items()))


def write_index(directory: Path | None = None) -> Path:
    directory = directory or specs_dir()
    path = directory / INDEX_NAME
    path.write_text(json.dumps(build_index(directory), indent=1) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write_index())
