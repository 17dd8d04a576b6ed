"""Calibration of kvplan's engine rules against real start-up logs; writes docs/accuracy.md.

    python benchmarks/accuracy.py

(a) From the KV memory an engine logged as available, the token count it logged (the exact part).
(b) From the GPU and the logged settings alone, the KV memory it logged (the estimated part).
Cases: tests/data/engine_logs_dev.yaml; the mapping to kvplan inputs: tests/data/calibration.yaml.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from kvplan.budgets import Settings  # noqa: E402
from kvplan.plan import max_batch  # noqa: E402

GIB = 1 << 30


def settings_of(raw: dict) -> Settings:
    raw = dict(raw)
    weights = raw.pop("weights_bytes", None)
    if "weights_gib" in raw:
        weights = int(raw.pop("weights_gib") * GIB)
    return Settings(weights_bytes=weights, **raw)


def predict(entry: dict) -> float:
    plan = max_batch(settings=settings_of(entry.get("settings", {})), **entry["args"])
    return plan.per_gpu.kv_cache_bytes / GIB


def main() -> None:
    entries = yaml.safe_load((REPO / "tests" / "data" / "calibration.yaml").read_text())
    rows = []
    for entry in entries:
        got, want = predict(entry), entry["expect_kv_gib"]
        rows.append(f"| {entry['case']} | {want:.2f} | {got:.2f} | {(got - want) / abs(want) * 100:+.1f} % | {entry['note']} |")
    out = REPO / "docs" / "accuracy.md"
    text = out.read_text()
    start, end = "<!-- calibration-b -->", "<!-- /calibration-b -->"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    table = "\n".join(["| case | logged KV GiB/GPU | kvplan | error | why |", "|---|---:|---:|---:|---|", *rows])
    out.write_text(f"{head}{start}\n{table}\n{end}{tail}")
    print(table)


if __name__ == "__main__":
    main()
