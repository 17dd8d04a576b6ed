"""vLLM's two engines, V0 (``vllm/worker/``, ``vllm/engine/llm_engine.py``) and V1 (``vllm/v1/``): which one a
deployment runs, and the budget rules each brings. Read from the release wheels (file:line of that release):

- V1 is the default from 0.8.0 (``envs.py`` VLLM_USE_V1 default "1": 0.8.0:523; "0" in 0.7.3). Up to 0.10.2 V0
  still runs with ``VLLM_USE_V1=0``, or where vLLM falls back to it for a feature V1 lacks
  (``EngineArgs._is_v1_supported_oracle``, 0.8.5 ``engine/arg_utils.py``:1292; e.g. ROCm in 0.8.5: "Falling back
  to V0 Engine"). 0.11.0 has no ``vllm/worker/worker.py``: V0 is gone.
- V0's KV budget is the same code from 0.7.3 to 0.10.2: ``worker.py`` ``determine_num_available_blocks``
  (0.7.3:205, 0.8.5:225, 0.9.2:232, 0.10.1.1:233; 0.10.2 ``determine_available_kv_cache_memory``:233) runs
  ``memory_profiling`` from the ``baseline_snapshot`` that ``init_device`` takes before
  ``init_worker_distributed_environment`` (0.7.3:161, 0.8.5:181, 0.9.2:188, 0.10.1.1:189, 0.10.2:190):
  KV = total x util - weights - torch peak increase - non-torch growth since that snapshot (``utils.py``
  ``memory_profiling`` 0.8.5:2245-2249; 0.9.2 ``utils/__init__.py``:2476-2480; 0.10.1.1:2740-2744). No CUDA-graph
  figure is subtracted and the free memory is not checked.
- Its profile: ``model_runner.py`` ``profile_run`` runs max_num_seqs prompts of max_num_batched_tokens in all,
  sampled with ``SamplingParams(top_p=0.99, top_k=vocab - 1)`` (0.8.5:1233-1268, 0.9.2:1296-1331,
  0.10.1.1:1200-1235) by ``model_executor/layers/sampler.py``'s sort (FlashInfer only with
  VLLM_USE_FLASHINFER_SAMPLER=1, whose default is unset: sort at 0.8.5:392, 0.9.2:403, 0.10.1.1:397).
- Its batch defaults: ``_set_default_args_v0`` (``arg_utils.py`` 0.8.5:1501, 0.9.2:1507, 0.10.1.1:1522,
  0.10.2:1566): 256 sequences, chunked prefill only above 32,768 tokens; then ``SchedulerConfig`` takes
  max(max_model_len, 2048) tokens, capped from 0.9 at max_num_seqs x max_model_len (0.9.2 ``config.py``:2277).

So V0 at 0.8-0.10 is planned by V0 0.7's rules; its errors are judged in their own release band (fitted.py).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Literal

from kvplan.engines.version import Version, render_version
from kvplan.engines.vllm import defaults, fitted, sampler
from kvplan.errors import UsageError
from kvplan.record import dataclass
from kvplan.spec import ModelSpec

if TYPE_CHECKING:  # a type: no typing at run time
    EngineName = Literal["v0", "v1"]

V1_DEFAULT_SINCE = defaults.V1_SINCE  # (0, 8)
V0_REMOVED_IN = (0, 11)  # no vllm/worker/worker.py in the 0.11.0 wheel
V0_CAPPED_SINCE = (0, 9)  # SchedulerConfig caps a defaulted token budget at max_num_seqs x max_model_len
# Off CUDA, V1 was not the default at first: EngineArgs._is_v1_supported_oracle falls back to V0 ("rocm is experimental
# on VLLM_USE_V1=1. Falling back to V0 Engine.") for non-CUDA platforms in 0.8.0 / 0.8.5 (``not_cuda``) and for
# non-[CUDA, TPU, x86 CPU] in 0.9.0 / 0.9.1 (``v0_hardware``); 0.9.2 asks ``current_platform.default_v1``, which ROCm
# answers True (platforms/rocm.py supports_v1)
ROCM_V1_DEFAULT_SINCE = (0, 9, 2)
# MLPs with one up projection and no gate (fc1 -> activation -> fc2: 0.7.2 models/gpt2.py GPT2MLP, phi.py PhiMLP,
# falcon.py FalconMLP, starcoder2.py Starcoder2MLP, ...); every other dense family gates (gate_up -> SiluAndMul)
NON_GATED_MLP = frozenset({"gpt2", "gpt_bigcode", "gptj", "gpt_neox", "phi", "falcon", "opt", "bloom", "mpt",
                           "starcoder2", "persimmon"})
# MLPs whose gate/up output keeps its own name through down_proj (0.6.6-0.10.1 models/qwen2.py Qwen2MLP.forward:
# ``gate_up, _ = ...; x = self.act_fn(gate_up); x, _ = self.down_proj(x)``; qwen3.py imports Qwen2MLP)
KEEPS_GATE_UP = frozenset({"qwen2", "qwen3"})


@dataclass(frozen=True)
class V1Engine:
    """The V1 engine (the default from 0.8): ``vllm/v1/worker/gpu_worker.py``; rules by release elsewhere."""

    name: EngineName = "v1"

    def batch(self, total_bytes: int, gpu_name: str, version: Version, max_model_len: int,
              usage_context: defaults.UsageContext) -> defaults.BatchDefaults:
        return defaults.batch_defaults(total_bytes, gpu_name, version, max_model_len, usage_context)

    def profiled_tokens(self, chosen: int, seqs: int, max_model_len: int, version: Version) -> int:
        return min(chosen, seqs * max_model_len)  # the defaulted budget is capped (_set_default_args_v1)

    def sampler(self, version: Version, rows: int, vocab: int, gpu_name: str,
                given: str | None = None) -> tuple[float, str, int, str]:
        per_logit, how = sampler.bytes_per_logit(version, rows, given, not defaults.is_rocm(gpu_name))
        return (per_logit, how, *sampler.fixed_bytes(version, rows, vocab, gpu_name, given))

    def sampler_note(self, version: Version, rows: int, given: str | None, gpu_name: str = "") -> str | None:
        return sampler.note(version, rows, given, cuda=not defaults.is_rocm(gpu_name))

    def forward_per_token(self, spec: ModelSpec, tp: int) -> int | None:
        return None  # torch.compile plans the compiled graph's buffers: kvplan's calibrated profile (budgets/base.py)

    def non_torch_field(self, version: Version, tp: int, pp: int) -> tuple[str, str]:
        return fitted.non_torch_field(version, tp, pp)

    def band(self, version: Version) -> str:
        return fitted.release_band(version)

    def counts_others(self, version: Version) -> bool:
        # here: only a GPU shared with other processes asks (not every check imports the module)
        from kvplan.engines.vllm import device

        return device.counts_others(version)

    def note(self, version: Version) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class V0Engine:
    """The V0 engine: the only one before 0.8, chosen with VLLM_USE_V1=0 (or by vLLM's fallback) to 0.10."""

    name: EngineName = "v0"

    def batch(self, total_bytes: int, gpu_name: str, version: Version, max_model_len: int,
              usage_context: defaults.UsageContext) -> defaults.BatchDefaults:
        return defaults.v0_batch_defaults(max_model_len, gpu_name)

    def profiled_tokens(self, chosen: int, seqs: int, max_model_len: int, version: Version) -> int:
        return min(chosen, seqs * max_model_len) if version >= V0_CAPPED_SINCE else chosen

    def sampler(self, version: Version, rows: int, vocab: int, gpu_name: str,
                given: str | None = None) -> tuple[float, str, int, str]:
        if given == sampler.IMAGE:  # the image's flashinfer: V0's sampler takes it only when the variable asks
            given = None
        if given not in (None, "sort"):  # V0's sampler takes FlashInfer only with VLLM_USE_FLASHINFER_SAMPLER=1
            raise UsageError(f"'{given}' under vLLM's V0 engine: kvplan plans V0's sampler by its sort path only",
                             field="vllm_sampler")
        per_logit, how = sampler.sort_bytes_per_logit(rows, given == "sort")
        return per_logit, how, 0, ""

    def sampler_note(self, version: Version, rows: int, given: str | None, gpu_name: str = "") -> str | None:
        return "vLLM sampler: sort top-k/top-p in the profiling run (given)" if given not in (None, sampler.IMAGE) \
            else None

    def forward_per_token(self, spec: ModelSpec, tp: int) -> int | None:
        """The eager forward's peak per token (dense models; None for MoE, whose fused-MoE buffers budget.py
        adds): V0 runs the profile without torch.compile, so PyTorch frees a tensor only when the Python name
        holding it goes. At the MLP's activation (0.7.2 ``models/llama.py`` LlamaMLP.forward:89-93,
        ``models/qwen2.py`` Qwen2MLP.forward:94-98; the same in 0.6.6 and 0.8.5) four tensors are alive: the
        up projection's output (gate and up: 2 x width / tp; non-gated MLPs 1 x), the activation's output
        (width / tp), the residual and the MLP's input, which the decoder layer's name keeps until ``self.mlp``
        returns (hidden each). Qwen2MLP (Qwen3's too) names its gate/up output apart, so it is alive through
        ``down_proj`` as well: one hidden more, down_proj's output. The attention step holds less (q/k/v, its
        output and the two hidden-size tensors)."""
        if spec.num_experts or not spec.hidden_size or not spec.mlp_width:
            return None
        ups = 1 if spec.model_type in NON_GATED_MLP else 2
        hiddens = 3 if spec.model_type in KEEPS_GATE_UP else 2
        return ((ups + 1) * spec.mlp_width // tp + hiddens * spec.hidden_size) * spec.dtype_bytes

    def non_torch_field(self, version: Version, tp: int, pp: int) -> tuple[str, str]:
        return fitted.v0_non_torch_field(version, tp)

    def band(self, version: Version) -> str:
        return fitted.release_band(version) if version < V1_DEFAULT_SINCE else fitted.V0_AT_V1_BAND[1]

    def counts_others(self, version: Version) -> bool:
        from kvplan.engines.vllm import device

        return version < device.V0_BASELINE_SINCE  # 0.7+: the growth since its own baseline snapshot

    def note(self, version: Version) -> tuple[str, ...]:
        if version < V1_DEFAULT_SINCE:
            return ()
        return (f"vLLM V0 engine at {render_version(version)} (VLLM_USE_V1=0, or vLLM's fallback for a feature V1 "
                "lacks): V0's accounting, unchanged since 0.7 (worker.py determine_num_available_blocks): no "
                "CUDA-graph figure, V0's batch defaults and sampler",)


V0, V1 = V0Engine(), V1Engine()
Variant = V0Engine | V1Engine


def chosen(version: Version, given: str | None, gpu_name: str = "") -> Variant:
    """The engine a deployment of this release runs: the one given (``--vllm-engine``, VLLM_USE_V1), else the
    release's default on that GPU (V0 on ROCm before 0.9.2). A release without the one given is refused, by name."""
    if given is None:
        rocm_v0 = defaults.is_rocm(gpu_name) and version < ROCM_V1_DEFAULT_SINCE
        return V0 if version < V1_DEFAULT_SINCE or rocm_v0 else V1
    if given not in ("v0", "v1"):
        raise UsageError(f"'{given}': choose v0 or v1", field="vllm_engine")
    if given == "v0":
        if version >= V0_REMOVED_IN:
            raise UsageError(f"vLLM {render_version(version)} has no V0 engine (removed in 0.11.0)",
                             field="vllm_engine")
        return V0
    if version < V1_DEFAULT_SINCE:
        raise UsageError(f"vLLM {render_version(version)}: kvplan plans the V1 engine from 0.8, where it became the "
                         "default (before, V1 was an opt-in preview)", field="vllm_engine")
    return V1
