"""How many of the numbers real start-up logs print ``kvplan log`` reads.

    PYTHONPATH=$PWD python benchmarks/log_coverage.py            # the table, and every number it misses
    PYTHONPATH=$PWD python benchmarks/log_coverage.py --misses   # list each missed number with its case

Every case of tests/data/engine_logs_*.yaml with a ``log_excerpt`` has a ``reported:`` map: the numbers its
collector copied, number for number, from the log; those the excerpt itself prints are counted. Each is *read* when the log kvplan parses from the excerpt
holds a value equal to it: a memory item (not one kvplan worked out: only the printed ones count) within the
rounding of the printed digits, or a count (blocks, tokens, concurrency). Matching is by value, not by name, so
a number counts as read whatever kvplan calls it. Left out of the count, with the reason: numbers another tool
printed (nvidia-smi, a notebook's own estimate), what a collector worked out across runs (sweeps, the
utilization a run would need), settings and shapes (layer and graph counts), and lists or words.

tests/test_log_coverage.py fails when a change stops reading a number ``benchmarks/log_coverage_baseline.json``
lists as read (rewritten with ``--baseline`` when a change reads more, or new logs come), or the share falls under
``GOAL``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.accuracy import read_yaml  # noqa: E402
from kvplan.logs import parse_text  # noqa: E402

DATA = REPO / "tests" / "data"
BASELINE = REPO / "benchmarks" / "log_coverage_baseline.json"
GOAL = 95.0

# Left out of the count. Printed by another tool, or worked out by the collector (across runs, or from other numbers):
OTHER_TOOLS = ("nvidia_smi", "unsloth_", "lmstudio_", "observed_", "build_peak", "attempt_", "min_viable",
               "memfrac_sweep", "with_fraction", "kv_at_", "activation_mb_seq", "free_after_rebuild", "checkpoint_gib",
               "tp2_weights", "gpu_total_bytes", "needed_kv_gib", "estimated_max_model_len")
# Settings and shapes, not memory or capacity (utilizations the engine suggests, graph and layer counts, capture
# sizes, slots and windows):
SETTINGS = ("util_equivalent", "util_to_keep", "cuda_graph_piecewise_count", "cuda_graph_full_count",
            "cuda_graph_profiled_sets", "cuda_graph_sets", "torch_compile_range", "padding_layers", "layers_per_worker",
            "page_size_bytes_per_layer_block", "kv_layers", "non_swa_layers", "n_slots", "context_len",
            "max_num_sequences", "max_attention_window", "window_size", "cuda_graph_bs_max", "kv_cache_memory_hint",
            "candidate_kv_budget", "initial_available_bytes")
NOT_COUNTED = OTHER_TOOLS + SETTINGS
UNITS = {"gib": (1 << 30,), "mib": (1 << 20,), "gb": (1 << 30, 10**9), "mb": (1 << 20, 10**6), "kb": (1 << 10, 10**3), "bytes": (1,)}


def cases() -> Iterator[dict]:
    for path in sorted(DATA.glob("engine_logs_*.yaml")):
        for case in read_yaml(path)["cases"]:
            if case.get("log_excerpt") and isinstance(case.get("reported"), dict):
                yield {**case, "_file": path.name}


def counted(key: str, value: object, excerpt: str) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and not key.startswith(NOT_COUNTED) and not key.endswith("_by_rank") and in_text(value, excerpt))


def in_text(value: float, excerpt: str) -> bool:
    """Whether the excerpt prints this number (a collector may have copied it from a part of the log the excerpt
    leaves out: then it is not a number this excerpt prints)."""
    import re

    digits = str(value).rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
    spaced = re.compile(r"(?<![\d.])" + re.escape(digits) + r"0*(?![\d])")
    with_commas = f"{value:,}" if isinstance(value, int) else None
    return bool(spaced.search(excerpt)) or (with_commas is not None and with_commas in excerpt)


def unit_of(key: str) -> tuple[int, ...] | None:
    for suffix, scales in UNITS.items():
        if key.endswith("_" + suffix) or f"_{suffix}_" in key:
            return scales
    return None


def read(key: str, value: float, log) -> bool:
    """Whether the parsed log holds this printed number."""
    step = Decimal(10) ** Decimal(str(value)).as_tuple().exponent  # the printed digits' rounding
    scales = unit_of(key)
    if scales is not None:
        # equal within the finer of the two printed roundings ('61.7' is not the '61.66 GiB' a log printed)
        printed = [v for name, v in log.memory.items() if name not in log.derived]
        printed += [r.value for r in log.per_device]  # each device's buffer, as printed (the waterfall: their sum)
        printed += [r.value for r in log.per_rank]  # each pipeline rank's items (the waterfall: the limiting rank's)
        return any(abs(v.bytes - value * s) <= min(float(step) * s, v.step_bytes) / 2 + 1 for v in printed
                   for s in scales)
    # counts, and the settings the log prints (SGLang's chunked_prefill_size is its max_num_batched_tokens)
    counts = [log.num_gpu_blocks, log.kv_cache_tokens, log.max_concurrency, log.concurrency_len, *log.counts.values(),
              *(v for v in log.settings.to_dict().values() if isinstance(v, (int, float)) and not isinstance(v, bool))]
    return any(c is not None and abs(c - value) <= float(step) / 2 + 1e-9 for c in counts)


def run() -> tuple[Counter, Counter, list[tuple[str, str, object]], list[str]]:
    """Counts per name, and the numbers missed and read ('case: name')."""
    total, hit, misses, read_ones = Counter(), Counter(), [], []
    for case in cases():
        log = parse_text(case["log_excerpt"])
        for key, value in case["reported"].items():
            if not counted(key, value, case["log_excerpt"]):
                continue
            total[key] += 1
            if read(key, float(value), log):
                hit[key] += 1
                read_ones.append(f"{case['id']}: {key}")
            else:
                misses.append((case["id"], key, value))
    return total, hit, misses, read_ones


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list every number kvplan log does not read")
    parser.add_argument("--baseline", action="store_true", help=f"rewrite {BASELINE.name} with these figures")
    opts = parser.parse_args()
    total, hit, misses, read_ones = run()
    n, h = sum(total.values()), sum(hit.values())
    if opts.baseline:
        BASELINE.write_text(json.dumps({"printed": n, "read": h, "read_numbers": sorted(read_ones)}, indent=1) + "\n")
    print(f"{h} of {n} numbers read ({100 * h / n:.1f} %; goal {GOAL:.0f} %)\n")
    print("| reported as | printed | read |\n|---|---:|---:|")
    for key, count in total.most_common():
        print(f"| {key} | {count} | {hit[key]} |")
    if opts.misses:
        print()
        for case, key, value in misses:
            print(f"{case}: {key} = {value}")


if __name__ == "__main__":
    main()
