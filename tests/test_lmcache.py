"""LMCache's local CPU and disk tiers under vLLM: golden numbers worked from LMCache 0.5.6's source.

Sources (the PyPI wheel lmcache-0.5.6): v1/config.py _CONFIG_DEFINITIONS (defaults), v1/config_base.py
(LMCACHE_ environment names), v1/metadata.py LMCacheMetadata.get_shapes (a chunk is [kv_size, layers,
chunk_size, heads x head_size] of the rank's own cache), v1/memory_management.py AddressManager (4,096-B
aligned allocations), v1/storage_backend/local_cpu_backend.py initialize_allocator (int(GB x 1024**3)),
v1/storage_backend/local_disk_backend.py (int(GB x 1024**3), physical sizes), v1/cache_engine.py post_init
(MLA: rank 0 alone stores), integration/vllm/vllm_v1_adapter.py ReqMeta.from_request_tracker (whole chunks).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvplan
from kvplan.dtypes import resolve_kv_dtype
from kvplan.engines import get_engine, parse_version
from kvplan.engines.protocol import Demand, make_engine_options
from kvplan.engines.vllm.lmcache import settings, vllm_offloading
from kvplan.errors import UsageError
from kvplan.spec import LayerSpec, ModelSpec

GIB = 1 << 30


def _tier(spec: ModelSpec, lmcache: dict, tp: int = 1, pp: int = 1, mml: int = 65536, kv_dtype: str = "auto"):
    engine = get_engine("vllm")
    opts = make_engine_options(tp=tp, lmcache=lmcache)
    version = parse_version("0.33")
    layouts = engine.stage_layouts(spec, resolve_kv_dtype(kv_dtype, spec.dtype), version, opts, pp)
    return engine.offload_tier(layouts, version, opts, tp, Demand(mml, mml, 1), None)


# 3 layers x 1 KV head x 80 x K+V x bf16 = 960 B per token: chunks that are not 4,096-B multiples
SMALL = ModelSpec(id="small", model_type="llama", layers=(LayerSpec(kind="full", count=3, kv_heads=1, head_dim=80),),
                  num_attention_heads=4, max_position_embeddings=65536)


def test_defaults_are_lmcaches() -> None:
    s = settings({})
    assert (s.chunk_size, s.local_cpu, s.max_local_cpu_size, s.local_disk, s.max_local_disk_size) == \
        (256, True, 5.0, None, 0.0)
    assert not s.save_unfull_chunk and not s.save_decode_cache


def test_environment_names_and_values_parse_as_lmcache_parses_them() -> None:
    s = settings({"LMCACHE_CHUNK_SIZE": "512", "LMCACHE_LOCAL_CPU": "False", "LMCACHE_MAX_LOCAL_CPU_SIZE": "2.5",
                  "LMCACHE_LOCAL_DISK": "file:///mnt/nvme0/,file:///mnt/nvme1/", "LMCACHE_MAX_LOCAL_DISK_SIZE": "100",
                  "LMCACHE_SAVE_UNFULL_CHUNK": "1"})
    assert s.chunk_size == 512 and s.local_cpu is False and s.max_local_cpu_size == 2.5
    assert s.local_disk == "/mnt/nvme0/,/mnt/nvme1/" and s.max_local_disk_size == 100.0
    assert s.save_unfull_chunk is True
    # "lmcache."-prefixed keys of kv_connector_extra_config
    assert settings({"lmcache.chunk_size": 128}).chunk_size == 128
    # enable_blending is noted; blending forces save_unfull_chunk (config.py _validate_config)
    assert settings({"LMCACHE_ENABLE_BLENDING": "true"}).enable_blending


def test_vllm_kv_offloading_backend_splits_the_size_over_ranks() -> None:
    # vllm/config/vllm.py _post_init_kv_transfer_config: kv_offloading_size / (tp x pp) per rank
    assert vllm_offloading(200, 8) == {"local_cpu": True, "max_local_cpu_size": 25.0}


def test_llama_70b_tp4_cpu_and_disk_tiers() -> None:
    # One rank: 80 layers x 2 KV heads x 128 x K+V x bf16 = 81,920 B per token; a 256-token chunk is
    # 20,971,520 B (already 4,096-aligned). 50 GiB per rank // 20,971,520 = 2,560 chunks = 655,360 tokens;
    # a 131,072-token request is 512 chunks: 5 of them. 500 GiB of disk per rank: 25,600 chunks, 50 requests.
    spec = kvplan.load_model("meta-llama/Llama-3.1-70B")
    tier = _tier(spec, {"max_local_cpu_size": 50, "local_disk": "/nvme", "max_local_disk_size": 500},
                 tp=4, mml=131072)
    assert tier.blocks == 2560 and tier.block_size == 256 and tier.tokens == 655_360
    assert tier.requests == 5
    assert tier.pinned_bytes == 4 * 50 * GIB  # every rank pins its whole pool at start-up
    assert tier.request_bytes_per_gpu == 131_072 * 81_920
    assert tier.disk is not None
    assert tier.disk.blocks == 25_600 and tier.disk.requests == 50 and tier.disk.disk_bytes == 4 * 500 * GIB
    d = tier.to_dict()
    assert d["disk"]["tokens"] == 25_600 * 256


def test_chunks_are_aligned_to_4096_bytes_in_the_pool() -> None:
    # chunk_size 100: 100 x 960 = 96,000 B, 98,304 B aligned (24 x 4,096); 1 GiB // 98,304 = 10,922 chunks
    tier = _tier(SMALL, {"max_local_cpu_size": 1, "chunk_size": 100}, mml=1050)
    assert tier.blocks == 10_922 and tier.tokens == 1_092_200
    # a 1,050-token request stores 1,000 tokens (10 whole chunks): 10 x 98,304 B, 1,092 requests
    assert tier.requests == GIB // (10 * 98_304) == 1092
    assert tier.request_bytes_per_gpu == 1000 * 960


def test_unfull_chunk_is_stored_with_its_own_aligned_size() -> None:
    # save_unfull_chunk: 1,000 tokens = 3 chunks of 256 (245,760 B each) + 232 tokens (222,720 B -> 225,280 B)
    tier = _tier(SMALL, {"max_local_cpu_size": 1, "save_unfull_chunk": "true"}, mml=1000)
    assert tier.requests == GIB // (3 * 245_760 + 225_280)
    assert tier.request_bytes_per_gpu == 1000 * 960
    whole = _tier(SMALL, {"max_local_cpu_size": 1}, mml=1000)
    assert whole.request_bytes_per_gpu == 768 * 960


def test_mla_is_stored_by_rank_0_only() -> None:
    # DeepSeek-V3: 61 layers x (512 + 64) x bf16 = 70,272 B per token on every rank; a chunk is 17,989,632 B.
    # save_only_first_rank (on for MLA): rank 0 alone pins 20 GiB; 20 GiB // 17,989,632 = 1,193 chunks.
    spec = kvplan.load_model("deepseek-ai/DeepSeek-V3")
    tier = _tier(spec, {"max_local_cpu_size": 20}, tp=8, mml=32768, kv_dtype="bf16")
    assert tier.blocks == 1193 and tier.pinned_bytes == 20 * GIB
    assert tier.requests == 9  # 128 chunks per 32,768-token request
    off = _tier(spec, {"max_local_cpu_size": 20, "extra_config": '{"save_only_first_rank": false}'}, tp=8,
                mml=32768, kv_dtype="bf16")
    assert off.pinned_bytes == 8 * 20 * GIB
    with pytest.raises(UsageError, match="rank 0"):
        _tier(spec, {"max_local_cpu_size": 20}, tp=4, pp=2, kv_dtype="bf16")


def test_pipeline_stages_each_store_their_own_layers() -> None:
    spec = kvplan.load_model("meta-llama/Llama-3.1-8B")  # 32 layers, 4,096 B per token per layer
    tier = _tier(spec, {"max_local_cpu_size": 4}, pp=2)
    assert tier.blocks == 4 * GIB // (256 * 16 * 4096)
    assert tier.pinned_bytes == 2 * 4 * GIB


def test_disk_without_a_cpu_pool_is_refused_as_lmcache_asserts() -> None:
    with pytest.raises(UsageError, match="LocalCPUBackend"):
        _tier(SMALL, {"max_local_cpu_size": 0, "local_disk": "/d", "max_local_disk_size": 10})


def test_local_cpu_off_keeps_a_staging_pool_and_no_chunks() -> None:
    tier = _tier(SMALL, {"local_cpu": False, "local_disk": "/d", "max_local_disk_size": 1})
    assert tier.blocks == 0 and tier.pinned_bytes == 5 * GIB  # the default 5.0 GiB pool is still pinned
    assert tier.disk is not None and tier.disk.blocks == GIB // 245_760
    assert any("only stages chunks" in n for n in tier.notes())


@pytest.mark.parametrize("bad", [{"chunk_size": 0}, {"chunk_size": "x"}, {"max_local_cpu_size": -1},
                                 {"extra_config": "{not json"}])
def test_bad_settings_are_one_line_errors(bad: dict) -> None:
    with pytest.raises(UsageError) as info:
        _tier(SMALL, bad)
    assert info.value.field == "lmcache" and "\n" not in str(info.value)


def test_sliding_models_and_scaled_dtypes_are_refused_with_the_reason() -> None:
    with pytest.raises(UsageError, match="sliding"):
        _tier(kvplan.load_model("google/gemma-3-27b-it"), {})
    with pytest.raises(UsageError, match="int8_per_token_head"):
        _tier(SMALL, {}, kv_dtype="int8_per_token_head")


def test_max_batch_reports_the_tier_and_its_assumptions() -> None:
    plan = kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="H100-80GB", max_model_len=32768,
                            engine_options={"lmcache": {"max_local_cpu_size": 10}})
    assert plan.offload is not None and plan.offload["block_size"] == 256
    assert any("LMCache allocates its CPU pool whole" in a for a in plan.assumptions)
    assert any("LMCache defaults assumed" in a for a in plan.assumptions)
    with pytest.raises(UsageError):
        kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="H100-80GB", engine="sglang",
                         engine_options={"lmcache": {"max_local_cpu_size": 10}})


# ------------------------------------------------------------------------------------------ kvplan check

def _check(tmp_path, name: str, text: str):
    from kvplan.deploy import check

    path = tmp_path / name
    path.write_text(text)
    report = check([str(path)])
    assert len(report.deployments) == 1
    result = report.deployments[0]
    return result, {f.code: f for f in result.findings}


K8S = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: llm}}
spec:
  template:
    spec:
      nodeSelector: {{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        args: ["meta-llama/Llama-3.1-8B", "--max-model-len", "32768", "--kv-transfer-config",
               '{{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both","kv_connector_extra_config":{{"lmcache.max_local_cpu_size":{extra}}}}}']
        env:
        - {{name: LMCACHE_CHUNK_SIZE, value: "512"}}
        - {{name: LMCACHE_MAX_LOCAL_CPU_SIZE, value: "8"}}
        resources:
          limits: {{nvidia.com/gpu: 1, memory: {memory}}}
"""


def test_check_reads_the_connector_and_lmcache_env_from_kubernetes(tmp_path):
    # env gives chunk 512 and 8 GiB, the connector's extra config overrides the size (vllm_v1_adapter.py
    # _apply_extra_config): 40 GiB // (512 x 131,072 B) = 640 chunks
    result, codes = _check(tmp_path, "k8s.yaml", K8S.format(extra=40, memory="64Gi"))
    assert result.offload["block_size"] == 512 and result.offload["blocks"] == 640
    assert result.offload["pinned_bytes"] == 40 * GIB
    assert "host-memory" not in codes


def test_pinned_pool_above_the_memory_limit_is_an_error(tmp_path):
    result, codes = _check(tmp_path, "k8s.yaml", K8S.format(extra=40, memory="32Gi"))
    finding = codes["host-memory"]
    assert finding.severity == "error" and finding.value == 40 * GIB and finding.fits == 32 * GIB
    assert finding.line == 17  # the line of the memory limit


def test_lmcache_env_without_the_connector_is_a_note(tmp_path):
    text = ("# kvplan/gpu: H100\nexport LMCACHE_CHUNK_SIZE=512\n"
            "vllm serve meta-llama/Llama-3.1-8B --max-model-len 8192\n")
    result, codes = _check(tmp_path, "serve.sh", text)
    assert result.offload is None and codes["not-read"].severity == "note"


def test_shell_prefix_and_compose_environment_are_read(tmp_path):
    kvt = "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'"
    text = (f"# kvplan/gpu: H100\nLMCACHE_MAX_LOCAL_CPU_SIZE=2 LMCACHE_LOCAL_DISK=file:///nvme "
            f"LMCACHE_MAX_LOCAL_DISK_SIZE=20 vllm serve meta-llama/Llama-3.1-8B --max-model-len 8192 "
            f"--kv-transfer-config {kvt}\n")
    result, _ = _check(tmp_path, "serve.sh", text)
    assert result.offload["blocks"] == 2 * GIB // 33_554_432 and result.offload["disk"]["blocks"] == 640
    compose = """services:
  llm:
    image: vllm/vllm-openai:v0.11.0
    command: ["meta-llama/Llama-3.1-8B", "--max-model-len", "8192", "--kv-offloading-backend", "lmcache",
              "--kv-offloading-size", "16", "-tp", "2"]
    environment:
      - LMCACHE_CHUNK_SIZE=1024
    mem_limit: 16g
    labels: ["kvplan/gpu=H100"]
"""
    result, codes = _check(tmp_path, "compose.yaml", compose)
    # 16 GiB over 2 ranks = 8 GiB each; a 1,024-token chunk of one rank is 1,024 x 65,536 = 64 MiB: 128
    assert result.offload["block_size"] == 1024 and result.offload["blocks"] == 128
    assert "host-memory" not in codes  # 2 x 8 GiB = 16 GiB: exactly the limit


def test_config_file_is_said_not_read_and_bad_values_point_at_the_deployment(tmp_path):
    kvt = "'{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'"
    text = (f"# kvplan/gpu: H100\nexport LMCACHE_CONFIG_FILE=/etc/lmcache.yaml\nvllm serve meta-llama/Llama-3.1-8B "
            f"--max-model-len 8192 --kv-transfer-config {kvt}\n")
    result, codes = _check(tmp_path, "serve.sh", text)
    assert codes["not-read"].severity == "warning" and result.offload["block_size"] == 256
    bad = text.replace("LMCACHE_CONFIG_FILE=/etc/lmcache.yaml", "LMCACHE_CHUNK_SIZE=abc")
    _, codes = _check(tmp_path, "bad.sh", bad)
    assert codes["invalid-input"].invalid_input


def test_quantities() -> None:
    from kvplan.deploy.host_memory import docker_bytes, k8s_quantity

    assert k8s_quantity("64Gi") == 64 * GIB and k8s_quantity("500M") == 500 * 10**6
    assert k8s_quantity("1e9") == 10**9 and k8s_quantity("129e6") == 129 * 10**6
    assert k8s_quantity("1500m") == 2 and k8s_quantity("12x") is None
    assert docker_bytes("16g") == 16 * GIB and docker_bytes("512mb") == 512 * 2**20 and docker_bytes("2048") == 2048


@given(st.text("0123456789", min_size=1, max_size=12), st.sampled_from(["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M",
                                                                       "G", "T", "P", "E"]))
def test_whole_quantities_are_the_decimal_products(number: str, unit: str) -> None:
    """A whole quantity with a unit is computed on integers (no decimal import): the bytes Decimal gives."""
    from decimal import Decimal

    from kvplan.deploy.host_memory import _K8S_BINARY, _K8S_DECIMAL, k8s_quantity

    value = Decimal(number) * {**_K8S_BINARY, **_K8S_DECIMAL, "": 1}[unit]
    assert k8s_quantity(number + unit) == int(value) + (1 if value > int(value) else 0)


# ------------------------------------------------------------------------------------------ max-batch CLI

def test_max_batch_cli_lmcache_backend_and_config_file(tmp_path, capsys):
    import json

    from kvplan.cli import main

    code = main(["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100-80GB", "--tp", "4", "--max-model-len",
                 "131072", "--kv-offloading-backend", "lmcache", "--kv-offloading-size", "200", "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["offload"]["blocks"] == 2560 and doc["offload"]["disk"] is None  # 50 GiB per rank
    config = tmp_path / "lmcache.yaml"
    config.write_text("chunk_size: 512\nmax_local_cpu_size: 10\nlocal_disk: file:///nvme\nmax_local_disk_size: 100\n")
    code = main(["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100-80GB", "--tp", "4", "--max-model-len",
                 "131072", "--lmcache-config", str(config), "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    # 10 GiB // (512 x 81,920 B) = 256 chunks; 100 GiB: 2,560
    assert code == 0 and doc["offload"]["blocks"] == 256 and doc["offload"]["disk"]["blocks"] == 2560


@pytest.mark.parametrize("args, flag", [
    (["--kv-offloading-backend", "lmcache"], "--kv-offloading-backend"),
    (["--kv-offloading-backend", "x", "--kv-offloading-size", "5"], "--kv-offloading-backend"),
    (["--lmcache-config", "/nonexistent/lmcache.yaml"], "--lmcache-config"),
    (["--lmcache-config", "CONFIG", "-e", "sglang"], "--lmcache-config"),
])
def test_max_batch_cli_lmcache_mistakes_are_one_line(tmp_path, capsys, args, flag):
    from kvplan.cli import main

    config = tmp_path / "c.yaml"
    config.write_text("chunk_size: 256\n")
    args = [str(config) if a == "CONFIG" else a for a in args]
    code = main(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100-80GB", *args])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"kvplan: error: {flag}:")


def test_lmcache_env_from_elsewhere_is_an_unknown_value(tmp_path):
    text = K8S.format(extra=40, memory="64Gi").replace(
        '        - {name: LMCACHE_CHUNK_SIZE, value: "512"}\n',
        "        - name: LMCACHE_CHUNK_SIZE\n          valueFrom: {configMapKeyRef: {name: lm, key: chunk}}\n")
    result, codes = _check(tmp_path, "k8s.yaml", text)
    assert codes["unknown-value"].severity == "warning" and "LMCACHE_CHUNK_SIZE" in codes["unknown-value"].message
    assert result.offload["block_size"] == 256  # LMCache's default, said in the assumptions


@given(cpu=st.floats(0.01, 64), chunk=st.integers(1, 2048), mml=st.integers(1, 300_000),
       unfull=st.booleans())
def test_a_tier_never_holds_more_than_its_pool(cpu: float, chunk: int, mml: int, unfull: bool) -> None:
    tier = _tier(SMALL, {"max_local_cpu_size": cpu, "chunk_size": chunk, "save_unfull_chunk": unfull}, mml=mml)
    pool = int(cpu * GIB)
    phys = -(-chunk * 960 // 4096) * 4096
    assert tier.blocks * phys <= pool < (tier.blocks + 1) * phys
    assert tier.tokens == tier.blocks * chunk
    stored = tier.request_bytes_per_gpu // 960
    assert stored == (mml if unfull else mml // chunk * chunk)
    assert tier.requests * stored <= tier.tokens + (tier.requests if unfull else 0) * chunk


def test_settings_kvplan_does_not_read_are_named() -> None:
    # vllm_v1_adapter.py reads LMCACHE_FORCE_SKIP_SAVE to store nothing: kvplan names it rather than ignore it
    tier = _tier(SMALL, {"LMCACHE_FORCE_SKIP_SAVE": "1", "remote_url": "lm://cache:65432"})
    note = next(n for n in tier.notes() if n.startswith("LMCache settings kvplan does not read"))
    assert "force_skip_save=1" in note and "remote_url=lm://cache:65432" in note
    many = _tier(SMALL, {f"x{i}": i for i in range(20)})
    assert "and 12 more" in next(n for n in many.notes() if "does not read" in n)
