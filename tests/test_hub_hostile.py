"""A broken or hostile Hub (``HF_ENDPOINT``): every misbehaviour is one line, exit 2, bounded time and memory.

kvplan runs as ``python -m kvplan`` (huggingface_hub reads HF_ENDPOINT when it is imported) with its
address space capped, so that an answer read without a bound ends the child with a MemoryError
(a traceback, and this test fails) instead of swapping the machine; the subprocess timeout is the
hang detector. The server is tests/hostile_hub.py, on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_hub import HostileHub
from conftest import REPO

pytestmark = pytest.mark.slow  # a Hub server on 127.0.0.1 and a kvplan process per test
TOKEN = "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"
MEMORY_CAP = 3 * 1024 ** 3  # address space of the child: Python + huggingface_hub + 8 header threads fit


@pytest.fixture(scope="module")
def hostile():
    hub = HostileHub().start()
    yield hub
    hub.stop()


def _cap_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def kvplan(hub: HostileHub, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_", "HUGGING"))}
    clean.update({"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_DISABLE_TELEMETRY": "1",
                  "HF_TOKEN": TOKEN, "KVPLAN_HUB_TIMEOUT": "1", "KVPLAN_HUB_RETRY_DELAY": "0.01",
                  "PYTHONPATH": str(REPO), **env})
    return subprocess.run([sys.executable, "-m", "kvplan", *args], check=False, env=clean, capture_output=True,
                          text=True, cwd=REPO, timeout=90, preexec_fn=_cap_memory if os.name == "posix" else None)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-4000:])
    assert done.stderr.startswith("kvplan: error: ") and done.stderr.count("\n") == 1, done.stderr[-4000:]
    assert "Traceback" not in done.stderr and TOKEN not in done.stderr + done.stdout
    return done.stderr


EXPECTED = {
    "garbage-info": "invalid JSON",
    "typed-info": "has no commit id (sha)",
    "deep-info": "nested more than 128 levels deep",
    "huge-int-info": "more than 4,300 digits",
    "silent": "did not answer within KVPLAN_HUB_TIMEOUT (1 s; timeout)",
    "endless-info": "an answer larger than 32 MiB",
    "drip-info": "an answer did not end within KVPLAN_HUB_TIMEOUT (1 s)",
    "redirect-loop": "redirects in a loop",
    "retry-after": "asks to wait 86,400 s before trying again",
    "retry-after-digits": "asks to wait 1,000,000,000 s before trying again",
    "gzip-bomb": "larger than 32 MiB once decompressed",
    "error-garbage": "cannot read",
    "endless-config": "an answer larger than 32 MiB",
    "no-commit-head": "does not answer like a Hugging Face Hub",
    "huge-header": "larger than 32 MiB",
    "deep-header": "nested more than",
    "traversal-commit": "a commit id that is not 40 hex digits",
    "traversal-etag": "an ETag that is not a plain hash",
}


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_hostile_hub_is_one_line(mode, hostile, tmp_path):
    # the answers whose point is their size, not their pace, get time to arrive on a loaded machine (inflating
    # 32 MiB took over the 1 s timeout under a load of 9): they must still stop at the size cap
    slow_ok = {"KVPLAN_HUB_TIMEOUT": "20"} if mode in ("gzip-bomb", "endless-info", "endless-config",
                                                      "huge-header") else {}
    err = one_line_error(kvplan(hostile, tmp_path, "estimate", f"hostile/{mode}", "--hub", "-c", "1k", **slow_ok))
    assert EXPECTED[mode] in err, err
    assert f"hostile/{mode}" in err
    assert {p.name for p in tmp_path.iterdir()} <= {"hf-home"}  # nothing written outside the HF cache


def test_a_compressing_hub_still_works(hostile, tmp_path):
    done = kvplan(hostile, tmp_path, "estimate", "hostile/gzip-ok", "--hub", "-c", "1k", "-f", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"][0]["kv_bytes"] == 28 * 8 * 128 * 2 * 2 * 1024  # Qwen3-0.6B, bf16


def test_too_many_weight_files_fall_back_to_the_config(hostile, tmp_path):
    done = kvplan(hostile, tmp_path, "estimate", "hostile/many-shards", "--hub", "-c", "1k", "-f", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert any("99,999 safetensors files, more than the 1,024 kvplan reads" in a for a in data["assumptions"])
    assert not any(r.endswith(".safetensors") for r in hostile.requests if "many-shards" in r)


def test_credentials_in_hf_endpoint_are_not_printed(hostile, tmp_path):
    done = kvplan(hostile, tmp_path, "estimate", "hostile/redirect-loop", "--hub",
                  HF_ENDPOINT=hostile.url.replace("http://", "http://user:s3cret@"))
    err = one_line_error(done)
    assert "s3cret" not in err and "127.0.0.1" in err


@pytest.mark.parametrize("value", ["0", "-1", "nan", "x", "1e9"])
def test_settings_are_checked(value, hostile, tmp_path):
    err = one_line_error(kvplan(hostile, tmp_path, "estimate", "hostile/silent", "--hub", KVPLAN_HUB_TIMEOUT=value))
    assert "KVPLAN_HUB_TIMEOUT" in err


def test_file_names_with_huge_shard_numbers_are_not_shards():
    from kvplan.sources.hub import pick_safetensors

    name = f"model-00001-of-{'9' * 5000}.safetensors"  # int() of it raised ValueError (4,300-digit limit)
    assert pick_safetensors([name]) == ([name], None)
