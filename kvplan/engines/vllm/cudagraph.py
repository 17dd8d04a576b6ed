"""vLLM's CUDA-graph memory estimate, subtracted before the KV cache (default from v0.20).

Computed (structure): ``vllm/v1/worker/gpu_model_runner.py GPUModelRunner.profile_cudagraph_memory``
captures the first two sizes of each mode (PIECEWISE, FULL): the first capture is the mode's fixed cost,
the second its per-graph cost; estimate = max over modes of the first cost + sum over modes of per-graph
cost x (graphs - 1) (docs/research-vllm.md section 3).

Assumed (fitted): the two costs, from the 0.19.0 H100 logs that print them (tests/data/engine_logs_found.yaml,
``llmd-planner-v0190-*``, the 52 runs kvplan can load): the first capture is 256 MiB (the typical maximum
over modes, 134-522 MiB logged), the per-graph cost per mode grows with the layers a rank holds, 0.18 MiB
per layer (at least 2 MiB; logged 4-6 MiB for 28-32 layers, 12-20 for 80). Neither TP nor MoE showed a
consistent effect. Fit error on those runs: median 0.08 GiB, worst 0.88 GiB (Llama-3.1-8B at TP 2 logs
26 MiB per graph, at TP 1 and 4 6 MiB); ``python benchmarks/accuracy.py`` prints it.
"""

from __future__ import annotations

from kvplan.budgets.base import GIB
from kvplan.engines.vllm.defaults import capture_sizes
from kvplan.spec import ModelSpec

MIB = 1 << 20
FIRST_CAPTURE_BYTES = 256 * MIB
PER_GRAPH_PER_LAYER_BYTES = int(0.18 * MIB)
MIN_PER_GRAPH_BYTES = 2 * MIB
MODES = 2  # PIECEWISE and FULL


def cudagraph_estimate(spec: ModelSpec, tp: int, pp: int, max_num_seqs: int, max_num_batched_tokens: int,
                       gpu_name: str) -> tuple[int, str]:
    graphs = capture_sizes(max_num_seqs, max_num_batched_tokens, spec.model_type, gpu_name)
    layers = -(-spec.num_layers // pp)
    per_graph = max(MIN_PER_GRAPH_BYTES, layers * PER_GRAPH_PER_LAYER_BYTES)
    total = FIRST_CAPTURE_BYTES + MODES * per_graph * max(graphs - 1, 0)
    return total, (f"fitted: 256 MiB first capture + {MODES} modes x ({graphs} - 1) graphs x "
                   f"{per_graph / MIB:.1f} MiB ({layers} layers) = "
                   f"{total / GIB:.2f} GiB")
