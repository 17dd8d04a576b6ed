"""Fleet speed of ``kvplan check``, run by hand: N copies of the Kubernetes example, one process.

    python benchmarks/fleet.py            # 1,000 files, 5 runs, prints min / median / max seconds
    python benchmarks/fleet.py --files 200 --runs 3

Target (engine-packages issue): 1,000 deployment files in <= 10 s on 2 cores. Plans are pure functions
of (model, GPU, engine, settings), so ``check`` computes each once per run and the rest is parsing.
Results go in docs/performance.md by hand.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "pass" / "k8s-vllm-deployment.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.files):
            shutil.copy(EXAMPLE, Path(tmp) / f"deploy-{i:05d}.yaml")
        cmd = [sys.executable, "-m", "kvplan", "check", str(Path(tmp) / "*.yaml"), "--format", "json"]
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, cwd=REPO)
            times.append(time.perf_counter() - start)
            if done.returncode not in (0, 1):
                sys.stderr.write(done.stderr.decode())
                return 1
    print(f"kvplan check, {args.files} files, {args.runs} runs: min {min(times):.2f} s, "
          f"median {statistics.median(times):.2f} s, max {max(times):.2f} s "
          f"({statistics.median(times) / args.files * 1000:.1f} ms a file)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
