"""Every number kvplan prints for the bundled models, as one snapshot (issue 20: "every number unchanged").

``estimate`` over every bundled model x engine x KV dtype x engine version x TP, ``max-batch`` over every
bundled model x paged engine x GPU x TP/PP, and ``check`` over the example deployments and the real public
deployment files the tests keep, are computed here and compared with
``tests/data/numbers_snapshot.json`` by ``tests/test_numbers_snapshot.py``. A restructure must leave the file
as it is; a change that means to move a number regenerates it and says which numbers moved and why:

    python tests/numbers_snapshot.py --write     # rewrite the snapshot
    python tests/numbers_snapshot.py --diff      # the keys that differ from the stored snapshot

A refused combination is recorded by its error class and field (never its wording, which may be reworded).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).parent / "data" / "numbers_snapshot.json"
ENGINES = ("vllm", "sglang", "trtllm", "llamacpp", "hf", "hf-static")
# (engine, version): each engine's newest rules, and an older release where the rules differ
VERSIONS = {"vllm": (None, "0.10.2"), "hf": (None, "4.57"), "sglang": (None,), "trtllm": (None,),
            "llamacpp": (None,), "hf-static": (None,)}
KV_DTYPES = ("auto", "fp8")
CONTEXTS = (4096, 32768)
BATCHES = (1, 8)
TPS = (1, 2)
PLAN_ENGINES = ("vllm", "sglang", "trtllm")
PLAN_CASES = (("H100-80GB", 1, 1), ("H100-80GB", 4, 1), ("H200", 8, 1), ("H100-80GB", 4, 2))


def _refused(exc: Exception) -> str:
    return f"refused: {type(exc).__name__}({getattr(exc, 'field', None)})"


def estimates(model: str) -> dict[str, Any]:
    import kvplan
    from kvplan.errors import KvplanError

    out: dict[str, Any] = {}
    for engine in ENGINES:
        for version in VERSIONS[engine]:
            for kv in KV_DTYPES:
                for tp in TPS:
                    key = f"estimate|{model}|{engine}|{version or 'latest'}|{kv}|tp{tp}"
                    try:
                        rows = kvplan.estimate(model, contexts=list(CONTEXTS), batches=list(BATCHES), kv_dtypes=kv,
                                               engine=engine, engine_version=version, tp=tp).rows
                    except KvplanError as exc:
                        out[key] = _refused(exc)
                        continue
                    out[key] = {f"b{r.batch}c{r.context}": r.kv_bytes for r in rows}
    return out


def plans(model: str) -> dict[str, Any]:
    import kvplan
    from kvplan.errors import KvplanError

    out: dict[str, Any] = {}
    for engine in PLAN_ENGINES:
        for gpu, tp, pp in PLAN_CASES:
            key = f"max-batch|{model}|{engine}|{gpu}|tp{tp}pp{pp}"
            try:
                p = kvplan.max_batch(model, gpu=gpu, tp=tp, pp=pp, engine=engine, max_model_len=8192)
            except KvplanError as exc:
                out[key] = _refused(exc)
                continue
            d = p.to_dict()
            out[key] = {name: d.get(name) for name in ("num_blocks", "kv_cache_tokens", "max_concurrency",
                                                       "max_batch", "max_context", "fits", "request_kv_bytes")}
            out[key]["kv_cache_bytes"] = p.per_gpu.kv_cache_bytes
            out[key]["weights_bytes"] = p.per_gpu.weights_bytes
    return out


def checks() -> dict[str, Any]:
    """Each deployment's verdict and numbers, and the codes of its findings (not their wording)."""
    import kvplan

    repo = Path(__file__).resolve().parent.parent
    folders = [repo / "examples" / "pass", repo / "examples" / "fail", repo / "tests" / "data" / "deployments"]
    report = kvplan.check([str(f) for f in folders], specs=str(repo / "examples" / "specs"), gpu="H100").to_dict()
    out: dict[str, Any] = {}
    for dep in report["deployments"]:
        where = str(Path(dep["file"]).resolve().relative_to(repo))
        key = f"check|{where}:{dep['line']}|{dep['name']}"
        out[key] = {name: dep.get(name) for name in ("status", "engine", "parallel", "kv_dtype", "max_model_len",
                                                     "kv_cache_bytes_per_gpu", "kv_cache_tokens", "max_concurrency",
                                                     "weights_bytes_per_gpu")}
        out[key]["findings"] = sorted(f["code"] for f in dep.get("findings", []))
    return out


def snapshot() -> dict[str, Any]:
    from kvplan.sources.bundled import bundled_ids

    numbers: dict[str, Any] = {}
    for model in bundled_ids():
        numbers.update(estimates(model))
        numbers.update(plans(model))
    numbers.update(checks())
    return dict(sorted(numbers.items()))


def differences(stored: dict[str, Any], now: dict[str, Any]) -> list[str]:
    keys = sorted(set(stored) | set(now))
    return [f"{k}: {stored.get(k, '<absent>')!r} -> {now.get(k, '<absent>')!r}" for k in keys if stored.get(k) != now.get(k)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite tests/data/numbers_snapshot.json")
    parser.add_argument("--diff", action="store_true", help="print what differs from the stored snapshot")
    args = parser.parse_args()
    now = snapshot()
    if args.write:
        SNAPSHOT.write_text(json.dumps(now, sort_keys=True, separators=(",", ":")) + "\n")
        print(f"{len(now):,} entries written to {SNAPSHOT}")
        return 0
    stored = json.loads(SNAPSHOT.read_text())
    diff = differences(stored, now)
    print("\n".join(diff) if diff else f"{len(now):,} entries, all unchanged")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
