"""Hostile engine start-up logs (issue 23, "Log reading"): a log is read, or refused in one line with exit 2.

Each item of the issue has a test below: 1 MB lines fed to every engine's reader (every pattern linear), a
named pipe, a 5,000-digit rank label, an unreadable tensor shape, `1.5e3 GiB`, start-up lines past the 4 MiB
cut, a restarted container's log, a log read with another engine's `-e`, impossible values, `--save` onto the
log itself, `--save` of impossible settings, `--compare --tp 0`, and the exit status (`kvplan log` never exits
1). A bounded fuzz of `kvplan log` closes the file. Nothing is timed: an alarm turns a hang into a failure.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import resource
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kvplan.cli import main
from kvplan.logs import MAX_LOG_BYTES, parse_log, parse_text
from kvplan.logs.core import Line
from kvplan.logs.model import Collector
from kvplan.logs.reader import LogReader, log_readers
from conftest import DATA, hang_guard, hf_token, run_cli

LOGS = DATA / "logs"
LLAVA = LOGS / "vllm-0.10.2-llava-mistral-7b-h100.log"
SGLANG = LOGS / "sglang-0.4-qwq-32b-tp4-l4.log"
LLAMA = LOGS / "llamacpp-qwen-coder-32k-q8.log"
TOKEN = "hf_hostileLOGtokenThatMustNeverBePrinted"
GIB = 1 << 30
MB = 1 << 20
HANG_GUARD_S = 60  # per test; a linear reader needs a few seconds for all of its 1 MB lines


def alarm(seconds: float = HANG_GUARD_S) -> contextlib.AbstractContextManager[None]:
    """Fail (not hang) when the block runs past ``seconds``: a hang is the bug these tests look for."""
    return hang_guard(seconds)


def run(*argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """``kvplan ARGV`` in-process (the house pattern of tests/test_fuzz_cli.py), under the alarm."""
    return run_cli(argv, seconds=HANG_GUARD_S, stdin=stdin, fast=False)


def one_line(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out[-2000:], err)
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in out + err
    return err


def llava(tmp_path: Path, name: str = "vllm.log", **replace: str) -> Path:
    """The real vLLM 0.10.2 log with lines changed (old text -> new)."""
    text = LLAVA.read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------------------------
# 1. Every pattern of every engine's reader is linear: 1 MB lines, under an alarm

GENERIC = ("9", "9.", "9,", "9.9 ", "1.5e3 ", "-9", "a=", "[2, ", "'")


def _patterns(reader: LogReader) -> list[re.Pattern[str]]:
    """Every compiled pattern of the engine's log module: module attributes, and the tables that hold them (a
    pattern compiled on first use, ``LazyPattern``, compiled here)."""
    from kvplan.engines.log_format import LazyPattern

    module = sys.modules[reader.read.__module__]
    found: list[re.Pattern[str]] = []
    for value in vars(module).values():
        items = value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            for part in item if isinstance(item, tuple) else (item,):
                if isinstance(part, LazyPattern):
                    part = part.compiled()
                if isinstance(part, re.Pattern) and part not in found:
                    found.append(part)
    return found


def _literal(pattern: str) -> str:
    """The text a pattern starts with, unescaped ('Model loading took ' of 'Model loading took (?<!..'): a line
    that starts so reaches the pattern's quantifiers."""
    out: list[str] = []
    i = 1 if pattern.startswith("^") else 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            if n in ".()[]{}-#*+?|^$\\/:=":
                out.append(n)
            elif n == "s":
                out.append(" ")
            else:
                break
            i += 2
            continue
        if c in ".^$*+?{}[]|()":
            break
        out.append(c)
        i += 1
    if i < len(pattern) and pattern[i] in "*?{" and out:  # a quantifier after the last character applies to it
        out.pop()
    return "".join(out)


def _needles(reader: LogReader) -> list[str]:
    """The literal text each pattern starts with, and the substrings a reader looks for before a pattern."""
    module = sys.modules[reader.read.__module__]
    found = {_literal(p.pattern) for p in _patterns(reader)}
    for value in vars(module).values():  # vLLM's (item, needle, pattern) table
        for item in value if isinstance(value, list) else ():
            if isinstance(item, tuple):
                found.update(part for part in item if isinstance(part, str))
    return sorted(found - {""})


def hostile_lines(reader: LogReader, size: int) -> list[str]:
    """Lines of ``size`` characters built to make a backtracking pattern explode: every pattern's literal start
    (so that each pattern is tried) followed by a run of digits, numbers with separators or words; and each
    literal repeated (a pattern with ".*" tried again from every later occurrence)."""
    needles = _needles(reader)
    assert needles, reader.engine
    head = " ".join(needles) + " "
    lines = [head + unit * (size // len(unit)) + "\x00" for unit in GENERIC]
    lines.append("9" * size + " " + head)  # a run of digits, then what the patterns want after a number
    lines += [(needle + "9 ") * (size // (len(needle) + 2)) for needle in needles]
    return lines


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the hang detector needs SIGALRM")
@pytest.mark.parametrize("engine", [r.engine for r in log_readers()])
def test_every_reader_is_linear_on_megabyte_lines(engine):
    # issue 23: "a line of 1,500 digits takes 41 s, 3,000 never ends" (vLLM's '-?[\d,]*\.?\d+' searched anywhere).
    # The reader is called directly (no 16 KB line cut): its own patterns must be linear.
    reader = next(r for r in log_readers() if r.engine == engine)
    lines = hostile_lines(reader, MB)
    with alarm():
        for number, text in enumerate(lines, start=1):
            out = Collector()
            reader.read([Line(number, None, "", text)], out)


@pytest.mark.parametrize("engine", [None] + [r.engine for r in log_readers()])
def test_megabyte_lines_through_the_whole_reader(engine):
    # the path a file takes: bounded read, line cleaning (ANSI, rank labels), detection, each engine's patterns
    units = ("9", "1.5e3 GiB ", "\x1b[" + "0" * 100, "(Worker_TP9", "[2025-01-01 00:00:00 TP9", "Load weight end.",
             "KV Cache is allocated.", "llama_kv_cache", "Model loading took ")
    text = "\n".join(unit * (MB // len(unit)) for unit in units)
    with alarm():
        log = parse_text(text, engine=engine)
    assert not any("please report" in n for n in log.notes), log.notes


def test_the_cubic_vllm_line_of_the_issue(tmp_path):
    for digits in (1500, 3000, 100_000):
        path = tmp_path / f"d{digits}.log"
        path.write_text(LLAVA.read_text() + "Model loading took " + "1" * digits + "x\n"
                        + "Available KV cache memory: " + "1" * digits + "\n")
        code, out, err = run("log", str(path))
        assert code == 0, err
        assert "55.15 GiB" in out  # the real log around the hostile lines is still read


# ------------------------------------------------------------------------------------------------
# 2. Files that are not files: a named pipe, a device, a directory (kvplan.safe_io.read_head)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_named_pipe_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "startup.log"
    os.mkfifo(fifo)
    err = one_line(*run("log", str(fifo)))
    assert "startup.log" in err and "named pipe" in err


@pytest.mark.parametrize("path, said", [("/dev/zero", "character device"), (".", "directory")])
def test_devices_and_directories_are_refused(path, said):
    if not os.path.exists(path):
        pytest.skip(path)
    assert said in one_line(*run("log", path))


def test_a_missing_file_is_one_line(tmp_path):
    assert "missing.log" in one_line(*run("log", str(tmp_path / "missing.log")))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_the_real_entry_point_on_a_pipe_and_a_megabyte_line(tmp_path):
    # the installed command, its address space capped: no hang, no memory blow-up, no traceback
    import subprocess

    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    digits = tmp_path / "digits.log"
    digits.write_text("Model loading took " + "1" * MB + "x\n")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    env = {**os.environ, "HF_TOKEN": TOKEN, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(DATA.parent.parent)}
    for path, code in ((fifo, 2), (digits, 0)):
        done = subprocess.run([sys.executable, "-m", "kvplan", "log", str(path)], capture_output=True, text=True,
                              env=env, timeout=60, preexec_fn=cap, check=False)
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr and TOKEN not in done.stdout + done.stderr


# ------------------------------------------------------------------------------------------------
# 3. A line that cannot be read is left out, not the log


@pytest.mark.parametrize("line", [
    "(Worker_TP" + "9" * 5000 + " pid=7) INFO [gpu_worker.py:1] Model loading took 1.00 GiB",
    "[2025-10-16 09:06:22 TP" + "9" * 5000 + "] Load weight end. avail mem=1.00 GB, mem usage=1.00 GB",
    "(EngineCore_DP0 pid=3021) DEBUG [cpu.py:1] Allocating CPU tensor of shape [2, ,16]",
    "(EngineCore_DP0 pid=3021) DEBUG [cpu.py:1] Allocating CPU tensor of shape []",
    "(EngineCore_DP0 pid=3021) INFO [gpu_worker.py:1] Available KV cache memory: 1e400 GiB",
    "(EngineCore_DP0 pid=3021) INFO [kv_cache_utils.py:1] GPU KV cache size: " + "9" * 40 + " tokens",
], ids=["vllm-rank-5000-digits", "sglang-rank-5000-digits", "shape-[2, ,16]", "shape-[]", "1e400-GiB",
        "40-digit-tokens"])
def test_an_unreadable_line_is_left_out_and_said(tmp_path, line):
    path = tmp_path / "vllm.log"
    path.write_text(LLAVA.read_text() + line + "\n")
    log = parse_log(str(path))
    assert log.engine == "vllm" and log.memory["kv_cache"].bytes == 59212694937  # the log is read
    assert log.kv_cache_tokens == 451744 and log.memory["weights"].text == "14.0786 GiB"
    assert not any("please report" in n for n in log.notes)
    lines = len(LLAVA.read_text().splitlines()) + 1
    assert any("could not be read" in n and f"line {lines}" in n for n in log.notes), log.notes
    code, out, err = run("log", str(path), "-f", "json")
    assert code == 0 and any("could not be read" in n for n in json.loads(out)["notes"]), err


# ------------------------------------------------------------------------------------------------
# 4. A number is read whole or not at all


@pytest.mark.parametrize("printed, gib", [("1.5e3 GiB", 1500), ("1,500.25 GiB", 1500.25), ("-0.5 GiB", -0.5),
                                          ("2.5E1 GiB", 25)])
def test_a_number_is_read_whole(printed, gib):
    log = parse_text(f"INFO [gpu_worker.py:1] Available KV cache memory: {printed}\n", engine="vllm")
    assert log.memory["kv_cache"].bytes == int(gib * GIB)


@pytest.mark.parametrize("printed", ["1,5 GiB", "1.2.3 GiB", "1e GiB", "--3 GiB"])
def test_a_number_that_cannot_be_read_whole_is_not_read_in_part(printed):
    log = parse_text(f"INFO [gpu_worker.py:1] Available KV cache memory: {printed}\n", engine="vllm")
    assert "kv_cache" not in log.memory


def test_1_5e3_gib_is_not_3_gib_and_the_log_is_refused_as_impossible(tmp_path):
    # 1,500 GiB of weights on a 79.19 GiB GPU: read whole, then refused (exit 2), never shown as 3 GiB
    path = llava(tmp_path, **{"Model loading took 14.0786 GiB": "Model loading took 1.5e3 GiB"})
    err = one_line(*run("log", str(path)))
    assert "1.5e3 GiB" in err and "weights" in err and "79.19 GiB" in err


# ------------------------------------------------------------------------------------------------
# 5. The 4 MiB cut is said, with where it was


FILLER = "INFO 09-23 18:13:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Running: 0 reqs\n"


def test_start_up_lines_past_the_cut_say_where_the_file_was_cut(tmp_path):
    path = tmp_path / "long.log"
    path.write_text(FILLER * (MAX_LOG_BYTES // len(FILLER) + 5000) + LLAVA.read_text())
    err = one_line(*run("log", str(path)))
    assert "not a start-up log" in err and "cut at 4 MiB" in err and "line " in err and "MiB file" in err
    code, out, err = run("log", str(path), "-e", "vllm")  # forced, the same
    assert "cut at 4 MiB" in one_line(code, out, err)


def test_a_read_log_that_was_cut_says_where(tmp_path):
    path = tmp_path / "long.log"
    path.write_text(LLAVA.read_text() + FILLER * (MAX_LOG_BYTES // len(FILLER) + 5000))
    log = parse_log(str(path))
    assert log.cut and log.complete and log.size == path.stat().st_size
    assert any(re.search(r"cut at 4 MiB \(line [\d,]+ of a [\d.]+ MiB file\)", n) for n in log.notes), log.notes
    head = path.read_text()[: LLAVA.stat().st_size - 3000]  # cut before the KV cache line
    path.write_text(head + FILLER * (MAX_LOG_BYTES // len(FILLER) + 10))
    log = parse_log(str(path))
    assert not log.complete and any("first 4 MiB of the log end before the KV cache" in n for n in log.notes)


# ------------------------------------------------------------------------------------------------
# 6. A restarted container's log: the last start-up is read, the earlier ones are said


def test_a_restarted_vllm_log_is_read_from_its_last_start_up(tmp_path):
    first = "INFO 09-23 18:11:00 [api_server.py:1] vLLM API server version 0.10.2\n" + LLAVA.read_text()
    second = first.replace("Available KV cache memory: 55.15 GiB", "Available KV cache memory: 50.00 GiB")
    second = second.replace("Current kv cache memory in use is 59212694937 bytes", "")
    path = tmp_path / "restarted.log"
    path.write_text(first + second)
    log = parse_log(str(path))
    assert log.memory["kv_cache"].text == "50.00 GiB"  # the second start-up's, not the first's 55.15
    starts = len(first.splitlines()) + 1
    assert log.startups == (1, starts)
    assert any(f"2 start-ups (from lines 1, {starts})" in n and "earlier ones are left out" in n for n in log.notes)
    code, out, _ = run("log", str(path), "-f", "json")
    assert code == 0 and any("start-ups" in n for n in json.loads(out)["notes"])


def test_a_restarted_sglang_and_llamacpp_log_are_read_from_their_last_start_up():
    text = SGLANG.read_text()
    log = parse_text(text + text.replace("46611", "40000"))
    assert log.kv_cache_tokens == 40000 and len(log.startups) == 2
    text = "build: 4689 (abc123) with cc for x86_64\n" + LLAMA.read_text()
    log = parse_text(text + text.replace("KV self size  = 4352.00 MiB", "KV self size  = 2176.00 MiB"))
    assert len(log.startups) == 2 and log.memory["kv_cache"].text == "2176.00 MiB"


def test_one_start_up_and_data_parallel_engines_are_not_restarts():
    assert parse_log(str(LLAVA)).startups == (6,)  # one "Initializing a V1 LLM engine": nothing said
    text = LLAVA.read_text()
    dp1 = "\n".join(line.replace("EngineCore_DP0", "EngineCore_DP1") for line in text.splitlines()
                    if "Initializing a V1" in line)
    log = parse_text(text + dp1 + "\n")
    assert len(log.startups) == 1 and log.memory["kv_cache"].bytes == 59212694937
    assert not any("start-ups" in n for n in log.notes)


# ------------------------------------------------------------------------------------------------
# 7. Another engine's log than -e names


@pytest.mark.parametrize("path, forced, said", [(LLAVA, "sglang", "vLLM log, not SGLang"),
                                                (LLAVA, "llamacpp", "vLLM log, not llama.cpp"),
                                                (SGLANG, "vllm", "SGLang log, not vLLM"),
                                                (LLAMA, "trtllm", "llama.cpp log, not TensorRT-LLM")])
def test_a_log_read_with_another_engine_is_refused(path, forced, said):
    err = one_line(*run("log", str(path), "-e", forced))
    assert err.startswith("kvplan: error: --engine: ") and said in err
    log = parse_log(str(path), engine=forced)
    assert log.detected != forced and any(said in n for n in log.notes)


def test_the_right_engine_forced_reads_as_detected():
    code, out, err = run("log", str(LLAVA), "-e", "vllm")
    assert code == 0 and "55.15 GiB" in out, err


# ------------------------------------------------------------------------------------------------
# 8. Values no start-up logs: refused, never shown with exit 0, never saved


@pytest.mark.parametrize("old, new, said", [
    ("Model loading took 14.0786 GiB", "Model loading took -3.00 GiB", "weights -3.00 GiB is negative"),
    ("Available KV cache memory: 55.15 GiB", "Available KV cache memory: 155.15 GiB",
     "is more than the GPU's total memory 79.19 GiB"),
    ("Free memory on device (78.66/79.19 GiB)", "Free memory on device (78.66/-79.19 GiB)", "is not positive"),
    ("Desired GPU memory utilization is (0.9,", "Desired GPU memory utilization is (1.5,", "gpu_memory_utilization"),
    ("Desired GPU memory utilization is (0.9,", "Desired GPU memory utilization is (0,", "gpu_memory_utilization"),
    ("'max_model_len': 4096,", "'max_model_len': 4096, 'max_num_seqs': 0,", "max_num_seqs 0"),
])
def test_impossible_values_are_refused_and_not_saved(tmp_path, old, new, said):
    if "Available KV" in old:  # the exact in-use figure would stand for the KV memory: take it out
        path = llava(tmp_path, **{old: new, "Current kv cache memory in use is 59212694937 bytes.": ""})
    else:
        path = llava(tmp_path, **{old: new})
    calib = tmp_path / "calib.yaml"
    err = one_line(*run("log", str(path), "--save", str(calib)))
    assert said in err and "vllm.log: line " in err
    assert not calib.exists()
    log = parse_log(str(path))
    assert log.impossible and said in log.impossible[0]


def test_a_negative_kv_memory_is_read_and_said(tmp_path):
    # vLLM prints it when the model does not fit: a measurement, exit 0, never 1
    path = llava(tmp_path, **{"Available KV cache memory: 55.15 GiB": "Available KV cache memory: -1.50 GiB",
                              "Current kv cache memory in use is 59212694937 bytes.": ""})
    code, out, err = run("log", str(path), "-f", "json")
    assert code == 0 and any("KV cache memory is negative" in n for n in json.loads(out)["notes"]), err


@pytest.mark.parametrize("setting", ["Using max model len 0", "max_num_seqs=0", "gpu_memory_utilization=1.5",
                                     "gpu_memory_utilization=0"])
def test_save_of_an_impossible_setting_is_one_line(tmp_path, setting):
    # the issue: a pydantic traceback. A log whose only value of the setting is impossible.
    path = tmp_path / "vllm.log"
    path.write_text("INFO [api_server.py:1] vLLM API server version 0.10.2\n"
                    f"INFO [config.py:1] args: Namespace({setting.replace('Using max model len ', 'max_model_len=')})\n"
                    "INFO [gpu_model_runner.py:1] Model loading took 14.08 GiB\n"
                    "INFO [gpu_worker.py:1] Available KV cache memory: 55.15 GiB\n")
    calib = tmp_path / "calib.yaml"
    name = setting.split("=")[0].replace("Using max model len 0", "max_model_len")
    err = one_line(*run("log", str(path), "--model", "mistralai/Mistral-7B-v0.1", "--save", str(calib)))
    assert name in err and not calib.exists()


# ------------------------------------------------------------------------------------------------
# 9. --save never overwrites the log it reads, and writes only a regular file


def test_save_onto_the_log_itself_is_refused(tmp_path):
    path = llava(tmp_path)
    before = path.read_bytes()
    link = tmp_path / "link.log"
    link.symlink_to(path)
    hard = tmp_path / "hard.log"
    os.link(path, hard)
    for target in (path, link, hard):
        err = one_line(*run("log", str(path), "--model", "mistralai/Mistral-7B-v0.1", "--save", str(target)))
        assert err.startswith("kvplan: error: --save: ") and "is the log being read" in err
        assert path.read_bytes() == before


def test_save_onto_redirected_standard_input_is_refused(tmp_path):
    path = llava(tmp_path)
    before = path.read_bytes()
    with open(path, "rb") as handle:
        saved = sys.stdin
        sys.stdin = io.TextIOWrapper(handle)
        try:
            out, err = io.StringIO(), io.StringIO()
            with alarm(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["log", "-", "--model", "mistralai/Mistral-7B-v0.1", "--save", str(path)], fast=False)
        finally:
            sys.stdin = saved
    assert "is the log being read" in one_line(code, out.getvalue(), err.getvalue())
    assert path.read_bytes() == before


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_save_onto_a_pipe_or_a_directory_is_one_line(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target in (fifo, tmp_path):
        one_line(*run("log", str(LLAVA), "--model", "mistralai/Mistral-7B-v0.1", "--save", str(target)))


def test_save_of_a_good_log_still_writes(tmp_path):
    calib = tmp_path / "calib.yaml"
    calib.write_text("x" * 100_000)  # an older, longer file: truncated, not left with a tail
    code, out, err = run("log", str(LLAVA), "--model", "mistralai/Mistral-7B-v0.1", "--save", str(calib))
    assert code == 0, err
    from kvplan.logs.calibration import load

    assert load(calib).measured["kv_cache"].bytes == 59212694937


# ------------------------------------------------------------------------------------------------
# 10. --compare --tp 0 is refused, not ignored


@pytest.mark.parametrize("flag, value", [("--tp", "0"), ("--tp", "-1"), ("--pp", "0"), ("--pp", "-2")])
def test_compare_refuses_a_parallel_size_below_1(flag, value):
    err = one_line(*run("log", str(LLAVA), "--compare", "--model", "mistralai/Mistral-7B-v0.1", flag, value))
    assert err.startswith(f"kvplan: error: {flag}: ")


def test_compare_library_refuses_tp_0():
    from kvplan.errors import UsageError
    from kvplan.calibrate import compare

    with pytest.raises(UsageError) as raised:
        compare(parse_log(str(LLAVA)), model="mistralai/Mistral-7B-v0.1", tp=0)
    assert raised.value.field == "tp"


# ------------------------------------------------------------------------------------------------
# 11. Exit status: 0 read, 2 not usable; never 1 ("does not fit" in max-batch and check)


def test_not_a_log_exits_2_not_1(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\x00\xff garbage\nhello\n")
    for argv in (("log", str(junk)), ("log", str(junk), "-f", "json"), ("log", str(junk), "-e", "vllm")):
        assert "not a start-up log" in one_line(*run(*argv))
    empty = tmp_path / "empty.log"
    empty.write_text("")
    one_line(*run("log", str(empty)))
    assert "not a start-up log" in one_line(*run("log", "-", stdin=b"nothing here\n"))


def test_a_truncated_log_exits_0_and_says_so(tmp_path):
    text = LLAVA.read_text()
    path = tmp_path / "head.log"
    path.write_text(text[: text.index("Available KV cache memory")])
    code, out, err = run("log", str(path), "-f", "json")
    assert code == 0 and not json.loads(out)["complete"], err
    assert any("ends before the KV cache was allocated" in n for n in json.loads(out)["notes"])


# ------------------------------------------------------------------------------------------------
# 12. A bounded fuzz of `kvplan log` (modelled on tests/test_fuzz_cli.py)

REAL = [line for path in sorted(LOGS.glob("*.log")) for line in path.read_text().splitlines()]
HOSTILE = [
    "9" * 5000, "1," * 3000, "1." * 3000, "Model loading took " + "1" * 3000 + "x", "Model loading took 1.5e3 GiB",
    "Model loading took -3.00 GiB", "Available KV cache memory: 1e400 GiB", "Available KV cache memory: 999 GiB",
    "(Worker_TP" + "9" * 5000 + " pid=1) INFO Model loading took 1.00 GiB", "Using max model len 0",
    "(EngineCore_DP0 pid=1) DEBUG Allocating CPU tensor of shape [2, ,16]",
    "Allocating 9999999999999999999 CPU tensors",
    "Desired GPU memory utilization is (1.5, 10.00 GiB)", "non-default args: {'max_num_seqs': 0}",
    "non-default args: {'max_model_len': " + "9" * 5000 + "}", "non-default args: " + "{" * 5000,
    "vLLM API server version 0.10.2", "server_args=ServerArgs(tp_size=0, mem_fraction_static=1.5)",
    "server_args=ServerArgs(" + "a=" * 3000, "[2025-01-01 00:00:00 TP" + "9" * 5000 + "] Load weight end.",
    "Load weight end." * 500, "KV Cache is allocated." * 500 + "#tokens: 1, K size: 1e999999 GB",
    "\x1b[" + "0" * 5000, "\r" * 100 + "x", "llama_kv_cache_unified: size = 1e999999 MiB",
    "build: " + "9" * 50 + " (a)",
    "Device 0: " * 500, "using device CUDA0 (" * 500, "Allocated 1.5e3 GiB for max tokens in paged KV cache (1)",
    "total: 0 GiB, available: 1 GiB", "general.name = " + "x" * 5000, "\x00\x01\x02", TOKEN,
]
PARALLEL = st.sampled_from(["1", "2", "0", "-1", "9" * 40, "x", "true"])
MODELS = st.sampled_from(["mistralai/Mistral-7B-v0.1", "Qwen/Qwen3-8B", "nope", "", "/dev/zero", "a" * 500])
WORK = Path(tempfile.mkdtemp(prefix="kvplan-hostile-logs-"))


@st.composite
def log_files(draw: st.DrawFn) -> tuple[Path, bytes]:
    lines = draw(st.lists(st.one_of(st.sampled_from(REAL), st.sampled_from(REAL), st.sampled_from(HOSTILE)),
                          max_size=40))
    noise = draw(st.sampled_from([b"", b"\xff\xfe", "\u00e9".encode(), b"\r\n"]))
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + noise
    folder = Path(tempfile.mkdtemp(dir=WORK))
    path = folder / "startup.log"
    path.write_bytes(data)
    return path, data


@st.composite
def commands(draw: st.DrawFn) -> tuple[list[str], Path, bytes, Path | None]:
    path, data = draw(log_files())
    argv = ["log", str(path)]
    save = None
    flags = draw(st.lists(st.sampled_from(["-e", "--compare", "--save", "--tp", "--pp", "--model", "-f",
                                           "--gpu-memory", "--max-model-len", "--engine-version"]),
                          max_size=5, unique=True))
    for flag in flags:
        if flag == "-e":
            argv += [flag, draw(st.sampled_from(["vllm", "sglang", "trtllm", "llamacpp", "hf", "x"]))]
        elif flag == "--compare":
            argv.append(flag)
        elif flag == "--save":
            save = path if draw(st.booleans()) else path.parent / "calib.yaml"
            argv += [flag, str(save)]
        elif flag in ("--tp", "--pp"):
            argv += [flag, draw(PARALLEL)]
        elif flag == "--model":
            argv += [flag, draw(MODELS)]
        elif flag == "-f":
            argv += [flag, draw(st.sampled_from(["json", "table", "xml"]))]
        elif flag == "--gpu-memory":
            argv += [flag, draw(st.sampled_from(["80GiB", "0", "-1GiB", "1e400GiB", "x"]))]
        elif flag == "--max-model-len":
            argv += [flag, draw(st.sampled_from(["4096", "0", "32k", "9" * 5000, "x"]))]
        else:
            argv += [flag, draw(st.sampled_from(["0.10.2", "0.6", "x", ""]))]
    return argv, path, data, save


@pytest.fixture(scope="module", autouse=True)
def token_in_environment():
    import shutil

    with hf_token(TOKEN):
        yield
    shutil.rmtree(WORK, ignore_errors=True)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the hang detector needs SIGALRM")
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=commands())
def test_generated_logs_and_flags_exit_0_or_2_in_one_piece(case):
    argv, path, data, save = case
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, out, err = run(*argv)
    event(f"exit {code}")
    assert code in (0, 2), (argv, code, err[-2000:])  # never 1: that is "does not fit"
    assert "Traceback" not in out + err and "please report" not in out + err, (argv, err[-4000:])
    printed_token = TOKEN in out + err and TOKEN.encode() not in data  # a log may hold it; kvplan never adds it
    assert not printed_token, argv
    if code == 2:
        assert err.startswith("kvplan: error: ") and err.count("\n") == 1, (argv, err[-2000:])
    if save == path:  # --save onto the log itself: never written
        assert path.read_bytes() == data, argv
    elif save is not None and code == 2:  # refused: nothing written
        assert not save.exists(), argv
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 512 * 1024, (argv, grown)  # KB: a few MB of log may not cost half a GiB
