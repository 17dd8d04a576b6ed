"""Speed of ``kvplan check`` over a fleet of deployment files that differ, run by hand (issue: 1,000 and
10,000 files at or under 2 ms a file).

    python benchmarks/check_speed.py                      # 1,000 and 10,000 files, 3 runs each
    python benchmarks/check_speed.py --files 1000 --runs 5
    python benchmarks/check_speed.py --files 1000 --runs 5 --jobs 1    # one process (the default: one per CPU)
    python benchmarks/check_speed.py --write-docs         # also (re)writes its section of docs/performance.md
    python benchmarks/check_speed.py --profile 1000       # cProfile of one run in this process, top 30
    python benchmarks/check_speed.py --base /tmp/main --runs 3   # interleaved with another checkout, CPU per file

Each run is a fresh process, ``python -m kvplan check DIR -f json``, the way a user runs it; the figure is
the whole process's wall time (start-up included) divided by the number of files. The files are drawn
from a fixed seed: a third kvplan deployment files (one to three deployments each, with requirements), a
third Kubernetes Deployments (vLLM or SGLang arguments), a third Docker Compose files (one or two services);
25 bundled models, 10 GPUs, vLLM releases and SGLang, tensor parallelism, context lengths, memory
fractions, KV dtypes, batch limits and prefix caching all vary, in 20 folders. A fleet repeats
configurations, so some deployments plan the same; most files differ in what they ask for.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "performance.md"
SECTION = "## `kvplan check` over 1,000 and 10,000 files that differ"

MODELS = ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.2-3B", "Qwen/Qwen3-8B",
          "Qwen/Qwen3-14B", "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-8B-FP8", "Qwen/Qwen2.5-7B",
          "Qwen/Qwen2.5-72B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mixtral-8x7B-v0.1",
          "mistralai/Mistral-Small-24B-Base-2501", "google/gemma-3-27b-it", "google/gemma-3-12b-it",
          "google/gemma-2-9b-it", "microsoft/phi-4", "microsoft/Phi-3-mini-128k-instruct",
          "deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "openai/gpt-oss-20b",
          "openai/gpt-oss-120b", "allenai/OLMo-2-1124-7B", "tiiuae/falcon-7b-instruct", "zai-org/GLM-4.5-Air")
GPUS = ("H100-SXM-80GB", "H100", "A100-SXM4-80GB", "A100-SXM4-40GB", "L4", "L40S", "H200-141GB", "A10G",
        "RTX-4090", "MI300X")
NODE_LABELS = {"H100-SXM-80GB": "NVIDIA-H100-80GB-HBM3", "H100": "NVIDIA-H100-80GB-HBM3",
               "A100-SXM4-80GB": "NVIDIA-A100-SXM4-80GB", "A100-SXM4-40GB": "NVIDIA-A100-SXM4-40GB",
               "L4": "NVIDIA-L4", "L40S": "NVIDIA-L40S", "H200-141GB": "NVIDIA-H200", "A10G": "NVIDIA-A10G",
               "RTX-4090": "NVIDIA-GeForce-RTX-4090", "MI300X": "AMD-Instinct-MI300X"}
VLLM_IMAGES = ("vllm/vllm-openai:v0.10.2", "vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.9.2")
SGLANG_IMAGES = ("lmsysorg/sglang:v0.4.9.post2-cu126", "lmsysorg/sglang:v0.5.2-cu126")
LENGTHS = (4096, 8192, 16384, 32768, 65536)
TP = (1, 1, 1, 2, 2, 4, 8)


def _draw(rng: random.Random) -> dict:
    return {"model": rng.choice(MODELS), "gpu": rng.choice(GPUS), "tp": rng.choice(TP),
            "mml": rng.choice(LENGTHS), "util": rng.choice((0.85, 0.9, 0.92, 0.95)),
            "dtype": rng.choice(("auto", "auto", "fp8")), "seqs": rng.choice((None, 64, 128, 256)),
            "prefix": rng.random() < 0.3, "sglang": rng.random() < 0.25, "replicas": rng.choice((1, 1, 2, 3))}


def kvplan_file(rng: random.Random, i: int) -> str:
    out = ["version: 1", "deployments:"]
    for j in range(rng.choice((1, 1, 2, 3))):
        d = _draw(rng)
        engine = (f"{{name: sglang, tp: {d['tp']}, max_model_len: {d['mml'] // 1024}k, mem_fraction_static: "
                  f"{d['util'] - 0.05:.2f}}}" if d["sglang"] else
                  f"{{name: vllm, tp: {d['tp']}, max_model_len: {d['mml'] // 1024}k, gpu_memory_utilization: "
                  f"{d['util']}, kv_cache_dtype: {d['dtype']}"
                  + (f", max_num_seqs: {d['seqs']}" if d["seqs"] else "") + "}")
        out += [f"  - name: svc-{i}-{j}",
                f"    model: {d['model']}",
                f"    gpu: {{type: {d['gpu']}, count: {d['tp']}}}",
                f"    engine: {engine}",
                f"    requirements: {{min_concurrency: {rng.choice((1, 4, 8, 16, 32))}, at_context: "
                f"{rng.choice((2, 4, 8))}k, min_context: {d['mml'] // 2048}k}}"]
    return "\n".join(out) + "\n"


def _args(d: dict) -> list[str]:
    if d["sglang"]:
        return ["--model-path", d["model"], "--tp", str(d["tp"]), "--context-length", str(d["mml"]),
                "--mem-fraction-static", f"{d['util'] - 0.05:.2f}"]
    args = ["--model", d["model"], f"--tensor-parallel-size={d['tp']}", "--max-model-len", str(d["mml"]),
            "--gpu-memory-utilization", str(d["util"])]
    if d["dtype"] != "auto":
        args += ["--kv-cache-dtype", d["dtype"]]
    if d["seqs"]:
        args += ["--max-num-seqs", str(d["seqs"])]
    if d["prefix"]:
        args.append("--enable-prefix-caching")
    return args


def k8s_file(rng: random.Random, i: int) -> str:
    d = _draw(rng)
    image = rng.choice(SGLANG_IMAGES if d["sglang"] else VLLM_IMAGES)
    command = '["python3", "-m", "sglang.launch_server"]' if d["sglang"] else None
    args = "\n".join(f'            - "{a}"' for a in _args(d))
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-{i}
  namespace: team-{i % 7}
  annotations:
    kvplan/min-concurrency: "{rng.choice((2, 4, 8, 16))}@{rng.choice((4, 8))}k"
spec:
  replicas: {d['replicas']}
  selector:
    matchLabels: {{app: llm-{i}}}
  template:
    metadata:
      labels: {{app: llm-{i}}}
    spec:
      nodeSelector:
        nvidia.com/gpu.product: {NODE_LABELS[d['gpu']]}
      containers:
        - name: server
          image: {image}
{f'          command: {command}' + chr(10) if command else ''}          args:
{args}
          resources:
            limits:
              nvidia.com/gpu: {d['tp']}
              memory: {rng.choice((64, 128, 200, 400))}Gi
"""


def compose_file(rng: random.Random, i: int) -> str:
    out = ["services:"]
    for j in range(rng.choice((1, 1, 2))):
        d = _draw(rng)
        if d["sglang"]:
            image, launch = rng.choice(SGLANG_IMAGES), "python3 -m sglang.launch_server " + " ".join(_args(d))
        else:
            image, launch = rng.choice(VLLM_IMAGES), " ".join(_args(d))
        out += [f"  llm{j}:",
                f"    image: {image}",
                f"    command: {launch}",
                "    labels:",
                f"      kvplan/gpu: {NODE_LABELS[d['gpu']]}",
                f'    ports: ["{8000 + j}:8000"]',
                "    deploy:",
                "      resources:",
                "        reservations:",
                "          devices:",
                "            - driver: nvidia",
                f"              count: {d['tp']}",
                "              capabilities: [gpu]"]
    out += ["  cache:", "    image: redis:7"]
    return "\n".join(out) + "\n"


def write_fleet(root: Path, files: int, seed: int = 26) -> dict[str, int]:
    """``files`` deployment files in 20 folders under ``root``; returns how many of each kind."""
    rng = random.Random(seed)
    kinds = {"kvplan": 0, "kubernetes": 0, "compose": 0}
    for i in range(files):
        folder = root / f"team{i % 20:02d}"
        folder.mkdir(exist_ok=True)
        kind = ("kvplan", "kubernetes", "compose")[i % 3]
        kinds[kind] += 1
        if kind == "kvplan":
            (folder / f"kvplan-{i:05d}.yaml").write_text(kvplan_file(rng, i))
        elif kind == "kubernetes":
            (folder / f"deploy-{i:05d}.yaml").write_text(k8s_file(rng, i))
        else:
            (folder / f"compose-{i:05d}.yaml").write_text(compose_file(rng, i))
    return kinds


def time_check(root: Path, runs: int, checkout: Path = REPO,
               jobs: int | None = None) -> tuple[list[float], list[float], int, bytes]:
    """Wall seconds and CPU seconds (user + system) of each run, the last run's exit status and output. On a
    shared machine the CPU time moves less than the wall time: both are printed. ``checkout``: the tree whose
    kvplan runs (``python -m`` from its root). ``jobs``: ``--jobs`` (None: kvplan's default, a worker process per
    CPU for a fleet). The CPU time is the whole tree's: kvplan's and its workers'."""
    import resource

    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # installed tools have their .pyc caches
    cmd = [sys.executable, "-m", "kvplan", "check", str(root), "-f", "json", *(["-j", str(jobs)] if jobs else [])]
    times, cpu, rc, out = [], [], 0, b""
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, cwd=checkout, env={**env, "PYTHONPATH": str(checkout)})
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        rc, out = done.returncode, done.stdout
        if rc not in (0, 1):
            raise SystemExit(f"kvplan check failed ({rc}): {done.stderr.decode()[-2000:]}")
    return times, cpu, rc, out


def profile(files: int) -> None:
    import cProfile
    import pstats

    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory() as tmp:
        write_fleet(Path(tmp), files)
        from kvplan.cli import main as kvplan_main

        prof = cProfile.Profile()
        saved = sys.stdout
        sys.stdout = open(os.devnull, "w")
        try:
            prof.runcall(kvplan_main, ["check", tmp, "-f", "json"])
        finally:
            sys.stdout.close()
            sys.stdout = saved
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)


def compare(base: Path, sizes: list[int], runs: int, jobs: int | None = None) -> None:
    """This checkout against ``base``, run after run on the same fleet (a busy machine slows both alike): the CPU
    time per file, median and minimum, and whether the JSON reports are the same bytes."""
    for files in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            write_fleet(Path(tmp), files)
            cpu: dict[str, list[float]] = {"base": [], "this": []}
            outs: dict[str, bytes] = {}
            for _ in range(runs):
                for name, tree in (("base", base), ("this", REPO)):
                    _, spent, _, outs[name] = time_check(Path(tmp), 1, tree, jobs if name == "this" else None)
                    cpu[name] += spent
        same = "identical" if outs["base"] == outs["this"] else "DIFFERENT"
        print(f"{files} files, {runs} interleaved runs: CPU per file, base {statistics.median(cpu['base']) / files * 1000:.2f}"
              f" ms (min {min(cpu['base']) / files * 1000:.2f}), this checkout "
              f"{statistics.median(cpu['this']) / files * 1000:.2f} ms (min {min(cpu['this']) / files * 1000:.2f}); "
              f"reports {same}")


def write_docs(rows: list[str]) -> None:
    text = DOCS.read_text(encoding="utf-8")
    body = "\n".join([
        SECTION, "",
        "`python benchmarks/check_speed.py --write-docs` writes this section. Each run is a fresh process,",
        "`python -m kvplan check DIR -f json`, over files drawn from a fixed seed (a third kvplan deployment files",
        "with one to three deployments, a third Kubernetes Deployments, a third Compose files; 25 bundled models,",
        "10 GPUs, vLLM and SGLang, tensor parallelism, lengths, memory fractions, KV dtypes, batch limits, prefix",
        "caching), in 20 folders. Whole-process wall time, start-up included:", "",
        "| files | deployments planned | runs | wall min | wall median | per file (wall median) | CPU min | "
        "per file (CPU median) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows, "",
        f"Measured {time.strftime('%Y-%m-%d')} on this machine ({os.cpu_count()} cores, shared with other work).", ""])
    pattern = re.compile(re.escape(SECTION) + r".*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: body + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + body
    DOCS.write_text(text, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, action="append", help="files in the fleet (repeatable; "
                        "default 1000 and 10000)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, help="kvplan check --jobs N (default: kvplan's, a worker per CPU)")
    parser.add_argument("--write-docs", action="store_true", help="(re)write its section of docs/performance.md")
    parser.add_argument("--profile", type=int, metavar="FILES", help="profile one run in this process instead")
    parser.add_argument("--base", type=Path, metavar="DIR", help="another checkout (e.g. `git worktree add DIR main`): "
                        "its runs interleaved with this one's on the same fleets, CPU per file of each, outputs compared")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
        return 0
    if args.base:
        compare(args.base.resolve(), args.files or [1000, 10000], args.runs, args.jobs)
        return 0
    rows = []
    for files in args.files or [1000, 10000]:
        with tempfile.TemporaryDirectory() as tmp:
            kinds = write_fleet(Path(tmp), files)
            times, cpu, _, out = time_check(Path(tmp), args.runs, jobs=args.jobs)
        import json

        planned = len(json.loads(out)["deployments"]) if out else 0
        median = statistics.median(times)
        cpu_median = statistics.median(cpu)
        print(f"kvplan check{f' -j {args.jobs}' if args.jobs else ''}, {files} files ({kinds}), {planned} deployments, "
              f"{args.runs} runs: "
              f"wall min {min(times):.2f} s, median {median:.2f} s ({median / files * 1000:.2f} ms a file); "
              f"CPU min {min(cpu):.2f} s, median {cpu_median:.2f} s ({cpu_median / files * 1000:.2f} ms a file)")
        rows.append(f"| {files:,} | {planned:,} | {args.runs} | {min(times):.2f} s | {median:.2f} s | "
                    f"{median / files * 1000:.2f} ms | {min(cpu):.2f} s | {cpu_median / files * 1000:.2f} ms |")
    if args.write_docs:
        write_docs(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
