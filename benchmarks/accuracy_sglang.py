"""kvplan's SGLang budget against the SGLang start-up logs kept in tests/data (docs/accuracy.md, part (c)).

    PYTHONPATH=$PWD python benchmarks/accuracy.py              # rewrites docs/accuracy.md (both parts)
    PYTHONPATH=$PWD python benchmarks/accuracy_sglang.py       # this part only, printed
    PYTHONPATH=<checkout> python <checkout>/benchmarks/accuracy_sglang.py --json F   # a baseline's rows

For each SGLang log whose model, GPU and tp are known, ``kvplan.max_batch`` runs with the log's model (or a
stand-in of the same architecture), GPU, tp, release and, where the log printed it, the weights it loaded;
``mem_fraction_static`` is passed only where the user gave it (otherwise kvplan's release rule picks it).
Judged on the token count SGLang logs (``KV Cache is allocated. #tokens`` = ``max_total_num_tokens``):
the error in % of the logged tokens, and kvplan's KV memory minus the logged one in % of the GPU's memory.
"before": ``benchmarks/accuracy_sglang_baseline.json`` (commit 0bdff6b's rules, made with the last command).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # after PYTHONPATH, so a baseline checkout's kvplan is the one imported

import yaml  # noqa: E402

GIB = 1 << 30
DATA = REPO / "tests" / "data"
BASELINE = REPO / "benchmarks" / "accuracy_sglang_baseline.json"

# id -> how to run it. "log": a file under tests/data/logs (weights and tokens read from it); "case": an
# engine_logs_dev.yaml / engine_logs_found.yaml entry (tokens from its reported fields).
CASES: dict[str, dict[str, Any]] = {
    "sglang-0.4-qwq-32b-tp4-l4": {
        "log": "sglang-0.4-qwq-32b-tp4-l4.log", "model": "Qwen/Qwen2.5-32B", "stand_in": "config of Qwen2.5-32B "
        "(QwQ-32B's architecture)", "gpu": "L4", "tp": 4, "version": "0.4.3",  # logged 2025-03-08
        "mem_fraction_static": None,  # 0.85 in server_args is the tp-4 default: the launch line gives none
    },
    "vllm-21348-qwen3-235b-fp8-4xh100-sglang": {
        "case": "engine_logs_dev.yaml", "model": "Qwen/Qwen3-235B-A22B-FP8", "stand_in": "", "gpu": "H100-SXM-80GB",
        "tp": 4, "version": "0.4.9", "mem_fraction_static": 0.93, "weights": "kvplan's (not logged)",
    },
    "sglang-pr11716-tp8-piecewise-cuda-graph": {
        "case": "engine_logs_found.yaml", "model": "meta-llama/Llama-3.1-70B", "gpu": "H200", "tp": 8,
        "version": "0.5.3", "mem_fraction_static": None, "weights": "kvplan's (not logged)",
        # not named: 53.31 GiB of K for 2,795,207 tokens = 20,480 B a token per rank = 80 layers x 1 KV head
        # (8 / tp 8) x 128 x bf16, a 70B-class Llama / Qwen2 shape; capture up to bs 512 (tp >= 4 bucket)
        "stand_in": "model inferred from the per-token bytes: Llama-3.1-70B",
        # the PR's log: "Load weight begin. avail mem=137.29 GB" on 6 of 8 ranks (the least; SGLang takes it)
        "free_before_gib": 137.29,
    },
}
LEFT_OUT = {
    "sglang-36583-tp4-eagle-80gb": "model not named; memory held back on H200s",
    "sglang-29575-log-format": "model and GPU not named",
    "sglang-dsv4-load-weight-end": "stops at the weights (no pool)",
}


def _logged(cid: str, how: dict[str, Any]) -> tuple[int, int | None, int | None]:
    """(tokens, weights bytes, free memory before the weights) as logged (None: not logged)."""
    free = how.get("free_before_gib")
    free_bytes = None if free is None else round(free * GIB)
    if "log" in how:
        from kvplan.logs import parse_log

        log = parse_log(str(DATA / "logs" / how["log"]))
        weights, before = log.memory.get("weights"), log.memory.get("free_before_weights")
        assert log.kv_cache_tokens is not None
        return (log.kv_cache_tokens, None if weights is None else weights.bytes,
                None if before is None else before.bytes)
    case = next(c for c in yaml.safe_load((DATA / how["case"]).read_text())["cases"] if c["id"] == cid)
    return int(case["reported"]["kv_cache_tokens"]), None, free_bytes


def sglang_rows() -> list[dict[str, Any]]:
    import kvplan
    from kvplan.budgets import Settings

    rows = []
    for cid, how in CASES.items():
        tokens, weights, free_before = _logged(cid, how)
        settings = Settings(weights_bytes=weights, mem_fraction_static=how["mem_fraction_static"])

        def run(settings: Any = settings) -> Any:
            return kvplan.max_batch(how["model"], gpu=how["gpu"], engine="sglang", engine_version=how["version"],
                                    tp=how["tp"], settings=settings)

        plan = run()
        known = None  # with the logged free memory before the weights (kvplan's non-torch = total - it)
        if free_before is not None:
            known = run(dataclasses.replace(settings, non_torch_bytes=plan.gpu_total_bytes - free_before))
        per_token = plan.per_gpu.kv_cache_bytes / max(plan.kv_cache_tokens, 1)
        logged_kv = tokens * per_token
        rows.append({"case": cid, "version": how["version"], "logged_tokens": tokens,
                     "kvplan_tokens": plan.kv_cache_tokens, "mfs": plan.engine_defaults.get("mem_fraction_static"),
                     "token_error_pct": (plan.kv_cache_tokens - tokens) / tokens * 100,
                     "error_pct": (plan.per_gpu.kv_cache_bytes - logged_kv) / plan.gpu_total_bytes * 100,
                     "known_free_tokens": None if known is None else known.kv_cache_tokens,
                     "known_free_error_pct": None if known is None else
                     (known.kv_cache_tokens - tokens) / tokens * 100,
                     "notes": "; ".join(x for x in (how["stand_in"], "weights logged" if weights else
                                                    how.get("weights", "")) if x)})
    return rows


def sglang_text() -> str:
    rows = sglang_rows()
    before = {r["case"]: r for r in json.loads(BASELINE.read_text())["rows"]} if BASELINE.exists() else {}

    def stats(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} % | {max(values):.2f} %" if values else "- | -"

    after_t = [abs(r["token_error_pct"]) for r in rows]
    after_g = [abs(r["error_pct"]) for r in rows]
    before_t = [abs(before[r["case"]]["token_error_pct"]) for r in rows if r["case"] in before]
    before_g = [abs(before[r["case"]]["error_pct"]) for r in rows if r["case"] in before]
    out = ["| SGLang logs | cases | tokens: median before | worst before | median after | worst after | "
           "KV (% of GPU): median before | worst before | median after | worst after |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
           f"| dev + found | {len(rows)} | {stats(before_t)} | {stats(after_t)} | {stats(before_g)} | "
           f"{stats(after_g)} |",
           "",
           "| case | SGLang | fraction | logged tokens | kvplan before | kvplan after | tokens before % | "
           "tokens after % | KV after (% of GPU) | logged free before the weights: before % | after % | notes |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]

    def pct(value: float | None) -> str:
        return "" if value is None else f"{value:+.2f}"

    for r in rows:
        b = before.get(r["case"], {})
        out.append(f"| {r['case']} | {r['version']} | {r['mfs']:g} | {r['logged_tokens']:,} | "
                   f"{format(b['kvplan_tokens'], ',') if b else ''} | {r['kvplan_tokens']:,} | "
                   f"{pct(b.get('token_error_pct'))} | {r['token_error_pct']:+.2f} | {r['error_pct']:+.2f} | "
                   f"{pct(b.get('known_free_error_pct'))} | {pct(r['known_free_error_pct'])} | {r['notes']} |")
    out.append("")
    out.append("Left out: " + "; ".join(f"{c} ({why})" for c, why in LEFT_OUT.items()) + ".")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", help="write the rows here (and print nothing else)")
    opts = parser.parse_args()
    if opts.json:
        Path(opts.json).write_text(json.dumps({"rows": sglang_rows()}, indent=1) + "\n")
        return
    print(sglang_text())


if __name__ == "__main__":
    main()
