"""Issue 22, four wrong verdicts: runtime quantization, --dtype, a max model length past the model's, and SGLang
with a pool shorter than one request. Each is planned as the engine's code does (the rules and their sources:
kvplan/engines/vllm/flags.py, kvplan/engines/sglang/flags.py read_model / short_pool,
kvplan/budgets/runtime_weights.py). The deployments are small scripts written here, not copies of public files.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import hf_token, run_cli

TOKEN = "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"

# Llama-3.1-70B (= Llama-3.3-70B-Instruct's architecture), by hand from its config (hidden 8,192, 80 layers of
# q/o 8,192 x 8,192, k/v 8,192 x 1,024, gate/up/down 8,192 x 28,672, vocab 128,256, untied lm_head):
EMBED_70B = 128_256 * 8_192  # 1,050,673,152: the embedding, and again the lm_head
NORMS_70B = (2 * 80 + 1) * 8_192  # 1,318,912
PARAMS_70B = 70_553_706_496
LINEAR_70B = PARAMS_70B - 2 * EMBED_70B - NORMS_70B  # 68,451,041,280
OTHER_70B = 2 * EMBED_70B + NORMS_70B  # 2,102,665,216 kept in bf16
FP8_70B = LINEAR_70B * 1 + OTHER_70B * 2  # 72,656,371,712 B
NF4_70B = LINEAR_70B * 8452 // 16384 + OTHER_70B * 2  # 0.5 + 1/64 + 4/16384 = 8452/16384 B a weight
LLAMA8B_BF16 = 16_060_522_496  # 8,030,261,248 parameters x 2 B


def script(tmp_path: Path, text: str, gpu: str = "H100", name: str = "serve.sh") -> Path:
    path = tmp_path / name
    path.write_text(f"# kvplan/gpu: {gpu}\n{text}\n")
    return path


def check_json(path: Path) -> tuple[int, dict]:
    code, out, err = run_cli(["check", str(path), "--format", "json"])
    assert "Traceback" not in out + err
    doc = json.loads(out)
    return code, doc["deployments"][0] if "deployments" in doc else doc


def codes(result: dict) -> dict[str, dict]:
    return {f["code"]: f for f in result["findings"]}


def one_line(code: int, err: str) -> str:
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------------------------------------ 1. quantization

def test_hand_counts_agree() -> None:
    assert LINEAR_70B == 68_451_041_280 and OTHER_70B == 2_102_665_216 and FP8_70B == 72_656_371_712
    assert NF4_70B == 35_311_779_840 + 4_205_330_432


def test_vllm_fp8_runtime_quantization_fits_two_h100(tmp_path: Path) -> None:
    path = script(tmp_path, "vllm serve meta-llama/Llama-3.3-70B-Instruct --quantization fp8 --tensor-parallel-size 2")
    code, result = check_json(path)
    assert code == 0 and result["status"] == "pass"
    assert result["weights_bytes_per_gpu"] == FP8_70B // 2  # 36,328,185,856 B, 33.83 GiB per GPU
    note = codes(result)["weights-dtype"]["message"]
    assert "68,451,041,280 linear weights" in note and "2,102,665,216 other parameters" in note


def test_without_quantization_the_same_file_fails(tmp_path: Path) -> None:
    path = script(tmp_path, "vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 2")
    code, result = check_json(path)
    assert code == 1 and result["weights_bytes_per_gpu"] == 141_107_412_992 // 2


def test_suggestion_never_proposes_what_the_file_sets(tmp_path: Path) -> None:
    path = script(tmp_path, "vllm serve meta-llama/Llama-3.3-70B-Instruct --quantization fp8", gpu="L40S")
    code, result = check_json(path)
    assert code == 1
    message = codes(result)["does-not-fit"]["message"]
    assert "weights alone" in message and "quantized checkpoint" not in message and "already fp8" in message
    # the same model unquantized is still told it may quantize
    code, result = check_json(script(tmp_path, "vllm serve meta-llama/Llama-3.3-70B-Instruct", gpu="L40S", name="b.sh"))
    assert code == 1 and "quantized checkpoint (fp8 / int4 weights)" in codes(result)["does-not-fit"]["message"]


def test_vllm_bitsandbytes_is_nf4(tmp_path: Path) -> None:
    path = script(tmp_path, "vllm serve meta-llama/Llama-3.3-70B-Instruct -q bitsandbytes -tp 2")
    code, result = check_json(path)
    assert code == 0 and result["weights_bytes_per_gpu"] == NF4_70B // 2


def test_sglang_fp8_runtime_quantization(tmp_path: Path) -> None:
    path = script(tmp_path, "python -m sglang.launch_server --model-path meta-llama/Llama-3.3-70B-Instruct "
                            "--quantization fp8 --tp 2")
    code, result = check_json(path)
    assert code == 0 and result["weights_bytes_per_gpu"] == FP8_70B // 2


def test_quantized_checkpoint_is_loaded_as_stored(tmp_path: Path) -> None:
    from kvplan.sources.bundled import load_bundled

    spec = load_bundled("Qwen/Qwen3-30B-A3B-FP8")
    assert spec is not None and spec.weights_dtype == "fp8"
    code, result = check_json(script(tmp_path, "vllm serve Qwen/Qwen3-30B-A3B-FP8 --quantization fp8"))
    assert code == 0 and result["weights_bytes_per_gpu"] == spec.weights_bytes - (spec.mtp_weights_bytes or 0)
    assert codes(result)["quantization"]["severity"] == "note"


def test_a_method_that_needs_a_quantized_checkpoint_is_said(tmp_path: Path) -> None:
    code, result = check_json(script(tmp_path, "vllm serve meta-llama/Llama-3.1-8B --quantization awq "
                                               "--max-model-len 8192"))
    assert code == 0 and result["weights_bytes_per_gpu"] == LLAMA8B_BF16
    assert codes(result)["quantization"]["severity"] == "warning"


def test_max_batch_quantization() -> None:
    code, out, err = run_cli(["max-batch", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "H100", "--tp", "2",
                              "--quantization", "fp8", "-f", "json"])
    assert code == 0, err
    assert json.loads(out)["per_gpu"]["weights_bytes"] == FP8_70B // 2
    code, out, err = run_cli(["max-batch", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "H100", "--tp", "2",
                              "-f", "json"])
    assert code == 1
    line = one_line(*run_cli(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-e", "llamacpp",
                              "--quantization", "fp8"])[::2])
    assert "--quantization" in line and "llamacpp" in line


def test_tied_lm_head_is_found() -> None:
    from kvplan.budgets.runtime_weights import split_params
    from kvplan.sources.bundled import load_bundled

    tied = split_params(load_bundled("meta-llama/Llama-3.2-1B-Instruct"))  # type: ignore[arg-type]
    # 1,235,814,400 parameters; one 128,256 x 2,048 embedding (tied) and 2 x 16 + 1 norms of 2,048
    assert tied is not None and tied.other == 128_256 * 2_048 + 33 * 2_048 and "tied" in tied.how
    untied = split_params(load_bundled("meta-llama/Llama-3.1-8B"))  # type: ignore[arg-type]
    assert untied is not None and untied.other == 2 * 128_256 * 4_096 + 65 * 4_096


# ------------------------------------------------------------------------------------------------ 2. --dtype

@pytest.mark.parametrize("flag, kv_dtype, weights, kv_bytes", [
    ("float32", "float32", 2 * LLAMA8B_BF16, 8 << 30),  # 32,768 tokens x 32 layers x 2 x 8 x 128 x 4 B = 8 GiB
    ("float", "float32", 2 * LLAMA8B_BF16, 8 << 30),
    ("half", "float16", LLAMA8B_BF16, 4 << 30),
    ("float16", "float16", LLAMA8B_BF16, 4 << 30),
    ("bfloat16", "bfloat16", LLAMA8B_BF16, 4 << 30),
    ("auto", "bfloat16", LLAMA8B_BF16, 4 << 30),
])
def test_vllm_dtype(tmp_path: Path, flag: str, kv_dtype: str, weights: int, kv_bytes: int) -> None:
    code, result = check_json(script(tmp_path, f"vllm serve meta-llama/Llama-3.1-8B --dtype {flag} "
                                               "--max-model-len 32768"))
    assert code == 0
    assert result["kv_dtype"] == kv_dtype and result["weights_bytes_per_gpu"] == weights
    assert result["request_kv_bytes"] == kv_bytes


def test_float32_checkpoint_under_auto(tmp_path: Path) -> None:
    # OLMo-2-1124-7B's config says float32: 7,298,617,344 parameters; vLLM loads it in bfloat16
    # (_resolve_auto_dtype), SGLang in float16 (_get_and_verify_dtype): 2 B a parameter either way
    code, result = check_json(script(tmp_path, "vllm serve allenai/OLMo-2-1124-7B"))
    assert code == 0 and result["kv_dtype"] == "bfloat16" and result["weights_bytes_per_gpu"] == 7_298_617_344 * 2
    code, result = check_json(script(tmp_path, "python -m sglang.launch_server --model-path allenai/OLMo-2-1124-7B",
                                     name="s.sh"))
    assert code == 0 and result["kv_dtype"] == "float16" and result["weights_bytes_per_gpu"] == 7_298_617_344 * 2


def test_dtype_refusals(tmp_path: Path) -> None:
    code, result = check_json(script(tmp_path, "vllm serve meta-llama/Llama-3.1-8B --dtype float64"))
    assert code == 2 and result["status"] == "invalid" and "dtype" in result["findings"][-1]["message"]
    code, result = check_json(script(tmp_path, "vllm serve google/gemma-2-9b-it --dtype half", name="g.sh"))
    assert code == 2 and "float16" in result["findings"][-1]["message"]
    line = one_line(*run_cli(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--dtype", "x" * 5000])[::2])
    assert line.startswith("kvplan: error: --dtype") and len(line) < 300


def test_max_batch_dtype() -> None:
    code, out, err = run_cli(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--dtype", "float32",
                              "--max-model-len", "32768", "-f", "json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kv_dtype"] == "float32" and doc["per_gpu"]["weights_bytes"] == 2 * LLAMA8B_BF16


# ------------------------------------------------------------------------------------------------ 3. max model len

def test_vllm_refuses_a_max_model_len_past_the_model(tmp_path: Path) -> None:
    code, result = check_json(script(tmp_path, "vllm serve meta-llama/Llama-3.1-8B --max-model-len 262144"))
    assert code == 1 and result["status"] == "fail"
    finding = codes(result)["max-model-len-beyond-model"]
    assert finding["severity"] == "error" and "131,072" in finding["message"]
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in finding["message"] and "--max-model-len 131,072" in finding["message"]


def test_allowed_long_max_model_len_is_planned(tmp_path: Path) -> None:
    code, result = check_json(script(tmp_path, "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve meta-llama/Llama-3.1-8B "
                                               "--max-model-len 262144"))
    assert code == 0 and result["max_model_len"] == 262_144
    assert codes(result)["max-model-len-beyond-model"]["severity"] == "warning"


def test_max_batch_refuses_then_allows() -> None:
    line = one_line(*run_cli(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                              "--max-model-len", "262144"])[::2])
    assert "--max-model-len" in line and "131,072" in line and "--allow-long-max-model-len" in line
    code, out, err = run_cli(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "262144",
                              "--allow-long-max-model-len", "-f", "json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["max_model_len"] == 262_144 and any("--allow-long-max-model-len" in a for a in doc["assumptions"])


def test_derived_lengths() -> None:
    from kvplan.engines.sglang.flags import derived_context_len
    from kvplan.engines.vllm.flags import derived_max_len
    from kvplan.sources.bundled import load_bundled

    v3 = load_bundled("deepseek-ai/DeepSeek-V3")
    assert v3 is not None
    assert derived_max_len(v3)[0] == 4_096 * 40  # yarn: original_max_position_embeddings x factor
    assert derived_context_len(v3)[0] == 163_840  # SGLang: no factor where rope_scaling names the original
    llama = load_bundled("meta-llama/Llama-3.1-8B")
    assert derived_max_len(llama)[0] == derived_context_len(llama)[0] == 131_072  # llama3: no factor


def test_sglang_refuses_a_context_length_past_the_model(tmp_path: Path) -> None:
    code, result = check_json(script(tmp_path, "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B "
                                               "--context-length 262144"))
    assert code == 1 and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in \
        codes(result)["max-model-len-beyond-model"]["message"]


# ------------------------------------------------------------------------------------------------ 4. SGLang short pool

def test_sglang_starts_and_caps_requests(tmp_path: Path) -> None:
    code, result = check_json(script(tmp_path, "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B "
                                               "--context-length 131072", gpu="L4"))
    assert code == 0 and result["status"] == "warn"
    pool = result["kv_cache_tokens"]
    assert 0 < pool < 131_072
    finding = codes(result)["context-capped"]
    assert finding["severity"] == "warning" and f"at {pool - 1:,} tokens" in finding["message"]
    assert f"{pool - 6:,} tokens or more is refused" in finding["message"]
    # vLLM on the same GPU refuses to start (its own start-up check)
    code, result = check_json(script(tmp_path, "vllm serve meta-llama/Llama-3.1-8B --max-model-len 131072",
                                     gpu="L4", name="v.sh"))
    assert code == 1 and "does-not-fit" in codes(result)


def test_sglang_min_context_above_the_cap_fails(tmp_path: Path) -> None:
    path = tmp_path / "sglang.sh"
    path.write_text("# kvplan/gpu: L4\n# kvplan/min-context: 100k\n"
                    "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --context-length 131072\n")
    code, result = check_json(path)
    assert code == 1 and codes(result)["min-context"]["severity"] == "error"


def test_short_pool_rule() -> None:
    from kvplan.engines.sglang.flags import short_pool

    assert short_pool(0, 4096, {}).severity == "error"  # type: ignore[union-attr]
    assert short_pool(6, 4096, {}).severity == "error"  # max_req_len 5, max_req_input_len 0: the assert fails
    capped = short_pool(7, 4096, {"allow_auto_truncate": True})
    assert capped is not None and capped.severity == "warning" and "cut to that length" in capped.message


def test_max_batch_sglang_says_what_sglang_does() -> None:
    code, _, err = run_cli(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "L4", "-e", "sglang",
                            "--max-model-len", "131072"])
    assert code == 1 and "SGLang still starts" in err and len(err.strip().splitlines()) == 1


def test_a_megabyte_value_is_cut_in_the_finding(tmp_path: Path) -> None:
    huge = "q" * (1 << 20)
    code, result = check_json(script(tmp_path, f"vllm serve meta-llama/Llama-3.1-8B --quantization {huge} "
                                               f"--max-model-len 8192"))
    assert code == 0 and len(codes(result)["quantization"]["message"]) < 400


# ------------------------------------------------------------------------------------------------ fuzz

WORK_FLAGS = st.sampled_from(["--quantization", "-q", "--dtype", "--max-model-len", "--context-length",
                              "--tensor-parallel-size", "--tp", "--allow-auto-truncate"])
VALUES = st.one_of(st.sampled_from(["fp8", "bitsandbytes", "awq", "FP8", "half", "float", "float32", "bfloat16",
                                    "auto", "262144", "131072", "32k", "1", "2", "0", "-1", "", "nan", "1e308",
                                    "true", "x" * 2000, "\u00e9", "9" * 400]),
                   st.text(max_size=20))
ENVS = st.sampled_from(["", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 ", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=true ",
                        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 ", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=maybe "])
LAUNCHERS = st.sampled_from(["vllm serve meta-llama/Llama-3.1-8B",
                             "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B",
                             "vllm serve allenai/OLMo-2-1124-7B", "vllm serve Qwen/Qwen3-30B-A3B-FP8"])
WORK = Path(__import__("tempfile").mkdtemp(prefix="kvplan-verdicts-"))


def _check_outcome(code: int, out: str, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in out + err and TOKEN not in out + err
    if code == 2 and err.strip():
        assert len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(launcher=LAUNCHERS, env=ENVS, gpu=st.sampled_from(["H100", "L4", "A100-80GB"]),
       flags=st.lists(st.tuples(WORK_FLAGS, VALUES), max_size=4))
def test_fuzz_check(launcher: str, env: str, gpu: str, flags: list[tuple[str, str]]) -> None:
    words = " ".join(f"{flag} '{value}'" if "'" not in value else flag for flag, value in flags)
    path = WORK / "fuzz.sh"
    path.write_text(f"# kvplan/gpu: {gpu}\n{env}{launcher} {words}\n")
    with hf_token(TOKEN):
        _check_outcome(*run_cli(["check", str(path)]))


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(engine=st.sampled_from(["vllm", "sglang", "trtllm", "hf"]), quant=st.one_of(st.none(), VALUES),
       dtype=st.one_of(st.none(), VALUES), mml=st.one_of(st.none(), VALUES), allow=st.booleans())
def test_fuzz_max_batch(engine: str, quant: str | None, dtype: str | None, mml: str | None, allow: bool) -> None:
    argv = ["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-e", engine]
    for flag, value in (("--quantization", quant), ("--dtype", dtype), ("--max-model-len", mml)):
        if value is not None:
            argv += [flag, value]
    if allow:
        argv.append("--allow-long-max-model-len")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with hf_token(TOKEN):
        _check_outcome(*run_cli(argv))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 512 * 1024  # KiB: no runaway allocation
