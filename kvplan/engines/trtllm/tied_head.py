"""A prebuilt TensorRT engine of a model whose lm_head is tied to its embedding holds the lm_head as its own copy.

The checkpoint stores one vocab x hidden matrix; TensorRT-LLM's checkpoint conversion writes two. Read in
NVIDIA/TensorRT-LLM:

- v0.8.0 examples/llama/convert_checkpoint.py and v0.9.0 tensorrt_llm/models/llama/convert.py and
  tensorrt_llm/models/qwen/convert.py: for ``tie_word_embeddings`` the embedding is written again as
  ``lm_head.weight`` (padded to the tensor-parallel size and split by vocabulary rows); the later Qwen converter
  (the Qwen3-era ``convert_hf_qwen``) clones it the same way.
- The engine shares the two only with ``share_embedding_table`` (``modeling_utils.optimize_model`` points the
  lm_head at the embedding's parameter), which the examples' ``--use_embedding_sharing`` sets and which is off by
  default; ``ModelWeightsLoader.check_share_embedding`` returns at once when it is off.
- Gemma is the exception: examples/gemma/convert_checkpoint.py forces ``use_embedding_sharing`` and
  tensorrt_llm/models/gemma/model.py ``GemmaForCausalLM`` asserts ``share_embedding_table``, both from
  "Update TensorRT-LLM (#1492)" (2024-04-24, the 0.10 line); the v0.9.0 Gemma converter still wrote the copy.
- The PyTorch backend shares them (tensorrt_llm/_torch/models/modeling_utils.py ``DecoderModelForCausalLM``
  points ``lm_head.weight`` at ``embed_tokens.weight``): it holds the checkpoint's one matrix, so this is the
  prebuilt engine's rule only.

Where the spec cannot say whether the head is tied (runtime_weights.tied_lm_head), nothing is added.
"""

from __future__ import annotations

from kvplan.budgets.base import MemoryItem
from kvplan.budgets.runtime_weights import tied_lm_head
from kvplan.engines.version import Version
from kvplan.spec import MODEL_DTYPE_BYTES, ModelSpec

TYPE_CHECKING = False  # as in the package's __init__: no typing import at run time
if TYPE_CHECKING:
    from kvplan.engines.trtllm.variant import Backend

GEMMA_SHARES_SINCE: Version = (0, 10)  # examples/gemma/convert_checkpoint.py forces the sharing (#1492)


def lm_head_copy_bytes(spec: ModelSpec, version: Version, tp: int) -> int:
    """Bytes of the engine's own lm_head on the last pipeline rank (kvplan plans the fullest rank): the padded
    vocabulary split over the tensor-parallel ranks, in the model dtype; 0 where the engine holds no copy."""
    if tied_lm_head(spec) is not True or not (spec.vocab_size and spec.hidden_size):
        return 0
    if spec.model_type.startswith("gemma") and version >= GEMMA_SHARES_SINCE:
        return 0
    from kvplan.engines.trtllm.runtime import padded_vocab  # here: most models hold no tied head

    rows = padded_vocab(spec.vocab_size, tp) // tp
    return rows * spec.hidden_size * MODEL_DTYPE_BYTES[spec.dtype]


def with_lm_head_copy(weights: MemoryItem, spec: ModelSpec, version: Version, tp: int, backend: Backend) -> MemoryItem:
    """The weights a deployment holds: a prebuilt engine's add its lm_head copy to the checkpoint's share, unless
    they were given (a logged engine size already holds it); the PyTorch backend's are the checkpoint's."""
    if weights.tag == "given" or not backend.prebuilt_engine:
        return weights
    extra = lm_head_copy_bytes(spec, version, tp)
    if not extra:
        return weights
    return MemoryItem(weights.name, weights.bytes + extra, weights.tag,
                      f"{weights.note} + {extra:,} B: the engine's own copy of the lm_head tied to the embedding "
                      "(TensorRT-LLM's checkpoint conversion writes it unless embedding sharing is on)")
