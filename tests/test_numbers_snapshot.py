"""Every number kvplan prints for the bundled models and the example deployments equals the stored snapshot.

The snapshot (tests/data/numbers_snapshot.json) holds estimate, max-batch and check over every bundled model x
engine x KV dtype x engine version x TP/PP and the deployment files the tests keep (tests/numbers_snapshot.py
says what exactly). A restructure must leave it unchanged; a change meant to move numbers regenerates it
(``python tests/numbers_snapshot.py --write``) and names the numbers that moved in its commit.
"""

from __future__ import annotations

import json

from numbers_snapshot import SNAPSHOT, differences, snapshot


def test_every_number_equals_the_snapshot():
    stored = json.loads(SNAPSHOT.read_text())
    now = snapshot()
    diff = differences(stored, now)
    shown = "\n".join(diff[:40]) + (f"\n... and {len(diff) - 40:,} more" if len(diff) > 40 else "")
    assert not diff, (f"{len(diff):,} of {len(now):,} numbers moved (if meant: python tests/numbers_snapshot.py "
                      f"--write, and say which and why in the commit):\n{shown}")


def test_the_snapshot_covers_every_command_and_engine():
    stored = json.loads(SNAPSHOT.read_text())
    commands = {key.split("|", 1)[0] for key in stored}
    assert commands == {"estimate", "max-batch", "check"}
    engines = {key.split("|")[2] for key in stored if key.startswith("estimate|")}
    assert engines == {"vllm", "sglang", "trtllm", "llamacpp", "hf", "hf-static"}
    # most combinations plan: a snapshot of refusals would guard nothing
    planned = [v for k, v in stored.items() if k.startswith(("estimate|", "max-batch|")) and isinstance(v, dict)]
    assert len(planned) > 0.7 * sum(1 for k in stored if k.startswith(("estimate|", "max-batch|")))
