"""Offload tiers against the engines' own logs and code paths (issue 13, "Done when": offload figures checked
against the engines' logs). The log excerpts and their sources are in tests/data/offload_logs_found.yaml."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

import kvplan
from kvplan.deploy import check
from kvplan.dtypes import resolve_kv_dtype
from kvplan.engines import get_engine, parse_version
from kvplan.engines.protocol import Demand, make_engine_options
from kvplan.engines.sglang.offload import offload_tier as sglang_tier
from kvplan.errors import UsageError
from kvplan.logs import parse_text
from kvplan.spec import LayerSpec, ModelSpec

GIB = 1 << 30
DATA = yaml.safe_load((Path(__file__).parent / "data" / "offload_logs_found.yaml").read_text())
CASES = {c["id"]: c for c in DATA["cases"]}

# Qwen/Qwen3-1.7B config.json: 28 layers, 8 KV heads, head_dim 128, bf16 (114,688 B per token with K and V)
QWEN3_1_7B = ModelSpec(id="Qwen/Qwen3-1.7B", model_type="qwen3",
                       layers=(LayerSpec(kind="full", count=28, kv_heads=8, head_dim=128),),
                       num_attention_heads=16, max_position_embeddings=40960)


def _vllm_tier(spec: ModelSpec | str, version: str, tp: int = 1, mml: int = 8192, **options: object):
    engine = get_engine("vllm")
    spec = kvplan.load_model(spec) if isinstance(spec, str) else spec
    opts = make_engine_options(tp=tp, **options)
    layouts = engine.stage_layouts(spec, resolve_kv_dtype("auto", spec.dtype), parse_version(version), opts, 1)
    return engine.offload_tier(layouts, parse_version(version), opts, tp, Demand(mml, mml, 1), None)


def _capacity(tokens: int) -> Any:
    """The device pool the host tier is sized from (SGLang's rule reads only its token count)."""
    return SimpleNamespace(kv_cache_tokens=tokens)


# ------------------------------------------------------------------------------------------ SGLang

def test_sglang_hicache_ratio_log():
    # A real SGLang 0.5.15 log (tests/data/offload_logs_found.yaml): Qwen3-1.7B, DP attention (each DP rank holds
    # all 8 KV heads), the default --hicache-ratio 2.0 on a 1,547,424-token device pool printed
    # "Allocating 354.94 GB host memory for hierarchical KV cache." (pool_host/base.py HostKVCache: bytes / 1e9).
    case = CASES["sglang-0.5.15-qwen3-1.7b-hicache-ratio-dp4"]
    log = parse_text(case["log_excerpt"])
    assert log.engine == "sglang" and log.kv_cache_tokens == 1_547_424
    printed = case["reported"]["host_pool_gb_per_rank"]
    assert any(f"{printed:.2f} GB (10^9 B) of pinned host memory per rank" in n for n in log.notes)

    engine = get_engine("sglang")
    opts = make_engine_options(tp=1, hicache_ratio=None, hicache_size_gb=None)
    layouts = engine.stage_layouts(QWEN3_1_7B, resolve_kv_dtype("auto", QWEN3_1_7B.dtype), parse_version("0.5"),
                                   opts, 1)
    tier = sglang_tier(layouts, make_engine_options(tp=1, hicache_ratio=2.0), 1, Demand(40960, 40960, 1),
                       _capacity(log.kv_cache_tokens))
    assert tier is not None
    assert tier.tokens == 3_094_849  # int(1,547,424 x 2.0) // 1 + 1 page of 1 token
    assert tier.pinned_bytes == 3_094_849 * 114_688 == 354_942_042_112
    assert f"{tier.pinned_bytes / 1e9:.2f}" == f"{printed:.2f}"


def test_sglang_hicache_log_line_needs_the_pool_it_names():
    # The size flag prints its own figure back: --hicache-size 120 on any model whose page is under 5 MB prints
    # 120.00 (the GLM-5.2 line of sgl-project/sglang#31600 cannot check more than that; see the data file).
    llama = kvplan.load_model("meta-llama/Llama-3.1-8B")
    engine = get_engine("sglang")
    opts = make_engine_options(tp=1, hicache_size_gb=120)
    layouts = engine.stage_layouts(llama, resolve_kv_dtype("auto", llama.dtype), parse_version("0.5"), opts, 1)
    tier = sglang_tier(layouts, opts, 1, Demand(8192, 8192, 1), _capacity(100_000))
    assert f"{tier.pinned_bytes / 1e9:.2f}" == "120.00"
    assert tier.tokens == 120 * 10**9 // 131_072 + 1


# ------------------------------------------------------------------------------------------ vLLM V0

def test_vllm_v0_log_cpu_blocks_read_and_reproduced():
    case = CASES["vllm-pr12126-llama32-11b-vision-h100-v0-cpu-blocks"]
    log = parse_text(case["log_excerpt"])
    assert log.engine == "vllm" and log.num_gpu_blocks == 6001
    assert "host KV tier (vLLM V0 swap space): 1,638 CPU blocks" in log.notes
    vision = ModelSpec(id="llama-3.2-11b-vision-text", model_type="mllama",
                       layers=(LayerSpec(kind="full", count=40, kv_heads=8, head_dim=128),),
                       num_attention_heads=32, max_position_embeddings=131072)
    tier = _vllm_tier(vision, "0.6", mml=65536, swap_space_bytes=4 * GIB)
    assert tier.blocks == case["reported"]["num_cpu_blocks"]
    assert any("'# CPU blocks: 1638'" in note for note in tier.notes())


# ------------------------------------------------------------------------------------------ vLLM V1

def test_kv_offloading_size_release_gates():
    # The flag: vllm-project/vllm PR #27621, first released in v0.11.1 (absent from v0.11.0's CacheConfig).
    with pytest.raises(UsageError, match="0.11.1") as refused:
        _vllm_tier("meta-llama/Llama-3.1-8B", "0.11", kv_offloading_bytes=8 * GIB)
    assert refused.value.field == "kv_offloading_bytes"
    # 0.11.1-0.13: the native backend passes num_cpu_blocks 0 and CPUOffloadingSpec raises at start-up.
    for version in ("0.11.1", "0.12", "0.13.0"):
        with pytest.raises(UsageError, match="fail to start"):
            _vllm_tier("meta-llama/Llama-3.1-8B", version, kv_offloading_bytes=8 * GIB)
    # 0.14: cpu_bytes_to_use = 8 GiB; Llama-3.1-8B: 32 layers x 65,536 B per 16-token page = 2 MiB per block
    assert _vllm_tier("meta-llama/Llama-3.1-8B", "0.14", kv_offloading_bytes=8 * GIB).blocks == 4096


def test_native_offloading_pinned_rounding_is_said_before_0_33():
    # vllm/v1/kv_offload/worker/cpu_gpu.py (0.14-0.19) and cpu/gpu_worker.py (0.21, 0.26): one
    # torch.zeros(..., pin_memory=True) per CPU tensor, rounded up to a power of two by PyTorch (PR #48436).
    old = _vllm_tier("meta-llama/Llama-3.1-8B", "0.26", tp=2, kv_offloading_bytes=80 * GIB)
    assert any("power of two" in n for n in old.notes())
    new = _vllm_tier("meta-llama/Llama-3.1-8B", "0.33", tp=2, kv_offloading_bytes=80 * GIB)
    assert not any("power of two" in n for n in new.notes())
    assert old.blocks == new.blocks == 80 * GIB // (2 * 1_048_576)  # 1 MiB per block per rank at tp 2


def test_vllm_0_33_one_mla_replica_at_tp():
    # DeepSeek-V2-Lite (MLA, vLLM's 64-token MLA block): 27 layers x (512 + 64) x bf16 x 64 = 1,990,656 B per
    # block per rank. 0.26 (cpu/spec.py): cpu_bytes // (1,990,656 x world_size). 0.33 keeps one replica of the
    # latent for all tensor-parallel ranks (replicated_layout, kv_offload/config.py).
    lite = "deepseek-ai/DeepSeek-V2-Lite"
    old = _vllm_tier(lite, "0.26", tp=2, kv_offloading_bytes=10 * GIB)
    assert old.blocks == 10 * GIB // (1_990_656 * 2) == 2696
    new = _vllm_tier(lite, "0.33", tp=2, kv_offloading_bytes=10 * GIB)
    assert new.blocks == 10 * GIB // 1_990_656 == 5393
    assert new.pinned_bytes == 5393 * 1_990_656
    assert any("replicated_layout" in n for n in new.notes())
    single = _vllm_tier(lite, "0.33", tp=1, kv_offloading_bytes=10 * GIB)
    assert single.blocks == 5393 and not any("replicated_layout" in n for n in single.notes())


def test_vllm_0_33_rounds_a_chunk_up_to_the_page():
    # 0.33 cpu/spec.py: round_up(kv_bytes_per_chunk, SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT = mmap.PAGESIZE).
    # 3 layers x 1 KV head x 72 x K+V x bf16 x 16 tokens = 13,824 B per block, 16,384 B once aligned.
    odd = ModelSpec(id="odd", model_type="llama", layers=(LayerSpec(kind="full", count=3, kv_heads=1, head_dim=72),),
                    num_attention_heads=1, max_position_embeddings=4096)
    assert _vllm_tier(odd, "0.26", kv_offloading_bytes=GIB).blocks == GIB // 13_824 == 77_672
    aligned = _vllm_tier(odd, "0.33", kv_offloading_bytes=GIB)
    assert aligned.blocks == GIB // 16_384 and aligned.pinned_bytes == GIB


def test_simple_cpu_offload_log_line_is_read():
    # vllm/v1/simple_kv_offload/manager.py (0.19) logs the scheduler's blocks and its per-rank capacity in GiB:
    # num_cpu_blocks = max(1, num_gpu_blocks x per_rank // gpu_total_bytes) = per_rank // bytes per block, the
    # native connector's count. The line below is that format filled with kvplan's figure (no real log was found).
    tier = _vllm_tier("meta-llama/Llama-3.1-8B", "0.19", kv_offloading_bytes=8 * GIB)
    line = (f"(EngineCore_DP0 pid=1) INFO 04-01 10:00:00 [manager.py:99] SimpleCPUOffloadScheduler: Allocating "
            f"{tier.blocks} CPU blocks (8.00 GB, mode=eager)")
    log = parse_text("INFO [kv_cache_utils.py:1087] GPU KV cache size: 463,424 tokens\n" + line)
    assert "host KV tier (SimpleCPUOffloadConnector): 4,096 CPU blocks, 8.00 GiB per rank" in log.notes


# ------------------------------------------------------------------------------------------ check

def _script(tmp_path: Path, body: str, version: str) -> Path:
    path = tmp_path / f"serve-{version}.sh"
    path.write_text(f"# kvplan/gpu: H100\n# kvplan/engine-version: {version}\n{body}\n")
    return path


def _result(path: Path):
    report = check([str(path)])
    assert len(report.deployments) == 1
    return report.deployments[0]


def test_check_v0_default_swap_space(tmp_path):
    # CacheConfig.swap_space = 4 (vllm 0.8.5 vllm/config.py; 0.10.1.1 vllm/config/cache.py): V0 pins 4 GiB per GPU.
    llama = "meta-llama/Llama-3.1-8B"
    v0 = _result(_script(tmp_path, f"VLLM_USE_V1=0 vllm serve {llama} --max-model-len 8192", "0.8.5"))
    assert v0.offload is not None and v0.offload["blocks"] == 4 * GIB // 2_097_152
    assert any(f.code == "default-swap" for f in v0.findings)
    old = _result(_script(tmp_path, f"vllm serve {llama} --max-model-len 8192", "0.6"))
    assert old.offload is not None and old.offload["blocks"] == 2048
    v1 = _result(_script(tmp_path, f"vllm serve {llama} --max-model-len 8192 --swap-space 8", "0.10"))
    assert v1.offload is None and any(f.code == "not-read" for f in v1.findings)
    exported = _result(_script(tmp_path, f"export VLLM_USE_V1=0\nvllm serve {llama} --max-model-len 8192 "
                                         "--swap-space 2", "0.9"))
    assert exported.offload is not None and exported.offload["blocks"] == 1024


def test_check_simple_kv_offload_env(tmp_path):
    llama = "meta-llama/Llama-3.1-8B"
    on = _result(_script(tmp_path, f"VLLM_USE_SIMPLE_KV_OFFLOAD=1 vllm serve {llama} --max-model-len 8192 "
                                   "--kv-offloading-size 8", "0.19"))
    assert on.offload is not None and on.offload["blocks"] == 4096
    assert any(f.code == "simple-offload" for f in on.findings)
    off = _result(_script(tmp_path, f"VLLM_USE_SIMPLE_KV_OFFLOAD=1 vllm serve {llama} --max-model-len 8192 "
                                    "--kv-offloading-size 8 --no-enable-prefix-caching", "0.19"))
    assert off.offload is None and any(f.code == "offload-off" and f.severity == "warning" for f in off.findings)
    early = _result(_script(tmp_path, f"VLLM_USE_SIMPLE_KV_OFFLOAD=1 vllm serve {llama} --max-model-len 8192",
                            "0.18"))
    assert any(f.code == "not-read" and "0.19" in f.message for f in early.findings)


def test_check_offloading_size_before_0_14(tmp_path):
    llama = "meta-llama/Llama-3.1-8B"
    silent = _result(_script(tmp_path, f"vllm serve {llama} --max-model-len 8192 --kv-offloading-size 8", "0.12"))
    assert silent.offload is None and any(f.code == "not-read" for f in silent.findings)
    native = _result(_script(tmp_path, f"vllm serve {llama} --max-model-len 8192 --kv-offloading-size 8 "
                                       "--kv-offloading-backend native", "0.13"))
    assert any(f.severity == "error" and "fail to start" in f.message for f in native.findings)


def test_compose_environment_reaches_the_reader(tmp_path):
    path = tmp_path / "compose.yaml"
    path.write_text("services:\n  llm:\n    image: vllm/vllm-openai:v0.9.2\n    environment:\n"
                    "      - VLLM_USE_V1=0\n"
                    "    command: [\"--model\", \"meta-llama/Llama-3.1-8B\", \"--max-model-len\", \"8192\"]\n"
                    "    x-kvplan:\n      gpu: H100\n")
    result = _result(path)
    assert result.offload is not None and result.offload["blocks"] == 2048


def test_v0_shares_no_prefix_unless_asked():
    # vllm 0.8.5 arg_utils.py: _set_default_args_v1 turns prefix caching on; V0 keeps CacheConfig's False.
    from kvplan.engines.vllm.flags import is_v0, read_serve

    assert read_serve({}, "0.6").sharing is False
    assert read_serve({"enable_prefix_caching": True}, "0.6").sharing is True
    assert read_serve({}, "0.33").sharing is True
    assert is_v0("0.7", {}) and not is_v0("0.7", {"VLLM_USE_V1": "1"})
    assert not is_v0("0.9", {}) and is_v0("0.9", {"VLLM_USE_V1": "0"}) and not is_v0("0.11", {"VLLM_USE_V1": "0"})
    with pytest.raises(UsageError) as refused:
        read_serve({"VLLM_USE_V1": "yes"}, "0.9")
    assert refused.value.field == "environment"
