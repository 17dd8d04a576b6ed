"""The model specs shipped with kvplan (``model_specs/``), found by Hub id, alias or bare name.

Files are named ``<org>__<name>.yaml`` after the Hub id. ``bundle.json`` holds the same specs as
plain data plus an index of every id and alias (lower-cased) to ``[file, id as published]``, so a
lookup parses one JSON file and never imports yaml (a fifth of kvplan's start-up time).
``tools/build_specs.py`` writes both; a test checks they are up to date and agree.
"""

from __future__ import annotations

import os
TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.jsontext import loads, quote, scan
from kvplan.record import once
from kvplan.spec import ModelSpec

if TYPE_CHECKING:
    from pathlib import Path

BUNDLE_NAME = "bundle.json"


def specs_dir() -> Path:
    """``kvplan/model_specs`` in an installed wheel, ``model_specs/`` at the top of a checkout."""
    from pathlib import Path

    return Path(_specs_dir())


@once
def _specs_dir() -> str:
    # os.path rather than pathlib: this runs on every start and pathlib's import costs ~10 ms
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    packaged = os.path.join(here, "model_specs")
    if os.path.isdir(packaged):
        return packaged
    return os.path.join(os.path.dirname(here), "model_specs")


def spec_file(name: str) -> str:
    """The path of ``name`` in the bundled specs' directory (a string: no pathlib at start-up)."""
    return os.path.join(_specs_dir(), name)


@once
def _text() -> str:
    try:
        with open(os.path.join(_specs_dir(), BUNDLE_NAME), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


@once
def _bundle() -> dict:
    text = _text()
    return loads(text) if text else {"index": {}, "specs": {}}


_HEAD, _SPECS = '{"index":', ',"specs":{'
"""How ``tools/build_specs.py`` writes the bundle (compact separators): the index, then the specs by file name."""


@once
def _index_and_specs() -> tuple[dict[str, list[str]], int]:
    """The index, read alone, and where the specs' object opens in the text (-1: the whole bundle is read). A
    lookup reads the index and its one spec, not the other specs (about 1.3 ms of every start)."""
    text = _text()
    if text.startswith(_HEAD):
        index, end = scan(text, len(_HEAD))
        if type(index) is dict and text.startswith(_SPECS, end):
            return index, end + len(_SPECS)
    return _bundle()["index"], -1


def _spec_data(file: str) -> dict:
    """The bundled data of ``file``: the value of its key in the specs' object. A spec holds field names as keys,
    never a file name, and a string followed by ':' is a key, so the first ``"<file>":`` after the specs' opening
    is that key (tests/test_bundled_specs.py reads every spec both ways)."""
    _, at = _index_and_specs()
    if at >= 0:
        key = quote(file) + ":"
        found = _text().find(key, at)
        if found >= 0:
            data, _ = scan(_text(), found + len(key))
            return data  # type: ignore[no-any-return]
    return _bundle()["specs"][file]  # type: ignore[no-any-return]


def index() -> dict[str, list[str]]:
    return _index_and_specs()[0]


def load_bundled(name: str) -> ModelSpec | None:
    """The bundled spec ``name`` designates; an alias gets its own id and a note saying whose spec it is."""
    found = index().get(name.strip().lower())
    if found is None:
        return None
    file, display = found
    from kvplan.sources.yaml_spec import spec_from_trusted_dict

    spec = spec_from_trusted_dict(_spec_data(file), os.path.join(_specs_dir(), file))
    if display != spec.id:
        from kvplan.record import replace

        note = f"{display} has the same architecture as {spec.id}: kvplan uses that bundled spec"
        spec = replace(spec, id=display, assumptions=(*spec.assumptions, note))
    return spec


def bundled_ids() -> list[str]:
    """Ids of the bundled specs (not their aliases), sorted."""
    return sorted({display for key, (file, display) in index().items()
                   if file == display.replace("/", "__") + ".yaml"})


def build_bundle(directory: Path) -> dict:
    """The content of bundle.json for the YAML specs in ``directory``."""
    from kvplan.sources.yaml_spec import read_yaml_file

    specs = {path.name: read_yaml_file(path) for path in sorted(directory.glob("*.yaml"))}
    return {"index": build_index(specs), "specs": specs}


def build_index(specs: dict[str, dict]) -> dict[str, list[str]]:
    """Map ids, aliases and unambiguous bare names (lower-case) to [file, id as published]."""
    keys: dict[str, list[str]] = {}
    bare: dict[str, list[list[str]]] = {}
    for file, data in specs.items():
        base = os.path.basename(file)
        for name in [data["id"], *data.get("aliases", [])]:
            key = name.lower()
            if key in keys and keys[key][0] != base:
                raise ValueError(f"{name} is claimed by {keys[key][0]} and {base}")
            keys[key] = [base, name]
            bare.setdefault(key.rsplit("/", 1)[-1], []).append([base, name])
    for short, targets in bare.items():
        if len(targets) == 1 and short not in keys:
            keys[short] = targets[0]
    return dict(sorted(keys.items()))


_SIZE = r"(?<![a-z0-9.])(\d+(?:\.\d+)?)b(?![a-z0-9])"
"""A parameter count in a model id: '30b' in 'qwen3-coder-30b-a3b' (not the active 'a3b', not '8x7b')."""


def close_bundled(name: str, n: int = 3) -> list[str]:
    """Up to ``n`` bundled models close to ``name`` (for 'did you mean'): each named once, as its id is
    spelled, the closest first. Where ``name`` states a size (30B), models of another size are left out:
    a 480B model is no answer to a 30B one."""
    import difflib
    import re

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
