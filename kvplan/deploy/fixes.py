"""The smallest changes that make a deployment that does not fit start, each one checked by planning it.

Tried one at a time, each from the deployment as given: the longest ``max-model-len`` that fits (what vLLM
itself suggests when it refuses), an fp8 KV cache (where the engine has one and the cache is not already
quantized), a larger tensor-parallel size (powers of two up to a node), and the smallest larger GPU of the
same vendor. A change is offered only where the plan made with it fits; it is written as the engine's own
flag (``ServeFlags.flags``: the first flag naming the setting), so a literal command gets it ready to paste.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvplan.errors import KvplanError
from kvplan.record import dataclass

NODE_TP = 8


@dataclass(frozen=True)
class Fix:
    setting: str
    """The setting changed: max_model_len, kv_cache_dtype, tp or gpu."""
    value: Any
    flag: str
    """The engine's flag for it ('' for the GPU, which is no flag)."""
    kv_cache_tokens: int
    max_concurrency: float
    why: str
    command: str = ""
    """A literal command with the change made (``kvplan check -- <command>``), ready to paste; else ''."""

    @property
    def change(self) -> str:
        return f"{self.flag} {self.value}" if self.flag else f"GPU {self.value}"

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "value": self.value, "flag": self.flag, "change": self.change,
                "kv_cache_tokens": self.kv_cache_tokens, "max_concurrency": round(self.max_concurrency, 4),
                "why": self.why, **({"command": self.command} if self.command else {})}


def engine_flag(serve: Any, setting: str) -> str:
    """The engine's own flag for a kvplan setting (its first spelling), or ''."""
    if serve is None:
        return ""
    return next((flag for flag, name in serve.flags if name == setting and flag.startswith("--")), "")


def fixes(plan: Any, run: Callable[..., Any], serve: Any, tp: int, gpu: Any,
          too_small: Callable[[Any, int], bool] | None = None) -> list[Fix]:
    """The changes that make ``plan`` fit, each planned by ``run(**change)``. ``too_small(p, total_bytes)``: whether
    a GPU of that memory surely does not fit, whatever the KV dtype (``Engine.weights_overflow``), ``p`` the
    larger-GPU search's latest plan (None: the deployment's own): a change it rules out is not planned, which gives
    the same answer as planning it."""
    found: list[Fix] = []
    planned: list[Any] = []

    def attempt(setting: str, value: Any, why: str, **change: Any) -> bool:
        try:
            p = run(**change)
        except KvplanError:
            return False
        planned.append(p)
        if not p.fits:
            return False
        flag = "" if setting == "gpu" else engine_flag(serve, setting)
        if setting != "gpu" and not flag:
            return False  # no flag to write it with
        found.append(Fix(setting, value, flag, p.kv_cache_tokens, p.max_concurrency, why))
        return True

    if 0 < plan.max_model_len_fit < plan.max_model_len:
        attempt("max_model_len", plan.max_model_len_fit, "the longest request that fits",
                max_model_len=plan.max_model_len_fit)
    if serve is not None and not plan.kv_dtype.startswith(("fp8", "int", "nvfp4", "q")) and not (
            too_small is not None and too_small(None, plan.gpu_total_bytes)):
        attempt("kv_cache_dtype", _fp8_value(serve), "an fp8 KV cache: half the bytes per token", kv_dtype="fp8")
    larger = tp * 2
    while larger <= NODE_TP:
        if attempt("tp", larger, f"tensor parallelism over {larger} GPUs: weights and KV split further", tp=larger):
            break
        larger *= 2
    if gpu is not None:
        from kvplan.hardware import load_catalog

        # a device whose memory is the host's too (GB10) is no larger GPU to serve on: its free memory is the OS's
        bigger = sorted((g for g in load_catalog(None) if g.vendor == gpu.vendor and not g.unified_memory and
                         g.memory_bytes > gpu.memory_bytes), key=lambda g: (g.memory_bytes, -(g.bandwidth or 0), g.name))
        planned.clear()  # the search's own plans: only the GPU differs from one to the next
        for g in bigger:
            if too_small is not None and too_small(planned[-1] if planned else None, g.memory_bytes):
                continue
            if attempt("gpu", g.name, f"{g.memory_bytes / (1 << 30):.0f} GiB per GPU", gpu=g, gpu_memory=None):
                break
    return found


def _fp8_value(serve: Any) -> str:
    """The value the engine's own fp8 flag takes (``ServeFlags.fp8_kv_flag``: '--kv-cache-dtype fp8_e4m3')."""
    words = str(serve.fp8_kv_flag).split()
    return words[-1] if len(words) == 2 and words[0].startswith("--") else "fp8"


def apply(command: list[str], fix: Fix) -> list[str]:
    """A literal command with the fix: the flag's value replaced where the command has it, added otherwise."""
    if not fix.flag:
        return list(command)
    out = list(command)
    for i, word in enumerate(out):
        if word == fix.flag and i + 1 < len(out):
            out[i + 1] = str(fix.value)
            return out
        if word.startswith(fix.flag + "="):
            out[i] = f"{fix.flag}={fix.value}"
            return out
    return [*out, fix.flag, str(fix.value)]
