"""Speed of ``kvplan fit`` over the whole GPU catalog, run by hand (issue: 10 bundled models x the catalog in
under 2 s on this machine). Each run is a fresh process (``python -m kvplan fit ... -f json``, the way a user
runs it) and, separately, the library call in one process for all 10 models.

    python benchmarks/fit_speed.py            # 3 runs; prints min / median / max seconds
    python benchmarks/fit_speed.py --runs 5

Results go in docs/performance.md by hand.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

MODELS = ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B",
          "Qwen/Qwen3-30B-A3B", "google/gemma-3-27b-it", "mistralai/Mistral-7B-Instruct-v0.3",
          "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-120b", "Qwen/Qwen3-235B-A22B")
WORKLOAD = {"context": 32768, "concurrency": 64}


def library_once() -> float:
    from kvplan.fit import fit

    start = time.perf_counter()
    for model in MODELS:
        fit(model, **WORKLOAD)
    return time.perf_counter() - start


def processes_once() -> float:
    start = time.perf_counter()
    for model in MODELS:
        subprocess.run([sys.executable, "-m", "kvplan", "fit", model, "-c", str(WORKLOAD["context"]),
                        "--concurrency", str(WORKLOAD["concurrency"]), "-f", "json"], check=False,
                       capture_output=True, cwd=REPO)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    for name, once in (("library, one process, 10 models x catalog", library_once),
                       ("10 processes (kvplan fit ... -f json), one per model", processes_once)):
        times = [once() for _ in range(runs)]
        print(f"{name}: min {min(times):.2f} s, median {statistics.median(times):.2f} s, max {max(times):.2f} s")


if __name__ == "__main__":
    main()
