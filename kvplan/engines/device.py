"""A GPU shared with other processes: what one engine takes of it and whether it starts (``kvplan.share``).

Engines take memory in turn: each starts on what the ones before it left. ``Engine.device_share`` says, by the
engine's own rule (``engines/<engine>/device.py``), how much of the GPU this deployment holds once started and,
where it would not start beside ``used_bytes`` held by others, why. The engine's budget reads the same
``Settings.device_used_bytes`` (some engines size the KV cache from the memory free at start, so others shrink it).
"""

from __future__ import annotations

from kvplan.record import dataclass


@dataclass(frozen=True)
class DeviceShare:
    takes_bytes: int
    """Memory one GPU of this deployment holds once its engine has started (what the next one no longer finds)."""
    refusal: str = ""
    """Why the engine does not start beside ``used_bytes`` ("" where it starts; the KV cache's own fit is the
    plan's ``fits``)."""
    notes: tuple[str, ...] = ()


def gib(n: float) -> str:
    return f"{n / (1 << 30):.2f} GiB"
