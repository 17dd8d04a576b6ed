"""kvplan's vLLM and SGLang GPU budgets against real start-up logs; writes the tables of docs/accuracy.md.

    PYTHONPATH=$PWD python benchmarks/accuracy.py            # rewrite docs/accuracy.md, print the summary
    PYTHONPATH=$PWD python benchmarks/accuracy.py --json F   # also write every case's figures to F

SGLang's logs: benchmarks/accuracy_sglang.py (its table goes between the sglang-budget-logs markers).

For every vLLM log in tests/data/engine_logs_dev.yaml and engine_logs_found.yaml that printed the weights
and "Available KV cache memory" (and whose GPU total is logged or known), ``kvplan.max_batch`` is run with
the log's model, GPU (its logged total memory), TP/PP, max_model_len, utilization, engine version and
``Settings(weights_bytes=<logged weights>)``: only the budget rules (batch defaults, activation peak,
non-torch memory, CUDA-graph estimate) are judged. The error is kvplan's KV memory per GPU minus the
logged one, in % of the GPU's total memory.

"before" is the same comparison with the rules of commit 9a28dd7 (kept in benchmarks/accuracy_baseline.json,
made by running this script with PYTHONPATH pointing at a checkout of that commit, ``--json``).
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
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from kvplan.budgets import Settings  # noqa: E402
from kvplan.hardware import find_gpu, load_catalog  # noqa: E402
from kvplan.plan import max_batch  # noqa: E402

GIB = 1 << 30
DATA = REPO / "tests" / "data"
BASELINE = REPO / "benchmarks" / "accuracy_baseline.json"
TRANSCRIBED = DATA / "hf_configs_transcribed"

# Checkpoints kvplan has no config for, mapped to one of the same architecture (the weights are the
# logged ones, so only the layer shapes matter). Said per row in docs/accuracy.md.
STAND_INS = {
    "RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic": "meta-llama/Llama-3.1-70B",
    "redhatai/Llama-3.3-70B-Instruct-quantized.w8a8": "meta-llama/Llama-3.1-70B",
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": "meta-llama/Llama-3.1-8B-Instruct",
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8": "meta-llama/Llama-3.1-8B-Instruct",
    "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic": "Qwen/Qwen2.5-7B-Instruct",
    "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8": "Qwen/Qwen2.5-7B-Instruct",
    "RedHatAI/Mistral-Small-3.1-24B-Instruct-2503-quantized.w8a8":
        str(TRANSCRIBED / "mistralai__Mistral-Small-24B-Base-2501.json"),
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": str(TRANSCRIBED / "mistralai__Mistral-Small-24B-Base-2501.json"),
    "codellama/CodeLlama-7b-hf": "meta-llama/Llama-2-7b-hf",
    "moonshotai/Kimi-Dev-72B": "Qwen/Qwen2.5-72B-Instruct",  # a Qwen2.5-72B fine-tune
    "Qwen2.5-7B (quantized checkpoint; exact repo not in excerpt)": "Qwen/Qwen2.5-7B",
}
# GPU names as the logs give them -> kvplan's catalog (vLLM's batch defaults read the device name).
GPUS = {"H100": "H100-SXM-80GB", "RTX 3090": "RTX-3090", "RTX 4090": "RTX-4090", "RTX 4060": None,
        "A100": "A100-SXM4-80GB"}
# vLLM sizes the pool by the worker with the least room; where the logged "Available KV cache memory" is
# another rank's, the logged token count gives the minimum: judged against that (GiB, why).
MINIMUM_OVER_RANKS = {
    # 1,075,312 tokens x 65,536 B (16 layers x 8 KV heads x 128 x 2 x bf16): the last stage runs the sampler
    "llmd-planner-v0190-meta-llama-llama-3-1-8b-h100-80gb-tp1pp2dp1-8192": (1075312 * 65536 / GIB, "last PP stage"),
    # 2,257,264 tokens x 32,768 B (8 layers per stage)
    "llmd-planner-v0190-meta-llama-llama-3-1-8b-h100-80gb-tp1pp4dp1-8192": (2257264 * 32768 / GIB, "last PP stage"),
    # the error names 81,536 tokens x 98,304 B (48 layers x 4 KV heads per rank x 128 x 2 x bf16); the
    # quoted budget line is rank 1's (VllmWorkerProcess), which runs no sampler
    "vllm-13061-r1-distill-qwen-14b-2x4090-131k-v0": (81536 * 98304 / GIB, "rank 0 (the error's token count)"),
}
# The sweep summaries print no total; the same campaign's 0.19.0 logs on the same H100s print 79.19 GiB.
SWEEP_TOTAL_GIB = 79.19


def read_yaml(path: Path) -> Any:
    """A data file of tests/data read with libyaml's safe loader where PyYAML has it (the document yaml.safe_load
    gives, ~10x faster: the engine logs are 1 MB of YAML and the tests read them on every run)."""
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def engine_version(text: str) -> str | None:
    """'0.19.0', '0.15.0 (sweep ...)', 'V0 (~0.6.4; ...)' -> a version kvplan parses; None if unknown."""
    import re

    found = re.search(r"(\d+\.\d+)(\.\d+)?", str(text))
    if found:
        return found.group(0)
    return "0.7" if "early 2025" in str(text) and str(text).startswith("V0") else None  # the last V0 releases


def gpu_of(case: dict) -> tuple[Any, str] | None:
    """The catalog GPU with the logged total memory, or an ad-hoc one of that size."""
    total = (case.get("reported") or {}).get("total_gpu_memory_gib")
    if total is None and case["id"].startswith("llmd-planner-sweep"):
        total = SWEEP_TOTAL_GIB
    name = str(case.get("gpu") or "")
    catalog = next((v for k, v in GPUS.items() if k in name), None)
    if catalog is None:
        return None if total is None else (None, f"{total}GiB")
    gpu = find_gpu(catalog, load_catalog(None))
    if total is not None:
        gpu = dataclasses.replace(gpu, memory_bytes=round(total * GIB), memory_precision="exact", estimate=False)
    return gpu, gpu.name


def usable(case: dict) -> tuple[dict | None, str]:
    """kvplan inputs for a case, or None and why it is left out."""
    rep = case.get("reported") or {}
    if case.get("engine") != "vllm":
        return None, "not vLLM"
    if rep.get("available_kv_gib") is None or rep.get("weights_gib") is None:
        return None, "no weights or available KV logged"
    version = engine_version(case.get("engine_version"))
    if version is None:
        return None, "version unknown"
    gpu = gpu_of(case)
    if gpu is None:
        return None, "GPU total memory unknown"
    model = STAND_INS.get(case["model"], case["model"])
    from kvplan.sources.resolve import load_model

    try:
        spec = load_model(model)
    except Exception:  # noqa: BLE001 - a model kvplan cannot load is reported, not fatal
        return None, f"kvplan cannot load {case['model']}"
    args: dict[str, Any] = {"model": spec, "tp": case.get("tensor_parallel_size") or 1,
                            "pp": case.get("pipeline_parallel_size") or 1, "engine_version": version,
                            "max_model_len": case.get("max_model_len")}
    if gpu[0] is None:
        args["gpu_memory"] = gpu[1]
    else:
        args["gpu"] = gpu[0]
    settings = {"weights_bytes": round(rep["weights_gib"] * GIB)}
    if case.get("gpu_memory_utilization") is not None:
        settings["gpu_memory_utilization"] = case["gpu_memory_utilization"]
    if case.get("enforce_eager"):
        settings["enforce_eager"] = True
    shown = Path(model).stem if model.endswith(".json") else model
    stand_in = "" if model == case["model"] else f"config of {shown}"
    return {"args": args, "settings": settings, "stand_in": stand_in}, ""


def settings_of(raw: dict) -> Settings:
    """Settings from a tests/data/calibration.yaml entry (weights as bytes or GiB)."""
    raw = dict(raw)
    weights = raw.pop("weights_bytes", None)
    if "weights_gib" in raw:
        weights = int(raw.pop("weights_gib") * GIB)
    return Settings(weights_bytes=weights, **raw)


def predict(entry: dict) -> float:
    """KV GiB per GPU for a tests/data/calibration.yaml entry (tests/test_max_batch.py uses it)."""
    plan = max_batch(settings=settings_of(entry.get("settings", {})), **entry["args"])
    return plan.per_gpu.kv_cache_bytes / GIB


def predict_case(inputs: dict) -> dict:
    fields = {f.name for f in dataclasses.fields(Settings)}
    settings = Settings(**{k: v for k, v in inputs["settings"].items() if k in fields})
    plan = max_batch(settings=settings, **inputs["args"])
    g = plan.per_gpu
    return {"kv_gib": g.kv_cache_bytes / GIB, "activation_gib": g.activation_bytes / GIB,
            "non_torch_gib": g.non_torch_bytes / GIB, "cudagraph_gib": g.cudagraph_bytes / GIB,
            "total_gib": plan.gpu_total_bytes / GIB}


def run() -> tuple[list[dict], list[tuple[str, str]]]:
    rows, skipped = [], []
    for name in ("dev", "found"):
        for case in read_yaml(DATA / f"engine_logs_{name}.yaml")["cases"]:
            inputs, why = usable(case)
            if inputs is None:
                if case.get("engine") == "vllm" and why != "no weights or available KV logged":
                    skipped.append((case["id"], why))
                continue
            got = predict_case(inputs)
            rep = case["reported"]
            want, judged = MINIMUM_OVER_RANKS.get(case["id"], (rep["available_kv_gib"], "logged"))
            err = (got["kv_gib"] - want) / got["total_gib"] * 100
            rows.append({"set": name, "case": case["id"], "version": inputs["args"]["engine_version"],
                         "stand_in": inputs["stand_in"], "logged_kv_gib": want, "judged_against": judged,
                         "logged_activation_gib": rep.get("activation_peak_gib"),
                         "logged_non_torch_gib": rep.get("non_torch_forward_increase_gib",
                                                         rep.get("non_torch_memory_gib")),
                         **got, "error_pct": err})
    return rows, skipped


def cudagraph_fit() -> tuple[str, list[dict]]:
    """kvplan's fitted CUDA-graph estimate against the estimate the 0.19.0 logs print (not subtracted there:
    opt-in before 0.21, so these runs do not enter the KV comparison above)."""
    from kvplan.engines.vllm.cudagraph import cudagraph_estimate
    from kvplan.sources.resolve import load_model

    rows = []
    for case in read_yaml(DATA / "engine_logs_found.yaml")["cases"]:
        rep = case.get("reported") or {}
        if rep.get("cuda_graph_estimated_gib") is None or not case["id"].startswith("llmd-planner-v0190"):
            continue
        try:
            spec = load_model(STAND_INS.get(case["model"], case["model"]))
        except Exception:  # noqa: BLE001 - as above
            continue
        got, _ = cudagraph_estimate(spec, case["tensor_parallel_size"], case["pipeline_parallel_size"],
                                    case["max_num_seqs"], case["max_num_batched_tokens"], "H100-SXM-80GB")
        rows.append({"case": case["id"], "logged_gib": rep["cuda_graph_estimated_gib"], "kvplan_gib": got / GIB,
                     "error_gib": got / GIB - rep["cuda_graph_estimated_gib"]})
    errs = sorted(abs(r["error_gib"]) for r in rows)
    worst = sorted(rows, key=lambda r: -abs(r["error_gib"]))[:3]
    text = (f"CUDA-graph estimate (fitted, cudagraph.py) vs the {len(rows)} 0.19.0 logs that print theirs: median "
            f"error {statistics.median(errs):.2f} GiB, worst {errs[-1]:.2f} GiB (" +
            ", ".join(f"{r['case']}: logged {r['logged_gib']:.2f}, kvplan {r['kvplan_gib']:.2f}" for r in worst) + ").")
    return text, rows


def summary(rows: list[dict], which: str) -> tuple[float, float, int]:
    errs = [abs(r["error_pct"]) for r in rows if r["set"] == which]
    return (statistics.median(errs), max(errs), len(errs)) if errs else (0.0, 0.0, 0)


def _minimum(row: dict) -> str:
    return "" if row["judged_against"] == "logged" else f"minimum: {row['judged_against']}"


def table(rows: list[dict], before: dict[str, float]) -> str:
    out = ["| set | case | vLLM | logged KV GiB | kvplan GiB | before % | after % | stand-in config, notes |",
           "|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        b = before.get(r["case"])
        out.append(f"| {r['set']} | {r['case']} | {r['version']} | {r['logged_kv_gib']:.2f} | {r['kv_gib']:.2f} | "
                   f"{'' if b is None else f'{b:+.2f}'} | {r['error_pct']:+.2f} | "
                   f"{'; '.join(x for x in (r['stand_in'], _minimum(r)) if x)} |")
    return "\n".join(out)


def replace_block(doc: str, name: str, text: str) -> str:
    """docs/accuracy.md with the text between ``<!-- name -->`` and ``<!-- /name -->`` replaced (unchanged where
    the markers are missing)."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    if start not in doc:
        return doc
    head, _, rest = doc.partition(start)
    _, _, tail = rest.partition(end)
    return f"{head}{start}\n{text}\n{end}{tail}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", help="write every case's figures here")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite docs/accuracy.md")
    opts = parser.parse_args()
    from benchmarks.accuracy_sglang import sglang_text
    rows, skipped = run()
    if opts.json:
        Path(opts.json).write_text(json.dumps({"rows": rows, "skipped": skipped}, indent=1) + "\n")
    before_rows = json.loads(BASELINE.read_text())["rows"] if BASELINE.exists() else []
    before = {r["case"]: r["error_pct"] for r in before_rows}
    lines = ["| logs | cases | median before | worst before | median after | worst after |",
             "|---|---:|---:|---:|---:|---:|"]
    for which in ("dev", "found"):
        med, worst, n = summary(rows, which)
        bmed, bworst, _ = summary(before_rows, which) if before_rows else (float("nan"),) * 3
        lines.append(f"| {which} | {n} | {bmed:.2f} % | {bworst:.2f} % | {med:.2f} % | {worst:.2f} % |")
    text = "\n".join(lines) + "\n\n" + table(rows, before)
    graphs, graph_rows = cudagraph_fit()
    text += "\n\n" + graphs
    text += "\n\nLeft out: " + "; ".join(f"{c} ({why})" for c, why in skipped) + "."
    print(text)
    if not opts.no_write:
        out = REPO / "docs" / "accuracy.md"
        doc = replace_block(out.read_text(), "budget-logs", text)
        sgl = sglang_text()
        print("\n" + sgl)
        doc = replace_block(doc, "sglang-budget-logs", sgl)
        out.write_text(doc)


if __name__ == "__main__":
    main()
