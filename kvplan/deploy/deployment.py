"""What every reader (kvplan file, Kubernetes, compose, Helm, shell) turns a deployment into.

Each value keeps the line it came from and how it was written (``--max-model-len``,
``engine.max_model_len``), so that a finding points at the exact place to change.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any


from kvplan.engines import DEFAULT_ENGINE
from kvplan.record import dataclass, field

#: Engine settings a deployment may carry (kvplan's names).
SETTINGS = ("tp", "pp", "dp", "max_model_len", "max_num_seqs", "gpu_memory_utilization", "kv_cache_dtype",
            "max_num_batched_tokens", "block_size", "enforce_eager", "mem_fraction_static", "kv_cache_memory",
            "free_gpu_memory_fraction", "weights_bytes")
#: Requirements a deployment may state.
REQUIREMENTS = ("min_concurrency", "at_context", "min_context", "headroom", "max_num_seqs_reachable", "shared_prefix",
                "n")


@dataclass
class Value:
    """A setting as written: the parsed value, its line, and how the input spells it."""

    value: Any
    line: int | None
    spelled: str
    raw: str | None = None


@dataclass
class Unknown:
    """A value kvplan cannot know (an environment substitution left unresolved)."""

    spelled: str
    raw: str
    line: int | None
    names: tuple[str, ...] = ()


@dataclass
class Deployment:
    name: str
    file: str
    line: int | None
    source: str
    """kvplan, kubernetes, compose, helm or shell."""
    model: Value | None = None
    """A model id / path (str) or an inline spec (dict)."""
    base_dir: str = "."
    """The directory of the file it was read from, named as ``str(Path(file).parent)`` names it."""
    gpus: list[Value] = field(default_factory=list)
    """GPU type(s) the deployment may land on: each is checked."""
    gpu_count: Value | None = None
    """GPUs it gets (all pods of a group together); None: not stated."""
    engine: str = DEFAULT_ENGINE
    engine_version: Value | None = None
    image: str | None = None
    """The engine's container image, where the file names it (the engine's ``image_settings`` read it)."""
    settings: dict[str, Value] = field(default_factory=dict)
    requirements: dict[str, Value] = field(default_factory=dict)
    unknowns: list[Unknown] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    host_memory: Value | None = None
    """Host memory (bytes) one pod / container may use: its memory limit; None: not stated."""
    pods: int = 1
    devices: Value | None = None
    """The GPUs it is pinned to (compose ``device_ids``, a kvplan file's ``gpu.devices``), a sorted tuple of their
    names; deployments of one file pinned to the same GPUs share them (``deploy/shared.py``). None: not stated."""
    """Pods the deployment's GPUs are spread over (a LeaderWorkerSet's size)."""

    def setting(self, key: str, default: Any = None) -> Any:
        v = self.settings.get(key)
        return default if v is None else v.value

    def line_of(self, key: str) -> int | None:
        v = self.settings.get(key) or self.requirements.get(key)
        if v is not None and v.line is not None:
            return v.line
        return self.model.line if self.model is not None and self.model.line is not None else self.line

    def spelled(self, key: str) -> str:
        v = self.settings.get(key) or self.requirements.get(key)
        return v.spelled if v is not None else key.replace("_", "-")


# ------------------------------------------------------------------ annotations / labels (k8s, compose, helm)

ANNOTATION_PREFIXES = ("kvplan/", "kvplan.io/", "kvplan.dev/")
_ANNOTATION_KEYS = {
    "gpu": "gpu", "model": "model", "engine-version": "engine_version",
    "min-concurrency": "min_concurrency", "at-context": "at_context", "min-context": "min_context",
    "headroom": "headroom", "max-num-seqs-reachable": "max_num_seqs_reachable", "shared-prefix": "shared_prefix",
    "n": "n",
}


def kvplan_annotations(mapping: Any) -> dict[str, tuple[str, int | None, str]]:
    """``kvplan/gpu: H100`` style keys of an annotations / labels mapping (or a compose label list):
    kvplan name -> (text, line, key as written)."""
    out: dict[str, tuple[str, int | None, str]] = {}
    if isinstance(mapping, list):  # compose: ["kvplan/gpu=H100", ...]
        items = []
        for i, entry in enumerate(mapping):
            if isinstance(entry, str) and "=" in entry:
                k, _, v = entry.partition("=")
                line = mapping.lines[i] if hasattr(mapping, "lines") else None
                items.append((k.strip(), v.strip(), line))
    elif isinstance(mapping, dict):
        items = [(str(k), v, mapping.lines.get(k) if hasattr(mapping, "lines") else None)
                 for k, v in mapping.items()]
    else:
        return out
    for key, value, line in items:
        for prefix in ANNOTATION_PREFIXES:
            if key.startswith(prefix) and key[len(prefix):] in _ANNOTATION_KEYS:
                out[_ANNOTATION_KEYS[key[len(prefix):]]] = (str(value).strip(), line, key)
    return out
