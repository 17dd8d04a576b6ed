"""Regression tests for small correctness gaps (issues 12 and 13), each next to the engine rule it follows."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan
from kvplan.deploy import check
from kvplan.render.check_out import render

LLAMA8 = "meta-llama/Llama-3.1-8B"


def _one(path: Path):
    report = check([str(path)])
    assert len(report.deployments) == 1, render(report, "table")
    return report, report.deployments[0]


# ------------------------------------------------- 1. shared_prefix: 0 is "nothing shared" everywhere

def _kvplan_file(tmp_path: Path, requirements: str) -> Path:
    path = tmp_path / "kvplan.yaml"
    path.write_text(f"version: 1\ndeployments:\n  - name: chat\n    model: {LLAMA8}\n    gpu: L4\n"
                    f"    engine: {{name: vllm, max_model_len: 16k}}\n    requirements: {requirements}\n")
    return path


@pytest.mark.parametrize("zero", ["0", "'0'"])
def test_shared_prefix_zero_in_a_kvplan_file_is_no_sharing(tmp_path, zero):
    plain = kvplan.max_batch(kvplan.load_model(LLAMA8), gpu="L4", engine="vllm", max_model_len=16384, context=8192)
    report, result = _one(_kvplan_file(tmp_path, f"{{min_concurrency: {plain.max_batch + 1}, at_context: 8k, "
                                                 f"shared_prefix: {zero}}}"))
    assert not any(f.invalid_input for f in result.findings), render(report, "table")
    failed = next(f for f in result.findings if f.code == "min-concurrency")
    assert failed.fits == plain.max_batch and "prefix" not in failed.message


def test_shared_prefix_zero_in_a_shell_annotation_is_no_sharing(tmp_path):
    plain = kvplan.max_batch(kvplan.load_model(LLAMA8), gpu="L4", engine="vllm", max_model_len=16384, context=8192)
    path = tmp_path / "serve.sh"
    path.write_text(f"# kvplan/gpu: L4\n# kvplan/min-concurrency: {plain.max_batch}@8k\n"
                    f"# kvplan/shared-prefix: 0\nvllm serve {LLAMA8} --max-model-len 16384\n")
    report, result = _one(path)
    assert report.exit_code == 0, render(report, "table")


@pytest.mark.parametrize("bad", ["-1", "'-1'"])
def test_negative_shared_prefix_is_still_refused(tmp_path, bad):
    report = check([str(_kvplan_file(tmp_path, f"{{min_concurrency: 1, at_context: 8k, shared_prefix: {bad}}}"))])
    assert report.exit_code == 2 and "requirements.shared_prefix" in render(report, "table")


# ------------------------------------------ 2. --kv-offloading-size 0: vLLM does not start with it

@pytest.mark.parametrize("version", ["0.14.0", "0.26.0", "0.33.0"])
def test_kv_offloading_size_zero_is_refused_by_name(version):
    from kvplan.dtypes import resolve_kv_dtype
    from kvplan.engines import get_engine, parse_version
    from kvplan.engines.protocol import Demand, make_engine_options
    from kvplan.errors import UsageError

    spec, engine, ver = kvplan.load_model(LLAMA8), get_engine("vllm"), parse_version(version)
    opts = make_engine_options(tp=1, kv_offloading_bytes=0)
    layouts = engine.stage_layouts(spec, resolve_kv_dtype("auto", spec.dtype), ver, opts, 1)
    with pytest.raises(UsageError) as err:
        engine.offload_tier(layouts, ver, opts, 1, Demand(8192, 8192, 1), None)
    assert err.value.field == "kv_offloading_bytes" and "cpu_bytes_to_use must be specified" in str(err.value)


def test_kv_offloading_size_zero_exits_2_naming_the_flag(capsys):
    from kvplan.cli import main

    assert main(["max-batch", LLAMA8, "--gpu", "H100", "--max-model-len", "8k", "--kv-offloading-size", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kvplan: error: --kv-offloading-size: 0 GiB")


# ------------------------------------------------ 3. LMCACHE_* values: LMCache takes the quotes off

@pytest.mark.parametrize(("raw", "read"), [
    # LMCache 0.5.6 v1/config_base.py _parse_quoted_string: strip, then a literal between matching quotes
    ('"512"', "512"), ("'512'", "512"), (' "512" ', "512"), (" 512 ", "512"), ('"a\\tb"', "a\tb"),
    ('""', ""), ('"', '"'), ("'\"'", '"'), ('"x\'', '"x\''), ('"a" if 1 else "b"', 'a" if 1 else "b'), ("", ""),
])
def test_lmcache_env_values_are_unquoted_as_lmcache_does(raw, read):
    from kvplan.engines.vllm.lmcache import env_value

    assert env_value(raw) == read


def test_quoted_lmcache_chunk_size_in_a_compose_file(tmp_path):
    compose = """services:
  llm:
    image: vllm/vllm-openai:v0.11.0
    command: ["meta-llama/Llama-3.1-8B", "--max-model-len", "8192", "--kv-offloading-backend", "lmcache",
              "--kv-offloading-size", "16", "-tp", "2"]
    environment:
      - LMCACHE_CHUNK_SIZE="512"
    labels: ["kvplan/gpu=H100"]
"""
    path = tmp_path / "compose.yaml"
    path.write_text(compose)
    report, result = _one(path)
    assert not any(f.invalid_input for f in result.findings), render(report, "table")
    # 8 GiB per rank; a 512-token chunk of one rank is 512 x 65,536 B = 32 MiB: 256 chunks (tests/test_lmcache.py)
    assert result.offload["block_size"] == 512 and result.offload["blocks"] == 256


# ------------------------ 4. vLLM native offloading's "Allocating N CPU tensors": what it means for pinned memory

_LOG_HEAD = ("INFO 04-01 10:00:00 [api_server.py:1] vLLM API server version {v}\n"
             "INFO 04-01 10:00:00 [kv_cache_utils.py:1087] GPU KV cache size: 463,424 tokens\n")


def test_one_cross_layer_cpu_tensor_and_its_pinned_power_of_two():
    from kvplan.logs import parse_text

    # vllm 0.26 kv_offload/cpu/gpu_worker.py CPUOffloadingWorker: logger.info("Allocating %d CPU tensors...") then,
    # at DEBUG, "torch.zeros pinned tensor %d×%d (%.2f GB): %.3f s" (num_cpu_blocks x page bytes, int8). Lines in
    # that format; 2,340 blocks of a 1,835,008 B page = 4,293,918,720 B, which PyTorch pins as 2^32 B.
    log = parse_text(_LOG_HEAD.format(v="0.26.0")
                     + "(EngineCore_DP0 pid=1) INFO 04-01 10:00:01 [gpu_worker.py:480] Allocating 1 CPU tensors...\n"
                     "(EngineCore_DP0 pid=1) DEBUG 04-01 10:00:01 [gpu_worker.py:505] torch.zeros pinned tensor "
                     "2340×1835008 (4.29 GB): 1.234 s\n")
    note = next(n for n in log.notes if n.startswith("host KV tier (native CPU offloading)"))
    assert "1 CPU tensor per worker: one cross-layer tensor" in note
    assert "4,293,918,720 B of tensors, 4,294,967,296 B pinned per worker" in note


def test_per_layer_cpu_tensor_shapes_in_the_kv_dtype():
    from kvplan.logs import parse_text

    # vllm 0.14 kv_offload/worker/cpu_gpu.py: logger.debug("Allocating CPU tensor of shape %r", cpu_shape), the GPU
    # tensor's dtype (bf16 here: 2 B): [2, 1000, 16, 8, 128] = 32,768,000 elements = 65,536,000 B -> 2^26 pinned
    log = parse_text(_LOG_HEAD.format(v="0.14.0")
                     + "INFO [llm_engine.py:1] Initializing a V1 LLM engine (v0.14.0) with config: "
                     "model='Qwen/Qwen3-1.7B', dtype=torch.bfloat16, kv_cache_dtype=auto, tensor_parallel_size=1\n"
                     "(EngineCore_DP0 pid=1) INFO [cpu_gpu.py:196] Allocating 2 CPU tensors...\n"
                     + "(EngineCore_DP0 pid=1) DEBUG [cpu_gpu.py:256] Allocating CPU tensor of shape "
                     "[2, 1000, 16, 8, 128]\n" * 2)
    note = next(n for n in log.notes if n.startswith("host KV tier (native CPU offloading)"))
    assert "2 CPU tensors per worker: one per layer" in note
    assert f"{2 * 65_536_000:,} B of tensors, {2 * (1 << 26):,} B pinned per worker" in note


def test_cpu_tensors_without_sizes_and_after_the_mmap_region():
    from kvplan.logs import parse_text

    line = "(EngineCore_DP0 pid=1) INFO [gpu_worker.py:480] Allocating 28 CPU tensors...\n"
    note = next(n for n in parse_text(_LOG_HEAD.format(v="0.22.0") + line).notes if n.startswith("host KV tier"))
    assert "28 CPU tensors per worker" in note and "VLLM_LOGGING_LEVEL=DEBUG" in note
    # 0.33 creates one SharedOffloadRegion and logs its size; the tensors are views of it (no torch rounding)
    note = next(n for n in parse_text(_LOG_HEAD.format(v="0.33.0") + "INFO [shared_offload_region.py:1] Created "
                                      "mmap file /dev/shm/x (8.59 GB)\n" + line).notes if n.startswith("host KV tier"))
    assert "8.59 GB (10^9 B) mmap region" in note and "not rounded to a power of two" in note


# ------------------------------------- 5. vLLM V0 --swap-space: one pinned tensor per layer, each a power of two

def test_v0_swap_space_pins_power_of_two_tensors_per_layer():
    from kvplan.dtypes import resolve_kv_dtype
    from kvplan.engines import get_engine, parse_version
    from kvplan.engines.protocol import Demand, make_engine_options

    def tier(swap_gib: float, tp: int, pp: int):
        spec, engine, ver = kvplan.load_model(LLAMA8), get_engine("vllm"), parse_version("0.8.5")
        opts = make_engine_options(tp=tp, swap_space_bytes=int(swap_gib * (1 << 30)))
        layouts = engine.stage_layouts(spec, resolve_kv_dtype("auto", spec.dtype), ver, opts, pp)
        return engine.offload_tier(layouts, ver, opts, tp, Demand(8192, 8192, 1), None)

    # Llama-3.1-8B at tp 2: 4 KV heads x 128 x K+V x 2 B x 16 tokens = 32,768 B per layer block; 4 GiB // (32 x
    # 32,768) = 4,096 blocks; each layer's tensor 4,096 x 32,768 = 2^27 B exactly: nothing added by the rounding
    exact = tier(4, tp=2, pp=1)
    assert exact.blocks == 4096 and exact.pinned_bytes == exact.held_bytes == 2 * 32 * (1 << 27)
    # 3 GiB at tp 2, pp 2: 16 layers a stage, 6,144 blocks; each tensor 6,144 x 32,768 = 201,326,592 B -> 2^28
    odd = tier(3, tp=2, pp=2)
    assert odd.blocks == 6144 and odd.held_bytes == 4 * 16 * 201_326_592
    assert odd.pinned_bytes == 4 * 16 * (1 << 28)
    assert any("one torch tensor per attention layer" in r for r in odd.remarks)


# ----------------------------- 6. trtllm-serve --max_beam_width, --ep_size, --cp_size and enable_attention_dp

def _trtllm(tmp_path: Path, flags: str, yaml_text: str | None = None, want: int = 1):
    if yaml_text is not None:
        (tmp_path / "extra.yaml").write_text(yaml_text)
        flags += " --extra_llm_api_options extra.yaml"
    path = tmp_path / "serve.sh"
    path.write_text(f"# kvplan/gpu: H100-80GB\n# kvplan/min-concurrency: {want}@8k\n"
                    f"trtllm-serve {LLAMA8} --max_seq_len 16384 {flags}\n")
    report, result = _one(path)
    return report, result, {f.code: f for f in result.findings}


@pytest.mark.parametrize("where", ["flag", "yaml"])
def test_max_beam_width_plans_every_request_with_its_beams(tmp_path, where):
    llama = kvplan.load_model(LLAMA8)
    beams = kvplan.max_batch(llama, gpu="H100-80GB", engine="trtllm", max_model_len=16384, context=8192,
                             beam_width=4).max_batch
    plain = kvplan.max_batch(llama, gpu="H100-80GB", engine="trtllm", max_model_len=16384, context=8192).max_batch
    assert beams < plain
    flags, extra = ("--max_beam_width 4", None) if where == "flag" else ("", "max_beam_width: 4\n")
    report, result, codes = _trtllm(tmp_path, flags, extra, want=beams + 1)
    assert codes["beam-search"].severity == "note" and "PyExecutor._validate_request" in codes["beam-search"].message
    failed = codes["min-concurrency"]
    assert failed.fits == beams and "requests of 4 beams" in failed.message, render(report, "table")
    _, result, codes = _trtllm(tmp_path, flags, extra, want=beams)
    assert "min-concurrency" not in codes


def test_max_beam_width_must_be_a_positive_integer(tmp_path):
    report, result, codes = _trtllm(tmp_path, "--max_beam_width 0")
    assert codes["invalid-input"].invalid_input and "max_beam_width" in codes["invalid-input"].message


def test_attention_dp_expert_and_context_parallelism_are_named(tmp_path):
    _, result, _ = _trtllm(tmp_path, "--tp_size 2 --ep_size 2 --cp_size 2", "enable_attention_dp: true\n")
    notes = [f for f in result.findings if f.code == "not-read"]
    # attention DP is planned since issue 22 (tests/test_expert_parallel.py): a note, no longer not-read
    assert any("enable_attention_dp" in f.message and f.severity == "note" for f in result.findings
               if f.code == "attention-dp")
    assert any(f.message.startswith("cp_size 2") and f.severity == "warning" for f in notes)
    _, result, _ = _trtllm(tmp_path, "--tp_size 2 --ep_size 2")
    assert any(f.message.startswith("ep_size 2") and f.severity == "note" for f in result.findings
               if f.code == "expert-parallel")
    # attention DP at tp 1 changes nothing: not said
    _, result, _ = _trtllm(tmp_path, "", "enable_attention_dp: true\n")
    assert not any("enable_attention_dp" in f.message for f in result.findings)
