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

from kvplan.budgets.base import GpuBudget, MemoryItem, Settings, kv_item, weights_per_gpu
from kvplan.engines.protocol import Demand
from kvplan.engines.sglang import fitted
from kvplan.engines.sglang.fraction import (TEXT_ONLY_NOTE, Fraction, FractionInputs, default_fraction,
                                             multimodal_factor, text_only_by_default, vision_tower)
from kvplan.engines.version import LATEST, Version
from kvplan.spec import MLA, ModelSpec

# The memory in use when init_torch_distributed reads the free memory (the CUDA context; at tp > 1 on NVSwitch
# GPUs NCCL / all-reduce buffers too) is fitted to start-up logs: fitted.py.
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
                    settings: Settings, version: Version = LATEST) -> FractionInputs:
    speculation = demand.speculative.speculation if demand.speculative is not None else None
    method = speculation.method if speculation is not None else demand.proposer
    return FractionInputs(
        gpu_mib=NVIDIA_SMI_MIB.get(demand.gpu_name, total_bytes / (1 << 20)), tp=tp, pp=pp, speculative=method,
        mla=any(isinstance(layer, MLA) for layer in spec.layers), model_type=spec.model_type, model_id=spec.id,
        chunked_prefill_size=settings.max_num_batched_tokens, context_length=demand.max_model_len,
        enforce_eager=settings.enforce_eager, cpu_offload=bool(settings.cpu_offload_bytes),
        amd=demand.gpu_vendor == "amd",
        multimodal=vision_tower(spec.model_type, spec.id) is not None and not text_only_by_default(spec.model_type,
                                                                                                    version))


def default_mem_fraction_static(total_bytes: int, tp: int, pp: int, version: Version = LATEST,
                                inputs: FractionInputs | None = None) -> float:
    """SGLang's default fraction for a GPU of ``total_bytes`` (``fraction.py`` holds the rules)."""
    x = inputs or FractionInputs(gpu_mib=total_bytes / (1 << 20), tp=tp, pp=pp)
    return default_fraction(x, version).value


def _context(tp: int, gpu_name: str) -> MemoryItem:
    field = fitted.context_field(tp, gpu_name)
    size = getattr(fitted.FIT, field)
    if field == "context_nvswitch_tp":
        return MemoryItem("non_torch", size, "assumed", "CUDA context and, at tp > 1 on an NVSwitch GPU, NCCL / "
                          "all-reduce buffers before SGLang's first free-memory reading (fitted to start-up logs)")
    return MemoryItem("non_torch", size, "assumed", "CUDA context before SGLang's first free-memory reading "
                      "(fitted to start-up logs)")


# 0.4.7 on (read in the 0.4.7 - 0.4.10, 0.5.3 and 0.5.4 wheels, model_runner.py ModelRunner.__init__; 0.5.5,
# 0.5.6, 0.5.8, 0.5.13 and 0.5.17 server_args.py "AMD platforms backends"; absent in 0.4.6 and older): with the
# aiter attention backend and a context over 8,192 tokens SGLang multiplies mem_fraction_static, given or
# default, by 0.85. aiter is ROCm's default backend for non-MLA models, and for MLA where the KV heads per rank
# (ModelConfig.get_num_kv_heads(tp)) are 16 or 128 (0.4.7 model_runner.model_specific_adjustment; 0.5.8
# _handle_attention_backend_compatibility). Logs: Qwen3-0.6B and Qwen3-Reranker-0.6B on MI355X, 0.5.17,
# K+V = 0.85 x mfs x free - weights exactly.
AITER_SINCE = (0, 4, 7)
AITER_FACTOR = 0.85
AITER_MIN_CONTEXT = 8192


def _aiter_scales(spec: ModelSpec, tp: int, version: Version, demand: Demand) -> bool:
    if demand.gpu_vendor != "amd" or version < AITER_SINCE or demand.max_model_len <= AITER_MIN_CONTEXT:
        return False
    if any(isinstance(layer, MLA) for layer in spec.layers):
        return max(1, (spec.num_attention_heads or 0) // tp) in (16, 128)
    return True


def budget(spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
           settings: Settings) -> GpuBudget:
    notes: list[str] = []
    apart = None
    if demand.speculative is not None:  # speculative.py read only where a draft runs (a plain check: not at all)
        from kvplan.engines.sglang.speculative import draft_apart

        apart = draft_apart(demand.speculative, version)  # before 0.5.14: the draft is sized outside the pool
    chosen: Fraction | None = None
    if settings.mem_fraction_static:
        mfs = settings.mem_fraction_static
    else:
        chosen = default_fraction(fraction_inputs(spec, total_bytes, tp, pp, demand, settings, version), version)
        mfs = chosen.value
        smi = chosen.reads_gpu and demand.gpu_name not in NVIDIA_SMI_MIB
        notes += [_SMI_NOTE, *chosen.notes] if smi else list(chosen.notes)
    tower = vision_tower(spec.model_type, spec.id)
    if tower is not None and text_only_by_default(spec.model_type, version):
        tower = None
        notes.append(TEXT_ONLY_NOTE)
    multimodal = multimodal_factor(tower, version, default=chosen is not None)
    if multimodal is not None:
        mfs *= multimodal[0]
        notes.append(f"SGLang lowers mem_fraction_static for a multimodal model: {multimodal[1]}")
    if _aiter_scales(spec, tp, version, demand):
        mfs *= AITER_FACTOR
        notes.append(f"SGLang >= 0.4.7 on AMD: the aiter attention backend (the default; another backend given "
                     f"keeps the fraction) with a context over {AITER_MIN_CONTEXT:,} tokens takes mem_fraction_static "
                     f"x {AITER_FACTOR} (server_args.py)")
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
    # the memory free when SGLang starts (device.py): other processes' memory is not free
    free_before = total_bytes - context.bytes - settings.device_used_bytes
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
    defaults: dict[str, float | int | str] = {"mem_fraction_static": mfs}
    if demand.speculative is not None:  # _handle_speculative_decoding: 48 unless given
        from kvplan.engines.sglang.speculative import DEFAULT_MAX_RUNNING_REQUESTS

        defaults["max_running_requests"] = settings.max_num_seqs or DEFAULT_MAX_RUNNING_REQUESTS
    # the cross-validated error band, where kvplan sized the budget itself (not a given KV memory or calibration)
    error = fitted.kv_error(version) if settings.kv_cache_memory_bytes is None and \
        settings.non_torch_bytes is None else None
    return GpuBudget(total_bytes, tuple(items), kv_memory.bytes, defaults,
                     ("SGLang's free memory before the weights is kvplan's estimate (total - CUDA context)",
                      *notes), error)
