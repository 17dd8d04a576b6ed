"""What the estimate fast path saves, and what a typer release costs, in whole-process timings.

    python benchmarks/cli_paths.py                        # the installed typer
    python benchmarks/cli_paths.py --typer-path DIR       # also with the typer (and click) found in DIR,
                                                          # e.g. pip install --target DIR 'typer>=0.29'

Each command runs as a fresh process; the commands are interleaved, round after round, so that a busy
machine slows them alike. Prints min and median per command (docs/performance.md records a run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = "meta-llama/Llama-3.1-8B"


def commands(py: str) -> dict[str, list[str]]:
    cli = [py, "-m", "kvplan"]
    through_typer = ("import sys; from kvplan.cli import main; "
                     f"sys.exit(main(['estimate', {MODEL!r}, '-c', '8k', '-f', 'json'], fast=False))")
    return {
        "python -c pass": [py, "-c", "pass"],
        "kvplan estimate -f json (fast path)": [*cli, "estimate", MODEL, "-c", "8k", "-f", "json"],
        "kvplan estimate -f json (through typer)": [py, "-c", through_typer],
        "kvplan estimate (table, fast path)": [*cli, "estimate", MODEL, "-c", "8k"],
        "kvplan gpus -f json (typer)": [*cli, "gpus", "-f", "json"],
        "kvplan max-batch -f json (typer)": [*cli, "max-batch", MODEL, "--gpu", "H100", "-f", "json"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--typer-path", help="a directory holding another typer release to compare")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    path = os.pathsep.join(p for p in (str(REPO), base.get("PYTHONPATH", "")) if p)
    envs = {"installed typer": {**base, "PYTHONPATH": path}}
    if args.typer_path:
        envs[f"typer from {args.typer_path}"] = {**base, "PYTHONPATH": os.pathsep.join((args.typer_path, path))}
    cases = [(env_name, label, cmd) for env_name in envs for label, cmd in commands(sys.executable).items()]
    times: dict[tuple[str, str], list[float]] = {(e, label): [] for e, label, _ in cases}
    for e, _, cmd in cases:  # warm-up: .pyc files and the page cache
        subprocess.run(cmd, capture_output=True, check=True, env=envs[e], cwd=REPO)
    for _ in range(args.rounds):
        for e, label, cmd in cases:
            start = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True, env=envs[e], cwd=REPO)
            times[(e, label)].append(time.perf_counter() - start)
    for e in envs:
        version = subprocess.run([sys.executable, "-c", "import typer; print(typer.__version__)"],
                                 capture_output=True, text=True, env=envs[e]).stdout.strip()
        print(f"\n{e} (typer {version}), {args.rounds} rounds\n")
        print("| command | min | median |\n|---|---:|---:|")
        for label in commands(sys.executable):
            t = times[(e, label)]
            print(f"| {label} | {min(t) * 1000:.0f} ms | {statistics.median(t) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
