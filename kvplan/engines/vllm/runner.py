"""Which of vLLM's two GPU model runners a deployment runs, and what that changes in the KV budget.

vLLM V1 has two model runners: ``GPUModelRunner`` (``vllm/v1/worker/gpu_model_runner.py``, kvplan's "v1") and
Model Runner V2 (``vllm/v1/worker/gpu/model_runner.py``, "v2"). Read from each release's wheel
(docs/research-vllm-runner.md has the lines):

- Which one runs. ``envs.VLLM_USE_V2_MODEL_RUNNER`` picks it when set (0.12.0 - 0.21.0: default "0", so V1;
  0.22.0 on: default None, and ``VllmConfig.use_v2_model_runner`` (``config/vllm.py``) picks by model):
  0.22: V2 for ``Qwen3ForCausalLM`` only, dense and unquantized; 0.23: also Llama and Mistral; 0.24: those and
  the MoE DeepseekV2 / Qwen2Moe / GraniteMoe, quantized or not; 0.25 - 0.28: every dense model (not hybrid, not
  attention-free) and those three MoE; 0.29 on: every model. Each release then falls back to V1 for the
  features ``_get_v2_model_runner_unsupported_features`` lists: of those kvplan plans, hybrid/Mamba models
  (0.22 - 0.24), some speculative methods (ngram to 0.31, draft_model 0.22 - 0.30) and EAGLE3 with pipeline
  parallelism (0.22 - 0.29).
- The CUDA-graph term. Both runners go through ``gpu_worker.py Worker.determine_available_memory``, which
  subtracts ``model_runner.profile_cudagraph_memory()`` while VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is on.
  V2's returns 0 up to 0.28 ("It is TBD whether we keep this API or not"): its graphs are captured after the
  KV cache is sized and nothing is subtracted. From 0.29.0 it measures them (``gpu/cudagraph_utils.py
  profile_cudagraph_memory``: every PIECEWISE graph captured into a throwaway pool, the FULL ones sampled and
  extrapolated), and the worker subtracts that like V1's estimate.
- The sampler in the profiling run. V2's ``_dummy_sampler_run`` (0.18 - 0.32) samples with the states a
  request never set: top-k = vocabulary, top-p = 1, temperature 0, so ``get_top_k_top_p`` gives none, no sort
  or top-k/top-p kernel runs, and the Gumbel kernel keeps only per-block maxima: the peak is the logits in the
  model dtype. 0.33 adds a second pass with ``SamplingParams.for_sampler_warmup()`` (top-k 50, top-p 0.9,
  logprobs, penalties). Not used yet: with the logits alone, kvplan's forward-pass model (budgets/base.py
  ``activation_bytes``) falls 0.1 - 0.5 GiB short of the peak all four V2 logs print (0.26 - 0.31, four
  sources), which would plan more KV memory than vLLM finds; budget.py keeps the V1 runner's sampler figure
  under V2 until V2's forward peak is derived.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Literal

from kvplan.engines.version import Version, render_version
from kvplan.errors import UsageError
from kvplan.spec import ModelSpec, Recurrent

if TYPE_CHECKING:  # a type: no typing at run time
    Runner = Literal["v1", "v2"]

V2_SINCE = (0, 12)  # vllm/v1/worker/gpu/model_runner.py: in the 0.12.0 wheel, not in 0.11.2
AUTO_SINCE = (0, 22)  # envs.py VLLM_USE_V2_MODEL_RUNNER: default "0" to 0.21.0, None (chosen by model) from 0.22.0
EVERY_MODEL_SINCE = (0, 29)  # config/vllm.py 0.29.0: use_v2_model_runner has no architecture test left
V2_GRAPHS_PROFILED_SINCE = (0, 29)  # gpu/model_runner.py profile_cudagraph_memory returns 0 in 0.12.0 - 0.28.0

# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (config/vllm.py) as kvplan's model types; the architectures kvplan has
# no model of (Inkling, LongcatFlashNgram, KimiK3, DeepseekV4) are left out
_LISTED: tuple[tuple[Version, frozenset[str]], ...] = (
    ((0, 22), frozenset({"qwen3"})),
    ((0, 23), frozenset({"qwen3", "llama", "mistral"})),
    ((0, 24), frozenset({"qwen3", "llama", "mistral", "deepseek_v2", "qwen2_moe", "granitemoe"})),
    ((0, 25), frozenset({"deepseek_v2", "qwen2_moe", "granitemoe"})),
)
_DENSE_BY_DEFAULT_SINCE = (0, 25)  # _is_default_v2_model_runner_model: "... or not model_config.is_moe"
_LIST_ONLY_UNQUANTIZED = ((0, 22), (0, 24))  # 0.22/0.23: "not model_config.is_moe and not ..is_quantized"
_HYBRID_UNSUPPORTED = ((0, 22), (0, 25))  # "hybrid/mamba models" in the unsupported list, 0.22 - 0.24
_EAGLE3_PP_UNSUPPORTED = ((0, 22), (0, 30))
# speculative methods V2 does not run, by release (the unsupported list's speculative part)
_SPEC_UNSUPPORTED: tuple[tuple[Version, frozenset[str]], ...] = (
    ((0, 22), frozenset({"ngram", "draft_model"})),  # anything but eagle / eagle3 / mtp (/ dflash / dspark)
    ((0, 31), frozenset({"ngram"})),
    ((0, 32), frozenset()),  # only suffix / medusa / mlp_speculator / custom_class, none of kvplan's
)
_UNQUANTIZED = frozenset({None, "bfloat16", "float16", "float32"})


def _listed(version: Version) -> frozenset[str]:
    return [names for since, names in _LISTED if version >= since][-1]


def _between(version: Version, band: tuple[Version, Version]) -> bool:
    return band[0] <= version < band[1]


def default(version: Version, spec: ModelSpec, proposer: str | None, pp: int) -> tuple[Runner, str]:
    """The runner vLLM picks when VLLM_USE_V2_MODEL_RUNNER is not set, and why."""
    if version < AUTO_SINCE:
        return "v1", "VLLM_USE_V2_MODEL_RUNNER defaults to 0 before 0.22"
    moe = bool(spec.num_experts and spec.num_experts > 1)
    recurrent = [layer for layer in spec.layers if isinstance(layer, Recurrent)]
    hybrid = bool(recurrent) and len(recurrent) < len(spec.layers)
    if version < EVERY_MODEL_SINCE:
        listed = spec.model_type in _listed(version)
        if version >= _DENSE_BY_DEFAULT_SINCE:
            if recurrent and not listed:
                return "v1", ("Model Runner V2 is not the default for attention-free models" if not hybrid
                              else "Model Runner V2 is not the default for hybrid models")
            if moe and not listed:
                return "v1", "Model Runner V2 is the default for MoE models of listed architectures only"
        elif not listed:
            return "v1", f"Model Runner V2 is the default for listed architectures only ({spec.model_type} is not)"
        elif _between(version, _LIST_ONLY_UNQUANTIZED) and (moe or spec.weights_dtype not in _UNQUANTIZED):
            return "v1", "Model Runner V2 is the default for dense unquantized checkpoints only"
    if _between(version, _HYBRID_UNSUPPORTED) and recurrent:
        return "v1", "Model Runner V2 does not support hybrid/Mamba models yet"
    unsupported = [names for since, names in _SPEC_UNSUPPORTED if version >= since][-1]
    if proposer in unsupported:
        return "v1", f"Model Runner V2 does not support {proposer} speculative decoding yet"
    if proposer == "eagle3" and pp > 1 and _between(version, _EAGLE3_PP_UNSUPPORTED):
        return "v1", "Model Runner V2 does not support EAGLE3 with pipeline parallelism yet"
    return "v2", ("the default for every model from 0.29" if version >= EVERY_MODEL_SINCE
                  else f"the default for {spec.model_type} models in this release")


def chosen(version: Version, spec: ModelSpec, proposer: str | None, pp: int,
           given: str | None) -> tuple[Runner, str]:
    """The runner the deployment runs: the one given (VLLM_USE_V2_MODEL_RUNNER), else the release's default."""
    if given is None:
        return default(version, spec, proposer, pp)
    if given not in ("v1", "v2"):
        raise UsageError(f"'{given}': choose v1 or v2", field="model_runner")
    if given == "v2" and version < V2_SINCE:
        raise UsageError(f"vLLM {render_version(version)} has no Model Runner V2 (it came in 0.12)",
                         field="model_runner")
    return ("v2" if given == "v2" else "v1"), "given (VLLM_USE_V2_MODEL_RUNNER)"


def subtracts_graphs(version: Version, runner: Runner, estimate_since: Version) -> bool:
    """Whether determine_available_memory takes a CUDA-graph figure off the KV budget (eager aside)."""
    if version < estimate_since:
        return False
    return runner == "v1" or version >= V2_GRAPHS_PROFILED_SINCE
