"""SGLang: ``mem_fraction_static`` of the memory free before the weights holds weights and KV.

``ModelRunner.init_torch_distributed`` returns the GPU memory free after the process group is set up (the
least over the ranks; before the weights load), and every release read (0.4.3 - 0.5.23) sizes the pool from
it: ``profile_max_num_token`` (model_runner.py, up to 0.5.6; model_runner_kv_cache_mixin.py 0.5.7 on;
``_profile_available_bytes`` from 0.5.13) takes ``rest = free after the weights - free before x (1 -
mem_fraction_static)`` and ``max_total_num_tokens = int(rest x 2^30) // cell size``. So the KV memory is
``free before x mfs - weights``. The default fraction is release-keyed (``fraction.py``). Speculative
decoding before 0.5.14: see ``speculative.py`` (the draft's weights and pool outside the fraction).
``--cpu-offload-gb``: ``offloader.py`` ``OffloaderV1.maybe_offload_to_cpu`` (0.4.x - 0.5.13;
``utils/offloader.py`` later) moves decoder-layer parameters (``make_layers``) to pinned host memory one by
one while fewer than ``int(gb x 1024^3)`` bytes have moved: the same rule as vLLM's.
"""

from __future__ import annotations

from kvplan.budgets.base import GIB, GpuBudget, MemoryItem, Settings, kv_item, weights_per_gpu
from kvplan.engines.protocol import Demand
from kvplan.engines.sglang.fraction import Fraction, FractionInputs, default_fraction
from kvplan.engines.version import LATEST, Version
from kvplan.spec import MLA, ModelSpec

# Assumed: the memory in use when init_torch_distributed reads the free memory. The logs: 0.36 GiB (L4, tp 4,
# 0.4.3), 2.51 GiB (H200, tp 8, 0.5.3, "Init torch distributed ends. mem usage=2.01 GB"): a CUDA context of
# about 0.4 GiB, and at tp > 1 on NVSwitch GPUs some 2.1 GiB of NCCL / all-reduce buffers, as vLLM's logs on
# H100 show at TP > 1 (kvplan/engines/vllm/budget.py NON_TORCH_TP).
CONTEXT_BYTES = int(0.4 * GIB)
NVSWITCH_TP_BYTES = int(2.1 * GIB)
NVSWITCH_GPUS = ("H100-SXM", "H200", "H20-", "B200", "GB200")
_SMI_NOTE = ("SGLang reads the GPU's total from nvidia-smi (about 0.5 GiB above torch's); kvplan's default "
             "mem_fraction_static uses the catalog's torch total (the fraction may differ by 0.001)")
# nvidia-smi's memory.total (MiB), which get_nvgpu_memory_capacity reads, where known (kvplan/data/gpus.yaml's
# header: an H100 SXM shows 81559 MiB in nvidia-smi, 81079 MiB in torch)
NVIDIA_SMI_MIB = {"H100-SXM-80GB": 81559}


# SGLang's target model skips the checkpoint's MTP layers; the NEXTN draft worker loads them (0.5.15
# models/deepseek_common/deepseek_weight_loader.py: layers past num_hidden_layers skipped unless is_nextn;
# qwen3_next.py load_weights: "mtp" names skipped unless is_mtp)
MTP_NOT_LOADED = "SGLang does not load without MTP speculation (deepseek_v2.py load_weights, is_nextn)"



def fraction_inputs(spec: ModelSpec, total_bytes: int, tp: int, pp: int, demand: Demand,
                    settings: Settings) -> FractionInputs:
    speculation = demand.speculative.speculation if demand.speculative is not None else None
    method = speculation.method if speculation is not None else demand.proposer
    return FractionInputs(
        gpu_mib=NVIDIA_SMI_MIB.get(demand.gpu_name, total_bytes / (1 << 20)), tp=tp, pp=pp, speculative=method,
        mla=any(isinstance(layer, MLA) for layer in spec.layers), model_type=spec.model_type, model_id=spec.id,
        chunked_prefill_size=settings.max_num_batched_tokens, context_length=demand.max_model_len,
        enforce_eager=settings.enforce_eager, cpu_offload=bool(settings.cpu_offload_bytes))


def default_mem_fraction_static(total_bytes: int, tp: int, pp: int, version: Version = LATEST,
                                inputs: FractionInputs | None = None) -> float:
    """SGLang's default fraction for a GPU of ``total_bytes`` (``fraction.py`` holds the rules)."""
    x = inputs or FractionInputs(gpu_mib=total_bytes / (1 << 20), tp=tp, pp=pp)
    return default_fraction(x, version).value


def _context(tp: int, gpu_name: str) -> MemoryItem:
    if tp > 1 and any(name in gpu_name for name in NVSWITCH_GPUS):
        return MemoryItem("non_torch", CONTEXT_BYTES + NVSWITCH_TP_BYTES, "assumed", "CUDA context and, at tp > 1 on "
                          "an NVSwitch GPU, NCCL / all-reduce buffers before SGLang's first free-memory reading")
    return MemoryItem("non_torch", CONTEXT_BYTES, "assumed", "CUDA context before SGLang's first free-memory reading")


def budget(spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
           settings: Settings) -> GpuBudget:
    from kvplan.engines.sglang.speculative import DEFAULT_MAX_RUNNING_REQUESTS, draft_apart

    notes: list[str] = []
    apart = draft_apart(demand.speculative, version)  # before 0.5.14: the draft is sized outside the pool
    chosen: Fraction | None = None
    if settings.mem_fraction_static:
        mfs = settings.mem_fraction_static
    else:
        chosen = default_fraction(fraction_inputs(spec, total_bytes, tp, pp, demand, settings), version)
        mfs = chosen.value
        smi = chosen.reads_gpu and demand.gpu_name not in NVIDIA_SMI_MIB
        notes += [_SMI_NOTE, *chosen.notes] if smi else list(chosen.notes)
    if apart is not None and apart.target is not None:
        # the target worker profiled its pool before the draft worker loaded its weights
        spec = apart.target
        notes.append("SGLang < 0.5.14: the draft's weights load after the target's pool is sized, out of the "
                     "memory outside mem_fraction_static")
    weights = weights_per_gpu(spec, tp * pp, settings, MTP_NOT_LOADED)
    if settings.cpu_offload_bytes:
        from kvplan.budgets.base import weights_on_gpu  # vLLM's per-parameter rule (docstring)

        embedding = (spec.vocab_size or 0) * (spec.hidden_size or 0) * spec.dtype_bytes // tp
        weights = weights_on_gpu(weights, settings.cpu_offload_bytes, embedding)
    context = _context(tp, demand.gpu_name) if settings.non_torch_bytes is None else \
        MemoryItem("non_torch", settings.non_torch_bytes, "given", "measured (calibration)")
    free_before = total_bytes - context.bytes
    reserve = int(free_before * (1 - mfs))
    how = f"{chosen.source}: {chosen.reserved_mib:,.0f} MiB kept" if chosen and chosen.reserved_mib else \
        (chosen.source if chosen else "")
    static = MemoryItem("static", free_before - reserve, "given" if chosen is None else "computed",
                        f"free before the weights x mem_fraction_static {mfs:g}" + (f" ({how})" if how else ""))
    kv_memory = kv_item(settings, free_before - weights.bytes - reserve,
                        "free after the weights - free before the weights x (1 - mem_fraction_static)")
    items = [static, weights, context, kv_memory,
             MemoryItem("activation", reserve, "computed",
                        "free before the weights x (1 - mem_fraction_static): activations and CUDA graphs")]
    defaults: dict[str, float | int] = {"mem_fraction_static": mfs}
    if demand.speculative is not None:  # _handle_speculative_decoding: 48 unless given
        defaults["max_running_requests"] = settings.max_num_seqs or DEFAULT_MAX_RUNNING_REQUESTS
    return GpuBudget(total_bytes, tuple(items), kv_memory.bytes, defaults,
                     ("SGLang's free memory before the weights is kvplan's estimate (total - CUDA context)",
                      *notes))
