"""Streamed output of big sweeps: time and peak memory of ``kvplan estimate`` per format and size.

    python benchmarks/stream.py                         # measure this checkout, print the table
    python benchmarks/stream.py --before /work/main     # the same commands against another checkout too
    python benchmarks/stream.py --write                 # and put the table in docs/performance.md

Each command is a fresh process, ``kvplan estimate meta-llama/Llama-3.1-8B -c 1..N:1 -f FORMAT``
with its output to /dev/null (not a terminal: the table is the plain one). Time is the child's wall
time, best of ``--runs``; memory its peak resident set (``os.wait4``'s rusage of that child alone).
The goal (issue 26): a 100,000-row sweep in JSON <= 0.5 s, as a table <= 2 s, memory flat in rows.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = "meta-llama/Llama-3.1-8B"
FORMATS = ("json", "csv", "markdown", "table")
START, END = "<!-- stream -->", "<!-- /stream -->"


def command(rows: int, fmt: str, by_layer: bool) -> list[str]:
    return [sys.executable, "-m", "kvplan", "estimate", MODEL, "-c", f"1..{rows}:1", "-f", fmt,
            *(["--by-layer"] if by_layer else [])]


def measure(cmd: list[str], tree: Path, runs: int, limit: float) -> tuple[float, float, float] | None:
    """(best wall seconds, best CPU seconds, peak RSS MiB) of ``cmd`` run with ``tree`` first on the path;
    None where a run takes over ``limit`` seconds (the rest are then skipped)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "FORCE_COLOR",
                                                              "TTY_COMPATIBLE")}
    env["PYTHONPATH"] = str(tree)
    best_wall = best_cpu = float("inf")
    peak = 0.0
    for _ in range(runs):
        with open(os.devnull, "w") as sink, tempfile.TemporaryFile() as errors:  # a file: a pipe could fill
            start = time.perf_counter()
            child = subprocess.Popen(cmd, stdout=sink, stderr=errors, env=env, cwd=tree)
            _, status, usage = os.wait4(child.pid, 0)
            seconds = time.perf_counter() - start
            child.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, for its rusage alone
            if child.returncode:
                errors.seek(0)
                raise SystemExit(f"{' '.join(cmd)} failed: {errors.read().decode()}")
        best_wall = min(best_wall, seconds)
        best_cpu = min(best_cpu, usage.ru_utime + usage.ru_stime)
        peak = max(peak, usage.ru_maxrss / 1024)  # KiB on Linux
        if seconds > limit:
            break
    return best_wall, best_cpu, peak


def cell(figures: tuple[float, float, float] | None) -> str:
    if figures is None:
        return "-"
    wall, cpu, rss = figures
    return f"{wall:.2f} s ({cpu:.2f} s CPU), {rss:.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000,10000,100000", help="sweep sizes, comma-separated")
    parser.add_argument("--by-layer-rows", default="1000,10000", help="sizes also run with --by-layer")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout to run the same commands against")
    parser.add_argument("--before-limit", type=float, default=120.0,
                        help="skip the before run of a size whose first run took longer than this (seconds)")
    parser.add_argument("--write", action="store_true", help="replace the stream block of docs/performance.md")
    args = parser.parse_args()
    formats = args.formats.split(",")
    cases = [(int(n), fmt, False) for n in args.rows.split(",") for fmt in formats]
    cases += [(int(n), fmt, True) for n in args.by_layer_rows.split(",") if n for fmt in formats]
    head = "| rows | format | this checkout |" + (" before |" if args.before else "")
    lines = [head, "|---:|---|---|" + ("---|" if args.before else "")]
    slow: set[tuple[str, bool]] = set()
    for rows, fmt, by_layer in cases:
        cmd = command(rows, fmt, by_layer)
        now = measure(cmd, REPO, args.runs, float("inf"))
        line = f"| {rows:,} | {fmt}{' --by-layer' if by_layer else ''} | {cell(now)} |"
        if args.before:
            before = None if (fmt, by_layer) in slow else measure(cmd, args.before, 1, args.before_limit)
            if before is not None and before[0] > args.before_limit:
                slow.add((fmt, by_layer))  # the next size would take ten times longer
            line += f" {cell(before)} |"
        lines.append(line)
        print(line, flush=True)
    table = "\n".join(lines)
    about = (f"`python benchmarks/stream.py{' --before DIR' if args.before else ''}` on {platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()} ({time.strftime('%Y-%m-%d')}): "
             f"`kvplan estimate {MODEL} -c 1..N:1 -f FORMAT > /dev/null`, wall time best of {args.runs} "
             "(CPU time of the child beside it), peak resident memory of the child.")
    if args.write:
        doc_path = REPO / "docs" / "performance.md"
        doc = doc_path.read_text()
        if START not in doc:
            raise SystemExit(f"docs/performance.md has no {START} block")
        head_text, _, rest = doc.partition(START)
        _, _, tail = rest.partition(END)
        doc_path.write_text(f"{head_text}{START}\n{about}\n\n{table}\n{END}{tail}")
    print("\n" + about)


if __name__ == "__main__":
    main()
