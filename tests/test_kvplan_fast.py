"""The pydantic-free reader of the kvplan deployment file (kvplan/deploy/kvplan_fast.py) against the pydantic models
(kvplan/deploy/kvplan_models.py), which define the format: its table has their fields, defaults and bounds, and
whatever it accepts the models accept with the same values (types included), fields given, and defaults. What it
is not sure of it leaves to the models (None), so a refusal and its wording are always pydantic's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from conftest import REPO
from kvplan.deploy import kvplan_fast
from kvplan.deploy.kvplan_models import DeploymentFile, EngineSpec, GpuSpec, ModelRef, Requirements
from kvplan.deploy.yaml_lines import load_all

TABLES = {"ModelRef": (kvplan_fast.MODEL_REF, ModelRef), "GpuSpec": (kvplan_fast.GPU, GpuSpec),
          "EngineSpec": (kvplan_fast.ENGINE, EngineSpec), "Requirements": (kvplan_fast.REQUIREMENTS, Requirements)}
_BOUND_KEYS = {"minimum": 0, "ge": 0, "exclusiveMinimum": 1, "gt": 1, "maximum": 2, "le": 2, "exclusiveMaximum": 3,
               "lt": 3}


def _schema_bounds(prop: dict[str, Any]) -> tuple[Any, ...]:
    bounds: list[Any] = [None] * 4
    for part in [prop, *prop.get("anyOf", [])]:
        for key, index in _BOUND_KEYS.items():
            if key in part:
                bounds[index] = part[key]
    return tuple(bounds)


@pytest.mark.parametrize("name", TABLES)
def test_the_table_has_the_models_fields_defaults_and_bounds(name: str) -> None:
    table, model = TABLES[name]
    props = DeploymentFile.model_json_schema()["$defs"][name]["properties"]
    assert list(table) == list(model.model_fields) == list(props)
    for key, (_, optional, bounds, default) in table.items():
        assert default == model.model_fields[key].get_default(call_default_factory=True), key
        assert tuple(bounds) == _schema_bounds(props[key]), key
        assert optional == any(part.get("type") == "null" for part in props[key].get("anyOf", [])), key


def _plain(value: Any) -> Any:
    """A validated value as comparable data: the type of every scalar kept (1 == 1.0 == True in Python)."""
    if isinstance(value, BaseModel):
        fields = {key: _plain(getattr(value, key)) for key in type(value).model_fields}
        return ("model", tuple(sorted(fields.items())), tuple(sorted(value.model_fields_set)))
    if isinstance(value, kvplan_fast.Parsed):
        fields = {key: _plain(item) for key, item in vars(value).items() if key != "model_fields_set"}
        return ("model", tuple(sorted(fields.items())), tuple(sorted(value.model_fields_set)))
    if isinstance(value, list):
        return ("list", tuple(_plain(item) for item in value))
    if isinstance(value, dict):
        return (type(value).__name__, tuple((k, _plain(v)) for k, v in value.items()))
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def _agree(data: Any) -> bool:
    """The fast reader's answer is the models' (where it gives one); True when it gave one."""
    fast = kvplan_fast.read(data)
    try:
        slow = DeploymentFile.model_validate(data)
    except ValidationError:
        assert fast is None, data
        return False
    if fast is not None:
        assert _plain(fast) == _plain(slow), data
    return fast is not None


PROBES = [0, 1, 2, -1, 3, 10**6, 10**6 + 1, 2**60, 0.0, 0.5, 1.0, 1.5, 1e-9, 99.9, float("nan"),
                       float("inf"), True, False, None, "", " ", "0", "3", "32k", " 8k ", "1.5k", "1m", "99999999999k",
                       "0.1", "10%", "100%", "0%", "abc", "vllm", "sglang", "VLLM", "native", "lmcache", "L4",
                       "47.5GiB", [], [0], [0, "GPU-1"], [True], [1.0], {}, {"id": "x"}, {"k": 1}, {1: 2}]
ANY = st.sampled_from(PROBES)
VALID = {
    "id": st.sampled_from(["meta-llama/Llama-3.1-8B", "x"]), "path": st.just("spec.yaml"),
    "spec": st.just({"id": "m", "layers": [{"kind": "full"}]}), "type": st.sampled_from(["L4", "H100-80GB"]),
    "memory": st.just("47.5GiB"), "count": st.integers(1, 8), "devices": st.lists(st.integers(0, 7) | st.just("GPU-a"),
                                                                                    min_size=1, max_size=3),
    "name": st.sampled_from(["vllm", "sglang", "trtllm"]), "version": st.sampled_from(["0.11", "0.6"]),
    "tp": st.integers(1, 8), "pp": st.integers(1, 4), "dp": st.integers(1, 4),
    "max_model_len": st.sampled_from([32768, "32k", "8K", " 4k", "1m", "0.5k"]), "max_num_seqs": st.integers(1, 512),
    "gpu_memory_utilization": st.sampled_from([0.9, 1, 0.5, 1.0]), "kv_cache_dtype": st.sampled_from(["auto", "fp8"]),
    "max_num_batched_tokens": st.sampled_from([8192, "8k"]), "block_size": st.sampled_from([16, 32]),
    "enforce_eager": st.booleans(), "mem_fraction_static": st.sampled_from([0.8, 1]),
    "free_gpu_memory_fraction": st.sampled_from([0.9, 0.5]), "kv_cache_memory": st.just("30.5GiB"),
    "weights_bytes": st.just("14.99GiB"), "kv_offloading_size": st.sampled_from([0, 100, 2.5]),
    "kv_offloading_backend": st.sampled_from(["native", "lmcache"]), "swap_space": st.sampled_from([0, 4.0]),
    "cpu_offload_gb": st.sampled_from([4, 1048576]), "enable_prefix_caching": st.booleans(),
    "enable_hierarchical_cache": st.booleans(), "hicache_ratio": st.sampled_from([2.0, 10000, 0.5]),
    "hicache_size": st.sampled_from([0, 100, 10**6]), "disable_radix_cache": st.booleans(),
    "min_concurrency": st.integers(1, 64), "at_context": st.sampled_from([8192, "8k"]),
    "min_context": st.sampled_from([32768, "32k"]), "headroom": st.sampled_from([0, 0.1, "10%", "0.25", " 5% "]),
    "max_num_seqs_reachable": st.booleans(), "shared_prefix": st.sampled_from([0, "0", " 0 ", "2k", 512]),
    "n": st.integers(1, 4),
}


def _section(table: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    keys = st.lists(st.sampled_from(list(table)), unique=True, max_size=5)
    return keys.flatmap(lambda ks: st.fixed_dictionaries({k: VALID[k] for k in ks}))


def _deployment() -> st.SearchStrategy[dict[str, Any]]:
    model_ref = st.sampled_from(["id", "path", "spec"]).flatmap(lambda k: st.fixed_dictionaries({k: VALID[k]}))
    gpu_ref = st.sampled_from(["type", "memory"]).flatmap(
        lambda k: st.fixed_dictionaries({k: VALID[k]}, optional={"count": VALID["count"], "devices": VALID["devices"]}))
    return st.fixed_dictionaries(
        {"name": st.sampled_from(["chat", "a"]), "model": st.just("meta-llama/Llama-3.1-8B") | model_ref,
         "gpu": st.sampled_from(["L4", "H100-80GB"]) | gpu_ref},
        optional={"engine": VALID["name"] | _section(kvplan_fast.ENGINE),
                  "requirements": _section(kvplan_fast.REQUIREMENTS)})


VALID_FILE = st.fixed_dictionaries({"deployments": st.lists(_deployment(), min_size=1, max_size=3)},
                                   optional={"version": st.just(1)})
SECTIONS = {"model": kvplan_fast.MODEL_REF, "gpu": kvplan_fast.GPU, "engine": kvplan_fast.ENGINE,
            "requirements": kvplan_fast.REQUIREMENTS}


@st.composite
def _changed_file(draw: st.DrawFn) -> dict[str, Any]:
    """A file written as documented, then one to three keys set to a value that may be right or wrong (mostly a
    documented one: a file that is wrong everywhere tells nothing), or dropped."""
    data = draw(VALID_FILE)
    for _ in range(draw(st.integers(1, 3))):
        target: Any = data
        keys = ["version", "deployments", "bogus"]
        deployments = data.get("deployments")
        if draw(st.booleans()) and isinstance(deployments, list) and deployments and \
                isinstance(deployments[0], dict):
            target = draw(st.sampled_from([d for d in deployments if isinstance(d, dict)]))
            keys = ["name", *SECTIONS, "bogus"]
            section = draw(st.sampled_from(list(SECTIONS)))
            if draw(st.booleans()) and isinstance(target.get(section), dict):
                target, keys = target[section], [*SECTIONS[section], "bogus"]
        key = draw(st.sampled_from(keys))
        if key in target and draw(st.integers(0, 4)) == 0:
            del target[key]
        else:
            target[key] = draw(VALID[key] if key in VALID and draw(st.booleans()) else ANY)
    return data


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_changed_file())
def test_what_the_fast_reader_accepts_the_models_accept_alike(data: dict[str, Any]) -> None:
    _agree(data)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(VALID_FILE)
def test_the_fast_reader_takes_files_written_as_documented(data: dict[str, Any]) -> None:
    assert _agree(data)


def _kvplan_files() -> list[Path]:
    found = []
    for path in sorted([*(REPO / "examples").rglob("*.y*ml"), *(REPO / "tests" / "data").rglob("*.y*ml")]):
        try:
            docs = load_all(path.read_text(), str(path))
        except Exception:  # noqa: BLE001  (malformed on purpose: other tests read those)
            continue
        if docs and isinstance(docs[0][0], dict) and "deployments" in docs[0][0] and "apiVersion" not in docs[0][0]:
            found.append(path)
    return found


def test_every_example_deployment_file_is_read_without_pydantic() -> None:
    files = _kvplan_files()
    assert any(path.parent.name == "pass" for path in files)
    for path in files:
        data = load_all(path.read_text(), str(path))[0][0]
        try:
            DeploymentFile.model_validate(data)
        except ValidationError:
            assert kvplan_fast.read(data) is None, path
            continue
        assert _agree(data), path


@pytest.mark.parametrize("section", SECTIONS)
def test_every_field_and_probe_value_agree(section: str) -> None:
    """Each field of each section set to each probe value (right, wrong, or one pydantic converts), in a file
    otherwise valid: the fast reader agrees wherever it answers, and answers for some of them."""
    base = {"name": "a", "model": {"id": "m"}, "gpu": {"type": "L4"}, "engine": {}, "requirements": {}}
    answered = 0
    for key in SECTIONS[section]:
        for value in PROBES:
            alone = key in ("id", "path", "spec", "type", "memory")  # the fields that exclude each other
            deployment = base | {section: ({} if alone else base[section]) | {key: value}}
            answered += _agree({"deployments": [deployment]})
    assert answered >= len(SECTIONS[section])


def test_what_it_leaves_to_the_models_is_what_they_convert_or_refuse() -> None:
    base = {"name": "a", "model": "m", "gpu": "L4"}
    for engine in ({"tp": "2"}, {"tp": 2.0}, {"enforce_eager": "yes"}, {"tp": True}, {"tp": 0}, {"bogus": 1},
                   {"max_model_len": "0"}, {"gpu_memory_utilization": "0.9"}):
        assert kvplan_fast.read({"deployments": [base | {"engine": engine}]}) is None, engine
    assert kvplan_fast.read({"deployments": [base | {"engine": {"tp": 2}}]}) is not None
