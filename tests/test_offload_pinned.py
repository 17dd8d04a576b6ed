"""Pinned host memory of vLLM's native CPU offloading, by release (kvplan/engines/vllm/pinned.py).

Golden numbers are worked from the released wheels' code (cited per test) and from PyTorch's
``CachingHostAllocatorImpl::allocate`` (aten/src/ATen/core/CachingHostAllocator.h, torch 2.13: PowerOf2Ceil of
every request under the default PYTORCH_ALLOC_CONF). The measurements they are checked against are in
tests/data/offload_logs_found.yaml with their sources."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import kvplan
from kvplan.deploy import check
from kvplan.dtypes import resolve_kv_dtype
from kvplan.engines import get_engine, parse_version
from kvplan.engines.protocol import Demand, make_engine_options
from kvplan.engines.vllm.pinned import pinned_allocation_bytes
from conftest import k8s_h100

GIB = 1 << 30
CASES = {c["id"]: c for c in yaml.safe_load(
    (Path(__file__).parent / "data" / "offload_logs_found.yaml").read_text())["cases"]}


def _tier(model: str, version: str, size_gib: int, tp: int = 1, pp: int = 1):
    engine = get_engine("vllm")
    spec = kvplan.load_model(model)
    opts = make_engine_options(tp=tp, kv_offloading_bytes=size_gib * GIB)
    layouts = engine.stage_layouts(spec, resolve_kv_dtype("auto", spec.dtype), parse_version(version), opts, pp)
    return engine.offload_tier(layouts, parse_version(version), opts, tp, Demand(8192, 8192, 1), None)


# ------------------------------------------------------------------------------------------ the allocator

def test_powerof2ceil_matches_the_measured_allocations():
    # PR #50094's table: torch.zeros(pin_memory=True) of 6, 10, 12 GiB took 8, 16, 16 GiB of RSS.
    for requested, (tensor_rss, _region_rss) in CASES["vllm-pr50094-pinned-tensor-vs-region"]["reported"][
            "rss_gib"].items():
        assert pinned_allocation_bytes(int(requested) * GIB) == tensor_rss * GIB
    # Issue #53042 (vLLM 0.26.0, gpu_worker.py's DEBUG line): torch.zeros((2053, 1089536), int8) is 2,236,817,408 B,
    # 4% over 2 GiB: 4 GiB each, 24 per rank = 96 GiB (the issue measured 96.2 GiB per rank); 1971 blocks stay
    # under 2 GiB.
    assert pinned_allocation_bytes(2053 * 1_089_536) == 4 * GIB
    assert 24 * pinned_allocation_bytes(2053 * 1_089_536) == 96 * GIB
    assert pinned_allocation_bytes(1971 * 1_089_536) == 2 * GIB
    # 400 GiB over 4 ranks and 24 tensors: ~4.17 GiB each -> 8 GiB, 192 GiB per rank (measured 192.2)
    assert 24 * pinned_allocation_bytes(400 * GIB // 4 // 24) == 192 * GIB
    assert pinned_allocation_bytes(0) == 0 and pinned_allocation_bytes(1) == 1


@given(st.integers(min_value=1, max_value=1 << 45))
def test_rounding_is_the_least_power_of_two_not_below(size):
    rounded = pinned_allocation_bytes(size)
    assert rounded >= size and rounded & (rounded - 1) == 0 and rounded < 2 * size


# ------------------------------------------------------------------------------------------ PR #48436

@pytest.mark.parametrize("version", ["0.14", "0.19", "0.21", "0.26"])
def test_pr48436_resident_set_per_worker(version):
    # TP 2, --kv-offloading-size 80: 40 GiB of blocks per worker, ~64 GiB resident (+3 GiB of the worker itself);
    # 64: 32 GiB, already a power of two. Llama-3.1-8B at tp 2: 32 layers x 4 KV heads x 128 x K+V x bf16 x 16 =
    # 1 MiB per block per rank. V1 runner (0.14-0.21, cpu_gpu.py / gpu_worker.py): one 40 GiB cross-layer tensor
    # -> 64 GiB. 0.26 defaults LlamaForCausalLM to the V2 runner (config/vllm.py _is_default_v2_model_runner_model),
    # one tensor per layer: 32 x 1.25 GiB -> 32 x 2 GiB = 64 GiB. Both ends agree here.
    config = CASES["vllm-pr48436-pinned-rounding-tp2"]["config"]
    assert config["tensor_parallel_size"] == 2 and config["kv_offloading_size"] == [64, 80]
    big = _tier("meta-llama/Llama-3.1-8B", version, 80, tp=2)
    assert big.blocks == 40_960 and big.held_bytes == 80 * GIB
    assert big.pinned_bytes == 2 * 64 * GIB  # ~64 GiB per worker
    assert big.to_dict()["pinned_bytes"] == 128 * GIB and big.to_dict()["held_bytes"] == 80 * GIB
    small = _tier("meta-llama/Llama-3.1-8B", version, 64, tp=2)
    assert small.pinned_bytes == small.held_bytes == 2 * 32 * GIB  # ~32 GiB per worker


def test_from_0_27_the_shared_region_pins_what_holds_blocks():
    # 0.27.0 vllm/v1/kv_offload/cpu/spec.py CPUOffloadingSpec.create_worker: a SharedOffloadRegion on CUDA (the
    # PR #48436 figure "after the fix": ~40 GiB per worker); 0.26.0's create_worker passes none.
    for version in ("0.27", "0.30", "0.32", "0.33"):
        tier = _tier("meta-llama/Llama-3.1-8B", version, 80, tp=2)
        assert tier.pinned_bytes == tier.held_bytes == 80 * GIB and tier.pinned_range is None
        assert not any("power of two" in n for n in tier.notes())


# ------------------------------------------------------------------------------------------ which tensors

def test_cross_layer_or_per_layer_llama_70b():
    # Llama-3.1-70B, tp 4, 200 GiB: 80 layers x 2 KV heads per rank x 128 x K+V x bf16 x 16 = 16,384 B per layer
    # page, 1,310,720 B per block per rank; 200 GiB // (1,310,720 x 4) = 40,960 blocks, 50 GiB per rank.
    # V1 runner: one 50 GiB tensor -> 64 GiB, x 4 ranks = 256 GiB. V2 runner: 80 x 640 MiB -> 80 x 1 GiB = 80 GiB
    # per rank, 320 GiB.
    settled = _tier("meta-llama/Llama-3.1-70B", "0.21", 200, tp=4)
    assert settled.blocks == 40_960 and settled.held_bytes == 200 * GIB
    assert settled.pinned_range == (256 * GIB, 256 * GIB) and settled.pinned_bytes == 256 * GIB
    assert any("one cross-layer torch tensor per worker of 53,687,091,200 B" in n for n in settled.notes())
    # 0.22-0.26: the runner is picked by architecture, which the tier does not see: both, the larger planned
    open_ = _tier("meta-llama/Llama-3.1-70B", "0.26", 200, tp=4)
    assert open_.pinned_range == (256 * GIB, 320 * GIB) and open_.pinned_bytes == 320 * GIB
    assert open_.to_dict()["pinned_bytes_range"] == [256 * GIB, 320 * GIB]
    assert any("V2 model runner" in n and "343,597,383,680 B" in n for n in open_.notes())


def test_mla_layered_stride_order_by_release():
    # DeepSeek-V2-Lite, tp 2, 10 GiB: 27 layers x 576 x bf16 x 64 tokens = 73,728 B per layer page, 1,990,656 B per
    # block; 10 GiB // (1,990,656 x 2) = 2,696 blocks. One tensor: 2,696 x 1,990,656 = 5,366,808,576 B -> 8 GiB.
    # Per layer: 2,696 x 73,728 = 198,770,688 B -> 256 MiB, x 27 = 6.75 GiB.
    lite = "deepseek-ai/DeepSeek-V2-Lite"
    cross, per_layer = 2 * 8 * GIB, 2 * 27 * 256 * 2**20
    # 0.14-0.17: MLACommonBackend.get_kv_cache_stride_order(True) = (1, 0, 2, 3): one cross-layer tensor
    assert _tier(lite, "0.17", 10, tp=2).pinned_range == (cross, cross)
    # 0.18-0.23: mla_attention.py gives (0, 1, 2, 3), layers outermost, which use_uniform_kv_cache refuses
    for version in ("0.18", "0.23"):
        tier = _tier(lite, version, 10, tp=2)
        assert tier.blocks == 2696 and tier.pinned_range == (per_layer, per_layer)
        assert any("one torch tensor per layer (27 on a worker" in n for n in tier.notes())
    # 0.24-0.26: FLASHMLA & co override with (1, 0, 2, 3) under V1; DeepseekV2ForCausalLM defaults to V2 (per layer)
    assert _tier(lite, "0.24", 10, tp=2).pinned_range == (per_layer, cross)


def test_each_pipeline_stage_allocates_its_own_tensor():
    # Llama-3.1-8B, pp 2 (16 layers a stage): 1 MiB per block per rank, 24 GiB // (1 MiB x 2) = 12,288 blocks;
    # each stage's worker holds one 12 GiB tensor -> 16 GiB: 32 GiB for 24 GiB of blocks (0.19, V1 runner).
    tier = _tier("meta-llama/Llama-3.1-8B", "0.19", 24, pp=2)
    assert tier.blocks == 12_288 and tier.held_bytes == 24 * GIB and tier.pinned_bytes == 32 * GIB


# ------------------------------------------------------------------------------------------ check

def _deployment(tmp_path: Path, version: str, memory: str):
    path = tmp_path / f"k8s-{version}.yaml"
    path.write_text(k8s_h100(f"""      - name: vllm
        image: vllm/vllm-openai:v{version}
        args: ["meta-llama/Llama-3.1-8B", "--max-model-len", "32768", "--kv-offloading-size", "80", "-tp", "2"]
        resources:
          limits: {{nvidia.com/gpu: 2, memory: {memory}}}
"""))
    report = check([str(path)])
    return report.deployments[0]


def test_check_counts_the_rounded_pinned_memory(tmp_path):
    # 80 GiB of blocks fits a 100 GiB limit only where the tier is pinned exactly (0.27+); 0.19 pins 128 GiB.
    old = _deployment(tmp_path, "0.19.0", "100Gi")
    codes = {f.code: f for f in old.findings}
    assert codes["host-memory"].severity == "error" and codes["host-memory"].value == 128 * GIB
    new = _deployment(tmp_path, "0.27.0", "100Gi")
    assert "host-memory" not in {f.code for f in new.findings}


# ------------------------------------------------------------------------------------------ LMCache values

KVT = "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"EXTRA}'"


def _lmcache(tmp_path: Path, env: str, extra: str = ""):
    kvt = KVT.replace("EXTRA", extra)
    path = tmp_path / "serve.sh"
    path.write_text(f"# kvplan/gpu: H100\n{env}\nvllm serve meta-llama/Llama-3.1-8B --max-model-len 8192 "
                    f"--kv-transfer-config {kvt}\n")
    result = check([str(path)]).deployments[0]
    return result, {f.code: f for f in result.findings}


def test_malformed_lmcache_variable_with_a_config_file_keeps_the_default(tmp_path):
    # LMCache 0.5.6 v1/config.py _update_config_from_env (the LMCACHE_CONFIG_FILE path): int('abc') raises, the
    # warning "Failed to parse LMCACHE_CHUNK_SIZE='abc'" is logged and chunk_size keeps the file's value or 256.
    result, codes = _lmcache(tmp_path, "export LMCACHE_CONFIG_FILE=/etc/lmcache.yaml\nexport LMCACHE_CHUNK_SIZE=abc")
    finding = codes["lmcache-value"]
    assert finding.severity == "warning" and "LMCACHE_CHUNK_SIZE 'abc'" in finding.message
    assert "default 256" in finding.message and finding.line == 4  # the command's line (export has none of its own)
    assert "invalid-input" not in codes and result.offload["block_size"] == 256


def test_malformed_lmcache_variable_without_a_file_is_none_not_the_default(tmp_path):
    # v1/config_base.py _from_env -> _apply_env_converter_safely returns None on a ValueError (the default is used
    # only for variables that are absent); max_local_cpu_size None then fails `config.max_local_cpu_size > 0`
    # (v1/storage_backend/__init__.py CreateStorageBackends) when vLLM starts.
    _, codes = _lmcache(tmp_path, "export LMCACHE_MAX_LOCAL_CPU_SIZE=8GB")
    finding = codes["invalid-input"]
    assert finding.severity == "error" and "LMCACHE_MAX_LOCAL_CPU_SIZE '8GB'" in finding.message
    assert "sets max_local_cpu_size to None, not its default" in finding.message and finding.line == 3
    # a disk size is only read by LocalDiskBackend: without LMCACHE_LOCAL_DISK the None is harmless
    result, codes = _lmcache(tmp_path, "export LMCACHE_MAX_LOCAL_DISK_SIZE=big")
    assert codes["lmcache-value"].severity == "warning" and result.offload["pinned_bytes"] == 5 * GIB


def test_malformed_extra_config_value_keeps_the_environment(tmp_path):
    # vllm_v1_adapter.py _apply_extra_config -> config_base.py validate_and_set_config_value: float('lots') fails,
    # LMCache warns and keeps LMCACHE_MAX_LOCAL_CPU_SIZE (8 GiB), or its default 5.0 without the variable.
    extra = ",\"kv_connector_extra_config\":{\"lmcache.max_local_cpu_size\":\"lots\"}"
    result, codes = _lmcache(tmp_path, "export LMCACHE_MAX_LOCAL_CPU_SIZE=8", extra)
    assert codes["lmcache-value"].severity == "warning" and "LMCACHE_MAX_LOCAL_CPU_SIZE '8'" in codes[
        "lmcache-value"].message
    assert result.offload["pinned_bytes"] == 8 * GIB
    result, codes = _lmcache(tmp_path, "", extra)
    assert "default 5.0" in codes["lmcache-value"].message and result.offload["pinned_bytes"] == 5 * GIB


def test_library_refuses_a_bad_explicit_lmcache_value():
    from kvplan.engines.vllm.lmcache import settings
    from kvplan.errors import UsageError

    with pytest.raises(UsageError, match="chunk_size 'abc'"):
        settings({"chunk_size": "abc"})
