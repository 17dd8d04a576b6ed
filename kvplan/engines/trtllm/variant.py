"""TensorRT-LLM's two backends, the prebuilt TensorRT engine (the C++ runtime, ``TrtGptModelInflightBatching``) and
the PyTorch backend (``PyExecutor``, ``tensorrt_llm/_torch/``): which one a deployment runs, and the budget rule each
brings. Read from NVIDIA/TensorRT-LLM:

- The PyTorch backend ships from 0.17.0 (docs/source/release-notes.md, 0.17.0: "The PyTorch workflow is an
  experimental feature in ``tensorrt_llm._torch``"), chosen with ``LLM(backend="pytorch")``, ``trtllm-serve
  --backend pytorch`` or ``trtllm-bench ... --backend pytorch``. It became the default of the LLM API, trtllm-serve
  and trtllm-bench in 1.0 (release notes 1.0, API changes: "Promote PyTorch to be the default LLM backend",
  "Change default backend to PyTorch in trtllm-serve"; benchmark: "Update trtllm-bench to support new Pytorch
  default"). Before 1.0 a command without ``--backend`` builds or loads a TensorRT engine.
- Its KV pool, from its first release: ``py_executor_creator.py`` ``create_py_executor`` calls
  ``estimate_max_kv_cache_tokens`` before it creates the serving ``KVCacheManager`` (the 0.17-era file already
  does; 0.19 release notes: "Enabled PyExecutor inference flow to estimate max_num_tokens for kv_cache_manager").
  In the 0.19 - 0.21 ``_util.py`` it runs dummy context requests of ``max_num_tokens`` (default 8,192) through the
  executor (CUDA graphs and all), then ``cal_max_tokens``: ``fraction x (total - peak + the dry run's own KV)``,
  the peak being torch's allocation peak plus the memory used outside torch (NCCL, CUDA graphs). No runtime buffers
  or decoder sized by max_batch_size x vocabulary are held before it: kvplan's 1.0+ rule (budget.py) is this one.

So ``pytorch`` at 0.17 - 0.21 is planned by the 1.0+ rule; ``engine`` at any release by the C++ runtime's
(runtime.py); the default is the release's.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Literal

from kvplan.engines.version import Version, render_version
from kvplan.errors import UsageError
from kvplan.record import dataclass

if TYPE_CHECKING:  # an alias for type checkers only (typing is not imported at run time)
    BackendName = Literal["pytorch", "engine"]

PYTORCH_SINCE = (0, 17)  # tensorrt_llm/_torch: the PyTorch workflow (release notes 0.17.0)
PYTORCH_DEFAULT_SINCE = (1, 0)  # release notes 1.0: the PyTorch backend is the LLM API's and trtllm-serve's default
FIELD = "trtllm_backend"


@dataclass(frozen=True)
class PyTorchBackend:
    """``PyExecutor``: the KV pool is the fraction of what is free after a warm-up forward of max_num_tokens."""

    name: BackendName = "pytorch"
    prebuilt_engine: bool = False

    def note(self, version: Version) -> tuple[str, ...]:
        if version >= PYTORCH_DEFAULT_SINCE:
            return ()
        return (f"TensorRT-LLM {render_version(version)} with the PyTorch backend (--backend pytorch): planned by "
                "its own rule, the fraction of the memory free after a warm-up of max_num_tokens "
                "(_util.py estimate_max_kv_cache_tokens), with no engine runtime buffers or decoder",)


@dataclass(frozen=True)
class EngineBackend:
    """A prebuilt TensorRT engine run by the C++ runtime: the buffers and the decoder come before the KV pool."""

    name: BackendName = "engine"
    prebuilt_engine: bool = True

    def note(self, version: Version) -> tuple[str, ...]:
        if version < PYTORCH_DEFAULT_SINCE:
            return ()
        return (f"TensorRT-LLM {render_version(version)} with a prebuilt TensorRT engine (--backend tensorrt): "
                "planned by the C++ runtime's rule, runtime buffers and decoder sized by the build",)


PYTORCH, ENGINE = PyTorchBackend(), EngineBackend()
Backend = PyTorchBackend | EngineBackend


def chosen(version: Version, given: str | None) -> Backend:
    """The backend a deployment of this release runs: the one given (``--trtllm-backend``, ``--backend``), else the
    release's default. The PyTorch backend before its first release is refused, by name."""
    if given is None:
        return PYTORCH if version >= PYTORCH_DEFAULT_SINCE else ENGINE
    if given not in ("pytorch", "engine"):
        raise UsageError(f"'{given}': choose pytorch or engine", field=FIELD)
    if given == "engine":
        return ENGINE
    if version < PYTORCH_SINCE:
        raise UsageError(f"TensorRT-LLM {render_version(version)} has no PyTorch backend (tensorrt_llm._torch "
                         "ships from 0.17.0)", field=FIELD)
    return PYTORCH
