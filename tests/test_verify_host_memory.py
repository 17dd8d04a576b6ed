"""verify on the CPU: container and ulimit limits are read, and a failed CPU allocation is one line (issue 15, item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.verify import host_memory
from conftest import REPO

pytest.importorskip("torch", reason="verify allocates with torch")
posix_only = pytest.mark.skipif(os.name != "posix" or not Path("/proc/self/status").exists(), reason="Linux limits")

LIMIT = 3 * 1024 ** 3  # torch's CPU import maps ~1-2 GiB of address space


def _child(code: str, *argv: str) -> subprocess.CompletedProcess:
    script = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))\n{code}"
    return subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)


@posix_only
def test_rlimit_is_read():
    done = _child("from kvplan.verify import host_memory as h; print(h.rlimit_available(), h.available_bytes())")
    assert done.returncode == 0, done.stderr
    rlimit, available = (int(x) for x in done.stdout.split())
    assert 0 < rlimit < LIMIT and available <= rlimit


def test_cgroup_v2_and_v1_files_are_read(tmp_path, monkeypatch):
    v2 = tmp_path / "v2"
    (v2 / "svc").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("memory\n")
    (v2 / "memory.max").write_text("max\n")
    (v2 / "svc" / "memory.max").write_text(str(8 << 30))
    (v2 / "svc" / "memory.current").write_text(str(3 << 30))
    proc = tmp_path / "cgroup"
    proc.write_text("0::/svc\n")
    real_open = open

    def fake_open(path, *args, **kwargs):
        return real_open(proc if path == "/proc/self/cgroup" else path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    monkeypatch.setattr(host_memory, "_CGROUP_ROOT", str(v2))
    assert host_memory.cgroup_available() == 5 << 30
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text(str(2 << 30))
    (v1 / "memory" / "memory.usage_in_bytes").write_text(str(1 << 30))
    proc.write_text("4:memory:/not/mounted/here\n")
    monkeypatch.setattr(host_memory, "_CGROUP_ROOT", str(v1))
    assert host_memory.cgroup_available() == 1 << 30
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712")  # v1's "unlimited"
    assert host_memory.cgroup_available() is None


@posix_only
def test_failed_cpu_allocation_of_weights_is_one_line():
    # the free-memory check is bypassed so that torch itself fails: a RuntimeError, not CUDA's OOM type
    code = ("import torch\n"
            "from kvplan.verify import allocate as al\n"
            "al.free_bytes = lambda device: None\n"
            "try:\n"
            "    al.allocate_weights(16 << 30, 4, torch.device('cpu'))\n"
            "except al.VerifyError as exc:\n"
            "    print('refused:', exc)\n")
    done = _child(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "refused: out of memory allocating 16.00 GiB of weights on cpu\n", done.stdout


@posix_only
def test_verify_with_weights_under_ulimit_is_refused_before_allocating():
    done = _child("import sys; from kvplan.cli import main; sys.exit(main(sys.argv[1:]))",
                  "verify", "meta-llama/Llama-3.1-8B", "--device", "cpu", "--with-weights", "-b", "1", "-c", "1k")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("kvplan: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "weights need" in done.stderr and "free" in done.stderr
