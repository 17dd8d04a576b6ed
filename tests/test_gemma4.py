"""Gemma 4 (model_type gemma4 / gemma4_text): per-layer KV shapes read exactly from real configs.

Configs (provenance in tests/data/hf_configs/SOURCES.yaml):
- hf_configs/google__gemma-4-31B-it.json, google__gemma-4-E2B-it.json: release files (transformers 5.5.0.dev0)
- hf_configs/google__gemma-4-E4B-it.json: a re-serialized copy (transformers 5.12.1), same cache fields
- hf_configs_transcribed/google__gemma-4-26B-A4B-it.json: transcribed from an mlx-community conversion

Rules (kvplan/sources/hf_families.py ``_gemma4``, from transformers modeling_gemma4.py and vLLM
models/gemma4.py): sliding layers cache num_key_value_heads x head_dim, full (global) layers
global_head_dim, with num_global_key_value_heads only when attention_k_eq_v; K and V are both cached
on every layer (K=V layers included); the last num_kv_shared_layers layers cache nothing and read the
last earlier non-shared layer of their type. All numbers below are bfloat16 (2 B per element).
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest

import kvplan
from kvplan.errors import ConfigError
from kvplan.sources.hf_config import read_config_file, spec_from_config
from kvplan.spec import LayerSpec, ModelSpec
from conftest import DATA

G31 = DATA / "hf_configs" / "google__gemma-4-31B-it.json"
G26 = DATA / "hf_configs_transcribed" / "google__gemma-4-26B-A4B-it.json"
E4B = DATA / "hf_configs" / "google__gemma-4-E4B-it.json"
E2B = DATA / "hf_configs" / "google__gemma-4-E2B-it.json"
ALL = [G31, G26, E4B, E2B]


def spec_of(path: Path) -> ModelSpec:
    return spec_from_config(read_config_file(path), model_id=path.stem, source=str(path))


def per_layer(spec: ModelSpec) -> list[LayerSpec]:
    """One entry per layer, each with count 1."""
    return [replace(layer, count=1) for layer in spec.expanded_layers()]


def token_bytes(layer: LayerSpec) -> int:
    """K and V of one token in one layer, bfloat16."""
    assert layer.kv_heads is not None and layer.head_dim is not None
    return (layer.head_dim + layer.v_dim) * layer.kv_heads * 2


def hf_bytes(path: Path, context: int) -> int:
    result = kvplan.estimate(str(path), engine="hf", contexts=[context], batches=[1])
    assert len(result.rows) == 1
    return result.rows[0].kv_bytes


# --------------------------------------------------------------------------------------------
# Layer shapes, per model


def test_31b_layers():
    spec = spec_of(G31)
    assert spec.model_type == "gemma4" and spec.num_layers == 60 and spec.dtype == "bfloat16"
    assert spec.layer_kind_counts() == {"sliding": 50, "full": 10}
    layers = per_layer(spec)
    # layer_types: 5 sliding then 1 full, ten times (full at 5, 11, ..., 59)
    assert [i for i, layer in enumerate(layers) if layer.kind == "full"] == list(range(5, 60, 6))
    assert layers[0] == LayerSpec(kind="sliding", kv_heads=16, head_dim=256, window=1024)
    # attention_k_eq_v: true -> full layers use num_global_key_value_heads=4 and global_head_dim=512
    assert layers[5] == LayerSpec(kind="full", kv_heads=4, head_dim=512)
    # sliding: 2 (K, V) x 16 heads x 256 x 2 B = 16,384 B/token; full: 2 x 4 x 512 x 2 B = 8,192 B/token
    assert token_bytes(layers[0]) == 16_384 and token_bytes(layers[5]) == 8_192
    assert spec.max_position_embeddings == 262_144


def test_26b_a4b_layers():
    spec = spec_of(G26)
    assert spec.num_layers == 30 and spec.layer_kind_counts() == {"sliding": 25, "full": 5}
    layers = per_layer(spec)
    assert [i for i, layer in enumerate(layers) if layer.kind == "full"] == [5, 11, 17, 23, 29]
    assert layers[0] == LayerSpec(kind="sliding", kv_heads=8, head_dim=256, window=1024)
    assert layers[5] == LayerSpec(kind="full", kv_heads=2, head_dim=512)  # k_eq_v: 2 global KV heads
    # sliding: 2 x 8 x 256 x 2 B = 8,192 B/token; full: 2 x 2 x 512 x 2 B = 4,096 B/token
    assert token_bytes(layers[0]) == 8_192 and token_bytes(layers[5]) == 4_096


def test_e4b_layers_and_kv_sharing():
    spec = spec_of(E4B)
    assert spec.num_layers == 42
    # 42 layers, full at 5, 11, ..., 41; num_kv_shared_layers=18 -> layers 24..41 share:
    # own cache: 0..23 = 20 sliding + 4 full (5, 11, 17, 23); shared: 18
    assert spec.layer_kind_counts() == {"sliding": 20, "full": 4, "shared": 18}
    layers = per_layer(spec)
    assert layers[0] == LayerSpec(kind="sliding", kv_heads=2, head_dim=256, window=512)
    # attention_k_eq_v: false -> full layers keep num_key_value_heads=2 (num_global_key_value_heads is null)
    assert layers[23] == LayerSpec(kind="full", kv_heads=2, head_dim=512)
    # shared sliding layers read layer 22 (last sliding layer before 24), shared full layers layer 23
    assert {i: layers[i].shares_with for i in range(24, 42)} == {
        i: (23 if (i + 1) % 6 == 0 else 22) for i in range(24, 42)}
    # sliding: 2 x 2 x 256 x 2 B = 2,048 B/token; full: 2 x 2 x 512 x 2 B = 4,096 B/token
    assert token_bytes(layers[0]) == 2_048 and token_bytes(layers[23]) == 4_096


def test_e2b_layers_and_kv_sharing():
    spec = spec_of(E2B)
    assert spec.num_layers == 35
    # 35 layers, 4 sliding then 1 full (full at 4, 9, ..., 34); num_kv_shared_layers=20 -> 15..34 share:
    # own cache: 0..14 = 12 sliding + 3 full (4, 9, 14); shared: 20
    assert spec.layer_kind_counts() == {"sliding": 12, "full": 3, "shared": 20}
    layers = per_layer(spec)
    assert layers[0] == LayerSpec(kind="sliding", kv_heads=1, head_dim=256, window=512)
    assert layers[14] == LayerSpec(kind="full", kv_heads=1, head_dim=512)
    assert {i: layers[i].shares_with for i in range(15, 35)} == {
        i: (14 if (i + 1) % 5 == 0 else 13) for i in range(15, 35)}
    # sliding: 2 x 1 x 256 x 2 B = 1,024 B/token; full: 2 x 1 x 512 x 2 B = 2,048 B/token
    assert token_bytes(layers[0]) == 1_024 and token_bytes(layers[14]) == 2_048


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_known_family_and_no_context_extension(path: Path):
    spec = spec_of(path)
    assert not any("not one kvplan knows" in note for note in spec.assumptions), spec.assumptions
    assert not any("absent" in note for note in spec.assumptions), spec.assumptions
    # rope_parameters.full_attention is "proportional" (p-RoPE, factor 1): not a context extension
    assert spec.rope_scaling is None
    notes = kvplan.estimate(str(path), engine="hf", contexts=[8192]).assumptions
    assert not any("extends the context" in note for note in notes)


# --------------------------------------------------------------------------------------------
# transformers DynamicCache bytes (hf engine: full layers keep every token, sliding ones window - 1)


def test_hf_bytes_31b():
    # context 8,192: full 10 x 8,192 x 8,192 = 671,088,640; sliding 50 x 1,023 x 16,384 = 838,041,600
    assert hf_bytes(G31, 8192) == 671_088_640 + 838_041_600 == 1_509_130_240
    # context 131,072: full 10 x 131,072 x 8,192 = 10,737,418,240; sliding unchanged
    assert hf_bytes(G31, 131_072) == 10_737_418_240 + 838_041_600 == 11_575_459_840


def test_hf_bytes_26b_a4b():
    # full 5 x 8,192 x 4,096 = 167,772,160; sliding 25 x 1,023 x 8,192 = 209,510,400
    assert hf_bytes(G26, 8192) == 167_772_160 + 209_510_400 == 377_282_560


def test_hf_bytes_e4b():
    # full 4 x 8,192 x 4,096 = 134,217,728; sliding 20 x 511 x 2,048 = 20,930,560; shared 18 x 0
    assert hf_bytes(E4B, 8192) == 134_217_728 + 20_930_560 == 155_148_288


def test_hf_bytes_e2b():
    # full 3 x 8,192 x 2,048 = 50,331,648; sliding 12 x 511 x 1,024 = 6,279,168; shared 20 x 0
    assert hf_bytes(E2B, 8192) == 50_331_648 + 6_279_168 == 56_610_816
    # Read with the generic rules (every layer 1 x 256, 35 cached) it would have been far off.
    assert hf_bytes(E2B, 8192) != 35 * 8192 * 1024


def test_bundled_ids_and_aliases():
    for model_id in ("google/gemma-4-31B-it", "google/gemma-4-31B", "google/gemma-4-26B-A4B-it",
                     "google/gemma-4-26B-A4B", "google/gemma-4-E4B-it", "google/gemma-4-E4B",
                     "google/gemma-4-E2B-it", "google/gemma-4-E2B"):
        spec = kvplan.load_model(model_id)
        assert spec.model_type == "gemma4"
    assert kvplan.estimate("google/gemma-4-31B", engine="hf", contexts=[8192]).rows[0].kv_bytes == 1_509_130_240


# --------------------------------------------------------------------------------------------
# Config variants: defaults, nesting, k_eq_v gating, per_layer_config, errors


def text_of(path: Path) -> dict:
    return copy.deepcopy(json.loads(path.read_text())["text_config"])


def read(config: dict) -> ModelSpec:
    return spec_from_config(config, model_id="x")


def test_flat_text_config_reads_the_same():
    text = text_of(G31)  # model_type gemma4_text at the top level (Gemma4ForCausalLM checkpoints)
    assert read(text).layers == spec_of(G31).layers


def test_defaults_of_a_bare_config():
    spec = read({"model_type": "gemma4_text"})
    # Gemma4TextConfig: 30 layers, 8 heads, 4 KV heads, head_dim 256, global 512, window 512, 5:1
    assert spec.layer_kind_counts() == {"sliding": 25, "full": 5}
    layers = per_layer(spec)
    assert layers[0] == LayerSpec(kind="sliding", kv_heads=4, head_dim=256, window=512)
    assert layers[5] == LayerSpec(kind="full", kv_heads=4, head_dim=512)
    text = " | ".join(spec.assumptions)
    for field in ("num_hidden_layers", "num_key_value_heads", "head_dim", "sliding_window", "global_head_dim",
                  "layer_types"):
        assert field in text
    assert spec.max_position_embeddings == 131_072


def test_global_kv_heads_only_with_k_eq_v():
    text = text_of(G31)
    text["attention_k_eq_v"] = False  # then num_global_key_value_heads=4 is not used by either engine
    spec = read(text)
    assert per_layer(spec)[5] == LayerSpec(kind="full", kv_heads=16, head_dim=512)
    assert any("num_global_key_value_heads=4 ignored" in note for note in spec.assumptions)

    text = text_of(G31)
    del text["num_global_key_value_heads"]
    spec = read(text)
    assert per_layer(spec)[5] == LayerSpec(kind="full", kv_heads=16, head_dim=512)
    assert any("without num_global_key_value_heads" in note for note in spec.assumptions)


def test_global_head_dim_null_falls_back_to_head_dim():
    text = text_of(G31)
    text["global_head_dim"] = None
    assert per_layer(read(text))[5] == LayerSpec(kind="full", kv_heads=4, head_dim=256)


def test_last_layer_is_forced_global():
    text = text_of(G31)
    text["layer_types"][-1] = "sliding_attention"
    spec = read(text)
    assert per_layer(spec)[-1].kind == "full"
    assert any("forces the last layer" in note for note in spec.assumptions)


def test_per_layer_config_overrides():
    text = text_of(G31)
    text["per_layer_config"] = {str(i): {"head_dim": 384, "num_key_value_heads": 8} for i in range(5, 60, 6)}
    layers = per_layer(read(text))
    assert layers[5] == LayerSpec(kind="full", kv_heads=8, head_dim=384)
    assert layers[0] == LayerSpec(kind="sliding", kv_heads=16, head_dim=256, window=1024)


def test_bidirectional_all_narrows_the_window():
    text = text_of(G31)
    text["use_bidirectional_attention"] = "all"
    assert per_layer(read(text))[0].window == 1024 // 2 + 1


@pytest.mark.parametrize("change, message", [
    ({"layer_types": ["chunked_attention"] * 59 + ["full_attention"]}, "not a layer type gemma4 uses"),
    ({"num_kv_shared_layers": 60}, "no earlier non-shared layer"),
    ({"num_global_key_value_heads": 5}, "not a multiple of num_global_key_value_heads=5"),
    ({"num_kv_shared_layers": -1}, "num_kv_shared_layers"),
])
def test_bad_configs_raise(change, message):
    text = text_of(G31)
    text.update(change)
    with pytest.raises(ConfigError, match=message):
        read(text)


# What transformers 5.23.0 itself held: Gemma4ForCausalLM built from each config's text_config with
# hidden_size / intermediate_size / vocab (and PLE width, experts) shrunk, attention fields unchanged,
# one forward of `context` random tokens with use_cache=True, bytes of every DynamicCache layer's keys
# and values summed (bfloat16). Shared layers held 0 B, sliding layers window - 1 tokens, K=V full
# layers both K and V.
MEASURED_TRANSFORMERS_5_23 = [
    (G31, 600, 540_672_000), (G31, 1100, 928_153_600),
    (G26, 600, 135_168_000), (G26, 1100, 232_038_400),
    (E4B, 600, 30_760_960), (E4B, 1100, 38_952_960),
    (E2B, 600, 9_965_568), (E2B, 1100, 13_037_568),
]


@pytest.mark.parametrize("path, context, measured", MEASURED_TRANSFORMERS_5_23,
                         ids=[f"{p.stem}-{c}" for p, c, _ in MEASURED_TRANSFORMERS_5_23])
def test_hf_bytes_match_transformers_5_23(path: Path, context: int, measured: int):
    assert hf_bytes(path, context) == measured
