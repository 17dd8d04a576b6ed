"""kvplan check reads the serve flags for offload tiers, weight offload, prefix sharing and speculation,
and kvplan's deployment file names a shared prefix and a sampling width (issues 12 item 6, 13 items 3-4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
import kvplan
from kvplan.budgets import Settings
from kvplan.budgets.base import MemoryItem
from kvplan.cli import main
from kvplan.deploy import check
from kvplan.deploy.flags import Token, find_invocation
from kvplan.deploy.kvplan_file import schema
from kvplan.engines.vllm.offload import weights_on_gpu
from kvplan.render.check_out import render

GIB = 1 << 30
LLAMA8 = "meta-llama/Llama-3.1-8B"
# Llama-3.1-8B: 32 layers x 8 KV heads x 128 x K+V x bf16 = 131,072 B per token, 2,097,152 B per 16-token block
BLOCK = 2_097_152


def _shell(tmp_path: Path, text: str, name: str = "serve.sh") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _one(path: Path):
    report = check([str(path)])
    assert len(report.deployments) == 1, render(report, "table")
    return report, report.deployments[0]


def _codes(result) -> dict[str, str]:
    return {f.code: f.severity for f in result.findings}


def _tokens(line: str) -> list[Token]:
    return [Token(w, 1) for w in line.split()]


# ----------------------------------------------------------------------------------------- flags

def test_vllm_offload_flags_parse_like_vllm():
    inv = find_invocation(_tokens(f"vllm serve {LLAMA8} --kv_offloading_size=100 --kv-offloading-backend native "
                                  "--swap-space 8 --cpu-offload-gb 4 --no-enable-prefix-caching --max-model-len 8k"))
    assert inv is not None
    assert {k: o.value for k, o in inv.options.items()} == {
        "kv_offloading_size": "100", "kv_offloading_backend": "native", "swap_space": "8", "cpu_offload_gb": "4",
        "no_enable_prefix_caching": "true", "max_model_len": "8k"}


def test_sglang_flags_parse_like_sglang():
    inv = find_invocation(_tokens(f"python -m sglang.launch_server --model-path {LLAMA8} --enable-hierarchical-cache "
                                  "--hicache-size 100 --disable-radix-cache --speculative-algorithm EAGLE "
                                  "--speculative-num-draft-tokens 4"))
    assert inv is not None
    assert inv.options["enable_hierarchical_cache"].value == "true"  # store_true: takes no value
    assert inv.options["hicache_size"].value == "100"
    assert inv.options["disable_radix_cache"].value == "true"
    assert inv.options["speculative_algorithm"].value == "EAGLE"


def test_a_bad_offload_value_is_invalid_input(tmp_path):
    report = check([str(_shell(tmp_path, f"# kvplan/gpu: H100\nvllm serve {LLAMA8} --kv-offloading-size lots\n"))])
    assert report.exit_code == 2
    assert any(f.invalid_input and "--kv-offloading-size" in f.message for f in report.findings)


# ----------------------------------------------------------------------------------------- vLLM

def test_vllm_native_offloading_tier_in_the_result(tmp_path):
    # vllm/v1/kv_offload/cpu/spec.py CPUOffloadingSpec: num_blocks = cpu_bytes // (page_size x layers x world):
    # 100 GiB // 2,097,152 B = 51,200 blocks of 16 tokens (tp 1).
    path = _shell(tmp_path, f"# kvplan/gpu: H100\nvllm serve {LLAMA8} --max-model-len 32768 --kv-offloading-size 100\n")
    report, result = _one(path)
    assert report.exit_code == 0
    assert result.offload["blocks"] == 51_200 and result.offload["tokens"] == 819_200
    assert result.offload["requests"] == 25  # 2,048 blocks per 32,768-token request
    data = json.loads(render(report, "json"))["deployments"][0]
    assert data["offload"]["host_bytes"] == 100 * GIB
    assert data["offload"]["kind"].startswith("vLLM native CPU offloading")


def test_vllm_lmcache_backend_is_planned(tmp_path):
    # vLLM gives LMCache max_local_cpu_size = 100 GiB / 1 rank; a 256-token chunk of Llama-3.1-8B is
    # 256 x 131,072 = 33,554,432 B: 100 GiB hold 3,200 chunks (tests/test_lmcache.py has the sources)
    path = _shell(tmp_path, f"# kvplan/gpu: H100\nvllm serve {LLAMA8} --kv-offloading-size 100 "
                            "--kv-offloading-backend lmcache\n")
    report, result = _one(path)
    assert "offload-not-planned" not in _codes(result)
    assert result.offload["kind"].startswith("LMCache local CPU") and result.offload["blocks"] == 3200


def test_vllm_swap_space_v0_tier_and_v1_note(tmp_path):
    # vllm/worker/worker.py (V0) determine_num_available_blocks: int(swap_bytes // block bytes) per GPU:
    # 8 GiB // 2,097,152 = 4,096 CPU blocks.
    v0 = _shell(tmp_path, f"# kvplan/gpu: H100\n# kvplan/engine-version: 0.6\nvllm serve {LLAMA8} "
                          "--max-model-len 8192 --swap-space 8\n", "v0.sh")
    _, result = _one(v0)
    assert result.offload["blocks"] == 4096
    v1 = _shell(tmp_path, f"# kvplan/gpu: H100\nvllm serve {LLAMA8} --max-model-len 8192 --swap-space 8\n", "v1.sh")
    _, result = _one(v1)
    assert result.offload is None
    assert _codes(result)["not-read"] == "note"


def test_vllm_cpu_offload_gb_moves_weights_off_the_gpu(tmp_path):
    # vllm/v1/worker/gpu_model_runner.py: set_cpu_offload_max_bytes(int(cpu_offload_gb * 1024**3)); the GPU
    # keeps the weights less that (per GPU), so the KV cache gains exactly as much.
    base = _shell(tmp_path, f"# kvplan/gpu: L4\nvllm serve {LLAMA8} --max-model-len 8192\n", "base.sh")
    off = _shell(tmp_path, f"# kvplan/gpu: L4\nvllm serve {LLAMA8} --max-model-len 8192 --cpu-offload-gb 4\n", "off.sh")
    _, plain = _one(base)
    _, moved = _one(off)
    assert plain.weights_bytes_per_gpu - moved.weights_bytes_per_gpu == 4 * GIB
    assert moved.kv_cache_bytes_per_gpu - plain.kv_cache_bytes_per_gpu == 4 * GIB


def test_weights_on_gpu_never_moves_the_embedding():
    weights = MemoryItem("weights", 10 * GIB, "computed", "checkpoint")
    assert weights_on_gpu(weights, 4 * GIB).bytes == 6 * GIB
    assert weights_on_gpu(weights, 40 * GIB, embedding_bytes=GIB).bytes == GIB
    assert "--cpu-offload-gb" in weights_on_gpu(weights, GIB).note


def test_prefix_caching_flags_are_notes(tmp_path):
    on = _shell(tmp_path, f"# kvplan/gpu: H100\nvllm serve {LLAMA8} --max-model-len 8192 --enable-prefix-caching\n")
    report, result = _one(on)
    assert report.exit_code == 0 and _codes(result)["prefix-caching"] == "note"


# ----------------------------------------------------------------------------------------- SGLang

def test_sglang_hierarchical_cache_in_the_result(tmp_path):
    # pool_host/base.py HostKVCache: int(100 x 1e9 // 131,072) = 762,939 tokens, + one page of 1 = 762,940.
    path = _shell(tmp_path, f"# kvplan/gpu: H100\npython -m sglang.launch_server --model-path {LLAMA8} "
                            "--context-length 32768 --enable-hierarchical-cache --hicache-size 100\n")
    _, result = _one(path)
    assert result.offload["tokens"] == 762_940
    ratio = _shell(tmp_path, f"# kvplan/gpu: H100\npython -m sglang.launch_server --model-path {LLAMA8} "
                             "--context-length 32768 --enable-hierarchical-cache\n", "ratio.sh")
    _, result = _one(ratio)
    assert result.offload["tokens"] == 2 * result.kv_cache_tokens + 1  # the default ratio 2.0


def test_sglang_hicache_sizing_without_the_switch_is_a_note(tmp_path):
    path = _shell(tmp_path, f"# kvplan/gpu: H100\npython -m sglang.launch_server --model-path {LLAMA8} "
                            "--hicache-ratio 3\n")
    _, result = _one(path)
    assert result.offload is None and _codes(result)["not-read"] == "note"


def test_sglang_speculation_is_never_ignored(tmp_path):
    path = _shell(tmp_path, f"# kvplan/gpu: H100\npython -m sglang.launch_server --model-path {LLAMA8} "
                            "--context-length 8192 --speculative-algorithm EAGLE --speculative-num-steps 3 "
                            "--speculative-eagle-topk 4 --speculative-num-draft-tokens 8 "
                            "--speculative-draft-model-path meta-llama/Llama-3.2-1B-Instruct\n")
    report, result = _one(path)
    # planned (sglang/speculative.py); the tree wider than one is what the plan leaves out, said
    finding = next(f for f in result.findings if f.code == "speculation-not-planned")
    assert finding.severity == "warning" and finding.line == 2
    assert "topk 4" in finding.message and "12 slots" in finding.message
    assert report.exit_code == 0 and check([str(path)], strict=True).exit_code == 1


# ----------------------------------------------------------------------------------------- workload

def _kvplan_file(tmp_path: Path, requirements: str, engine: str = "{name: vllm, max_model_len: 16k}") -> Path:
    path = tmp_path / "kvplan.yaml"
    path.write_text(f"version: 1\ndeployments:\n  - name: chat\n    model: {LLAMA8}\n    gpu: L4\n"
                    f"    engine: {engine}\n    requirements: {requirements}\n")
    return path


def test_shared_prefix_requirement_plans_with_sharing(tmp_path):
    llama = kvplan.load_model(LLAMA8)
    shared = kvplan.max_batch(llama, gpu="L4", engine="vllm", max_model_len=16384, context=8192, shared_prefix=2048)
    plain = kvplan.max_batch(llama, gpu="L4", engine="vllm", max_model_len=16384, context=8192)
    assert shared.max_batch > plain.max_batch
    report, result = _one(_kvplan_file(tmp_path, f"{{min_concurrency: {shared.max_batch}, at_context: 8k, "
                                                 "shared_prefix: 2k, n: 1}"))
    assert report.exit_code == 0, render(report, "table")
    report, result = _one(_kvplan_file(tmp_path, f"{{min_concurrency: {shared.max_batch + 1}, at_context: 8k, "
                                                 "shared_prefix: 2k}"))
    failed = next(f for f in result.findings if f.code == "min-concurrency")
    assert failed.fits == shared.max_batch and "2,048-token prefix" in failed.message


def test_shared_prefix_without_prefix_caching_is_planned_plain(tmp_path):
    llama = kvplan.load_model(LLAMA8)
    plain = kvplan.max_batch(llama, gpu="L4", engine="vllm", max_model_len=16384, context=8192)
    path = tmp_path / "serve.sh"
    path.write_text(f"# kvplan/gpu: L4\n# kvplan/min-concurrency: {plain.max_batch + 1}@8k\n"
                    f"# kvplan/shared-prefix: 2k\nvllm serve {LLAMA8} --max-model-len 16k --no-enable-prefix-caching\n")
    report, result = _one(path)
    assert _codes(result)["prefix-caching"] == "note"
    failed = next(f for f in result.findings if f.code == "min-concurrency")
    assert failed.fits == plain.max_batch


def test_sampling_width_and_a_prefix_longer_than_the_context(tmp_path):
    _, result = _one(_kvplan_file(tmp_path, "{min_concurrency: 1, at_context: 4k, n: 4}"))
    assert "sampling-not-planned" not in _codes(result)  # planned: tests/test_sharing_plan.py
    report, result = _one(_kvplan_file(tmp_path, "{min_concurrency: 1, at_context: 4k, shared_prefix: 8k}"))
    assert report.exit_code == 2
    assert any(f.invalid_input and "shared-prefix" in f.message for f in result.findings)


def test_schema_names_the_workload():
    props = schema()["$defs"]["Requirements"]["properties"]
    assert "shared_prefix" in props and "n" in props


# ----------------------------------------------------------------------------------------- max-batch

def test_max_batch_cpu_offload_gb_flag(capsys):
    code = main(["max-batch", LLAMA8, "--gpu", "L4", "--max-model-len", "8k", "--cpu-offload-gb", "4", "-f", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    plain = kvplan.max_batch(kvplan.load_model(LLAMA8), gpu="L4", max_model_len=8192)
    assert plain.per_gpu.weights_bytes - json.loads(out.out)["per_gpu"]["weights_bytes"] == 4 * GIB
    code = main(["max-batch", LLAMA8, "--gpu", "L4", "--engine", "trtllm", "--cpu-offload-gb", "4"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cpu-offload-gb" in err


def test_llamacpp_no_kv_offload_keeps_the_cache_in_host_memory():
    llama = kvplan.load_model(LLAMA8)
    with pytest.raises(kvplan.UsageError) as refused:
        kvplan.max_batch(llama, gpu="L4", engine="llamacpp", max_model_len=32768,
                         engine_options={"no_kv_offload": True})
    assert refused.value.field == "kv_cache_memory"
    host = Settings(kv_cache_memory_bytes=64 * GIB)
    on_host = kvplan.max_batch(llama, gpu="L4", engine="llamacpp", max_model_len=32768, settings=host,
                               engine_options={"no_kv_offload": True})
    same_pool = kvplan.max_batch(llama, gpu="L4", engine="llamacpp", max_model_len=32768, settings=host)
    assert on_host.kv_cache_tokens == same_pool.kv_cache_tokens and on_host.fits
    assert any("--no-kv-offload" in a and "host memory" in a for a in on_host.assumptions)
    too_small = kvplan.max_batch(llama, gpu_memory="12GiB", engine="llamacpp", max_model_len=32768, settings=host,
                                 engine_options={"no_kv_offload": True})
    assert not too_small.fits and too_small.max_batch == 0
    with pytest.raises(kvplan.UsageError):
        kvplan.max_batch(llama, gpu="L4", engine="vllm", engine_options={"no_kv_offload": True})


def test_llamacpp_no_kv_offload_decode_bound_counts_the_weights_only():
    # llama.cpp src/llama-graph.cpp build_attn_mha: without offload_kqv (-nkvo) the attention nodes run on
    # backend_cpu, reading the cache at host memory bandwidth, which the GPU catalog does not give: the
    # bound keeps the weights' read at the GPU's bandwidth alone (still a lower bound), never the KV at HBM speed
    llama = kvplan.load_model(LLAMA8)
    host = Settings(kv_cache_memory_bytes=64 * GIB)
    on_host = kvplan.max_batch(llama, gpu="L4", engine="llamacpp", max_model_len=32768, settings=host,
                               engine_options={"no_kv_offload": True})
    on_gpu = kvplan.max_batch(llama, gpu="L4", engine="llamacpp", max_model_len=32768, settings=host)
    bandwidth = kvplan.find_gpu("L4", kvplan.load_catalog()).bandwidth
    assert on_host.decode_step_seconds_min == pytest.approx(on_host.per_gpu.weights_bytes / bandwidth)
    assert on_gpu.decode_step_seconds_min > on_host.decode_step_seconds_min
    assert any("host memory bandwidth" in a and "not counted" in a for a in on_host.assumptions)


def test_kvplan_file_engine_names_the_engines_offload_settings(tmp_path):
    path = _kvplan_file(tmp_path, "{}", "{name: vllm, max_model_len: 32768, kv_offloading_size: 100, cpu_offload_gb: 4}")
    path.write_text(path.read_text().replace("gpu: L4", "gpu: H100"))
    _, result = _one(path)
    assert result.offload["blocks"] == 51_200  # as --kv-offloading-size 100 (above)
    sglang = _kvplan_file(tmp_path, "{}", "{name: sglang, enable_hierarchical_cache: true, hicache_size: 100}")
    sglang.write_text(sglang.read_text().replace("gpu: L4", "gpu: H100"))
    _, result = _one(sglang)
    assert result.offload["tokens"] == 762_940
    wrong = _kvplan_file(tmp_path, "{}", "{name: sglang, kv_offloading_size: 100}")
    report = check([str(wrong)])
    assert report.exit_code == 2
    assert [f.message for f in report.findings] == ["engine.kv_offloading_size: sglang has no such setting"]
    assert report.findings[0].line == 6
    assert "kv_offloading_size" in schema()["$defs"]["EngineSpec"]["properties"]


@given(weights=st.integers(0, 1 << 40), offload=st.integers(0, 1 << 41), embedding=st.integers(0, 1 << 36))
def test_weight_offload_invariants(weights, offload, embedding):
    item = MemoryItem("weights", weights, "computed", "checkpoint")
    kept = weights_on_gpu(item, offload, embedding).bytes
    assert kept <= weights and kept >= min(weights, embedding)  # never more, never below the embedding
    assert weights_on_gpu(item, offload + 1, embedding).bytes <= kept  # more offload never keeps more
