"""Engine start-up log readers (kvplan.logs): every real excerpt parses to the numbers it printed.

Excerpts: tests/data/engine_logs_dev.yaml (field log_excerpt, with the numbers each case records) and
tests/data/logs/ (sources in its README.md).
"""

from __future__ import annotations

import io

import pytest

from kvplan.logs import MAX_LOG_BYTES, detect, parse_log, parse_text
from conftest import DATA, log_cases

GIB = 1 << 30
CASES = {c["id"]: c for c in log_cases("engine_logs_dev.yaml")}
LOGS = DATA / "logs"


def gib(log, item):
    value = log.memory.get(item)
    return None if value is None else round(value.bytes / GIB, 4)


def test_every_dev_excerpt_is_read():
    with_excerpt = [c for c in CASES.values() if c.get("log_excerpt")]
    assert len(with_excerpt) >= 7
    for case in with_excerpt:
        log = parse_text(case["log_excerpt"])
        assert log.engine == {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}[case["engine"]], case["id"]
        assert log.complete, case["id"]


def test_vllm_v0_profile_10517():
    case = CASES["vllm-10517-llama31-8b-3090-20k"]
    r = case["reported"]
    log = parse_text(case["log_excerpt"])
    assert log.format == "vllm-v0-profile"
    assert gib(log, "weights") == r["weights_gib"]
    assert gib(log, "total") == r["total_gpu_memory_gib"]
    assert gib(log, "peak_torch") == r["peak_torch_memory_gib"]
    assert gib(log, "non_torch") == r["non_torch_memory_gib"]
    assert gib(log, "kv_cache") == r["available_kv_gib"]
    assert log.num_gpu_blocks == r["num_gpu_blocks"]
    assert log.max_concurrency == r["max_concurrency"]
    assert log.settings.max_model_len == case["max_model_len"]
    assert log.settings.gpu_memory_utilization == case["gpu_memory_utilization"]
    # activation is derived (peak includes the weights) and said to be
    assert "activation" in log.derived and gib(log, "activation") == round(17.06 - 14.9888, 4)
    # the rounding step of '3.81GiB' is 0.01 GiB; of '14.9888 GB' 0.0001 GiB
    assert log.memory["kv_cache"].step_bytes == GIB // 100 and log.memory["weights"].step_bytes == GIB // 10000
    assert log.settings.model is None and log.settings.engine_version is None  # not in the excerpt: unknown


def test_vllm_v0_summary_at_a_v1_release_is_read_as_v0():
    # file-rocm-16g-qwen3-06b-u090-40k-v085: 'Initializing a V0 LLM engine (v0.8.5)' and V0's worker.py summary
    from kvplan.engines.vllm.log import logged_settings

    case = next(c for c in log_cases("engine_logs_collected.yaml")
                if c["id"] == "file-rocm-16g-qwen3-06b-u090-40k-v085")
    log = parse_text(case["log_excerpt"])
    assert log.format == "vllm-0.7-profile" and log.settings.engine_version == "0.8.5"
    assert gib(log, "non_torch") == case["reported"]["non_torch_memory_gib"]
    assert gib(log, "kv_cache") == case["reported"]["available_kv_gib"]
    assert logged_settings(log.format, log.settings.engine_version) == {"vllm_engine": "v0"}
    assert logged_settings(log.format, "0.7.3") == {}  # V0 is that release's own engine: nothing to carry
    assert logged_settings(log.format, "0.11.0") == {}  # no V0 at 0.11: nothing carried
    assert logged_settings("vllm-v1", "0.9.2") == {}


def test_vllm_07_profile_13882_negative():
    case = CASES["vllm-13882-qwen25-7b-4060-negative"]
    r = case["reported"]
    log = parse_text(case["log_excerpt"])
    assert log.format == "vllm-0.7-profile"
    assert gib(log, "weights") == r["weights_gib"]
    assert gib(log, "total") == r["total_gpu_memory_gib"]
    assert gib(log, "budget") == r["budget_gib"]
    assert gib(log, "non_torch") == r["non_torch_memory_gib"]
    assert gib(log, "activation") == r["activation_peak_gib"]
    assert gib(log, "kv_cache") == r["available_kv_gib"]
    assert log.num_gpu_blocks == r["num_gpu_blocks"] == 0
    assert log.max_concurrency == r["max_concurrency"]
    assert log.settings.gpu_memory_utilization == case["gpu_memory_utilization"]
    assert log.settings.max_model_len == case["max_model_len"]


@pytest.mark.parametrize("case_id", ["hfmem-60-gpt-oss-120b", "vllm-40691-qwen35-27b-h20",
                                     "club3090-652-qwen36-35b-a3b-5090"])
def test_vllm_v1_token_lines(case_id):
    case = CASES[case_id]
    r = case["reported"]
    log = parse_text(case["log_excerpt"])
    assert log.engine == "vllm" and log.format == "vllm-v1"
    assert log.kv_cache_tokens == r["kv_cache_tokens"]
    assert gib(log, "kv_cache") == r.get("available_kv_gib")
    assert log.max_concurrency == r.get("max_concurrency")
    if case.get("max_model_len"):
        assert log.settings.max_model_len == case["max_model_len"] == log.concurrency_len


def test_sglang_summary_line_29575():
    case = CASES["sglang-29575-log-format"]
    r = case["reported"]
    log = parse_text(case["log_excerpt"])
    assert log.engine == "sglang"
    assert log.kv_cache_tokens == r["max_total_num_tokens"]
    assert log.settings.max_model_len == r["context_len"]
    assert log.settings.max_num_batched_tokens == r["chunked_prefill_size"]
    assert gib(log, "free_after_graphs") == r["available_gpu_mem_gb"]


def test_trtllm_1188():
    case = CASES["trtllm-1188-qwen25-coder-05b-a4000"]
    log = parse_text(case["log_excerpt"])
    assert log.engine == "trtllm"
    assert gib(log, "kv_cache") == case["reported"]["kv_gib"]
    assert log.kv_cache_tokens == case["reported"]["kv_cache_tokens"]


def test_vllm_v1_full_log_llava():
    log = parse_log(str(LOGS / "vllm-0.10.2-llava-mistral-7b-h100.log"))
    s = log.settings
    assert (log.engine, log.format, s.engine_version) == ("vllm", "vllm-v1", "0.10.2")
    assert s.model == "llava-hf/llava-v1.6-mistral-7b-hf" and s.dtype == "float16" and s.kv_dtype == "auto"
    assert (s.tp, s.pp, s.max_model_len, s.max_num_batched_tokens) == (1, 1, 4096, 16384)
    assert s.gpu_memory_utilization == 0.9
    assert gib(log, "total") == 79.19 and gib(log, "budget") == 71.27
    assert gib(log, "weights") == 14.0786  # "Model loading took", the finer of the two weights lines
    assert gib(log, "activation") == 1.97 and gib(log, "non_torch") == 0.07 and gib(log, "cudagraph") == 0.67
    assert log.memory["kv_cache"].bytes == 59212694937 and log.memory["kv_cache"].step_bytes == 1  # exact bytes
    assert log.kv_cache_tokens == 451744 and log.max_concurrency == 110.29 and log.concurrency_len == 4096


def test_sglang_ranks_and_kv_sizes():
    log = parse_log(str(LOGS / "sglang-tp8-kv-allocated.log"))
    assert log.engine == "sglang"
    assert log.kv_cache_tokens == 2795207
    assert gib(log, "kv_cache") == round(2 * 53.31, 4)
    assert set(log.ranks) == {0, 1, 2, 3, 5, 6, 7}
    assert gib(log, "free_after_kv") == 11.87


def test_sglang_load_weight_end_truncated():
    log = parse_log(str(LOGS / "sglang-dsv4-load-weight-end.log"))
    assert log.engine == "sglang"
    assert gib(log, "weights") == 125.65 and gib(log, "free_after_weights") == 12.25
    assert not log.complete and "kv_cache" not in log.memory
    assert any("ends before the KV cache" in n for n in log.notes)


def test_llamacpp_two_devices():
    log = parse_log(str(LOGS / "llamacpp-qwen-coder-32k-q8.log"))
    assert log.engine == "llamacpp"
    assert log.memory["kv_cache"].bytes == 4352 * (1 << 20)  # KV self size; = 2788 + 1564 MiB over CUDA0/1
    assert log.kv_cache_tokens == 32768 and log.settings.max_model_len == 32768
    assert log.settings.kv_dtype == "q8_0"
    assert log.memory["activation"].bytes == int((233.00 + 237.51) * (1 << 20))  # CUDA compute buffers only
    assert log.settings.gpu_name == "NVIDIA GeForce RTX 3090 Ti"


def test_llamacpp_new_format_and_swa_caches():
    # the line format of llama-kv-cache-unified.cpp (size, cells, layers, seqs, K/V types); a SWA model prints two
    text = ("build: 5913 (225e7a14)\n"
            "llama_context: n_ctx         = 8192\n"
            "llama_kv_cache_unified_iswa: creating non-SWA KV cache, size = 8192 cells\n"
            "llama_kv_cache_unified: size =  320.00 MiB (  8192 cells,  10 layers,  1/1 seqs), K (f16):  160.00 MiB, V (f16):  160.00 MiB\n"
            "llama_kv_cache_unified: size =   62.50 MiB (  1024 cells,  50 layers,  1/1 seqs), K (f16):   31.25 MiB, V (f16):   31.25 MiB\n"
            "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes\n")
    log = parse_text(text)
    assert log.engine == "llamacpp" and log.settings.engine_version == "b5913"
    assert log.memory["kv_cache"].bytes == int(382.5 * (1 << 20))
    assert log.settings.kv_dtype == "f16" and log.settings.max_model_len == 8192
    assert log.settings.gpu_name == "NVIDIA GeForce RTX 4090"


def test_vllm_ranks_take_rank_zero_and_util_note():
    log = parse_log(str(LOGS / "vllm-0.21-tp4-ranks.log"))
    assert log.engine == "vllm" and gib(log, "kv_cache") == 15.72
    assert gib(log, "cudagraph") == 0.17  # "Estimated CUDA graph memory" (subtracted from v0.21)
    assert log.settings.gpu_memory_utilization == 0.92
    assert set(log.ranks) == {0, 1, 3}


def test_ray_worker_prefixes_colours_and_timestamps():
    text = ("\x1b[36m(RayWorkerWrapper pid=4711)\x1b[0m INFO 01-30 03:19:14 [gpu_worker.py:298] "
            "Available KV cache memory: 30.10 GiB\n"
            "\x1b[32mINFO\x1b[0m 01-30 03:19:14 [gpu_worker.py:298] Available KV cache memory: 30.50 GiB\n"
            "(VllmWorker rank=1 pid=12) INFO [kv_cache_utils.py:864] GPU KV cache size: 1,000 tokens\n"
            "2025-01-30T03:19:14.123Z INFO [kv_cache_utils.py:864] GPU KV cache size: 999,936 tokens\r\n")
    log = parse_text(text)
    assert log.engine == "vllm"
    assert gib(log, "kv_cache") == 30.5  # the driver's own line (rank 0) before the Ray worker's
    assert log.kv_cache_tokens == 999936
    assert any("differs between ranks" in n for n in log.notes)


def test_rank_values_that_differ_are_said():
    text = "".join(f"[2025-12-28 10:40:09 TP{r}] Memory pool end. avail mem={m} GB\n"
                   for r, m in ((3, "12.68"), (2, "12.45"), (0, "12.40")))
    log = parse_text("[2025-12-28 10:40:09 TP0] KV Cache is allocated. #tokens: 2090351, K size: 23.92 GB, "
                     "V size: 23.92 GB\n" + text)
    assert gib(log, "free_after_kv") == 12.40
    assert any("free_after_kv differs between ranks" in n for n in log.notes)


def test_unknown_stays_unknown_and_garbage_is_no_log():
    log = parse_text("hello world\nthis is not a log\n")
    assert log.engine is None and log.memory == {} and detect("nothing") is None
    assert parse_text("").engine is None


@pytest.mark.slow
def test_reading_is_bounded(tmp_path):
    big = tmp_path / "big.log"
    line = b"(EngineCore pid=1) INFO [gpu_worker.py:1] Available KV cache memory: 1.00 GiB\n"
    big.write_bytes(line * (MAX_LOG_BYTES // len(line) + 1000))
    log = parse_log(str(big))
    assert log.cut and log.bytes_read <= MAX_LOG_BYTES and gib(log, "kv_cache") == 1.0
    stream = io.BytesIO(b"x" * (MAX_LOG_BYTES + 10))
    assert parse_log(stream).bytes_read == MAX_LOG_BYTES


def test_truncated_vllm_log_is_incomplete():
    text = (LOGS / "vllm-0.10.2-llava-mistral-7b-h100.log").read_text()
    head = text[: text.index("Available KV cache memory")]
    log = parse_text(head)
    assert log.engine == "vllm" and not log.complete and "kv_cache" not in log.memory
    assert gib(log, "weights") == 14.0786


def test_vllm_v1_debug_profile_lines():
    # vLLM 0.10/0.11 at debug level (a public GitHub notes file, kvplan search index id 34681159919)
    text = ("(EngineCore_DP0 pid=2552931) DEBUG 09-28 21:12:43 [v1/worker/gpu_worker.py:284] Initial free memory: "
            "23.08 GiB; Requested memory: 0.80 (util), 18.82 GiB\n"
            "(EngineCore_DP0 pid=2552931) DEBUG 09-28 21:12:43 [v1/worker/gpu_worker.py:297] Memory profiling takes "
            "14.40 seconds. Total non KV cache memory: 10.22GiB; torch peak memory increase: 1.40GiB; non-torch "
            "forward increase memory: 0.02GiB; weights memory: 8.80GiB.\n"
            "(EngineCore_DP0 pid=2552931) INFO 09-28 21:12:43 [v1/worker/gpu_worker.py:298] Available KV cache "
            "memory: 8.60 GiB\n"
            "(EngineCore_DP0 pid=2552931) INFO 09-28 21:12:44 [v1/core/kv_cache_utils.py:864] GPU KV cache size: "
            "62,608 tokens\n"
            "(EngineCore_DP0 pid=2552931) INFO 09-28 21:12:44 [v1/core/kv_cache_utils.py:868] Maximum concurrency "
            "for 1,024 tokens per request: 61.14x\n")
    log = parse_text(text)
    assert log.settings.gpu_memory_utilization == 0.8
    assert (gib(log, "budget"), gib(log, "weights"), gib(log, "activation"), gib(log, "non_torch"),
            gib(log, "kv_cache")) == (18.82, 8.80, 1.40, 0.02, 8.60)
    assert log.kv_cache_tokens == 62608 and log.concurrency_len == 1024 and log.max_concurrency == 61.14
    assert "total" not in log.memory  # the free memory at start is not the total: unknown


def test_llamacpp_mla_line_and_older_seqs_format():
    # rendered line quoted from ggml-org/llama.cpp#27872 (an MLA model: V shares K's latent, 0 MiB)
    log = parse_text("llama_kv_cache: size =  354.75 MiB (  8448 cells,  43 layers,  1/1 seqs), K (f16):  354.75 MiB, "
                     "V (f16):    0.00 MiB\n")
    assert log.engine == "llamacpp" and log.memory["kv_cache"].bytes == int(354.75 * (1 << 20))
    assert log.kv_cache_tokens == 8448
    # the 2025 unified-cache format printed 'N seqs' without the stream count
    log = parse_text("llama_kv_cache_unified: size =  512.00 MiB (  4096 cells,  32 layers,  1 seqs), K (q8_0):  "
                     "256.00 MiB, V (q8_0):  256.00 MiB\n")
    assert log.memory["kv_cache"].bytes == 512 << 20 and log.settings.kv_dtype == "q8_0"


def test_sglang_full_startup_qwq_tp4():
    log = parse_log(str(LOGS / "sglang-0.4-qwq-32b-tp4-l4.log"))
    s = log.settings
    assert log.engine == "sglang" and s.tp == 4 and s.mem_fraction_static == 0.85
    assert s.model == "/home/model/Qwen/QwQ-32B" and s.max_num_batched_tokens == 2048
    assert s.max_model_len == 131072  # context_len of the scheduler line (server args: context_length=None)
    assert gib(log, "free_before_weights") == 21.63 and gib(log, "free_after_weights") == 6.09
    assert gib(log, "weights") == 15.54 and gib(log, "kv_cache") == 2.84 and gib(log, "cudagraph") == 0.93
    assert gib(log, "free_after_kv") == 2.09 and log.kv_cache_tokens == 46611
    assert set(log.ranks) == {0, 1, 2, 3}
    # that SGLang sized the pool from the free memory before the weights (21.63 GiB), not the GPU total:
    # 6.09 - 21.63 x (1 - 0.85) = 2.8455 GiB = K + V (2 x 1.42, rounded)
    assert abs((6.09 - 21.63 * 0.15) - 2.84) < 0.01


# ------------------------------------------------------------------ the readers live in the engine packages

def test_log_readers_are_the_engines_own():
    from kvplan.engines import all_engines, get_engine
    from kvplan.logs.calibration import schema
    from kvplan.logs.reader import log_readers

    with_log = [e.name for e in all_engines() if e.log is not None]
    assert with_log == ["vllm", "sglang", "trtllm", "llamacpp"]
    assert get_engine("hf").log is None and get_engine("hf-static").log is None
    for engine in all_engines():
        if engine.log is not None:
            assert engine.log.engine == engine.name and engine.log.title == engine.title
            assert type(engine).__module__ + ".log" == engine.log.read.__module__  # engines/<engine>/log.py
    assert [r.engine for r in log_readers()] == with_log
    assert schema()["properties"]["engine"]["enum"] == with_log
    # each real log is detected as its engine's (file names start with the engine)
    for path in sorted(LOGS.glob("*.log")):
        assert detect(path.read_text()) == path.name.split("-")[0], path.name


def test_no_engine_name_is_tested_outside_the_engine_packages():
    # docs/architecture.md: no module outside kvplan/engines/<engine>/ compares an engine's name
    from pathlib import Path

    import kvplan
    from kvplan.engines import ENGINE_NAMES

    root = Path(kvplan.__file__).parent
    for path in [*sorted((root / "logs").glob("*.py")), root / "cli" / "log.py"]:
        text = path.read_text()
        for name in ENGINE_NAMES:
            assert f'"{name}"' not in text and f"'{name}'" not in text, (path.name, name)


def test_an_engine_added_with_a_log_is_read_without_touching_kvplan_logs(monkeypatch, capsys):
    import re
    import sys
    import types
    from dataclasses import dataclass

    import kvplan.engines as engines
    from kvplan.cli import main
    from kvplan.logs.core import logged_size
    from kvplan.logs.reader import LogReader

    pattern = re.compile(r"toy pool: ([\d.]+) GiB for (\d+) tokens")

    def read(lines, out):
        for line in lines:
            if m := pattern.search(line.text):
                out.put("kv_cache", logged_size(m.group(1), "GiB"), line)
                out.put("kv_cache_tokens", int(m.group(2)), line)
        return "toy-v1"

    @dataclass(frozen=True)
    class Toy:
        name: str = "toy"
        title: str = "Toy Engine"
        log: LogReader = LogReader(engine="toy", title="Toy Engine", markers=("toy pool:",), read=read)

    module = types.ModuleType("toy_engine_for_tests")
    module.TOY = Toy()
    monkeypatch.setitem(sys.modules, "toy_engine_for_tests", module)
    monkeypatch.setitem(engines._REGISTRY, "toy", ("toy_engine_for_tests", "TOY"))
    monkeypatch.setattr(engines, "ENGINE_NAMES", (*engines.ENGINE_NAMES, "toy"))
    log = parse_text("INFO toy pool: 1.50 GiB for 4096 tokens\n")
    assert (log.engine, log.format, log.kv_cache_tokens) == ("toy", "toy-v1", 4096)
    assert log.memory["kv_cache"].bytes == 3 * GIB // 2 and log.complete
    assert "Toy Engine" in parse_text("nothing here").notes[0]
    assert main(["log", "-", "--engine", "nope"], fast=False) == 2
    assert "known: vllm, sglang, trtllm, llamacpp, toy" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# Formats read since issue 21 (item 6): each a real log in tests/data/logs/ (sources in its README.md)


def test_vllm_065_profile_one_item_a_line_10511():
    # vllm-project/vllm#10511: the December-2024 profile, each item on its own line, name then value
    log = parse_log(str(LOGS / "vllm-0.6.5-10511-llama3-8b-h100-profile-lines.log"))
    assert log.engine == "vllm" and log.format == "vllm-0.6.5-profile"
    assert (gib(log, "total"), gib(log, "budget"), gib(log, "weights")) == (79.22, 71.29, 14.96)
    assert (gib(log, "non_torch"), gib(log, "activation"), gib(log, "kv_cache")) == (1.79, 1.26, 53.29)
    assert log.settings.gpu_memory_utilization == 0.9
    assert "budget" not in log.derived  # printed, not worked out from the utilization


def test_vllm_v0_error_names_the_tokens_the_pool_holds_10517():
    # "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache
    # (23648)": 23,648 = 1,478 blocks x 16, the token count V0 prints nowhere else
    log = parse_log(str(LOGS / "vllm-0.6-10517-llama31-8b-3090-29k.log"))
    assert log.kv_cache_tokens == 23_648 == log.num_gpu_blocks * 16
    assert log.settings.max_model_len == 29_000


def test_trtllm_08_allocate_bytes_and_tokens_1400():
    log = parse_log(str(LOGS / "trtllm-0.8-1400-a100-allocate-bytes.log"))
    assert log.engine == "trtllm"
    assert log.memory["kv_cache"].bytes == 69_524_783_104 and log.memory["kv_cache"].step_bytes == 1  # exact
    assert log.kv_cache_tokens == 132_608


def test_trtllm_primary_pool_blocks_and_available_2268():
    log = parse_log(str(LOGS / "trtllm-0.13-2268-primary-pool.log"))
    assert log.num_gpu_blocks == 631
    assert (gib(log, "total"), gib(log, "free_before_kv")) == (39.39, 21.89)


@pytest.mark.parametrize("line, tokens", [
    ("[TensorRT-LLM][INFO] Using 10718 tokens in paged KV cache.", 10_718),  # NVIDIA/TensorRT-LLM#224
    ("[TensorRT-LLM][INFO] Using 31616 total tokens in paged KV cache, and 16 blocks per sequence", 31_616),
])
def test_trtllm_token_lines_of_both_wordings(line, tokens):
    assert parse_text(line + "\n").kv_cache_tokens == tokens


def test_vllm_init_snapshot_is_not_the_budgets_non_torch():
    """0.10+ gpu_worker.py logs the CUDA context at init ("worker init memory snapshot: ... non_torch_memory=0.51GiB")
    before the profile; the budget's non-torch item is the growth since (0.25 GiB, "for non-torch memory" and the
    DEBUG "non-torch forward increase memory"): 75.23 - 12.56 - 0.77 - 0.25 = 61.65 ~ the logged 61.66 GiB."""
    found = log_cases("engine_logs_found.yaml")
    case = next(c for c in found if c["id"] == "llmd-planner-v0190-codellama-codellama-7b-h-h100-80gb-tp1pp1dp1-8192")
    r = case["reported"]
    log = parse_text(case["log_excerpt"])
    assert gib(log, "non_torch") == r["non_torch_forward_increase_gib"] == 0.25
    assert gib(log, "non_torch_at_init") == r["non_torch_memory_at_init_gib"]
    assert gib(log, "free_at_init") == r["free_memory_at_init_gib"]
    assert gib(log, "non_kv") == r["non_kv_cache_memory_gib"]
    assert log.item("kv_cache_to_fit") == r["kv_cache_memory_to_fit_bytes"]
    assert log.item("kv_cache_full") == r["kv_cache_memory_full_bytes"]
    assert log.item("cudagraph_piecewise_first") == r["cuda_graph_piecewise_first_mib"] * (1 << 20)
    assert log.item("cudagraph_full_each") == r["cuda_graph_full_per_graph_mib"] * (1 << 20)
    budget = sum(gib(log, k) for k in ("weights", "activation", "non_torch"))
    assert abs(gib(log, "budget") - budget - gib(log, "kv_cache")) <= 0.02


def test_llamacpp_halves_host_buffers_and_nvml_total():
    """ggml's NVML line (bytes), the free memory at load, K and V of the cache line and the buffers in host memory
    (an ollama 0.12 log on an RTX 3060, tests/data/engine_logs_more.yaml)."""
    cases = {c["id"]: c for c in log_cases()}
    case = cases["llamacpp-ollama-qwen25-coder-7b-q4km-3060-4k"]
    r = case["reported"]
    log = parse_text(case["log_excerpt"])
    mib = 1 << 20
    assert log.item("total") == r["nvml_total_bytes"] and log.item("free_at_start") == r["nvml_free_bytes"]
    assert log.item("free_at_load") == r["free_mib_at_load"] * mib
    assert log.item("k_size") == log.item("v_size") == r["k_mib"] * mib == r["v_mib"] * mib
    assert abs(log.item("weights_host") - r["model_buffer_cpu_mapped_mib"] * mib) < 1
    assert abs(log.item("compute_host") - r["compute_buffer_cuda_host_mib"] * mib) < 1
    assert abs(log.item("output_host") - r["output_buffer_cuda_host_mib"] * mib) < 1
    assert log.item("kv_cache") == log.item("k_size") + log.item("v_size")


def test_lazy_patterns_match_as_compiled_ones_and_compile_only_when_used():
    """The engines' log patterns are compiled on first use (``LazyPattern``): the same matches as ``re.compile``,
    and reading a vLLM log compiles none of the other engines' patterns (their cost is kvplan log's start-up)."""
    import re
    import subprocess
    import sys

    from kvplan.engines.log_format import LazyPattern, lazy_pattern

    lazy, eager = lazy_pattern(r"(\d+) (GiB|MiB)", re.IGNORECASE), re.compile(r"(\d+) (GiB|MiB)", re.IGNORECASE)
    assert "_compiled" not in vars(lazy)
    for text in ("12 gib and 3 MiB", "none", "7 GIB"):
        assert [m.groups() for m in lazy.finditer(text)] == [m.groups() for m in eager.finditer(text)]
        assert lazy.findall(text) == eager.findall(text) and lazy.sub("x", text) == eager.sub("x", text)
        found, wanted = lazy.search(text), eager.search(text)
        assert (found and found.span()) == (wanted and wanted.span())
    assert lazy.groups == 2 and lazy.pattern == eager.pattern and isinstance(lazy, LazyPattern)
    code = ("import sys, io, contextlib\nfrom kvplan.cli import main\nfrom kvplan.engines.log_format import LazyPattern\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main(['log', {str(LOGS / 'vllm-0.6-10517-llama31-8b-3090-29k.log')!r}])\n"
            "for name in ('sglang', 'trtllm', 'llamacpp'):\n"
            "    module = sys.modules[f'kvplan.engines.{name}.log']\n"
            "    print(name, sum('_compiled' in vars(v) for v in vars(module).values() if isinstance(v, LazyPattern)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["sglang", "0", "trtllm", "0", "llamacpp", "0"]
