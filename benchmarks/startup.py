"""Start-up time of every command against ``python -c pass``, from a normal install outside the checkout.

    python benchmarks/startup.py            # measure, rewrite the block in docs/performance.md
    python benchmarks/startup.py --print    # measure and print only
    python benchmarks/startup.py --rounds 31
    python benchmarks/startup.py --print --cpu   # also the CPU time of the same runs (steadier on a busy machine)

kvplan is installed as a user gets it (``pip install --no-deps --target DIR .``: a wheel built from this tree,
bytecode compiled, its console script ``DIR/bin/kvplan``), and each command runs as that console script from a
temporary directory, paired in every round with ``python -c pass`` run the same way (the same interpreter, the same
environment), the pairs interleaved so that a busy machine slows both alike. The figure is the median of the
per-round ratios; the minimums are printed beside it. The goals are those of the start-up issue.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from accuracy import replace_block  # noqa: E402 - the one writer of generated blocks in docs/

LOG = "tests/data/logs/vllm-0.6-10517-llama31-8b-3090-29k.log"
COMMANDS: list[tuple[str, list[str], float | None]] = [
    ("estimate -f json", ["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k", "-f", "json"], 3.0),
    ("estimate (table)", ["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k"], 5.0),
    ("max-batch (table)", ["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4"], 5.0),
    ("max-batch -f json", ["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "-f", "json"], 5.0),
    ("fit (table)", ["fit", "meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "32", "--gpus", "H100,L4"], None),
    ("fit -f json", ["fit", "meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "32", "--gpus", "H100,L4", "-f",
                     "json"], None),
    ("check examples/pass", ["check", "{repo}/examples/pass", "--specs", "{repo}/examples/specs"], 6.0),
    ("log FILE", ["log", "{repo}/" + LOG], 5.0),
    ("models", ["models"], 5.0),
    ("gpus", ["gpus"], None),
    ("--help", ["--help"], 8.0),
]


def install(target: Path) -> Path:
    """kvplan installed from this tree into ``target`` as pip installs it; its console script."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(target), str(REPO)], check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(target / "kvplan")], check=True)
    script = target / "bin" / "kvplan"
    if not script.exists():
        raise SystemExit(f"pip wrote no console script under {target / 'bin'}")
    return script


def measure(script: Path, rounds: int) -> list[dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(script.parent.parent)  # the installed copy, never the checkout
    cwd = tempfile.mkdtemp(prefix="kvplan-startup-")
    baseline = [sys.executable, "-c", "pass"]
    runs = {name: [c.replace("{repo}", str(REPO)) for c in args] for name, args, _ in COMMANDS}

    def once(cmd: list[str]) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        took = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[cmd[-1] if cmd is baseline else " ".join(cmd[1:])].append(
            after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        return took

    cpu: dict[str, list[float]] = {"pass": [], **{" ".join(args): [] for args in runs.values()}}

    for args in runs.values():  # warm the page cache and the bytecode
        once([str(script), *args])
    for spent in cpu.values():
        spent.clear()
    ratios: dict[str, list[float]] = {name: [] for name in runs}
    times: dict[str, list[float]] = {name: [] for name in runs}
    bases: list[float] = []
    for _ in range(rounds):
        for name, args in runs.items():
            base = once(baseline)
            took = once([str(script), *args])
            bases.append(base)
            times[name].append(took)
            ratios[name].append(took / base)
    rows = []
    pass_cpu = statistics.median(cpu["pass"])
    for name, _, goal in COMMANDS:
        ratio = statistics.median(ratios[name])
        spent = statistics.median(cpu[" ".join(runs[name])])
        rows.append({"command": name, "median_ms": 1000 * statistics.median(times[name]),
                     "min_ms": 1000 * min(times[name]), "ratio": ratio, "min_ratio": min(times[name]) / min(bases),
                     "cpu_ms": 1000 * spent, "cpu_ratio": spent / pass_cpu, "goal": goal, "met": goal is None or ratio <= goal})
    rows.insert(0, {"command": "python -c pass", "median_ms": 1000 * statistics.median(bases),
                    "min_ms": 1000 * min(bases), "ratio": 1.0, "min_ratio": 1.0, "cpu_ms": 1000 * pass_cpu,
                    "cpu_ratio": 1.0, "goal": None, "met": True})
    return rows


def cpu_table(rows: list[dict[str, object]]) -> str:
    """CPU time (user + system) of the same runs: it moves less than the wall time on a shared machine."""
    lines = ["| command | CPU median | × `python -c pass` (CPU median / median) |", "|---|---:|---:|"]
    lines += [f"| {r['command']} | {r['cpu_ms']:.1f} ms | {r['cpu_ratio']:.1f}× |" for r in rows]
    return "\n".join(lines) + "\n"


def table(rows: list[dict[str, object]], rounds: int) -> str:
    lines = [f"`python benchmarks/startup.py` on {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()} ({time.strftime('%Y-%m-%d')}): kvplan installed with pip outside the "
             f"checkout, {rounds} rounds, each command paired with `python -c pass` in the same round.",
             "", "| command | median | min | × `python -c pass` (median of rounds) | × (min / min) | goal |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        goal = f"≤ {r['goal']:g}×" + ("" if r["met"] else " (not met)") if r["goal"] is not None else ""
        lines.append(f"| {r['command']} | {r['median_ms']:.1f} ms | {r['min_ms']:.1f} ms | {r['ratio']:.1f}× | "
                     f"{r['min_ratio']:.1f}× | {goal} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--print", action="store_true", help="print the table; leave docs/performance.md alone")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--cpu", action="store_true", help="also print the CPU time (user + system) of the runs")
    args = parser.parse_args()
    target = Path(tempfile.mkdtemp(prefix="kvplan-install-"))
    try:
        rows = measure(install(target), args.rounds)
    finally:
        shutil.rmtree(target, ignore_errors=True)
    text = table(rows, args.rounds)
    print(text)
    if args.cpu:
        print(cpu_table(rows))
    if not args.print:
        page = REPO / "docs/performance.md"
        doc = page.read_text()
        if "<!-- startup -->" not in doc:
            doc += "\n## Start-up of every command\n\n<!-- startup -->\n<!-- /startup -->\n"
        page.write_text(replace_block(doc, "startup", text))


if __name__ == "__main__":
    main()
