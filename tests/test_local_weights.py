"""Weights of a local config.json / model directory (issue 15 item 15).

A directory's safetensors headers give the exact bytes (header only: the data is never read); without
weight files the parameters are counted from the config, labelled as such. The safetensors files here
are written by hand following the format (safetensors README: an 8-byte little-endian header length, a
JSON header of dtype / shape / data_offsets per tensor, then the data).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from kvplan.errors import ConfigError
from kvplan.sources.hf_params import count_params, weights_bytes
from kvplan.sources.resolve import load_model
from kvplan.sources.safetensors_weights import local_weight_files, read_local_header

CONFIGS = Path(__file__).parent / "data" / "hf_configs"
QWEN3 = CONFIGS / "Qwen__Qwen3-0.6B.json"  # 596,049,920 parameters, bfloat16
_SIZES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I32": 4, "U8": 1}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]], *, data: bool = True) -> int:
    """A safetensors file of zero-filled tensors; returns the data bytes its header describes."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = _SIZES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + (b"\0" * offset if data else b""))
    return offset


def model_dir(tmp_path: Path, config: Path = QWEN3) -> Path:
    directory = tmp_path / "my-model"
    directory.mkdir()
    shutil.copy(config, directory / "config.json")
    return directory


def test_single_file_headers_give_exact_bytes(tmp_path):
    d = model_dir(tmp_path)
    nbytes = write_safetensors(d / "model.safetensors", {"a.weight": ("BF16", [4, 8]), "b.weight": ("F32", [3])})
    assert nbytes == 4 * 8 * 2 + 3 * 4
    spec = load_model(str(d))
    assert spec.weights_bytes == nbytes
    assert spec.params == 4 * 8 + 3
    assert spec.weights_dtype == "bfloat16"  # the dtype holding most bytes
    assert spec.weights_source == f"safetensors headers in {d} (1 file, 2 tensors)"
    assert not any("analytic" in a for a in spec.assumptions)
    # the config.json path itself reads the same directory
    assert load_model(str(d / "config.json")).weights_bytes == nbytes


def test_sharded_files_from_the_index(tmp_path):
    d = model_dir(tmp_path)
    first = write_safetensors(d / "model-00001-of-00002.safetensors", {"x": ("BF16", [16, 16])})
    second = write_safetensors(d / "model-00002-of-00002.safetensors", {"y": ("BF16", [16]), "z": ("F32", [2, 2])})
    write_safetensors(d / "other.safetensors", {"ignored": ("F32", [1000])})  # not in the index
    index = {"metadata": {"total_size": first + second},
             "weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors",
                            "z": "model-00002-of-00002.safetensors"}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    spec = load_model(str(d))
    assert spec.weights_bytes == first + second == 16 * 16 * 2 + 16 * 2 + 4 * 4
    assert spec.params == 256 + 16 + 4
    assert "(2 files, 3 tensors)" in (spec.weights_source or "")


def test_shards_without_an_index(tmp_path):
    d = model_dir(tmp_path)
    a = write_safetensors(d / "model-00001-of-00002.safetensors", {"x": ("F16", [8])})
    b = write_safetensors(d / "model-00002-of-00002.safetensors", {"y": ("F16", [8])})
    assert load_model(str(d)).weights_bytes == a + b


def test_incomplete_shards_fall_back_to_the_config_count(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(d / "model-00001-of-00003.safetensors", {"x": ("F16", [8])})
    spec = load_model(str(d))
    count = count_params(json.loads(QWEN3.read_text()))
    assert spec.params == count.total == 596_049_920
    assert any("incomplete" in a and "analytic count" in a for a in spec.assumptions)


def test_index_naming_a_missing_file_falls_back(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(d / "model-00001-of-00002.safetensors", {"x": ("F16", [8])})
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}}))
    spec = load_model(str(d))
    assert spec.weights_source and spec.weights_source.startswith("computed from")
    assert any("lists 2 files and 1 are missing" in a for a in spec.assumptions)


def test_no_weight_files_counts_the_config_and_says_so(tmp_path):
    d = model_dir(tmp_path)
    config = json.loads(QWEN3.read_text())
    spec = load_model(str(d / "config.json"))
    count = count_params(config)
    assert (spec.params, spec.weights_bytes) == (count.total, weights_bytes(config, count)[0])
    assert spec.weights_bytes == 2 * 596_049_920
    assert spec.weights_dtype == "bfloat16"
    assert spec.weights_source == (f"computed from {d / 'config.json'}, not the checkpoint: "
                                   "596,049,920 parameters x 2 B (bfloat16)")
    assert f"weights: no safetensors weight files in {d}: params and weights_bytes are an analytic count " \
           f"from {d / 'config.json'}, not read from the checkpoint" in spec.assumptions
    assert "weights: tie_word_embeddings: lm_head shares the embedding matrix (not counted twice)" in spec.assumptions


def test_config_that_cannot_be_counted_says_weights_unknown(tmp_path):
    config = json.loads(QWEN3.read_text())
    del config["vocab_size"]  # the cache needs no vocabulary; the count does
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = load_model(str(tmp_path / "config.json"))
    assert spec.weights_bytes is None and spec.params is None
    assert any("cannot be counted" in a and "vocab_size" in a and "weights unknown" in a for a in spec.assumptions)


@pytest.mark.parametrize("damage, reason", [
    ("truncated", "the file holds"),
    ("huge_header", "not a safetensors file"),
    ("garbage", "safetensors header:1:2: invalid JSON"),
    ("deep", "nested more than"),  # the header is anyone's JSON: the bounded parser, not a RecursionError
    ("long_int", "digits"),
])
def test_broken_headers_fall_back_with_the_reason(tmp_path, damage, reason):
    d = model_dir(tmp_path)
    path = d / "model.safetensors"
    if damage == "truncated":
        write_safetensors(path, {"x": ("F32", [1024])}, data=False)
    elif damage == "huge_header":
        path.write_bytes(struct.pack("<Q", 200 * 1024 * 1024) + b"{}")
    elif damage == "garbage":
        path.write_bytes(struct.pack("<Q", 8) + b"{not js}")
    else:
        header = b"[" * 100_000 + b"]" * 100_000 if damage == "deep" else b'{"n": ' + b"9" * 5000 + b"}"
        path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(ConfigError, match=reason):
        read_local_header(str(path))
    spec = load_model(str(d))
    assert spec.params == 596_049_920  # the config's count, labelled
    assert any("safetensors headers cannot be read" in a and reason in a for a in spec.assumptions)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_a_named_pipe_is_refused_not_waited_on(tmp_path):
    d = model_dir(tmp_path)
    os.mkfifo(d / "model.safetensors")
    with pytest.raises(ConfigError, match="not a regular file"):
        read_local_header(str(d / "model.safetensors"))
    assert load_model(str(d)).params == 596_049_920


def test_index_may_not_point_outside_the_directory(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(tmp_path / "model.safetensors", {"x": ("F16", [8])})
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../model.safetensors"}}))
    with pytest.raises(ConfigError, match="not a safetensors file of this directory"):
        local_weight_files(str(d))
    assert any("cannot be read" in a for a in load_model(str(d)).assumptions)


def test_quantized_checkpoint_counts_packed_values(tmp_path):
    # An AWQ int4 layer: I32 qweight holds 8 values per element; scales / qzeros are bytes only.
    config = json.loads(QWEN3.read_text())
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128}
    d = tmp_path / "awq"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    nbytes = write_safetensors(d / "model.safetensors", {
        "l.qweight": ("I32", [128, 16]), "l.qzeros": ("I32", [1, 16]), "l.scales": ("F16", [1, 128]),
        "embed.weight": ("F16", [10, 128])})
    spec = load_model(str(d))
    assert spec.weights_bytes == nbytes
    assert spec.params == 128 * 16 * 8 + 10 * 128
    assert spec.weights_dtype == "int4"


@pytest.mark.parametrize("quantization", [
    {"quant_method": "fp8", "weight_block_size": ["a", 0]},
    {"quant_method": "fp8", "weight_block_size": [0, 128]},
    {"quant_method": "fp8", "modules_to_not_convert": 5},
])
def test_a_malformed_quantization_config_is_one_line_not_a_traceback(tmp_path, quantization):
    config = json.loads(QWEN3.read_text())
    config["quantization_config"] = quantization
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = load_model(str(tmp_path))  # the cache is still described; the weights say why not
    if "weight_block_size" in quantization:
        assert spec.weights_bytes is None
        assert any("weight_block_size" in a and "weights unknown" in a for a in spec.assumptions)
    else:  # a list it cannot use is ignored: the fp8 rule applies to every linear weight
        assert spec.weights_bytes is not None
