"""Buffers llama.cpp prints per device, and TensorRT-LLM's engine, context and buffer lines: each read on the real
excerpt it was collected with (tests/data/engine_logs_*.yaml), equal to the numbers its collector copied
(``reported``)."""

from __future__ import annotations

import io
import json


from kvplan.logs import parse_text
from conftest import log_cases

MIB = 1 << 20
CASES = {c["id"]: c for c in log_cases()}


def _case(case_id):
    case = CASES[case_id]
    return parse_text(case["log_excerpt"]), case["reported"]


def _mib(value) -> float:
    return round(value.bytes / MIB, 2)


def _device(log, device, item):
    return [_mib(r.value) for r in log.per_device if r.device == device and r.item == item]


def test_older_buffer_lines_without_the_word_model_are_the_weights():
    """Before about b3700 llm_load_tensors printed 'CUDA0 buffer size' and 'CPU buffer size' (no 'model')."""
    log, r = _case("llamacpp-bllossom-llama3-8b-q4km-3070-512")
    assert _mib(log.memory["weights"]) == r["model_buffer_cuda0_mib"]
    assert _mib(log.memory["weights_host"]) == r["model_buffer_cpu_mib"]
    assert _device(log, "CUDA0", "weights") == [r["model_buffer_cuda0_mib"]]
    log, r = _case("llamacpp-nixiesearch-qwen2-05b-2x4090-pp-32k-4slots")
    assert _mib(log.memory["weights_host"]) == r["model_buffer_cpu_mib"]
    assert round(log.memory["weights"].bytes / (1 << 30), 4) == r["weights_gib"]  # the two devices' sum


def test_every_device_buffer_of_a_split_run_is_kept():
    for case_id in ("llamacpp-nixiesearch-qwen2-05b-2x4090-pp-32k-4slots",
                    "llamacpp-ik514-qwen3-30b-a3b-q4km-4090-5090-split-16k",
                    "llamacpp-pr6122-commandr-35b-4070ti-3090ti-split-4k"):
        log, r = _case(case_id)
        for kind, item in (("model", "weights"), ("kv", "kv_cache"), ("compute", "activation")):
            for device in ("CUDA0", "CUDA1"):
                key = f"{kind}_buffer_{device.lower()}_mib"
                assert _device(log, device, item) == ([r[key]] if key in r else []), (case_id, key)
    # the waterfall holds the sums; the KV cache is the size line (= the buffers' sum)
    log, r = _case("llamacpp-ik514-qwen3-30b-a3b-q4km-4090-5090-split-16k")
    assert _mib(log.memory["weights"]) == round(r["model_buffer_cuda0_mib"] + r["model_buffer_cuda1_mib"], 2)
    assert _mib(log.memory["kv_cache"]) == r["kv_size_mib"] == r["kv_buffer_cuda0_mib"] + r["kv_buffer_cuda1_mib"]
    # "using device CUDA1 (..) - N MiB free": each device's free memory when the model loads
    assert [_device(log, d, "free_at_load") for d in ("CUDA0", "CUDA1")] == [[r["free_mib_at_load_cuda0"]],
                                                                             [r["free_mib_at_load_cuda1"]]]


def test_two_kv_buffers_on_one_device_are_both_the_kv_cache():
    """A SWA model (Gemma 3) allocates a full cache and a sliding-window cache: two KV buffers on CUDA0."""
    log, r = _case("llamacpp-mlsched-gemma3-1b-q4km-940m-partial-swa")
    assert _device(log, "CUDA0", "kv_cache") == [r["kv_buffer_full_cuda0_mib"], r["kv_buffer_swa_cuda0_mib"]]
    assert _mib(log.memory["kv_cache"]) == r["kv_buffer_full_cuda0_mib"] + r["kv_buffer_swa_cuda0_mib"]
    assert not any("split over devices" in note for note in log.notes)


def test_the_gpu_part_of_a_kv_cache_split_with_host_memory_is_shown(capsys):
    from kvplan.render.log_out import print_log, to_json

    log, r = _case("llamacpp-lmstudio-r1-0528-qwen3-8b-q8-3060ti-128k-partial")
    assert _mib(log.memory["kv_cache"]) == r["kv_size_mib"] and _mib(log.memory["kv_host"]) == r["kv_buffer_cpu_mib"]
    assert _device(log, "CUDA0", "kv_cache") == [r["kv_buffer_cuda0_mib"]]
    stream = io.StringIO()
    print_log(log, None, None, stream=stream)
    assert ("Per device: CUDA0 free at load 7128 MiB, weights 3715.11 MiB, KV cache 9728.00 MiB, compute buffer "
            "9240.00 MiB") in " ".join(stream.getvalue().split())
    shown = json.loads(json.dumps(to_json(log, None, None)))["per_device"]
    assert {"device": "CUDA0", "item": "kv_cache", "logged": 9728 * MIB, "step": MIB // 100, "text": "9728.00 MiB",
            "line": 9} in shown


def test_one_device_whose_buffers_are_the_waterfall_shows_no_per_device_line():
    from kvplan.render.log_out import print_log

    log, _ = _case("llamacpp-bllossom-llama3-8b-q4km-3070-512")
    stream = io.StringIO()
    print_log(log, None, None, stream=stream)
    assert "Per device" not in stream.getvalue()


def test_recurrent_state_buffers_are_an_extra_reading():
    # lines as llama_memory_recurrent prints them (a Qwen3.5 hybrid: 16 attention layers, the rest recurrent)
    text = ("build: 8120 (5a7b2c1d) with cc for x86_64-linux-gnu\n"
            "llama_kv_cache:      CUDA0 KV buffer size =  4352.00 MiB\n"
            "llama_kv_cache: size = 4352.00 MiB (131072 cells,  16 layers,  4/1 seqs), K (q8_0): 2176.00 MiB, "
            "V (q8_0): 2176.00 MiB\n"
            "llama_memory_recurrent:      CUDA0 RS buffer size =   598.50 MiB\n"
            "llama_memory_recurrent:      CUDA1 RS buffer size =    37.69 MiB\n"
            "sched_reserve:      CUDA0 compute buffer size =   495.00 MiB\n")
    log = parse_text(text)
    assert _mib(log.memory["kv_cache"]) == 4352.0  # the recurrent state is not the KV cache
    assert _mib(log.memory["recurrent_state"]) == 598.50 + 37.69
    assert _device(log, "CUDA0", "recurrent_state") == [598.50] and _device(log, "CUDA1", "recurrent_state") == [37.69]
    assert not log.impossible


def test_trtllm_engine_context_runtime_buffers_and_decoder():
    """The TensorRT engine's own lines (docs/source/reference/memory.md and the 0.12 benchmarking doc)."""
    for case_id in ("trtllm-docs-memory-md-7b-h100", "trtllm-bench-doc-012dev-llama2-7b-fp8-h100"):
        log, r = _case(case_id)
        assert _mib(log.memory["engine_size"]) == r["engine_size_mib"]
        assert _mib(log.memory["execution_context"]) == r["execution_context_mib"]
        for name in ("runtime_buffers", "decoder"):  # MemoryCounters' "MB" and "GB" are of 1024
            printed = r.get(f"{name}_mb") or r[f"{name}_gb"] * 1024
            assert abs(log.memory[name].bytes / MIB - printed) <= log.memory[name].step_bytes / MIB / 2
        assert log.num_gpu_blocks == r["kv_blocks"] and log.kv_cache_tokens == r["kv_cache_tokens"]
        assert not log.impossible
    log, r = _case("trtllm-1188-qwen25-coder-05b-a4000")  # lines without the [TensorRT-LLM] prefix
    assert (log.memory["runtime_buffers"].text, log.memory["decoder"].text) == ("2.66 GiB", "5.76 GiB")
    assert r["runtime_buffers_gb"] == 2.66 and r["decoder_gb"] == 5.76
    for case_id in ("trtllm-benchdoc-llama3-8b-3090-triton", "trtllm-nemotron-nano4b-nvfp4-5070ti-f020"):
        log, r = _case(case_id)
        assert _mib(log.memory["engine_size"]) == r["engine_size_mib"]


# the PyTorch backend (TensorRT LLM 1.2.0rc2, a Qwen3 run): the estimation dry run's KV cache manager, then the one
# that serves
PYTORCH_BACKEND = """\
[TensorRT-LLM] TensorRT LLM version: 1.2.0rc2
Model init total -- 3.13s
[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 288 [window size=8224], tokens per block=32, \
primary blocks=257, secondary blocks=0, max sequence length=9193
[TensorRT-LLM][INFO] Number of tokens per block: 32.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.56 GiB for max tokens in paged KV cache (8224).
[TensorRT-LLM][WARNING] [kv cache manager] storeContextBlocks: Can not find sequence for request 1
[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 288 [window size=9193], tokens per block=32, \
primary blocks=1444, secondary blocks=0, max sequence length=9193
[TensorRT-LLM][INFO] Number of tokens per block: 32.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 3.17 GiB for max tokens in paged KV cache (46208).
"""


def test_trtllm_pytorch_backend_primary_blocks_of_the_serving_manager():
    log = parse_text(PYTORCH_BACKEND)
    assert log.engine == "trtllm" and log.settings.engine_version == "1.2.0rc2"
    assert log.num_gpu_blocks == 1444 and log.kv_cache_tokens == 46_208 == 1444 * 32  # not the dry run's 257
    assert log.memory["kv_cache"].text == "3.17 GiB" and log.settings.block_size == 32
    assert "num_cpu_blocks" not in log.counts  # secondary blocks=0: no host pool
    assert any("dry run" in note for note in log.notes)
    # one manager with two attention windows (VSWA): its pools add up
    two = PYTORCH_BACKEND.splitlines()[2].replace("primary blocks=257, secondary blocks=0",
                                                  "primary blocks=300, secondary blocks=40")
    log = parse_text(two + "\n" + two.replace("window size=8224", "window size=512") + "\n")
    assert log.num_gpu_blocks == 600 and log.counts["num_cpu_blocks"] == 80
