"""Start-up lines that real logs print and ``kvplan log`` reads since issue 21 (item 6): each test parses a case's
own excerpt (tests/data/engine_logs_*.yaml, named by its id) or lines copied from it."""

from __future__ import annotations

import io
import json


from kvplan.logs import parse_text
from conftest import log_cases

GIB = 1 << 30
CASES = {c["id"]: c for c in log_cases()}


def _case(case_id):
    return parse_text(CASES[case_id]["log_excerpt"])


def _text(log, item):
    return log.memory[item].text


# ------------------------------------------------------------------------------------------------------------ vLLM

def test_vllm_api_server_block_count_line():
    log = _case("file-2xh200-qwen3-next-80b-tp2-u090-262k-v0102")  # v1/metrics/loggers.py, 0.10.2
    assert log.num_gpu_blocks == 7162
    excerpt = CASES["file-2xh200-qwen3-next-80b-tp2-u090-262k-v0102"]["log_excerpt"].splitlines()
    assert "num_gpu_blocks is: 7162" in excerpt[log.lines["num_gpu_blocks"] - 1]  # the APIServer's line
    line = ("    vllm-1  | (APIServer pid=8) INFO 09-25 13:40:51 [loggers.py:148] Engine 000: vllm cache_config_info "
            "with initialization after num_gpu_blocks is: 89994")  # file-rocm-gemma-3-27b-it-u090-4k-v0110rc2
    assert parse_text(line + "\n").num_gpu_blocks == 89994


def test_vllm_v0_block_line_names_the_device_type():
    # file-rocm-16g-qwen3-06b-u090-40k-v085: executor_base.py "# %s blocks" with the device type
    log = _case("file-rocm-16g-qwen3-06b-u090-40k-v085")
    assert log.num_gpu_blocks == 6495 and log.counts["num_cpu_blocks"] == 2340


def test_vllm_profile_reprint_of_the_weights_is_kept_beside_the_loaders():
    log = _case("vllm-grpo-colab-qwen25-15b-t4-u050-v072")  # "took 2.8884 GB", then "model weights take 2.89GiB"
    assert _text(log, "weights") == "2.8884 GiB" and _text(log, "weights_profile") == "2.89 GiB"
    assert log.lines["weights_profile"] == 5
    from kvplan.logs.compare import extras

    assert "weights_profile" in [r.item for r in extras(log)]
    # a log printing the profile's figure only: that is the weights, and no reprint is listed
    only = parse_text("INFO 03-15 20:36:48 worker.py:267] model weights take 83.88GiB; non_torch_memory takes 7.16GiB; "
                      "PyTorch activation peak memory takes 6.37GiB; the rest of the memory reserved\n")
    assert only.engine == "vllm" and _text(only, "weights") == "83.88 GiB"  # file-8xh200-deepseek-r1-tp8-u085-...
    assert "weights_profile" not in [r.item for r in extras(only)]


def test_vllm_summary_weights_and_available_kv_kept_beside_the_exact_ones():
    log = _case("file-h100-qwen3-4b-u090-40k-v0102")
    assert log.memory["kv_cache"].bytes == 62_326_859_059  # "Current kv cache memory in use is .. bytes"
    assert _text(log, "kv_cache_available") == "58.05 GiB" and log.lines["kv_cache_available"] == 6
    assert _text(log, "weights") == "7.5552 GiB" and _text(log, "weights_summary") == "7.56 GiB"


def test_vllm_cuda_graph_pool_line():
    log = _case("vllm-windows-build-4-131k")  # "CUDA graph pool memory: 0.11 GiB (actual), 0.14 GiB (estimated)"
    assert _text(log, "cudagraph_pool") == "0.11 GiB" and _text(log, "cudagraph_estimate") == "0.14 GiB"
    assert _text(log, "cudagraph") == "0.14 GiB"  # the estimate, which 0.21+ subtracts


def test_vllm_010_debug_requested_memory_line():
    log = _case("vllm-pr21429-4xh200-qwen3-235b-fp8-tp4-u050-40k-v0100dev")
    assert _text(log, "free_at_init") == "139.12 GiB" and _text(log, "budget") == "69.86 GiB"
    assert "budget" not in log.derived


def test_vllm_v064_profile_usage_before_and_after():
    log = _case("vllm-pr10909-bamba-9b-80g-len1024")
    assert _text(log, "used_before_profile") == "19.68 GiB" and _text(log, "used_after_profile") == "35.32 GiB"


def test_vllm_forced_block_count_is_a_count_not_the_pool():
    log = _case("vllm-pr39559-qwen35-gguf-override512")
    assert log.counts["num_gpu_blocks_override"] == 512 and log.num_gpu_blocks is None


def test_vllm_lines_without_a_start_line_are_still_vllm():
    # file-notes-r1-distill-qwen-32b-tp2-96g-class: the V0 summary's parts, with no other vLLM line
    log = _case("file-notes-r1-distill-qwen-32b-tp2-96g-class")
    assert log.engine == "vllm" and _text(log, "kv_cache") == "53.19 GiB" and _text(log, "weights") == "30.73 GiB"
    log = _case("vllm-16118-1m-context-check")  # the start-up error alone
    assert log.engine == "vllm" and _text(log, "kv_cache") == "9.97 GiB"


def test_vllm_pipeline_ranks_each_kept_and_the_least_kv_shown():
    log = _case("vllm-14452-2x5090-qwq32b-bnb4-pp2-u085-50k-v0-v085dev")  # PP 2: rank 0 then the worker's set
    assert log.settings.pp == 2
    assert (_text(log, "weights"), _text(log, "activation"), _text(log, "kv_cache")) == (
        "10.30 GiB", "1.77 GiB", "14.26 GiB")  # the worker's: the least KV memory sets the block count
    ranks = {(r.device, r.item): r.value.text for r in log.per_rank}
    assert ranks[("rank 0", "kv_cache")] == "14.52 GiB" and ranks[("rank 0", "activation")] == "1.01 GiB"
    assert len({r.device for r in log.per_rank}) == 2
    assert not any("differs between ranks" in n for n in log.notes)  # per_rank says it
    assert any("least KV cache memory" in n for n in log.notes)
    from kvplan.render.log_out import print_log, to_json

    stream = io.StringIO()
    print_log(log, None, None, stream=stream)
    assert "Per pipeline rank: rank 0 weights 10.80 GiB (line 3)" in " ".join(stream.getvalue().split())
    shown = json.loads(json.dumps(to_json(log, None, None)))["per_rank"]
    assert {"rank": "rank 0", "item": "kv_cache", "text": "14.52 GiB", "line": 3}.items() <= shown[3].items()


def test_vllm_tensor_parallel_ranks_keep_rank_0():
    log = _case("vllm-pr10909-bamba-9b-80g-len1024")  # TP: the ranks' profiles differ a little; rank 0 is shown
    assert log.per_rank == () and _text(log, "kv_cache") == "34.78 GiB"


# ---------------------------------------------------------------------------------------------------------- SGLang

def test_sglang_kv_line_before_the_token_count():
    log = _case("sglang-mydeepseekr1-r1distill-qwen7b-3090")  # "KV Cache is allocated. K size: 2.82 GB, V size: .."
    assert (_text(log, "k_size"), _text(log, "v_size")) == ("2.82 GiB", "2.82 GiB")
    assert log.kv_cache_tokens == 105531  # from the summary line, not the KV line


def test_sglang_distributed_init_and_per_target_graph_captures():
    log = _case("sglang-rawdata-qwen3-30b-a3b-fp8-h100-mfs083-gpu-only")
    assert _text(log, "init_distributed") == "0.09 GiB"
    assert (_text(log, "cudagraph_prefill"), _text(log, "cudagraph_decode")) == ("1.71 GiB", "0.34 GiB")
    assert "cudagraph" in log.derived and round(log.memory["cudagraph"].bytes / GIB, 2) == 2.05
    assert _text(log, "free_after_capture") == "10.88 GiB"  # the first capture's
    log = _case("sglang-rocmbringup-qwen3-06b-llm-mi355x-mfs06")  # "Capture target decode CUDA graph begin. ..."
    assert _text(log, "free_before_graphs") == "134.61 GiB"
    log = _case("sglang-skill-qwen3-8b-b200-main2604")
    assert _text(log, "cudagraph") == "0.60 GiB" and _text(log, "cudagraph_piecewise") == "2.32 GiB"


def test_sglang_mamba_cache_and_parameters_lines():
    log = _case("sglang-pr18040-granite4-h-micro-hybrid-16gb")
    assert log.counts["mamba_cache_slots"] == 38
    assert (_text(log, "mamba_conv_state"), _text(log, "mamba_ssm_state")) == ("0.03 GiB", "2.74 GiB")
    assert _text(log, "free_after_capture") == "2.89 GiB"
    log = _case("sglang-grok2-fp8-8xh100-tp8-v052rc2")
    assert (log.counts["params_analytical_b"], log.counts["params_actual_b"]) == (243.74, 269.56)
    assert _text(log, "init_distributed") == "1.25 GiB"  # "Init torch distributed ends. mem usage=" (no elapsed)


# ---------------------------------------------------------------------------------------------------- TensorRT-LLM

def test_trtllm_pytorch_flow_weights_max_tokens_and_requests():
    log = _case("trtllm-6294-llama31-8b-fp8-h100-bench-f080")
    assert _text(log, "weights") == "8.46 GiB"  # "Rank 0 uses 8.46 GB for model weights."
    assert log.counts["max_tokens"] == 860308 and log.counts["max_running_requests"] == 4096
    assert parse_text("[TRT-LLM] [I] Rank 1 uses 8.46 GB for model weights.\n").memory.get("weights") is None


def test_trtllm_estimation_dry_run_kept_apart():
    log = _case("trtllm-120rc2-qwen3-8b-fp8-rtx50-pytorch")
    assert _text(log, "kv_cache") == "3.17 GiB" and log.kv_cache_tokens == 46208
    assert _text(log, "kv_cache_estimation") == "0.56 GiB" and log.counts["kv_cache_tokens_estimation"] == 8224
    assert log.settings.max_model_len == 9193


def test_trtllm_builder_totals_and_trt_managed_memory():
    log = _case("trtllm-080-llama3-8b-bf16-3090-gptsession-testrun")
    assert log.memory["build_weights"].bytes == 16_060_522_752
    assert log.memory["build_activation"].bytes == 1_811_942_912
    log = _case("trtllm-1400-a100-smoothquant-kv-alloc")
    assert _text(log, "trt_managed") == "6683 MiB"


def test_trtllm_pytorch_profiling_lines_and_the_dry_run_before_them():
    # 1.1.0rc3 (tensorrt_llm/_torch/pyexecutor/_util.py): weights, the warm-up's torch peak, memory outside torch and
    # the device total; the allocation before "Peak memory during memory usage profiling" is the estimation's
    log = _case("trtllm-dgxspark-gptoss120b-111rc3-pytorch")
    assert [_text(log, item) for item in ("total", "weights", "activation", "non_torch", "kv_cache")] == [
        "119.70 GiB", "63.32 GiB", "0.85 GiB", "49.28 GiB", "5.95 GiB"]
    assert log.kv_cache_tokens == 86720 and log.counts["kv_cache_tokens_estimation"] == 8224
    assert _text(log, "kv_cache_estimation") == "0.56 GiB" and any("dry run" in n for n in log.notes)
    # without the profiling line the first allocation stands (nothing is taken for a dry run)
    excerpt = CASES["trtllm-dgxspark-gptoss120b-111rc3-pytorch"]["log_excerpt"].splitlines()
    first = parse_text("\n".join(line for line in excerpt if "Peak memory" not in line) + "\n")
    assert first.kv_cache_tokens == 8224 and "kv_cache_estimation" not in first.memory


def test_trtllm_c_runtime_pool_lines_of_0_8_to_0_17():
    log = _case("trtllm-backend456-gemma7b-a100-80gb-triton-f090")  # "Max tokens in paged KV cache: N. Allocating B"
    assert log.kv_cache_tokens == 117760 and log.memory["kv_cache"].bytes == 54_022_635_520
    assert log.counts["max_blocks_per_seq"] == 25  # "Max KV cache pages per sequence: 25"
    log = _case("trtllm-backend576-llama3-8b-1048k-h100-tp2-hostcache")
    assert (log.num_gpu_blocks, log.counts["num_cpu_blocks"], log.counts["max_blocks_per_seq"]) == (17210, 10728, 125)
    log = _case("trtllm-backend361-llama2-13b-tp2-2402-two-models")  # 0.8: "..., and 32 blocks per sequence"
    assert log.counts["max_blocks_per_seq"] == 32 and log.kv_cache_tokens == 35584
    assert _text(log, "engine_size") == "6867 MiB"  # "allocation in engine deserialization: CPU +0, GPU +6867"
    # where "Loaded engine size" is printed first, it is the engine's size (15319 MiB, deserialization +15316)
    assert _text(_case("trtllm-benchdoc-llama3-8b-3090-triton"), "engine_size") == "15319 MiB"


def test_trtllm_per_window_block_line_and_the_executor_token_budget():
    # 0.18+: "Max KV cache blocks per sequence: 65 [window size=2051], ..." (tensorrt_llm tutorials#150)
    log = _case("trtllm-tutorials150-specdec-llmapi-triton2512-h100x2")
    assert log.counts["max_blocks_per_seq"] == 65 and log.num_gpu_blocks == 116617
    # PyExecutor's "max_seq_len=2048, max_num_requests=2048, max_num_tokens=8192" (Dynamo, Feb 2025)
    log = _case("trtllm-dynamo-tinyllama-tp2-h100-f025-018dev-pytorch")
    assert log.settings.max_num_batched_tokens == 8192 and log.counts["max_running_requests"] == 2048
    # runtime buffers printed in KB (MemoryCounters::bytesToString) are read in KiB
    log = _case("trtllm-backend625-glm4-9b-int8-rtx4090-013-triton")
    assert log.memory["runtime_buffers"].bytes == round(648.06 * 1024)


# ------------------------------------------------------------------------------------------------------- llama.cpp

def test_llamacpp_iswa_creating_lines_and_the_slot_context():
    log = _case("llamacpp-27680-dsv4-iswa-64k")  # "creating non-SWA KV cache, size = 64000 cells", then the SWA one
    assert log.kv_cache_tokens == 64000 and log.counts["cells_swa"] == 4352
    log = _case("llamacpp-nixiesearch-qwen2-05b-2x4090-pp-32k-4slots")  # "new slot id_slot=0 n_ctx_slot=8192"
    assert log.counts["ctx_per_slot"] == 8192
