"""Fleet speed of ``kvplan check``, run by hand: N copies of the Kubernetes example, one process.

    python benchmarks/fleet.py            # 1,000 files, 5 runs, prints min / median / max seconds
    python benchmarks/fleet.py --files 200 --runs 3
    python benchmarks/fleet.py --files 20000 --runs 3 --varied   # files that differ, in 20 folders

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


MODELS = ("Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B", "mistralai/Mistral-7B-Instruct-v0.3", "Qwen/Qwen3-14B")
K8S = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: m{i}, annotations: {{kvplan/gpu: H100}}}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        args: ["--model", "{model}", "--max-model-len", "{mml}"]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""
SHELL = "#!/bin/sh\n# kvplan/gpu: H100\nvllm serve {model} --max-model-len {mml} --max-num-seqs {seqs}\n"


def write_varied(root: Path, files: int) -> None:
    """Half Kubernetes manifests, half serve scripts, in 20 folders; models, lengths and batch limits vary
    (a fleet's files differ: each distinct plan is computed once per run, the parsing every time)."""
    for i in range(files):
        folder = root / f"d{i % 20}"
        folder.mkdir(exist_ok=True)
        model, mml, seqs = MODELS[i % len(MODELS)], 4096 + 1024 * (i % 29), 16 * (1 + i % 8)
        if i % 2:
            (folder / f"s{i}.sh").write_text(SHELL.format(model=model, mml=mml, seqs=seqs))
        else:
            (folder / f"k{i}.yaml").write_text(K8S.format(i=i, model=model, mml=mml))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--varied", action="store_true", help="files that differ (manifests and scripts)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.varied:
            write_varied(Path(tmp), args.files)
            target = tmp
        else:
            for i in range(args.files):
                shutil.copy(EXAMPLE, Path(tmp) / f"deploy-{i:05d}.yaml")
            target = str(Path(tmp) / "*.yaml")
        cmd = [sys.executable, "-m", "kvplan", "check", target, "--format", "json"]
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
