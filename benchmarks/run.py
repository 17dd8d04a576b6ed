"""Speed benchmarks for kvplan, run by hand; writes docs/performance.md.

    python benchmarks/run.py            # measure and rewrite docs/performance.md
    python benchmarks/run.py --print    # measure and print only

Measures (a) cold start of ``kvplan estimate <bundled model>`` against ``python -c pass`` (each a fresh
process, median of many runs), with the import cost of the libraries it stands on, and (b) sweeps of
100,000 (batch, context) points through ``kvplan.estimate``. Targets from the estimate issue:
cold start <= 4x ``python -c pass``; a 100,000-point sweep <= 1 s.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = 25


def wall(cmd: list[str], runs: int = RUNS) -> tuple[float, float]:
    """(median, min) wall seconds of running ``cmd`` as a fresh process."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # users have .pyc caches
    subprocess.run(cmd, capture_output=True, check=True, env=env)  # warm the page cache and .pyc files
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        import importlib

        return getattr(importlib.import_module(package), "__version__", None) or version(package)
    except (ImportError, PackageNotFoundError):
        return "not installed"


def sweep_seconds(model: str, contexts: int, batches: int) -> tuple[float, int]:
    import kvplan
    from kvplan.sources.resolve import load_model

    spec = load_model(model)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        result = kvplan.estimate(spec, contexts=range(1, contexts + 1), batches=range(1, batches + 1))
        best = min(best, time.perf_counter() - start)
    return best, len(result.rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--print", action="store_true", help="print instead of writing docs/performance.md")
    args = parser.parse_args()
    py = sys.executable
    kvplan_exe = shutil.which("kvplan") or f"{py} -m kvplan"
    model = "meta-llama/Llama-3.1-8B"

    rows: list[tuple[str, float, float]] = []
    base_med, base_min = wall([py, "-c", "pass"])
    rows.append(("python -c pass", base_med, base_min))
    for label, code in (("import typer", "import typer"), ("import rich.table", "import rich.table"),
                        ("import pydantic.BaseModel", "from pydantic import BaseModel"),
                        ("import yaml", "import yaml"),
                        ("import kvplan.estimate (no CLI)", "import kvplan.estimate, kvplan.sources.resolve")):
        med, low = wall([py, "-c", code])
        rows.append((label, med, low))
    for label, extra in (("kvplan estimate (table)", []), ("kvplan estimate --format json", ["-f", "json"])):
        med, low = wall([*kvplan_exe.split(), "estimate", model, "-c", "8k", *extra])
        rows.append((label, med, low))
    # the same command through typer (what the fast path saves), and commands that always use typer
    slow = f"from kvplan.cli import main; main(['estimate', {model!r}, '-c', '8k', '-f', 'json'], fast=False)"
    med, low = wall([py, "-c", slow])
    rows.append(("kvplan estimate --format json, through typer", med, low))
    for label, argv in (("kvplan gpus --format json (typer)", ["gpus", "-f", "json"]),
                        ("kvplan max-batch --format json (typer)",
                         ["max-batch", model, "--gpu", "H100", "-f", "json"])):
        med, low = wall([*kvplan_exe.split(), *argv])
        rows.append((label, med, low))
    library_med, library_min = wall([py, "-c", f"import kvplan; kvplan.estimate({model!r}, contexts=[8192])"])
    rows.append(("kvplan.estimate() from Python", library_med, library_min))

    sweeps = []
    for model_id, c, b in (("meta-llama/Llama-3.1-8B", 100_000, 1), ("google/gemma-3-27b-it", 10_000, 10),
                           ("Qwen/Qwen3-Next-80B-A3B-Instruct", 100_000, 1)):
        seconds, points = sweep_seconds(model_id, c, b)
        sweeps.append((model_id, points, seconds))

    lines = [
        "# Performance",
        "",
        f"Measured by `python benchmarks/run.py` on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, typer {_version('typer')} ({time.strftime('%Y-%m-%d')}). "
        "Each process timing is the "
        f"median (and minimum) of {RUNS} fresh processes after one warm-up run.",
        "",
        "## Cold start",
        "",
        "| command | median | min | × `python -c pass` (median) |",
        "|---|---:|---:|---:|",
    ]
    for label, med, low in rows:
        lines.append(f"| {label} | {med * 1000:.1f} ms | {low * 1000:.1f} ms | {med / base_med:.1f}× |")
    lines += ["", "## Sweeps through `kvplan.estimate`", "",
              "| model | points | seconds (best of 5) |", "|---|---:|---:|"]
    for model_id, points, seconds in sweeps:
        lines.append(f"| {model_id} | {points:,} | {seconds:.3f} |")
    text = "\n".join(lines) + "\n"
    if args.print:
        print(text)
        return
    out = REPO / "docs" / "performance.md"
    notes = out.read_text().split("<!-- notes -->", 1)[1] if out.exists() and "<!-- notes -->" in out.read_text() else ""
    out.write_text(text + "\n<!-- notes -->" + notes)
    print(text)


if __name__ == "__main__":
    main()
