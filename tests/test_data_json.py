"""The bundled data's JSON twins (kvplan/data/*.json, written by tools/build_data.py) hold exactly what
their YAML files load as: commands read the twins, people edit the YAML."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kvplan.data_files import JSON_TWINS, json_twin_path
from kvplan.hardware import _read_catalog, catalog_path, load_catalog
from kvplan.safe_io import read_yaml

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("yaml_path", JSON_TWINS, ids=lambda p: Path(p).name)
def test_each_json_twin_loads_as_its_yaml(yaml_path):
    twin = json.loads(Path(json_twin_path(yaml_path)).read_text(encoding="utf-8"))
    assert twin == read_yaml(yaml_path)
    assert twin == yaml.safe_load(Path(yaml_path).read_text(encoding="utf-8"))


def test_build_data_check_passes_on_the_checked_in_twins():
    done = subprocess.run([sys.executable, str(REPO / "tools" / "build_data.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_build_data_check_names_a_stale_twin(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import build_data
    finally:
        sys.path.remove(str(REPO / "tools"))
    yaml_path = tmp_path / "gpus.yaml"
    yaml_path.write_text("version: 1\ngpus: []\n")
    (tmp_path / "gpus.json").write_text('{"version": 1, "gpus": [{}]}\n')
    monkeypatch.setattr(build_data, "JSON_TWINS", (str(yaml_path),))
    monkeypatch.setattr(build_data, "REPO", tmp_path)
    monkeypatch.setattr(build_data, "MODEL_INDEX", tmp_path / "models.json")
    monkeypatch.setattr(build_data, "models_index", lambda: '{"models": []}\n')
    (tmp_path / "models.json").write_text('{"models": []}\n')
    assert build_data.main(["--check"]) == 1
    assert build_data.main([]) == 0
    assert build_data.main(["--check"]) == 0
    assert json.loads((tmp_path / "gpus.json").read_text()) == {"version": 1, "gpus": []}
    (tmp_path / "models.json").write_text('{"models": [{}]}\n')  # the index of `kvplan models`, stale
    assert build_data.main(["--check"]) == 1
    assert build_data.main([]) == 0 and json.loads((tmp_path / "models.json").read_text()) == {"models": []}


def test_the_models_index_holds_the_rows_computed_from_the_specs(monkeypatch, capsys):
    """model_specs/models.json (what ``kvplan models`` lists) is what loading and estimating every bundled spec
    gives today; without it, the command computes the same."""
    from kvplan.cli import main, models

    assert models.rows() == models.compute_rows(), "model_specs/models.json is stale: run python tools/build_data.py"
    for fmt in ("table", "json"):
        assert main(["models", "-f", fmt]) == 0
        indexed = capsys.readouterr().out
        monkeypatch.setattr(models, "INDEX", "no-such-index.json")
        assert main(["models", "-f", fmt]) == 0
        assert capsys.readouterr().out == indexed
        monkeypatch.undo()


def test_the_shipped_catalog_from_json_equals_the_catalog_from_yaml():
    from kvplan.hardware import GPU, _entry

    data = read_yaml(catalog_path())
    from_yaml = tuple(_entry(e, f"{catalog_path()}: gpus[{i}]", str(catalog_path())) for i, e in enumerate(data["gpus"]))
    assert load_catalog() == from_yaml
    assert [g.origin for g in load_catalog()] == [g.origin for g in from_yaml]
    assert all(isinstance(g, GPU) for g in _read_catalog(catalog_path()))
    # commands build the shipped GPUs without the user-facing checks (hardware._shipped_entry): these hold that
    # reading to the fully validated one, value for value and type for type (an int tflops prints unlike a float)
    validated = _read_catalog(catalog_path(), validate=True)
    assert load_catalog() == validated == from_yaml
    assert [repr(g) for g in load_catalog()] == [repr(g) for g in validated] == [repr(g) for g in from_yaml]
    assert [[type(v) for v in vars(g).values()] for g in load_catalog()] == \
        [[type(v) for v in vars(g).values()] for g in validated]


@pytest.mark.parametrize("broken, field", [({"vendor": "NVIDIA"}, None), ({"memory_gib": -1}, "memory_gib"),
                                           ({"notes": " two  spaces"}, None), ({"bogus": 1}, "bogus")])
def test_a_broken_shipped_catalog_fails_its_full_validation(monkeypatch, broken, field):
    """The shipped catalog is validated in full here, not on each command: what that validation would refuse or
    change in it fails this test (or the equality above)."""
    from kvplan import data_files, hardware
    from kvplan.errors import ConfigError

    good = data_files.read_bundled(catalog_path())
    entry = {k: v for k, v in good["gpus"][0].items() if not (field == "memory_gib" and k.startswith("memory_")
                                                               and k != "memory_source")}
    monkeypatch.setattr(data_files, "read_bundled", lambda path: {**good, "gpus": [{**entry, **broken}]})
    try:
        validated = hardware._read_catalog(catalog_path(), validate=True)
    except ConfigError as e:
        assert field is not None and field in str(e)
        return
    assert field is None
    assert validated != hardware._read_catalog(catalog_path())  # normalised by the validation: not as shipped


def test_a_user_catalog_is_still_read_as_yaml(tmp_path):
    user = tmp_path / "mine.yaml"
    user.write_text("version: 1\ngpus:\n  - name: Mine-48G\n    vendor: nvidia\n    memory_gib: 47.5\n"
                    "    memory_source: a log\n    hbm_bandwidth_bytes_per_s: 1e12\n    bf16_dense_tflops: 100\n"
                    "    spec_source: a sheet\n")
    gpus = load_catalog(extra=user)
    assert gpus[-1].name == "Mine-48G" and gpus[-1].memory_bytes == int(47.5 * (1 << 30))
    assert len(gpus) == len(load_catalog()) + 1
