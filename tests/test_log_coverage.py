"""How many of the numbers real start-up logs print ``kvplan log`` reads (benchmarks/log_coverage.py): a change may
not stop reading one it read (benchmarks/log_coverage_baseline.json, rewritten with ``--baseline`` when it reads
more), and the share stays at the issue's goal (95 %)."""

from __future__ import annotations

import json
import sys

from conftest import REPO

sys.path.insert(0, str(REPO))

from benchmarks import log_coverage  # noqa: E402


def test_no_number_read_before_is_missed_now() -> None:
    baseline = json.loads(log_coverage.BASELINE.read_text())
    total, hit, _, read_now = log_coverage.run()
    no_longer_read = set(baseline["read_numbers"]) - set(read_now)
    assert not no_longer_read, sorted(no_longer_read)
    assert 100 * sum(hit.values()) / sum(total.values()) >= log_coverage.GOAL


def test_a_number_is_read_only_when_its_value_is_there() -> None:
    from kvplan.logs import parse_text

    log = parse_text("INFO 05-14 00:04:16 [gpu_worker.py:436] Available KV cache memory: 61.66 GiB")
    assert log_coverage.read("available_kv_gib", 61.66, log)
    assert log_coverage.read("available_kv_gib", 61.665, log) is False  # finer than printed: not this number
    assert not log_coverage.read("available_kv_gib", 61.7, log)
    assert not log_coverage.read("num_gpu_blocks", 61, log)
