"""max-batch and verify bounds (issue 23): what no deployment or host can hold is refused or said.

- ``--n 1000000000`` printed "max batch 0" and "fits: yes": a request of n samples that cannot be held
  is "does not fit" (exit 1), and n or beams above vLLM's VLLM_MAX_N_SEQUENCES (16,384) are refused;
- ``verify --memory-budget 1048576GiB --find-max-batch`` reported the host's free memory as the
  budget's answer: a budget above what the device can allocate is refused;
- ``verify --launch 64`` started 64 torch processes without looking at CPUs or memory;
- ``--repeats 99999999`` ran for hours: bounded, with a progress line on slow runs (a terminal only).

Then every numeric flag of both commands with garbage, and a bounded fuzz of both (exit 0, 1 or 2, no
traceback, one-line errors, the token never printed, an alarm against hangs, bounded memory). verify
runs on the CPU with a tiny model; what needs torch is skipped without it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import resource
import signal
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kvplan.cli import main
from kvplan.errors import UsageError
from kvplan.verify.errors import VerifyError
from conftest import dense, run_cli

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed: pip install 'kvplan[verify]'")
TOKEN = "hf_boundsTOKENthatMustNeverBePrinted"
LLAMA = "meta-llama/Llama-3.1-8B"
MEMORY_BUDGET_KB = 1024 * 1024  # a fuzz run may grow the test process's peak RSS by 1 GiB at most

TINY = """id: tiny/test
model_type: llama
dtype: bfloat16
max_position_embeddings: 4096
num_attention_heads: {heads}
hidden_size: 128
vocab_size: 1000
params: 100000
weights_bytes: 200000
layers:
  - {{kind: full, count: {layers}, kv_heads: {heads}, head_dim: 16}}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    """2 layers of 2 KV heads of 16: 256 B a token, so every verify here allocates kilobytes."""
    path = tmp_path_factory.mktemp("bounds") / "tiny.yaml"
    path.write_text(TINY.format(heads=2, layers=2))
    return str(path)


@pytest.fixture(scope="module")
def tiny8(tmp_path_factory: pytest.TempPathFactory) -> str:
    """8 layers of 8 KV heads: tp 8 x pp 8 = 64 ranks plan."""
    path = tmp_path_factory.mktemp("bounds8") / "tiny8.yaml"
    path.write_text(TINY.format(heads=8, layers=8))
    return str(path)


@pytest.fixture(autouse=True)
def token_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)


def run(argv: list[str]) -> tuple[int, str, str]:
    """``kvplan.cli.main`` in-process under a 30 s alarm: (exit code, stdout, stderr)."""
    code, out, err = run_cli(argv)
    assert "Traceback" not in out + err, err
    assert TOKEN not in out + err
    return code, out, err


def one_line(argv: list[str], flag: str) -> str:
    """Exit 2 with one line on stderr that names ``flag``."""
    code, _, err = run(argv)
    assert code == 2, (argv, code, err)
    assert err.startswith(f"kvplan: error: {flag}") and err.count("\n") == 1, (argv, err)
    return err


@contextlib.contextmanager
def no_spawn(fail: bool = True) -> Any:
    """No rank process is started: the test fails if one would be (the refusals come before spawning), or
    (``fail=False``, the fuzz) the launch stops there as an error of its own."""
    if not HAS_TORCH:
        yield
        return
    import torch.multiprocessing

    def refuse(*args: object, **kwargs: object) -> None:
        if fail:
            raise AssertionError("rank processes were started")
        raise VerifyError("the fuzz starts no rank processes")

    with mock.patch.object(torch.multiprocessing, "start_processes", refuse):
        yield


# --------------------------------------------------------------------------------------- --n, --beam-width

@pytest.mark.parametrize("argv", [
    ["max-batch", LLAMA, "--gpu", "H100-80GB", "--n", "1000000000"],
    ["max-batch", LLAMA, "--gpu", "H100-80GB", "-e", "trtllm", "--beam-width", "16385"],
    ["estimate", LLAMA, "-c", "8k", "--n", "1000000000"],
], ids=["max-batch --n", "max-batch --beam-width", "estimate --n"])
def test_more_samples_than_vllm_accepts_are_refused_in_one_line(argv: list[str]) -> None:
    """vLLM refuses n (and beam_width) above VLLM_MAX_N_SEQUENCES, 16,384 by default
    (vllm/sampling_params.py _verify_num_sequences); 10^9 printed 'max batch 0' and 'fits: yes'."""
    flag = "--n" if "--n" in argv else "--beam-width"
    err = one_line(argv, flag)
    assert "16,384" in err


def test_verify_refuses_more_samples_before_allocating(tiny: str) -> None:
    one_line(["verify", tiny, "--device", "cpu", "-c", "256", "--n", "1000000000"], "--n")


def test_the_library_refuses_them_by_field() -> None:
    from kvplan import max_batch
    from kvplan.verify import verify

    for name in ("n", "beam_width"):
        with pytest.raises(UsageError) as exc:
            max_batch(LLAMA, gpu="H100-80GB", **{name: 10**9})
        assert exc.value.field == name
        with pytest.raises(UsageError) as exc:  # before torch: planning 10^9 sequences is refused by field
            verify(dense("t/t", 2, 2, 16), context=256, device="cpu", **{name: 10**9})
        assert exc.value.field == name


def test_vllms_limit_itself_is_planned() -> None:
    code, out, err = run(["max-batch", LLAMA, "--gpu", "H100-80GB", "--n", "16384", "-f", "json"])
    assert code in (0, 1), err
    assert json.loads(out)["n"] == 16384


@pytest.mark.parametrize("engine,flag", [("vllm", "--n"), ("sglang", "--n"), ("hf", "--n"),
                                         ("trtllm", "--beam-width")])
def test_a_request_of_n_that_cannot_be_held_does_not_fit(engine: str, flag: str) -> None:
    """1,000 samples of 130k own tokens each: not one request fits, so 'fits' is no and the exit 1."""
    code, out, err = run(["max-batch", LLAMA, "--gpu", "H100-80GB", "-e", engine, flag, "1000", "--prompt-len", "1k",
                          "-f", "json"])
    assert code == 1, err
    doc = json.loads(out)
    assert doc["max_batch"] == 0 and doc["fits"] is False
    assert doc["message"].startswith("a request of 1,000 sequences")
    assert err.startswith("kvplan: does not fit: a request of 1,000 sequences") and err.count("\n") == 1


def test_the_table_says_it_does_not_fit() -> None:
    code, out, err = run(["max-batch", LLAMA, "--gpu", "H100-80GB", "--n", "1000", "--prompt-len", "1k"])
    assert code == 1
    fits = [line for line in out.splitlines() if " fits " in f" {line} "]
    assert fits and "no" in fits[-1] and "yes" not in fits[-1], out


# --------------------------------------------------------------------------------------- --memory-budget

@needs_torch
def test_a_budget_above_the_host_is_refused_before_any_probe(tiny: str) -> None:
    """1 PiB on any host: the search measured the host's free memory and reported it as the budget's answer."""
    with mock.patch("kvplan.verify.search.allocate", side_effect=AssertionError("a probe allocated")):
        err = one_line(["verify", tiny, "--device", "cpu", "-c", "256", "--find-max-batch",
                        "--memory-budget", "1048576GiB"], "--memory-budget")
    assert "can allocate now" in err


@pytest.mark.slow
@needs_torch
def test_a_budget_above_what_is_free_is_refused_and_one_within_runs(tiny: str) -> None:
    with mock.patch("kvplan.verify.search.cpu_available_bytes", return_value=32 << 20):
        one_line(["verify", tiny, "--device", "cpu", "-c", "256", "--find-max-batch", "--memory-budget", "64MiB"],
                 "--memory-budget")
        code, out, err = run(["verify", tiny, "--device", "cpu", "-c", "256", "--find-max-batch",
                              "--memory-budget", "1MiB", "-f", "json"])
    assert code == 0, err
    assert json.loads(out)["max_batch"]["measured"] == 16  # 1 MiB / 64 KiB per sequence of 256 tokens


@pytest.mark.slow
@needs_torch
def test_an_unknown_host_takes_the_budget_as_given_and_says_so() -> None:
    from kvplan.verify import verify

    with mock.patch("kvplan.verify.search.cpu_available_bytes", return_value=None):
        r = verify(dense("t/t", 2, 2, 16), context=256, find_max_batch=True, memory_budget=1 << 20, device="cpu")
    assert r.max_batch is not None and r.max_batch.measured == 16
    assert any("cannot read this host's free memory" in note for note in r.notes)


@needs_torch
def test_a_probe_the_device_refuses_within_the_budget_is_said() -> None:
    """Free memory that shrinks during the search bounds the answer: the notes say so."""
    from kvplan.verify import search, verify

    real = search.allocate

    def short(plan: Any, device: Any, **kw: Any) -> Any:
        if plan.batch > 4:
            raise VerifyError("no room")
        return real(plan, device, **kw)

    with mock.patch.object(search, "allocate", short):
        r = verify(dense("t/t", 2, 2, 16), context=256, find_max_batch=True, memory_budget=1 << 20, device="cpu")
    assert r.max_batch is not None and r.max_batch.measured == 4
    assert any("bounded by the free memory, not by the budget" in note for note in r.notes)


def test_a_cuda_budget_above_the_free_memory_is_refused() -> None:
    """The CUDA branch, with a stand-in torch (no GPU here): free = 10 GiB of 80 GiB."""
    from kvplan.verify import search

    class Cuda:
        @staticmethod
        def synchronize(dev: object) -> None:
            return None

        @staticmethod
        def mem_get_info(dev: object) -> tuple[int, int]:
            return 10 << 30, 80 << 30

    torch = type("T", (), {"cuda": Cuda})
    dev = type("D", (), {"type": "cuda", "index": 0})()
    notes: list[str] = []
    with mock.patch.object(search, "free_bytes", return_value=10 << 30):
        with pytest.raises(VerifyError) as exc:
            search.search_budget(torch, dev, 40 << 30, None, notes)
        assert exc.value.field == "memory_budget" and "cuda:0" in exc.value.message
        assert search.search_budget(torch, dev, 8 << 30, None, notes) == 8 << 30


# --------------------------------------------------------------------------------------- --launch

def test_more_ranks_than_the_cpus_run_are_refused_before_spawning(tiny8: str) -> None:
    with mock.patch("kvplan.verify.distributed.usable_cpus", return_value=2), no_spawn():
        err = one_line(["verify", tiny8, "--device", "cpu", "-c", "256", "--tp", "8", "--pp", "8", "--launch", "64"],
                       "--launch")
    assert "2 CPU(s)" in err and "64 rank processes" in err


def test_more_ranks_than_the_memory_holds_are_refused_before_spawning(tiny8: str) -> None:
    with mock.patch("kvplan.verify.distributed.usable_cpus", return_value=1000), \
            mock.patch("kvplan.verify.host_memory.available_bytes", return_value=1 << 30), no_spawn():
        err = one_line(["verify", tiny8, "--device", "cpu", "-c", "256", "--tp", "4", "--launch", "4"], "--launch")
    assert "host memory" in err


def test_a_launch_the_host_holds_passes_the_check() -> None:
    from kvplan.verify.distributed import RANK_HOST_BYTES, check_host
    from kvplan.verify.ranks import plan_ranks

    plans = plan_ranks(dense("t/t", 2, 2, 16), tp=2, context=256)
    with mock.patch("kvplan.verify.distributed.usable_cpus", return_value=1), \
            mock.patch("kvplan.verify.host_memory.available_bytes", return_value=4 * RANK_HOST_BYTES):
        check_host(2, plans, "cpu")
        with pytest.raises(VerifyError) as exc:
            check_host(9, plans * 5, "cpu")  # 9 ranks on 1 CPU
    assert exc.value.field == "launch"


# --------------------------------------------------------------------------------------- --repeats

@pytest.mark.parametrize("value", ["99999999", "1001", "0", "-5", "true", "1e308", "nan", "9" * 5000])
def test_repeats_are_bounded_in_one_line(tiny: str, value: str) -> None:
    one_line(["verify", tiny, "--device", "cpu", "-c", "256", "--decode", "--repeats", value], "--repeats")


def test_repeats_are_checked_with_ranks_too(tiny: str) -> None:
    with no_spawn():
        one_line(["verify", tiny, "--device", "cpu", "-c", "256", "--tp", "2", "--launch", "2",
                  "--repeats", "99999999"], "--repeats")


@pytest.mark.parametrize("value", [10**8, True, 2.5])
def test_the_library_bounds_repeats_before_allocating(value: object) -> None:
    from kvplan.verify import verify

    with mock.patch("kvplan.verify.allocate.import_torch", side_effect=AssertionError("torch reached")):
        with pytest.raises(VerifyError) as exc:
            verify(dense("t/t", 2, 2, 16), context=256, device="cpu", decode=True, repeats=value)  # type: ignore[arg-type]
    assert exc.value.field == "repeats"


class _Recorder:
    """Stands for kvplan.sources.hub.progress.Progress: records what it was told."""

    seen: list[str] = []

    def __init__(self, text: str) -> None:
        _Recorder.seen.append(text)

    def update(self, text: str) -> None:
        _Recorder.seen.append(text)

    def __enter__(self) -> "_Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        _Recorder.seen.append("stopped")


@needs_torch
def test_slow_repeats_show_progress() -> None:
    from kvplan.verify import verify

    _Recorder.seen = []
    with mock.patch("kvplan.verify.decode.SLOW_S", 0.0), \
            mock.patch("kvplan.sources.hub.progress.Progress", _Recorder):
        verify(dense("t/t", 2, 2, 16), batch=1, context=64, device="cpu", decode=True, repeats=3)
    assert _Recorder.seen[0] == "--decode: 3 timed steps"
    assert any(text.startswith("--decode: timed step 3 of 3") for text in _Recorder.seen)
    assert _Recorder.seen[-1] == "stopped"


@needs_torch
def test_fast_repeats_show_none_and_a_pipe_gets_none(capsys: pytest.CaptureFixture[str]) -> None:
    from kvplan.verify import verify

    _Recorder.seen = []
    with mock.patch("kvplan.sources.hub.progress.Progress", _Recorder):
        verify(dense("t/t", 2, 2, 16), batch=1, context=64, device="cpu", decode=True, repeats=2)
    assert _Recorder.seen == []  # steps of microseconds: no status line
    with mock.patch("kvplan.verify.decode.SLOW_S", 0.0):  # the real Progress, stderr not a terminal
        verify(dense("t/t", 2, 2, 16), batch=1, context=64, device="cpu", decode=True, repeats=2)
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------------------- found by the sweep

@pytest.mark.parametrize("argv,flag", [
    (["max-batch", LLAMA, "--gpu", "H100", "--block-size", "-5"], "--block-size"),  # planned 0 blocks, exit 0
    (["max-batch", LLAMA, "--gpu", "H100", "--concurrency", "-5"], "--concurrency"),  # ignored, exit 0
    (["max-batch", LLAMA, "--gpu", "H100", "--dp", "9" * 20], "--dp"),  # max batch 3 x 10^20, exit 0
    (["max-batch", LLAMA, "--gpu", "H100", "--max-num-seqs", "9" * 20], "--max-num-seqs"),
    (["max-batch", LLAMA, "--gpu", "H100", "--max-num-batched-tokens", "9" * 20], "--max-num-batched-tokens"),
    (["max-batch", LLAMA, "--gpu", "H100", "--max-model-len", "9" * 20], "--max-model-len"),
    (["max-batch", LLAMA, "--gpu", "H100", "--batch", "9" * 20], "--batch"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v[3:])[:40])
def test_absurd_max_batch_values_are_refused(argv: list[str], flag: str) -> None:
    one_line(argv, flag)


def test_a_budget_eaten_before_the_weights_does_not_blame_them() -> None:
    """10^6 batched tokens: an activation peak above the budget read 'the weights alone leave no KV cache'."""
    code, _, err = run(["max-batch", LLAMA, "--gpu", "H100", "--max-num-batched-tokens", "1000000"])
    assert code == 1
    assert "activation" in err and "weights alone" not in err and err.count("\n") == 1


def test_verify_names_batch_and_timeout(tiny: str) -> None:
    one_line(["verify", tiny, "--device", "cpu", "-c", "256", "--timeout", "-5"], "--timeout")
    if importlib.util.find_spec("torch") is None:  # the batch is bounded by the library, after torch is found
        pytest.skip("torch is not installed: verify refuses before it reads --batch (pip install 'kvplan[verify]')")
    one_line(["verify", tiny, "--device", "cpu", "-c", "256", "-b", "9" * 29], "--batch")


# --------------------------------------------------------------------------------------- every numeric flag

GARBAGE = ["1e308", "true", "-5", "9" * 5000, "nan"]
MAX_BATCH_FLAGS: dict[str, list[str]] = {
    "--tp": [], "--pp": [], "--dp": [], "--max-model-len": [], "--context": [], "--batch": [],
    "--concurrency": ["--solve", "gpus"], "--block-size": [], "--gpu-memory-utilization": [],
    "--kv-cache-memory": [], "--max-num-batched-tokens": [], "--max-num-seqs": [],
    "--mem-fraction-static": ["-e", "sglang"], "--free-gpu-memory-fraction": ["-e", "trtllm"],
    "--weights-bytes": [], "--shared-prefix": [], "--n": [], "--beam-width": ["-e", "trtllm"], "--prompt-len": [],
    "--num-speculative-tokens": ["--speculative-method", "ngram"],
    "--nbits": ["-e", "hf", "--kv-cache", "quantized", "--backend", "quanto"],
    "--residual-length": ["-e", "hf", "--kv-cache", "quantized", "--backend", "quanto"],
    "--q-group-size": ["-e", "hf", "--kv-cache", "quantized", "--backend", "quanto"],
    "--axis-key": ["-e", "hf", "--kv-cache", "quantized", "--backend", "quanto"],
    "--axis-value": ["-e", "hf", "--kv-cache", "quantized", "--backend", "quanto"],
    "--compression-ratio": ["-e", "hf", "--press", "snapkv"], "--kv-offloading-size": [],
    "--swap-space": ["--engine-version", "0.10"], "--hicache-ratio": ["-e", "sglang"],
    "--hicache-size": ["-e", "sglang"], "--cpu-offload-gb": [], "--gpu-memory": [],
}
VERIFY_FLAGS: dict[str, list[str]] = {
    "--batch": [], "--context": [], "--block-size": [], "--gpu-memory-utilization": ["--find-max-batch"],
    "--memory-budget": ["--find-max-batch"], "--repeats": ["--decode"], "--tp": [], "--pp": [],
    "--launch": ["--tp", "2"], "--timeout": [], "--prompt-len": [], "--output-len": [], "--shared-prefix": [],
    "--n": [], "--beam-width": [], "--num-speculative-tokens": ["--speculative-method", "ngram"],
}


@pytest.mark.parametrize("flag", sorted(MAX_BATCH_FLAGS))
def test_every_max_batch_number_refuses_garbage(flag: str) -> None:
    gpu = [] if flag == "--gpu-memory" else ["--gpu", "H100"]
    for value in GARBAGE:
        one_line(["max-batch", LLAMA, *gpu, *MAX_BATCH_FLAGS[flag], flag, value], flag)


@pytest.mark.parametrize("flag", sorted(VERIFY_FLAGS))
def test_every_verify_number_refuses_garbage(tiny: str, flag: str) -> None:
    with no_spawn():
        for value in GARBAGE:
            one_line(["verify", tiny, "--device", "cpu", "-c", "256", *VERIFY_FLAGS[flag], flag, value], flag)


# --------------------------------------------------------------------------------------- the fuzz

WILD = st.sampled_from(["0", "-1", "-5", "", " ", "x", "nan", "inf", "1e308", "true", "9" * 40, "9" * 5000, "1.5",
                        "1_000", "0x10", "\u0661", "1\x00", "-", "--help", "1e400GiB", "-5GiB", "100%"])


def pool(*valid: str) -> st.SearchStrategy[str]:
    """Mostly values kvplan accepts (so runs go deep), sometimes garbage."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), WILD)


MB_FUZZ: dict[str, st.SearchStrategy[str] | None] = {
    "--tp": pool("1", "2", "4", "8"), "--pp": pool("1", "2"), "--dp": pool("1", "2", "1000"),
    "--engine": pool("vllm", "sglang", "trtllm", "hf", "llamacpp"), "--max-model-len": pool("8k", "32k", "128K"),
    "--context": pool("1k", "8k", "128k"), "--batch": pool("1", "8", "1024"), "--solve": pool("batch", "context"),
    "--block-size": pool("16", "32", "1"), "--gpu-memory-utilization": pool("0.9", "0.5"),
    "--kv-cache-memory": pool("30.5GiB", "1GiB"), "--max-num-batched-tokens": pool("8192", "1000000", "2048"),
    "--max-num-seqs": pool("256", "1"), "--weights-bytes": pool("14.99GiB", "1GiB"),
    "--shared-prefix": pool("0", "512", "2k"), "--n": pool("1", "4", "16384", "1000"),
    "--beam-width": pool("1", "4", "16384"), "--prompt-len": pool("1k", "4k"),
    "--kv-offloading-size": pool("200", "1GiB"), "--cpu-offload-gb": pool("0", "4"), "-f": pool("table", "json"),
    "--enforce-eager": None,
}
VERIFY_FUZZ: dict[str, st.SearchStrategy[str] | None] = {
    "--batch": pool("1", "2", "4"), "--context": pool("128", "256", "1k"), "--engine": pool("vllm", "hf", "sglang"),
    "--block-size": pool("16", "32"), "--find-max-batch": None, "--memory-budget": pool("1MiB", "16MiB", "1048576GiB"),
    "--decode": None, "--repeats": pool("1", "3", "99999999"), "--tp": pool("1", "2"), "--pp": pool("1", "2"),
    "--launch": pool("2", "64"), "--timeout": pool("60", "1"), "--prompt-len": pool("64", "128"),
    "--output-len": pool("32", "64"), "--shared-prefix": pool("0", "64"), "--n": pool("1", "2", "1000000000"),
    "--beam-width": pool("1", "2"), "-f": pool("table", "json"), "--gpu-memory-utilization": pool("0.9"),
}


@st.composite
def commands(draw: st.DrawFn, model: str) -> list[str]:
    command = draw(st.sampled_from(["max-batch", "verify"]))
    table = MB_FUZZ if command == "max-batch" else VERIFY_FUZZ
    argv = [command, LLAMA if command == "max-batch" else model]
    argv += ["--gpu", "H100"] if command == "max-batch" else ["--device", "cpu"]
    for flag in draw(st.lists(st.sampled_from(sorted(table)), max_size=5, unique=True)):
        kind = table[flag]
        argv += [flag] if kind is None else [flag, draw(kind)]
    return argv


@pytest.fixture(scope="module")
def fuzz_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("fuzz") / "tiny.yaml"
    path.write_text(TINY.format(heads=2, layers=2))
    return str(path)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the hang detector needs SIGALRM")
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_max_batch_and_verify_exit_0_1_2_in_one_piece(fuzz_model: str, data: st.DataObject) -> None:
    argv = data.draw(commands(fuzz_model))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with no_spawn(fail=False):
        code, out, err = run(argv)
    event(f"{argv[0]} exit {code}")
    assert code in (0, 1, 2), (argv, code, err[-2000:])
    if code == 2:
        assert err.startswith("kvplan: error: ") and err.count("\n") == 1, (argv, err[-2000:])
    if code == 1:
        assert err.count("\n") == 1, (argv, err[-2000:])
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < MEMORY_BUDGET_KB, (argv, grown)


# ------------------------------------------------------------------------------------------------
# The bounds hold on every path, the library's estimate included


def test_the_library_estimate_refuses_more_samples_by_field():
    import kvplan
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError) as caught:
        kvplan.estimate("meta-llama/Llama-3.1-8B", contexts=[4096], batches=[1], n=16_385)
    assert caught.value.field == "n"
    assert kvplan.estimate("meta-llama/Llama-3.1-8B", contexts=[4096], batches=[1], n=16_384).rows


@pytest.mark.parametrize("k", ["100000000000000000000", "1025"])
def test_draft_tokens_are_bounded_in_max_batch(k, capsys):
    code = main(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--speculative-method", "ngram",
                 "--num-speculative-tokens", k])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kvplan: error: --num-speculative-tokens: ") and err.count("\n") == 1


def test_a_memory_budget_without_the_search_is_refused_not_ignored(capsys):
    code = main(["verify", "gpt2", "--device", "cpu", "--memory-budget", "1GiB", "-b", "1", "-c", "128"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kvplan: error: --memory-budget: ") and err.count("\n") == 1
