"""The bundled specs: built from real configs, in sync, valid, and found by every published id."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kvplan
from kvplan.sources.bundled import bundled_ids, load_bundled, specs_dir
from kvplan.sources.yaml_spec import read_yaml_file, spec_from_trusted_dict, validate_spec
from conftest import REPO, bundled_spec_files

SPEC_FILES = bundled_spec_files()

# The models the estimate issue asks kvplan to ship, by their published Hub ids.
REQUIRED = [
    "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-70b-hf",
    "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-405B",
    "meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-3B", "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "mistralai/Mistral-7B-v0.1", "mistralai/Mistral-7B-v0.3", "mistralai/Mistral-Nemo-Instruct-2407",
    "mistralai/Mistral-Small-24B-Instruct-2501", "mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x22B-v0.1",
    "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-14B", "Qwen/Qwen2.5-32B", "Qwen/Qwen2.5-72B",
    "Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-Coder-480B-A35B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-14B-FP8", "Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-30B-A3B-FP8",
    "Qwen/Qwen3-235B-A22B-FP8",
    "google/gemma-2-9b", "google/gemma-2-27b", "google/gemma-3-1b-it", "google/gemma-3-4b-it",
    "google/gemma-3-12b-it", "google/gemma-3-27b-it", "microsoft/Phi-3-mini-4k-instruct",
    "microsoft/Phi-3-medium-4k-instruct", "microsoft/phi-4", "deepseek-ai/DeepSeek-V2-Lite",
    "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "moonshotai/Kimi-K2-Instruct", "openai/gpt-oss-20b",
    "openai/gpt-oss-120b", "tiiuae/falcon-7b", "tiiuae/falcon-40b", "zai-org/GLM-4.5", "ai21labs/Jamba-v0.1",
    "openai-community/gpt2", "gpt2",
]


@pytest.mark.slow
def test_specs_are_in_sync_with_their_configs():
    done = subprocess.run([sys.executable, str(REPO / "tools" / "build_specs.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_at_least_forty_models_ship():
    assert len(bundled_ids()) >= 40 and len(SPEC_FILES) == len(bundled_ids())


def test_every_spec_validates_and_the_fast_loader_agrees(bundled_model):  # each file: tests/conftest.py
    path = bundled_model
    data = read_yaml_file(path)
    assert validate_spec(data, str(path)) == spec_from_trusted_dict(data, str(path))
    assert data["source"] == data["id"] and data["weights_bytes"] > 0 and data["weights_source"]


@pytest.mark.parametrize("model_id", REQUIRED)
def test_required_models_resolve_by_published_id(model_id):
    spec = load_bundled(model_id)
    assert spec is not None, model_id
    assert spec.id.lower() == model_id.lower() or model_id == "gpt2"


def test_an_alias_keeps_its_name_and_says_whose_spec_it_uses():
    spec = load_bundled("deepseek-ai/DeepSeek-R1-Distill-Llama-8B")
    assert spec.id == "deepseek-ai/DeepSeek-R1-Distill-Llama-8B"
    assert any("same architecture as meta-llama/Llama-3.1-8B" in a for a in spec.assumptions)
    assert load_bundled("GPT2").id == "gpt2"  # case-insensitive


def test_bundled_golden_numbers():
    # public facts, through the bundled specs: Llama-3.1-8B 131,072 B/token bf16; DeepSeek-V3 70,272 B
    # as a latent; falcon-7b 8,192 B (multi-query)
    assert kvplan.estimate("meta-llama/Llama-3.1-8B", contexts=[8192]).rows[0].bytes_per_token == 131072
    assert kvplan.estimate("deepseek-ai/DeepSeek-V3", contexts=[8192]).rows[0].bytes_per_token == 70272
    assert kvplan.estimate("tiiuae/falcon-7b", contexts=[2048], engine="hf").rows[0].bytes_per_token == 8192


def test_fp8_checkpoints_share_the_cache_but_not_the_weights():
    bf16, fp8 = load_bundled("Qwen/Qwen3-32B"), load_bundled("Qwen/Qwen3-32B-FP8")
    assert bf16.layers == fp8.layers
    assert fp8.weights_bytes < 0.6 * bf16.weights_bytes and fp8.weights_dtype == "fp8"


def test_bundle_json_agrees_with_the_yaml_files():
    bundle = json.loads((specs_dir() / "bundle.json").read_text())
    assert all(key == key.lower() for key in bundle["index"])
    assert bundle["specs"] == {p.name: read_yaml_file(p) for p in SPEC_FILES}


def test_a_lookup_reads_the_bundle_as_json_does():
    """A lookup reads the bundle's index and its one spec, not the whole file (``bundled._spec_data``): for every
    bundled spec that is exactly the data json reads."""
    from kvplan.sources import bundled

    whole = json.loads((REPO / "model_specs" / "bundle.json").read_text(encoding="utf-8"))
    assert bundled._index_and_specs()[1] > 0  # the partial read, not the fallback
    assert bundled.index() == whole["index"]
    for file, data in whole["specs"].items():
        assert bundled._spec_data(file) == data, file
