"""vLLM's GPU budget: the KV memory a V1 engine finds at start-up.

``vllm/v1/worker/gpu_worker.py::Worker.determine_available_memory`` and ``vllm/utils/mem_utils.py``:
available = ceil(total x gpu_memory_utilization) - (weights + activation peak + non-torch memory)
- CUDA-graph estimate. Defaults: utilization 0.92 from v0.20 (0.90 before); the CUDA-graph estimate
from v0.20 unless --enforce-eager, and under Model Runner V2 only from 0.29 (runner.py: which runner runs,
and its sampler); ``--kv-cache-memory`` replaces the whole calculation.
The profiled batch (``max_num_batched_tokens``, ``max_num_seqs``) defaults by version, GPU and entry
point: defaults.py. The CUDA-graph estimate: cudagraph.py. Each constant below says whether it is
computed from vLLM's code or assumed (fitted to the logs in tests/data/engine_logs_*.yaml, docs/accuracy.md).
"""

from __future__ import annotations

import math

from kvplan.budgets.base import GpuBudget, MemoryItem, Settings, activation_bytes, weights_per_gpu
from kvplan.engines.protocol import Demand
from kvplan.engines.vllm import collectives, fitted, runner, sampler, variant
from kvplan.engines.vllm.cudagraph import cudagraph_estimate
from kvplan.engines.vllm.defaults import batch_defaults, is_rocm
from kvplan.engines.version import Version
from kvplan.sources.tower_names import may_have_tower
from kvplan.spec import ModelSpec

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from kvplan.engines.vllm.defaults import UsageContext

# the 0.20.0 wheel already has both (config/cache.py gpu_memory_utilization default 0.92; envs.py
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default "1"), though its log line says "default since v0.21.0";
# 0.19.0 has 0.9 and "0"
UTIL_092_SINCE = (0, 20)
CUDAGRAPH_ESTIMATE_SINCE = (0, 20)

# The sampler's part of the activation peak: derived from vLLM's code per release (sampler.py). Non-torch memory
# charged to the budget (docs/research-vllm.md section 2): fitted sizes, in fitted.py (with the logs each was fitted on; benchmarks/crossval.py refits them without one
# source to judge it), plus at TP > 1 the collective buffers computed from FlashInfer's and NCCL's code
# (collectives.py: the all-reduce fusion workspace, NVLS). 0.33's new bookkeeping (free memory at init minus free
# after profiling) charges the same growth as 0.10+.
# MoE: the fused-MoE kernel's intermediate buffers (gate/up output and activation, tokens x top-k x expert
# width, here tokens x mlp_width / tp x 3 values x the activation dtype) stay allocated while the sampler
# runs (assumed: the 0.19.0 MoE logs peak 0.2-0.5 GiB above the sampler alone: Qwen3-30B-A3B 2.68 GiB,
# DeepSeek-V2-Lite 1.93, Qwen1.5-MoE 2.47, Llama-4-Scout TP4 3.19, Mixtral TP2 1.21). gpt-oss (MXFP4
# kernels) logs no such excess (2.87 GiB, the sampler alone gives 2.97).
# Kimi-VL (kimi_vl) runs DeepSeek-V3's MoE text model (vLLM kimi_vl.py: DeepseekV2Model); Qwen3-VL-MoE runs
# Qwen3-MoE's (qwen3_vl_moe.py: Qwen3MoeLLMModel)
MOE_MODEL_TYPES = frozenset({"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "kimi_vl", "llama4",
                             "qwen3_vl_moe", "glm4_moe", "qwen3_next", "kimi_k2", "minimax", "dbrx", "phimoe", "olmoe"})
MOE_WORKSPACE_VALUES = 3


# vLLM's main model skips the checkpoint's MTP layers; its MTP proposer loads them (vllm 0.33
# model_executor/models/deepseek_v2.py load_weights: get_spec_layer_idx_from_weight_name -> continue;
# glm4_moe.py: skip_spec_layers; qwen3_next.py: WeightsMapper drops "mtp.")
MTP_NOT_LOADED = "vLLM does not load without MTP speculation (deepseek_v2.py load_weights)"



def non_torch_bytes(version: Version, tp: int, pp: int, gpu_name: str = "", hidden: int = 0, tokens: int = 0,
                    enforce_eager: bool = False, dp: int = 1,
                    field: tuple[str, str] | None = None) -> tuple[int, str]:
    """The fitted size for this release and parallelism (``field``: the engine's, variant.py; default the
    release's engine), plus (TP > 1, growth bands) the collective buffers computed from FlashInfer's and NCCL's
    code (collectives.py)."""
    name, how = field or fitted.non_torch_field(version, tp, pp)
    size = getattr(fitted.FIT, name)
    extra, parts = computed_non_torch(version, tp, pp, gpu_name, hidden, tokens, enforce_eager, dp, name)
    comm = second_communicator(version, tp, name)
    if comm:  # 0.10.x: vLLM's own NCCL communicator too (collectives.py item 3b): counted from code, sized by fit
        parts = [(f"{comm / (1 << 20):,.0f} MiB fitted: vLLM's own NCCL communicator, as large as torch's (after "
                  "the init snapshot before 0.11: gpu_worker.py init_device)"), *parts]
    if not extra and not comm:
        return size, how
    return size + comm + extra, f"{how}: {size / (1 << 20):,.0f} MiB fitted + " + " + ".join(parts)


def second_communicator(version: Version, tp: int, field: str) -> int:
    """Bytes of vLLM's own NCCL communicator where the init snapshot precedes it (0.10.x, TP > 1): one more
    communicator like torch's, the fitted TP > 1 growth less TP 1's (collectives.py item 3b)."""
    if field != "non_torch_tp":
        return 0
    return collectives.vllm_communicators_after_snapshot(version, tp) * max(
        0, fitted.FIT.non_torch_tp - fitted.FIT.non_torch_tp1)


def computed_non_torch(version: Version, tp: int, pp: int, gpu_name: str, hidden: int, tokens: int,
                       enforce_eager: bool = False, dp: int = 1, field: str | None = None) -> tuple[int, list[str]]:
    """The part of the non-torch growth computed rather than fitted (0 outside the TP > 1 growth bands; the V0
    engine's fitted growth holds its collectives: ``field``, default the release's engine's)."""
    if (field or fitted.non_torch_field(version, tp, pp)[0]) != "non_torch_tp":
        return 0, []
    terms = (collectives.fusion_workspace(version, tp, pp, gpu_name, hidden, tokens, enforce_eager, dp),
             collectives.nvls_buffers(version, tp, gpu_name),
             collectives.custom_allreduce_buffers(version, tp, gpu_name))
    return sum(b for b, _ in terms), [how for b, how in terms if b]


def sampler_bytes_per_logit(version: Version, rows: int = 1024) -> float:
    return sampler.bytes_per_logit(version, rows)[0]


def moe_workspace_bytes(spec: ModelSpec, tokens: int, tp: int) -> int:
    if spec.model_type not in MOE_MODEL_TYPES or not spec.mlp_width:
        return 0
    return tokens * spec.mlp_width * MOE_WORKSPACE_VALUES * spec.dtype_bytes // tp


def default_util(version: Version) -> float:
    return 0.92 if version >= UTIL_092_SINCE else 0.90


def default_batched_tokens(total_bytes: int, version: Version, max_model_len: int, gpu_name: str = "",
                           usage_context: UsageContext = "serve") -> int:
    return batch_defaults(total_bytes, gpu_name, version, max_model_len, usage_context).max_num_batched_tokens


def default_max_num_seqs(total_bytes: int, version: Version, gpu_name: str = "",
                         usage_context: UsageContext = "serve") -> int:
    return batch_defaults(total_bytes, gpu_name, version, 1 << 20, usage_context).max_num_seqs


def budget(spec: ModelSpec, total_bytes: int, tp: int, pp: int, version: Version, demand: Demand,
           settings: Settings) -> GpuBudget:
    max_model_len = demand.max_model_len
    # V0 or V1 (the rules below that differ live on it): given, else the release's default on this GPU
    engine = variant.chosen(version, settings.vllm_engine, demand.gpu_name)
    # a path the release (or a ROCm GPU) cannot take, before anything is planned
    sampler.check(version, settings.vllm_sampler, not is_rocm(demand.gpu_name))
    util = settings.gpu_memory_utilization or default_util(version)
    chosen = engine.batch(total_bytes, demand.gpu_name, version, max_model_len, settings.usage_context)
    seqs = settings.max_num_seqs or chosen.max_num_seqs
    tokens = settings.max_num_batched_tokens or engine.profiled_tokens(chosen.max_num_batched_tokens, seqs,
                                                                       max_model_len, version)
    defaults: dict[str, float | int | str] = {"gpu_memory_utilization": util, "max_num_batched_tokens": tokens,
                                              "max_num_seqs": seqs}
    engine_note = engine.note(version)
    if engine_note:  # V0 at a release whose default is V1: said in the output, and in JSON
        defaults["vllm_engine"] = engine.name
    entry = f"vLLM started by {'the LLM class' if settings.usage_context == 'llm' else '`vllm serve`'}"
    batch_note = (f"{entry}: max_num_batched_tokens {tokens:,}, max_num_seqs {seqs:,} ({chosen.why})",) \
        if settings.max_num_batched_tokens is None or settings.max_num_seqs is None else ()
    requested = math.ceil(total_bytes * util)
    items = [MemoryItem("budget", requested, "given" if settings.gpu_memory_utilization else "computed",
                        f"ceil(total x {util:g})")]
    weights = weights_per_gpu(spec, tp * pp, settings, MTP_NOT_LOADED)
    # --- weight offload (--cpu-offload-gb): see budgets/base.py weights_on_gpu ---
    if settings.cpu_offload_bytes:
        from kvplan.budgets.base import weights_on_gpu

        embedding = (spec.vocab_size or 0) * (spec.hidden_size or 0) * spec.dtype_bytes // tp
        weights = weights_on_gpu(weights, settings.cpu_offload_bytes, embedding)
    # --- end weight offload ---
    items.append(weights)
    if settings.kv_cache_memory_bytes is not None:
        items.append(MemoryItem("kv_cache", settings.kv_cache_memory_bytes, "given", "--kv-cache-memory"))
        return GpuBudget(total_bytes, tuple(items), settings.kv_cache_memory_bytes, defaults,
                         ("--kv-cache-memory given: vLLM skips memory profiling",))
    # the sampler runs on the last pipeline stage; vLLM sizes the pool by the worker with the least room
    rows = min(seqs, tokens)
    which, why = runner.chosen(version, spec, demand.proposer, pp, settings.model_runner)
    # under Model Runner V2 too: its own sampler holds less (runner.py), but kvplan's forward model falls short
    # of V2's logged peaks, so the V1 runner's larger figure stands in (docs/research-vllm-runner.md)
    per_logit, sampler_how, buffer, buffer_how = engine.sampler(version, rows, spec.vocab_size or 32000,
                                                               demand.gpu_name, settings.vllm_sampler)
    act, how = activation_bytes(spec, tokens, tp, rows, per_logit, moe_workspace_bytes(spec, tokens, tp) + buffer,
                                engine.forward_per_token(spec, tp))
    how = f"{how}; sampler: {sampler_how}" + (f"; {buffer_how}" if buffer_how else "")
    # the multimodal encoder's dummy batch, profiled before the text run (encoder_profile.py)
    mm_notes: tuple[str, ...] = ()
    if may_have_tower(spec.model_type, spec.id):  # a text model's plan imports no tower table
        from kvplan.engines.vllm import encoder_profile

        act, how, mm_notes = encoder_profile.add(act, how, spec, tokens, seqs, max_model_len, tp, engine.name, which,
                                                 settings.language_model_only, version)
    non_torch, nt_how = non_torch_bytes(version, tp, pp, demand.gpu_name, spec.hidden_size or 0, tokens,
                                        settings.enforce_eager, demand.dp, engine.non_torch_field(version, tp, pp))
    cudagraph, cg_how = cudagraph_estimate(spec, tp, pp, seqs, tokens, demand.gpu_name)
    # measured items (a calibration read from an engine log, kvplan.logs) replace kvplan's estimates
    tags = {"activation": f"profile peak, {how}", "non_torch": nt_how,
            "cudagraph": f"vLLM >= 0.20 subtracts its CUDA-graph estimate; {cg_how}"}
    values = {"activation": act, "non_torch": non_torch, "cudagraph": cudagraph}
    for name in values:
        measured = getattr(settings, f"{name}_bytes")
        if measured is not None:
            values[name], tags[name] = measured, "measured (calibration)"
    # Model Runner V2 subtracts no CUDA-graph figure before 0.29 (runner.py)
    subtract_graphs = runner.subtracts_graphs(version, which, CUDAGRAPH_ESTIMATE_SINCE) and not settings.enforce_eager
    for name in ("activation", "non_torch", "cudagraph"):
        if name != "cudagraph" or subtract_graphs:
            measured = tags[name] == "measured (calibration)"
            items.append(MemoryItem(name, values[name], "given" if measured else "assumed", tags[name]))
    act, non_torch = values["activation"], values["non_torch"]
    cudagraph = values["cudagraph"] if subtract_graphs else 0
    kv = requested - weights.bytes - act - non_torch - cudagraph
    if settings.device_used_bytes and engine.counts_others(version):  # device.py: these count every process's memory
        kv -= settings.device_used_bytes
        items.append(MemoryItem("other_processes", settings.device_used_bytes, "given",
                                "held by other processes at start-up: this release counts it as its own"))
    items.append(MemoryItem("kv_cache", kv, "computed", "budget - weights - activation - non_torch - cudagraph"))
    estimated = [n.replace("_", "-") for n in values
                 if tags[n] != "measured (calibration)" and (n != "cudagraph" or subtract_graphs)]
    graphs_after = which == "v2" and not subtract_graphs and version >= CUDAGRAPH_ESTIMATE_SINCE \
        and not settings.enforce_eager
    runner_note = ((f"vLLM runs this model on Model Runner V2 ({why}): before 0.29 it captures its CUDA graphs "
                    "after sizing the KV cache and subtracts no estimate (set VLLM_USE_V2_MODEL_RUNNER=0, or "
                    "--model-runner v1, for the other runner)"),) if graphs_after else ()
    notes: tuple[str, ...] = (f"vLLM {', '.join(estimated)} memory: kvplan's estimates; vLLM logs 'Available KV cache memory' at "
             "start-up: pass it as --kv-cache-memory, or calibrate from the log (kvplan log --save), to plan "
             "exactly",) if estimated else ()
    # which top-k/top-p path the estimated activation takes, where it is given or rests on flashinfer (sampler.py)
    said = (engine.sampler_note(version, rows, settings.vllm_sampler, demand.gpu_name) if "activation" in estimated
            else None)
    notes = ((said,) if said else ()) + notes
    notes = (mm_notes if "activation" in estimated else ()) + notes
    # measured items (a calibration) leave the error of the rest: the cross-validated band bounds the whole
    whole = len(estimated) == 3 or (len(estimated) == 2 and not subtract_graphs)
    error = fitted.kv_error(version, engine.band(version)) if whole else None
    return GpuBudget(total_bytes, tuple(items), kv, defaults, (*engine_note, *batch_note, *runner_note, *notes),
                     error)
