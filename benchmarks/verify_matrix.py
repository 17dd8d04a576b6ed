"""Run issue 5's verify matrix and write every figure, with the command that reproduces it, as markdown.

On a GPU (the figures docs/verification.md waits for):

    python benchmarks/verify_matrix.py --device cuda:0 --out docs/verification-gpu.md --json verify-gpu.json

On the CPU, a quick pass of the same code path (small batches and contexts, a fixed budget):

    python benchmarks/verify_matrix.py --device cpu --quick

``--ranks`` adds, per model, a vLLM run of 2 ranks (tp 2, then pp 2) started by ``--launch 2`` on the
same device (on one GPU both processes share it, collectives over gloo); ``--activation`` adds one
transformers forward per model built from its published config in tests/data/hf_configs.

Each point is one ``kvplan.verify.verify`` call: allocation against prediction (and, with --decode,
one timed decode step), then one ``--find-max-batch`` per model and engine. A point the device cannot
hold is recorded as refused (verify checks free memory first), never skipped silently.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvplan.errors import KvplanError  # noqa: E402
from kvplan.verify import VerifyError, verify  # noqa: E402

CONFIGS = Path(__file__).resolve().parent.parent / "tests" / "data" / "hf_configs"

MODELS = [
    "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B", "mistralai/Mistral-7B-v0.1", "google/gemma-3-12b-it",
    "deepseek-ai/DeepSeek-V2-Lite", "openai/gpt-oss-20b", "tiiuae/falcon-7b-instruct",
]
ENGINES = ["vllm", "hf"]
DTYPES = {"vllm": ["bf16", "fp8"], "hf": ["bf16"]}  # transformers' caches hold no fp8


def _points(quick: bool) -> tuple[list[int], list[int], int]:
    """(batches, contexts, find-max-batch context)."""
    if quick:
        return [1, 2], [1024], 1024
    return [1, 8, 32], [4096, 32768], 8192


def _command(model: str, device: str, **kw: Any) -> str:
    parts = ["kvplan verify", model, "--device", device]
    for key, value in kw.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif value not in (None, False):
            parts += [flag, str(value)]
    return " ".join(parts)


def _gib(n: int | None) -> str:
    return "—" if n is None else f"{n / 2**30:.3f}"


def _ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e3:.3f}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    batches, contexts, fmb_context = _points(args.quick)
    models = args.models or MODELS
    runs: list[dict[str, Any]] = []
    searches: list[dict[str, Any]] = []
    total = sum(len(DTYPES[e]) for e in ENGINES) * len(batches) * len(contexts) * len(models)
    done = 0
    for model in models:
        for engine in ENGINES:
            for dtype in DTYPES[engine]:
                for batch in batches:
                    for context in contexts:
                        done += 1
                        kw = dict(engine=engine, kv_dtype=dtype, batch=batch, context=context, decode=args.decode,
                                  repeats=args.repeats)
                        runs.append(_point(model, args.device, f"[{done}/{total}]", kw))
        for engine in ENGINES:
            kw = dict(engine=engine, context=fmb_context, find_max_batch=True)
            if args.device == "cpu":
                kw["memory_budget"] = args.memory_budget
            else:
                kw["gpu_memory_utilization"] = args.gpu_memory_utilization
            searches.append(_point(model, args.device, "[find-max-batch]", kw))
    ranks = [_ranks_point(model, args.device, tp, pp, batches[-1] if args.quick else 8, contexts[0])
             for model in (models if args.ranks else []) for tp, pp in ((2, 1), (1, 2))]
    activations = [_activation_point(model, args.device, 1, 256 if args.quick else 4096)
                   for model in (models if args.activation else [])]
    first = next((r["result"] for r in runs + searches if "result" in r), None)
    return {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": first["device"] if first else {"device": args.device},
        "python": platform.python_version(), "torch": _torch_version(), "runs": runs, "find_max_batch": searches,
        "ranks": ranks, "activation": activations,
    }


def _ranks_point(model: str, device: str, tp: int, pp: int, batch: int, context: int) -> dict[str, Any]:
    """tp x pp rank processes started here (``--launch``), every one on ``device``."""
    from kvplan.verify.distributed import launch

    cmd = (f"kvplan verify {model} --device {device} --tp {tp} --pp {pp} --launch {tp * pp} --batch {batch} "
           f"--context {context}")
    print(f"[ranks] {cmd}", file=sys.stderr, flush=True)
    entry: dict[str, Any] = {"command": cmd, "model": model, "tp": tp, "pp": pp, "batch": batch, "context": context}
    try:
        entry["result"] = launch(model, nprocs=tp * pp, tp=tp, pp=pp, batch=batch, context=context,
                                 device=device).to_dict()
    except KvplanError as exc:  # e.g. heads that do not divide by tp
        entry["refused"] = str(exc)
    return entry


def _activation_point(model: str, device: str, batch: int, tokens: int) -> dict[str, Any]:
    from kvplan.verify.activation import measure_activation

    config = CONFIGS / (model.replace("/", "__") + ".json")
    cmd = f"kvplan verify {config.relative_to(CONFIGS.parent.parent.parent)} --device {device} --engine hf " \
          f"--batch {batch} --context {tokens} --activation"
    print(f"[activation] {cmd}", file=sys.stderr, flush=True)
    entry: dict[str, Any] = {"command": cmd, "model": model, "batch": batch, "tokens": tokens}
    try:
        entry["result"] = measure_activation(str(config), batch=batch, tokens=tokens, device=device).to_dict()
    except KvplanError as exc:
        entry["refused"] = str(exc)
    return entry


def _point(model: str, device: str, label: str, kw: dict[str, Any]) -> dict[str, Any]:
    """One verify call with its reproduce command; a refusal is recorded, not raised."""
    cmd = _command(model, device, **{k: v for k, v in kw.items() if k != "repeats"})
    print(f"{label} {cmd}", file=sys.stderr, flush=True)
    entry: dict[str, Any] = {"command": cmd, "model": model, **kw}
    try:
        entry["result"] = verify(model, device=device, **kw).to_dict()
    except VerifyError as exc:
        entry["refused"] = str(exc)
    return entry


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def markdown(report: dict[str, Any]) -> str:
    dev = report["device"]
    lines = [f"# verify matrix on {dev.get('name', dev.get('device'))}", "",
             f"{report['when']}, torch {report['torch']}, Python {report['python']}; device memory "
             f"{_gib(dev.get('total_bytes'))} GiB. Generated by `benchmarks/verify_matrix.py`.", "",
             "error = allocated − predicted (CPU: tensor storage). allocator = what torch's caching allocator "
             "adds to `memory_allocated` beyond the tensors, as verify's model of it replays the buffers (blocks "
             "handed out whole; CUDA only): where error = allocator, the excess is the allocator's, not the "
             "cache's. reserved and driver are deltas of `memory_reserved` and `mem_get_info` (CUDA only).", "",
             "| model | engine | kv dtype | batch | context | predicted B | allocated B | error B | allocator B | "
             "reserved GiB | driver GiB | decode ms | bound ms |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for entry in report["runs"]:
        head = f"| {entry['model']} | {entry['engine']} | {entry['kv_dtype']} | {entry['batch']} | {entry['context']:,} |"
        if "refused" in entry:
            lines.append(f"{head} refused: {entry['refused']} ||||||||")
            continue
        r = entry["result"]
        m = r["measured"]
        allocated = m["allocated_bytes"] if m["allocated_bytes"] is not None else m["storage_bytes"]
        d = r.get("decode") or {}
        expected = r.get("allocator", {}).get("expected_allocated_bytes")
        by_allocator = "—" if m["reserved_bytes"] is None or expected is None else \
            f"{expected - r['measured']['storage_bytes']:+,}"
        lines.append(f"{head} {r['predicted_bytes']:,} | {allocated:,} | {r['error_bytes']:+,} | {by_allocator} | "
                     f"{_gib(m['reserved_bytes'])} | {_gib(m['driver_bytes'])} | {_ms(d.get('seconds'))} | "
                     f"{_ms(d.get('bound_seconds'))} |")
    lines += ["", "## --find-max-batch", "",
              "| model | engine | context | budget GiB | measured | max-batch predicts | error | from estimate |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for entry in report["find_max_batch"]:
        head = f"| {entry['model']} | {entry['engine']} | {entry['context']:,} |"
        if "refused" in entry:
            lines.append(f"{head} refused: {entry['refused']} |||||")
            continue
        mb = entry["result"]["max_batch"]
        pct = "—" if mb["error_pct"] is None else f"{mb['error_pct']:+.2f} %"
        lines.append(f"{head} {_gib(mb['budget_bytes'])} | {mb['measured']} | {mb['predicted']} | {pct} | "
                     f"{mb['from_estimate']} |")
    if report.get("ranks"):
        lines += ["", "## Ranks (`--launch`, every rank on this device)", "",
                  "| model | tp | pp | batch | context | per rank predicted B | per rank measured B | exact |",
                  "|---|---:|---:|---:|---:|---|---|---|"]
        for entry in report["ranks"]:
            head = f"| {entry['model']} | {entry['tp']} | {entry['pp']} | {entry['batch']} | {entry['context']:,} |"
            if "refused" in entry:
                lines.append(f"{head} refused: {entry['refused']} |||")
                continue
            ranks = entry["result"]["ranks"]
            predicted = ", ".join(f"{r['predicted_bytes']:,}" for r in ranks)
            measured = ", ".join(f"{r['measured']['storage_bytes']:,}" for r in ranks)
            lines.append(f"{head} {predicted} | {measured} | {'yes' if entry['result']['exact'] else 'NO'} |")
    if report.get("activation"):
        lines += ["", "## --activation (transformers forward, random weights)", "",
                  "| model | batch x tokens | weights GiB | cache B | hf rule B | activation peak B | estimate B | "
                  "estimate error | BLAS workspace B |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for entry in report["activation"]:
            head = f"| {entry['model']} | {entry['batch']} x {entry['tokens']:,} |"
            a = entry.get("result")
            if a is None or a["skipped"]:
                lines.append(f"{head} {entry.get('refused') or a['skipped']} |||||||")
                continue
            peak = "—" if a["activation_bytes"] is None else f"{a['activation_bytes']:,}"
            pct = "—" if a["activation_error_pct"] is None else f"{a['activation_error_pct']:+.3f} %"
            work = a.get("blas_workspace_bytes")  # allocated before the forward, not in its peak
            lines.append(f"{head} {_gib(a['weights_bytes'])} | {a['cache_bytes']:,} | {a['predicted_cache_bytes']:,} | "
                         f"{peak} | {a['predicted_activation_bytes']:,} | {pct} | {'—' if work is None else f'{work:,}'} |")
    lines += ["", "## Reproduce", "", "Every row is one command:", "", "```bash"]
    lines += [e["command"] for e in report["runs"] + report["find_max_batch"] + report.get("ranks", [])
              + report.get("activation", [])]
    lines += ["```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--quick", action="store_true", help="batches 1, 2 at 1k context (a CPU smoke run)")
    parser.add_argument("--models", nargs="*", help="model ids (default: the issue's seven)")
    parser.add_argument("--decode", action=argparse.BooleanOptionalAction, default=None,
                        help="time one decode step per point (default: on for CUDA, off on the CPU)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--memory-budget", type=int, default=2 << 30, help="bytes, for --find-max-batch on the CPU")
    parser.add_argument("--ranks", action="store_true", help="also 2 ranks per model (tp 2, pp 2) via --launch 2")
    parser.add_argument("--activation", action="store_true",
                        help="also one transformers forward per model (needs transformers)")
    parser.add_argument("--out", type=Path, help="write the markdown here (default: stdout)")
    parser.add_argument("--json", type=Path, help="write every result as JSON here")
    args = parser.parse_args(argv)
    if args.decode is None:
        args.decode = args.device != "cpu"
    start = time.perf_counter()
    report = run(args)
    report["seconds"] = round(time.perf_counter() - start, 1)
    text = markdown(report)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    inexact = [e["command"] for e in report["runs"] + report["ranks"] if "result" in e and not e["result"]["exact"]]
    inexact += [e["command"] for e in report["activation"]
                if "result" in e and not e["result"]["skipped"] and not e["result"]["cache_exact"]]
    for cmd in inexact:
        print(f"not exact: {cmd}", file=sys.stderr)
    return 1 if inexact else 0


if __name__ == "__main__":
    raise SystemExit(main())
