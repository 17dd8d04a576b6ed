"""A user's walk through the sharing, speculation and offload flags: every mistake is ONE line naming
the flag with exit status 2 (never a traceback, never silently ignored), and the figures agree across
commands. Each case here is a mistake the walk found getting through."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvplan.cli import main
from conftest import REPO

LLAMA = "meta-llama/Llama-3.1-8B"
LLAMA70 = "meta-llama/Llama-3.1-70B"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(capsys, args: list[str], start: str) -> str:
    code, _, err = run(capsys, *args)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"kvplan: error: {start}"), err
    return err


@pytest.mark.parametrize("args,start", [
    # GiB sizes: inf and 1e300 used to overflow int() (a traceback), negatives planned negative blocks
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--kv-offloading-size", "inf"], "--kv-offloading-size:"),
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--kv-offloading-size", "1e300"], "--kv-offloading-size:"),
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--kv-offloading-size=-1"], "--kv-offloading-size:"),
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--kv-offloading-backend", "lmcache",
      "--kv-offloading-size=-5"], "--kv-offloading-size:"),
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--kv-offloading-backend", "lmcache",
      "--kv-offloading-size", "1e30"], "--kv-offloading-size:"),
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--engine-version", "0.10", "--swap-space=-4"],
     "--swap-space:"),
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--engine-version", "0.10", "--swap-space", "1e300"],
     "--swap-space:"),
    (["max-batch", LLAMA, "--gpu", "H100", "--cpu-offload-gb", "inf"], "--cpu-offload-gb:"),
    # the library's field for these was printed as is (cpu_offload_bytes: ...), not as the flag
    (["max-batch", LLAMA, "--gpu", "H100", "--cpu-offload-gb", "8", "--engine", "trtllm"], "--cpu-offload-gb:"),
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--swap-space", "4"], "--swap-space:"),
    # SGLang's host pool: inf was a traceback in typer's float, 1e300 a NaN in int()
    (["max-batch", LLAMA, "--gpu", "H100", "-e", "sglang", "--hicache-ratio", "inf"], "--hicache-ratio:"),
    (["max-batch", LLAMA, "--gpu", "H100", "-e", "sglang", "--hicache-ratio", "1e300"], "--hicache-ratio:"),
    (["max-batch", LLAMA, "--gpu", "H100", "-e", "sglang", "--hicache-size", "1e300"], "--hicache-size:"),
    (["max-batch", LLAMA, "--gpu", "H100", "-e", "sglang", "--hicache-size", "abc"], "--hicache-size:"),
    # LMCache: an empty backend was read as native; a non-vLLM engine named a flag that was not given
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--kv-offloading-backend", "",
      "--kv-offloading-size", "200"], "--kv-offloading-backend:"),
    (["max-batch", LLAMA70, "--gpu", "H100", "--tp", "4", "--kv-offloading-backend", "lmcache",
      "--kv-offloading-size", "200", "-e", "sglang"], "--kv-offloading-backend:"),
])
def test_offload_sizes_are_refused_by_flag(capsys, args, start):
    one_line(capsys, args, start)


@pytest.mark.parametrize("args,start", [
    # an empty value was taken for "not given" and silently ignored
    (["max-batch", LLAMA, "--gpu", "H100", "--prompt-len", ""], "--prompt-len:"),
    (["max-batch", LLAMA, "--gpu", "H100", "--shared-prefix", ""], "--shared-prefix:"),
    (["max-batch", LLAMA, "--gpu", "H100", "--context", ""], "--context:"),
    (["max-batch", LLAMA, "--gpu", "H100", "--kv-cache-memory", ""], "--kv-cache-memory:"),
    (["estimate", LLAMA, "-c", "4k", "--prompt-len", ""], "--prompt-len:"),
    (["estimate", LLAMA, "-c", "4k", "--output-len", ""], "--output-len:"),
    (["estimate", LLAMA, "-c", "4k", "--shared-prefix", ""], "--shared-prefix:"),
    (["verify", "gpt2", "--device", "cpu", "-b", "2", "-c", "1k", "--prompt-len", ""], "--prompt-len:"),
    (["verify", "gpt2", "--device", "cpu", "-b", "2", "--context", ""], "--context:"),
    (["verify", "gpt2", "--device", "cpu", "-c", "1k", "--find-max-batch", "--memory-budget", ""],
     "--memory-budget:"),
    # a zero batch across ranks was read as 1
    (["verify", "gpt2", "--device", "cpu", "-b", "0", "-c", "1k", "--launch", "1"], "--batch:"),
])
def test_empty_or_zero_values_are_not_ignored(capsys, args, start):
    one_line(capsys, args, start)


def test_shared_prefix_zero_is_no_sharing(capsys):
    """0 is in the range the library states ("between 0 and the context"): the plain figure, not an error."""
    base = ["estimate", LLAMA, "-b", "8", "-c", "4k", "-f", "json"]
    code, plain, err = run(capsys, *base)
    assert code == 0, err
    code, zero, err = run(capsys, *base, "--shared-prefix", "0")
    assert code == 0, err
    import json

    assert [r["kv_bytes"] for r in json.loads(zero)["rows"]] == \
        [r["kv_bytes"] for r in json.loads(plain)["rows"]]


@pytest.mark.parametrize("flag,value", [
    ("--n", "999999999"), ("--beam-width", "999999999"), ("--num-speculative-tokens", "999999999"),
    ("--kv-offloading-size", "1048576"), ("--shared-prefix", "1000000"),
])
def test_huge_values_stay_bounded(flag, value):
    """A huge but well-formed value ends (an answer or one line), in a fresh process with a generous
    limit: a hang or a memory blow-up fails here, no timing is asserted."""
    args = ["max-batch", LLAMA, "--gpu", "H100", flag, value, "-f", "json"]
    if flag == "--num-speculative-tokens":
        args += ["--speculative-method", "ngram"]
    if flag == "--beam-width":
        args += ["--engine", "hf"]
    proc = subprocess.run([sys.executable, "-m", "kvplan", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert proc.returncode in (0, 1, 2), proc.stderr
    assert "Traceback" not in proc.stderr
    if proc.returncode == 2:
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("kvplan: error: "), proc.stderr


@pytest.mark.parametrize("gpu", ["H100-80GB", "RTX-4090"])
@pytest.mark.parametrize("k", [1, 5, 1024])  # 1,024: the most draft tokens kvplan plans
def test_speculative_slots_and_the_longest_context_agree(gpu, k):
    """A sequence holds min(context + k, max_model_len) slots (vLLM ``KVCacheManager.allocate_slots``
    caps at max_model_len), the rule max_batch already counts by: so the longest context at batch 1 is
    max_model_len whenever the pool holds it, whatever k is (it read 0 at k = 10^9 while 3 sequences of
    max_model_len fitted; 10^9 is now refused), and k slots shorter than the pool's longest otherwise."""
    from kvplan import max_batch

    plain = max_batch(LLAMA, gpu=gpu)
    spec = max_batch(LLAMA, gpu=gpu, speculative_method="ngram", num_speculative_tokens=k)
    assert spec.max_batch == plain.max_batch  # n-gram adds no layers, and the slots stop at max_model_len
    if plain.max_context >= plain.max_model_len:
        assert spec.max_context == plain.max_context
    else:
        assert spec.max_context == max(0, plain.max_context - k)
    assert spec.max_context <= plain.max_context


@pytest.mark.parametrize("engine", ["trtllm", "sglang"])
def test_speculative_slots_past_max_model_len_where_the_engine_holds_them(engine):
    """TensorRT-LLM gives its KVCacheManager max_seq_len + the draft slots (py_executor_creator.py) and adds them
    at every step (prepare_resources); SGLang's req_to_token rows are context_len + 4 + the draft tokens: a
    sequence of max_model_len holds its k slots too, where vLLM caps them (the test above). max-batch counted
    max_model_len only and answered a batch whose bytes, as estimate counts them, overflow the pool."""
    from kvplan import estimate, max_batch

    model = "deepseek-ai/DeepSeek-V2-Lite"  # 46 and 38 sequences of 32k: 1k slots each are one more sequence
    options = {"speculative_method": "ngram", "num_speculative_tokens": 1024}
    plan = max_batch(model, gpu="H100-80GB", max_model_len=32768, engine=engine, **options)
    rows = estimate(model, batches=[plan.max_batch, plan.max_batch + 1], engine=engine, contexts=[32768],
                    **options).rows
    assert rows[0].kv_bytes <= plan.per_gpu.kv_cache_bytes < rows[1].kv_bytes
    # one request of max_model_len: its slots counted too (it was 32,768 tokens' bytes, under what the engine holds)
    one = estimate(model, batches=[1], engine=engine, contexts=[32768], **options).rows[0]
    assert plan.request_kv_bytes == one.kv_bytes


WORKLOADS = {
    "plain": ({}, {}),
    "prefix": ({"shared_prefix": 8192}, {}),
    "n4": ({"n": 4}, {"prompt_len": 24576}),
    "beams2": ({"beam_width": 2}, {"prompt_len": 30000}),
    "ngram": ({"speculative_method": "ngram", "num_speculative_tokens": 4}, {}),
}


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "deepseek-ai/DeepSeek-V2-Lite", "openai/gpt-oss-20b"])
def test_estimate_and_max_batch_agree_on_the_bytes(model, engine, workload):
    """max-batch's answer B is the batch whose bytes, as estimate counts them for the same workload, fit the
    KV memory max-batch found, and B + 1's do not. For vLLM the figure is ``admission_kv_bytes`` (what
    max-batch counts), which with a shared prefix or samples ignored the sharing: 1.24 x the pool at the
    batch max-batch allowed with an 8k prefix, half of it with n = 4."""
    from kvplan import KvplanError, estimate, max_batch

    options, split = WORKLOADS[workload]
    try:
        plan = max_batch(model, gpu="H100-80GB", max_model_len=32768, engine=engine, **options, **split)
    except KvplanError as exc:  # an engine without the rule refuses it by name (docs/sharing.md)
        assert exc.field in ("n", "beam_width")
        return
    prompt = split.get("prompt_len")
    lengths = {"prompt_len": prompt, "output_len": 32768 - prompt} if prompt else {"contexts": [32768]}
    batches = [plan.max_batch, plan.max_batch + 1] if plan.max_batch else [1]
    rows = estimate(model, batches=batches, engine=engine, **lengths, **options).rows
    held = [row.admission_kv_bytes if row.admission_kv_bytes is not None else row.kv_bytes for row in rows]
    pool = plan.per_gpu.kv_cache_bytes
    assert held[-1] > pool
    if plan.max_batch:
        assert held[0] <= pool


def test_speculation_is_in_the_json_of_estimate_and_max_batch(capsys):
    """Speculation changed the bytes but was nowhere in estimate's or max-batch's JSON (verify's had it)."""
    import json

    draft = ["--speculative-model", "meta-llama/Llama-3.2-1B-Instruct", "--num-speculative-tokens", "5"]
    code, out, err = run(capsys, "estimate", LLAMA, "-c", "4k", *draft, "-f", "json")
    assert code == 0, err
    want = {"speculative_method": "draft_model", "num_speculative_tokens": 5, "extra_slots": 10,
            "draft": "meta-llama/Llama-3.2-1B-Instruct"}
    assert json.loads(out)["speculation"] == want
    code, out, err = run(capsys, "max-batch", LLAMA, "--gpu", "H100", *draft, "-f", "json")
    assert code == 0, err
    assert json.loads(out)["speculation"] == want
    code, out, err = run(capsys, "max-batch", LLAMA, "--gpu", "H100", "-f", "json")
    assert "speculation" not in json.loads(out)  # added only when asked, as the other optional objects
    doc = (REPO / "docs" / "output.md").read_text()
    assert all(f'"{name}"' in doc for name in ("speculation", *want))


NEW_FLAGS = {
    "estimate": ["--n", "--beam-width", "--prompt-len", "--output-len", "--shared-prefix", "--speculative-method",
                 "--num-speculative-tokens", "--speculative-model"],
    "max-batch": ["--n", "--beam-width", "--prompt-len", "--shared-prefix", "--speculative-method",
                  "--num-speculative-tokens", "--speculative-model", "--kv-offloading-backend", "--lmcache-config",
                  "--kv-offloading-size", "--no-kv-offload", "--swap-space", "--concurrency"],
    "verify": ["--find-max-batch", "--decode", "--launch", "--n", "--beam-width", "--shared-prefix",
               "--speculative-method", "--num-speculative-tokens"],
}


@pytest.mark.parametrize("command", sorted(NEW_FLAGS))
def test_new_flags_teach_in_help(command):
    """Each flag says what it is; the per-request counts say their default, the speculation flags name every
    engine that has a rule (the help said 'vLLM' only after SGLang, TensorRT-LLM and transformers gained one)."""
    import typer

    from kvplan.cli.app import app

    group = typer.main.get_command(app)
    params = {opt: p for p in group.commands[command].params for opt in getattr(p, "opts", ())}
    for flag in NEW_FLAGS[command]:
        text = params[flag].help or ""
        assert len(text) > 25, (command, flag, text)
        if flag in ("--n", "--beam-width") and command != "verify":
            assert "default 1" in text, (command, flag, text)
        if flag == "--speculative-method" and command != "verify":
            assert all(name in text for name in ("vLLM", "SGLang", "TensorRT-LLM", "transformers")), text


@pytest.mark.parametrize("setting", ["kv_offloading_size: .inf", "kv_offloading_size: 1e300", "cpu_offload_gb: 1e300",
                                     "swap_space: 1e300", "hicache_ratio: .inf"])
def test_check_refuses_unbounded_sizes_in_a_kvplan_file(tmp_path, capsys, setting):
    """``.inf`` and ``1e300`` passed the file's ``ge=0`` and overflowed int() in the engine's flag reader:
    a traceback from ``kvplan check``; now invalid-input on the field, exit 2."""
    engine = "sglang" if setting.startswith("hicache") else "vllm"
    path = tmp_path / "deploy.yaml"
    path.write_text("version: 1\ndeployments:\n  - name: t\n    model: meta-llama/Llama-3.1-8B\n"
                    f"    gpu: {{type: H100-80GB, count: 1}}\n    engine: {{name: {engine}, max_model_len: 32k, {setting}}}\n")
    code, out, err = run(capsys, "check", str(path))
    assert code == 2, out + err
    assert "invalid-input" in out + err and setting.split(":")[0] in out + err


@pytest.mark.parametrize("flag", ["--kv-offloading-size 1e300", "--cpu-offload-gb 1e300"])
def test_check_refuses_unbounded_sizes_on_a_command_line(tmp_path, capsys, flag):
    path = tmp_path / "serve.sh"
    path.write_text(f"#!/bin/sh\n# kvplan/gpu: H100\nvllm serve meta-llama/Llama-3.1-8B --max-model-len 32k {flag}\n")
    code, out, err = run(capsys, "check", str(path))
    assert code == 2, out + err
    assert f"{flag}: not a valid value" in out + err


def test_a_context_nobody_gave_is_said(capsys):
    """--output-len alone planned prompt 7,168 + output 1,024 with nothing saying where 8,192 came from."""
    code, out, err = run(capsys, "estimate", LLAMA, "--output-len", "1k")
    assert code == 0, err
    assert "no context given: 8,192 tokens (prompt 7,168 + output 1,024)" in out
    from kvplan import estimate

    assert any(a.startswith("no context given: 8,192 tokens") for a in estimate(LLAMA).assumptions)
    assert not any(a.startswith("no context given") for a in estimate(LLAMA, contexts=[4096]).assumptions)


@pytest.mark.parametrize("kw,field", [
    ({"n": 2.5}, "n"), ({"n": True}, "n"), ({"n": "4"}, "n"), ({"beam_width": 2.0}, "beam_width"),
    ({"shared_prefix": 1024.5}, "shared_prefix"), ({"prompt_len": 4096.0}, "prompt_len"),
])
def test_library_counts_are_whole_numbers(kw, field):
    """n = 2.5 planned a max batch of 3.0 and n = '4' raised a TypeError: the library is typed for programs."""
    from kvplan import KvplanError, max_batch

    with pytest.raises(KvplanError) as exc:
        max_batch(LLAMA, gpu="H100-80GB", max_model_len=8192, **kw)
    assert exc.value.field == field


@pytest.mark.parametrize("options", [{"kv_offloading_bytes": -5 << 30}, {"kv_offloading_bytes": 1.5e9},
                                     {"swap_space_bytes": -(4 << 30)}])
def test_library_offload_bytes_are_whole_and_not_negative(options):
    """A negative host tier planned -1,024 blocks and -1 requests kept warm; a float one fractional blocks."""
    from kvplan import KvplanError, max_batch

    version = "0.10" if "swap_space_bytes" in options else None
    with pytest.raises(KvplanError) as exc:
        max_batch(LLAMA70, gpu="H100-80GB", tp=4, engine_version=version, engine_options=options)
    assert exc.value.field == next(iter(options))


def test_gpu_search_names_requests_of_n_when_nothing_serves_them():
    from kvplan import KvplanError, max_batch

    # n at kvplan's bound (vLLM's VLLM_MAX_N_SEQUENCES; 10^9 is refused by field, tests/test_hostile_bounds.py)
    with pytest.raises(KvplanError, match="serves 4 requests of 16384 of 8,192 tokens"):
        max_batch(LLAMA, gpu="H100-80GB", solve="gpus", concurrency=4, n=16384, prompt_len=1024, max_model_len=8192)


def test_verify_launch_timeout_is_bounded(capsys):
    """10^14 s reached each rank's timedelta: 'rank 0 failed: OverflowError' plus torch's SIGTERM line."""
    pytest.importorskip("torch")
    one_line(capsys, ["verify", "gpt2", "--device", "cpu", "-b", "1", "-c", "1k", "--launch", "2", "--tp", "2",
                      "--timeout", "100000000000000"], "--timeout 100000000000000 must be positive, at most")


def test_find_max_batch_refusal_counts_requests_of_n(capsys):
    """With --n 2 the search counts requests of 2 sequences: the refusal said 'not one sequence'."""
    pytest.importorskip("torch")
    one_line(capsys, ["verify", "gpt2", "--device", "cpu", "-c", "1k", "--find-max-batch", "--memory-budget", "1MiB",
                      "--n", "2"], "--find-max-batch: not one request of 2 sequences of 1,024 tokens fits in")
