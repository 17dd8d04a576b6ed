"""kvplan against what the engines themselves computed for 24 real configs.

tests/data/cache_oracle_dev.json (from shared/data): transformers 5.23.0 built each model on the meta
device and ran a forward pass over L tokens (bf16, batch 1), counting every cache tensor's bytes for
DynamicCache and StaticCache(max_cache_len=L); vLLM 0.33.0 built its KVCacheSpec for every layer.
kvplan must reproduce every number exactly.
"""

from __future__ import annotations

import json

import pytest

import kvplan
from kvplan.dtypes import resolve_kv_dtype
from kvplan.engines import EngineOptions, get_engine, parse_version
from kvplan.sources.hf_config import read_config_file, spec_from_config
from conftest import DATA

ORACLE = json.loads((DATA / "cache_oracle_dev.json").read_text())["models"]


def load(name: str):
    config = read_config_file(DATA / "hf_configs" / f"{name}.json")
    return spec_from_config(config, model_id=name.replace("__", "/"))


@pytest.mark.parametrize("name", sorted(ORACLE))
@pytest.mark.parametrize("engine,key", [("hf", "hf_cache_bytes"), ("hf-static", "hf_static_cache_bytes")])
def test_transformers_cache_bytes(name, engine, key):
    spec = load(name)
    for length, expected in ORACLE[name][key].items():
        if expected is None:
            continue
        got = kvplan.estimate(spec, contexts=[int(length)], kv_dtypes=["bf16"], engine=engine).rows[0].kv_bytes
        assert got == expected, f"{name} {engine} L={length}"


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_vllm_page_bytes_per_token(name):
    spec = load(name)
    layout = get_engine("vllm").layout(spec, resolve_kv_dtype("bf16", spec.dtype), parse_version("0.33"),
                                       EngineOptions())
    per_token = sum(g.count * g.token.bytes for g in layout.groups if not g.padding)
    assert per_token == ORACLE[name]["vllm_bytes_per_token_bf16"]
    heads = {g.layer.kv_heads for g in layout.groups if g.kind in ("full", "sliding", "chunked")}
    if ORACLE[name]["vllm_use_mla"]:
        widths = {g.layer.kv_lora_rank + g.layer.qk_rope_head_dim for g in layout.groups if g.kind == "mla"}
        assert widths == {ORACLE[name]["vllm_head_size"]}
    elif heads:
        assert heads == {ORACLE[name]["vllm_num_kv_heads"]}


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_layer_kinds_match(name):
    spec = load(name)
    kinds = spec.layer_kind_counts()
    expected: dict[str, int] = {}
    for part in ORACLE[name]["attention_kind_summary"].split():
        kind, _, count = part.rpartition("x")
        kind = {"recurrent_state": "recurrent"}.get(kind, kind)
        if kind == "full" and ORACLE[name]["vllm_use_mla"]:
            kind = "mla"
        expected[kind] = expected.get(kind, 0) + int(count)
    assert kinds == expected
