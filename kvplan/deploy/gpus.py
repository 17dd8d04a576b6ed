"""GPU labels as clusters write them -> kvplan catalog entries.

Kubernetes' GPU feature discovery writes ``nvidia.com/gpu.product`` from the driver's product name with
spaces as dashes (``NVIDIA-H100-80GB-HBM3``, ``NVIDIA-A100-SXM4-80GB``, ``NVIDIA-L4``, ``Tesla-T4``),
adding ``-SHARED`` under time-slicing and ``-MIG-1g.10gb`` for MIG slices. GKE labels nodes with
``cloud.google.com/gke-accelerator`` (``nvidia-l4``, ``nvidia-h100-80gb``), Karpenter on AWS with
``karpenter.k8s.aws/instance-gpu-name`` (``a10g``). The catalog's own lookup (``find_gpu``) ignores
case, spaces, '-' and '_', so most product names are aliases already; the rest are rewritten here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kvplan.errors import UsageError
from kvplan.hardware import GPU, find_gpu
from kvplan.lazy_re import lazy_pattern

#: Node label keys that name the GPU product.
GPU_LABEL_KEYS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator",
                  "karpenter.k8s.aws/instance-gpu-name", "gpu.nvidia.com/model")

_GKE = {
    "nvidia-tesla-t4": "T4", "nvidia-tesla-v100": "V100-SXM2-16GB", "nvidia-tesla-a100": "A100-SXM4-40GB",
    "nvidia-a100-80gb": "A100-SXM4-80GB", "nvidia-l4": "L4", "nvidia-h100-80gb": "H100-SXM-80GB",
    "nvidia-h100-mega-80gb": "H100-SXM-80GB", "nvidia-h200-141gb": "H200-141GB", "nvidia-b200": "B200-180GB",
    "nvidia-gb200": "GB200",
}
_PREFIXES = lazy_pattern(r"^(nvidia|tesla|geforce|amd|instinct)[\s_\-]+", re.I)
# (?<!...) before each run: a search starts a run of separators (or digits) at its first character only, not at
# every character inside it, each start rescanning the rest (n^2 / 2 steps over a label of spaces)
_SUFFIXES = lazy_pattern(r"(?<![\s_\-])[\s_\-]+(shared|hbm3e?|hbm2e?|sxm[0-9]?|pcie|nvl|[0-9]+gb)$", re.I)
_MEMORY = lazy_pattern(r"(?<!\d)(\d+)\s*GB", re.I)
MAX_LABEL = 256  # node labels are at most 63 characters (Kubernetes), GPU names a few dozen


def _mig_slice(text: str) -> bool:
    """``re.search(r"-MIG-|mig-[0-9]g", text, re.I)``; ASCII text told by hand (no pattern compiled), other text by the
    pattern (its case-insensitive match knows more letters than ``lower``)."""
    if not text.isascii():
        return re.search(r"-MIG-|mig-[0-9]g", text, re.I) is not None
    low = text.lower()
    if "-mig-" in low:
        return True
    at = low.find("mig-")
    while at >= 0:
        if low[at + 4:at + 5].isdigit() and low[at + 5:at + 6] == "g":
            return True
        at = low.find("mig-", at + 1)
    return False


def gpu_for_label(label: str, catalog: Iterable[GPU]) -> GPU:
    """The catalog GPU a node label (or a kvplan name) designates; UsageError naming the label when none."""
    gpus = tuple(catalog)
    text = str(label).strip()
    if len(text) > MAX_LABEL:
        raise UsageError(f"GPU label '{text[:40]}...' ({len(text):,} characters) is longer than any GPU name")
    if _mig_slice(text):
        raise UsageError(f"GPU label '{text}' is a MIG slice: kvplan plans whole GPUs (give --gpu-memory "
                         "with the slice's memory via a kvplan deployment file)")
    first_error: UsageError | None = None
    if text:  # the label as written, the first candidate below: where it names a GPU, no pattern is compiled
        try:
            return find_gpu(text, gpus)
        except UsageError as exc:
            first_error = exc
    candidates = [text, _GKE.get(text.lower(), "")]
    stripped = text
    for _ in range(4):  # NVIDIA-H100-80GB-HBM3-SHARED -> H100-80GB-HBM3 -> H100-80GB -> H100
        if stripped.upper().endswith("-SHARED"):
            stripped = stripped[: -len("-SHARED")]
            candidates.append(stripped)
        bare = _PREFIXES.sub("", stripped)
        candidates.append(bare)
        shorter = _SUFFIXES.sub("", bare)
        if shorter == bare:
            break
        candidates.append(shorter)
        stripped = shorter
    for name in dict.fromkeys(c for c in candidates if c):
        if name == text:
            continue  # tried above
        try:
            gpu = find_gpu(name, gpus)
        except UsageError as exc:
            first_error = first_error or exc
            continue
        if name != text and _loses_memory_size(text, gpu):
            continue
        return gpu
    raise UsageError(f"unknown GPU label '{text}'" + (str(first_error).split(f"'{text}'", 1)[-1]
                                                      if first_error else ""))


def _loses_memory_size(label: str, gpu: GPU) -> bool:
    """True when the label names a memory size (80GB) the matched GPU does not have: a stripped suffix
    must not turn an A100-40GB label into some other size."""
    m = _MEMORY.search(label)
    if not m or gpu.marketing_memory_gb is None:
        return False
    size = int(m.group(1))
    return abs(size - gpu.marketing_memory_gb) > 2 and not re.search(r"GH200|480GB|120GB", label, re.I)
