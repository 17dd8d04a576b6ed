"""vLLM's scheduler defaults: ``max_num_batched_tokens`` and ``max_num_seqs`` when the user gave none.

Computed from vLLM's code (docs/research-vllm.md section 1):
- 0.10 to 0.33: ``vllm/engine/arg_utils.py`` ``EngineArgs._set_default_args_v1`` (0.10/0.11) and
  ``EngineArgs.get_batch_defaults`` (later), a table by GPU total memory and name, per usage context
  (``vllm serve`` = OPENAI_API_SERVER, the ``LLM`` class = LLM_CLASS); a defaulted token budget is capped
  at ``max_num_seqs x max_model_len``.
- 0.8 / 0.9 (V1 engine, 0.8.5 ``_set_default_args_v1``): the >= 70 GiB tier had no A100 exception and
  ``max_num_seqs`` is 1024 / 256 for every context.
- before 0.8 (V0, 0.8.5 ``_set_default_args_v0`` + ``SchedulerConfig.__post_init__``): chunked prefill on
  only above 32,768 tokens of context (then 2048 tokens), else ``max(max_model_len, 2048)``; 256 sequences.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Literal

from kvplan.budgets.base import GIB
from kvplan.engines.version import Version
from kvplan.record import dataclass

if TYPE_CHECKING:  # a type: no typing at run time
    UsageContext = Literal["serve", "llm"]

V1_SINCE = (0, 8)  # V1 became the default engine in v0.8
A100_EXCEPTION_SINCE = (0, 10)  # present in 0.10.1.1, absent in 0.8.5
TOP_TIER_SINCE = (0, 12)  # the >= 160 GiB tier: absent in 0.10.1.1/0.11.0, present in 0.19.0 and 0.33.0 (assumed 0.12)
V0_CHUNKED_ABOVE = 32768  # V0 switched chunked prefill on above this max_model_len (CUDA)
V0_CHUNKED_TOKENS = 2048  # _DEFAULT_MAX_NUM_BATCHED_TOKENS of V0


@dataclass(frozen=True)
class BatchDefaults:
    max_num_batched_tokens: int
    max_num_seqs: int
    why: str
    """Which rule chose them, said in the output."""


def _is_a100(gpu_name: str) -> bool:
    return "a100" in gpu_name.lower()


def _is_gb10(gpu_name: str) -> bool:
    # vLLM tests compute capability 12.1 (DGX Spark GB10); kvplan only knows the name
    # the pattern (nvidia[ -])?gb10\b at the start of the name, without importing re (~6 ms a start)
    name = gpu_name.lower()
    if name.startswith(("nvidia ", "nvidia-")) and name[7:11] == "gb10":
        name = name[7:]
    return name.startswith("gb10") and not (name[4:5].isalnum() or name[4:5] == "_")


def is_rocm(gpu_name: str) -> bool:
    """An AMD Instinct or Radeon card: vLLM's ROCm platform (kvplan knows the GPU by its name only)."""
    name = gpu_name.lower()
    # the pattern (amd[ -])?(instinct[ -])?mi\d{3} at the start of the name, without importing re (~6 ms a start)
    rest = name[4:] if name.startswith(("amd ", "amd-")) else name
    rest = rest[9:] if rest.startswith(("instinct ", "instinct-")) else rest
    return (rest.startswith("mi") and len(rest) >= 5 and rest[2:5].isdecimal()) or "radeon" in name


def v0_batch_defaults(max_model_len: int, gpu_name: str = "") -> BatchDefaults:
    """The V0 engine's (the same from 0.7 to 0.10.2: variant.py). Chunked prefill comes on above 32K only on CUDA
    (0.6.6 / 0.7.3 ``EngineArgs.create_engine_config``: ``not current_platform.is_rocm()``; 0.8.5 / 0.10.1
    ``_set_default_args_v0``: ``is_gpu = current_platform.is_cuda()``): on ROCm the profile runs the whole
    context."""
    if max_model_len > V0_CHUNKED_ABOVE and not is_rocm(gpu_name):
        return BatchDefaults(V0_CHUNKED_TOKENS, 256, f"V0: chunked prefill on above {V0_CHUNKED_ABOVE:,} tokens")
    if max_model_len > V0_CHUNKED_ABOVE:
        return BatchDefaults(max_model_len, 256, f"V0 on ROCm: chunked prefill stays off, CUDA only turns it on "
                                                 f"above {V0_CHUNKED_ABOVE:,} tokens; max_model_len")
    return BatchDefaults(max(max_model_len, 2048), 256, "V0: no chunked prefill, max(max_model_len, 2048)")


def batch_defaults(total_bytes: int, gpu_name: str, version: Version, max_model_len: int,
                   usage_context: UsageContext = "serve") -> BatchDefaults:
    """The (tokens, sequences) vLLM picks when neither is given."""
    if version < V1_SINCE:
        return v0_batch_defaults(max_model_len, gpu_name)
    gib = total_bytes / GIB
    llm = usage_context == "llm"
    if version >= TOP_TIER_SINCE and gib >= 160:
        tokens, seqs, tier = 16384, 1024, ">= 160 GiB"
    elif gib >= 70 and not (version >= A100_EXCEPTION_SINCE and (_is_a100(gpu_name) or _is_gb10(gpu_name))):
        tokens, seqs, tier = (16384 if llm else 8192), 1024, ">= 70 GiB"
    else:
        tokens, seqs = (8192 if llm else 2048), 256
        tier = "A100" if gib >= 70 else "< 70 GiB"
    if version < A100_EXCEPTION_SINCE:
        seqs = 1024 if gib >= 70 else 256  # 0.8.5: the same for every usage context
    capped = min(tokens, seqs * max_model_len)
    entry = "LLM class" if llm else "vllm serve"
    return BatchDefaults(capped, seqs, f"{tier} GPU, {entry}" + (" (capped at max_num_seqs x max_model_len)"
                                                                 if capped < tokens else ""))


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, model_type: str, gpu_name: str,
                  decode_tokens: int = 1) -> int:
    """How many CUDA-graph batch sizes vLLM captures per mode (``VllmConfig._set_cudagraph_sizes``):
    1, 2, 4, every 8 to 248, every 16 above, up to min(2 x max_num_seqs x decode length, 512) (1024 on
    SM100 Blackwell, and for gpt-oss: ``GptOssForCausalLMConfig.verify_and_update_config``), at most
    max_num_batched_tokens."""
    top = 1024 if model_type == "gpt_oss" or _is_sm100(gpu_name) else 512
    largest = min(2 * max_num_seqs * decode_tokens, top, max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= largest]
    sizes += list(range(8, min(largest, 248) + 1, 8)) + list(range(256, largest + 1, 16))
    return len(sizes)


def _is_sm100(gpu_name: str) -> bool:
    name = gpu_name.upper()
    return name.startswith(("B200", "B300", "GB200", "GB300"))
