"""Leave-one-source-out error of kvplan's vLLM budget on every real start-up log kvplan keeps.

    PYTHONPATH=$PWD python benchmarks/crossval.py                 # print the tables, rewrite docs/accuracy.md
    PYTHONPATH=$PWD python benchmarks/crossval.py --json F        # also every case's figures
    PYTHONPATH=$PWD python benchmarks/crossval.py --no-write      # print only

A rule fitted to one set of logs can match it to 0.06 % and miss others by 3.6 %. So the sizes kvplan fits
(``kvplan/engines/vllm/fitted.py``: non-torch memory per release band and parallelism; the sampler's part of
the activation peak is derived from vLLM's code, ``sampler.py``, and not refitted) are refitted here with one
*source* held out (an issue thread, a repository, a blog post: the ``source`` of each log), and that source's logs are predicted with the refit. The error is kvplan's KV memory
per GPU minus the logged one, in % of the GPU's memory, given the logged weights (so only the budget is
judged). Refit: each size is the median of what the band's training logs print for that item
(``non_torch_forward_increase_gib`` or ``non_torch_memory_gib``). A held-out log whose band has no
other source's reading keeps the shipped size and is counted apart ("not held out"): its error is not a
cross-validated figure.

tests/test_crossval.py fails when a change makes the cross-validated median or p90 worse than
``benchmarks/crossval_baseline.json`` (rewritten with ``--baseline``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.accuracy import MINIMUM_OVER_RANKS, STAND_INS, engine_version, read_yaml, replace_block  # noqa: E402
from benchmarks.accuracy import gpu_of as planner_gpu_of  # noqa: E402
from kvplan.budgets import Settings  # noqa: E402
from kvplan.engines import parse_version  # noqa: E402
from kvplan.engines.vllm import collectives, fitted, variant  # noqa: E402
from kvplan.plan import max_batch  # noqa: E402

GIB = 1 << 30
DATA = REPO / "tests" / "data"
LOG_FILES = ("engine_logs_dev.yaml", "engine_logs_found.yaml", "engine_logs_more.yaml", "engine_logs_collected.yaml",
             "engine_logs_issue21.yaml", "engine_logs_issue21b.yaml", "engine_logs_issue21d.yaml",
             "engine_logs_issue21e.yaml", "engine_logs_issue21h.yaml")
BASELINE = REPO / "benchmarks" / "crossval_baseline.json"
# a reading of the 0.10.x TP > 1 growth, which holds two NCCL communicators (refit turns it into a non_torch_tp one)
TWO_COMMUNICATORS = "non_torch_tp (0.10.x: two communicators)"

# Checkpoints the logs name that kvplan has no config for, mapped to a bundled one of the same attention and
# vocabulary (the weights are the logged ones, so only the layer shapes and vocabulary matter).
MORE_STAND_INS = {
    "meta-llama/Meta-Llama-3-8B": "meta-llama/Llama-3.1-8B",  # same layers, heads, vocabulary (128,256)
    "Qwen/Qwen2-7B-Instruct": "Qwen/Qwen2.5-7B",  # 28 x 4 KV heads x 128, hidden 3,584, vocabulary 152,064
    "Qwen/Qwen2.5-7B-Instruct-AWQ": "Qwen/Qwen2.5-7B",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B",
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": "Qwen/Qwen3-235B-A22B-FP8",
    "microsoft/phi-4 (loaded with BitsAndBytes 4-bit at load time, LoRA)": "microsoft/phi-4",
}
BANDS = fitted.JUDGED_BANDS


def engine_of(inp: dict) -> variant.Variant:
    """The vLLM engine (V0 or V1) a log ran, as kvplan plans it (a ``v0: true`` case at 0.8-0.10: V0)."""
    return variant.chosen(parse_version(inp["version"]), inp["settings"].get("vllm_engine"))


def band(inp: dict) -> str:
    return engine_of(inp).band(parse_version(inp["version"]))


def non_torch_field(inp: dict) -> str:
    return engine_of(inp).non_torch_field(parse_version(inp["version"]), inp["args"]["tp"], inp["args"]["pp"])[0]


# NVIDIA's 16 - 24 GB data-center inference cards (Ampere A10 / AWS A10G, Turing T4), as whole words: "A100" and
# "RTX A1000" are not them. Matched before "GB", which a log's memory note ("14.6 GB") would otherwise send to
# "consumer", so a T4 or an A10G falls in one class whichever engine's log names it.
INFERENCE_CARD = re.compile(r"\b(A10G?|T4)\b")


def gpu_class(text: str) -> str:
    name = text.upper()
    for key, cls in (("H100", "H100/H200/H20"), ("H200", "H100/H200/H20"), ("H20", "H100/H200/H20"),
                     ("A100", "A100"), (INFERENCE_CARD, "A10/A10G/T4"), ("L40", "L40S/L4"), ("L4", "L40S/L4"),
                     ("B200", "B200/B300"), ("B300", "B200/B300"), ("GB10", "other"),
                     ("RTX", "consumer"), ("GB", "consumer")):
        if (key.search(name) if isinstance(key, re.Pattern) else key in name):
            return cls
    return "other"


# GPU names as logs print them -> kvplan's catalog, the more specific first (vLLM's batch defaults read the
# device name and memory; a 40 GB A100 is not an 80 GB one).
CATALOG_NAMES = (("A100 40GB", "A100-SXM4-40GB"), ("A100-PCIE-40GB", "A100-PCIe-40GB"),
                 ("A100-SXM4-40GB", "A100-SXM4-40GB"), ("L40S", "L40S"), ("RTX 5090", "RTX-5090"),
                 ("H20", None), ("H100 NVL", "H100-NVL-94GB"), ("GB10", None))


def gpu_of(case: dict) -> tuple[Any, str] | None:
    """The catalog GPU the log ran on (with its logged total memory where printed), else the planner's match."""
    name = str(case.get("gpu") or "")
    named = ((case["gpu_catalog"], case["gpu_catalog"]),) if case.get("gpu_catalog") else ()
    for key, catalog in (*named, *CATALOG_NAMES):
        if key.upper() in name.upper() or (named and key == named[0][0]):
            if catalog is None:
                break
            from kvplan.hardware import find_gpu, load_catalog

            gpu = find_gpu(catalog, load_catalog(None))
            total = (case.get("reported") or {}).get("total_gpu_memory_gib")
            if total is not None:
                gpu = dataclasses.replace(gpu, memory_bytes=round(total * GIB), memory_precision="exact",
                                          estimate=False)
            return gpu, gpu.name
    return planner_gpu_of(case)


def given(case: dict, key: str) -> bool:
    """A batch setting the deployment gave (its command or non-default args), not the engine's printed default."""
    if key in case and "_defaulted" not in key and case.get(f"{key}_defaulted") is False:
        return True
    flag = "--" + key.replace("_", "-")
    return flag in str(case.get("command") or "") or key in str(case.get("non_default_args") or "")


def source_of(case: dict) -> str:
    """One source = one thread, repository or page (``source_key`` where the collector named it)."""
    if case.get("source_key"):
        return str(case["source_key"])
    src = case.get("source") or {}
    repo = src.get("repo")
    if repo and not str(repo).startswith("unknown"):
        return f"{repo}#{src['number']}" if src.get("number") else str(repo)
    return str(src.get("url") or repo or case["id"])


def cases() -> Iterator[dict]:
    for name in LOG_FILES:
        path = DATA / name
        if path.exists():
            for case in read_yaml(path)["cases"]:
                yield {**case, "_file": name}


def inputs(case: dict) -> tuple[dict | None, str]:
    """kvplan's arguments for a vLLM log with its weights and available KV memory, or why not."""
    rep = case.get("reported") or {}
    if case.get("engine") != "vllm":
        return None, "not vLLM"
    if case.get("duplicate_of"):  # one start-up is one log, however often it was collected
        return None, f"the same start-up as {case['duplicate_of']}"
    if rep.get("available_kv_gib") is None or rep.get("weights_gib") is None:
        return None, "no weights or available KV logged"
    version = _release(case["version"]) if case.get("version") else engine_version(case.get("engine_version"))
    if version is None:
        return None, "version unknown"
    if case.get("v0") and parse_version(version) >= variant.V0_REMOVED_IN:
        return None, f"V0 engine, but no V0 in the version read ({version}): not a vLLM release"
    gpu = gpu_of(case)
    if gpu is None:
        return None, "GPU total memory unknown"
    # kvplan_model: the bundled model (or transcribed config) the collector matched to the log, said per case
    model = case.get("kvplan_model") or MORE_STAND_INS.get(case["model"], STAND_INS.get(case["model"], case["model"]))
    if isinstance(model, str) and model.startswith("tests/data/"):
        model = str(REPO / model)
    from kvplan.sources.resolve import load_model

    try:
        spec = load_model(model)
    except Exception:  # noqa: BLE001 - a model kvplan cannot load is reported, not fatal
        return None, f"kvplan cannot load {case['model']}"
    args: dict[str, Any] = {"model": spec, "tp": _whole(case.get("tensor_parallel_size")),
                            "pp": _whole(case.get("pipeline_parallel_size")), "engine_version": version,
                            "max_model_len": case.get("max_model_len")}
    args.update({"gpu_memory": gpu[1]} if gpu[0] is None else {"gpu": gpu[0]})
    settings: dict[str, Any] = {"weights_bytes": round(rep["weights_gib"] * GIB)}
    if case.get("v0") and parse_version(version) >= variant.V1_DEFAULT_SINCE:
        settings["vllm_engine"] = "v0"  # VLLM_USE_V1=0 or vLLM's fallback: V0's accounting (variant.py)
    if case.get("gpu_memory_utilization") is not None:
        settings["gpu_memory_utilization"] = case["gpu_memory_utilization"]
    if case.get("enforce_eager"):
        settings["enforce_eager"] = True
    if _offline(case):  # the LLM class's own batch defaults (vllm/engine/arg_utils.py, UsageContext.LLM_CLASS)
        settings["usage_context"] = "llm"
    if "--language-model-only" in str(case.get("command") or ""):  # no encoder in the profiling run
        settings["language_model_only"] = True
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        if isinstance(case.get(key), int) and given(case, key):
            settings[key] = case[key]
    # the top-k/top-p path the log's start-up line (or its source) shows, quoted in sampler_evidence
    if case.get("sampler") is not None and case.get("sampler_evidence"):
        settings["vllm_sampler"] = case["sampler"]
    return {"args": args, "settings": settings, "model": spec, "version": version}, ""


def _offline(case: dict) -> bool:
    """True where the log's start-up is vLLM's offline ``LLM`` class (said in the case's ``entrypoint``), not a server."""
    entry = str(case.get("entrypoint") or "")
    return any(mark in entry for mark in ("LLM(", "LLM class", "vllm.LLM", "vLLM LLM"))


def _release(text: object) -> str | None:
    """'0.8.5.post1', '0.9.3.dev6+g...' -> '0.8.5', '0.9.3' (the release whose rules apply)."""
    import re

    found = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    return ".".join(g for g in found.groups() if g is not None) if found else None


def _whole(value: object) -> int:
    """2, '2' or '2 (inferred from ...)' -> 2; absent -> 1."""
    import re

    found = re.match(r"\s*(\d+)", str(value)) if value is not None else None
    return int(found.group(1)) if found else 1


@contextmanager
def using(fit: fitted.VllmFit) -> Iterator[None]:
    """Plan with these fitted sizes (the only writer of fitted.FIT)."""
    saved = fitted.FIT
    fitted.FIT = fit
    try:
        yield
    finally:
        fitted.FIT = saved


def plan(inp: dict, **settings: Any) -> Any:
    return max_batch(settings=Settings(**{**inp["settings"], **settings}), **inp["args"])


def readings(case: dict, inp: dict) -> dict[str, float]:
    """What this log says about each fitted size (bytes; bytes per logit)."""
    rep = case["reported"]
    out: dict[str, float] = {}
    non_torch = rep.get("non_torch_forward_increase_gib", rep.get("non_torch_memory_gib"))
    if isinstance(non_torch, (int, float)):
        # the fitted size is what is left after the collective buffers kvplan computes (collectives.py); where the
        # growth holds vLLM's own NCCL communicator too (0.10.x, TP > 1), what is left is TP 1's growth plus two
        # communicators, one of them the fitted size less TP 1's growth (budget.second_communicator): refit reads
        # it as (left + TP 1's growth) / 2, TP 1's growth refitted on the same training logs
        field = non_torch_field(inp)
        left = non_torch * GIB - computed(inp)
        if field == "non_torch_tp" and collectives.vllm_communicators_after_snapshot(parse_version(inp["version"]),
                                                                                      inp["args"]["tp"]):
            out[TWO_COMMUNICATORS] = left
        else:
            out[field] = left
    return out


def computed(inp: dict) -> int:
    """The non-torch bytes kvplan computes from FlashInfer's and NCCL's code for this deployment (not fitted)."""
    from kvplan.engines.vllm.budget import computed_non_torch

    args, gpu = inp["args"], inp["args"].get("gpu")
    tokens = int(plan(inp).engine_defaults["max_num_batched_tokens"])
    return computed_non_torch(parse_version(inp["version"]), args["tp"], args["pp"], gpu.name if gpu else "",
                              inp["model"].hidden_size or 0, tokens, inp["settings"].get("enforce_eager", False),
                              field=non_torch_field(inp))[0]


def refit(training: Iterable[dict[str, float]]) -> tuple[fitted.VllmFit, set[str]]:
    """Each size: the median of the training readings; the sizes no training log reads are returned apart."""
    values: dict[str, list[float]] = defaultdict(list)
    for reading in training:
        for name, value in reading.items():
            values[name].append(value)
    fields = {f.name: f for f in dataclasses.fields(fitted.VllmFit)}
    if values.get(TWO_COMMUNICATORS):  # 0.10.x TP > 1: g1 + 2 x communicator -> the TP > 1 size g1 + communicator
        tp1 = statistics.median(values["non_torch_tp1"]) if values.get("non_torch_tp1") else fitted.FIT.non_torch_tp1
        values["non_torch_tp"] += [(left + tp1) / 2 for left in values.pop(TWO_COMMUNICATORS)]
    new = {name: (statistics.median(vals) if isinstance(getattr(fitted.FIT, name), float)
                  else int(statistics.median(vals))) for name, vals in values.items() if name in fields}
    return dataclasses.replace(fitted.FIT, **new), set(fields) - set(new)


def run() -> tuple[list[dict], list[tuple[str, str]]]:
    usable, skipped = [], []
    for case in cases():
        inp, why = inputs(case)
        if inp is None:
            if case.get("engine") == "vllm" and why != "no weights or available KV logged":
                skipped.append((case["id"], why))
            continue
        usable.append((case, inp, readings(case, inp)))
    rows = []
    for case, inp, _ in usable:
        src = source_of(case)
        fit, unread = refit(r for c, _, r in usable if source_of(c) != src)
        tp, pp = inp["args"]["tp"], inp["args"]["pp"]
        needed = {non_torch_field(inp)}
        with using(fit):
            held = plan(inp).per_gpu.kv_cache_bytes / GIB
        shipped = plan(inp)
        total = shipped.gpu_total_bytes / GIB
        want, judged = MINIMUM_OVER_RANKS.get(case["id"], (case["reported"]["available_kv_gib"], "logged"))
        rows.append({"case": case["id"], "file": case["_file"], "source": src, "version": inp["version"],
                     "band": band(inp), "gpu_class": gpu_class(str(case.get("gpu") or "")),
                     "tp": tp, "pp": pp, "logged_kv_gib": want, "judged_against": judged,
                     "kvplan_kv_gib": shipped.per_gpu.kv_cache_bytes / GIB, "heldout_kv_gib": held,
                     "total_gib": total, "held_out": not (needed & unread),
                     "error_pct": (shipped.per_gpu.kv_cache_bytes / GIB - want) / total * 100,
                     "heldout_error_pct": (held - want) / total * 100})
    return rows, skipped


def stats(errors: list[float]) -> dict[str, float]:
    if not errors:
        return {"n": 0, "median": float("nan"), "p90": float("nan"), "worst": float("nan")}
    a = sorted(abs(e) for e in errors)
    return {"n": len(a), "median": statistics.median(a), "p90": a[min(len(a) - 1, int(0.9 * len(a)))],
            "worst": a[-1]}


def summary(rows: list[dict]) -> dict[str, dict[str, float]]:
    held = [r for r in rows if r["held_out"]]
    return {"cross-validated (held-out sources)": stats([r["heldout_error_pct"] for r in held]),
            "in-sample (shipped sizes, all logs)": stats([r["error_pct"] for r in rows])}


def table(groups: dict[str, list[dict]], title: str) -> list[str]:
    out = [f"| {title} | logs | sources | median | p90 | worst |", "|---|---:|---:|---:|---:|---:|"]
    for key, rs in sorted(groups.items()):
        s = stats([r["heldout_error_pct"] for r in rs])
        out.append(f"| {key} | {s['n']} | {len({r['source'] for r in rs})} | {s['median']:.2f} % | "
                   f"{s['p90']:.2f} % | {s['worst']:.2f} % |")
    return out


def report(rows: list[dict], skipped: list[tuple[str, str]]) -> str:
    held = [r for r in rows if r["held_out"]]
    lines = ["| errors, % of GPU memory | logs | median | p90 | worst |", "|---|---:|---:|---:|---:|"]
    for name, s in summary(rows).items():
        lines.append(f"| {name} | {s['n']} | {s['median']:.2f} % | {s['p90']:.2f} % | {s['worst']:.2f} % |")
    lines.append("")
    lines.append(f"{len(rows)} vLLM logs from {len({r['source'] for r in rows})} sources; "
                 f"{len(rows) - len(held)} not held out (their band has no other source's reading: "
                 + ", ".join(sorted({r['case'] for r in rows if not r['held_out']})) + ").")
    for key, title in (("band", "release band"), ("gpu_class", "GPU class"), ("source", "held-out source")):
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in held:
            groups[str(r[key])].append(r)
        lines += ["", *table(groups, title)]
    lines += ["", "Left out: " + "; ".join(f"{c} ({why})" for c, why in skipped) + "."]
    return "\n".join(lines)


INTERVALS = REPO / "kvplan" / "engines" / "vllm" / "budget_error.json"
MIN_LOGS, MIN_SOURCES = 5, 2  # a band with fewer held-out logs or sources takes the pooled interval
COVER = 0.95  # nominal: the 2.5th to 97.5th percentile, so that at least 90 % of held-out logs fall inside
SMALL_SAMPLE = 20


def _quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile of a non-empty list."""
    a = sorted(values)
    pos = q * (len(a) - 1)
    lo = int(pos)
    return a[lo] + (a[min(lo + 1, len(a) - 1)] - a[lo]) * (pos - lo)


def intervals(rows: list[dict]) -> dict:
    """From the held-out residuals (kvplan minus logged KV, as a fraction of the GPU): the band of errors each
    release band's predictions carry, 5th to 95th percentile; the pooled one where a band has too few."""
    held = [r for r in rows if r["held_out"]]

    def band_of(rs: list[dict]) -> dict:
        errs = [r["heldout_error_pct"] / 100 for r in rs]
        # under 20 logs the 5th/95th percentiles fall inside the sample and cover less than they say: the range
        tail = (1 - COVER) / 2 if len(errs) >= SMALL_SAMPLE else 0.0
        return {"low": round(_quantile(errs, tail), 5), "high": round(_quantile(errs, 1 - tail), 5),
                "logs": len(rs), "sources": len({r["source"] for r in rs})}

    bands: dict[str, list[dict]] = defaultdict(list)
    for r in held:
        bands[r["band"]].append(r)
    out = {"about": ("kvplan's KV memory minus the logged one, as a fraction of the GPU's memory, on logs whose "
                     "source was held out of the fit (benchmarks/crossval.py --intervals); 'low'/'high' are the "
                     f"{(1 - COVER) / 2:.0%} and {1 - (1 - COVER) / 2:.0%} quantiles (the whole range under "
                     f"{SMALL_SAMPLE} logs): the engine's KV memory lies "
                     "in [kvplan - high x GPU, kvplan - low x GPU] for about 90 % of such deployments"),
           "bands": {}, "pooled": band_of(held)}
    for name, since in ((n, s) for s, n in BANDS):
        rs = bands.get(name, [])
        if len(rs) >= MIN_LOGS and len({r["source"] for r in rs}) >= MIN_SOURCES:
            out["bands"][name] = {"since": list(since), **band_of(rs)}
    return out


def coverage(rows: list[dict], table: dict) -> float:
    """The share of held-out logs whose logged KV lies inside the interval their band gets."""
    held = [r for r in rows if r["held_out"]]
    inside = 0
    for r in held:
        b = table["bands"].get(r["band"], table["pooled"])
        inside += b["low"] - 1e-9 <= r["heldout_error_pct"] / 100 <= b["high"] + 1e-9
    return inside / len(held) if held else float("nan")


def arguments(baseline: str, intervals: str) -> argparse.Namespace:
    """The options both cross-validation scripts take (this one and crossval_engines.py)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", help="write every case's figures here")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite docs/accuracy.md")
    parser.add_argument("--baseline", action="store_true", help=f"rewrite {baseline}")
    parser.add_argument("--intervals", action="store_true", help=f"rewrite {intervals}")
    return parser.parse_args()


def main() -> None:
    opts = arguments("benchmarks/crossval_baseline.json", "kvplan/engines/vllm/budget_error.json")
    rows, skipped = run()
    text = report(rows, skipped)
    if opts.json:
        Path(opts.json).write_text(json.dumps({"rows": rows, "skipped": skipped}, indent=1) + "\n")
    if opts.baseline:
        BASELINE.write_text(json.dumps(summary(rows), indent=1) + "\n")
    table = intervals(rows)
    text += ("\n\nIntervals (2.5th to 97.5th percentile of the held-out errors, their whole range under 20 logs; `kvplan/engines/vllm/budget_error.json`): "
             + "; ".join(f"{name}: {b['low'] * 100:+.2f} % to {b['high'] * 100:+.2f} % ({b['logs']} logs, "
                         f"{b['sources']} sources)" for name, b in table["bands"].items())
             + f"; other bands, pooled: {table['pooled']['low'] * 100:+.2f} % to {table['pooled']['high'] * 100:+.2f} %"
             f" ({table['pooled']['logs']} logs). They cover {coverage(rows, table):.0%} of the held-out logs.")
    if opts.intervals:
        INTERVALS.write_text(json.dumps(table, indent=1) + "\n")
    print(text)
    if not opts.no_write:
        out = REPO / "docs" / "accuracy.md"
        out.write_text(replace_block(out.read_text(), "crossval", text))


if __name__ == "__main__":
    main()
